import type { FastifyRequest } from 'fastify'
import type { EraBinding, LoggingLevel } from '../protocol/era.js'
import { LOGGING_LEVELS } from '../protocol/era.js'
import { ErrorCode, errorResponse, isJsonObject, type JsonObject, type RequestId } from '../core/jsonrpc.js'
import type { Era } from '../protocol/versions.js'
import type { CancellationSource, ResponseSink } from '../core/vocabulary.js'
import type { InputRound, InputRounds } from '../input/input-round.js'
import type { ClientAsks } from '../input/client-asks.js'
import type { Tasks } from '../tasks/tasks.js'
import type { Operation, Tracing } from '../observability/tracing.js'
import { HandlerKilledError, RequestCancelledError } from '../core/cancellation-errors.js'

export type ProgressToken = string | number
export type CancellationListener = (exchange: Exchange, reason: string | null, source: CancellationSource) => void

export interface ExchangeTimings {
  /** A cancelled handler still running after this long is killed. */
  cancelTimeoutMs: number
  /** At most one progress notification per interval; the latest value wins. */
  progressIntervalMs: number
}

/** What every exchange of a plugin instance shares: made once, handed to each (one reference per request, not one per service). */
export interface ExchangeServices {
  timings: ExchangeTimings
  onCancelled: CancellationListener
  /** The exchange became a task: its JSON-RPC id must stop being cancellable. */
  onDetached?: ((exchange: Exchange) => void) | undefined
  /** 2026-07-28 input rounds: where a handler's asks start one, when the request did not continue one. */
  inputs?: InputRounds | undefined
  /** Legacy-era requests to the client, sent on the request's stream. */
  asks?: ClientAsks | undefined
  /** What a tool call becomes when its handler starts a task. */
  tasks?: Tasks | undefined
  /** OpenTelemetry, unless turned off (`tracing: false`). */
  tracing?: Tracing | undefined
}

export interface ExchangeInit {
  request: FastifyRequest
  id: RequestId
  method: string
  params: JsonObject
  binding: EraBinding
  scope: string
  channel: ResponseSink
  services: ExchangeServices
  /** The input round the request continues (it carried `inputResponses` or `requestState`). */
  round?: InputRound | undefined
}

/**
 * One JSON-RPC request in flight: created before its handler runs, finished whatever the outcome. It
 * owns the request's cancellation (the AbortController is made only when a handler asks for `signal`:
 * most never do), its kill timer and its notifications, so cancellation has exactly one place to act
 * on. It is also the in-flight owner the registry tracks: a cancellation recorded for its {scope, id}
 * calls `cancel`.
 */
export class Exchange {
  readonly id: RequestId
  readonly method: string
  readonly params: JsonObject
  readonly binding: EraBinding
  readonly scope: string
  readonly request: FastifyRequest
  /** Where notifications and the response go: the HTTP response, or (once the request became a task) the task. */
  #channel: ResponseSink
  #detached = false
  readonly progressToken: ProgressToken | undefined
  readonly services: ExchangeServices
  /** The request as OpenTelemetry sees it, when an SDK listens. */
  trace: Operation | undefined
  /** `performance.now()` at creation: the registry's lifetime sweep reads it. */
  readonly startedAt = performance.now()
  #round: InputRound | undefined
  #controller: AbortController | undefined
  #cancellation: RequestCancelledError | undefined
  /** Index in LOGGING_LEVELS below which log notifications are dropped. */
  readonly #logThreshold: number
  #killHooks: Array<() => void> | undefined
  #finishHooks: Array<() => void> | undefined
  #killTimer: NodeJS.Timeout | undefined
  #kill: ((error: Error) => void) | undefined
  #killed = false
  #finished = false
  #cancelledAt = 0
  #lastProgress = -Infinity
  #progressSentAt = -Infinity
  #pendingProgress: JsonObject | undefined
  #progressTimer: NodeJS.Timeout | undefined

  constructor ({ request, id, method, params, binding, scope, channel, services, round }: ExchangeInit) {
    this.request = request
    this.id = id
    this.method = method
    this.params = params
    this.binding = binding
    this.scope = scope
    this.#channel = channel
    this.services = services
    this.#round = round
    this.trace = undefined
    const meta = params._meta
    const token = isJsonObject(meta) ? meta.progressToken : undefined
    this.progressToken = typeof token === 'string' || (typeof token === 'number' && Number.isFinite(token)) ? token : undefined
    // Stateless legacy requests cannot carry a level set by logging/setLevel, so every level goes out;
    // modern requests get messages only when they asked, at or above the level they asked for.
    this.#logThreshold = binding.era === 'legacy'
      ? 0
      : binding.logLevel === undefined ? Infinity : LOGGING_LEVELS.indexOf(binding.logLevel)
  }

  /** Legacy era: where the handler's asks wait for the client's answers. */
  get asks (): ClientAsks | undefined {
    return this.services.asks
  }

  get tasks (): Tasks | undefined {
    return this.services.tasks
  }

  get era (): Era {
    return this.binding.era
  }

  get channel (): ResponseSink {
    return this.#channel
  }

  /**
   * The request became a task: its HTTP response has been answered, and from now on its result goes
   * to `sink` (the task's record). Closing the POST no longer concerns it, nor does its JSON-RPC id:
   * only `tasks/cancel` (and the server's lifetime and shutdown) cancel a task.
   */
  detach (sink: ResponseSink): void {
    this.#channel = sink
    this.#detached = true
    this.services.onDetached?.(this)
  }

  /** True once the request became a task: its HTTP response is over, and its client's leaving is no cancellation. */
  get detached (): boolean {
    return this.#detached
  }

  get protocolVersion (): string {
    return this.binding.version
  }

  get principal (): string | null {
    return this.request.mcpPrincipal
  }

