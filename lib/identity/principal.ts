import type { FastifyReply, FastifyRequest } from 'fastify'
import { ErrorCode, errorResponse, isJsonObject } from '../core/jsonrpc.js'

/** What authentication made of a request: a principal, no credentials at all, or credentials refused. */
export type Credentials =
  | { kind: 'principal', id: string }
  | { kind: 'anonymous' }
  | { kind: 'rejected' }

export type CredentialsSource = (request: FastifyRequest) => Promise<Credentials>

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

/**
 * `auth.principal(request)`: any scheme. A null/undefined answer is anonymous; a throw refuses the
 * request's credentials (fail closed).
 */
export function customCredentials (resolve: (request: FastifyRequest) => unknown): CredentialsSource {
  return async request => {
    let value: unknown
    try {
      value = await resolve(request)
    } catch (error) {
      request.log.debug({ err: error }, 'MCP principal resolver refused the request')
      return { kind: 'rejected' }
    }
    if (value === null || value === undefined) return { kind: 'anonymous' }
    const id = principalId(value)
    return id === null ? { kind: 'rejected' } : { kind: 'principal', id }
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
      request.log.debug({ err: error }, 'MCP bearer token refused')
      return { kind: 'rejected' }
    }
    const id = isJsonObject(payload) ? principalId(payload[claim]) : null
    return id === null ? { kind: 'rejected' } : { kind: 'principal', id }
  }
}

/**
 * Sets `request.mcpPrincipal` before the body is read. Refused credentials are always a 401 (they are
 * never downgraded to anonymous); missing ones are a 401 only when authentication is required, and
 * otherwise fall back to the address scope.
 */
export class Authenticator {
  readonly #credentials: CredentialsSource
  readonly #required: boolean

  constructor (credentials: CredentialsSource, required: boolean) {
    this.#credentials = credentials
    this.#required = required
  }

  async authenticate (request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const credentials = await this.#credentials(request)
    if (credentials.kind === 'principal') {
      request.mcpPrincipal = credentials.id
    } else if (credentials.kind === 'rejected' || this.#required) {
      const message = credentials.kind === 'rejected' ? 'Unauthorized: invalid credentials' : 'Unauthorized: credentials required'
      await reply.code(401).header('www-authenticate', 'Bearer error="invalid_token"')
        .send(errorResponse(undefined, { code: ErrorCode.InvalidRequest, message }))
    }
  }
}
