import { createHash } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import {
  context, createNoopMeter, metrics, propagation, ProxyTracerProvider, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace,
  type Attributes, type Context, type Histogram, type MeterProvider, type Span, type Tracer, type TracerProvider
} from '@opentelemetry/api'
import type { JsonObject, JsonRpcErrorObject, RequestId } from '../core/jsonrpc.js'
import { sanitizeText } from '../core/sanitize.js'
import { eraOf } from '../protocol/versions.js'
import type { CancellationSource, StreamState } from '../core/vocabulary.js'
import { activeCarrier, carriedContext } from './trace-context.js'
import type { NotificationKind } from './observer.js'

/*
 * Names of the OpenTelemetry MCP semantic conventions (status Development), copied here as the
 * conventions package asks of instrumentations, and the few of our own (`mcp.cancellation.*`).
 */
const METHOD = 'mcp.method.name'
const PROTOCOL_VERSION = 'mcp.protocol.version'
const SESSION_ID = 'mcp.session.id'
const RESOURCE_URI = 'mcp.resource.uri'
const REQUEST_ID = 'jsonrpc.request.id'
const TOOL_NAME = 'gen_ai.tool.name'
const PROMPT_NAME = 'gen_ai.prompt.name'
const OPERATION_NAME = 'gen_ai.operation.name'
const ERROR_TYPE = 'error.type'
/** Being renamed `rpc.status_code` upstream: one constant to change. */
const STATUS_CODE = 'rpc.response.status_code'
const CANCELLATION_SOURCE = 'mcp.cancellation.source'
const CANCELLATION_REASON = 'mcp.cancellation.reason'
const OTHER_METHOD = '_OTHER'
/** The span of a request refused for its credentials (no MCP method was read). */
const REFUSED_SPAN = 'mcp authorization'
const DURATION_METRIC = 'mcp.server.operation.duration'
/** The conventions' advice for every MCP duration histogram. */
const DURATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]
const URI_GRAPHEMES = 512
const REQUEST_ID_GRAPHEMES = 128

/** The notifications a client sends a server (MCP 2025-03-26 … 2026-07-28): named as themselves, any other is `_OTHER`. */
const CLIENT_NOTIFICATIONS: readonly string[] = [
  'notifications/cancelled', 'notifications/initialized', 'notifications/progress', 'notifications/roots/list_changed'
]

/** Cancellations the client (or, for a task, its caller) asked for: not errors of the operation. */
const CALLER_SOURCES: readonly CancellationSource[] = ['client', 'disconnect', 'task']

/** The provider every api copy answers with while no SDK is registered. */
const NOOP_TRACER_PROVIDER = new ProxyTracerProvider().getDelegate()
const NOOP_METER = createNoopMeter()

export interface TracingSettings {
  /** The instrumentation scope: this package's name and version. */
  name: string
  version: string
  /** True for a method the server serves (any other is recorded as `_OTHER`: client-sent names could be anything). */
  served: (method: string) => boolean
  /** The registered tool, or prompt, a request names; undefined for a name nobody registered. */
  tool: (name: unknown) => string | undefined
  prompt: (name: unknown) => string | undefined
}

/** How an operation ended, as far as OpenTelemetry cares. */
export interface OperationEnd {
  /** The JSON-RPC error answered. */
  error?: JsonRpcErrorObject | undefined
  /** A tool answered `isError: true`. */
  toolError?: boolean | undefined
  /** The operation was cancelled: by whom, and when (`performance.now()`). */
  cancelled?: { source: CancellationSource, at: number } | undefined
  /** Its handler outlived the kill timeout. */
  killed?: boolean | undefined
}

/**
 * One MCP request or notification as OpenTelemetry sees it: its SERVER span (when an SDK records
 * spans), the context its handler runs in, and its entry in `mcp.server.operation.duration` (when a
 * meter provider is registered).
 */
