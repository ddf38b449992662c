import type { IncomingMessage } from 'node:http'
import type { StreamState } from '../core/vocabulary.js'
import { messageFrame } from './sse-response.js'

/** Where a resumable stream's events go while a client reads it: an SSE response on this node, or a consumer on another. */
export interface StreamConnection {
  write: (frame: string) => void
  /** Ends the connection cleanly (the response went out, or the server polls). */
  end: () => void
  /** Calls `handler` once the connection is over: `finished` when all that was written went out. */
  onClose: (handler: (finished: boolean) => void) => void
  /** Bytes written but not yet taken by the client's socket, where this node can tell. */
  readonly bufferedBytes?: number
}

/** What the buffer may give up when it is full: a progress or log notification; never a request to the client, never the response. */
export interface EventKind {
  droppable: boolean
  /** A progress token: a later progress of the same token supersedes this event. */
  supersededBy?: unknown
}

interface BufferedEvent {
  position: number
  frame: string
  droppable: boolean
  supersededBy: unknown
}

/** How a stream ended, for the refusal of a resume that comes after. */
export type StreamEnd = 'delivered' | 'cancelled' | 'expired'

export interface StreamBounds {
  maxBufferedEvents: number
  maxBufferedBytes: number
}

/** What a stream tells the registry of streams. */
export interface StreamHooks {
  /** Its last connection went and its request is not over: the resume window starts. */
  paused: (stream: ResumableStream) => void
  /** A client reads it again. */
  resumed: (stream: ResumableStream) => void
  ended: (stream: ResumableStream, end: StreamEnd) => void
  /** Events the full buffer gave up (a resume no longer replays them). */
  dropped: (count: number) => void
}

/**
 * The SSE stream of one legacy (2025-11-25) request, resumable: every event after the priming one has
 * the next position and an id naming it, and is kept (bounded) until the response is delivered, so
 * that a client whose connection dropped, or was closed by the server (polling), resumes after the
 * last event it saw (2025-11-25 `basic/transports`, resumability and SSE polling:
 * https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#resumability-and-redelivery).
 * It has at most one connection; without one it is paused, and its request runs on.
 */
export class ResumableStream {
  readonly name: string
  readonly scope: string
  readonly session: string | undefined
  /** The POST whose request this stream answers: what the disconnect cancels when nobody resumes in time. */
  readonly request: IncomingMessage
  /** `performance.now()` when its last connection went; undefined while one is attached (or once it ended). */
  pausedAt: number | undefined
  readonly #mint: (position: number) => string
  readonly #bounds: StreamBounds
  readonly #hooks: StreamHooks
  #position = 0
  /** Buffered events in position order (from `#first` on: dropping the oldest does not shift the array). */
  #events: BufferedEvent[] = []
  #first = 0
  #bytes = 0
  #connection: StreamConnection | undefined
  /** The response is the last buffered event. */
  #responded = false
  #ended = false
  #endHandlers: Array<() => void> | undefined
  #stateHandlers: Array<(state: StreamState) => void> | undefined
  /** Connections attached so far: every one after the first resumes the stream. */
  #attachments = 0

  constructor (parts: {
    name: string
    scope: string
    session: string | undefined
    request: IncomingMessage
    mint: (position: number) => string
    bounds: StreamBounds
    hooks: StreamHooks
  }) {
    this.name = parts.name
    this.scope = parts.scope
    this.session = parts.session
    this.request = parts.request
    this.#mint = parts.mint
    this.#bounds = parts.bounds
    this.#hooks = parts.hooks
  }

  /** The position of its latest event (0: only the priming one). */
  get position (): number {
    return this.#position
  }

  /** A client reads it now. */
  get connected (): boolean {
    return this.#connection !== undefined
  }

  /** Its request may still write to it. */
  get live (): boolean {
    return !this.#ended && !this.#responded
  }

  /** The response is waiting for a client to resume and take it. */
  get responded (): boolean {
    return this.#responded
  }

  get ended (): boolean {
    return this.#ended
  }

  /** What its current connection has not yet handed to the client's socket (0 without one). */
  get bufferedBytes (): number {
    return this.#connection?.bufferedBytes ?? 0
  }

