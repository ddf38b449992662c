/**
 * Helpers for the stream tests (disconnects, kill timeout, lifetime, SSE hygiene, shutdown, leaks): raw
 * HTTP calls that record every chunk with its arrival time and can be cut at any moment, a byte-exact
 * `node:net` client, a recorder of when the server's responses closed, a log capture, a subscriber of
 * the cancellation events, and a counter of the process's active resources.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import http, { type IncomingHttpHeaders } from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { buildApp as buildDemo, type DemoEnv } from '../../example/app.js'
import mcpCancellation, { type McpCancellationOptions, type RequestCancelledEvent } from '../../lib/index.js'
import { LEGACY_HEADERS, Probe, registerSleep, type Listening, type Teardown } from './cancellation-server.js'
import { modernHeaders, modernMeta, sseFrames, type JsonRpcMessage } from './mcp.js'

export type { Teardown }

/**
 * Starts `app` on 127.0.0.1:0 (closed at the end of the test) and returns its MCP URL. At teardown,
 * connections on which no request ever arrived are destroyed first: undici opens one right after a
 * fetch is aborted, and Node does not count such a connection as idle, so `app.close()` would wait for
 * it until the headers timeout (60 s). Connections that carried a request must end by themselves.
 */
export async function listenOn (t: Teardown, app: FastifyInstance, backlog?: number): Promise<URL> {
  const sockets = new Set<net.Socket>()
  app.server.on('connection', (socket: net.Socket) => {
    sockets.add(socket)
    socket.once('close', () => { sockets.delete(socket) })
  })
  t.teardown(async () => {
    for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy()
    await app.close()
  })
  await app.listen({ host: '127.0.0.1', port: 0, ...(backlog === undefined ? {} : { backlog }) })
  const { port } = app.server.address() as AddressInfo
  return new URL(`http://127.0.0.1:${port}/mcp`)
}

/** The demo server (example/app.ts) plus the probe tool and whatever `setup` adds, on 127.0.0.1:0. */
export async function listenDemo (t: Teardown, env: DemoEnv = {}, fastifyOptions: FastifyServerOptions = {},
  setup?: (app: FastifyInstance) => void): Promise<Listening> {
  const app = await buildDemo(env, fastifyOptions)
  const probe = new Probe()
  probe.register(app)
  setup?.(app)
  return { app, url: await listenOn(t, app), probe }
}

/**
 * The bare plugin with `options`, the demo's `sleep`, the probe and whatever `setup` adds, on 127.0.0.1:0;
 * `before` runs on the app before the plugin is registered (other plugins, as an application would).
 */
export async function listenPlugin (t: Teardown, options: McpCancellationOptions = {}, fastifyOptions: FastifyServerOptions = {},
  setup?: (app: FastifyInstance) => void, before?: (app: FastifyInstance) => Promise<void>): Promise<Listening> {
  const app = Fastify({ logger: false, ...fastifyOptions })
  await before?.(app)
  await app.register(mcpCancellation, { serverInfo: { name: 'stream-tests', version: '1.0.0' }, ...options })
  registerSleep(app)
  const probe = new Probe()
  probe.register(app)
  setup?.(app)
  return { app, url: await listenOn(t, app), probe }
}

/** What the server did with its response to one JSON-RPC request. */
export interface ResponseRecord {
  /** When `reply.raw` emitted 'close'. */
  closedAt: number | undefined
  /** `reply.raw.writableFinished` at 'close': false means the client left before the response ended. */
  finished: boolean | undefined
  /** Every `reply.raw.write` (body chunks as the server wrote them, SSE events one by one) with its time. */
  writes: Chunk[]
}

/**
 * Records, by the JSON-RPC id of the request body, each MCP POST's response: its 'close' (listener added
 * in onRequest, so it runs before the endpoint's own, armed in the handler: its time is the moment the
 * server learnt that the response closed) and its writes, timed on the server side.
 */
