/**
 * What an MCP client sends and what it reads back, however it travels (`fastify.inject` or a socket):
 * the era headers and the 2026-07-28 `_meta`, the request bodies the tests send most, and readers of
 * the answers (SSE frames, the JSON-RPC response shape, stack traces that must never leak).
 */
import { MetaKey } from '../../lib/protocol/era.js'
import type { RequestId } from '../../lib/index.js'

export const MODERN = '2026-07-28'

/** The per-request `_meta` keys of 2026-07-28, as the library names them. */
export const META = MetaKey

/** Request headers; `undefined` drops one (from the defaults it is merged with). */
export type Headers = Record<string, string | undefined>

/** Default request headers of a well-behaved client. */
export const DEFAULT_HEADERS: Record<string, string> = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream'
}

/** The header that puts a request in the legacy era (2025-11-25). */
export const LEGACY: Record<string, string> = { 'mcp-protocol-version': '2025-11-25' }

/** Every header of a well-behaved legacy-era POST. */
export const LEGACY_HEADERS: Record<string, string> = { ...DEFAULT_HEADERS, ...LEGACY }

/** The per-request `_meta` of 2026-07-28, with `extra` merged in (`undefined` values removed). */
export function modernMeta (extra: Record<string, unknown> = {}): Record<string, unknown> {
  const meta: Record<string, unknown> = {
    [META.protocolVersion]: MODERN,
    [META.clientCapabilities]: {},
    [META.clientInfo]: { name: 'tap-client', version: '1.0.0' },
    ...extra
  }
  for (const key of Object.keys(meta)) if (meta[key] === undefined) delete meta[key]
  return meta
}

/** The headers a modern request needs: `MCP-Protocol-Version`, `Mcp-Method` and, when given, `Mcp-Name`. */
export function modernHeaders (method: string, name?: string, version = MODERN): Headers {
  const headers: Headers = { 'mcp-protocol-version': version, 'mcp-method': method }
  if (name !== undefined) headers['mcp-name'] = name
  return headers
}

/** A legacy `tools/call` request body (with `_meta.progressToken` when one is given, so the call streams). */
export function toolCall (id: RequestId, name: string, args: Record<string, unknown> = {}, progressToken?: string | number): Record<string, unknown> {
  const params: Record<string, unknown> = { name, arguments: args }
  if (progressToken !== undefined) params._meta = { progressToken }
  return { jsonrpc: '2.0', id, method: 'tools/call', params }
}

/** A `notifications/cancelled` body. */
export function cancelNotification (requestId: unknown, reason?: string): Record<string, unknown> {
  const params: Record<string, unknown> = { requestId }
  if (reason !== undefined) params.reason = reason
  return { jsonrpc: '2.0', method: 'notifications/cancelled', params }
}

/** A legacy `initialize` body. */
export function initializeBody (id: string | number = 1): Record<string, unknown> {
  return {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'tap-client', version: '1.0.0' } }
  }
}

export interface JsonRpcMessage {
  jsonrpc: string
  id?: unknown
  method?: string
  params?: Record<string, any>
  result?: any
  error?: { code: number, message: string, data?: any }
}

export interface SseFrame {
  event: string | undefined
  id: string | undefined
  data: string
  raw: string
}

/** Splits an SSE body into its events (`event:`, `id:` and `data:` fields of each blank-line-terminated block). */
export function sseFrames (payload: string): SseFrame[] {
  const frames: SseFrame[] = []
  for (const raw of payload.split('\n\n')) {
    if (raw.trim() === '') continue
    let event: string | undefined
    let id: string | undefined
    const data: string[] = []
    for (const line of raw.split('\n')) {
      if (line.startsWith('event:')) event = line.slice(6).trim()
      else if (line.startsWith('id:')) id = line.slice(3).trim()
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''))
    }
    frames.push({ event, id, data: data.join('\n'), raw })
  }
  return frames
}

/**
 * The JSON-RPC messages of an SSE body (its text, or an injected response), in order. An event with
 * empty data (a resumable stream's priming event) carries none, as SSE clients skip it.
 */
export function sseMessages (body: string | { payload: string }): JsonRpcMessage[] {
  return sseFrames(typeof body === 'string' ? body : body.payload).filter(frame => frame.data !== '').map(frame => JSON.parse(frame.data) as JsonRpcMessage)
}

/** True when any message is a JSON-RPC response (has `result` or `error`). */
export function hasResponse (messages: readonly JsonRpcMessage[]): boolean {
  return messages.some(message => 'result' in message || 'error' in message)
}

/** True when the text looks like it carries a JavaScript stack trace. */
export function hasStackTrace (text: string): boolean {
  return /\bat .*\(.*:\d+:\d+\)|\bat (?:file:|node:|\/)\S*:\d+:\d+|"stack"\s*:/.test(text)
}

/** What is wrong with a JSON-RPC response object, or undefined when it is well formed. */
export function jsonRpcResponseViolation (message: unknown): string | undefined {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return 'not an object'
  const m = message as Record<string, unknown>
  if (m.jsonrpc !== '2.0') return `jsonrpc is ${JSON.stringify(m.jsonrpc)}`
  const hasResult = 'result' in m
  const hasError = 'error' in m
  if (hasResult === hasError) return 'not exactly one of result and error'
  if ('id' in m && typeof m.id !== 'string' && typeof m.id !== 'number') return `id is ${JSON.stringify(m.id)}`
  if (hasError) {
    const error = m.error as Record<string, unknown> | null
    if (typeof error !== 'object' || error === null) return 'error is not an object'
    if (!Number.isInteger(error.code)) return `error.code is ${JSON.stringify(error.code)}`
    if (typeof error.message !== 'string') return 'error.message is not a string'
  }
  return undefined
}

export interface BareError {
  code: number
  message: string
  data?: unknown
}

/**
 * The error of a transport-level rejection: a well-formed JSON-RPC error response without an id.
 * Throws (with the payload) when the body is anything else, so a test fails with the evidence.
 */
export function bareError (response: { payload: string }): BareError {
  const body = JSON.parse(response.payload) as Record<string, unknown>
  const violation = jsonRpcResponseViolation(body)
  if (violation !== undefined) throw new Error(`not a JSON-RPC response (${violation}): ${response.payload.slice(0, 300)}`)
  if (!('error' in body)) throw new Error(`not an error: ${response.payload.slice(0, 300)}`)
  if ('id' in body) throw new Error(`carries an id: ${response.payload.slice(0, 300)}`)
  return body.error as BareError
}
