import type { OriginMatcher } from '../plugin/options.js'

/** Allowlist matching for `Origin` and `Host` (DNS-rebinding protection, MCP transports §Security). */
export function isAllowed (value: string, allowlist: readonly OriginMatcher[]): boolean {
  for (const matcher of allowlist) {
    if (typeof matcher === 'string') {
      if (matcher === value) return true
    } else {
      matcher.lastIndex = 0 // a /g or /y RegExp is stateful across calls
      if (matcher.test(value)) return true
    }
  }
  return false
}
