import type { RedisBus, RedisConnection } from '../cluster/redis-bus.js'
import { SubscriptionChanges } from './subscription-changes.js'
import type { SubscribeOutcome, SubscriptionChange, SubscriptionStore } from './subscription-store.js'

/** The channel every node announces its changes on. */
const CHANNEL = 'subscriptions'

/** KEYS: the session's set. ARGV: uri, expiresAt, maxSubscriptionsPerSession. The bound checked and kept in one step. */
const SUBSCRIBE = `
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 'present' end
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 'full' end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 'added'`

/** KEYS: the claim. ARGV: holder, leaseMs. Its holder claiming again extends it. */
const CLAIM = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0`

/**
 * KEYS: claims. ARGV: leaseMs, then each claim's holder. Per claim 1 when it is the holder's (extended,
 * or taken again when nobody held it), 0 when another holder has it.
 */
const RENEW = `
local held = {}
for i, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  if holder == ARGV[i + 1] then
    redis.call('PEXPIRE', key, ARGV[1])
    held[i] = 1
  elseif not holder then
    redis.call('SET', key, ARGV[i + 1], 'PX', ARGV[1])
    held[i] = 1
  else
    held[i] = 0
  end
end
return held`

/** KEYS: the claim. ARGV: holder. Another holder's claim is left alone. */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0`

export interface RedisSubscriptionStoreOptions {
  /** Subscriptions one session may hold, across the cluster. */
  maxSubscriptionsPerSession: number
}

/** A change published by another node, or undefined when the message is not one. */
function changeOf (message: Record<string, unknown>): SubscriptionChange | undefined {
  const { session, uri, subscribed } = message
  if (typeof session !== 'string' || typeof subscribed !== 'boolean') return undefined
  // A whole session's drop (no uri) is only ever an unsubscribe.
  if (uri === undefined) return subscribed ? undefined : { session, uri, subscribed }
  return typeof uri === 'string' ? { session, uri, subscribed } : undefined
}

/**
 * Legacy sessions' subscriptions and stream claims shared by the cluster, so a subscribe POSTed to
 * one node is honoured by the stream another node holds. Each session's subscriptions are one Redis
 * set (`subs:<session>`) that Redis expires at the session's `expiresAt`; a stream's claim is one key
 * (`stream:<session>`) holding its holder, expiring after its lease. A change is announced on the
 * `subscriptions` channel once Redis has it and before the call resolves: Redis delivers a subscriber
 * connection's messages in order, so the node holding the stream applies the change before any event
 * published after it. The bus never hands a node its own messages: this node's handlers are called
 * directly.
 *
 * While Redis is away every method rejects, and nothing is queued (lib/cluster/redis-bus.ts
 * PUBLISHER_OPTIONS): the caller answers a subscribe with an error, and falls back to its own check
 * for a claim.
 */
export class RedisSubscriptionStore implements SubscriptionStore {
  readonly #bus: RedisBus
  readonly #options: RedisSubscriptionStoreOptions
  readonly #changes = new SubscriptionChanges()

  constructor (bus: RedisBus, options: RedisSubscriptionStoreOptions) {
    this.#bus = bus
    this.#options = options
    bus.subscribe(CHANNEL, message => {
      const change = changeOf(message)
      if (change !== undefined) this.#changes.announce(change)
    })
  }

  async subscribe (session: string, uri: string, expiresAt: number): Promise<SubscribeOutcome> {
    const outcome = await this.#redis().eval(SUBSCRIBE, 1, this.#subscriptions(session), uri, expiresAt, this.#options.maxSubscriptionsPerSession) as SubscribeOutcome
    if (outcome === 'added') await this.#announce({ session, uri, subscribed: true })
    return outcome
  }

  async unsubscribe (session: string, uri: string): Promise<void> {
    if (await this.#redis().srem(this.#subscriptions(session), uri) === 1) await this.#announce({ session, uri, subscribed: false })
  }

  async list (session: string): Promise<string[]> {
    return await this.#redis().smembers(this.#subscriptions(session))
  }

  async drop (session: string): Promise<void> {
    await this.#redis().del(this.#subscriptions(session), this.#claim(session))
    await this.#announce({ session, uri: undefined, subscribed: false })
  }

  async claim (session: string, holder: string, leaseMs: number): Promise<boolean> {
    return await this.#redis().eval(CLAIM, 1, this.#claim(session), holder, leaseMs) === 1
  }

  async renew (claims: ReadonlyArray<{ session: string, holder: string }>, leaseMs: number): Promise<boolean[]> {
    if (claims.length === 0) return []
    const held = await this.#redis().eval(RENEW, claims.length, ...claims.map(({ session }) => this.#claim(session)),
      leaseMs, ...claims.map(({ holder }) => holder)) as number[]
    return held.map(state => state === 1)
  }

  async release (session: string, holder: string): Promise<void> {
    await this.#redis().eval(RELEASE, 1, this.#claim(session), holder)
  }

  onReady (handler: () => void): void {
    this.#bus.onReady(handler)
  }

  onChange (handler: (change: SubscriptionChange) => void): void {
    this.#changes.add(handler)
  }

  /** The connection for a command; throws (the method rejects) while Redis is away, rather than deciding on stale state. */
  #redis (): RedisConnection {
    if (!this.#bus.ready) throw new Error('Redis is unavailable: legacy subscriptions and stream claims are shared through it')
    return this.#bus.redis
  }

  /** Tells the other nodes (the message reaches Redis before the caller goes on), then this one. */
  async #announce (change: SubscriptionChange): Promise<void> {
    const { session, uri, subscribed } = change
    await this.#bus.publish(CHANNEL, uri === undefined ? { session, subscribed } : { session, uri, subscribed })
    this.#changes.announce(change)
  }

  // One group: `drop` deletes a session's two keys at once, and RENEW reads many sessions' claims.
  #subscriptions (session: string): string { return this.#bus.key(`subs:${session}`, 'subscriptions') }
  #claim (session: string): string { return this.#bus.key(`stream:${session}`, 'subscriptions') }
}
