/**
 * SSE event ids of legacy streams (lib/protocol/event-id.ts): a stream's random name, the event's
 * position and the holding node, the stream and node under an HMAC bound to the scope and session of
 * the stream's request.
 * Only the same deployment key, scope and session verify one; ids never repeat across streams.
 */
import t from 'tap'
import { deriveKey } from '../../lib/core/signed-token.js'
import { EventIds } from '../../lib/protocol/event-id.js'

const KEY = deriveKey(Buffer.from('s'.repeat(32)), 'eventId/v1')
const SCOPE = 'session:s20.abc'
const SESSION = 's20.abc.def.mac'

t.test('minted, then verified for the same scope and session, on any node with the key', async t => {
  const a = new EventIds(KEY, 'node-a')
  const b = new EventIds(KEY, 'node-b')
  const stream = a.newStream()
  const id = a.of(stream, SCOPE, SESSION)(0)
  t.match(id, /^e1\.[A-Za-z0-9_-]{22}\.0\.node-a\.[A-Za-z0-9_-]{43}$/)
  t.same(b.verify(id, SCOPE, SESSION), { stream, position: 0, node: 'node-a' }, 'node B learns the stream, the position and who holds it')
  for (const position of [1, 35, 36, 1_000_000, Number.MAX_SAFE_INTEGER]) {
    t.equal(a.verify(a.of(stream, SCOPE, SESSION)(position), SCOPE, SESSION)?.position, position, `position ${position}`)
  }
  t.same(a.verify(a.of(stream, SCOPE, undefined)(3), SCOPE, undefined)?.position, 3, 'without a session')
  const ids = new Set(Array.from({ length: 1000 }, () => a.of(a.newStream(), SCOPE, SESSION)(0)))
  t.equal(ids.size, 1000, 'the first events of a thousand streams of one session: no id twice')
  for (const node of ['ab_cDEF1', '-_-_', '12345-abcdefgh']) {
    const named = new EventIds(KEY, node)
    t.equal(named.verify(named.of(stream, SCOPE, SESSION)(1), SCOPE, SESSION)?.node, node, `node ${node}`)
  }
})

t.test('another scope, session or key, or any change to the id, does not verify', async t => {
  const ids = new EventIds(KEY, 'node-a')
  const stream = ids.newStream()
  const id = ids.of(stream, SCOPE, SESSION)(5)
  t.equal(ids.verify(id, 'session:s20.other', SESSION), undefined, 'another scope')
  t.equal(ids.verify(id, SCOPE, 's20.other.def.mac'), undefined, 'another session')
  t.equal(ids.verify(id, SCOPE, undefined), undefined, 'no session')
  t.equal(ids.verify(ids.of(stream, SCOPE, undefined)(5), SCOPE, SESSION), undefined, 'a session where the stream had none')
  t.equal(new EventIds(deriveKey(Buffer.from('o'.repeat(32)), 'eventId/v1'), 'node-a').verify(id, SCOPE, SESSION), undefined, 'another deployment key')
  // The MAC is made once per stream: a changed position verifies, and the node holding the stream
  // refuses one it never reached (test/protocol/resume-refusals.test.ts).
  t.equal(ids.verify(id.replace('.5.node-a.', '.4.node-a.'), SCOPE, SESSION)?.position, 4, 'the position is the only part outside the MAC')
  t.equal(ids.verify(id.replace('.node-a.', '.node-b.'), SCOPE, SESSION), undefined, 'nor the node')
  t.equal(ids.verify(id.replace(stream, ids.newStream()), SCOPE, SESSION), undefined, 'nor the stream')
  t.equal(ids.verify(id.replace('.5.', '.05.'), SCOPE, SESSION), undefined, 'one spelling of a position only')
  for (const bad of ['', 'e1.x.0.node-a.y', `${id}x`, ` ${id}`, `${id}\n`, id.toUpperCase(), 'a'.repeat(10_000), 'e1.' + 'a'.repeat(22) + '.' + 'z'.repeat(12) + '.n.' + 'b'.repeat(43)]) {
    t.equal(ids.verify(bad, SCOPE, SESSION), undefined, `refused: ${JSON.stringify(bad).slice(0, 40)}`)
  }
})
