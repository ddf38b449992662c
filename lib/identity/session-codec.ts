import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

const VERSION = 's1'
const RANDOM_BYTES = 18 // 144 bits of randomness
// Canonical form only: lenient base64url decoding must not let one session answer to several ids.
const SESSION_ID = /^(s1\.([0-9a-z]{1,11})\.[A-Za-z0-9_-]{24})\.([A-Za-z0-9_-]{43})$/

export interface VerifiedSession {
  id: string
  expiresAt: number
}

/**
 * Stateless legacy sessions: `Mcp-Session-Id` = version . expiry . random . HMAC-SHA256,
 * all visible ASCII (base64url). The MAC covers the expiry, the randomness and the principal the
 * session was minted for, so any node holding the secret verifies a session without shared state, and
 * a session presented under another principal (or none) does not verify. Only revocation needs state.
 */
export class SessionCodec {
  readonly #secret: Buffer
  readonly #ttlMs: number

  constructor (secret: string | Buffer, ttlMs: number) {
    this.#secret = Buffer.from(secret)
    this.#ttlMs = ttlMs
  }

  mint (principal: string | undefined, now = Date.now()): VerifiedSession {
    const expiresAt = now + this.#ttlMs
    const body = `${VERSION}.${expiresAt.toString(36)}.${randomBytes(RANDOM_BYTES).toString('base64url')}`
    return { id: `${body}.${this.#mac(body, principal).toString('base64url')}`, expiresAt }
  }

  /** The session, or undefined when it is malformed, forged, expired or minted for another principal. */
  verify (id: string, principal: string | undefined, now = Date.now()): VerifiedSession | undefined {
    const match = SESSION_ID.exec(id)
    if (match === null) return undefined
    const [, body, expiry, mac] = match as unknown as [string, string, string, string]
    const expiresAt = parseInt(expiry, 36)
    if (!(expiresAt > now)) return undefined
    const expected = this.#mac(body, principal)
    // Comparing the encodings keeps it canonical: the 43rd character carries 2 bits nobody checks.
    if (!timingSafeEqual(Buffer.from(mac), Buffer.from(expected.toString('base64url')))) return undefined
    return { id, expiresAt }
  }

  #mac (body: string, principal: string | undefined): Buffer {
    // The principal is length-prefixed so no (body, principal) pair can collide with another.
    const bound = principal === undefined ? '-' : `${Buffer.byteLength(principal)}:${principal}`
    return createHmac('sha256', this.#secret).update(`${body}|${bound}`).digest()
  }
}