export function recordResponses (app: FastifyInstance): Map<unknown, ResponseRecord> {
  const byId = new Map<unknown, ResponseRecord>()
  const byRequest = new WeakMap<object, ResponseRecord>()
  app.addHook('onRequest', async (request, reply) => {
    const record: ResponseRecord = { closedAt: undefined, finished: undefined, writes: [] }
    byRequest.set(request, record)
    const response = reply.raw
    response.once('close', () => {
      record.closedAt = Date.now()
      record.finished = response.writableFinished
    })
    const write = response.write.bind(response) as (...args: unknown[]) => boolean
    response.write = ((chunk: unknown, ...rest: unknown[]) => {
      record.writes.push({ at: Date.now(), text: Buffer.isBuffer(chunk) ? chunk.toString('utf8') : String(chunk) })
      return write(chunk, ...rest)
    }) as typeof response.write
  })
  app.addHook('preHandler', async request => {
    const record = byRequest.get(request)
    if (record === undefined || !Buffer.isBuffer(request.body)) return
    try {
      const body = JSON.parse(request.body.toString('utf8')) as { id?: unknown }
      if (body.id !== undefined) byId.set(body.id, record)
    } catch {}
  })
  return byId
}

export interface Chunk {
  at: number
  text: string
}

export interface CallEnd {
  status: number | undefined
  headers: IncomingHttpHeaders | undefined
  text: string
  /** The response ended normally (false: the socket was destroyed or failed first). */
  complete: boolean
  endedAt: number
}

/** One POST over `node:http`, recorded chunk by chunk. */
export class RawCall {
  readonly chunks: Chunk[] = []
  readonly done: Promise<CallEnd>
  readonly headers: Promise<{ status: number, headers: IncomingHttpHeaders } | undefined>
  readonly #request: http.ClientRequest
  #status: number | undefined
  #headers: IncomingHttpHeaders | undefined
  #cutOn: string | undefined
  /** When the client destroyed the socket. */
  destroyedAt: number | undefined

