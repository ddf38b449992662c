/**
 * Access tokens a resource server must refuse (issue 21, "Bad input"), made with jose: signed with a
 * key the test holds (the authorization server's own, for tokens it "would" have issued with a claim
 * wrong), unsecured, HS256 keyed with the public key's bytes, with an unknown `kid`, oversized, or with
 * a `scope` that is not a string. Claims follow RFC 9068 (https://www.rfc-editor.org/rfc/rfc9068).
 */
import { randomUUID } from 'node:crypto'
import { base64url, exportSPKI, importJWK, SignJWT, type JWK, type JWTHeaderParameters, type JWTPayload } from 'jose'
import { generateSigningKey, type SigningAlgorithm, type SigningKey } from './signing-keys.js'

export interface AccessTokenClaims {
  issuer: string
  /** The resource (`aud`). */
  audience: string | string[]
  /** Space-separated, as RFC 9068 §2.2.3 has it (default none). */
  scope?: string
  clientId?: string
  /** Default the client id (what oidc-provider puts in a client_credentials token). */
  subject?: string
  /** Default 300. */
  lifetimeSeconds?: number
  /** Seconds since the epoch (default now). */
  issuedAt?: number
}

/** The claims of an RFC 9068 access token, as the test authorization server issues them. */
export function accessTokenClaims ({
  issuer, audience, scope, clientId = 'mcp-test-client-1', subject = clientId, lifetimeSeconds = 300,
  issuedAt = Math.floor(Date.now() / 1000)
}: AccessTokenClaims): JWTPayload {
  return {
    iss: issuer,
    sub: subject,
    aud: audience,
    client_id: clientId,
    ...(scope === undefined ? {} : { scope }),
    iat: issuedAt,
    exp: issuedAt + lifetimeSeconds,
    jti: randomUUID()
  }
}

/**
 * `claims` signed with `key`, the header `{ alg, kid, typ: 'at+jwt' }` of the key with `header` over
 * it (a header field set to undefined is left out). The claims are taken as they are: nothing added.
 */
export async function signed (key: SigningKey, claims: JWTPayload, header: Partial<JWTHeaderParameters> = {}): Promise<string> {
  return await new SignJWT(claims)
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'at+jwt', ...header })
    .sign(key.privateKey)
}

/** An unsecured JWT (RFC 7519 §6: `alg: none`, empty signature), with `header` (a `kid`, say) added. */
export function unsecured (claims: JWTPayload, header: Record<string, unknown> = {}): string {
  const part = (value: unknown): string => base64url.encode(JSON.stringify(value))
  return `${part({ alg: 'none', typ: 'at+jwt', ...header })}.${part(claims)}.`
}

/**
 * HS256 whose HMAC secret is the public key's PEM text (SPKI), labelled with its `kid`: the key
 * confusion attack on a verifier that takes the algorithm from the token
 * (https://auth0.com/blog/critical-vulnerabilities-in-json-web-token-libraries/).
 */
export async function hs256WithPublicKeyBytes (publicJwk: JWK, claims: JWTPayload): Promise<string> {
  if (publicJwk.alg === undefined) throw new Error('the public JWK needs its alg')
  const publicKey = await importJWK(publicJwk, publicJwk.alg)
  if (publicKey instanceof Uint8Array) throw new Error('the JWK is a symmetric key, not a public one')
  const pem = await exportSPKI(publicKey)
  return await new SignJWT(claims)
    .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', ...(publicJwk.kid === undefined ? {} : { kid: publicJwk.kid }) })
    .sign(new TextEncoder().encode(pem))
}

/** `claims` signed with a key made just now, whose `kid` no JWKS publishes. */
export async function unknownKid (claims: JWTPayload, alg: SigningAlgorithm = 'ES256'): Promise<string> {
  return await signed(await generateSigningKey(alg), claims)
}

/** `claims` signed with `key`, padded with a `padding` claim to at least `bytes` characters (default 100 KB). */
export async function oversized (key: SigningKey, claims: JWTPayload, bytes = 100 * 1024): Promise<string> {
  // base64url makes 4 characters of every 3 bytes, so 3/4 of the length in padding is enough.
  return await signed(key, { ...claims, padding: 'x'.repeat(Math.ceil(bytes * 3 / 4)) })
}

/** `claims` signed with `key`, with a `scope` that is not a string (default a list, as some servers send `scp`). */
export async function nonStringScope (key: SigningKey, claims: JWTPayload, scope: unknown = ['demo:read', 'demo:write']): Promise<string> {
  return await signed(key, { ...claims, scope })
}
