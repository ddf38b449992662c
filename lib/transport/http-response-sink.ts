import type { FastifyReply } from 'fastify'
import type { JsonRpcNotification, JsonRpcRequest, JsonRpcResponse } from '../core/jsonrpc.js'
import type { ResponseSink, StreamState } from '../core/vocabulary.js'
import type { RequestObserver } from '../observability/observer.js'
import type { AcceptedResponses } from './media-types.js'
import type { ResumableStream, EventKind } from './resumable-stream.js'
import type { ResumableStreams } from './resumable-streams.js'
import { messageFrame, SseResponse } from './sse-response.js'

/** `'auto'` answers JSON until a handler emits a notification, then SSE; `'json'` never streams; `'sse'` always does. */
export type ResponseMode = 'auto' | 'json' | 'sse'

const KEPT: EventKind = { droppable: false }
const LOG: EventKind = { droppable: true }

/** A request to the client is kept until answered; a progress gives way to a later one of its token, then to any. */
function kindOf (message: JsonRpcNotification | JsonRpcRequest): EventKind {
  if ('id' in message) return KEPT
  return message.method === 'notifications/progress' ? { droppable: true, supersededBy: message.params?.progressToken } : LOG
}

/**
 * The HTTP side of one JSON-RPC request: a single JSON body, or an SSE stream opened as soon as a
 * notification has to go out before the result ('auto'). Every write checks that the exchange is still
 * open, so nothing is written after the response ended, after the client left, or after cancellation.
 * Given the resumable streams (a legacy request that may resume), its stream is a `ResumableStream`:
 * primed, every event with an id, paused rather than gone when the connection drops.
 */
export class HttpResponseSink implements ResponseSink {
  readonly #reply: FastifyReply
  /** A message before the response may turn it into a stream. */
  readonly streams: boolean
  /** The response is a stream from its first byte. */
  readonly #streamOnly: boolean
  readonly acceptsStream: boolean
  readonly #keepAliveMs: number
  readonly #resumableStreams: ResumableStreams | undefined
  #stream: SseResponse | undefined
  #resumable: ResumableStream | undefined
  /** What `onClose` and `onStreamState` asked to hear of a resumable stream: its end, its pauses and resumes. */
  #endHandlers: Array<() => void> | undefined
  #stateHandlers: Array<(state: StreamState) => void> | undefined
  #ended = false

  readonly #observer: RequestObserver

  constructor (reply: FastifyReply, { responseMode, keepAliveMs }: { responseMode: ResponseMode, keepAliveMs: number },
    accepted: AcceptedResponses, observer: RequestObserver, resumableStreams?: ResumableStreams) {
    this.#reply = reply
    this.#observer = observer
    this.acceptsStream = accepted.sse
    this.streams = responseMode !== 'json' && accepted.sse
    this.#streamOnly = accepted.sse && (responseMode === 'sse' || !accepted.json)
    this.#keepAliveMs = keepAliveMs
    this.#resumableStreams = resumableStreams
  }

