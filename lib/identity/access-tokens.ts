import { createHash } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import { decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey, type JWTVerifyOptions } from 'jose'
import { fetchJson } from '../core/bounded-fetch.js'
import { AuthFailure, FetchFailure } from '../core/errors.js'
import { isJsonObject } from '../core/jsonrpc.js'
import { IssuerKeys, type KeyCachePolicy } from './issuer-keys.js'
import { OutageLog } from './outage-log.js'
import type { McpPrincipal } from './principal.js'
import { principalId } from './principal.js'

/** RFC 7662 introspection of tokens that are not JWTs. */
export interface IntrospectionSettings {
  /** The endpoint; default: the authorization server's `introspection_endpoint`. */
  endpoint: string | undefined
  clientId: string
  clientSecret: string
  /** Introspection answers kept (each until its token's `exp`, at most `maxCacheMs`). */
  maxCached: number
  maxCacheMs: number
}

export interface AccessTokenSettings {
  /** The canonical URI of the resource: what `aud` must contain. */
  resource: string
  /** The issuers tokens may come from. */
  issuers: readonly string[]
  /** JWS algorithms accepted. */
  algorithms: readonly string[]
  clockToleranceSec: number
  keys: KeyCachePolicy
  introspection: IntrospectionSettings | undefined
  /** Replaces the built-in verification: the token's claims, or null when it is not valid. */
  verify: ((token: string, request: FastifyRequest) => unknown) | undefined
}

/** jose's claim failures by claim: which reason a dashboard sees (an expired token is jose's JWTExpired; an `exp` missing or not a number is invalid). */
const CLAIM_REASONS: Record<string, AuthFailure['reason']> = { aud: 'audience', iss: 'issuer' }

/**
 * Verifies an OAuth access token for this resource (OAuth 2.1 §5.2) and makes the principal of it.
 * JWT access tokens (RFC 9068) are verified with the issuer's keys on every node, with nothing shared;
 * other tokens are introspected (RFC 7662) when that is configured. Every refusal is an `AuthFailure`
 * with its reason; a token that cannot be verified because the authorization server is unreachable is
 * `unavailable` (a 503, never a 401 that would send the client to sign in again).
 */
export class AccessTokenVerifier {
  readonly #settings: AccessTokenSettings
  readonly #keys: Map<string, IssuerKeys>
  readonly #introspected = new Map<string, { principal: McpPrincipal, until: number }>()
  readonly #outages = new OutageLog()

  constructor (settings: AccessTokenSettings) {
    this.#settings = settings
    this.#keys = new Map(settings.issuers.map(issuer => [issuer, new IssuerKeys(issuer, settings.keys)]))
  }

  async verify (token: string, request: FastifyRequest): Promise<McpPrincipal> {
    const { verify } = this.#settings
    if (verify !== undefined) return this.#custom(verify, token, request)
    const header = protectedHeader(token)
    if (header !== undefined) return await this.#jwt(token, header.alg, request)
    if (this.#settings.introspection !== undefined) return await this.#introspect(token, this.#settings.introspection, request)
    throw new AuthFailure('invalid', 'not a JWT, and no introspection is configured')
  }

  async #custom (verify: NonNullable<AccessTokenSettings['verify']>, token: string, request: FastifyRequest): Promise<McpPrincipal> {
    let claims: unknown
    try {
      claims = await verify(token, request)
    } catch (error) {
      throw new AuthFailure('invalid', `auth.oauth.verify refused the token: ${String(error)}`)
    }
    if (claims === null || claims === undefined) throw new AuthFailure('invalid', 'auth.oauth.verify refused the token')
    if (!isJsonObject(claims)) throw new AuthFailure('invalid', 'auth.oauth.verify answered no claims object')
    return principalOf(claims, typeof claims.iss === 'string' ? claims.iss : null)
  }

