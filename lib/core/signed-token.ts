import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto'

/** A key for one use, derived from a secret (HKDF-SHA256): a key never serves two purposes. */
export function deriveKey (secret: Buffer, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, Buffer.alloc(0), `fastify-mcp-cancellation/${purpose}`, 32))
}

/**
 * Signs and checks the plugin's stateless tokens (sessions, legacy server-request ids, modern
 * request states): an HMAC-SHA256, base64url, over a token's body and the values it is bound to (the
 * principal or scope that may present it). Each bound value goes in length-prefixed, so no two (body,
 * values) inputs are the same bytes; an absent one is `-`. The MAC is compared as its canonical
 * encoding, in constant time: base64url's last character carries spare bits, and a token with them set
 * must not verify as another spelling of the same MAC.
 */
export class TokenSigner {
  readonly #key: Buffer

  constructor (key: Buffer) {
    this.#key = key
  }

  /** The MAC of `body` bound to `bound`, base64url (43 characters). */
  sign (body: string, ...bound: ReadonlyArray<string | undefined>): string {
    const hmac = createHmac('sha256', this.#key).update(body)
    for (const value of bound) hmac.update(value === undefined ? '|-' : `|${Buffer.byteLength(value)}:${value}`)
    return hmac.digest('base64url')
  }

  /** Whether `mac` is the MAC of `body` bound to `bound`. */
  verify (body: string, mac: string, ...bound: ReadonlyArray<string | undefined>): boolean {
    const expected = Buffer.from(this.sign(body, ...bound))
    const given = Buffer.from(mac)
    return given.length === expected.length && timingSafeEqual(given, expected)
  }
}
