import type { FastifyRequest } from 'fastify'
import { Exchange } from '../lifecycle/exchange.js'
import type { CancellationRegistry } from '../lifecycle/registry.js'
import type { CancelOutcome } from '../lifecycle/cancellation-store.js'
import type { Identity } from '../identity/identity.js'
import type { Authenticator } from '../identity/authenticator.js'
import type { RequestObserver, ToolOutcome } from '../observability/observer.js'
import type { HandledMethod, McpServer, MethodSpec, StreamedMethod } from '../server/mcp-server.js'
import type { ListenerSink } from '../events/listener.js'
import type { ResponseSink } from '../core/vocabulary.js'
import { bindEra, claimedEra, type EraBinding } from '../protocol/era.js'
import { methodNotFound } from '../protocol/era-policy.js'
import { headerValue } from '../protocol/header-values.js'
import { isPromiseLike, type MaybePromise } from '../core/maybe-async.js'
import { ErrorCode, errorResponse, ProtocolError, resultResponse, type JsonObject, type JsonRpcErrorObject, type JsonRpcResponse, type RequestId } from '../core/jsonrpc.js'
import type { IncomingMessage } from '../protocol/message.js'
import { sanitizeText } from '../core/sanitize.js'
import { INPUT_METHODS, type InputRound, type InputRounds } from '../input/input-round.js'
import { InputRequired } from '../core/errors.js'
import type { StreamedInputs } from '../input/streamed-inputs.js'
import { ClientInputError } from '../core/errors.js'
import { eraOf, type SupportedVersions } from '../protocol/versions.js'
import type { Operation, Tracing } from '../observability/tracing.js'
import { Invocation, type InvocationServices } from '../server/invocation.js'

/** How a request was answered: a result, a tool's `isError` result, or a JSON-RPC error. */
type Answer = 'result' | 'isError' | 'error'

export type Request = Extract<IncomingMessage, { kind: 'request' }>
export type Notification = Extract<IncomingMessage, { kind: 'notification' }>
export type Response = Extract<IncomingMessage, { kind: 'response' }>

/** A request bound to its era, method and scope: everything decided before its handler may run. */
export interface PreparedRequest {
  message: Request
  binding: EraBinding
  method: MethodSpec
  scope: string
  /** The modern input round the request continues, if it carries one. */
  round: InputRound | undefined
}

/**
 * Takes one checked JSON-RPC message from the transport to the server. Everything decided before a
 * handler runs (era, headers, session, method lookup) throws a `ProtocolError` that the transport writes
 * with its HTTP status; once the exchange exists, every outcome goes to the exchange's response sink.
 */
export class Dispatcher {
  readonly #server: McpServer
  readonly #versions: SupportedVersions
  readonly #identity: Identity
  readonly #registry: CancellationRegistry
  readonly #observer: RequestObserver
  readonly #asks: StreamedInputs
  readonly #inputs: InputRounds
  readonly #services: InvocationServices
  readonly #tracing: Tracing | undefined
  readonly #authenticator: Authenticator | undefined

  constructor (parts: {
    server: McpServer
    versions: SupportedVersions
    identity: Identity
    registry: CancellationRegistry
    progressIntervalMs: number
    observer: RequestObserver
    inputs: InputRounds
    asks: StreamedInputs
    tracing: Tracing | undefined
    authenticator: Authenticator | undefined
  }) {
    this.#server = parts.server
    this.#versions = parts.versions
    this.#identity = parts.identity
    this.#registry = parts.registry
    this.#observer = parts.observer
    this.#inputs = parts.inputs
    this.#asks = parts.asks
    this.#tracing = parts.tracing
    this.#authenticator = parts.authenticator
    this.#services = { progressIntervalMs: parts.progressIntervalMs, rounds: parts.inputs, asks: parts.asks, tasks: parts.server.tasks }
  }

  /** Binds the request to its era, scope and method; what fails here is counted (and traced) and thrown to the transport. */
  prepare (message: Request, request: FastifyRequest): PreparedRequest {
    try {
      return this.#prepare(message, request)
    } catch (error) {
      this.#observer.requestFinished(this.#server.served(message.method) ? message.method : 'other', 'error', 0)
      this.#tracing?.begin(message.method, message.params, message.id, undefined, request)?.end({ error: errorObject(error) })
      throw error
    }
  }

