/**
 * HTTP over real sockets, as a client does it, each way for what it lets a test see:
 * - `rawPost`: one POST through `fetch`, the whole answer;
 * - `openPost`: one POST over a connection of its own, which the test can cut (a disconnect);
 * - `keepAliveClient`: many small POSTs over one keep-alive connection;
 * - `RawCall` (`legacyCall`, `modernCall`): one `tools/call` recorded chunk by chunk with arrival times,
 *   cut at any moment or as soon as some text arrives;
 * - `NetCall`: one request on a bare `node:net` socket that stays open, every byte the server sends;
 * - `rawExchange`: raw bytes that `fetch` and `inject` refuse to send;
 * - `postFrom`: a POST from a given local address (for proxies and address scopes).
 */
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http'
import net from 'node:net'
import type { RequestId } from '../../lib/index.js'
import { DEFAULT_HEADERS, LEGACY_HEADERS, modernHeaders, modernMeta, sseFrames, toolCall, type JsonRpcMessage } from './jsonrpc.js'
import type { Teardown } from './teardown.js'
import { waitFor } from './wait.js'

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
  const req = http.request(url, {
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
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => { agent.destroy() })
  return async (body, headers = {}) => await new Promise<RawResponse>((resolve, reject) => {
    const payload = JSON.stringify(body)
    const req = http.request(url, {
      method: 'POST', agent, headers: { ...LEGACY_HEADERS, ...headers, 'content-length': String(Buffer.byteLength(payload)) }
    }, response => { readResponse(response).then(resolve, reject) })
    req.on('error', reject)
    req.end(payload)
  })
}

/** The whole of a response: its status, its single-valued headers, its body as UTF-8. */
export async function readResponse (response: IncomingMessage): Promise<RawResponse> {
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

/**
 * Follows `request`'s answer: `onResponse` gets the response as its head arrives (attach 'data' there),
 * `onEnd` is called once, with whether the server finished it (false: the connection was cut, by
 * either side, before or after the head).
 */
export function followResponse (request: http.ClientRequest, onResponse: (response: IncomingMessage) => void, onEnd: (complete: boolean) => void): void {
  let settled = false
  const end = (complete: boolean): void => {
    if (settled) return
    settled = true
    onEnd(complete)
  }
  request.on('response', response => {
    onResponse(response)
    response.on('end', () => { end(true) })
    response.on('error', () => { end(false) })
    response.on('close', () => { end(response.complete) })
  })
  request.on('error', () => { end(false) })
  request.on('close', () => { setImmediate(() => { end(false) }) })
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
      followResponse(request, response => {
        this.#status = response.statusCode
        this.#headers = response.headers
        resolveHeaders({ status: response.statusCode ?? 0, headers: response.headers })
        response.on('data', (chunk: Buffer) => {
          this.chunks.push({ at: Date.now(), text: chunk.toString('utf8') })
          if (this.#cutOn !== undefined && this.text().includes(this.#cutOn)) this.destroy()
        })
      }, complete => {
        resolveHeaders(undefined)
        resolve({ status: this.#status, headers: this.#headers, text: this.text(), complete, endedAt: Date.now() })
      })
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
    return await waitFor(() => this.text().includes(needle), timeoutMs, 5)
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
export function legacyCall (url: URL, id: RequestId, name: string, args: Record<string, unknown>,
  options: { progressToken?: string | number, agent?: http.Agent | false, headers?: Record<string, string> } = {}): RawCall {
  return new RawCall(url, toolCall(id, name, args, options.progressToken), { ...LEGACY_HEADERS, ...options.headers }, options.agent)
}

/** A modern (2026-07-28) `tools/call` over `node:http`: per-request `_meta` and the mirrored headers. */
export function modernCall (url: URL, id: RequestId, name: string, args: Record<string, unknown>,
  options: { progressToken?: string | number, agent?: http.Agent | false } = {}): RawCall {
  const meta = modernMeta(options.progressToken === undefined ? {} : { progressToken: options.progressToken })
  const headers: Record<string, string> = { ...DEFAULT_HEADERS }
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
    return await waitFor(() => this.raw().includes(needle), timeoutMs, 5)
  }

  async waitForCompletion (timeoutMs = 2000): Promise<boolean> {
    return await waitFor(() => this.completedAt !== undefined, timeoutMs, 5)
  }

  close (): void {
    this.socket.destroy()
  }
}

/**
 * Writes `request` (raw bytes, exactly as given) to a fresh TCP connection and collects what comes
 * back until one whole response (by Content-Length) has arrived, the server closes the connection, or
 * `waitMs` passes; then the socket is destroyed. For requests that
 * `fetch` and `inject` refuse to send: control characters in header values, bodies shorter than their
 * Content-Length.
 */
export async function rawExchange (port: number, request: string | Buffer, waitMs = 1000): Promise<string> {
  return await new Promise(resolve => {
    const socket = net.connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    let settled = false
    const finish = (): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      resolve(Buffer.concat(chunks).toString('latin1'))
    }
    const timer = setTimeout(finish, waitMs)
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      if (completeResponse(Buffer.concat(chunks).toString('latin1'))) finish()
    })
    socket.on('close', finish)
    socket.on('error', finish)
    socket.write(request)
  })
}

/** The status code of a raw HTTP/1.1 response, or undefined when nothing parseable came back. */
export function rawStatus (response: string): number | undefined {
  const match = /^HTTP\/1\.1 (\d{3}) /.exec(response)
  return match === null ? undefined : Number(match[1])
}

/** The body of a raw HTTP/1.1 response (after the blank line). */
export function rawBody (response: string): string {
  const end = response.indexOf('\r\n\r\n')
  return end === -1 ? '' : response.slice(end + 4)
}

/** True once `text` holds a status line, headers and as many body bytes as Content-Length announces. */
function completeResponse (text: string): boolean {
  const end = text.indexOf('\r\n\r\n')
  if (end === -1) return false
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, end))
  return length !== null && text.length - end - 4 >= Number(length[1])
}

/** POSTs `body` as JSON to `url` from the local address `from`, with `headers`; the status and text. */
export async function postFrom (from: string, url: URL, body: unknown, headers: Record<string, string>): Promise<{ status: number, text: string }> {
  const payload = JSON.stringify(body)
  return await new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      localAddress: from,
      agent: false,
      headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) }
    }, response => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => { chunks.push(chunk) })
      response.on('end', () => { resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }) })
      response.on('error', reject)
    })
    req.on('error', reject)
    req.end(payload)
  })
}
