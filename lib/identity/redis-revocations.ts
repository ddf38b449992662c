import type { RedisBus } from '../cancellation/redis-bus.js'
import { MemoryRevocationStore, type RevocationStore } from './revocations.js'

const SCAN_BATCH = 500

/**
 * Session revocations shared by the cluster: a DELETE on any node is applied to its memory store, kept
 * in Redis for the session's remaining lifetime (so nodes that join or reconnect catch up by scanning
 * it) and published to every node's memory store. Verification stays a local, synchronous lookup.
 */
export class RedisRevocationStore implements RevocationStore {
  readonly #memory: MemoryRevocationStore
  readonly #bus: RedisBus

  constructor (memory: MemoryRevocationStore, bus: RedisBus) {
    this.#memory = memory
    this.#bus = bus
    bus.subscribe('revoke', ({ id, expiresAt }) => {
      if (typeof id === 'string' && typeof expiresAt === 'number') memory.revoke(id, expiresAt)
    })
  }

  isRevoked (id: string): boolean {
    return this.#memory.isRevoked(id)
  }

  async revoke (id: string, expiresAt: number): Promise<void> {
    this.#memory.revoke(id, expiresAt)
    this.#bus.publish('revoke', { id, expiresAt })
    if (this.#bus.ready) {
      await this.#bus.redis.set(this.#bus.key(`revoked:${id}`), String(expiresAt), 'PXAT', expiresAt).catch(() => {})
    }
  }

  #caughtUp: (() => void) | undefined
  /** Settles after the first complete catch-up: until then a starting node may not know every revocation. */
  readonly caughtUp = new Promise<void>(resolve => { this.#caughtUp = resolve })

  /** Loads every revocation Redis still holds; the bus calls it whenever the connection becomes ready. */
  async catchUp (): Promise<void> {
    await this.#load()
    this.#caughtUp?.()
  }

  async #load (): Promise<void> {
    const prefix = this.#bus.key('revoked:')
    const stream = this.#bus.redis.scanStream({ match: `${prefix}*`, count: SCAN_BATCH })
    for await (const keys of stream as AsyncIterable<string[]>) {
      if (keys.length === 0) continue
      const expiries = await this.#bus.redis.mget(...keys)
      keys.forEach((key, i) => {
        const expiresAt = Number(expiries[i])
        if (Number.isFinite(expiresAt)) this.#memory.revoke(key.slice(prefix.length), expiresAt)
      })
    }
  }
}
