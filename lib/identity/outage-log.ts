import type { FastifyBaseLogger } from 'fastify'

/**
 * The authorization servers tokens cannot be verified with right now, logged once when that starts
 * (the first token refused 503 for it) and once when it ends (the server answered again). Not per
 * request, and not ended by a token that passes: during an outage the tokens signed with keys already
 * fetched keep passing between the refusals.
 */
export class OutageLog {
  readonly #down = new Set<string>()

  /** A token needed `server`, which could not be reached. */
  unreachable (server: string, detail: string, log: FastifyBaseLogger): void {
    if (this.#down.has(server)) return
    this.#down.add(server)
    log.warn({ authorizationServer: server, detail }, 'MCP access tokens cannot be verified: the authorization server is unreachable or its keys unusable (answering 503 until it is back)')
  }

  /** `server` answered. */
  answered (server: string, log: FastifyBaseLogger): void {
    if (!this.#down.delete(server)) return
    log.info({ authorizationServer: server }, 'MCP access tokens are verified again')
  }
}