export class Operation {
  readonly span: Span | undefined
  readonly #tracer: Tracer | undefined
  readonly #context: Context | undefined
  /** Low-cardinality attributes, shared by the span and the duration metric. */
  readonly #attributes: Attributes
  readonly #duration: Histogram | undefined
  readonly #startedAt = performance.now()

  constructor (tracer: Tracer | undefined, span: Span | undefined, spanContext: Context | undefined, attributes: Attributes, duration: Histogram | undefined) {
    this.#tracer = tracer
    this.span = span
    this.#context = spanContext
    this.#attributes = attributes
    this.#duration = duration
  }

  /** Runs `fn` with the operation's span active: what the handler does (and every span it starts) is its child. */
  run<T> (fn: () => T): T {
    return this.#context === undefined ? fn() : context.with(this.#context, fn)
  }

  /**
   * The operation was cancelled. A cancellation that another request caused (a `notifications/cancelled`
   * or `tasks/cancel`, here or on another node: the bus carries its context) is the active context now,
   * and becomes a link.
   */
  cancelled (source: CancellationSource, reason: string | null): void {
    const span = this.span
    if (span === undefined) return
    const attributes: Attributes = { [CANCELLATION_SOURCE]: source }
    if (reason !== null) attributes[CANCELLATION_REASON] = reason
    span.setAttribute(CANCELLATION_SOURCE, source)
    span.addEvent('mcp.request.cancelled', attributes)
    if (source !== 'client' && source !== 'task') return
    const cause = trace.getSpanContext(context.active())
    if (cause !== undefined && trace.isSpanContextValid(cause) && cause.spanId !== span.spanContext().spanId) {
      span.addLink({ context: cause, attributes: { [CANCELLATION_SOURCE]: source } })
    }
  }

  /** The run of a worker tool in its thread: a child of this operation's span. */
  workerRun (tool: string): Span | undefined {
    return this.#tracer?.startSpan(`worker ${tool}`, { kind: SpanKind.INTERNAL, attributes: { [TOOL_NAME]: tool } }, this.#context)
  }

  /** A request this server sends its client (legacy era: elicitation, sampling, roots), from send to answer: a CLIENT child of this operation's span. */
  clientRequest (method: string): Span | undefined {
    return this.#tracer?.startSpan(method, { kind: SpanKind.CLIENT, attributes: { [METHOD]: method } }, this.#context)
  }

  /**
   * A listening stream sent a notification: its kind only, never the URI or task it names (a URI can
   * identify a user's document, and a span outlives the stream).
   */
  notified (kind: NotificationKind): void {
    this.span?.addEvent('mcp.notification', { 'mcp.notification.kind': kind })
  }

  /** A resumable stream's connection dropped (`paused`: the request runs on) or a client resumed it (`resumed`). */
  streamState (state: StreamState): void {
    this.span?.addEvent(`mcp.stream.${state}`)
  }

  /** The kill timeout fired: the handler is abandoned, or its worker thread terminated. */
  killed (cancelTimeoutMs: number): void {
    this.span?.addEvent('mcp.handler.killed', { 'mcp.cancellation.kill_timeout_ms': cancelTimeoutMs })
  }

