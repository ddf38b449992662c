import type { IncomingMessage } from 'node:http'
import type { FastifyRequest } from 'fastify'
import { ErrorCode, isRequestId, ProtocolError, type JsonObject, type RequestId } from '../core/jsonrpc.js'
import { sanitizeReason } from '../core/sanitize.js'
import { cleanupChannel, requestCancelledChannel, type RequestCancelledEvent } from '../core/events.js'
import type { Exchange, ExchangeTracker } from './exchange.js'
import type { CancellationSource } from '../core/vocabulary.js'
import { MemoryCancellationStore } from './memory-cancellation-store.js'
import { noopObserver, type RequestObserver } from '../observability/observer.js'
import type { CancellationStore, CancelOutcome, InFlightOwner } from './cancellation-store.js'
import type { CancelOptions, McpCancellationApi } from './cancellation-api.js'

export interface RegistrySettings {
  /** Bounds of the default MemoryCancellationStore. */
  maxRows: number
  maxRowsPerScope: number
  /** Requests one scope may have running; one more is refused (429) before its handler runs. */
  maxInFlightPerScope: number
  janitorIntervalMs: number
  /** Age after which the janitor drops a cancellation row. */
  cancellationTtlMs: number
  /** Legacy era: treat a client's disconnect as cancellation (the modern era always does). */
  disconnectCancels: boolean
  /** A request running longer is cancelled with source `lifetime`. */
  maxStreamLifetimeMs: number
  /** A cancelled handler still running after this long is killed. */
  cancelTimeoutMs: number
}

/** A lifetime sweep runs ten times per lifetime, between 10 ms and 1 s apart (so it ends what outlived it to within a tenth). */
export function sweepInterval (lifetimeMs: number): number {
  return Math.min(1000, Math.max(10, Math.floor(lifetimeMs / 10)))
}

const INVALID_REQUEST_ID = 'Invalid params: notifications/cancelled requires a string (at most 256 bytes) or safe-integer requestId'

/**
 * Owns the store, the janitor timer and the link between HTTP requests and their exchanges. The
 * dispatcher calls `admit` before the handler runs, `begin` once it yields, and `finish` when the exchange
 * ends, whatever the outcome; `notifications/cancelled` comes in through `cancelFromNotification`.
 */
export class CancellationRegistry implements McpCancellationApi, ExchangeTracker {
  readonly store: CancellationStore
  readonly #settings: RegistrySettings
  readonly #scopeOf: (request: FastifyRequest) => string
  readonly #running = new Set<Exchange>()
  /** Admitted and not finished, by scope (synchronous handlers included: they are counted and released in one turn). */
  readonly #admittedPerScope = new Map<string, number>()
  #drained: (() => void) | undefined
  #janitor: NodeJS.Timeout | undefined
  #lifetimeSweep: NodeJS.Timeout | undefined

  readonly #observer: RequestObserver

  /** Without a store, a `MemoryCancellationStore` with the settings' bounds. */
  constructor (settings: RegistrySettings, scopeOf: (request: FastifyRequest) => string,
    observer: RequestObserver = noopObserver, store?: CancellationStore) {
    this.#settings = settings
    this.#scopeOf = scopeOf
    this.#observer = observer
    this.store = store ?? new MemoryCancellationStore(settings)
  }

  get rows (): number {
    return this.store.rows
  }

  get cancelTimeoutMs (): number {
    return this.#settings.cancelTimeoutMs
  }

  get inFlightRows (): number {
    return this.store.inFlightRows
  }

