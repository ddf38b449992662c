/**
 * Real listening servers for the cancellation tests (disconnects and cross-request cancels need a
 * socket, not `inject`): the demo app or the bare plugin, plus a `probe` tool that records when and
 * why its `ctx.signal` aborted. Also raw HTTP helpers for asserting exactly what crossed the wire.
 */
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { buildApp as buildDemo, sleepTool, type DemoEnv } from '../../example/app.js'
import mcpCancellation, { RequestCancelledError, type McpCancellationOptions, type RequestId } from '../../lib/index.js'
import { sseFrames, type JsonRpcMessage } from './mcp.js'

export interface Teardown {
  teardown: (fn: () => unknown) => void
}

export const LEGACY_HEADERS: Record<string, string> = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25'
}

/** What the probe tool saw of one call. */
export interface ProbeCall {
  requestId: RequestId
  args: { ms: number, tag?: string }
  startedAt: number
  abortedAt: number | undefined
  /** `RequestCancelledError.reason` of the abort. */
  reason: string | null | undefined
  /** `RequestCancelledError.source` of the abort. */
  source: string | undefined
  /** True when the abort reason was not a `RequestCancelledError`. */
  foreignReason: boolean
  endedAt: number | undefined
}

/** Registers `probe {ms, tag?}`: sends one progress (so a call with a progressToken streams), then waits `ms` on `ctx.signal`. */
export class Probe {
  readonly calls: ProbeCall[] = []

  register (app: FastifyInstance): void {
    app.mcp.tool<{ ms: number, tag?: string }>({
      name: 'probe',
      description: 'Records when and why its signal aborts',
      inputSchema: { type: 'object', properties: { ms: { type: 'integer', minimum: 0 }, tag: { type: 'string' } }, required: ['ms'] },
      handler: async (args, ctx) => {
        const call: ProbeCall = {
          requestId: ctx.requestId, args, startedAt: Date.now(), abortedAt: undefined, reason: undefined, source: undefined, foreignReason: false, endedAt: undefined
        }
        this.calls.push(call)
        ctx.signal.addEventListener('abort', () => {
          call.abortedAt = Date.now()
          const reason: unknown = ctx.signal.reason
          if (reason instanceof RequestCancelledError) {
            call.reason = reason.reason
            call.source = reason.source
          } else {
            call.foreignReason = true
          }
        }, { once: true })
        try {
          await ctx.progress(0, args.ms)
          await sleep(args.ms, undefined, { signal: ctx.signal })
        } finally {
          call.endedAt = Date.now()
        }
        return { content: [{ type: 'text', text: `probe ${args.ms}` }] }
      }
    })
  }

  /** The calls tagged `tag`. */
  tagged (tag: string): ProbeCall[] {
    return this.calls.filter(call => call.args.tag === tag)
  }
}

/** The demo `sleep` tool (example/app.ts), for apps built from the bare plugin. */
export function registerSleep (app: FastifyInstance): void {
  app.mcp.tool(sleepTool)
}

export interface Listening {
  app: FastifyInstance
  url: URL
  probe: Probe
}

async function listen (t: Teardown, app: FastifyInstance, probe: Probe): Promise<Listening> {
  t.teardown(() => app.close())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as AddressInfo
  return { app, url: new URL(`http://127.0.0.1:${port}/mcp`), probe }
}

/** The demo server (example/app.ts, with its real `sleep`) plus the probe, on 127.0.0.1:0. */
export async function listenDemoWithProbe (t: Teardown, env: DemoEnv = {}, fastifyOptions: FastifyServerOptions = {}): Promise<Listening> {
  const app = await buildDemo(env, fastifyOptions)
  const probe = new Probe()
  probe.register(app)
  return await listen(t, app, probe)
}

/** The bare plugin with `options`, the demo's `sleep`, the probe and whatever `setup` adds, on 127.0.0.1:0. */
export async function listenPlugin (t: Teardown, options: McpCancellationOptions = {},
  fastifyOptions: FastifyServerOptions = {}, setup?: (app: FastifyInstance) => void): Promise<Listening> {
  const app = Fastify({ logger: false, ...fastifyOptions })
  await app.register(mcpCancellation, { serverInfo: { name: 'cancellation-tests', version: '1.0.0' }, ...options })
  registerSleep(app)
  const probe = new Probe()
  probe.register(app)
  setup?.(app)
  return await listen(t, app, probe)
}

