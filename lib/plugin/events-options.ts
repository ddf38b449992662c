import { InvalidOptionError } from '../core/errors.js'
import { positiveInteger } from './option-values.js'

/** `events`: server-to-client notifications, on every node (docs/notifications.md). */
export interface EventsOptions {
  /** Listening streams one scope may hold open on a node (listen streams and a session's GET stream). Default 16. */
  maxListenersPerScope?: number | undefined
  /** Listening streams a node holds open in all. Default 10 000. */
  maxListeners?: number | undefined
  /** Resources one legacy session may subscribe to, and one listen may name (`resourceSubscriptions`, `taskIds`). Default 100. */
  maxSubscriptionsPerSession?: number | undefined
  /** Legacy subscriptions a node keeps in memory, every session together (without Redis); over it the largest sessions lose their oldest. Default 100 000. */
  maxSubscriptions?: number | undefined
  /** Longest resource URI accepted in a subscription or an update, in UTF-8 bytes. Default 4 096. */
  maxUriBytes?: number | undefined
  /** Bytes a listening stream may have waiting for its socket; a client that reads slower is cut off. Default 1 MiB. */
  maxListenerBufferBytes?: number | undefined
  /** Identical events closer together than this are announced once, at the end of the window. Default 50 ms. */
  coalesceMs?: number | undefined
  /** Events a node announces per second at most (more wait, coalesced; beyond a second's worth they are dropped, counted). Default 1 000. */
  maxEventsPerSecond?: number | undefined
}

export type EventsSettings = Required<{ [K in keyof EventsOptions]: NonNullable<EventsOptions[K]> }> & {
  /** False with `events: false`: nothing listens and the capabilities claim nothing. */
  enabled: boolean
}

/** `true` or omitted: on with the defaults; `false`: off (no listening, capabilities claim none). */
export function resolveEvents (events: unknown): EventsSettings {
  const enabled = events !== false
  if (events !== undefined && typeof events !== 'boolean' && (typeof events !== 'object' || events === null)) {
    throw new InvalidOptionError('events', 'must be a boolean or an object')
  }
  const options: EventsOptions = typeof events === 'object' && events !== null ? events : {}
  return {
    enabled,
    maxListenersPerScope: positiveInteger('events.maxListenersPerScope', options.maxListenersPerScope, 16),
    maxListeners: positiveInteger('events.maxListeners', options.maxListeners, 10_000),
    maxSubscriptionsPerSession: positiveInteger('events.maxSubscriptionsPerSession', options.maxSubscriptionsPerSession, 100),
    maxSubscriptions: positiveInteger('events.maxSubscriptions', options.maxSubscriptions, 100_000),
    maxUriBytes: positiveInteger('events.maxUriBytes', options.maxUriBytes, 4096),
    maxListenerBufferBytes: positiveInteger('events.maxListenerBufferBytes', options.maxListenerBufferBytes, 1_048_576),
    coalesceMs: positiveInteger('events.coalesceMs', options.coalesceMs, 50),
    maxEventsPerSecond: positiveInteger('events.maxEventsPerSecond', options.maxEventsPerSecond, 1000)
  }
}
