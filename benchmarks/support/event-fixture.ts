/**
 * What the servers of events.ts (servers/event-node.ts, servers/plugin-listening.ts) are configured
 * with and what the benchmark sends them, in one place: the wire of a 2026-07-28 `subscriptions/listen`
 * and of a legacy session, as docs/notifications.md describes them.
 */
import type { EventsOptions } from '../../lib/index.js'

/**
 * The listener bounds out of the way: every stream of the benchmark comes from one scope (127.0.0.1,
 * anonymous), and a fan-out holds a thousand of them or more.
 */
export const MANY_LISTENERS: EventsOptions = { maxListenersPerScope: 20_000, maxListeners: 20_000 }

/** The event nodes' `events.coalesceMs`: shorter than the gap between two events of the latency part. */
export const EVENT_COALESCE_MS = 1

/** `sessions.secret` of every event node (at least 32 bytes; fixed, so a run is reproducible). */
export const EVENT_SESSION_SECRET = 'bench-event-node-session-secret-0123456789'

/**
 * Every URI of the fan-out's updates is under it (`bench://fanout/<n>`), and every fan-out listener
 * subscribes to it: a sub-resource matches (docs/notifications.md), and distinct URIs are never coalesced.
 */
export const FANOUT_PREFIX = 'bench://fanout/'

export const TOOLS_CHANGED = 'notifications/tools/list_changed'
export const RESOURCE_UPDATED = 'notifications/resources/updated'
export const ACKNOWLEDGED = 'notifications/subscriptions/acknowledged'

const MODERN = '2026-07-28'
const LEGACY = '2025-11-25'
const ACCEPT = 'application/json, text/event-stream'
const CLIENT = { name: 'bench-events', version: '1.0.0' }

export interface StreamRequest {
  method: 'GET' | 'POST'
  headers: Record<string, string>
  body: string | undefined
}

/** A 2026-07-28 `subscriptions/listen` of `id` with `filter` (its `notifications`). */
export function listenRequest (id: string, filter: Record<string, unknown>): StreamRequest {
  return {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT, 'mcp-protocol-version': MODERN, 'mcp-method': 'subscriptions/listen' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'subscriptions/listen',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': MODERN,
          'io.modelcontextprotocol/clientCapabilities': {},
          'io.modelcontextprotocol/clientInfo': CLIENT
        },
        notifications: filter
      }
    })
  }
}

/** The GET that opens a legacy session's standalone stream. */
export function sessionStreamRequest (session: string): StreamRequest {
  return { method: 'GET', headers: { accept: 'text/event-stream', 'mcp-protocol-version': LEGACY, 'mcp-session-id': session }, body: undefined }
}

/** A legacy POST (2025-11-25) of `message`, in `session` when given. */
export function legacyPost (message: Record<string, unknown>, session?: string): StreamRequest {
  return {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: ACCEPT,
      'mcp-protocol-version': LEGACY,
      ...(session === undefined ? {} : { 'mcp-session-id': session })
    },
    body: JSON.stringify({ jsonrpc: '2.0', ...message })
  }
}

/** The `initialize` that starts a legacy session (the server answers its id in `Mcp-Session-Id`). */
export const INITIALIZE = { id: 'init', method: 'initialize', params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: CLIENT } }

export const INITIALIZED = { method: 'notifications/initialized' }

/** One request on a fresh connection: status, headers and body. */
export async function send (url: URL, request: StreamRequest): Promise<{ status: number, headers: Headers, body: string }> {
  const response = await fetch(url, { method: request.method, headers: request.headers, body: request.body })
  return { status: response.status, headers: response.headers, body: await response.text() }
}

/** A legacy session started on `url`: initialize, then notifications/initialized; its id. */
export async function startSession (url: URL): Promise<string> {
  const initialized = await send(url, legacyPost(INITIALIZE))
  const session = initialized.headers.get('mcp-session-id')
  if (initialized.status !== 200 || session === null) throw new Error(`initialize on ${url.host} gave no session: HTTP ${initialized.status} ${initialized.body.slice(0, 300)}`)
  const notified = await send(url, legacyPost(INITIALIZED, session))
  if (notified.status !== 202) throw new Error(`notifications/initialized on ${url.host}: HTTP ${notified.status}, expected 202`)
  return session
}
