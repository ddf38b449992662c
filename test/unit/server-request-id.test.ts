/**
 * Ids of legacy-era requests to the client: 128 random bits, what was asked and the node that waits,
 * under an HMAC bound to the asking request's scope. Only the same deployment key and scope verify one.
 */
import t from 'tap'
import { deriveKey } from '../../lib/core/signed-token.js'
import { ServerRequestIds } from '../../lib/protocol/server-request-id.js'

const KEY = deriveKey(Buffer.from('s'.repeat(32)), 'serverRequestId/v1')
const SCOPE = 'session:s20.abc'

t.test('mint then verify in the same scope, on any node with the key', async t => {
  const a = new ServerRequestIds(KEY, 'node-a')
  const b = new ServerRequestIds(KEY, 'node-b')
  const id = a.mint('elicitation/create', SCOPE)
  t.match(id, /^a1\.e\.node-a\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/)
  t.same(b.verify(id, SCOPE), { method: 'elicitation/create', node: 'node-a' }, 'node B learns what was asked and who waits')
  t.same(a.verify(a.mint('sampling/createMessage', SCOPE), SCOPE)?.method, 'sampling/createMessage')
  t.same(a.verify(a.mint('roots/list', SCOPE), SCOPE)?.method, 'roots/list')
  const ids = new Set(Array.from({ length: 1000 }, () => a.mint('roots/list', SCOPE)))
  t.equal(ids.size, 1000, 'never the same id twice')
  // Node names are base64url without Redis, `<pid>-<base36>` with it.
  for (const node of ['ab_cDEF1', '-_-_', '12345-abcdefgh']) {
    const named = new ServerRequestIds(KEY, node)
    t.same(named.verify(named.mint('elicitation/create', SCOPE), SCOPE)?.node, node, `node ${node}`)
  }
})

t.test('another scope, another key, or any change to the id does not verify', async t => {
  const ids = new ServerRequestIds(KEY, 'node-a')
  const id = ids.mint('elicitation/create', SCOPE)
  t.equal(ids.verify(id, 'session:s20.other'), undefined, 'another session')
  t.equal(ids.verify(id, 'ip:127.0.0.1'), undefined, 'another scope kind')
  t.equal(new ServerRequestIds(deriveKey(Buffer.from('o'.repeat(32)), 'serverRequestId/v1'), 'node-a').verify(id, SCOPE), undefined, 'another deployment key')
  t.equal(ids.verify(id.replace('a1.e.', 'a1.s.'), SCOPE), undefined, 'what was asked cannot be changed')
  t.equal(ids.verify(id.replace('.node-a.', '.node-b.'), SCOPE), undefined, 'nor the node that waits')
  for (const bad of [5, null, {}, '', 'a1.e.node-a.x.y', `${id}x`, ` ${id}`, id.toUpperCase(), 'a'.repeat(10_000)]) {
    t.equal(ids.verify(bad, SCOPE), undefined, `refused: ${JSON.stringify(bad).slice(0, 40)}`)
  }
})
