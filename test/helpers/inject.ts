/**
 * The protocol tests' way in: a fresh app with the plugin, and POSTs to its MCP endpoint through
 * `fastify.inject` (no socket: for rules about what is answered, not about disconnects or timing).
 */
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { DEFAULT_HEADERS, LEGACY, modernHeaders, modernMeta, sseMessages, type Headers, type JsonRpcMessage } from './jsonrpc.js'
import type { Teardown } from './teardown.js'

export const MCP_PATH = '/mcp'

export const SERVER_INFO = { name: 'test-server', version: '9.9.9' }

/** Registers the plugin with `options` (checked by nothing: a test may pass what a user must not) on a fresh app and waits for it, so register-time errors surface. */
export async function registerPlugin (t: Teardown, options: unknown): Promise<FastifyInstance> {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, options as McpCancellationOptions)
  await app.ready()
  return app
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

/** POSTs `body` (JSON-encoded unless it is already a string or a Buffer) to the MCP endpoint, with DEFAULT_HEADERS and `headers`. */
export async function post (app: FastifyInstance, body: unknown, headers: Headers = {},
  url = MCP_PATH): Promise<LightMyRequestResponse> {
  const merged: Record<string, string> = {}
  for (const [key, value] of Object.entries({ ...DEFAULT_HEADERS, ...headers })) {
    if (value !== undefined) merged[key] = value
  }
  const payload = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body)
  return await app.inject({ method: 'POST', url, headers: merged, payload })
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
  return await post(app, body, { ...LEGACY, ...options.headers })
}

/** The JSON body of a response (throws if it is not JSON). */
export function json (response: LightMyRequestResponse): JsonRpcMessage {
  return JSON.parse(response.payload) as JsonRpcMessage
}

/** All JSON-RPC messages of a response, whether it is one JSON body or an SSE stream. */
export function messages (response: LightMyRequestResponse): JsonRpcMessage[] {
  const type = String(response.headers['content-type'] ?? '')
  if (type.startsWith('text/event-stream')) return sseMessages(response)
  return [json(response)]
}
