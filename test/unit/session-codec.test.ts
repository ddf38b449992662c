/**
 * Stateless signed sessions (DESIGN §5): `Mcp-Session-Id` = s3<capabilities> . expiry . random . HMAC,
 * verifiable by any node with the secret, bound to the principal it was minted for, carrying what the
 * client may be asked, accepted only in canonical form.
 */
import { createHmac, randomBytes } from 'node:crypto'
import t from 'tap'
import { SessionCodec, sessionCapabilities } from '../../lib/identity/session-codec.js'

const SECRET = 'x'.repeat(32)
const TTL = 60_000
const NOW = 1_700_000_000_000
const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

/** `id` with the character at `index` replaced by another base64url character. */
function flip (id: string, index: number): string {
  const c = id[index]!
  const replacement = B64URL[(B64URL.indexOf(c) + 1) % 64]!
  return id.slice(0, index) + replacement + id.slice(index + 1)
}

t.test('mint then verify, on any node with the secret', async t => {
  const codec = new SessionCodec(SECRET, TTL)
  const session = codec.mint(undefined, {}, NOW)
  t.match(session.id, /^s3[0-9a-v]\.[0-9a-z]{1,11}\.[A-Za-z0-9_-]{24}\.[A-Za-z0-9_-]{43}$/, 'visible ASCII, versioned')
  t.equal(session.expiresAt, NOW + TTL)
  t.same(codec.verify(session.id, undefined, NOW), { id: session.id, expiresAt: NOW + TTL })
  t.same(new SessionCodec(Buffer.from(SECRET), TTL).verify(session.id, undefined, NOW)?.id, session.id, 'another node, same secret')
  t.equal(new SessionCodec('y'.repeat(32), TTL).verify(session.id, undefined, NOW), undefined, 'another secret')
  t.not(codec.mint(undefined, {}, NOW).id, session.id, 'every mint is a new session')
})

t.test('a flipped character anywhere is rejected', async t => {
  const codec = new SessionCodec(SECRET, TTL)
  const { id } = codec.mint('alice', {}, NOW)
  const [, expiry = '', random = ''] = id.split('.')
  const positions = [
    3, // expiry
    3 + expiry.length + 1, // first random char
    3 + expiry.length + 1 + random.length - 1, // last random char
    id.length - 43, // first MAC char
    id.length - 2
  ]
  for (const index of positions) {
    const forged = flip(id, index)
    t.not(forged, id)
    t.equal(codec.verify(forged, 'alice', NOW), undefined, `character ${index} flipped`)
  }
  t.equal(codec.verify(id.slice(0, -1), 'alice', NOW), undefined, 'truncated')
  t.equal(codec.verify(id + 'A', 'alice', NOW), undefined, 'extended')
  t.equal(codec.verify('', 'alice', NOW), undefined, 'empty')
})

t.test('a session is bound to the principal it was minted for', async t => {
  const codec = new SessionCodec(SECRET, TTL)
  const alice = codec.mint('alice', {}, NOW).id
  t.ok(codec.verify(alice, 'alice', NOW))
  t.equal(codec.verify(alice, 'bob', NOW), undefined, 'another principal')
  t.equal(codec.verify(alice, undefined, NOW), undefined, 'anonymous')
  const anonymous = codec.mint(undefined, {}, NOW).id
  t.equal(codec.verify(anonymous, 'alice', NOW), undefined, 'an anonymous session presented by a principal')
  t.equal(codec.verify(anonymous, '-', NOW), undefined, 'a principal named like the anonymous marker')
  const colon = codec.mint('1:a', {}, NOW).id
  t.equal(codec.verify(colon, '1', NOW), undefined, 'length-prefixed: no principal collides with another')
})

t.test('a session expires', async t => {
  const codec = new SessionCodec(SECRET, TTL)
  const { id } = codec.mint(undefined, {}, NOW)
  t.ok(codec.verify(id, undefined, NOW + TTL - 1), 'valid until the last millisecond')
  t.equal(codec.verify(id, undefined, NOW + TTL), undefined, 'expired at expiresAt')
  t.equal(codec.verify(id, undefined, NOW + 10 * TTL), undefined)
  const [, expiry = ''] = id.split('.')
  const extended = id.replace(`.${expiry}.`, `.${(NOW + 100 * TTL).toString(36)}.`)
  t.equal(codec.verify(extended, undefined, NOW + 2 * TTL), undefined, 'the expiry cannot be extended by the client')
})

