import { randomBytes } from 'node:crypto'
import { deriveKey, TokenSigner } from '../core/signed-token.js'
import { isJsonObject, type JsonObject } from '../core/jsonrpc.js'

const VERSION = 's3'
const RANDOM_BYTES = 18 // 144 bits of randomness
// Canonical form only: lenient base64url decoding must not let one session answer to several ids.
// s3 (and s2) is followed by the client's capabilities (one base-32 digit). s3 is signed with a key
// derived from the secret; s2 and s1, minted by earlier versions with the secret itself, still verify.
const SESSION_ID = /^((s1|s[23][0-9a-v])\.([0-9a-z]{1,11})\.[A-Za-z0-9_-]{24})\.([A-Za-z0-9_-]{43})$/

/** The client capabilities a session carries, one bit each: what the server may ask the client. */
const CAPABILITY_BITS = [
  ['elicitation', undefined],
  ['elicitation', 'url'],
  ['sampling', undefined],
  ['sampling', 'tools'],
  ['roots', undefined]
] as const

function capabilityMask (capabilities: unknown): number {
  if (!isJsonObject(capabilities)) return 0
  let mask = 0
  CAPABILITY_BITS.forEach(([name, feature], bit) => {
    const declared = capabilities[name]
    if (isJsonObject(declared) && (feature === undefined || declared[feature] !== undefined)) mask |= 1 << bit
  })
  return mask
}

/**
 * The capabilities `initialize` declared, as the verified session id `id` carries them (only those that
 * decide what the server may ask); undefined for a session minted before sessions carried them.
 */
export function sessionCapabilities (id: string): JsonObject | undefined {
  if (id.startsWith('s1')) return undefined
  const mask = parseInt(id.charAt(2), 32)
  const capabilities: Record<string, JsonObject> = {}
  CAPABILITY_BITS.forEach(([name, feature], bit) => {
    if ((mask & (1 << bit)) === 0) return
    const declared = capabilities[name] ??= {}
    if (feature !== undefined) declared[feature] = {}
  })
  return capabilities
}

export interface VerifiedSession {
  id: string
  expiresAt: number
}

/**
 * Stateless legacy sessions: `Mcp-Session-Id` = version+capabilities . expiry . random . HMAC-SHA256,
 * all visible ASCII (base64url). The MAC covers the client's capabilities, the expiry, the randomness
 * and the principal the session was minted for, so any node holding the secret verifies a session (and
 * knows what the client can be asked) without shared state, and a session presented under another
 * principal (or none) does not verify. Only revocation needs state.
 */
export class SessionCodec {
  readonly #signer: TokenSigner
  /** What signed the sessions of earlier versions (s1, s2): the secret itself. */
  readonly #earlierSigner: TokenSigner
  readonly #ttlMs: number

  constructor (secret: string | Buffer, ttlMs: number) {
    this.#signer = new TokenSigner(deriveKey(Buffer.from(secret), 'session/v1'))
    this.#earlierSigner = new TokenSigner(Buffer.from(secret))
    this.#ttlMs = ttlMs
  }

  /** A session for `principal`, carrying the `capabilities` its client declared in `initialize`. */
  mint (principal: string | undefined, capabilities: unknown, now = Date.now()): VerifiedSession {
    const expiresAt = now + this.#ttlMs
    const body = `${VERSION}${capabilityMask(capabilities).toString(32)}.${expiresAt.toString(36)}.${randomBytes(RANDOM_BYTES).toString('base64url')}`
    return { id: `${body}.${this.#signer.sign(body, principal)}`, expiresAt }
  }

  /** When the session `id` (one that verified) expires; 0 for what is not a session id. */
  expiryOf (id: string): number {
    const expiry = SESSION_ID.exec(id)?.[3]
    return expiry === undefined ? 0 : parseInt(expiry, 36)
  }

  /** The session, or undefined when it is malformed, forged, expired or minted for another principal. */
  verify (id: string, principal: string | undefined, now = Date.now()): VerifiedSession | undefined {
    const match = SESSION_ID.exec(id)
    if (match === null) return undefined
    const [, body, version, expiry, mac] = match as unknown as [string, string, string, string, string]
    const expiresAt = parseInt(expiry, 36)
    if (!(expiresAt > now)) return undefined
    const signer = version.startsWith(VERSION) ? this.#signer : this.#earlierSigner
    if (!signer.verify(body, mac, principal)) return undefined
    return { id, expiresAt }
  }
}
