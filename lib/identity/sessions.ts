import type { FastifyRequest } from 'fastify'
import { ErrorCode, ProtocolError, type RequestId } from '../core/jsonrpc.js'
import { headerValue } from '../protocol/header-values.js'
import type { RevocationStore } from './revocation-store.js'
import type { SessionCodec, VerifiedSession } from './session-codec.js'

/**
 * Legacy-era sessions on a stateless transport: minted by `initialize`, verified on every later
 * request by any node holding the secret, revoked by DELETE. The modern era has no sessions and
 * ignores the header (2026-07-28 Streamable HTTP).
 */
export class Sessions {
  readonly #codec: SessionCodec
  readonly #revocations: RevocationStore
  readonly #required: boolean

  constructor (codec: SessionCodec, revocations: RevocationStore, required: boolean) {
    this.#codec = codec
    this.#revocations = revocations
    this.#required = required
  }

  /** A session for `principal`, carrying what its client declared in `initialize`'s `capabilities`. */
  mint (principal: string | null, capabilities: unknown): string {
    return this.#codec.mint(principal ?? undefined, capabilities).id
  }

  /**
   * The request's verified session id, or null when it carries none (allowed unless sessions are
   * required). A forged, expired, revoked or foreign-principal id is 404 "Session not found", which
   * tells a legacy client to start a new session.
   */
  verify (request: FastifyRequest, principal: string | null, id?: RequestId): string | null {
    const header = headerValue(request.headers, 'mcp-session-id')
    if (header === undefined && !this.#required) return null
    return this.#check(header, principal, id).id
  }

  /** The request's session (required here, whatever `required` says), or the 400/404 that refuses it. */
  current (request: FastifyRequest, principal: string | null): VerifiedSession {
    return this.#check(headerValue(request.headers, 'mcp-session-id'), principal, undefined)
  }

  /** Whether a session that verified has been revoked since (on any node). */
  revoked (id: string): boolean {
    return this.#revocations.isRevoked(id)
  }

  /** When a session that verified expires. */
  expiryOf (id: string): number {
    return this.#codec.expiryOf(id)
  }

  /** DELETE: revokes the request's session until it would have expired; the session it was. */
  async terminate (request: FastifyRequest, principal: string | null): Promise<VerifiedSession> {
    const session = this.current(request, principal)
    await this.#revocations.revoke(session.id, session.expiresAt)
    return session
  }

  #check (header: string | undefined, principal: string | null, id: RequestId | undefined): VerifiedSession {
    if (header === undefined) {
      throw new ProtocolError(ErrorCode.InvalidRequest, 'Bad Request: Mcp-Session-Id header is required', { httpStatus: 400, id })
    }
    const session = this.#codec.verify(header, principal ?? undefined)
    if (session === undefined || this.#revocations.isRevoked(session.id)) {
      throw new ProtocolError(ErrorCode.SessionNotFound, 'Session not found', { httpStatus: 404, id })
    }
    return session
  }
}
