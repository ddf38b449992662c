import { hash } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import type { MaybePromise } from '../core/maybe-async.js'
import type { McpPrincipal, TokenVerifier } from './principal.js'

/**
 * The principals of access tokens verified lately, by the token's SHA-256 digest (the token itself is
 * not kept). A signature check costs several times a whole `tools/call` (benchmarks/README.md, auth
 * cost), and a client sends the same token with every request until it expires. An entry lasts until
 * the token's `exp` and at most `maxAgeMs`, so a key the authorization server withdraws stops working
 * within that time; at most `maxEntries` are kept, the oldest dropped first. Only what `inner` accepted
 * is kept: a refused token is verified again each time.
 */
export class VerifiedTokens implements TokenVerifier {
  readonly #inner: TokenVerifier
  readonly #maxEntries: number
  readonly #maxAgeMs: number
  readonly #entries = new Map<string, { principal: McpPrincipal, until: number }>()

  constructor (inner: TokenVerifier, { maxEntries, maxAgeMs }: { maxEntries: number, maxAgeMs: number }) {
    this.#inner = inner
    this.#maxEntries = maxEntries
    this.#maxAgeMs = maxAgeMs
  }

  /** At once for a token verified lately; otherwise what `inner` makes of it, kept when it has an exp. */
  verify (token: string, request: FastifyRequest): MaybePromise<McpPrincipal> {
    // One-shot: no Hash object per request (crypto.hash, Node ≥ 20.12).
    const digest = hash('sha256', token, 'base64url')
    const entry = this.#entries.get(digest)
    if (entry !== undefined) {
      if (Date.now() < entry.until) return entry.principal
      this.#entries.delete(digest)
    }
    return this.#verify(token, digest, request)
  }

  async #verify (token: string, digest: string, request: FastifyRequest): Promise<McpPrincipal> {
    const principal = await this.#inner.verify(token, request)
    const exp = principal.claims.exp
    // A token without an expiry is verified every time: nothing says how long it may be trusted.
    if (typeof exp === 'number' && this.#maxAgeMs > 0) {
      if (this.#entries.size >= this.#maxEntries) this.#entries.delete(this.#entries.keys().next().value!)
      this.#entries.set(digest, { principal, until: Math.min(exp * 1000, Date.now() + this.#maxAgeMs) })
    }
    return principal
  }
}
