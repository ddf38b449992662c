import { createLocalJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose'
import { fetchJson, type FetchLimits } from '../core/bounded-fetch.js'
import { FetchFailure } from '../core/errors.js'
import { isJsonObject } from '../core/jsonrpc.js'

/** How the keys of one issuer are kept. */
export interface KeyCachePolicy {
  /** At most one fetch of the key set per this interval when a token names a key the set lacks. */
  refreshIntervalMs: number
  /** How long a key set is used when its answer carries no `Cache-Control: max-age`. */
  defaultMaxAgeMs: number
  /** The longest a key set is used without a fetch, whatever its `max-age` says. */
  maxMaxAgeMs: number
  fetch: FetchLimits
}

/** An authorization server's metadata: what the resource server needs of it. */
export interface AuthorizationServerMetadata {
  issuer: string
  jwksUri: string | undefined
  introspectionEndpoint: string | undefined
}

/**
 * The well-known URLs of an issuer's metadata, in the order they are tried: RFC 8414 §3.1 (the
 * well-known segment inserted before the issuer's path), then OpenID Connect Discovery 1.0 §4 (appended
 * after it), then the path-inserted OpenID form (RFC 8414 §5).
 */
export function metadataUrls (issuer: string): string[] {
  const url = new URL(issuer)
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '')
  return [
    `${url.origin}/.well-known/oauth-authorization-server${path}`,
    `${url.origin}${path}/.well-known/openid-configuration`,
    ...(path === '' ? [] : [`${url.origin}/.well-known/openid-configuration${path}`])
  ]
}

/**
 * The signing keys of one authorization server, discovered from its metadata and kept as its answers'
 * cache headers say (within bounds). A token naming a key the set lacks makes the set be fetched again,
 * but at most once per `refreshIntervalMs`: a flood of made-up `kid`s costs the authorization server one
 * request per interval, not one per token. Keys that were fetched keep verifying while the server is
 * unreachable; only what they cannot verify waits for it.
 */
export class IssuerKeys {
  readonly issuer: string
  readonly #policy: KeyCachePolicy
  #metadata: AuthorizationServerMetadata | undefined
  #keys: JWTVerifyGetKey | undefined
  #expiresAt = 0
  #lastFetchAt = Number.NEGATIVE_INFINITY
  /** The last fetch failed: the set may be missing keys the server has. */
  #lastFetchFailed = false
  #fetching: Promise<void> | undefined

  constructor (issuer: string, policy: KeyCachePolicy) {
    this.issuer = issuer
    this.#policy = policy
  }

  /** Whether the last fetch of the key set was answered (true before any). */
  get reachable (): boolean {
    return !this.#lastFetchFailed
  }

  /** The metadata, fetched once (again after a failure). Throws a `FetchFailure` when unreachable. */
  async metadata (): Promise<AuthorizationServerMetadata> {
    this.#metadata ??= await discover(this.issuer, this.#policy.fetch)
    return this.#metadata
  }

