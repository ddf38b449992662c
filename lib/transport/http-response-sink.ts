import { PassThrough } from 'node:stream'
import type { FastifyReply } from 'fastify'
import type { JsonRpcNotification, JsonRpcRequest, JsonRpcResponse } from '../core/jsonrpc.js'
import type { ResponseSink } from '../core/vocabulary.js'
import type { RequestObserver } from '../observability/observer.js'
import type { AcceptedResponses } from './media-types.js'

/** `'auto'` answers JSON until a handler emits a notification, then SSE; `'json'` never streams; `'sse'` always does. */
export type ResponseMode = 'auto' | 'json' | 'sse'

const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  // Tells nginx-style proxies not to buffer the stream (2026-07-28 Streamable HTTP, SHOULD).
  'x-accel-buffering': 'no'
}

const ignore = (): void => {}

/**
 * The HTTP side of one JSON-RPC request: a single JSON body, or an SSE stream opened as soon as a
 * notification has to go out before the result ('auto'). Every write checks that the exchange is still
 * open, so nothing is written after the response ended, after the client left, or after cancellation.
 */
export class HttpResponseSink implements ResponseSink {
  readonly #reply: FastifyReply
  /** A message before the response may turn it into a stream. */
  readonly streams: boolean
  /** The response is a stream from its first byte. */
  readonly #streamOnly: boolean
  readonly acceptsStream: boolean
  readonly #keepAliveMs: number
  #stream: PassThrough | undefined
  #keepAlive: NodeJS.Timeout | undefined
  #ended = false

  readonly #observer: RequestObserver

  constructor (reply: FastifyReply, { responseMode, keepAliveMs }: { responseMode: ResponseMode, keepAliveMs: number },
    accepted: AcceptedResponses, observer: RequestObserver) {
    this.#reply = reply
    this.#observer = observer
    this.acceptsStream = accepted.sse
    this.streams = responseMode !== 'json' && accepted.sse
    this.#streamOnly = accepted.sse && (responseMode === 'sse' || !accepted.json)
    this.#keepAliveMs = keepAliveMs
  }

  /** False once the response has ended or the client has gone away. */
  get writable (): boolean {
    return !this.#ended && !this.#reply.raw.destroyed && this.#stream?.destroyed !== true
  }

  get clientGone (): boolean {
    return this.#reply.raw.destroyed
  }

  /** Bytes written but not yet taken by the socket (a client that stops reading makes it grow). */
  get bufferedBytes (): number {
    const stream = this.#stream
    return stream === undefined ? 0 : stream.writableLength + stream.readableLength + this.#reply.raw.writableLength
  }

  /**
   * Opens the stream now, before any message, whatever `responseMode` says (it decides only whether
   * messages before a result make a stream): a listening client waits for the headers.
   */
  open (): void {
    // A comment: the head goes out with the first bytes, and the client reads nothing in it.
    if (this.acceptsStream && this.writable && this.#stream === undefined) this.#open().write(': open\n\n')
  }

  onClose (handler: () => void): void {
    this.#reply.raw.once('close', handler)
  }

  /** Cuts the connection: what a client too slow to read gets instead of an ever-growing buffer. */
  drop (): void {
    this.#ended = true
    clearInterval(this.#keepAlive)
    this.#reply.raw.destroy()
    this.#stream?.destroy()
  }

  /** Sends a notification or a request to the client before the response; dropped (false) when the response cannot stream. */
  send (message: JsonRpcNotification | JsonRpcRequest): boolean {
    if ((!this.streams && this.#stream === undefined) || !this.writable) return false
    this.#event(JSON.stringify(message))
    return true
  }

  /** Sends the final JSON-RPC response and ends the exchange. */
  respond (message: JsonRpcResponse, status = 200): void {
    if (!this.writable) return
    const body = JSON.stringify(message)
    if (this.#stream !== undefined || this.#streamOnly) {
      this.#event(body)
      this.#finish()
    } else {
      this.#ended = true
      this.#reply.code(status).header('content-type', 'application/json; charset=utf-8').send(body)
    }
  }

  /** Ends the exchange without a JSON-RPC response (it was cancelled): a stream just ends, JSON is a bare 202. */
  abandon (): void {
    if (!this.writable) {
      this.#ended = true
    } else if (this.#stream !== undefined) {
      this.#finish()
    } else {
      this.#ended = true
      this.#reply.code(202).send()
    }
  }

  #event (data: string): void {
    (this.#stream ?? this.#open()).write(`event: message\ndata: ${data}\n\n`)
  }

  #open (): PassThrough {
    const stream = this.#stream = new PassThrough()
    stream.on('error', ignore) // a write racing the client's disconnect must not become an uncaught error
    // Comment lines keep idle proxies and load balancers from timing the stream out.
    const keepAlive = this.#keepAlive = setInterval(() => { if (this.writable) stream.write(': keep-alive\n\n') }, this.#keepAliveMs)
    keepAlive.unref()
    this.#observer.streams(1)
    stream.once('close', () => {
      clearInterval(keepAlive)
      this.#observer.streams(-1)
    })
    this.#reply.code(200).headers(SSE_HEADERS).send(stream)
    return stream
  }

  #finish (): void {
    this.#ended = true
    clearInterval(this.#keepAlive)
    this.#stream?.end()
  }
}
