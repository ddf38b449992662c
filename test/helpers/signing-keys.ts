/**
 * Asymmetric signing keys for the authorization server of the tests and for tokens forged in them:
 * the private key (to sign), the public key (to verify), and both as JWKs with their `kid`.
 */
import { randomUUID } from 'node:crypto'
import { exportJWK, generateKeyPair, type CryptoKey, type JWK } from 'jose'

/** The JWS algorithms the test authorization server can sign access tokens with (oidc-provider's defaults). */
export type SigningAlgorithm = 'ES256' | 'RS256' | 'PS256'

export interface SigningKey {
  kid: string
  alg: SigningAlgorithm
  privateKey: CryptoKey
  publicKey: CryptoKey
  /** The private key as a JWK with `kid`, `alg` and `use: 'sig'`: what an authorization server's `jwks` configuration takes. */
  privateJwk: JWK
  /** The public key as a JWK with `kid`, `alg` and `use: 'sig'`: what a JWKS publishes. */
  publicJwk: JWK
}

/** A fresh key pair for `alg` with a random `kid`. */
export async function generateSigningKey (alg: SigningAlgorithm = 'ES256'): Promise<SigningKey> {
  const kid = randomUUID()
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true })
  const labels = { kid, alg, use: 'sig' }
  return {
    kid,
    alg,
    privateKey,
    publicKey,
    privateJwk: { ...await exportJWK(privateKey), ...labels },
    publicJwk: { ...await exportJWK(publicKey), ...labels }
  }
}