  /**
   * Starts the janitor and the lifetime sweep: one timer each for the whole table, not one per request.
   * The sweep cancels requests older than `maxStreamLifetimeMs` (to within a tenth of it).
   */
  startTimers (): void {
    this.#janitor = setInterval(() => { this.cleanup(this.#settings.cancellationTtlMs) }, this.#settings.janitorIntervalMs)
    this.#janitor.unref()
    const lifetime = this.#settings.maxStreamLifetimeMs
    this.#lifetimeSweep = setInterval(() => {
      const oldest = performance.now() - lifetime
      for (const exchange of this.#running) {
        if (exchange.startedAt <= oldest) exchange.cancel('maximum request lifetime exceeded', 'lifetime')
      }
    }, sweepInterval(lifetime))
    this.#lifetimeSweep.unref()
  }

  async close (): Promise<void> {
    clearInterval(this.#janitor)
    clearInterval(this.#lifetimeSweep)
    this.#janitor = undefined
    this.#lifetimeSweep = undefined
    await this.store.close?.()
  }

  /**
   * Throws the 429 of a scope that has `maxInFlightPerScope` requests running, before anything is made
   * for one more. Checked and admitted in one synchronous run (`admit` follows), so nothing can slip in
   * between.
   */
  ensureRoom (scope: string, id: RequestId): void {
    const bound = this.#settings.maxInFlightPerScope
    if ((this.#admittedPerScope.get(scope) ?? 0) < bound) return
    this.#observer.requestRefused('scope_in_flight')
    throw new ProtocolError(ErrorCode.ServerError, `Too many requests in flight: this client has ${bound} running (maxInFlightPerScope); try again shortly`, {
      id, httpStatus: 429, headers: { 'retry-after': '1' }
    })
  }

  /** Before the handler runs: counted in its scope; the client may have left while the body was being checked. */
  admit (exchange: Exchange): void {
    this.#admittedPerScope.set(exchange.scope, (this.#admittedPerScope.get(exchange.scope) ?? 0) + 1)
    if (exchange.sink.clientGone) this.#disconnect(exchange)
  }

  /**
   * Tracks an exchange whose handler is still running after its synchronous start. Until then no other
   * code can run, so nothing could look the request up (but the handler itself): a handler that answers
   * synchronously is never tracked. `initialize` is never in the store: it must not be cancelled.
   */
  begin (exchange: Exchange): void {
    this.#running.add(exchange)
    this.#observer.inFlight(1)
    if (exchange.method !== 'initialize') this.store.track(exchange.id, exchange.scope, exchange)
  }

  /**
   * The exchange has ended. Untracks, then clears: untracking first means no new row can appear for this
   * request after the clear. (A cancellation row can exist for a request never tracked: the library's
   * `cancel` records one for any id.)
   */
  finish (exchange: Exchange): void {
    const admitted = this.#admittedPerScope.get(exchange.scope)!
    if (admitted > 1) this.#admittedPerScope.set(exchange.scope, admitted - 1)
    else this.#admittedPerScope.delete(exchange.scope)
    if (this.#running.delete(exchange)) {
      this.#observer.inFlight(-1)
      this.store.untrack(exchange.id, exchange.scope, exchange)
      if (this.#running.size === 0) this.#drained?.()
    }
    // Another request reusing the id in this scope keeps the row until it ends too.
    if (this.store.rows > 0 && !this.store.inFlight(exchange.id, exchange.scope)) this.store.clear(exchange.id, exchange.scope)
  }

  /**
   * The client closed the connection before the response to `raw` was complete. A resumable stream
   * pauses instead: its client may come back (`givenUp` ends the wait).
   */
  disconnected (raw: IncomingMessage): void {
    for (const exchange of this.#exchangesOf(raw)) if (exchange.sink.resumable !== true) this.#disconnect(exchange)
  }

  /** Nobody resumed the paused stream of `raw` within its window: the disconnect counts now. */
  givenUp (raw: IncomingMessage): void {
    for (const exchange of this.#exchangesOf(raw)) this.#disconnect(exchange)
  }

  /**
   * Graceful shutdown: every running request is cancelled (reason `shutdown`; a connected client gets
   * -32800 and its stream ends), then handlers get at most `timeoutMs` to settle; the kill timeout of
   * each exchange gives up on the rest.
   */
  async shutdown (timeoutMs: number): Promise<void> {
    if (this.#running.size === 0) return
    const drained = new Promise<void>(resolve => { this.#drained = resolve })
    for (const exchange of [...this.#running]) exchange.cancel('shutdown', 'server')
    let timer: NodeJS.Timeout | undefined
    await Promise.race([drained, new Promise<void>(resolve => { timer = setTimeout(resolve, timeoutMs) })])
    clearTimeout(timer)
  }

  /**
   * `notifications/cancelled` of the legacy era. Absent params or requestId are ignored (fire and forget);
   * malformed ones are a 400; a full quota is a 429. Only a request in flight in the caller's scope is
   * ever touched.
   */
  async cancelFromNotification (params: JsonObject | undefined, scope: string): Promise<CancelOutcome | 'invalid'> {
    const requestId = params?.requestId
    if (requestId === undefined || requestId === null) return 'ignored'
    if (!isRequestId(requestId)) throw new ProtocolError(ErrorCode.InvalidParams, INVALID_REQUEST_ID, { httpStatus: 400 })
    const outcome = await this.store.cancelInFlight(requestId, sanitizeReason(params?.reason), scope)
    if (outcome === 'rejected') {
      throw new ProtocolError(ErrorCode.ServerError, 'Too many outstanding cancellations; try again shortly', {
        httpStatus: 429, headers: { 'retry-after': '1' }
      })
    }
    return outcome
  }

  /**
   * Called by every exchange that gets cancelled, whatever the source: one event and one log line per
   * cancelled request. (Client cancellations are counted where the notification is handled, with
   * their result; the server-side ones here.)
   */
  readonly exchangeCancelled = (exchange: Exchange, reason: string | null, source: CancellationSource): void => {
    if (source !== 'client') this.#observer.cancellation(source, 'recorded')
    const { log } = exchange.request
    const tool = exchange.method === 'tools/call' && typeof exchange.params.name === 'string' ? exchange.params.name : undefined
    log.info({ source, method: exchange.method, tool, reason }, 'MCP request cancelled')
    log.debug({ scope: exchange.scope, requestId: exchange.id }, 'MCP request cancelled in scope')
    if (requestCancelledChannel.hasSubscribers) {
      const event: RequestCancelledEvent = { requestId: exchange.id, scope: exchange.scope, reason, source }
      requestCancelledChannel.publish({ ...event, registry: this })
    }
  }

  /**
   * The exchange became a task. Its JSON-RPC id is a small number a client guesses easily, while a task
   * is cancelled by its 128-bit id: the id leaves the table (so neither `notifications/cancelled` nor
   * the library's `cancel` reaches the task), and the exchange stays running for the lifetime sweep and
   * shutdown.
   */
  readonly exchangeDetached = (exchange: Exchange): void => {
    this.store.untrack(exchange.id, exchange.scope, exchange)
  }

  cancel (options: CancelOptions): CancelOutcome | 'invalid' {
    // An options object, so that a reason and a scope (both strings) cannot be swapped unnoticed.
    if (typeof options !== 'object' || options === null || typeof options.scope !== 'string') {
      throw new TypeError('cancel takes { requestId, scope, reason? } with a string scope')
    }
    const { requestId, scope, reason = null } = options
    return isRequestId(requestId) ? this.store.cancel(requestId, sanitizeReason(reason), scope) : 'invalid'
  }

  cancelled (requestId: unknown, scope: string): boolean {
    return isRequestId(requestId) && this.store.row(requestId, scope) !== undefined
  }

  reason (requestId: unknown, scope: string): string | null {
    return isRequestId(requestId) ? this.store.row(requestId, scope)?.reason ?? null : null
  }

  clear (requestId: unknown, scope: string): void {
    if (isRequestId(requestId)) this.store.clear(requestId, scope)
  }

  track (requestId: unknown, scope: string, owner: InFlightOwner = {}): InFlightOwner {
    if (isRequestId(requestId)) this.store.track(requestId, scope, owner)
    return owner
  }

  untrack (requestId: unknown, scope: string, owner: InFlightOwner): void {
    if (isRequestId(requestId)) this.store.untrack(requestId, scope, owner)
  }

  inFlight (requestId: unknown, scope: string): boolean {
    return isRequestId(requestId) && this.store.inFlight(requestId, scope)
  }

  cleanup (ttlMs: number): number {
    const result = this.store.cleanup(ttlMs)
    if (cleanupChannel.hasSubscribers) cleanupChannel.publish({ ...result, registry: this })
    return result.removed
  }

  validRequestId (value: unknown): value is RequestId {
    return isRequestId(value)
  }

  scope (request: FastifyRequest): string {
    return this.#scopeOf(request)
  }

  #disconnect (exchange: Exchange): void {
    // Legacy revisions say a disconnect SHOULD NOT cancel; a response that cannot resume can never be
    // delivered, and one that could was not resumed in time: `disconnectCancels` decides.
    if (exchange.binding.policy.disconnectAlwaysCancels || this.#settings.disconnectCancels) exchange.cancel('client disconnected', 'disconnect')
  }

  cancelRequest (request: FastifyRequest, reason: unknown = null): boolean {
    const exchanges = this.#exchangesOf(request.raw)
    const sanitized = sanitizeReason(reason)
    for (const exchange of exchanges) exchange.cancel(sanitized, 'server')
    return exchanges.length > 0
  }

  /**
   * The exchanges an HTTP request still carries (a task's no longer: its response was answered). A scan
   * of the running exchanges: disconnects and server-side cancels are rare, and a per-request index (a
   * WeakMap) would cost every request an ephemeron the garbage collector has to trace.
   */
  #exchangesOf (raw: IncomingMessage): Exchange[] {
    const exchanges: Exchange[] = []
    for (const exchange of this.#running) if (exchange.request.raw === raw && !exchange.detached) exchanges.push(exchange)
    return exchanges
  }
}
