/**
 * Tokens minted by earlier versions verify after every change of the signing code: a session id, a
 * legacy server-request id and a 2026-07-28 requestState captured (at 4d6aaac…6b1365a, before the three
 * codecs shared one signing primitive) with a fixed secret and an expiry in 2100. Nodes of two versions
 * then run side by side, and a client holding one of these keeps it across a deploy.
 */
import t from 'tap'
import { SessionCodec, sessionCapabilities } from '../../lib/identity/session-codec.js'
import { ServerRequestIds } from '../../lib/protocol/server-request-id.js'
import { deriveKey } from '../../lib/core/signed-token.js'
import { RequestStateCodec } from '../../lib/protocol/request-state.js'

const SECRET = Buffer.from('fixture-secret-0123456789abcdef-0123456789')
const DAY = 86_400_000
const NOW = Date.UTC(2030, 0, 1)

const CAPTURED = {
  /** `mint('alice', { elicitation: {}, sampling: { tools: {} } })`, expiring 2100-01-01. */
  session: 's2d.1gcmxpmo0.g4n1lB_oCxOeq4WFcxJrVHvM.4wJpXafzaPB02K9uHAO4MWDwPdF5_a1JIpPcBpJ5aA0',
  /** `mint(undefined, {})`: no principal, no capabilities. */
  anonymousSession: 's20.1gcmxpmo0.9T32IXKe8o4_00k6_QQ-FAuK.NKXaut7GRSsadADUISuAqagVVshSQOg-W6ZdPvKndVA',
  /** An elicitation of node `node-1` asked in scope `principal:alice`. */
  serverRequestId: 'a1.e.node-1.GtvOskjyw-Yjk58sDuTDOg.FqOcHMZTTK_E8B3XhdkoXP4vv3-bnlqlTNeNUfWn5XA',
  /** Round 1 of `tools/call book {city: 'Lyon'}` in scope `principal:alice`, expiring 2100-01-01. */
  requestState: 'eyJ2IjoxLCJtIjoidG9vbHMvY2FsbCIsIm4iOiJib29rIiwiZCI6InJJekZJS01wV2paUm1sbkFmY0VnbGVlRFNtalo0RXZqUWFFRVRzRDRQbzgiLCJwIjoicHJpbmNpcGFsOmFsaWNlIiwiciI6MSwiZSI6NDEwMjQ0NDgwMDAwMCwiYSI6eyJlbGljaXRhdGlvbi0xIjpbInEiLHsiYWN0aW9uIjoiYWNjZXB0IiwiY29udGVudCI6eyJuaWdodHMiOjJ9fV19LCJxIjp7InNhbXBsaW5nLTEiOiJxMiJ9LCJzIjp7InN0ZXAiOjF9fQ.7Vj04FWemomZR-ySGp86_awVzkhSrD7FkktjHWIy7VQ'
}
const BINDING = { method: 'tools/call', name: 'book', digest: 'rIzFIKMpWjZRmlnAfcEgleeDSmjZ4EvjQaEETsD4Po8', scope: 'principal:alice' }

/** The last character of a base64url MAC replaced: the same bytes never, a forgery always. */
function altered (token: string): string {
  return token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A')
}

t.test('a session id minted before verifies, for its principal only, with the capabilities it carried', async t => {
  const codec = new SessionCodec(SECRET, DAY)
  t.same(codec.verify(CAPTURED.session, 'alice', NOW), { id: CAPTURED.session, expiresAt: Date.UTC(2100, 0, 1) })
  t.same(sessionCapabilities(CAPTURED.session), { elicitation: {}, sampling: { tools: {} } })
  t.equal(codec.verify(CAPTURED.session, 'bob', NOW), undefined, 'another principal')
  t.equal(codec.verify(CAPTURED.session, undefined, NOW), undefined, 'no principal')
  t.equal(codec.verify(altered(CAPTURED.session), 'alice', NOW), undefined, 'an altered MAC')
  t.ok(codec.verify(CAPTURED.anonymousSession, undefined, NOW), 'the anonymous one')
  t.equal(codec.verify(CAPTURED.anonymousSession, 'alice', NOW), undefined, 'the anonymous one under a principal')
  t.equal(new SessionCodec(Buffer.from('another-secret-0123456789abcdef-012345'), DAY).verify(CAPTURED.session, 'alice', NOW), undefined, 'another secret')
})

t.test('a server-request id minted before verifies in its scope only', async t => {
  const ids = new ServerRequestIds(deriveKey(SECRET, 'serverRequestId/v1'), 'node-2')
  t.same(ids.verify(CAPTURED.serverRequestId, 'principal:alice'), { method: 'elicitation/create', node: 'node-1' })
  t.equal(ids.verify(CAPTURED.serverRequestId, 'principal:bob'), undefined, 'another scope')
  t.equal(ids.verify(altered(CAPTURED.serverRequestId), 'principal:alice'), undefined, 'an altered MAC')
})

t.test('a requestState sealed before opens for its request only', async t => {
  const codec = new RequestStateCodec(deriveKey(SECRET, 'requestState/v1'), 65_536)
  const state = codec.open(CAPTURED.requestState, BINDING, NOW)
  t.same(state && { round: state.round, expiresAt: state.expiresAt, answers: state.answers, asked: state.asked, state: state.state }, {
    round: 1,
    expiresAt: Date.UTC(2100, 0, 1),
    answers: { 'elicitation-1': ['q', { action: 'accept', content: { nights: 2 } }] },
    asked: { 'sampling-1': 'q2' },
    state: { step: 1 }
  })
  t.equal(codec.open(CAPTURED.requestState, { ...BINDING, scope: 'principal:bob' }, NOW), undefined, 'another scope')
  t.equal(codec.open(CAPTURED.requestState, { ...BINDING, digest: 'x' }, NOW), undefined, 'other arguments')
  t.equal(codec.open(altered(CAPTURED.requestState), BINDING, NOW), undefined, 'an altered MAC')
})
