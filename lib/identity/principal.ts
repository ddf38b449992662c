import type { FastifyReply, FastifyRequest } from 'fastify'
import { ErrorCode, errorResponse } from '../protocol/jsonrpc.js'

/** Any authentication scheme: returns the principal id of a request, or null/undefined for anonymous. */
export type PrincipalResolver = (request: FastifyRequest) => unknown

/** A principal id is a non-empty string; integers are stringified; anything else is no principal. */
export function principalId (value: unknown): string | null {
  if (typeof value === 'string') return value === '' ? null : value
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value)
  return null
}

/**
 * Sets `request.mcpPrincipal` before the body is read. Without a principal a request is a 401 when
 * authentication is required, and falls back to its address scope when it is not.
 */
export class Authenticator {
  readonly #resolve: PrincipalResolver
  readonly #required: boolean

  constructor (resolve: PrincipalResolver, required: boolean) {
    this.#resolve = resolve
    this.#required = required
  }

  async authenticate (request: FastifyRequest, reply: FastifyReply): Promise<void> {
    let principal: string | null = null
    try {
      principal = principalId(await this.#resolve(request))
    } catch (error) {
      request.log.debug({ err: error }, 'MCP principal resolver rejected the request')
    }
    request.mcpPrincipal = principal
    if (principal === null && this.#required) {
      await reply.code(401).header('www-authenticate', 'Bearer')
        .send(errorResponse(undefined, { code: ErrorCode.InvalidRequest, message: 'Unauthorized: authentication required' }))
    }
  }
}