/** Registers `ignore-cancel {ms}`: waits `ms` whatever happens (it keeps its in-flight row until it ends). */
export function registerIgnoreCancel (app: FastifyInstance): void {
  app.mcp.tool<{ ms: number }>({
    name: 'ignore-cancel',
    description: 'Waits ms milliseconds, ignoring cancellation',
    inputSchema: { type: 'object', properties: { ms: { type: 'integer', minimum: 0 } }, required: ['ms'] },
    handler: async ({ ms }) => {
      await sleep(ms)
      return { content: [{ type: 'text', text: `ignored ${ms}` }] }
    }
  })
}

export interface RawResponse {
  status: number
  headers: Headers
  text: string
}

/** POSTs `body` as JSON with the legacy headers (plus `headers`) and reads the whole answer. */
export async function rawPost (url: URL, body: unknown, headers: Record<string, string> = {}): Promise<RawResponse> {
  const response = await fetch(url, { method: 'POST', headers: { ...LEGACY_HEADERS, ...headers }, body: JSON.stringify(body) })
  return { status: response.status, headers: response.headers, text: await response.text() }
}

export interface OpenPost {
  /** Settles when the response ends, or with an error once the connection is destroyed. */
  done: Promise<RawResponse>
  /** Disconnects: destroys the socket, as a client that goes away does. */
  destroy: () => void
}

/**
 * POSTs over a connection of its own (node:http, no agent), so a test can disconnect exactly this
 * request. (An aborted `fetch` may leave undici holding a fresh idle connection, which keeps
 * `app.close()` waiting for the headers timeout.)
 */
export function openPost (url: URL, body: unknown, headers: Record<string, string> = {}): OpenPost {
  const payload = JSON.stringify(body)
  const req = httpRequest(url, {
    method: 'POST', agent: false, headers: { ...LEGACY_HEADERS, ...headers, 'content-length': String(Buffer.byteLength(payload)) }
  })
  const done = new Promise<RawResponse>((resolve, reject) => {
    req.on('error', reject)
    req.on('response', response => { readResponse(response).then(resolve, reject) })
  })
  done.catch(() => {})
  req.end(payload)
  return { done, destroy: () => { req.destroy() } }
}

/**
 * A client on one keep-alive connection, for loops of many small POSTs (several times faster than
 * `fetch` opening connections). Closed at the end of the test.
 */
export function keepAliveClient (t: Teardown, url: URL): (body: unknown, headers?: Record<string, string>) => Promise<RawResponse> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => { agent.destroy() })
  return async (body, headers = {}) => await new Promise<RawResponse>((resolve, reject) => {
    const payload = JSON.stringify(body)
    const req = httpRequest(url, {
      method: 'POST', agent, headers: { ...LEGACY_HEADERS, ...headers, 'content-length': String(Buffer.byteLength(payload)) }
    }, response => { readResponse(response).then(resolve, reject) })
    req.on('error', reject)
    req.end(payload)
  })
}

/** The whole of a response: its status, its single-valued headers, its body as UTF-8. */
async function readResponse (response: IncomingMessage): Promise<RawResponse> {
  return await new Promise<RawResponse>((resolve, reject) => {
    const chunks: Buffer[] = []
    response.on('data', (chunk: Buffer) => { chunks.push(chunk) })
    response.on('error', reject)
    response.on('end', () => {
      const headers = new Headers()
      for (const [key, value] of Object.entries(response.headers)) if (typeof value === 'string') headers.set(key, value)
      resolve({ status: response.statusCode ?? 0, headers, text: Buffer.concat(chunks).toString('utf8') })
    })
  })
}

/** A legacy `tools/call` request body. */
export function toolCall (id: RequestId, name: string, args: Record<string, unknown>, progressToken?: string | number): Record<string, unknown> {
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

/** The JSON-RPC messages of an SSE body. */
export function sseMessagesOf (text: string): JsonRpcMessage[] {
  return sseFrames(text).map(frame => JSON.parse(frame.data) as JsonRpcMessage)
}

/** True when any message is a JSON-RPC response (has `result` or `error`). */
export function hasResponse (messages: readonly JsonRpcMessage[]): boolean {
  return messages.some(message => 'result' in message || 'error' in message)
}

/** Polls `predicate` every 10 ms until it holds or `timeoutMs` passes; returns its last value. */
export async function waitFor (predicate: () => boolean, timeoutMs = 2000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (!predicate()) {
    if (Date.now() >= deadline) return false
    await sleep(10)
  }
  return true
}

/** Resolves `promise`, or `timeout` after `ms`: a hang becomes a failed assertion, not a stuck test. */
export async function within<T, U> (promise: Promise<T>, ms: number, timeout: U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([promise, new Promise<U>(resolve => { timer = setTimeout(() => { resolve(timeout) }, ms) })])
  } finally {
    clearTimeout(timer)
  }
}
