import type { FastifyRequest } from 'fastify'
import type { EraBinding, LoggingLevel } from '../protocol/era.js'
import { LOGGING_LEVELS } from '../protocol/era.js'
import { ErrorCode, errorResponse, isJsonObject, type JsonObject, type RequestId } from '../protocol/jsonrpc.js'
import type { ResponseSink } from '../transport/response-channel.js'

export type ProgressToken = string | number
export type CancellationSource = 'client' | 'disconnect' | 'lifetime' | 'server'

/** The abort reason every cancelled handler sees on `ctx.signal.reason`, and what `throwIfCancelled()` throws. */
export class RequestCancelledError extends Error {
  readonly reason: string | null
  readonly source: CancellationSource

  constructor (reason: string | null, source: CancellationSource) {
    super(reason ?? 'Request cancelled')
    this.name = 'AbortError'
    this.reason = reason
    this.source = source
  }
}

export type CancellationListener = (exchange: Exchange, reason: string | null, source: CancellationSource) => void

export interface ExchangeInit {
  request: FastifyRequest
  id: RequestId
  method: string
  params: JsonObject
  binding: EraBinding
  scope: string
  channel: ResponseSink
  onCancelled: CancellationListener
}

/**
 * One JSON-RPC request in flight: created before dispatch, finished in `finally`. It owns the request's
 * AbortController and its notifications, so cancellation has exactly one place to act on. It is also
 * the in-flight owner the registry tracks: a cancellation for its {scope, id} calls `cancel`.
 */
export class Exchange {
  readonly id: RequestId
  readonly method: string
  readonly params: JsonObject
  readonly binding: EraBinding
  readonly scope: string
  readonly request: FastifyRequest
  readonly channel: ResponseSink
  readonly progressToken: ProgressToken | undefined
  readonly #controller = new AbortController()
  readonly #onCancelled: CancellationListener
  #finished = false
  /** Index in LOGGING_LEVELS below which log notifications are dropped. */
  readonly #logThreshold: number
  #lastProgress = -Infinity

  constructor ({ request, id, method, params, binding, scope, channel, onCancelled }: ExchangeInit) {
    this.request = request
    this.id = id
    this.method = method
    this.params = params
    this.binding = binding
    this.scope = scope
    this.channel = channel
    this.#onCancelled = onCancelled
    const meta = params._meta
    const token = isJsonObject(meta) ? meta.progressToken : undefined
    this.progressToken = typeof token === 'string' || (typeof token === 'number' && Number.isFinite(token)) ? token : undefined
    // Stateless legacy requests cannot carry a level set by logging/setLevel, so every level goes out;
    // modern requests get messages only when they asked, at or above the level they asked for.
    this.#logThreshold = binding.era === 'legacy'
      ? 0
      : binding.logLevel === undefined ? Infinity : LOGGING_LEVELS.indexOf(binding.logLevel)
  }

  get signal (): AbortSignal {
    return this.#controller.signal
  }

  get cancelled (): boolean {
    return this.#controller.signal.aborted
  }

  /** False once the handler has settled (or been given up on); the janitor sweeps rows of dead owners. */
  get alive (): boolean {
    return !this.#finished
  }

  finish (): void {
    this.#finished = true
  }

  /**
   * Aborts the handler's signal and ends the HTTP side at once, without a result: nothing more may be
   * sent for a cancelled request. A client that cancelled (or left) gets no response; a client still
   * connected when the server cancels (lifetime, shutdown) is told why with -32800. The in-flight row
   * stays until the handler settles. Returns false when already cancelled or finished.
   */
  cancel (reason: string | null, source: CancellationSource): boolean {
    if (this.cancelled || this.#finished) return false
    this.#controller.abort(new RequestCancelledError(reason, source))
    if (source === 'client' || source === 'disconnect') {
      this.channel.abandon()
    } else {
      this.channel.respond(errorResponse(this.id, { code: ErrorCode.RequestCancelled, message: 'Request cancelled', data: { reason } }))
    }
    this.#onCancelled(this, reason, source)
    return true
  }

  /** Sends `notifications/progress` when the request asked for it and `progress` grows; false when dropped. */
  progress (progress: number, total?: number, message?: string): boolean {
    if (this.progressToken === undefined || this.cancelled || !Number.isFinite(progress) || progress <= this.#lastProgress) return false
    this.#lastProgress = progress
    const params: JsonObject = { progressToken: this.progressToken, progress }
    if (total !== undefined) params.total = total
    if (message !== undefined) params.message = message
    return this.channel.notify({ jsonrpc: '2.0', method: 'notifications/progress', params })
  }

  /** Sends `notifications/message` at `level` when the request's era and level allow it; false when dropped. */
  log (level: LoggingLevel, data: unknown, logger?: string): boolean {
    if (this.cancelled || LOGGING_LEVELS.indexOf(level) < this.#logThreshold) return false
    const params: JsonObject = { level, data }
    if (logger !== undefined) params.logger = logger
    return this.channel.notify({ jsonrpc: '2.0', method: 'notifications/message', params })
  }
}
