/** Shared helpers for the inject-based protocol tests: app builder, POST helper, modern `_meta` and SSE parsing. */
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { MetaKey } from '../../lib/protocol/era.js'

export const MODERN = '2026-07-28'
export const MCP_PATH = '/mcp'

/** The per-request `_meta` keys of 2026-07-28, as the library names them. */
export const META = MetaKey

export const SERVER_INFO = { name: 'test-server', version: '9.9.9' }

/** Anything with `teardown`, so helpers need not depend on tap's types. */
export interface Teardown {
  teardown: (fn: () => unknown) => void
}

/** A fresh Fastify app with the plugin registered, `setup` run on it, ready, and closed at the end of the test. */
export async function buildApp (t: Teardown, options: McpCancellationOptions = {},
  setup?: (app: FastifyInstance) => void | Promise<void>): Promise<FastifyInstance> {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, { serverInfo: SERVER_INFO, ...options })
  if (setup !== undefined) await setup(app)
  await app.ready()
  return app
}

export type Headers = Record<string, string | undefined>

/** Default request headers of a well-behaved client; pass `undefined` to drop one. */
export const DEFAULT_HEADERS: Headers = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream'
}

/** POSTs `body` (JSON-encoded unless it is already a string or a Buffer) to the MCP endpoint. */
export async function post (app: FastifyInstance, body: unknown, headers: Headers = {},
  url = MCP_PATH): Promise<LightMyRequestResponse> {
  const merged: Record<string, string> = {}
  for (const [key, value] of Object.entries({ ...DEFAULT_HEADERS, ...headers })) {
    if (value !== undefined) merged[key] = value
  }
  const payload = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body)
  return await app.inject({ method: 'POST', url, headers: merged, payload })
}

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

const NAME_FIELDS: Record<string, string> = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' }

export interface ModernRequestOptions {
  id?: unknown
  meta?: Record<string, unknown>
  headers?: Headers
}

/** POSTs a valid modern request: `_meta`, matching headers (Mcp-Name from params.name / params.uri) and an id. */
export async function postModern (app: FastifyInstance, method: string, params: Record<string, unknown> = {},
  options: ModernRequestOptions = {}): Promise<LightMyRequestResponse> {
  const field = NAME_FIELDS[method]
  const name = field === undefined ? undefined : params[field]
  const body = {
    jsonrpc: '2.0',
    id: 'id' in options ? options.id : 1,
    method,
    params: { ...params, _meta: modernMeta(options.meta) }
  }
  return await post(app, body, { ...modernHeaders(method, typeof name === 'string' ? name : undefined), ...options.headers })
}

/** POSTs a legacy request (no `_meta` claim), with `MCP-Protocol-Version: 2025-11-25` unless overridden. */
export async function postLegacy (app: FastifyInstance, method: string, params?: Record<string, unknown>,
  options: { id?: unknown, headers?: Headers } = {}): Promise<LightMyRequestResponse> {
  const body: Record<string, unknown> = { jsonrpc: '2.0', id: 'id' in options ? options.id : 1, method }
  if (params !== undefined) body.params = params
  return await post(app, body, { 'mcp-protocol-version': '2025-11-25', ...options.headers })
}

export interface JsonRpcMessage {
  jsonrpc: string
  id?: unknown
  method?: string
  params?: Record<string, any>
  result?: any
  error?: { code: number, message: string, data?: any }
}

/** The JSON body of a response (throws if it is not JSON). */
export function json (response: LightMyRequestResponse): JsonRpcMessage {
  return JSON.parse(response.payload) as JsonRpcMessage
}

export interface SseFrame {
  event: string | undefined
  data: string
  raw: string
}

/** Splits an SSE body into its events (`event:` and `data:` fields of each blank-line-terminated block). */
export function sseFrames (payload: string): SseFrame[] {
  const frames: SseFrame[] = []
  for (const raw of payload.split('\n\n')) {
    if (raw.trim() === '') continue
    let event: string | undefined
    const data: string[] = []
    for (const line of raw.split('\n')) {
      if (line.startsWith('event:')) event = line.slice(6).trim()
      else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''))
    }
    frames.push({ event, data: data.join('\n'), raw })
  }
  return frames
}

/** The JSON-RPC messages of an SSE body, in order. */
export function sseMessages (response: LightMyRequestResponse): JsonRpcMessage[] {
  return sseFrames(response.payload).map(frame => JSON.parse(frame.data) as JsonRpcMessage)
}

/** All JSON-RPC messages of a response, whether it is one JSON body or an SSE stream. */
export function messages (response: LightMyRequestResponse): JsonRpcMessage[] {
  const type = String(response.headers['content-type'] ?? '')
  if (type.startsWith('text/event-stream')) return sseMessages(response)
  return [json(response)]
}

/** True when the text looks like it carries a JavaScript stack trace. */
export function hasStackTrace (text: string): boolean {
  return /\bat .*\(.*:\d+:\d+\)|\bat (?:file:|node:|\/)\S*:\d+:\d+|"stack"\s*:/.test(text)
}

/** A tool returning its text argument, as the demo `echo`. */
export function echoTool (app: FastifyInstance): void {
  app.mcp.tool<{ text: string }>({
    name: 'echo',
    description: 'Returns its text',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    handler: ({ text }) => ({ content: [{ type: 'text', text }] })
  })
}
