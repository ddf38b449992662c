import { ipBucket } from './ip-bucket.js'

/**
 * The cancellation scope of a request, most specific first (DESIGN §4). The prefixes keep the three
 * namespaces apart: a principal whose id equals some client's address shares nothing with it.
 */
export function scopeOf (sessionId: string | null, principal: string | null, ip: string | undefined): string {
  if (sessionId !== null) return `session:${sessionId}`
  if (principal !== null) return `principal:${principal}`
  return `ip:${ipBucket(ip)}`
}
