import type { IncomingMessage } from 'node:http'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { ErrorCode, ProtocolError } from '../core/jsonrpc.js'
import type { EventIds, EventPosition } from '../protocol/event-id.js'
import type { RequestObserver } from '../observability/observer.js'
import { ResumableStream, type StreamBounds, type StreamConnection, type StreamEnd } from './resumable-stream.js'
import { SseResponse } from './sse-response.js'

/** What the streams read of the plugin's `resumability` settings. */
export interface ResumableStreamsSettings extends StreamBounds {
  /** How long a stream without a client waits for one to resume it before its request is cancelled. */
  windowMs: number
  /** The `retry` of the priming event: how long a client waits before it reconnects. */
  retryMs: number
  /** Streams without a client one scope may hold; beyond it, its oldest paused one is given up. */
  maxPausedPerScope: number
  /** Streams without a client this node holds in all. */
  maxPaused: number
  /** A connection older than this is closed after its latest event (server-side SSE polling); 0: never. */
  pollIntervalMs: number
}

/** Ended streams remembered (for one window) so that a late resume is told why: beyond it, the oldest are forgotten. */
const MAX_ENDED = 50_000

const ENDED_MESSAGES: Record<StreamEnd, string> = {
  delivered: 'Not Found: this stream has ended; its response was delivered',
  cancelled: 'Not Found: this stream has ended; its request was cancelled',
  expired: 'Not Found: this stream has ended; nobody resumed it within its resume window'
}

/** The refusal of a `Last-Event-ID` this server never sent to this client. */
export function notAnEventId (): ProtocolError {
  return new ProtocolError(ErrorCode.InvalidRequest, 'Bad Request: Last-Event-ID does not name a stream of this client', { httpStatus: 400 })
}

/** A stream's window is checked ten times per window, between 10 ms and 1 s apart. */
function sweepInterval (windowMs: number): number {
  return Math.min(1000, Math.max(10, Math.floor(windowMs / 10)))
}

/**
 * The resumable streams this node holds (docs/resumability.md): it starts them, finds the one a
 * `Last-Event-ID` names, and owns the one timer that gives up streams nobody resumed in time (their
 * requests are then cancelled as a disconnect) and closes connections for SSE polling.
 */
export class ResumableStreams {
  readonly settings: ResumableStreamsSettings
  readonly ids: EventIds
  readonly #observer: RequestObserver
  /** No client resumed the stream of `request` in time: its disconnect counts now. */
  readonly #givenUp: (request: IncomingMessage) => void
  readonly #streams = new Map<string, ResumableStream>()
  /** Streams without a client, oldest pause first, and how many each scope has. */
  readonly #paused = new Set<ResumableStream>()
  readonly #pausedPerScope = new Map<string, number>()
  /** When each connected stream's connection started (for polling). */
  readonly #connectedAt = new Map<ResumableStream, number>()
  /** Ended streams of the last window, oldest first: how each ended, and when. */
  readonly #ended = new Map<string, { end: StreamEnd, at: number }>()
  #sweep: NodeJS.Timeout | undefined

  constructor (settings: ResumableStreamsSettings, ids: EventIds, observer: RequestObserver, givenUp: (request: IncomingMessage) => void) {
    this.settings = settings
    this.ids = ids
    this.#observer = observer
    this.#givenUp = givenUp
  }

  get size (): number {
    return this.#streams.size
  }

  startTimers (): void {
    const { windowMs, pollIntervalMs } = this.settings
    const interval = Math.min(sweepInterval(windowMs), pollIntervalMs > 0 ? sweepInterval(pollIntervalMs) : Infinity)
    this.#sweep = setInterval(() => { this.#sweepNow() }, interval)
    this.#sweep.unref()
  }

