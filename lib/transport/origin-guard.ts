/** An allowed `Origin` or `Host`: the exact value, or a RegExp it must match. */
export type OriginMatcher = string | RegExp

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
