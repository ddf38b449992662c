import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { isPromiseLike, type MaybePromise } from '../core/maybe-async.js'
import { AuthFailure } from '../core/errors.js'
import { ErrorCode, ProtocolError } from '../core/jsonrpc.js'
import type { RequestObserver } from '../observability/observer.js'
import type { Tracing } from '../observability/tracing.js'
import type { BearerChallenges } from './bearer-challenge.js'
import { missingScopes, type ScopeSatisfies } from './oauth-scopes.js'
import type { Credentials, CredentialsSource, McpPrincipal } from './principal.js'

export interface AuthenticatorParts {
  credentials: CredentialsSource
  /** Requests without credentials are refused (otherwise they are scoped by address). */
  required: boolean
  challenges: BearerChallenges
  /** OAuth scopes every request needs. */
  requiredScopes: readonly string[]
  satisfies: ScopeSatisfies
  /** Seconds a client is told to wait when tokens cannot be verified right now. */
  retryAfterSeconds: number
  observer: RequestObserver
  /** Where a refused request's span goes (undefined with `tracing: false`). */
  tracing: Pick<Tracing, 'refused'> | undefined
}

/** What a refusal answers, by reason: the status and the message (never a detail of the token). */
const REFUSALS: Record<AuthFailure['reason'], { status: number, message: string }> = {
  missing: { status: 401, message: 'Unauthorized: credentials required' },
  invalid: { status: 401, message: 'Unauthorized: invalid credentials' },
  expired: { status: 401, message: 'Unauthorized: the access token has expired' },
  audience: { status: 401, message: 'Unauthorized: the access token was not issued for this resource' },
  issuer: { status: 401, message: 'Unauthorized: the access token is from an authorization server this resource does not trust' },
  scope: { status: 403, message: 'Forbidden: the access token lacks a scope this request needs' },
  unavailable: { status: 503, message: 'Service Unavailable: the access token cannot be verified right now (the authorization server is unreachable); try again' }
}

/**
 * Sets `request.mcpPrincipal` before the body is read, and answers what it refuses: 401 with a
 * challenge for missing or refused credentials (never downgraded to anonymous), 403 for missing scopes
 * (the client may ask for them and retry), 503 with `Retry-After` when a token cannot be verified
 * because the authorization server is unreachable (a 401 would send the client to sign in again, in a
 * loop). Missing credentials are refused only when authentication is required; otherwise the request
 * falls back to the address scope.
 */
export class Authenticator {
  readonly #parts: AuthenticatorParts

  constructor (parts: AuthenticatorParts) {
    this.#parts = parts
  }

  /**
   * The onRequest hook. Callback-style and synchronous when the credentials are known at once (a token
   * verified lately): no promise, no microtask on the way of every authenticated request.
   */
  authenticate (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    // A synchronous throw is Fastify's to handle (its hook runner passes it to the error handler).
    const answer: MaybePromise<Credentials> = this.#parts.credentials(request)
    if (!isPromiseLike(answer)) {
      this.#conclude(answer, request, reply, done)
      return
    }
    Promise.resolve(answer).then(credentials => { this.#conclude(credentials, request, reply, done) }).catch(done)
  }

  /** Lets the request on (`done`) or answers its refusal (and does not call `done`, as Fastify wants). */
  #conclude (answer: Credentials, request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    const { required, requiredScopes } = this.#parts
    let refusal: ProtocolError | undefined
    if (answer.kind === 'principal') {
      request.mcpPrincipal = answer.principal
      refusal = this.scopeRefusal(answer.principal, requiredScopes)
    } else if (answer.kind === 'rejected') {
      refusal = this.refusal(answer.failure, requiredScopes, request)
    } else if (required) {
      refusal = this.refusal(new AuthFailure('missing', 'no credentials'), requiredScopes, request)
    }
    if (refusal === undefined) done()
    else void reply.code(refusal.httpStatus).headers(refusal.headers!).send(refusal.toResponse())
  }

  /** Whether `principal` holds every scope of `needed`. */
  permits (principal: McpPrincipal | null, needed: readonly string[]): boolean {
    return missingScopes(principal, needed, this.#parts.satisfies).length === 0
  }

  /** The scopes every request needs, followed by `scopes`: what an operation's challenge lists. */
  withRequiredScopes (scopes: readonly string[]): readonly string[] {
    const { requiredScopes } = this.#parts
    return requiredScopes.length === 0 ? scopes : [...new Set([...requiredScopes, ...scopes])]
  }

  /**
   * The refusal of an operation that needs `needed` (the plugin-wide scopes included) for this
   * principal, or undefined when it may go on: 401 without a principal, 403 when scopes are missing.
   * The challenge lists every scope the operation needs.
   */
  scopeRefusal (principal: McpPrincipal | null, needed: readonly string[]): ProtocolError | undefined {
    if (needed.length === 0 || this.permits(principal, needed)) return undefined
    return this.refusal(new AuthFailure(principal === null ? 'missing' : 'scope', 'missing scopes'), needed, undefined)
  }

  /** The JSON-RPC error (with its HTTP status and challenge) that answers `failure`; counted. */
  refusal (failure: AuthFailure, scopes: readonly string[], request: FastifyRequest | undefined): ProtocolError {
    const { challenges, observer, retryAfterSeconds } = this.#parts
    observer.authFailed(failure.reason)
    const { status, message } = REFUSALS[failure.reason]
    if (request !== undefined) this.#parts.tracing?.refused(request, failure.reason, status)
    let headers: Record<string, string>
    if (failure.reason === 'unavailable') {
      headers = { 'retry-after': String(retryAfterSeconds) }
    } else {
      request?.log.debug({ reason: failure.reason, detail: failure.message }, 'MCP credentials refused')
      const error = failure.reason === 'missing' ? undefined : failure.reason === 'scope' ? 'insufficient_scope' : failure.malformed ? 'invalid_request' : 'invalid_token'
      headers = { 'www-authenticate': challenges.challenge(error, scopes) }
    }
    const code = failure.reason === 'unavailable' ? ErrorCode.ServerError : ErrorCode.InvalidRequest
    return new ProtocolError(code, message, { httpStatus: status, headers })
  }
}
