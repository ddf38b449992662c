import { ipBucket } from './ip-bucket.js'

/**
 * An address sends request after request (over one keep-alive connection, its string is even the same
 * object), so the scope made from it is remembered: up to this many addresses, then all are forgotten.
 */
const REMEMBERED_ADDRESSES = 1024
const addressScopes = new Map<string, string>()

/**
 * The cancellation scope of a request, most specific first. The prefixes keep the three
 * namespaces apart: a principal whose id equals some client's address shares nothing with it.
 */
export function scopeOf (sessionId: string | null, principal: string | null, ip: string | undefined): string {
  if (sessionId !== null) return `session:${sessionId}`
  if (principal !== null) return `principal:${principal}`
  if (ip === undefined) return `ip:${ipBucket(ip)}`
  let scope = addressScopes.get(ip)
  if (scope === undefined) {
    if (addressScopes.size >= REMEMBERED_ADDRESSES) addressScopes.clear()
    addressScopes.set(ip, scope = `ip:${ipBucket(ip)}`)
  }
  return scope
}