  constructor (url: URL, body: unknown, headers: Record<string, string>, agent: http.Agent | false = false) {
    const payload = typeof body === 'string' ? body : JSON.stringify(body)
    const request = this.#request = http.request(url, {
      method: 'POST',
      agent,
      headers: { ...headers, 'content-length': String(Buffer.byteLength(payload)) }
    })
    let resolveHeaders!: (value: { status: number, headers: IncomingHttpHeaders } | undefined) => void
    this.headers = new Promise(resolve => { resolveHeaders = resolve })
    this.done = new Promise<CallEnd>(resolve => {
      let settled = false
      const end = (complete: boolean): void => {
        if (settled) return
        settled = true
        resolveHeaders(undefined)
        resolve({ status: this.#status, headers: this.#headers, text: this.text(), complete, endedAt: Date.now() })
      }
      request.on('response', response => {
        this.#status = response.statusCode
        this.#headers = response.headers
        resolveHeaders({ status: response.statusCode ?? 0, headers: response.headers })
        response.on('data', (chunk: Buffer) => {
          this.chunks.push({ at: Date.now(), text: chunk.toString('utf8') })
          if (this.#cutOn !== undefined && this.text().includes(this.#cutOn)) this.destroy()
        })
        response.on('end', () => { end(true) })
        response.on('error', () => { end(false) })
        response.on('close', () => { end(response.complete) })
      })
      request.on('error', () => { end(false) })
      request.on('close', () => { setImmediate(() => { end(false) }) })
    })
    request.end(payload)
  }

  text (): string {
    return this.chunks.map(chunk => chunk.text).join('')
  }

  /** The JSON-RPC messages of the SSE body so far. */
  messages (): JsonRpcMessage[] {
    return sseFrames(this.text()).filter(frame => frame.data !== '').map(frame => JSON.parse(frame.data) as JsonRpcMessage)
  }

  /** Resolves true once the body so far contains `needle`, false after `timeoutMs`. */
  async waitForText (needle: string, timeoutMs = 2000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs
    while (!this.text().includes(needle)) {
      if (Date.now() >= deadline) return false
      await new Promise(resolve => setTimeout(resolve, 5))
    }
    return true
  }

  /** Destroys the socket (the client goes away); returns when. */
  destroy (): number {
    this.#request.destroy()
    this.destroyedAt ??= Date.now()
    return this.destroyedAt
  }

  /** Destroys the socket as soon as the body contains `needle` (in the same tick as the data arrives). */
  cutOn (needle: string): void {
    this.#cutOn = needle
    if (this.text().includes(needle)) this.destroy()
  }
}

/** A legacy (2025-11-25) `tools/call` over `node:http`. */
export function legacyCall (url: URL, id: string | number, name: string, args: Record<string, unknown>,
  options: { progressToken?: string | number, agent?: http.Agent | false, headers?: Record<string, string> } = {}): RawCall {
  const params: Record<string, unknown> = { name, arguments: args }
  if (options.progressToken !== undefined) params._meta = { progressToken: options.progressToken }
  return new RawCall(url, { jsonrpc: '2.0', id, method: 'tools/call', params }, { ...LEGACY_HEADERS, ...options.headers }, options.agent)
}

/** A modern (2026-07-28) `tools/call` over `node:http`: per-request `_meta` and the mirrored headers. */
export function modernCall (url: URL, id: string | number, name: string, args: Record<string, unknown>,
  options: { progressToken?: string | number, agent?: http.Agent | false } = {}): RawCall {
  const meta = modernMeta(options.progressToken === undefined ? {} : { progressToken: options.progressToken })
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
  for (const [key, value] of Object.entries(modernHeaders('tools/call', name))) if (value !== undefined) headers[key] = value
  return new RawCall(url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, _meta: meta } }, headers, options.agent)
}

/**
 * One HTTP/1.1 request written on a bare `node:net` socket that stays open after the response
 * (keep-alive), so a test can see every byte the server sends, including any after the response ended.
 */
export class NetCall {
  readonly socket: net.Socket
  readonly chunks: Array<{ at: number, bytes: Buffer }> = []
  /** When the chunked body's terminating `0\r\n\r\n` arrived. */
  completedAt: number | undefined

  constructor (url: URL, body: unknown, headers: Record<string, string>) {
    const payload = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body))
    const lines = [`POST ${url.pathname} HTTP/1.1`, `host: ${url.host}`, 'connection: keep-alive', `content-length: ${payload.length}`]
    for (const [key, value] of Object.entries(headers)) lines.push(`${key}: ${value}`)
    this.socket = net.connect(Number(url.port), url.hostname)
    this.socket.on('error', () => {})
    this.socket.on('data', (bytes: Buffer) => {
      this.chunks.push({ at: Date.now(), bytes })
      if (this.completedAt === undefined && this.raw().includes('\r\n0\r\n\r\n')) this.completedAt = Date.now()
    })
    this.socket.write(Buffer.concat([Buffer.from(lines.join('\r\n') + '\r\n\r\n'), payload]))
  }

  raw (): string {
    return Buffer.concat(this.chunks.map(chunk => chunk.bytes)).toString('utf8')
  }

  /** The response head (status line and headers). */
  head (): string {
    const raw = this.raw()
    const end = raw.indexOf('\r\n\r\n')
    return end === -1 ? '' : raw.slice(0, end)
  }

  /** The de-chunked body received so far. */
  body (): string {
    const raw = this.raw()
    let at = raw.indexOf('\r\n\r\n')
    if (at === -1) return ''
    at += 4
    let body = ''
    while (at < raw.length) {
      const lineEnd = raw.indexOf('\r\n', at)
      if (lineEnd === -1) break
      const size = parseInt(raw.slice(at, lineEnd), 16)
      if (!Number.isFinite(size) || size === 0) break
      body += raw.slice(lineEnd + 2, lineEnd + 2 + size)
      at = lineEnd + 2 + size + 2
    }
    return body
  }

  /** Bytes that arrived strictly after the response had been completed. */
  bytesAfterCompletion (): number {
    if (this.completedAt === undefined) return 0
    const raw = this.raw()
    const end = raw.indexOf('\r\n0\r\n\r\n') + '\r\n0\r\n\r\n'.length
    return Buffer.byteLength(raw.slice(end))
  }

  async waitForText (needle: string, timeoutMs = 2000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs
    while (!this.raw().includes(needle)) {
      if (Date.now() >= deadline) return false
      await new Promise(resolve => setTimeout(resolve, 5))
    }
    return true
  }

  async waitForCompletion (timeoutMs = 2000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs
    while (this.completedAt === undefined) {
      if (Date.now() >= deadline) return false
      await new Promise(resolve => setTimeout(resolve, 5))
    }
    return true
  }

  close (): void {
    this.socket.destroy()
  }
}