  /** The request's input round, started on the first ask when the request continues none. */
  get round (): InputRound {
    const { inputs } = this.services
    if (inputs === undefined) throw new Error(`${this.method} cannot ask the client for input`)
    return (this.#round ??= inputs.start(this.method, this.params, this.scope))
  }

  /** The round, when the request continued one or its handler asked. */
  get startedRound (): InputRound | undefined {
    return this.#round
  }

  get signal (): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController()
      if (this.#cancellation !== undefined) this.#controller.abort(this.#cancellation)
    }
    return this.#controller.signal
  }

  get cancelled (): boolean {
    return this.#cancellation !== undefined
  }

  /** The abort reason once cancelled. */
  get cancellation (): RequestCancelledError | undefined {
    return this.#cancellation
  }

  get cancellationSource (): CancellationSource | undefined {
    return this.#cancellation?.source
  }

  /** `performance.now()` at cancellation. */
  get cancelledAt (): number {
    return this.#cancelledAt
  }

  /** True when the handler outlived its kill timeout. */
  get killed (): boolean {
    return this.#killed
  }

  /** False once the handler has settled or been given up on; the janitor sweeps rows of dead owners. */
  get alive (): boolean {
    return !this.#finished
  }

  /**
   * Waits for an asynchronous handler: resolves or rejects as it does, or rejects with
   * `HandlerKilledError` when the kill timer of a cancelled exchange fires, even if it never settles.
   */
  settle<T> (pending: PromiseLike<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#kill = reject
      pending.then(resolve, reject)
    })
  }

  /** Work that can really be stopped (a worker thread) registers how; the kill timeout calls it. */
  onKill (hook: () => void): void {
    (this.#killHooks ??= []).push(hook)
  }

  /** Work that must not outlive the exchange (a wait for the client) registers how to end it. */
  onFinish (hook: () => void): void {
    (this.#finishHooks ??= []).push(hook)
  }

  finish (): void {
    if (this.#finished) return
    this.#finished = true
    for (const hook of this.#finishHooks ?? []) hook()
    clearTimeout(this.#killTimer)
    clearTimeout(this.#progressTimer)
    this.#pendingProgress = undefined
  }

  /**
   * Aborts the handler's signal and ends the HTTP side at once, without a result: nothing more may be
   * sent for a cancelled request. A client that cancelled (or left) gets no response; a client still
   * connected when the server cancels (lifetime, shutdown) is told why with -32800. The in-flight row
   * stays until the handler settles or the kill timeout fires. False when already cancelled or finished.
   */
  cancel (reason: string | null, source: CancellationSource): boolean {
    if (this.cancelled || this.#finished) return false
    this.#cancelledAt = performance.now()
    this.#cancellation = new RequestCancelledError(reason, source)
    this.#controller?.abort(this.#cancellation)
    clearTimeout(this.#progressTimer)
    this.#pendingProgress = undefined
    // The client asked (or left, or cancelled the task): nothing to tell it. The server cancels: it says why.
    if (source === 'client' || source === 'disconnect' || source === 'task') {
      this.channel.abandon()
    } else {
      this.channel.respond(errorResponse(this.id, { code: ErrorCode.RequestCancelled, message: 'Request cancelled', data: { reason } }))
    }
    this.#killTimer = setTimeout(() => { this.#forceKill() }, this.services.timings.cancelTimeoutMs)
    this.#killTimer.unref()
    this.trace?.cancelled(source, reason)
    this.services.onCancelled(this, reason, source)
    return true
  }

  /**
   * Queues `notifications/progress` when the request asked for it (a task always does: it shows
   * progress in its status message) and `progress` grows. Sends at most one per `progressIntervalMs`;
   * a faster reporter has its intermediate values coalesced into the latest. False when the value is
   * dropped.
   */
  progress (progress: number, total?: number, message?: string): boolean {
    if ((this.progressToken === undefined && !this.#detached) || this.cancelled || this.#finished ||
      !Number.isFinite(progress) || progress <= this.#lastProgress) return false
    this.#lastProgress = progress
    const params: JsonObject = { progressToken: this.progressToken ?? null, progress }
    if (total !== undefined) params.total = total
    if (message !== undefined) params.message = message
    this.#pendingProgress = params
    const wait = this.#progressSentAt + this.services.timings.progressIntervalMs - Date.now()
    if (wait <= 0) this.flushProgress()
    else this.#progressTimer ??= setTimeout(() => { this.flushProgress() }, wait)
    return true
  }

  /** Sends the coalesced progress now; the dispatcher calls it before the final response. */
  flushProgress (): void {
    // A coalescing timer that fell behind a busy event loop must not send the next value early.
    clearTimeout(this.#progressTimer)
    this.#progressTimer = undefined
    const params = this.#pendingProgress
    if (params === undefined) return
    this.#pendingProgress = undefined
    this.#progressSentAt = Date.now()
    this.channel.send({ jsonrpc: '2.0', method: 'notifications/progress', params })
  }

  /** Sends `notifications/message` at `level` when the request's era and level allow it; false when dropped. */
  log (level: LoggingLevel, data: unknown, logger?: string): boolean {
    if (this.cancelled || this.#finished || LOGGING_LEVELS.indexOf(level) < this.#logThreshold) return false
    const params: JsonObject = { level, data }
    if (logger !== undefined) params.logger = logger
    return this.channel.send({ jsonrpc: '2.0', method: 'notifications/message', params })
  }

  #forceKill (): void {
    this.#killed = true
    this.trace?.killed(this.services.timings.cancelTimeoutMs)
    for (const hook of this.#killHooks ?? []) hook()
    this.#kill?.(new HandlerKilledError(this.services.timings.cancelTimeoutMs))
  }
}
