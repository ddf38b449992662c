import type { FastifyRequest } from 'fastify'
import type { RequestId } from '../core/jsonrpc.js'
import type { CancelOutcome, InFlightOwner } from './cancellation-store.js'

/** What `fastify.mcpCancellation.cancel` records. */
export interface CancelOptions {
  /** The JSON-RPC id: a safe integer, or a string of at most 256 UTF-8 bytes. `1` and `"1"` are different requests. */
  requestId: RequestId
  /** The scope the request runs in: `request.mcpScope`, or `scope(request)`. */
  scope: string
  /** Why; sanitised (controls and bidi marks stripped, cut to 200 graphemes). Default null. */
  reason?: unknown
}

/**
 * `fastify.mcpCancellation`: the plugin's cancellation table, for tools and library code. Every
 * operation is scoped: a request id means something only together with the scope it runs in
 * (`session:…`, `principal:…` or `ip:…`). Invalid ids are never stored; reasons are sanitised.
 */
export interface McpCancellationApi {
  /**
   * Records a cancellation of `requestId` in `scope`, whether or not it is in flight, and aborts what
   * runs under it on this node. `'rejected'` when the scope holds its quota of rows, `'invalid'` for an
   * id that can never be a request's.
   */
  cancel: (options: CancelOptions) => CancelOutcome | 'invalid'
  /** True when a cancellation of `requestId` in `scope` is recorded. */
  cancelled: (requestId: unknown, scope: string) => boolean
  /** The recorded reason, or null (no reason given, or nothing recorded). */
  reason: (requestId: unknown, scope: string) => string | null
  /** Forgets a recorded cancellation (the transport does this when a request ends). */
  clear: (requestId: unknown, scope: string) => void
  /**
   * Marks `requestId` in flight in `scope` for `owner` (a fresh token when omitted) and returns the owner:
   * a client's `notifications/cancelled` for it is then honoured, and calls `owner.cancel`.
   */
  track: (requestId: unknown, scope: string, owner?: InFlightOwner) => InFlightOwner
  /** Ends what `track` started, for that owner only (another owner of the same id stays tracked). */
  untrack: (requestId: unknown, scope: string, owner: InFlightOwner) => void
  /** True while some owner has `requestId` in flight in `scope`. */
  inFlight: (requestId: unknown, scope: string) => boolean
  /** Removes rows older than `ttlMs` and in-flight rows of owners that ended; returns the rows removed. The janitor calls it. */
  cleanup: (ttlMs: number) => number
  /** True for a safe integer or a string of at most 256 UTF-8 bytes: the ids this table accepts. */
  validRequestId: (value: unknown) => value is RequestId
  /** The cancellation scope of a request: `session:…`, `principal:…` or `ip:…`. */
  scope: (request: FastifyRequest) => string
  /**
   * Cancels, from the server side, every MCP request the HTTP request carries (source `server`: the
   * handler's signal aborts, a connected client gets -32800 with the reason). False when none runs.
   */
  cancelRequest: (request: FastifyRequest, reason?: unknown) => boolean
  /** Cancellation rows now held. */
  readonly rows: number
  /** Requests in flight now (tracked by the transport or by `track`). */
  readonly inFlightRows: number
}

/**
 * The documented API over the plugin's registry, and nothing else of it: the registry's other members
 * (the transport's admit, begin, finish and shutdown, and its store) stay out of reach. Functions, not methods, so
 * `const { cancel } = fastify.mcpCancellation` works.
 */
export function cancellationApi (registry: McpCancellationApi): McpCancellationApi {
  return Object.freeze({
    cancel: options => registry.cancel(options),
    cancelled: (requestId, scope) => registry.cancelled(requestId, scope),
    reason: (requestId, scope) => registry.reason(requestId, scope),
    clear: (requestId, scope) => { registry.clear(requestId, scope) },
    track: (requestId, scope, owner) => registry.track(requestId, scope, owner),
    untrack: (requestId, scope, owner) => { registry.untrack(requestId, scope, owner) },
    inFlight: (requestId, scope) => registry.inFlight(requestId, scope),
    cleanup: ttlMs => registry.cleanup(ttlMs),
    validRequestId: (value): value is RequestId => registry.validRequestId(value),
    scope: request => registry.scope(request),
    cancelRequest: (request, reason) => registry.cancelRequest(request, reason),
    get rows () { return registry.rows },
    get inFlightRows () { return registry.inFlightRows }
  } satisfies McpCancellationApi)
}
