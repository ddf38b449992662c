import type { FastifyRequest } from 'fastify'
import type { EraBinding } from '../protocol/era.js'
import { ErrorCode, errorResponse, type JsonObject, type RequestId } from '../core/jsonrpc.js'
import type { Era } from '../protocol/versions.js'
import type { CancellationSource, ResponseSink } from '../core/vocabulary.js'
import { HandlerKilledError, RequestCancelledError } from '../core/errors.js'
import type { McpPrincipal } from '../identity/principal.js'

export type CancellationListener = (exchange: Exchange, reason: string | null, source: CancellationSource) => void

/** Where every exchange of a plugin instance reports (the cancellation registry), and the kill timeout it applies. */
export interface ExchangeTracker {
  /** A cancelled handler still running after this long is killed. */
  readonly cancelTimeoutMs: number
  /** Called once per exchange that gets cancelled, whatever the source. */
  readonly exchangeCancelled: CancellationListener
  /** The exchange became a task: its JSON-RPC id must stop being cancellable. */
  readonly exchangeDetached: (exchange: Exchange) => void
}

export interface ExchangeInit {
  request: FastifyRequest
  id: RequestId
  method: string
  params: JsonObject
  binding: EraBinding
  scope: string
  sink: ResponseSink
  tracker: ExchangeTracker
}

/**
 * One JSON-RPC request in flight, from before its handler runs until it ends, whatever the outcome: its
 * cancellation (the AbortController is made only when a handler asks for `signal`: most never do), its
 * kill timer, and where its response goes. It knows nothing of what the handler does: what runs on the
 * request's behalf attaches through `onCancel`, `onKill` and `onFinish`. It is also the in-flight owner
 * the registry tracks: a cancellation recorded for its {scope, id} calls `cancel`.
 */
export class Exchange {
  readonly id: RequestId
  readonly method: string
  readonly params: JsonObject
  readonly binding: EraBinding
  readonly scope: string
  readonly request: FastifyRequest
  /** Where notifications and the response go: the HTTP response, or (once the request became a task) the task. */
  #sink: ResponseSink
  #detached = false
  readonly #tracker: ExchangeTracker
  /** `performance.now()` at creation: the registry's lifetime sweep reads it. */
  readonly startedAt = performance.now()
  #controller: AbortController | undefined
  #cancellation: RequestCancelledError | undefined
  #cancelHooks: Array<(reason: string | null, source: CancellationSource) => void> | undefined
  #killHooks: Array<() => void> | undefined
  #finishHooks: Array<() => void> | undefined
  #killTimer: NodeJS.Timeout | undefined
  #kill: ((error: Error) => void) | undefined
  #killed = false
  #finished = false
  #cancelledAt = 0

  constructor ({ request, id, method, params, binding, scope, sink, tracker }: ExchangeInit) {
    this.request = request
    this.id = id
    this.method = method
    this.params = params
    this.binding = binding
    this.scope = scope
    this.#sink = sink
    this.#tracker = tracker
  }

  get era (): Era {
    return this.binding.era
  }

  get sink (): ResponseSink {
    return this.#sink
  }

  /**
   * The request became a task: its HTTP response has been answered, and from now on its result goes
   * to `sink` (the task's record). Closing the POST no longer concerns it, nor does its JSON-RPC id:
   * only `tasks/cancel` (and the server's lifetime and shutdown) cancel a task.
   */
  detach (sink: ResponseSink): void {
    this.#sink = sink
    this.#detached = true
    this.#tracker.exchangeDetached(this)
  }

  /** True once the request became a task: its HTTP response is over, and its client's leaving is no cancellation. */
  get detached (): boolean {
    return this.#detached
  }

  get protocolVersion (): string {
    return this.binding.version
  }

  get principal (): McpPrincipal | null {
    return this.request.mcpPrincipal
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

  /** Work done for the request that must hear of its cancellation at once (tracing, progress) registers here. */
  onCancel (hook: (reason: string | null, source: CancellationSource) => void): void {
    (this.#cancelHooks ??= []).push(hook)
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
    for (const hook of this.#cancelHooks ?? []) hook(reason, source)
    // The client asked (or left, or cancelled the task): nothing to tell it. The server cancels: it says why.
    if (source === 'client' || source === 'disconnect' || source === 'task') {
      this.#sink.abandon()
    } else {
      this.#sink.respond(errorResponse(this.id, { code: ErrorCode.RequestCancelled, message: 'Request cancelled', data: { reason } }))
    }
    this.#killTimer = setTimeout(() => { this.#forceKill() }, this.#tracker.cancelTimeoutMs)
    this.#killTimer.unref()
    this.#tracker.exchangeCancelled(this, reason, source)
    return true
  }

  #forceKill (): void {
    this.#killed = true
    for (const hook of this.#killHooks ?? []) hook()
    this.#kill?.(new HandlerKilledError(this.#tracker.cancelTimeoutMs))
  }
}
