import { SubscriptionChanges } from './subscription-changes.js'
import type { SubscribeOutcome, SubscriptionChange, SubscriptionStore } from './subscription-store.js'

export interface MemorySubscriptionStoreOptions {
  /** Subscriptions one session may hold: the only bound that refuses. */
  maxSubscriptionsPerSession: number
  /** Subscriptions held in all; reaching it drops a batch, expired sessions first, then the largest sessions' oldest. */
  maxSubscriptions: number
}

interface Session {
  /** Each URI with its age (the store's running count of subscriptions when it was added). */
  uris: Map<string, number>
  expiresAt: number
}

interface Claim {
  holder: string
  until: number
}

/**
 * Legacy sessions' subscriptions and stream claims in this process. Every bound is per session first:
 * the total (`maxSubscriptions`) never refuses, so a flood of sessions, none over its own bound, cannot
 * deny a subscription to everyone else; it costs the largest sessions their oldest subscriptions
 * instead, and their streams are told (`onChange`, `subscribed: false`). A session's subscriptions go
 * at its `expiresAt`, checked when the session is next touched and whenever the store makes room;
 * that is not announced, as Redis announces no key it expires (the streams of an expired session end
 * by its expiry, lib/events/listeners.ts).
 */
export class MemorySubscriptionStore implements SubscriptionStore {
  readonly #sessions = new Map<string, Session>()
  /** In the order they were last set: with one lease length, the lapsed ones come first. */
  readonly #claims = new Map<string, Claim>()
  readonly #changes = new SubscriptionChanges()
  readonly #options: MemorySubscriptionStoreOptions
  #subscriptions = 0
  /** Ages subscriptions across sessions: `Date.now()` would tie within a millisecond. */
  #added = 0

  constructor (options: MemorySubscriptionStoreOptions) {
    this.#options = options
  }

  /** Claims held, lapsed ones not yet swept included. */
  get claims (): number {
    return this.#claims.size
  }

  async subscribe (session: string, uri: string, expiresAt: number): Promise<SubscribeOutcome> {
    const held = this.#live(session)
    if (held?.uris.has(uri) === true) return 'present'
    if ((held?.uris.size ?? 0) >= this.#options.maxSubscriptionsPerSession) return 'full'
    if (this.#subscriptions >= this.#options.maxSubscriptions) this.#makeRoom()
    // Read again: making room may have emptied this very session, the largest.
    let entry = this.#sessions.get(session)
    if (entry === undefined) {
      entry = { uris: new Map(), expiresAt }
      this.#sessions.set(session, entry)
    }
    entry.expiresAt = expiresAt
    entry.uris.set(uri, this.#added++)
    this.#subscriptions++
    this.#changes.announce({ session, uri, subscribed: true })
    return 'added'
  }

  async unsubscribe (session: string, uri: string): Promise<void> {
    const entry = this.#live(session)
    if (entry !== undefined && entry.uris.has(uri)) this.#remove(session, entry, uri)
  }

  async list (session: string): Promise<string[]> {
    return [...(this.#live(session)?.uris.keys() ?? [])]
  }

  async drop (session: string): Promise<void> {
    this.#forget(session)
    this.#claims.delete(session)
    this.#changes.announce({ session, uri: undefined, subscribed: false })
  }

  async claim (session: string, holder: string, leaseMs: number): Promise<boolean> {
    const now = Date.now()
    this.#sweepClaims(now)
    const held = this.#claims.get(session)
    if (held !== undefined && held.until > now && held.holder !== holder) return false
    this.#setClaim(session, holder, now + leaseMs)
    return true
  }

  async renew (claims: ReadonlyArray<{ session: string, holder: string }>, leaseMs: number): Promise<boolean[]> {
    const now = Date.now()
    return claims.map(({ session, holder }) => {
      const held = this.#claims.get(session)
      if (held !== undefined && held.holder !== holder && held.until > now) return false
      this.#setClaim(session, holder, now + leaseMs)
      return true
    })
  }

  async release (session: string, holder: string): Promise<void> {
    if (this.#claims.get(session)?.holder === holder) this.#claims.delete(session)
  }

  onChange (handler: (change: SubscriptionChange) => void): void {
    this.#changes.add(handler)
  }

  /** The session's entry, unless it has expired (then it is forgotten). */
  #live (session: string): Session | undefined {
    const entry = this.#sessions.get(session)
    if (entry === undefined || entry.expiresAt > Date.now()) return entry
    this.#forget(session)
    return undefined
  }

  /**
   * Drops the expired sessions; if that is not room enough, a batch of max(1, maxSubscriptions/20)
   * subscriptions more: largest session first, oldest first within it, spilling into the next
   * largest; sessions of equal size are taken together by age. One scan per batch of subscribes
   * (lib/lifecycle/memory-cancellation-store.ts evicts the same way).
   */
  #makeRoom (): void {
    const now = Date.now()
    for (const [session, entry] of this.#sessions) {
      if (entry.expiresAt <= now) this.#forget(session)
    }
    const { maxSubscriptions } = this.#options
    if (this.#subscriptions < maxSubscriptions) return
    const excess = this.#subscriptions - maxSubscriptions + Math.max(1, Math.floor(maxSubscriptions / 20))
    const victims = Array.from(this.#sessions, ([session, entry]) =>
      Array.from(entry.uris, ([uri, age]) => ({ session, entry, uri, age, size: entry.uris.size }))).flat()
      .sort((a, b) => (b.size - a.size) || (a.age - b.age))
      .slice(0, excess)
    for (const { session, entry, uri } of victims) this.#remove(session, entry, uri)
  }

  #remove (session: string, entry: Session, uri: string): void {
    entry.uris.delete(uri)
    this.#subscriptions--
    if (entry.uris.size === 0) this.#sessions.delete(session)
    this.#changes.announce({ session, uri, subscribed: false })
  }

  #forget (session: string): void {
    const entry = this.#sessions.get(session)
    if (entry === undefined) return
    this.#sessions.delete(session)
    this.#subscriptions -= entry.uris.size
  }

  #setClaim (session: string, holder: string, until: number): void {
    this.#claims.delete(session)
    this.#claims.set(session, { holder, until })
  }

  /** Forgets the lapsed claims at the front: one nobody releases or claims again must not stay forever. */
  #sweepClaims (now: number): void {
    for (const [session, { until }] of this.#claims) {
      if (until > now) return
      this.#claims.delete(session)
    }
  }
}
