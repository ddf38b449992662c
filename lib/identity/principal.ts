import type { FastifyRequest } from 'fastify'
import { isJsonObject } from '../core/jsonrpc.js'
import { isPromiseLike, type MaybePromise } from '../core/maybe-async.js'
import { AuthFailure } from '../core/errors.js'

/**
 * Who a request speaks for, as `request.mcpPrincipal` and `ctx.principal` show it. `id` is what binds
 * (the cancellation scope `principal:<id>`, sessions, request state); with `auth.oauth` it is the
 * issuer and the subject together, so two authorization servers' `sub: "42"` are two principals.
 * The raw token is never part of it.
 */
export interface McpPrincipal {
  /** Unique across issuers: `<iss>#<sub>` with `auth.oauth`, the verified claim or returned id otherwise. */
  readonly id: string
  /** The subject as the credentials name it: `sub` (or, for a client acting for itself, `client_id`). */
  readonly subject: string
  /** The token's `iss` with `auth.oauth`; null otherwise. */
  readonly issuer: string | null
  /** The OAuth scopes granted (the token's space-separated `scope` claim). */
  readonly scopes: readonly string[]
  /** The OAuth client the token was issued to (`client_id`), or null. */
  readonly clientId: string | null
  /** The verified claims (a JWT's payload, an introspection answer, what `auth.principal` returned); never the token. */
  readonly claims: Readonly<Record<string, unknown>>
}

/** What authentication made of a request: a principal, no credentials at all, or credentials refused. */
export type Credentials =
  | { kind: 'principal', principal: McpPrincipal }
  | { kind: 'anonymous' }
  | { kind: 'rejected', failure: AuthFailure }

export type CredentialsSource = (request: FastifyRequest) => MaybePromise<Credentials>

/**
 * A lone surrogate: the UTF-8 every binding of a principal goes through (session MACs, server-request
 * ids, Redis keys and hashes) writes it as U+FFFD, so `"x\uD800"` would be bound exactly as `"x\uFFFD"`.
 */
const LONE_SURROGATE = /\p{Surrogate}/u

/**
 * A principal id is a non-empty string of well-formed UTF-16; integers are stringified; anything else
 * is no principal.
 */
export function principalId (value: unknown): string | null {
  if (typeof value === 'string') return value === '' || LONE_SURROGATE.test(value) ? null : value
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value)
  return null
}

/** A principal named by an id alone (`auth.principal`, `@fastify/jwt`): no issuer; scopes from the claims. */
function principalNamed (id: string, claims: Record<string, unknown>, scopes: readonly string[]): McpPrincipal {
  return { id, subject: id, issuer: null, scopes, clientId: typeof claims.client_id === 'string' ? claims.client_id : null, claims }
}

/** A space-separated `scope` claim; anything else grants nothing. */
function scopeClaim (claims: Record<string, unknown>): string[] {
  return typeof claims.scope === 'string' ? claims.scope.split(' ').filter(scope => scope !== '') : []
}

/**
 * `auth.principal(request)`: any scheme. It answers the principal's id (a string or an integer), or
 * `{ id, scopes?, claims? }`; null/undefined is anonymous; a throw refuses the request's credentials
 * (fail closed).
 */
export function customCredentials (resolve: (request: FastifyRequest) => unknown): CredentialsSource {
  return async request => {
    let value: unknown
    try {
      value = await resolve(request)
    } catch (error) {
      return { kind: 'rejected', failure: new AuthFailure('invalid', `auth.principal refused the request: ${String(error)}`) }
    }
    if (value === null || value === undefined) return { kind: 'anonymous' }
    const described = isJsonObject(value) ? value : { id: value }
    const id = principalId(described.id)
    const scopes = described.scopes ?? []
    const claims = described.claims ?? {}
    if (id === null || !Array.isArray(scopes) || !scopes.every(scope => typeof scope === 'string') || !isJsonObject(claims)) {
      return { kind: 'rejected', failure: new AuthFailure('invalid', 'auth.principal answered no valid principal') }
    }
    return { kind: 'principal', principal: principalNamed(id, claims, scopes) }
  }
}