t.test('only the canonical form is accepted', async t => {
  const codec = new SessionCodec(SECRET, TTL)
  const { id } = codec.mint(undefined, {}, NOW)
  // 32 MAC bytes are 43 base64url characters; the last one carries 2 padding bits nobody checks.
  const last = id[id.length - 1]!
  const sibling = B64URL[B64URL.indexOf(last) ^ 1]!
  const twin = id.slice(0, -1) + sibling
  t.ok(Buffer.from(id.slice(-43), 'base64url').equals(Buffer.from(twin.slice(-43), 'base64url')), 'precondition: the twin decodes to the same MAC')
  t.equal(codec.verify(twin, undefined, NOW), undefined, 'a non-canonical encoding of the same MAC is rejected')
  t.equal(codec.verify(id.toUpperCase(), undefined, NOW), undefined, 'case matters')
  t.equal(codec.verify(`${id}=`, undefined, NOW), undefined, 'no padding')
  t.equal(codec.verify(` ${id}`, undefined, NOW), undefined, 'no whitespace')
  t.equal(codec.verify(id.replace(/^s3./, 's4.'), undefined, NOW), undefined, 'unknown version')
  t.equal(codec.verify(id.replace(/^s3/, 's2'), undefined, NOW), undefined, 'relabelled as an earlier version (signed with the secret itself)')
  const [, expiry = ''] = id.split('.')
  t.equal(codec.verify(id.replace(`.${expiry}.`, `.0${expiry}.`), undefined, NOW), undefined, 'a zero-padded expiry is another id')
})

t.test('a session carries the client capabilities that decide what it may be asked, under the MAC', async t => {
  const codec = new SessionCodec(SECRET, TTL)
  const all = codec.mint(undefined, { elicitation: { form: {}, url: {} }, sampling: { tools: {} }, roots: { listChanged: true }, experimental: { x: {} } }, NOW).id
  t.same(sessionCapabilities(all), { elicitation: { url: {} }, sampling: { tools: {} }, roots: {} }, 'the five that matter, nothing else')
  t.same(sessionCapabilities(codec.mint(undefined, { sampling: {} }, NOW).id), { sampling: {} })
  t.same(sessionCapabilities(codec.mint(undefined, {}, NOW).id), {}, 'none declared: known to be none')
  t.same(sessionCapabilities(codec.mint(undefined, 'nonsense', NOW).id), {}, 'a non-object is none')
  const none = codec.mint(undefined, {}, NOW).id
  t.equal(codec.verify(none.replace(/^s30/, 's3v'), undefined, NOW), undefined, 'capabilities cannot be added by the client')
})

t.test('an s1 session (minted before sessions carried capabilities) still verifies, its capabilities unknown', async t => {
  const codec = new SessionCodec(SECRET, TTL)
  const body = `s1.${(NOW + TTL).toString(36)}.${randomBytes(18).toString('base64url')}`
  const id = `${body}.${createHmac('sha256', SECRET).update(`${body}|-`).digest('base64url')}`
  t.ok(codec.verify(id, undefined, NOW), 'verifies')
  t.equal(sessionCapabilities(id), undefined, 'unknown: the server asks anyway')
})

t.test('an s2 session (signed with the secret itself, before sessions used a derived key) still verifies with its capabilities', async t => {
  const codec = new SessionCodec(SECRET, TTL)
  const body = `s21.${(NOW + TTL).toString(36)}.${randomBytes(18).toString('base64url')}`
  const id = `${body}.${createHmac('sha256', SECRET).update(`${body}|5:alice`).digest('base64url')}`
  t.ok(codec.verify(id, 'alice', NOW), 'verifies for its principal')
  t.equal(codec.verify(id, 'bob', NOW), undefined, 'not for another')
  t.same(sessionCapabilities(id), { elicitation: {} }, 'with the capabilities it carries')
  t.equal(codec.verify(id.replace(/^s2/, 's3'), 'alice', NOW), undefined, 'relabelled as s3 it does not verify: s3 is signed with the derived key')
})
