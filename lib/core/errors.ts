/**
 * Every error class of the plugin, in one place. Register-time and programming errors are
 * `@fastify/error` codes (`FST_MCP_*`). Runtime errors a handler sees or throws (`ToolError`,
 * `ClientInputError`, `RequestCancelledError`, `HandlerKilledError`, `InputRequired`) carry a brand
 * under `Symbol.for`, and `instanceof` checks the brand: a copy of the class from a second instance of
 * the package (a worker tool's module may load its own) still matches. Wire-level failures are JSON-RPC
 * errors (`ProtocolError`, lib/core/jsonrpc.ts), never these. The plugin's own internal failures (a
 * fetch from another server, a refused access token) end the module: the endpoint turns them into
 * answers and metrics, and no handler ever sees them.
 */
import createError from '@fastify/error'
import type { JsonObject } from './jsonrpc.js'
import type { CancellationSource } from './vocabulary.js'

// ---- register time: thrown while the plugin is registered or the application becomes ready
export const InvalidOptionError = createError<[string, string]>(
  'FST_MCP_INVALID_OPTION', 'Invalid option "%s": %s', 500, TypeError)

export const InvalidDefinitionError = createError<[string, string, string]>(
  'FST_MCP_INVALID_DEFINITION', 'Invalid %s "%s": %s', 500, TypeError)

export const DuplicateDefinitionError = createError<[string, string]>(
  'FST_MCP_DUPLICATE_DEFINITION', '%s "%s" is already registered', 500)

/** An option needs a package the application must install, or a plugin it must register first. */
export const MissingDependencyError = createError<[string, string]>(
  'FST_MCP_MISSING_DEPENDENCY', 'Option "%s" needs %s', 500)

export const AlreadyRegisteredError = createError(
  'FST_MCP_ALREADY_REGISTERED',
  'fastify-mcp-cancellation is already registered in this context or one of its parents: register each instance in an encapsulated context of its own, with its own "path" and "metrics.path"',
  500)

/** Another route (another instance's, or the application's) already answers where this instance would. */
export const RouteConflictError = createError<[string, string, string]>(
  'FST_MCP_ROUTE_CONFLICT', 'Option "%s": %s is already routed; give this instance another %s', 500)

// ---- programming errors: a handler used the context where it cannot (answered -32603, logged in full)

export const HandlerMisuseError = createError<[string, { cause: unknown }?]>('FST_MCP_HANDLER_MISUSE', '%s', 500)

// ---- runtime errors a handler sees or throws

/** The brand of the runtime errors: the names of the classes an error is an instance of. */
const BRAND = Symbol.for('fastify-mcp-cancellation.error')
/** The name a class of this module brands its instances with (a subclass of the application's has none of its own). */
const CLASS_BRAND: unique symbol = Symbol('fastify-mcp-cancellation.class-brand')

type Branded = Error & { [BRAND]?: readonly string[] }

/** Adds `name` to the brand of `error` (each class of the chain adds its own). */
function brand (error: Error, name: string): void {
  const branded = error as Branded
  branded[BRAND] = [...(branded[BRAND] ?? []), name]
}

/**
 * `instanceof` for the runtime errors: one of this module's classes matches by brand, so copies of it
 * from another instance of the package match too; an application's subclass keeps the ordinary check.
 */
function isInstance (errorClass: object, value: unknown): boolean {
  if (!Object.hasOwn(errorClass, CLASS_BRAND)) return Function.prototype[Symbol.hasInstance].call(errorClass, value)
  const name = (errorClass as { [CLASS_BRAND]: string })[CLASS_BRAND]
  return typeof value === 'object' && value !== null && (value as Branded)[BRAND]?.includes(name) === true
}

/** Thrown by a tool to report a failure to the model as an `isError: true` result (not a protocol error). */
export class ToolError extends Error {
  static readonly [CLASS_BRAND]: string = 'ToolError'

  constructor (message: string) {
    super(message)
    this.name = 'ToolError'
    brand(this, 'ToolError')
  }

  static override [Symbol.hasInstance] (value: unknown): boolean {
    return isInstance(this, value)
  }

  /** The `isError` result a tool failure is answered with: the model reads `message`. */
  static result (message: string): { content: Array<{ type: 'text', text: string }>, isError: true } {
    return { content: [{ type: 'text', text: message }], isError: true }
  }
}

export type ClientInputFailure = 'unavailable' | 'timeout' | 'refused' | 'invalid'