  /** Calls `handler` each time the stream pauses (its connection went) or resumes. */
  onState (handler: (state: StreamState) => void): void {
    (this.#stateHandlers ??= []).push(handler)
  }

  /** Calls `handler` once the stream has ended, however it ended (not when a connection closes: a client may resume it). */
  onEnd (handler: () => void): void {
    (this.#endHandlers ??= []).push(handler)
  }

  /** The priming event (SEP-1699): an id and the reconnection delay, with an empty `data` line (a parser drops an event without one). */
  primingFrame (retryMs: number): string {
    return `id: ${this.#mint(0)}\nretry: ${retryMs}\ndata: \n\n`
  }

  /** Writes `data` as the next event, kept for a resume. */
  push (data: string, kind: EventKind): void {
    if (!this.live) return
    const position = ++this.#position
    const frame = messageFrame(data, this.#mint(position))
    this.#keep({ position, frame, droppable: kind.droppable, supersededBy: kind.supersededBy })
    this.#connection?.write(frame)
  }

  /** The last event: the response. The stream ends once a connection has taken it. */
  respond (data: string): void {
    if (!this.live) return
    this.push(data, { droppable: false })
    this.#responded = true
    this.#connection?.end()
  }

  /** Ends without a response (the request was cancelled): nothing more is written, and nothing resumes. */
  abandon (end: StreamEnd = 'cancelled'): void {
    if (this.#ended) return
    const connection = this.#connection
    this.#end(end)
    connection?.end()
  }

  /** SSE polling: ends the connection but not the stream; the client reconnects after `retry`. */
  closeConnection (): void {
    this.#connection?.end()
  }

  /** Replays what follows `after`, then carries the stream on `connection`: false when another client reads it. */
  attach (connection: StreamConnection, after: number): boolean {
    if (this.#connection !== undefined || this.#ended) return false
    const resumed = this.#attachments++ > 0
    this.#connection = connection
    this.pausedAt = undefined
    connection.onClose(finished => { this.#closed(connection, finished) })
    for (let i = this.#first; i < this.#events.length; i++) {
      const event = this.#events[i]!
      if (event.position > after) connection.write(event.frame)
    }
    if (resumed) {
      this.#hooks.resumed(this)
      this.#tell('resumed')
    }
    if (this.#responded) connection.end()
    return true
  }

  /** The connection `connection` ended: the stream pauses, or ends once its response went out. */
  #closed (connection: StreamConnection, finished: boolean): void {
    // An ended stream has no connection: a late close of its last one stops here.
    if (this.#connection !== connection) return
    this.#connection = undefined
    if (this.#responded && finished) {
      this.#end('delivered')
      return
    }
    this.pausedAt = performance.now()
    this.#hooks.paused(this)
    this.#tell('paused')
  }

  #tell (state: StreamState): void {
    for (const handler of this.#stateHandlers ?? []) handler(state)
  }

  #end (end: StreamEnd): void {
    this.#ended = true
    this.#connection = undefined
    this.pausedAt = undefined
    this.#events = []
    this.#first = 0
    this.#bytes = 0
    this.#hooks.ended(this, end)
    for (const handler of this.#endHandlers ?? []) handler()
  }

  /** Keeps `event`; over a bound, gives up a superseded progress first, then the oldest droppable event. */
  #keep (event: BufferedEvent): void {
    this.#events.push(event)
    this.#bytes += Buffer.byteLength(event.frame)
    const { maxBufferedEvents, maxBufferedBytes } = this.#bounds
    let dropped = 0
    while ((this.#events.length - this.#first > maxBufferedEvents || this.#bytes > maxBufferedBytes) && this.#dropOne()) dropped++
    if (dropped > 0) this.#hooks.dropped(dropped)
  }

  #dropOne (): boolean {
    const events = this.#events
    let victim = -1
    for (let i = this.#first; i < events.length && victim === -1; i++) {
      const token = events[i]!.supersededBy
      if (token === undefined || !events[i]!.droppable) continue
      for (let j = i + 1; j < events.length; j++) {
        if (events[j]!.supersededBy === token) {
          victim = i
          break
        }
      }
    }
    if (victim === -1) {
      for (let i = this.#first; i < events.length; i++) {
        if (events[i]!.droppable) {
          victim = i
          break
        }
      }
    }
    if (victim === -1) return false
    this.#bytes -= Buffer.byteLength(events[victim]!.frame)
    if (victim === this.#first) {
      this.#first++
      if (this.#first * 2 > events.length) {
        this.#events = events.slice(this.#first)
        this.#first = 0
      }
    } else {
      events.splice(victim, 1)
    }
    return true
  }
}
