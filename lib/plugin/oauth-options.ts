import type { FastifyRequest } from 'fastify'
import { InvalidOptionError } from '../core/errors.js'
import type { AccessTokenSettings } from '../identity/access-tokens.js'
import { exactScope, isScopeToken, type ScopeSatisfies } from '../identity/oauth-scopes.js'
import { OFFLINE_ACCESS, type ResourceMetadataSettings } from '../identity/resource-metadata.js'
import { positiveInteger } from './option-values.js'

/** `auth.oauth`: this endpoint as an OAuth 2.1 resource server (docs/authorization.md). */
export interface OAuthOptions {
  /**
   * The canonical URI of this MCP endpoint as clients reach it (e.g. `https://mcp.example.com/mcp`):
   * what tokens must be issued for (`aud`), and what the metadata names. No query, fragment or
   * credentials; a trailing slash is dropped. The metadata is served at its path-based well-known URL
   * (`/.well-known/oauth-protected-resource/mcp`; under the register prefix of the plugin's context if
   * it has one, where the challenges point) and, without a prefix, at the root one.
   */
  resource: string
  /** The issuer identifiers of the authorization servers whose tokens are accepted (at least one), exactly as their tokens' `iss`. */
  authorizationServers: readonly string[]
  /** Scopes advertised in the metadata besides those tools, prompts and resources declare. */
  scopes?: readonly string[] | undefined
  /** Scopes every request needs (never `offline_access`, which only a client asks for). Default none. */
  requiredScopes?: readonly string[] | undefined
  /** Whether the granted scopes satisfy a needed one (a scope hierarchy). Default: exactly that scope was granted. */
  scopeSatisfies?: ScopeSatisfies | undefined
  /** `'all'` lists every tool, prompt and resource; `'permitted'` only those the principal's scopes allow. Default `'all'`. */
  listing?: 'all' | 'permitted' | undefined
  /** `resource_name` of the metadata. */
  resourceName?: string | undefined
  /** `resource_documentation` of the metadata: an absolute http(s) URL of a page for people. */
  resourceDocumentation?: string | undefined
  /** JWS algorithms accepted for JWT access tokens. Default: the asymmetric ones (RS*, PS*, ES*, EdDSA); `none` and HS* never. */
  algorithms?: readonly string[] | undefined
  /** Seconds of clock difference tolerated on `exp`, `nbf` and `iat`. Default 30. */
  clockToleranceSec?: number | undefined
  /** Longest access token accepted, in bytes, refused before anything parses it. Default 16 384. */
  maxTokenBytes?: number | undefined
  /** At most one fetch of an issuer's key set per this interval when a token names a key it lacks. Default 30 000 ms. */
  jwksRefreshIntervalMs?: number | undefined
  /** How long a key set is used when its answer has no `Cache-Control: max-age`. Default 600 000 ms (the longest, whatever it says: 24 h). */
  jwksMaxAgeMs?: number | undefined
  /** Time limit of a fetch from an authorization server (metadata, keys, introspection). Default 5 000 ms. */
  fetchTimeoutMs?: number | undefined
  /** Size limit of what an authorization server answers. Default 1 MiB. */
  maxFetchBytes?: number | undefined
  /** How long a verified token's principal is kept (until its `exp` at the latest); `0` verifies every request. Default 60 000 ms. */
  verifiedTokenCacheMs?: number | undefined
  /** Verified tokens kept at once. Default 10 000. */
  maxVerifiedTokens?: number | undefined
  /** RFC 7662 introspection for tokens that are not JWTs, with this resource server's own client credentials. */
  introspection?: IntrospectionOptions | undefined
  /** Replaces the built-in verification: the token's claims (`sub` or `client_id`, `scope`, …), or null when it is not valid. */
  verify?: ((token: string, request: FastifyRequest) => unknown) | undefined
}

export interface IntrospectionOptions {
  /** Default: the first authorization server's `introspection_endpoint`. */
  endpoint?: string | undefined
  clientId: string
  clientSecret: string
  /** Introspection answers kept at once. Default 10 000. */
  maxCached?: number | undefined
  /** The longest an answer is kept (never past the token's `exp`). Default 300 000 ms. */
  maxCacheMs?: number | undefined
}

