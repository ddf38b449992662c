import { createHash } from 'node:crypto'

/** What became of a `resources/subscribe`: a new subscription, one the session already had, or refused by the session's bound. */
export type SubscribeOutcome = 'added' | 'present' | 'full'

/** A change to a session's subscriptions, on any node; `uri` undefined: every subscription of the session was dropped. */
export interface SubscriptionChange {
  session: string
  uri: string | undefined
  subscribed: boolean
}

/**
 * What the cluster knows of legacy sessions that listen: the resources each subscribed to
 * (`resources/subscribe`) and the node holding its standalone GET stream. Both are kept no longer
 * than the session lives (`expiresAt`). The memory store serves one node; the Redis store a cluster,
 * so that a subscribe POSTed to one node is honoured by the stream another node holds. `session` is
 * a digest of the session id, never the id itself (it is a credential).
 */
export interface SubscriptionStore {
  /** Resolves once every node's stream of the session honours it; `full` at `maxSubscriptionsPerSession`. */
  subscribe: (session: string, uri: string, expiresAt: number) => Promise<SubscribeOutcome>
  unsubscribe: (session: string, uri: string) => Promise<void>
  /** The session's subscriptions (at most `maxSubscriptionsPerSession`). */
  list: (session: string) => Promise<string[]>
  /** The session ended (DELETE, revocation): its subscriptions and its stream's claim go. */
  drop: (session: string) => Promise<void>
  /**
   * Claims the session's standalone stream for `holder` (one per session in the cluster, as the
   * official SDK's server allows one per session): false when another holder has it. A claim lapses
   * after `leaseMs` unless renewed, so a node that died frees its sessions.
   */
  claim: (session: string, holder: string, leaseMs: number) => Promise<boolean>
  /**
   * Renews the claims this node holds, and takes again those nobody holds (a lease that lapsed during an
   * outage, a Redis that came back empty); resolves to false only where another holder has the session.
   */
  renew: (claims: ReadonlyArray<{ session: string, holder: string }>, leaseMs: number) => Promise<boolean[]>
  /** Releases `holder`'s claim (another holder's is left alone). */
  release: (session: string, holder: string) => Promise<void>
  /** Calls `handler` for every change, made on any node, once it is durable. */
  onChange: (handler: (change: SubscriptionChange) => void) => void
  /** A shared store: calls `handler` each time it is reachable again (claims it lost meanwhile are then taken again). */
  onReady?: (handler: () => void) => void
  close?: () => Promise<void>
}

/** What stores and the bus know a session by: a digest of its id, which is a credential. */
export function sessionKey (sessionId: string): string {
  return createHash('sha256').update(sessionId).digest('base64url').slice(0, 32)
}
