import { ipBucket } from './ip-bucket.js'

/**
 * An address sends request after request (over one keep-alive connection, its string is even the same
 * object), so the scope made from it is remembered: up to this many addresses, then all are forgotten.
 */
const REMEMBERED_ADDRESSES = 1024

/**
 * The cancellation scope of a request, most specific first. The prefixes keep the three namespaces
 * apart: a principal whose id equals some client's address shares nothing with it. One per plugin
 * instance, with its own memory of address scopes.
 */
export class Scopes {
  readonly #addressScopes = new Map<string, string>()

  of (sessionId: string | null, principal: string | null, ip: string | undefined): string {
    if (sessionId !== null) return `session:${sessionId}`
    if (principal !== null) return `principal:${principal}`
    if (ip === undefined) return `ip:${ipBucket(ip)}`
    let scope = this.#addressScopes.get(ip)
    if (scope === undefined) {
      if (this.#addressScopes.size >= REMEMBERED_ADDRESSES) this.#addressScopes.clear()
      this.#addressScopes.set(ip, scope = `ip:${ipBucket(ip)}`)
    }
    return scope
  }
}