  /** False once the response has ended or the client has gone away (a resumable stream without a client is still writable: it keeps what it is given). */
  get writable (): boolean {
    if (this.#ended) return false
    const resumable = this.#resumable
    if (resumable !== undefined) return resumable.live
    return !this.#reply.raw.destroyed && this.#stream?.open !== false
  }

  get clientGone (): boolean {
    return this.#reply.raw.destroyed
  }

  /** A resumable stream: its client's leaving pauses it instead of cancelling its request. */
  get resumable (): boolean {
    return this.#resumable !== undefined
  }

  /** A resumable stream without a client: it keeps what it is sent until one resumes it, or its window passes. */
  get paused (): boolean {
    return this.#resumable !== undefined && this.#resumable.live && !this.#resumable.connected
  }

  /** Bytes written but not yet taken by the socket (a client that stops reading makes it grow). */
  get bufferedBytes (): number {
    return this.#resumable?.bufferedBytes ?? this.#stream?.bufferedBytes ?? 0
  }

  /**
   * Opens the stream now, before any message, whatever `responseMode` says (it decides only whether
   * messages before a result make a stream): a listening client waits for the headers.
   */
  open (): void {
    // A comment: the head goes out with the first bytes, and the client reads nothing in it.
    if (this.acceptsStream && this.writable && this.#stream === undefined) this.#open().write(': open\n\n')
  }

  /**
   * Calls `handler` once the stream is over: its connection closed, or, for a resumable one, the stream
   * ended (a closed connection only pauses it).
   */
  onClose (handler: () => void): void {
    if (this.#resumableStreams === undefined) {
      this.#reply.raw.once('close', handler)
      return
    }
    this.#reply.raw.once('close', () => { if (this.#resumable === undefined) handler() })
    this.#endHandlers ??= []
    this.#endHandlers.push(handler)
  }

  /** Calls `handler` each time its stream, once resumable, pauses or resumes. */
  onStreamState (handler: (state: StreamState) => void): void {
    if (this.#resumableStreams === undefined) return
    this.#stateHandlers ??= []
    this.#stateHandlers.push(handler)
  }

  /** Cuts the connection, and ends a resumable stream: what a client too slow to read gets instead of an ever-growing buffer. */
  drop (): void {
    this.#ended = true
    this.#resumable?.abandon()
    if (this.#stream === undefined) this.#reply.raw.destroy()
    else this.#stream.destroy()
  }

  /** Sends a notification or a request to the client before the response; dropped (false) when the response cannot stream. */
  send (message: JsonRpcNotification | JsonRpcRequest): boolean {
    if ((!this.streams && this.#stream === undefined) || !this.writable) return false
    const data = JSON.stringify(message)
    const stream = this.#stream ?? this.#open()
    if (this.#resumable === undefined) stream.write(messageFrame(data))
    else this.#resumable.push(data, kindOf(message))
    return true
  }

  /** Sends the final JSON-RPC response and ends the exchange. */
  respond (message: JsonRpcResponse, status = 200): void {
    if (!this.writable) return
    const body = JSON.stringify(message)
    if (this.#stream !== undefined || this.#streamOnly) {
      const stream = this.#stream ?? this.#open()
      this.#ended = true
      if (this.#resumable !== undefined) {
        this.#resumable.respond(body)
      } else {
        stream.write(messageFrame(body))
        stream.end()
      }
    } else {
      this.#ended = true
      this.#reply.code(status).header('content-type', 'application/json; charset=utf-8').send(body)
    }
  }

  /** Ends the exchange without a JSON-RPC response (it was cancelled): a stream just ends, JSON is a bare 202. */
  abandon (): void {
    if (!this.writable) {
      this.#ended = true
    } else if (this.#resumable !== undefined) {
      this.#ended = true
      this.#resumable.abandon()
    } else if (this.#stream !== undefined) {
      this.#ended = true
      this.#stream.end()
    } else {
      this.#ended = true
      this.#reply.code(202).send()
    }
  }

  /**
   * SSE polling: ends the connection after the priming event (opening the stream if need be) but not
   * the stream, which the client resumes after `retry`; nothing where the response cannot resume.
   */
  closeStream (): void {
    if (this.#resumableStreams === undefined || !this.streams || !this.writable) return
    if (this.#stream === undefined) this.#open()
    this.#resumable!.closeConnection()
  }

  /** Opens the stream; a resumable one starts with its priming event. */
  #open (): SseResponse {
    const stream = this.#stream = new SseResponse(this.#reply, this.#keepAliveMs, this.#observer)
    if (this.#resumableStreams !== undefined) {
      const resumable = this.#resumable = this.#resumableStreams.start(this.#reply.request, stream)
      resumable.onEnd(() => { for (const handler of this.#endHandlers ?? []) handler() })
      resumable.onState(state => { for (const handler of this.#stateHandlers ?? []) handler(state) })
    }
    return stream
  }
}
