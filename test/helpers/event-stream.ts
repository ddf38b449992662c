/**
 * A response the server keeps open to send notifications on: a legacy session's standalone GET stream
 * or a 2026-07-28 `subscriptions/listen`. Each is read over a connection of its own (node:http, no
 * agent), so a test can close exactly this stream and see when and how the server ends it.
 */
import http, { type IncomingHttpHeaders } from 'node:http'
import { initializeBody, LEGACY, sseFrames, type JsonRpcMessage } from './jsonrpc.js'
import { waitFor } from './wait.js'
import { followResponse, rawPost } from './http.js'

export interface StreamHead {
  status: number
  headers: IncomingHttpHeaders
}

export interface StreamEnd {
  /** The server finished the response (false: the connection was cut, by either side). */
  complete: boolean
}

export class EventStream {
  /** The status and headers; undefined when the connection failed before them. */
  readonly head: Promise<StreamHead | undefined>
  /** Settles once the response is over, however it ended. */
  readonly ended: Promise<StreamEnd>
  readonly #request: http.ClientRequest
  #text = ''
  #over = false

  /** A GET (a legacy session's stream); `headers` are sent as given. */
  static get (url: URL, headers: Record<string, string>): EventStream {
    return new EventStream(url, 'GET', headers, undefined)
  }

  /** A POST of `body` as JSON (a modern listen). */
  static post (url: URL, body: unknown, headers: Record<string, string>): EventStream {
    return new EventStream(url, 'POST', headers, JSON.stringify(body))
  }

  private constructor (url: URL, method: 'GET' | 'POST', headers: Record<string, string>, payload: string | undefined) {
    const request = this.#request = http.request(url, {
      method,
      agent: false,
      headers: payload === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(payload)) }
    })
    let resolveHead!: (head: StreamHead | undefined) => void
    this.head = new Promise(resolve => { resolveHead = resolve })
    this.ended = new Promise<StreamEnd>(resolve => {
      followResponse(request, response => {
        resolveHead({ status: response.statusCode ?? 0, headers: response.headers })
        response.on('data', (chunk: Buffer) => { this.#text += chunk.toString('utf8') })
      }, complete => {
        this.#over = true
        resolveHead(undefined)
        resolve({ complete })
      })
    })
    request.end(payload)
  }

  /** Whether the response is over. */
  get over (): boolean {
    return this.#over
  }

  /** The body so far. */
  text (): string {
    return this.#text
  }

  /** The JSON-RPC messages of the SSE events received whole so far (keep-alive comments left out). */
  messages (): JsonRpcMessage[] {
    const whole = this.#text.slice(0, this.#text.lastIndexOf('\n\n') + 2)
    return sseFrames(whole).filter(frame => frame.data !== '').map(frame => JSON.parse(frame.data) as JsonRpcMessage)
  }

  /** The messages so far whose method is `method`. */
  notifications (method: string): JsonRpcMessage[] {
    return this.messages().filter(message => message.method === method)
  }

  /** Resolves true once `count` messages of `method` have arrived, false after `timeoutMs`. */
  async received (method: string, count = 1, timeoutMs = 5000): Promise<boolean> {
    return await waitFor(() => this.notifications(method).length >= count, timeoutMs)
  }

  /** The client goes away: destroys the connection. */
  close (): void {
    this.#request.destroy()
  }
}

/** A new legacy session, started on `url` (a raw `initialize`): its id. */
export async function newSession (url: URL): Promise<string> {
  const response = await rawPost(url, initializeBody())
  const id = response.headers.get('mcp-session-id')
  if (response.status !== 200 || id === null) throw new Error(`initialize gave no session: HTTP ${response.status} ${response.text}`)
  return id
}

/** The headers of a well-behaved GET for the stream of `session`. */
export function sessionStreamHeaders (session: string): Record<string, string> {
  return { accept: 'text/event-stream', ...LEGACY, 'mcp-session-id': session }
}
