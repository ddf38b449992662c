import { PassThrough } from 'node:stream'
import type { FastifyReply } from 'fastify'
import type { RequestObserver } from '../observability/observer.js'

const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  // Tells nginx-style proxies not to buffer the stream (2026-07-28 Streamable HTTP, SHOULD).
  'x-accel-buffering': 'no'
}

const ignore = (): void => {}

/** One SSE event carrying a JSON-RPC message, with its event id when the stream is resumable. */
export function messageFrame (data: string, id?: string): string {
  return id === undefined ? `event: message\ndata: ${data}\n\n` : `id: ${id}\nevent: message\ndata: ${data}\n\n`
}

/**
 * An HTTP response that is an SSE stream: its headers go out at once, comment lines keep idle proxies
 * and load balancers from timing it out, and it counts in `mcp_sse_streams` while it is open.
 */
export class SseResponse {
  readonly #reply: FastifyReply
  readonly #stream = new PassThrough()
  readonly #keepAlive: NodeJS.Timeout

  constructor (reply: FastifyReply, keepAliveMs: number, observer: RequestObserver) {
    this.#reply = reply
    const stream = this.#stream
    stream.on('error', ignore) // a write racing the client's disconnect must not become an uncaught error
    const keepAlive = this.#keepAlive = setInterval(() => { if (this.open) stream.write(': keep-alive\n\n') }, keepAliveMs)
    keepAlive.unref()
    observer.streams(1)
    stream.once('close', () => {
      clearInterval(keepAlive)
      observer.streams(-1)
    })
    reply.code(200).headers(SSE_HEADERS).send(stream)
  }

  /** False once the stream ended or the client went away. */
  get open (): boolean {
    return !this.#reply.raw.destroyed && !this.#stream.destroyed && !this.#stream.writableEnded
  }

  /** Bytes written but not yet taken by the socket (a client that stops reading makes it grow). */
  get bufferedBytes (): number {
    return this.#stream.writableLength + this.#stream.readableLength + this.#reply.raw.writableLength
  }

  write (frame: string): void {
    if (this.open) this.#stream.write(frame)
  }

  /** Ends the stream cleanly: what was written still reaches the client. */
  end (): void {
    clearInterval(this.#keepAlive)
    this.#stream.end()
  }

  /** Cuts the connection at once. */
  destroy (): void {
    clearInterval(this.#keepAlive)
    this.#reply.raw.destroy()
    this.#stream.destroy()
  }

  /** Calls `handler` once the connection has closed, whoever closed it: `finished` when all of it was handed to the socket. */
  onClose (handler: (finished: boolean) => void): void {
    const raw = this.#reply.raw
    raw.once('close', () => { handler(raw.writableFinished) })
  }
}