/** A Fastify logger writing JSON lines into memory: `fastifyOptions` for `buildApp`, and the parsed lines. */
export function captureLogs (level = 'warn'): { options: FastifyServerOptions, lines: () => Array<Record<string, unknown>> } {
  const raw: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, callback) {
      raw.push(chunk.toString('utf8'))
      callback()
    }
  })
  return {
    options: { logger: { level, stream } },
    lines: () => raw.join('').split('\n').filter(line => line.trim() !== '').map(line => JSON.parse(line) as Record<string, unknown>)
  }
}

/** A `mcp:request:cancelled` event and when it was published (the moment the server cancelled). */
export interface CancellationEvent extends RequestCancelledEvent {
  at: number
}

/** Every `mcp:request:cancelled` event published until the end of the test. */
export function cancellationEvents (t: Teardown): CancellationEvent[] {
  const events: CancellationEvent[] = []
  const listener = (message: unknown): void => {
    const { requestId, scope, reason, source } = message as RequestCancelledEvent
    events.push({ requestId, scope, reason, source, at: Date.now() })
  }
  subscribe('mcp:request:cancelled', listener)
  t.teardown(() => { unsubscribe('mcp:request:cancelled', listener) })
  return events
}

/** `process.getActiveResourcesInfo()` as counts by kind. */
export function activeResources (): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1
  return counts
}

/** Kinds whose count grew from `before` to `after`, with how much: `{}` when nothing was left behind. */
export function resourceGrowth (before: Record<string, number>, after: Record<string, number>, slack = 0): Record<string, number> {
  const grown: Record<string, number> = {}
  for (const [kind, count] of Object.entries(after)) {
    const growth = count - (before[kind] ?? 0)
    if (growth > slack) grown[kind] = growth
  }
  return grown
}

/** Polls until `activeResources()` has grown by at most `slack` per kind from `before`; returns the last growth. */
export async function resourcesSettle (before: Record<string, number>, timeoutMs = 2000, slack = 0): Promise<Record<string, number>> {
  const deadline = Date.now() + timeoutMs
  let grown = resourceGrowth(before, activeResources(), slack)
  while (Object.keys(grown).length > 0 && Date.now() < deadline) {
    await new Promise(resolve => setTimeout(resolve, 20))
    grown = resourceGrowth(before, activeResources(), slack)
  }
  return grown
}

/** Fails the test on any unhandled rejection while it runs. */
export function failOnUnhandledRejection (t: Teardown & { fail: (...args: any[]) => unknown }): void {
  const listener = (reason: unknown): void => {
    t.fail('unhandled rejection', { reason: reason instanceof Error ? `${reason.name}: ${reason.message}` : String(reason) })
  }
  process.on('unhandledRejection', listener)
  t.teardown(() => { process.off('unhandledRejection', listener) })
}