  /**
   * Ends the span with the outcome the conventions prescribe: a JSON-RPC error sets `error.type` to its
   * code and the status to ERROR, a tool's `isError` is `tool_error`. A cancellation the caller asked
   * for is no error (status unset, as for an HTTP request its client aborted); one the server made
   * (lifetime, shutdown) answered -32800, which is. A killed handler is `handler_killed`.
   */
  end ({ error, toolError, cancelled, killed }: OperationEnd): void {
    const now = performance.now()
    let errorType: string | undefined
    let description: string | undefined
    let code: string | undefined
    if (killed === true) {
      errorType = 'handler_killed'
      description = 'The handler outlived its cancellation by the kill timeout and was killed'
    } else if (cancelled !== undefined && !CALLER_SOURCES.includes(cancelled.source)) {
      errorType = code = '-32800'
      description = 'Request cancelled'
    } else if (error !== undefined && cancelled === undefined) {
      errorType = code = String(error.code)
      description = error.message
    } else if (toolError === true) {
      errorType = 'tool_error'
    }
    const span = this.span
    if (span !== undefined) {
      if (cancelled !== undefined && killed !== true) {
        span.addEvent('mcp.handler.stopped', { 'mcp.cancellation.stop_duration': (now - cancelled.at) / 1000 })
      }
      if (errorType !== undefined) {
        span.setAttribute(ERROR_TYPE, errorType)
        if (code !== undefined) span.setAttribute(STATUS_CODE, code)
        span.setStatus({ code: SpanStatusCode.ERROR, message: description })
      }
      span.end()
    }
    if (this.#duration === undefined) return
    const attributes = errorType === undefined ? this.#attributes : { ...this.#attributes, [ERROR_TYPE]: errorType }
    if (code !== undefined) attributes[STATUS_CODE] = code
    this.#duration.record((now - this.#startedAt) / 1000, attributes)
  }
}

/**
 * OpenTelemetry for one plugin instance, through `@opentelemetry/api` only: nothing is done unless the
 * application registered an SDK (a tracer provider, a meter provider, or both). The registered
 * providers are looked up per operation, so an SDK started after the plugin is still used, and one
 * shut down is let go.
 */
export class Tracing {
  readonly #settings: TracingSettings
  #tracerProvider: TracerProvider | undefined
  #tracer: Tracer | undefined
  #meterProvider: MeterProvider | undefined
  #duration: Histogram | undefined

  constructor (settings: TracingSettings) {
    this.#settings = settings
  }

  /**
   * Starts an operation: undefined (and nothing computed) when no SDK listens. Its parent is the trace
   * context the client put in `params._meta` (linked to the ambient one, the HTTP span), else the ambient
   * context (the active span, else the request's `traceparent` header).
   */
  begin (method: string, params: JsonObject | undefined, id: RequestId | undefined, protocolVersion: string | undefined, request: FastifyRequest): Operation | undefined {
    const tracer = this.#currentTracer()
    const duration = this.#currentDuration()
    if (tracer === undefined && duration === undefined) return undefined
    const { served, tool, prompt } = this.#settings
    const methodName = served(method) || CLIENT_NOTIFICATIONS.includes(method) ? method : OTHER_METHOD
    const attributes: Attributes = {
      [METHOD]: methodName,
      'network.transport': 'tcp',
      'network.protocol.name': 'http',
      'network.protocol.version': request.raw.httpVersion
    }
    if (protocolVersion !== undefined) attributes[PROTOCOL_VERSION] = protocolVersion
    let target: string | undefined
    if (method === 'tools/call') {
      attributes[OPERATION_NAME] = 'execute_tool'
      target = tool(params?.name)
      if (target !== undefined) attributes[TOOL_NAME] = target
    } else if (method === 'prompts/get') {
      target = prompt(params?.name)
      if (target !== undefined) attributes[PROMPT_NAME] = target
    }
    if (tracer === undefined) return new Operation(undefined, undefined, undefined, attributes, duration)

    const spanAttributes: Attributes = { ...attributes }
    if (id !== undefined) spanAttributes[REQUEST_ID] = sanitizeText(String(id), REQUEST_ID_GRAPHEMES)
    if (typeof params?.uri === 'string') spanAttributes[RESOURCE_URI] = sanitizeText(params.uri, URI_GRAPHEMES)
    const session = request.headers['mcp-session-id']
    // Sessions are legacy-era only. A session id is a bearer credential: only a digest of it (stable, so a session's operations still group).
    if (typeof session === 'string' && protocolVersion !== undefined && eraOf(protocolVersion) === 'legacy') spanAttributes[SESSION_ID] = createHash('sha256').update(session).digest('hex').slice(0, 32)
    const ambient = ambientContext(request)
    const carried = carriedContext(params?._meta)
    const ambientSpan = carried === undefined ? undefined : trace.getSpanContext(ambient)
    const parent = carried ?? ambient
    const span = tracer.startSpan(target === undefined ? methodName : `${methodName} ${target}`, {
      kind: SpanKind.SERVER,
      attributes: spanAttributes,
      links: ambientSpan !== undefined && trace.isSpanContextValid(ambientSpan) ? [{ context: ambientSpan }] : undefined
    }, parent)
    return new Operation(tracer, span, trace.setSpan(parent, span), attributes, duration)
  }

