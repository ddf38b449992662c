import { InvalidDefinitionError } from '../core/errors.js'
import { isScopeToken } from '../identity/oauth-scopes.js'
import type { JsonObject } from '../core/jsonrpc.js'
import { OFFLINE_ACCESS } from '../identity/resource-metadata.js'

/** Which definitions the principal may see in a list, by the OAuth scopes they need; undefined lists them all. */
export type ListFilter = ((scopes: readonly string[]) => boolean) | undefined

/**
 * The OAuth scopes a tool, prompt, resource or resource template declares (`scopes`): a caller's
 * token must grant all of them (docs/authorization.md). Checked at registration: scope tokens only,
 * never `offline_access` (a client asks for refresh tokens; no challenge names it, MCP 2026-07-28).
 */
export function definitionScopes (kind: string, key: string, scopes: unknown, authorization: boolean): readonly string[] {
  if (scopes === undefined) return []
  if (!Array.isArray(scopes) || !scopes.every(isScopeToken)) {
    throw new InvalidDefinitionError(kind, key, 'scopes must be an array of OAuth scope tokens (printable ASCII without spaces, quotes or backslashes)')
  }
  if (scopes.includes(OFFLINE_ACCESS)) throw new InvalidDefinitionError(kind, key, `scopes must not name ${OFFLINE_ACCESS}, which a client asks for, not a resource`)
  if (!authorization && scopes.length > 0) throw new InvalidDefinitionError(kind, key, 'scopes need the auth option (nobody could be granted them)')
  return [...new Set(scopes)]
}

/** A registered definition as lists show it, with the OAuth scopes it needs. */
export interface Listed {
  listing: JsonObject
  scopes: readonly string[]
}

/** The listings of `definitions` the filter lets through (all of them without one). */
export function listingsOf (definitions: Iterable<Listed>, permitted: ListFilter): JsonObject[] {
  const all = [...definitions]
  return (permitted === undefined ? all : all.filter(definition => permitted(definition.scopes))).map(definition => definition.listing)
}

/** Every scope `definitions` declare. */
export function scopesDeclaredBy (definitions: Iterable<Listed>): string[] {
  return [...definitions].flatMap(definition => definition.scopes)
}