/**
 * `@fastify/jwt`: the app registers it (secret, algorithms, namespace are its business); we call the
 * request's verify method and read one claim. No Authorization header is anonymous; a token that does
 * not verify, has expired, or lacks the claim is refused.
 */
export function jwtCredentials (verifyMethod: string, claim: string): CredentialsSource {
  return async request => {
    if (request.headers.authorization === undefined) return { kind: 'anonymous' }
    const verify = (request as unknown as Record<string, unknown>)[verifyMethod] as (() => Promise<unknown>)
    let payload: unknown
    try {
      payload = await verify.call(request)
    } catch (error) {
      const expired = (error as { code?: unknown }).code === 'FST_JWT_AUTHORIZATION_TOKEN_EXPIRED'
      return { kind: 'rejected', failure: new AuthFailure(expired ? 'expired' : 'invalid', `bearer token refused: ${String(error)}`) }
    }
    const id = isJsonObject(payload) ? principalId(payload[claim]) : null
    if (id === null) return { kind: 'rejected', failure: new AuthFailure('invalid', `the token has no usable ${claim} claim`) }
    return { kind: 'principal', principal: principalNamed(id, payload as Record<string, unknown>, scopeClaim(payload as Record<string, unknown>)) }
  }
}

/** What a bearer token may be verified into: `AccessTokenVerifier` (lib/identity/access-tokens.ts). */
export interface TokenVerifier {
  /** The principal of the token (at once when it is known), or an `AuthFailure`, thrown or rejected. */
  verify: (token: string, request: FastifyRequest) => MaybePromise<McpPrincipal>
}

/** `Authorization: Bearer <token>` (RFC 6750 §2.1), the b64token syntax. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i

/**
 * OAuth access tokens, read from the `Authorization` header only (OAuth 2.1 §5.1.1): a token in the
 * query string is refused (never used), with or without one in the header (RFC 6750 §3.1: more than
 * one method is `invalid_request`), as are two Authorization headers, another scheme and an empty or
 * malformed token; a token longer than `maxTokenBytes` is refused before anything parses it (a token
 * that cannot be valid: `invalid_token`).
 */
export function bearerCredentials (verifier: TokenVerifier, maxTokenBytes: number): CredentialsSource {
  return request => {
    const header = request.headers.authorization
    const query = request.url.indexOf('?')
    if (query !== -1 && new URLSearchParams(request.url.slice(query + 1)).has('access_token')) return malformed('an access token in the query string')
    if (header === undefined) return { kind: 'anonymous' }
    if (authorizationHeaders(request) > 1) return malformed('more than one Authorization header')
    if (header.length > maxTokenBytes + 'Bearer '.length) return { kind: 'rejected', failure: new AuthFailure('invalid', `an Authorization header longer than ${maxTokenBytes} bytes`) }
    const token = BEARER.exec(header)?.[1]
    if (token === undefined) return malformed('no Bearer token in the Authorization header')
    let principal: MaybePromise<McpPrincipal>
    try {
      principal = verifier.verify(token, request)
    } catch (error) {
      return refusedBy(error)
    }
    return isPromiseLike(principal)
      ? Promise.resolve(principal).then(verified => ({ kind: 'principal', principal: verified }), refusedBy)
      : { kind: 'principal', principal }
  }
}

/** The credentials a verifier's `AuthFailure` makes; anything else is a bug, passed on. */
function refusedBy (error: unknown): Credentials {
  if (error instanceof AuthFailure) return { kind: 'rejected', failure: error }
  throw error
}

/** Node keeps the first of repeated Authorization headers; the raw list still has them all. */
function authorizationHeaders (request: FastifyRequest): number {
  const raw = request.raw.rawHeaders
  let count = 0
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 13 && raw[i]!.toLowerCase() === 'authorization') count++
  return count
}

function malformed (detail: string): Credentials {
  return { kind: 'rejected', failure: new AuthFailure('invalid', detail, 'malformed') }
}