export interface OAuthSettings {
  metadata: ResourceMetadataSettings
  requiredScopes: readonly string[]
  satisfies: ScopeSatisfies
  listing: 'all' | 'permitted'
  maxTokenBytes: number
  /** The cache of verified tokens (lib/identity/verified-tokens.ts). */
  verifiedTokens: { maxEntries: number, maxAgeMs: number }
  /** Seconds a client is told to wait (`Retry-After`) when tokens cannot be verified. */
  retryAfterSeconds: number
  /** How tokens are verified; undefined when `auth.jwt` or `auth.principal` verifies them instead. */
  tokens: AccessTokenSettings | undefined
}

/** What RFC 8414 and RFC 7515 let nobody verify with a published key. */
const ASYMMETRIC_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']
/** The options that configure verification, meaningless when `auth.jwt` or `auth.principal` verifies. */
const VERIFICATION_OPTIONS = ['algorithms', 'clockToleranceSec', 'maxTokenBytes', 'jwksRefreshIntervalMs', 'jwksMaxAgeMs', 'fetchTimeoutMs', 'maxFetchBytes', 'introspection', 'verify', 'verifiedTokenCacheMs', 'maxVerifiedTokens'] as const

/** `verifies`: the plugin verifies tokens itself (no `auth.jwt`, no `auth.principal`). */
export function resolveOAuth (oauth: OAuthOptions | undefined, verifies: boolean): OAuthSettings | undefined {
  if (oauth === undefined) return undefined
  if (typeof oauth !== 'object' || oauth === null) throw new InvalidOptionError('auth.oauth', 'must be an object')
  if (!verifies) {
    const given = VERIFICATION_OPTIONS.filter(name => oauth[name] !== undefined)
    if (given.length > 0) throw new InvalidOptionError(`auth.oauth.${given[0]!}`, 'configures token verification, which auth.jwt or auth.principal does instead')
  }
  const resource = canonicalResource(oauth.resource)
  const authorizationServers = oauth.authorizationServers
  if (!Array.isArray(authorizationServers) || authorizationServers.length === 0) throw new InvalidOptionError('auth.oauth.authorizationServers', 'must list at least one issuer')
  for (const issuer of authorizationServers) httpUrl('auth.oauth.authorizationServers', issuer)
  const listing = oauth.listing ?? 'all'
  if (listing !== 'all' && listing !== 'permitted') throw new InvalidOptionError('auth.oauth.listing', "must be 'all' or 'permitted'")
  const satisfies = oauth.scopeSatisfies ?? exactScope
  if (typeof satisfies !== 'function') throw new InvalidOptionError('auth.oauth.scopeSatisfies', 'must be a function')
  if (oauth.resourceName !== undefined && typeof oauth.resourceName !== 'string') throw new InvalidOptionError('auth.oauth.resourceName', 'must be a string')
  if (oauth.resourceDocumentation !== undefined) documentationUrl(oauth.resourceDocumentation)
  const refreshIntervalMs = positiveInteger('auth.oauth.jwksRefreshIntervalMs', oauth.jwksRefreshIntervalMs, 30_000)
  const requiredScopes = scopeList('auth.oauth.requiredScopes', oauth.requiredScopes)
  // The client asks for refresh tokens if it wants them; no challenge names it (MCP 2026-07-28 authorization).
  if (requiredScopes.includes(OFFLINE_ACCESS)) throw new InvalidOptionError('auth.oauth.requiredScopes', `must not name ${OFFLINE_ACCESS}, which a client asks for, not a resource`)
  return {
    metadata: {
      resource,
      authorizationServers: [...authorizationServers],
      scopes: [...scopeList('auth.oauth.scopes', oauth.scopes), ...requiredScopes],
      resourceName: oauth.resourceName,
      resourceDocumentation: oauth.resourceDocumentation
    },
    requiredScopes,
    satisfies,
    listing,
    maxTokenBytes: positiveInteger('auth.oauth.maxTokenBytes', oauth.maxTokenBytes, 16_384),
    verifiedTokens: {
      maxEntries: positiveInteger('auth.oauth.maxVerifiedTokens', oauth.maxVerifiedTokens, 10_000),
      maxAgeMs: positiveInteger('auth.oauth.verifiedTokenCacheMs', oauth.verifiedTokenCacheMs, 60_000, 0)
    },
    retryAfterSeconds: Math.ceil(refreshIntervalMs / 1000),
    tokens: verifies ? tokenSettings(oauth, resource, refreshIntervalMs) : undefined
  }
}

