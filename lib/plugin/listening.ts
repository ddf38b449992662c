import type { JsonObject } from '../core/jsonrpc.js'
import { ServerEvents } from '../cluster/server-events.js'
import type { Sessions } from '../identity/sessions.js'
import type { RequestObserver } from '../observability/observer.js'
import type { Era } from '../protocol/versions.js'
import { ListenStreams } from '../events/listen-streams.js'
import { Listeners } from '../events/listeners.js'
import { SessionSubscriptions } from '../events/session-subscriptions.js'
import type { McpServer } from '../server/mcp-server.js'
import type { Settings } from './options.js'
import type { Stores } from './stores.js'

/** What serves server-to-client notifications, built from the `events` option. */
export interface Listening {
  events: ServerEvents
  listeners: Listeners
  streams: ListenStreams
  /** Legacy sessions' `resources/subscribe` (with sessions and events). */
  subscriptions: SessionSubscriptions | undefined
  /** Whether each era delivers notifications: the modern one unless `events: false`, the legacy one with sessions too. */
  delivers: Readonly<Record<Era, boolean>>
}

/** `server` is asked per listener (never while building), so the server these serve may be built after them. */
export function createListening (settings: Settings, stores: Stores, observer: RequestObserver,
  sessions: Sessions | undefined, server: () => McpServer): Listening {
  const { events: options } = settings
  const events = new ServerEvents({ ...options, onDropped: () => { observer.eventDropped() } }, stores.bus)
  const task = async (taskId: string, scope: string): Promise<JsonObject | undefined> => await server().tasks.peek(taskId, scope)
  const listeners = new Listeners({
    settings: {
      ...options,
      maxStreamLifetimeMs: settings.maxStreamLifetimeMs,
      serverInfo: settings.serverInfo,
      // As often as a task's node renews its lease: a dead node's task reads failed at most this long after its lease lapsed.
      followedTasksIntervalMs: settings.redis === undefined ? undefined : Math.max(10, Math.floor(settings.taskLeaseMs / 3))
    },
    events,
    observer,
    task,
    subscriptions: stores.subscriptions,
    revoked: id => sessions?.revoked(id) ?? false
  })
  const streams = new ListenStreams({
    listeners,
    limits: { maxSubscriptions: options.maxSubscriptionsPerSession, maxUriBytes: options.maxUriBytes },
    deliverable: era => server().deliverable(era),
    task,
    subscriptions: stores.subscriptions,
    node: stores.node
  })
  const subscriptions = stores.subscriptions === undefined || sessions === undefined
    ? undefined
    : new SessionSubscriptions(stores.subscriptions, options, id => sessions.expiryOf(id))
  return { events, listeners, streams, subscriptions, delivers: { modern: options.enabled, legacy: options.enabled && sessions !== undefined } }
}