  #prepare (message: Request, request: FastifyRequest): PreparedRequest {
    const binding = bindEra(message.method, message.params, message.id, request.headers, this.#versions)
    const scope = this.#identity.resolve(request, binding.era, message.method, message.id)
    let round: InputRound | undefined
    const method = this.#server.method(message.method, binding.era)
    // Who may call it comes first; a refusal travels with its own status (401/403) in every era.
    const refusal = method === undefined ? undefined : this.#scopeRefusal(method, message, request)
    if (refusal !== undefined) {
      refusal.id = message.id
      throw refusal
    }
    try {
      if (method === undefined) throw methodNotFound(sanitizeText(message.method))
      method.preflight?.(message.params, binding, request.headers)
      // A retried round is checked before its handler may run: a bad state never reaches it.
      if (binding.era === 'modern' && INPUT_METHODS.includes(message.method)) round = this.#inputs.open(message.method, message.params, scope)
    } catch (error) {
      if (!(error instanceof ProtocolError)) throw error
      error.id = message.id
      // These are the method's own errors: they travel with the status the era gives them.
      throw error.withHttpStatus(binding.policy.methodErrorStatus(error))
    }
    // A stream (listen) has its own bound; `run` admits the request in the same synchronous turn.
    if (!('stream' in method)) this.#registry.ensureRoom(scope, message.id)
    return { message, binding, method, scope, round }
  }

  /**
   * The 401/403 of a request whose principal lacks an OAuth scope its operation needs (the operation's
   * and the plugin-wide ones in one challenge), or undefined. Without `auth`, or for a method that
   * declares no scopes, nothing is computed.
   */
  #scopeRefusal (method: MethodSpec, message: Request, request: FastifyRequest): ProtocolError | undefined {
    if (this.#authenticator === undefined || method.scopes === undefined) return undefined
    const needed = this.#neededScopes(method, message)
    return needed.length === 0 ? undefined : this.#authenticator.scopeRefusal(request.mcpPrincipal, needed)
  }

  /** The OAuth scopes a request's operation needs, the plugin-wide ones included (none when it declares none). */
  neededScopes (message: Request): readonly string[] {
    const method = this.#server.method(message.method, 'modern') ?? this.#server.method(message.method, 'legacy')
    return method === undefined ? [] : this.#neededScopes(method, message)
  }