/**
 * An ask that got no usable answer: the response cannot carry a request (`unavailable`), the client
 * did not answer in time (`timeout`), it answered with a JSON-RPC error (`refused`), or its answer
 * breaks what the specification requires of the result or the elicitation's `requestedSchema`
 * (`invalid`). A tool that lets it through returns an `isError` result with its message; a prompt or
 * resource read fails with -32603 (-32602 when `invalid`).
 */
export class ClientInputError extends ToolError {
  static override readonly [CLASS_BRAND]: string = 'ClientInputError'
  readonly failure: ClientInputFailure

  constructor (failure: ClientInputFailure, message: string) {
    super(message)
    this.name = 'ClientInputError'
    brand(this, 'ClientInputError')
    this.failure = failure
  }
}

/**
 * The abort reason every cancelled handler sees on `ctx.signal.reason`, and what `ctx.throwIfCancelled()`
 * throws: in process and in a worker thread alike. Named `AbortError`, as aborts are.
 */
export class RequestCancelledError extends Error {
  static readonly [CLASS_BRAND] = 'RequestCancelledError'
  /** The sanitised reason the canceller gave, or null. */
  readonly reason: string | null
  readonly source: CancellationSource

  constructor (reason: string | null, source: CancellationSource) {
    super(reason ?? 'Request cancelled')
    this.name = 'AbortError'
    brand(this, 'RequestCancelledError')
    this.reason = reason
    this.source = source
  }

  static override [Symbol.hasInstance] (value: unknown): boolean {
    return isInstance(this, value)
  }
}

/** Rejects the wait for a handler when a cancelled handler outlived the kill timeout. */
export class HandlerKilledError extends Error {
  static readonly [CLASS_BRAND] = 'HandlerKilledError'

  constructor (timeoutMs: number) {
    super(`The handler did not stop within ${timeoutMs} ms of its cancellation and was killed`)
    this.name = 'HandlerKilledError'
    brand(this, 'HandlerKilledError')
  }

  static override [Symbol.hasInstance] (value: unknown): boolean {
    return isInstance(this, value)
  }
}

/**
 * Thrown by an ask whose answer a modern request does not carry yet: it ends the handler's run,
 * and the round is answered with `resultType: "input_required"` and these requests. A handler must
 * not swallow it.
 */
export class InputRequired extends Error {
  static readonly [CLASS_BRAND] = 'InputRequired'
  /** What to ask, by key (`InputRequest`s, lib/protocol/input-requests.ts). */
  readonly requests: Record<string, JsonObject>

  constructor (requests: Record<string, JsonObject>) {
    super('The request needs input from the client (this round ends with input_required)')
    this.name = 'InputRequired'
    brand(this, 'InputRequired')
    this.requests = requests
  }

  static override [Symbol.hasInstance] (value: unknown): boolean {
    return isInstance(this, value)
  }
}

// ---- internal: never reach a handler or the application

/** Why a fetch gave nothing usable: unreachable, too slow, an error status, too large, or not JSON. */
export type FetchFailureReason = 'network' | 'timeout' | 'status' | 'too-large' | 'not-json'

/** A fetch from a server the plugin does not control failed (lib/core/bounded-fetch.ts). */
export class FetchFailure extends Error {
  readonly reason: FetchFailureReason
  readonly url: string

  constructor (reason: FetchFailureReason, url: string, detail: string) {
    super(`${url}: ${detail}`)
    this.name = 'FetchFailure'
    this.reason = reason
    this.url = url
  }
}

/**
 * Why a request's credentials were refused (the `reason` label of `mcp_auth_failures_total`): none
 * given, a token that does not verify, one that has expired, one for another audience or from another
 * issuer, one without the scopes the operation needs, or no way to verify it right now.
 */
export type AuthFailureReason = 'missing' | 'invalid' | 'expired' | 'audience' | 'issuer' | 'scope' | 'unavailable'

/**
 * Credentials refused, with the reason; `detail` is logged at debug level, never sent. `malformed`:
 * the request did not present a token the way a bearer token must be (RFC 6750 `invalid_request`),
 * rather than presenting one that does not verify (`invalid_token`).
 */
export class AuthFailure extends Error {
  readonly reason: AuthFailureReason
  readonly malformed: boolean

  constructor (reason: AuthFailureReason, detail: string, malformed: 'malformed' | undefined = undefined) {
    super(detail)
    this.name = 'AuthFailure'
    this.reason = reason
    this.malformed = malformed !== undefined
  }
}