  /** Stops the timer and ends every stream (their requests have been cancelled by the shutdown). */
  close (): void {
    clearInterval(this.#sweep)
    this.#sweep = undefined
    for (const stream of [...this.#streams.values()]) stream.abandon()
  }

  /** A new stream for the legacy request `request` (its scope and session resolved), carried on `connection` from its priming event on. */
  start (request: FastifyRequest, connection: StreamConnection): ResumableStream {
    const name = this.ids.newStream()
    const scope = request.mcpScope!
    const session = request.mcpSessionId ?? undefined
    const stream = new ResumableStream({
      name,
      scope,
      session,
      request: request.raw,
      mint: this.ids.of(name, scope, session),
      bounds: this.settings,
      hooks: this.#hooks
    })
    this.#streams.set(name, stream)
    connection.write(stream.primingFrame(this.settings.retryMs))
    this.attach(stream, connection, 0)
    return stream
  }

  /**
   * The stream a verified event id names, for its scope and session; a 400 for a position it never
   * reached (an id it never sent), a 404 once it ended (saying how) or when this node never held it, a
   * 409 while another client reads it. Nothing is written.
   */
  find ({ stream: name, position }: EventPosition, scope: string, session: string | undefined): ResumableStream {
    const stream = this.#streams.get(name)
    if (stream === undefined || stream.scope !== scope || stream.session !== session) {
      const ended = this.#ended.get(name)
      throw new ProtocolError(ErrorCode.InvalidRequest, ended === undefined ? 'Not Found: no such stream on this server' : ENDED_MESSAGES[ended.end], { httpStatus: 404 })
    }
    if (position > stream.position) throw notAnEventId()
    if (stream.connected) {
      throw new ProtocolError(ErrorCode.ServerError, 'Conflict: this stream is still connected to another client', { httpStatus: 409 })
    }
    return stream
  }

  /** The SSE response a resume goes out on, here or relayed from another node: it opens with the reconnection delay. */
  resumeResponse (reply: FastifyReply, keepAliveMs: number): SseResponse {
    const response = new SseResponse(reply, keepAliveMs, this.#observer)
    response.write(`retry: ${this.settings.retryMs}\n\n`)
    return response
  }

  /** Carries `stream` on `connection` from after event `after`. */
  attach (stream: ResumableStream, connection: StreamConnection, after: number): boolean {
    if (!stream.attach(connection, after)) return false
    if (!stream.ended) this.#connectedAt.set(stream, performance.now())
    return true
  }

  readonly #hooks = {
    paused: (stream: ResumableStream): void => {
      this.#connectedAt.delete(stream)
      this.#paused.add(stream)
      this.#observer.streamsPaused(1)
      const count = (this.#pausedPerScope.get(stream.scope) ?? 0) + 1
      this.#pausedPerScope.set(stream.scope, count)
      if (count > this.settings.maxPausedPerScope) this.#giveUp(this.#oldestPaused(stream.scope)!)
      if (this.#paused.size > this.settings.maxPaused) this.#giveUp(this.#paused.values().next().value!)
    },
    resumed: (stream: ResumableStream): void => {
      this.#unpause(stream)
    },
    ended: (stream: ResumableStream, end: StreamEnd): void => {
      this.#unpause(stream)
      this.#connectedAt.delete(stream)
      this.#streams.delete(stream.name)
      this.#ended.set(stream.name, { end, at: performance.now() })
      if (this.#ended.size > MAX_ENDED) this.#ended.delete(this.#ended.keys().next().value!)
    },
    dropped: (count: number): void => {
      this.#observer.streamEventsDropped(count)
    }
  }

  #unpause (stream: ResumableStream): void {
    if (!this.#paused.delete(stream)) return
    this.#observer.streamsPaused(-1)
    const count = this.#pausedPerScope.get(stream.scope)! - 1
    if (count === 0) this.#pausedPerScope.delete(stream.scope)
    else this.#pausedPerScope.set(stream.scope, count)
  }

  #oldestPaused (scope: string): ResumableStream | undefined {
    for (const stream of this.#paused) if (stream.scope === scope) return stream
    return undefined
  }

  /** Nobody resumed `stream` in time (or a bound needs its place): it ends, and its request, if still running, is cancelled as a disconnect. */
  #giveUp (stream: ResumableStream): void {
    const running = !stream.responded
    stream.abandon('expired')
    this.#observer.streamResumed('expired')
    if (running) this.#givenUp(stream.request)
  }

  #sweepNow (): void {
    const now = performance.now()
    const { windowMs, pollIntervalMs } = this.settings
    for (const stream of this.#paused) {
      // Oldest pause first: the first one still in its window ends the sweep.
      if (stream.pausedAt! + windowMs > now) break
      this.#giveUp(stream)
    }
    for (const [name, { at }] of this.#ended) {
      if (at + windowMs > now) break
      this.#ended.delete(name)
    }
    if (pollIntervalMs === 0) return
    // Oldest connection first, as for the pauses.
    for (const [stream, since] of this.#connectedAt) {
      if (since + pollIntervalMs > now) break
      this.#connectedAt.delete(stream)
      stream.closeConnection()
    }
  }
}