  #neededScopes (method: MethodSpec, message: Request): readonly string[] {
    const needed = method.scopes?.(message.params ?? {}) ?? []
    return needed.length === 0 || this.#authenticator === undefined ? needed : this.#authenticator.withRequiredScopes(needed)
  }

  /**
   * Runs a prepared request to its end: a result, a JSON-RPC error, or (once cancelled) nothing. The
   * exchange is tracked before the handler starts and ended whatever happens. A handler that answers
   * synchronously is ended synchronously (no promise); otherwise the returned promise settles with it.
   */
  run ({ message, binding, method, scope, round }: PreparedRequest, request: FastifyRequest, sink: ResponseSink): Promise<void> | undefined {
    if ('stream' in method) throw new TypeError(`${message.method} answers with a stream: listen() opens it`)
    const exchange = new Exchange({ request, id: message.id, method: message.method, params: message.params, binding, scope, sink, tracker: this.#registry })
    this.#registry.admit(exchange)
    const operation = this.#tracing?.begin(message.method, message.params, message.id, binding.version, request)
    if (operation !== undefined) this.#trace(exchange, operation)
    const invocation = new Invocation(exchange, this.#services, round, operation)
    let outcome: MaybePromise<JsonObject>
    try {
      outcome = operation === undefined ? method.handler(invocation) : operation.run(() => method.handler(invocation))
    } catch (error) {
      this.#fail(invocation, method, error)
      return undefined
    }
    if (isPromiseLike(outcome)) {
      this.#registry.begin(exchange)
      return this.#settle(invocation, method, outcome)
    }
    this.#succeed(invocation, method, outcome)
    return undefined
  }

  /**
   * Opens the stream a streamed method answers with (`subscriptions/listen`). What is refused before
   * anything is written is thrown to the transport as any request's error, with its status; the stream then lives until
   * its client closes it or the server ends it, and counts (and is traced) as one request that long.
   */
  async listen ({ message, binding, method, scope }: PreparedRequest, request: FastifyRequest, sink: ListenerSink): Promise<void> {
    const operation = this.#tracing?.begin(message.method, message.params, message.id, binding.version, request)
    const startedAt = performance.now()
    const end = (error?: JsonRpcErrorObject): void => {
      this.#observer.requestFinished(message.method, error === undefined ? 'ok' : 'error', (performance.now() - startedAt) / 1000)
      operation?.end({ error })
    }
    try {
      if (!sink.acceptsStream) {
        throw new ProtocolError(ErrorCode.InvalidRequest, `Not Acceptable: ${message.method} answers with text/event-stream`, { httpStatus: 406 })
      }
      const opened = await (method as StreamedMethod).stream({
        id: message.id,
        params: message.params,
        scope,
        clientCapabilities: binding.clientCapabilities,
        sink,
        onNotified: operation === undefined ? undefined : kind => { operation.notified(kind) },
        onEnd: () => { end() }
      })
      // Its client left while it was being opened.
      if (!opened) end()
    } catch (error) {
      // Nothing was written: the transport answers the refusal with its status and headers (Retry-After).
      end(errorObject(error))
      if (!(error instanceof ProtocolError)) throw error
      error.id = message.id
      throw error.withHttpStatus(binding.policy.methodErrorStatus(error))
    }
  }

  /** The request's span hears of its cancellation and of a kill as they happen. */
  #trace (exchange: Exchange, operation: Operation): void {
    exchange.onCancel((reason, source) => { operation.cancelled(source, reason) })
    exchange.onKill(() => { operation.killed(this.#registry.cancelTimeoutMs) })
    exchange.sink.onStreamState?.(state => { operation.streamState(state) })
  }

  async #settle (invocation: Invocation, method: HandledMethod, pending: PromiseLike<JsonObject>): Promise<void> {
    let result: JsonObject
    try {
      result = await invocation.exchange.settle(pending)
    } catch (error) {
      this.#fail(invocation, method, error)
      return
    }
    this.#succeed(invocation, method, result)
  }

  /**
   * Answers a handler's result (nothing once cancelled) where the exchange answers now: its HTTP
   * response, or its task. A result that cannot be sent is answered as an error.
   */
  #succeed (invocation: Invocation, method: HandledMethod, result: JsonObject): void {
    const { exchange } = invocation
    const sink = exchange.sink
    try {
      if (exchange.cancelled) {
        sink.abandon()
      } else {
        invocation.flushProgress()
        sink.respond(resultResponse(exchange.id, this.#server.finishResult(result, method, exchange.binding.era)))
      }
    } catch (error) {
      this.#fail(invocation, method, error)
      return
    }
    // A tool's `isError` result is an answer, not a JSON-RPC error: it only fails the tool.
    this.#end(invocation, result.isError === true ? 'isError' : 'result')
  }

  #fail (invocation: Invocation, method: HandledMethod, error: unknown): void {
    const { exchange } = invocation
    if (error instanceof InputRequired && !exchange.cancelled) {
      // Not a failure: the round ends, asking the client for what the handler needs.
      let result: JsonObject | undefined
      try {
        result = invocation.inputRequired(error)
      } catch (sealing) {
        error = sealing
      }
      if (result !== undefined) return this.#succeed(invocation, method, result)
    }
    const sink = exchange.sink
    let response: JsonRpcResponse | undefined
    try {
      if (exchange.killed) {
        const tool = exchange.method === 'tools/call' ? this.#server.tools.registeredName(exchange.params.name) : undefined
        exchange.request.log.warn({ requestId: exchange.id, method: exchange.method, tool }, (error as Error).message)
      }
      if (exchange.cancelled) {
        sink.abandon()
      } else {
        response = this.#errorResponse(error, exchange.id, exchange.request)
        sink.respond(response, error instanceof ProtocolError ? exchange.binding.policy.methodErrorStatus(error) : 200)
      }
    } finally {
      this.#end(invocation, 'error', response?.error)
    }
  }

  #end ({ exchange, operation }: Invocation, answered: Answer, error?: JsonRpcErrorObject): void {
    exchange.finish()
    this.#registry.finish(exchange)
    this.#observe(exchange, (performance.now() - exchange.startedAt) / 1000, answered)
    const source = exchange.cancellationSource
    operation?.end({
      error, toolError: answered === 'isError', killed: exchange.killed, cancelled: source === undefined ? undefined : { source, at: exchange.cancelledAt }
    })
  }

  #observe (exchange: Exchange, seconds: number, answered: Answer): void {
    const source = exchange.cancellationSource
    if (source !== undefined) this.#observer.cancelStopped(source, (performance.now() - exchange.cancelledAt) / 1000)
    const cancelled = source !== undefined
    this.#observer.requestFinished(exchange.method, cancelled ? 'cancelled' : answered === 'error' ? 'error' : 'ok', seconds)
    const tool = exchange.method === 'tools/call' ? this.#server.tools.registeredName(exchange.params.name) : undefined
    if (tool === undefined) return
    const outcome: ToolOutcome = exchange.killed ? 'killed' : cancelled ? 'cancelled' : answered === 'result' ? 'ok' : 'error'
    this.#observer.toolFinished(tool, outcome)
  }

  /**
   * Notifications need no answer but 202. `notifications/cancelled` reaches the registry in the legacy
   * era. The modern era cancels by closing the stream, so a modern-era `notifications/cancelled` is
   * accepted and ignored before anything in it is checked: nothing in it is used, and stdio→HTTP bridges
   * send it without `_meta` or `Mcp-Method`. Every other notification is bound (and checked) as a request is.
   */
  async notify (message: Notification, request: FastifyRequest): Promise<CancelOutcome | 'invalid' | undefined> {
    const operation = this.#tracing?.begin(message.method, message.params, undefined, undefined, request)
    if (operation === undefined) return await this.#notify(message, request)
    try {
      // Active while the notification is handled: a cancellation it causes links back to it.
      const outcome = await operation.run(async () => await this.#notify(message, request))
      operation.end({})
      return outcome
    } catch (error) {
      operation.end({ error: errorObject(error) })
      throw error
    }
  }

  async #notify (message: Notification, request: FastifyRequest): Promise<CancelOutcome | 'invalid' | undefined> {
    if (message.method === 'notifications/cancelled' &&
      claimedEra(message.method, message.params, headerValue(request.headers, 'mcp-protocol-version')) === 'modern') {
      this.#identity.resolve(request, 'modern', message.method, undefined)
      return undefined
    }
    const binding = bindEra(message.method, message.params, undefined, request.headers, this.#versions)
    const scope = this.#identity.resolve(request, binding.era, message.method, undefined)
    // A notifications/cancelled that gets here is legacy: the modern one returned above.
    if (message.method !== 'notifications/cancelled') return undefined
    try {
      const outcome = await this.#registry.cancelFromNotification(message.params, scope)
      this.#observer.cancellation('client', outcome)
      return outcome
    } catch (error) {
      if (error instanceof ProtocolError) this.#observer.cancellation('client', error.httpStatus === 429 ? 'rejected' : 'invalid')
      throw error
    }
  }

  /**
   * A legacy client's answer to a request of the server (elicitation, sampling, roots): checked in the
   * scope of the POST that carries it, then delivered to the waiting handler on whichever node asked.
   * Modern clients send no responses: theirs is a 400.
   */
  answer (message: Response, request: FastifyRequest): void {
    const version = headerValue(request.headers, 'mcp-protocol-version')
    if (version !== undefined && eraOf(version) === 'modern') {
      throw new ProtocolError(ErrorCode.InvalidRequest, 'Invalid Request: clients must not send JSON-RPC responses', { httpStatus: 400 })
    }
    // A response has no method; what is checked is its version header and its session.
    bindEra('', undefined, undefined, request.headers, this.#versions)
    const scope = this.#identity.resolve(request, 'legacy', '', undefined)
    // In the answer POST's trace context: the ask's span links to it, here or (over the bus) on the node that asked.
    const tracing = this.#tracing
    if (tracing === undefined) this.#asks.receive(message.id, message.result, message.error, scope)
    else tracing.withinRequest(request, () => { this.#asks.receive(message.id, message.result, message.error, scope) })
  }

  #errorResponse (error: unknown, id: RequestId, request: FastifyRequest): JsonRpcResponse {
    if (error instanceof ProtocolError) {
      error.id = id
      return error.toResponse()
    }
    // Outside a tool (which answers it as an isError result), a failed ask is an error with its reason:
    // the client's own when its answer was invalid.
    if (error instanceof ClientInputError) {
      return errorResponse(id, { code: error.failure === 'invalid' ? ErrorCode.InvalidParams : ErrorCode.InternalError, message: error.message })
    }
    // Handler bugs are logged in full and answered without detail: no stack trace crosses the wire.
    request.log.error({ err: error }, 'MCP request handler failed')
    return errorResponse(id, { code: ErrorCode.InternalError, message: 'Internal error' })
  }
}

/** The JSON-RPC error a failure before (or outside) a handler is answered with. */
function errorObject (error: unknown): JsonRpcErrorObject {
  return error instanceof ProtocolError ? { code: error.code, message: error.message } : { code: ErrorCode.InternalError, message: 'Internal error' }
}