  /**
   * The current key set, fetched first when there is none or it has expired. An expired set whose
   * fetch fails is used as it is; with no set at all the `FetchFailure` is thrown.
   */
  async current (): Promise<JWTVerifyGetKey> {
    if (this.#keys !== undefined && Date.now() < this.#expiresAt) return this.#keys
    // After a failed fetch the server is asked again once per refresh interval, not once per request.
    if (this.#lastFetchFailed && this.#fetching === undefined && Date.now() - this.#lastFetchAt < this.#policy.refreshIntervalMs) {
      if (this.#keys !== undefined) return this.#keys
      throw new FetchFailure('network', this.issuer, 'the key set could not be fetched lately')
    }
    try {
      await this.#refresh()
    } catch (error) {
      if (this.#keys === undefined) throw error
    }
    return this.#keys!
  }

  /**
   * A token named a key that `used` (the set it was checked against) lacks: resolves whether a newer
   * set is there to check it against again. One fetch already under way is waited for, as is a set
   * fetched since `used` (so every request that arrives with a newly rotated key passes, not only the
   * one that asked for the fetch); otherwise the set is fetched again unless that was less than
   * `refreshIntervalMs` ago. Throws a `FetchFailure` when the fetch failed, or when the last one failed
   * and this one is not allowed yet (the set is then not known to be complete).
   */
  async refreshForUnknownKey (used: JWTVerifyGetKey): Promise<boolean> {
    if (this.#fetching !== undefined) await this.#fetching
    else if (this.#keys !== used) return true
    else if (Date.now() - this.#lastFetchAt >= this.#policy.refreshIntervalMs) await this.#refresh()
    else if (this.#lastFetchFailed) throw new FetchFailure('network', this.issuer, 'the key set could not be fetched lately')
    return this.#keys !== used
  }

  async #refresh (): Promise<void> {
    this.#fetching ??= this.#fetch().finally(() => { this.#fetching = undefined })
    await this.#fetching
  }

  async #fetch (): Promise<void> {
    try {
      const { jwksUri } = await this.metadata()
      if (jwksUri === undefined) throw new FetchFailure('not-json', this.issuer, 'the metadata names no jwks_uri')
      const { value, headers } = await fetchJson(jwksUri, this.#policy.fetch)
      this.#keys = keySet(value, jwksUri)
      this.#expiresAt = Date.now() + this.#maxAge(headers.get('cache-control'))
      this.#lastFetchFailed = false
    } catch (error) {
      this.#lastFetchFailed = true
      throw error
    } finally {
      // From when the answer came (or the time limit ran out), so a server slower than the interval is not asked again at once.
      this.#lastFetchAt = Date.now()
    }
  }

  /**
   * A key of the current set could not be used to verify (its coordinates are no key, say): the set
   * counts as a failed fetch, used until the refresh interval has passed, then fetched again.
   */
  unusable (): void {
    this.#lastFetchFailed = true
    this.#expiresAt = 0
  }

  /** `max-age` of a Cache-Control header, within bounds; `no-store`/`no-cache` keep the set one refresh interval. */
  #maxAge (cacheControl: string | null): number {
    const { refreshIntervalMs, defaultMaxAgeMs, maxMaxAgeMs } = this.#policy
    if (cacheControl === null) return defaultMaxAgeMs
    if (/(?:^|,)\s*no-(?:store|cache)\b/i.test(cacheControl)) return refreshIntervalMs
    const maxAge = /(?:^|,)\s*max-age\s*=\s*"?(\d+)/i.exec(cacheControl)?.[1]
    if (maxAge === undefined) return defaultMaxAgeMs
    return Math.min(Math.max(Number(maxAge) * 1000, refreshIntervalMs), maxMaxAgeMs)
  }
}

/** `value` as a key set (`{ keys: [<JWK object>, …] }`); a `FetchFailure` when it is not one. */
function keySet (value: unknown, jwksUri: string): JWTVerifyGetKey {
  try {
    if (isJsonObject(value)) return createLocalJWKSet(value as unknown as JSONWebKeySet)
  } catch {}
  throw new FetchFailure('not-json', jwksUri, 'answered no JSON Web Key Set')
}

/** The first metadata document an issuer serves at its well-known URLs; its `issuer` must be the issuer (RFC 8414 §3.3). */
async function discover (issuer: string, limits: FetchLimits): Promise<AuthorizationServerMetadata> {
  const [first, ...others] = metadataUrls(issuer)
  let failure = new FetchFailure('status', first!, 'no metadata')
  for (const url of [first!, ...others]) {
    try {
      const { value } = await fetchJson(url, limits)
      if (!isJsonObject(value) || value.issuer !== issuer) throw new FetchFailure('not-json', url, `is not the metadata of ${issuer}`)
      return {
        issuer,
        jwksUri: typeof value.jwks_uri === 'string' ? value.jwks_uri : undefined,
        introspectionEndpoint: typeof value.introspection_endpoint === 'string' ? value.introspection_endpoint : undefined
      }
    } catch (error) {
      if (!(error instanceof FetchFailure)) throw error
      // An unreachable server is unreachable at every URL: no point in trying the others.
      if (error.reason === 'network' || error.reason === 'timeout') throw error
      failure = error
    }
  }
  throw failure
}
