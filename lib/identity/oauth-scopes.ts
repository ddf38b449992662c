import type { McpPrincipal } from './principal.js'

/**
 * Whether a principal's granted OAuth scopes satisfy one scope an operation needs. Default: the exact
 * scope was granted. An application with a hierarchy (`files` implying `files:read`) supplies its own.
 */
export type ScopeSatisfies = (granted: readonly string[], needed: string) => boolean

export const exactScope: ScopeSatisfies = (granted, needed) => granted.includes(needed)

/**
 * The scopes of `needed` that `principal` lacks (all of them for no principal): what a 401 or 403
 * challenge lists, together with the ones it has, so the client asks for everything at once.
 */
export function missingScopes (principal: McpPrincipal | null, needed: readonly string[], satisfies: ScopeSatisfies): string[] {
  if (principal === null) return [...needed]
  return needed.filter(scope => !satisfies(principal.scopes, scope))
}

/** A scope token (RFC 6749 §3.3: NQCHAR, no space): never needs escaping in a challenge. */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/

export function isScopeToken (value: unknown): value is string {
  return typeof value === 'string' && SCOPE_TOKEN.test(value)
}
