/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728) of the MCP endpoint: which authorization servers
 * issue tokens for it and which scopes it knows, so a client that got a 401 can sign in by itself.
 */

/** The well-known path segment of RFC 9728 §3. */
export const RESOURCE_METADATA_SEGMENT = '/.well-known/oauth-protected-resource'

/** The scope no resource advertises: asking for refresh tokens is the client's business (MCP 2026-07-28 authorization). */
export const OFFLINE_ACCESS = 'offline_access'

export interface ResourceMetadataSettings {
  /** The canonical URI of the MCP endpoint (RFC 8707 §2): lower-case scheme and host, no fragment, no trailing slash. */
  resource: string
  authorizationServers: readonly string[]
  /** Scopes advertised besides those the definitions declare. */
  scopes: readonly string[]
  resourceName: string | undefined
  resourceDocumentation: string | undefined
}

/**
 * The path-based well-known path of a resource's metadata (RFC 9728 §3.1): the well-known segment
 * before the resource's path, so `https://host/mcp` is described at `/.well-known/oauth-protected-resource/mcp`.
 */
export function resourceMetadataPath (resource: string): string {
  const { pathname } = new URL(resource)
  return `${RESOURCE_METADATA_SEGMENT}${pathname === '/' ? '' : pathname}`
}

/**
 * Where a resource's metadata is served, as its challenges name it: the path-based well-known URL on
 * the resource's origin, under the register prefix of the plugin's context (`prefix`: Fastify prefixes
 * every route of a context, so a prefixed instance serves it there; clients follow the challenge).
 */
export function resourceMetadataUrl (resource: string, prefix: string): string {
  return `${new URL(resource).origin}${prefix}${resourceMetadataPath(resource)}`
}

/** The metadata document; `declaredScopes` are the scopes the tools, prompts and resources need right now. */
export function resourceMetadata (settings: ResourceMetadataSettings, declaredScopes: Iterable<string>): Record<string, unknown> {
  const scopes = new Set([...settings.scopes, ...declaredScopes])
  scopes.delete(OFFLINE_ACCESS)
  const document: Record<string, unknown> = {
    resource: settings.resource,
    authorization_servers: [...settings.authorizationServers],
    scopes_supported: [...scopes].sort(),
    bearer_methods_supported: ['header']
  }
  if (settings.resourceName !== undefined) document.resource_name = settings.resourceName
  if (settings.resourceDocumentation !== undefined) document.resource_documentation = settings.resourceDocumentation
  return document
}