  async #jwt (token: string, algorithm: string | undefined, request: FastifyRequest): Promise<McpPrincipal> {
    const { algorithms, resource, clockToleranceSec } = this.#settings
    if (algorithm === undefined || !algorithms.includes(algorithm)) throw new AuthFailure('invalid', `algorithm ${String(algorithm)} is not accepted`)
    let unverified: JWTPayload
    try {
      unverified = decodeJwt(token)
    } catch {
      throw new AuthFailure('invalid', 'not a JWT')
    }
    const issuer = unverified.iss
    const keys = typeof issuer === 'string' ? this.#keys.get(issuer) : undefined
    if (keys === undefined) throw new AuthFailure('issuer', 'from an issuer that is not configured')
    // RFC 9068 §2.2: `exp` is required (a token without one would be good forever).
    const options = { issuer: keys.issuer, audience: resource, algorithms: [...algorithms], clockTolerance: clockToleranceSec, requiredClaims: ['exp'] }
    // The keys may be served from the cache while the server is down: it answered only if its last fetch did.
    const payload = await this.#asking(keys.issuer, request, async () => await verifiedPayload(token, keys, options), () => keys.reachable)
    // jose checks `iat` against the clock only with a maxTokenAge; a token issued in the future is not valid yet.
    if (typeof payload.iat === 'number' && payload.iat > Date.now() / 1000 + clockToleranceSec) throw new AuthFailure('invalid', 'claim iat: issued in the future')
    return principalOf(payload as Record<string, unknown>, keys.issuer)
  }

  /**
   * `work`, which may need `server`: a fetch that failed makes the verification `unavailable` (and
   * starts an outage of `server`); `answered()`, once it is done, says whether the server answered.
   */
  async #asking<T> (server: string, request: FastifyRequest, work: () => Promise<T>, answered: () => boolean): Promise<T> {
    try {
      return await work()
    } catch (error) {
      if (!(error instanceof FetchFailure)) throw error
      this.#outages.unreachable(server, error.message, request.log)
      throw new AuthFailure('unavailable', error.message)
    } finally {
      if (answered()) this.#outages.answered(server, request.log)
    }
  }

  async #introspect (token: string, settings: IntrospectionSettings, request: FastifyRequest): Promise<McpPrincipal> {
    const digest = createHash('sha256').update(token).digest('base64url')
    const cached = this.#introspected.get(digest)
    if (cached !== undefined && Date.now() < cached.until) return cached.principal
    this.#introspected.delete(digest)
    const [issuer] = this.#settings.issuers
    let answered = false
    const { value } = await this.#asking(issuer!, request, async () => {
      const endpoint = settings.endpoint ?? (await this.#keys.get(issuer!)!.metadata()).introspectionEndpoint
      // A FetchFailure like a metadata without jwks_uri (lib/identity/issuer-keys.ts), so the outage log says why every opaque token is a 503.
      if (endpoint === undefined) throw new FetchFailure('not-json', issuer!, 'the metadata names no introspection_endpoint')
      const credentials = Buffer.from(`${encodeURIComponent(settings.clientId)}:${encodeURIComponent(settings.clientSecret)}`).toString('base64')
      const fetched = await fetchJson(endpoint, this.#settings.keys.fetch, {
        body: new URLSearchParams({ token, token_type_hint: 'access_token' }),
        headers: { authorization: `Basic ${credentials}`, 'content-type': 'application/x-www-form-urlencoded' }
      })
      answered = true
      return fetched
    }, () => answered)
    if (!isJsonObject(value) || value.active !== true) throw new AuthFailure('invalid', 'introspection: the token is not active')
    if (!audiences(value.aud).includes(this.#settings.resource)) throw new AuthFailure('audience', 'introspection: the token is not for this resource')
    const tokenIssuer = typeof value.iss === 'string' ? value.iss : issuer!
    if (!this.#settings.issuers.includes(tokenIssuer)) throw new AuthFailure('issuer', 'introspection: from an issuer that is not configured')
    const now = Date.now()
    const exp = typeof value.exp === 'number' ? value.exp * 1000 : Number.POSITIVE_INFINITY
    if (exp <= now) throw new AuthFailure('expired', 'introspection: the token has expired')
    const principal = principalOf(value, tokenIssuer)
    if (this.#introspected.size >= settings.maxCached) this.#introspected.delete(this.#introspected.keys().next().value!)
    this.#introspected.set(digest, { principal, until: Math.min(exp, now + settings.maxCacheMs) })
    return principal
  }
}

/** The protected header of a JWS compact token; undefined when the token is not one (an opaque token). */
function protectedHeader (token: string): { alg: string | undefined } | undefined {
  if (token.split('.').length !== 3) return undefined
  try {
    const header = decodeProtectedHeader(token)
    return { alg: header.alg }
  } catch {
    return undefined
  }
}

/**
 * The payload of `token` verified with the issuer's keys; a key the set lacks (rotated in since the
 * set was fetched, or made up) makes the set be fetched again, within its rate limit. Throws an
 * `AuthFailure`, or a `FetchFailure` when the keys could not be fetched or cannot be used.
 */
async function verifiedPayload (token: string, keys: IssuerKeys, options: JWTVerifyOptions): Promise<JWTPayload> {
  const used = await keys.current()
  try {
    return await verifiedWith(token, used, keys, options)
  } catch (error) {
    if (!(error instanceof joseErrors.JWKSNoMatchingKey)) throw refusal(error)
  }
  if (!await keys.refreshForUnknownKey(used)) throw new AuthFailure('invalid', 'signed with a key the issuer does not publish')
  try {
    return await verifiedWith(token, await keys.current(), keys, options)
  } catch (retry) {
    throw refusal(retry)
  }
}

/**
 * `token` verified with the key set `set` of `keys`. A token without a `kid` that several keys of the
 * set may have signed (two of one type while the server rotates) is tried with each, as jose leaves
 * to its caller (https://github.com/panva/jose/blob/main/docs/jwks/local/functions/createLocalJWKSet.md).
 * A key of the set that cannot be imported is the server's fault, not the token's: the set counts as
 * a failed fetch (`FetchFailure`, a 503), fetched again after the refresh interval.
 */
async function verifiedWith (token: string, set: JWTVerifyGetKey, keys: IssuerKeys, options: JWTVerifyOptions): Promise<JWTPayload> {
  try {
    return (await jwtVerify(token, set, options)).payload
  } catch (error) {
    if (error instanceof joseErrors.JWKSMultipleMatchingKeys) {
      for await (const key of error) {
        try {
          return (await jwtVerify(token, key, options)).payload
        } catch (attempt) {
          if (!(attempt instanceof joseErrors.JWSSignatureVerificationFailed)) throw attempt
        }
      }
      throw new joseErrors.JWSSignatureVerificationFailed()
    }
    if (error instanceof joseErrors.JOSEError) throw error
    keys.unusable()
    throw new FetchFailure('not-json', keys.issuer, `a key of its key set cannot be used: ${String(error)}`)
  }
}

/** The `AuthFailure` of a refused token; a `FetchFailure` (the keys, not the token) is thrown on as it is. */
function refusal (error: unknown): AuthFailure {
  if (error instanceof joseErrors.JWTExpired) return new AuthFailure('expired', 'the token has expired')
  if (error instanceof joseErrors.JWTClaimValidationFailed) return new AuthFailure(CLAIM_REASONS[error.claim] ?? 'invalid', `claim ${error.claim}: ${error.reason}`)
  if (error instanceof joseErrors.JOSEError) return new AuthFailure('invalid', error.code)
  throw error
}

function audiences (aud: unknown): string[] {
  if (typeof aud === 'string') return [aud]
  return Array.isArray(aud) ? aud.filter((value): value is string => typeof value === 'string') : []
}

/**
 * The principal of verified claims: the subject is `sub`, or `client_id` for a token a client holds for
 * itself (client credentials: RFC 9068 §2.2 makes them the same; some servers leave `sub` out).
 */
function principalOf (claims: Record<string, unknown>, issuer: string | null): McpPrincipal {
  const subject = principalId(claims.sub ?? claims.client_id)
  if (subject === null) throw new AuthFailure('invalid', 'the token names no subject')
  const scope = claims.scope ?? ''
  if (typeof scope !== 'string') throw new AuthFailure('invalid', 'the scope claim is not a string')
  return {
    id: issuer === null ? subject : `${issuer}#${subject}`,
    subject,
    issuer,
    scopes: scope.split(' ').filter(value => value !== ''),
    clientId: typeof claims.client_id === 'string' ? claims.client_id : null,
    claims
  }
}