function tokenSettings (oauth: OAuthOptions, resource: string, refreshIntervalMs: number): AccessTokenSettings {
  const algorithms = oauth.algorithms ?? ASYMMETRIC_ALGORITHMS
  if (!Array.isArray(algorithms) || algorithms.length === 0 || !algorithms.every(alg => ASYMMETRIC_ALGORITHMS.includes(alg))) {
    throw new InvalidOptionError('auth.oauth.algorithms', `must be a non-empty subset of ${ASYMMETRIC_ALGORITHMS.join(', ')}`)
  }
  if (oauth.verify !== undefined && typeof oauth.verify !== 'function') throw new InvalidOptionError('auth.oauth.verify', 'must be a function')
  return {
    resource,
    issuers: [...oauth.authorizationServers],
    algorithms,
    clockToleranceSec: positiveInteger('auth.oauth.clockToleranceSec', oauth.clockToleranceSec, 30, 0),
    keys: {
      refreshIntervalMs,
      defaultMaxAgeMs: positiveInteger('auth.oauth.jwksMaxAgeMs', oauth.jwksMaxAgeMs, 600_000),
      maxMaxAgeMs: 86_400_000,
      fetch: {
        timeoutMs: positiveInteger('auth.oauth.fetchTimeoutMs', oauth.fetchTimeoutMs, 5_000),
        maxBytes: positiveInteger('auth.oauth.maxFetchBytes', oauth.maxFetchBytes, 1_048_576)
      }
    },
    introspection: introspectionSettings(oauth.introspection),
    verify: oauth.verify
  }
}

function introspectionSettings (introspection: IntrospectionOptions | undefined): AccessTokenSettings['introspection'] {
  if (introspection === undefined) return undefined
  if (typeof introspection !== 'object' || introspection === null) throw new InvalidOptionError('auth.oauth.introspection', 'must be an object')
  for (const name of ['clientId', 'clientSecret'] as const) {
    if (typeof introspection[name] !== 'string' || introspection[name] === '') throw new InvalidOptionError(`auth.oauth.introspection.${name}`, 'must be a non-empty string')
  }
  if (introspection.endpoint !== undefined) httpUrl('auth.oauth.introspection.endpoint', introspection.endpoint)
  return {
    endpoint: introspection.endpoint,
    clientId: introspection.clientId,
    clientSecret: introspection.clientSecret,
    maxCached: positiveInteger('auth.oauth.introspection.maxCached', introspection.maxCached, 10_000),
    maxCacheMs: positiveInteger('auth.oauth.introspection.maxCacheMs', introspection.maxCacheMs, 300_000)
  }
}

/** RFC 8707 §2: an absolute http(s) URI without a fragment (nor, here, a query); no trailing slash. */
function canonicalResource (value: unknown): string {
  const url = httpUrl('auth.oauth.resource', value)
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`
}

function httpUrl (name: string, value: unknown): URL {
  let url: URL | undefined
  try {
    url = typeof value === 'string' ? new URL(value) : undefined
  } catch {}
  if (url === undefined || (url.protocol !== 'https:' && url.protocol !== 'http:') || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new InvalidOptionError(name, 'must be an absolute http(s) URL without query, fragment or credentials')
  }
  return url
}

/** `resource_documentation`: a page for people (RFC 9728 §2), so a query or a fragment is fine. */
function documentationUrl (value: unknown): void {
  let url: URL | undefined
  try {
    url = typeof value === 'string' ? new URL(value) : undefined
  } catch {}
  if (url === undefined || (url.protocol !== 'https:' && url.protocol !== 'http:')) throw new InvalidOptionError('auth.oauth.resourceDocumentation', 'must be an absolute http(s) URL')
}

function scopeList (name: string, value: unknown): string[] {
  if (value === undefined) return []
  if (!Array.isArray(value) || !value.every(isScopeToken)) {
    throw new InvalidOptionError(name, 'must be an array of scope tokens (printable ASCII without spaces, quotes or backslashes)')
  }
  return [...new Set(value as string[])]
}
