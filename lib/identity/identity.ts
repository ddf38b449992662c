import type { FastifyRequest } from 'fastify'
import type { RequestId } from '../core/jsonrpc.js'
import type { Era } from '../protocol/versions.js'
import { ERA_POLICIES } from '../protocol/era-policy.js'
import { Scopes } from './scope.js'
import type { Sessions } from './sessions.js'

/** Who a request speaks for: its session (legacy era), its principal, or its address bucket. */
export class Identity {
  readonly sessions: Sessions | undefined
  readonly #scopes = new Scopes()

  constructor (sessions: Sessions | undefined) {
    this.sessions = sessions
  }

  /**
   * Verifies the legacy session (initialize starts one instead; the modern era has none) and fixes
   * `request.mcpScope`. Throws the 400/404 of a missing or unknown session.
   */
  resolve (request: FastifyRequest, era: Era, method: string, id: RequestId | undefined): string {
    if (this.sessions !== undefined && ERA_POLICIES[era].sessions && method !== 'initialize') {
      request.mcpSessionId = this.sessions.verify(request, request.mcpPrincipal?.id ?? null, id)
    }
    return (request.mcpScope = this.#scopes.of(request.mcpSessionId, request.mcpPrincipal?.id ?? null, request.ip))
  }

  /** The scope of any request, resolved or not (library callers, hooks that run before dispatch). */
  scope (request: FastifyRequest): string {
    return request.mcpScope ?? this.#scopes.of(request.mcpSessionId, request.mcpPrincipal?.id ?? null, request.ip)
  }
}
