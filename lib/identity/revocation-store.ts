/**
 * Revoked session ids, kept until the session would have expired anyway. The store interface lets a
 * cluster share revocations (Redis); the memory store is the embedded default.
 */
export interface RevocationStore {
  revoke: (id: string, expiresAt: number) => void | Promise<void>
  isRevoked: (id: string) => boolean
}

/**
 * Bounded by `maxEntries`: when full, expired entries go first, then the oldest revocations. An evicted
 * revocation makes its session usable again until it expires, so size the bound to the revocation rate
 * times the session TTL.
 */
export class MemoryRevocationStore implements RevocationStore {
  readonly #expiries = new Map<string, number>()
  readonly #maxEntries: number

  constructor (maxEntries = 100_000) {
    this.#maxEntries = maxEntries
  }

  revoke (id: string, expiresAt: number): void {
    // A revocation already held (published again, or scanned after being written back) takes no room.
    if (!this.#expiries.has(id) && this.#expiries.size >= this.#maxEntries) this.#makeRoom()
    this.#expiries.set(id, expiresAt)
  }

  /** The revocations still in force, oldest first, as `[id, expiresAt]`: what a cluster store writes back. */
  * revoked (now = Date.now()): Generator<[string, number]> {
    for (const entry of this.#expiries) {
      if (entry[1] > now) yield entry
    }
  }

  isRevoked (id: string): boolean {
    const expiresAt = this.#expiries.get(id)
    if (expiresAt === undefined) return false
    if (expiresAt > Date.now()) return true
    this.#expiries.delete(id)
    return false
  }

  #makeRoom (): void {
    const now = Date.now()
    for (const [id, expiresAt] of this.#expiries) {
      if (expiresAt <= now) this.#expiries.delete(id)
    }
    // Still full: drop the oldest twentieth in one pass, so a flood pays the scan once per batch.
    let excess = this.#expiries.size - this.#maxEntries + Math.max(1, Math.floor(this.#maxEntries / 20))
    for (const id of this.#expiries.keys()) {
      if (excess-- <= 0) break
      this.#expiries.delete(id)
    }
  }
}