  /** Runs `fn` in the HTTP request's trace context (see `ambientContext`) when an SDK records: a client's answer POST, which has no MCP span of its own. */
  /**
   * A request refused for its credentials before any MCP method was read: a span that says why
   * (`error.type` is the reason: missing, invalid, expired, …) and with which status, and nothing of
   * the credentials. Nothing is done without an SDK.
   */
  refused (request: FastifyRequest, reason: string, httpStatus: number): void {
    const tracer = this.#currentTracer()
    if (tracer === undefined) return
    const span = tracer.startSpan(REFUSED_SPAN, {
      kind: SpanKind.SERVER,
      attributes: { [ERROR_TYPE]: reason, 'http.response.status_code': httpStatus, 'network.protocol.version': request.raw.httpVersion }
    }, ambientContext(request))
    span.setStatus({ code: SpanStatusCode.ERROR })
    span.end()
  }

  withinRequest<T> (request: FastifyRequest, fn: () => T): T {
    return this.#currentTracer() === undefined ? fn() : context.with(ambientContext(request), fn)
  }

  /** The active trace context, for a message to another node (undefined when there is none). */
  carrier (): Record<string, string> | undefined {
    return this.#currentTracer() === undefined ? undefined : activeCarrier()
  }

  /** Runs `fn` in the trace context a message from another node carried (as is when it carried none). */
  within<T> (carrier: unknown, fn: () => T): T {
    const carried = carrier === undefined ? undefined : carriedContext(carrier)
    return carried === undefined ? fn() : context.with(carried, fn)
  }

  #currentTracer (): Tracer | undefined {
    const global = trace.getTracerProvider()
    const provider = global instanceof ProxyTracerProvider ? global.getDelegate() : global
    if (provider === NOOP_TRACER_PROVIDER) return undefined
    if (provider !== this.#tracerProvider) {
      this.#tracerProvider = provider
      this.#tracer = provider.getTracer(this.#settings.name, this.#settings.version)
    }
    return this.#tracer
  }

  #currentDuration (): Histogram | undefined {
    const provider = metrics.getMeterProvider()
    if (provider !== this.#meterProvider) {
      this.#meterProvider = provider
      const meter = provider.getMeter(this.#settings.name, this.#settings.version)
      this.#duration = meter === NOOP_METER
        ? undefined
        : meter.createHistogram(DURATION_METRIC, {
          unit: 's',
          description: 'MCP request or notification duration as observed on the receiver from the time it was received until the result or ack is sent.',
          advice: { explicitBucketBoundaries: DURATION_BUCKETS }
        })
    }
    return this.#duration
  }
}

/**
 * Ends a span of work an operation started: failed with `errorType` when given. `linkActive` links the
 * span context active now (the POST that carried a client's answer, here or on another node).
 */
export function endWork (span: Span | undefined, errorType?: string, description?: string, linkActive = false): void {
  if (span === undefined) return
  if (linkActive) {
    const cause = trace.getSpanContext(context.active())
    if (cause !== undefined && trace.isSpanContextValid(cause) && cause.spanId !== span.spanContext().spanId) span.addLink({ context: cause })
  }
  if (errorType !== undefined) {
    span.setAttribute(ERROR_TYPE, errorType)
    span.setStatus({ code: SpanStatusCode.ERROR, message: description })
  }
  span.end()
}

/** The context the HTTP request runs in: the active span (an HTTP instrumentation's), else the `traceparent` header's. */
function ambientContext (request: FastifyRequest): Context {
  const active = context.active()
  return trace.getSpan(active) !== undefined ? active : propagation.extract(ROOT_CONTEXT, request.headers)
}
