/**
 * Signed stateless sessions (DESIGN §5, legacy era only): `initialize` mints `Mcp-Session-Id`, bound
 * to the principal; forged, expired, foreign-principal and revoked sessions are 404 "Session not found"
 * (-32001); DELETE revokes; `required` makes a session mandatory after initialize; the modern era
 * ignores the header; the scope of a session request is `session:<id>`.
 */
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import mcpCancellation, { type McpCancellationOptions, type SessionOptions } from '../../lib/index.js'
import { fakeClock } from '../helpers/clock.js'
import { registerWhoami, SESSION_SECRET, whoamiOf } from '../helpers/identity.js'
import { post, postModern, SERVER_INFO } from '../helpers/inject.js'
import { bareError, initializeBody, LEGACY, toolCall } from '../helpers/jsonrpc.js'
import { registerCounter, type Counter } from '../helpers/tools.js'

const whoami = toolCall(1, 'whoami')
const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

interface SessionApp {
  app: FastifyInstance
  counter: Counter
}

/**
 * The plugin with `sessions`, `whoami` and `count`; with `principals`, the principal is the `x-user`
 * header (optional), so one test can present a session under several principals.
 */
async function sessionApp (t: Test, sessions: Partial<SessionOptions> = {}, extra: McpCancellationOptions = {},
  principals = false): Promise<SessionApp> {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, {
    serverInfo: SERVER_INFO,
    sessions: { secret: SESSION_SECRET, ...sessions },
    auth: principals ? { required: false, principal: request => request.headers['x-user'] } : undefined,
    ...extra
  })
  registerWhoami(app)
  const counter = registerCounter(app)
  await app.ready()
  return { app, counter }
}

/** Initializes (as `user`, when given) and returns the minted session id. */
async function openSession (t: Test, app: FastifyInstance, user?: string): Promise<string> {
  const res = await post(app, initializeBody(), user === undefined ? {} : { 'x-user': user })
  t.equal(res.statusCode, 200, 'initialize is served')
  const id = res.headers['mcp-session-id']
  t.type(id, 'string', 'initialize mints Mcp-Session-Id')
  return String(id)
}

/** Asserts 404 "Session not found" (-32001). */
function assertNotFound (t: Test, res: LightMyRequestResponse, what: string): void {
  t.equal(res.statusCode, 404, `${what}: 404`)
  let body: { error?: { code?: number, message?: string } } = {}
  try {
    body = JSON.parse(res.payload) as typeof body
  } catch {
    t.fail(`${what}: the body is not JSON: ${res.payload.slice(0, 200)}`)
  }
  t.equal(body.error?.code, -32001, `${what}: -32001`)
  t.equal(body.error?.message, 'Session not found', `${what}: "Session not found"`)
}

/** `id` with the character at `index` replaced by another base64url character. */
function flip (id: string, index: number): string {
  const c = id[index]!
  const replacement = B64URL.includes(c) ? B64URL[(B64URL.indexOf(c) + 1) % 64]! : 'A'
  return id.slice(0, index) + replacement + id.slice(index + 1)
}

const withSession = (id: string, extra: Record<string, string> = {}): Record<string, string> => ({ ...LEGACY, 'mcp-session-id': id, ...extra })
const cancel = (requestId: unknown = 1) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId } })

t.test('initialize mints a visible-ASCII Mcp-Session-Id carrying at least 128 random bits', async t => {
  const { app } = await sessionApp(t)
  const ids: string[] = []
  for (let i = 0; i < 300; i++) {
    const res = await post(app, initializeBody(i))
    ids.push(String(res.headers['mcp-session-id']))
  }
  t.ok(ids.every(id => /^[\x21-\x7e]+$/.test(id)), 'every id is visible ASCII (0x21–0x7E)')
  t.ok(ids.every(id => id.length <= 128), 'and of reasonable length')
  t.equal(new Set(ids).size, ids.length, '300 initializes, 300 different sessions')

  // s1.<expiry>.<random>.<mac>: the random segment must hold ≥ 16 bytes, none of them constant.
  const randoms = ids.map(id => Buffer.from(id.split('.')[2] ?? '', 'base64url'))
  const bytes = Math.min(...randoms.map(r => r.length))
  t.ok(bytes >= 16, `the random segment holds ${bytes} bytes (≥ 16 = 128 bits)`)
  t.equal(new Set(randoms.map(r => r.toString('hex'))).size, randoms.length, 'no random segment repeats')
  const skewed: number[] = []
  for (let bit = 0; bit < bytes * 8; bit++) {
    const ones = randoms.filter(r => (r[bit >> 3]! >> (7 - (bit & 7))) & 1).length / randoms.length
    if (ones < 0.3 || ones > 0.7) skewed.push(bit)
  }
  t.same(skewed, [], 'every one of its bits varies (set in 30–70% of sessions)')
})

t.test('only a legacy initialize mints a session', async t => {
  const { app } = await sessionApp(t)
  const session = await openSession(t, app)
  const later = await post(app, whoami, withSession(session))
  t.equal(later.statusCode, 200)
  t.notOk('mcp-session-id' in later.headers, 'a later request gets no new session')
  const discover = await postModern(app, 'server/discover')
  t.equal(discover.statusCode, 200)
  t.notOk('mcp-session-id' in discover.headers, 'server/discover (modern) mints none')
})

t.test('a request with its session runs in the scope session:<id>', async t => {
  const { app } = await sessionApp(t)
  const session = await openSession(t, app)
  const seen = whoamiOf(await post(app, whoami, withSession(session)))
  t.equal(seen?.sessionId, session, 'request.mcpSessionId is the session')
  t.equal(seen?.scope, `session:${session}`, 'request.mcpScope is session:<id>')
  t.equal(seen?.principal, null)
  const without = whoamiOf(await post(app, whoami, LEGACY))
  t.equal(without?.sessionId, null, 'without the header (not required): no session')
  t.match(without?.scope, /^ip:/, 'and the address scope')
  t.equal((await post(app, cancel(), withSession(session))).statusCode, 202, 'notifications/cancelled with the session is accepted')
})

t.test('a forged session (one character flipped) is 404 Session not found, and nothing runs', async t => {
  const { app, counter } = await sessionApp(t)
  const session = await openSession(t, app)
  const [version, expiry, random, mac] = session.split('.') as [string, string, string, string]
  const at = {
    version: 0,
    expiry: version.length + 1,
    random: version.length + expiry.length + 2,
    randomEnd: version.length + expiry.length + random.length + 1,
    mac: session.length - mac.length,
    last: session.length - 1
  }
  const forgeries: Array<[string, string]> = Object.entries(at).map(([where, index]) => [`flipped in ${where}`, flip(session, index)])
  forgeries.push(
    ['lower-cased', session.toLowerCase()],
    ['one character longer', `${session}A`],
    ['one character shorter', session.slice(0, -1)],
    ['another expiry, same MAC', `${version}.${'zzzzzzzzz'}.${random}.${mac}`],
    ['empty', ''],
    ['random text', 'not-a-session']
  )
  for (const [what, forged] of forgeries) {
    t.not(forged, session)
    assertNotFound(t, await post(app, toolCall(1, 'count'), withSession(forged)), what)
  }
  assertNotFound(t, await post(app, cancel(), withSession(flip(session, at.mac))), 'notifications/cancelled with a forged session')
  t.equal(counter.calls, 0, 'no handler ran')
  t.equal(app.mcpCancellation.rows, 0, 'no cancellation was recorded')
  t.equal((await post(app, toolCall(1, 'count'), withSession(session))).statusCode, 200, 'the genuine session still works')
})

t.test('sessions verify on any node with the secret, and on no other', async t => {
  const a = await sessionApp(t)
  const b = await sessionApp(t)
  const c = await sessionApp(t, { secret: 't'.repeat(32) })
  const session = await openSession(t, a.app)
  t.equal(whoamiOf(await post(b.app, whoami, withSession(session)))?.scope, `session:${session}`, 'another node with the same secret')
  assertNotFound(t, await post(c.app, whoami, withSession(session)), 'a node with another secret')
})

t.test('DELETE revokes the session: 204, then it is 404 everywhere', async t => {
  const { app } = await sessionApp(t)
  const session = await openSession(t, app)
  const other = await openSession(t, app)
  const del = await app.inject({ method: 'DELETE', url: '/mcp', headers: withSession(session) })
  t.equal(del.statusCode, 204, 'DELETE with a valid session is 204')
  t.equal(del.payload, '', 'with no body')
  assertNotFound(t, await post(app, whoami, withSession(session)), 'a request replayed after DELETE')
  assertNotFound(t, await post(app, cancel(), withSession(session)), 'a cancel replayed after DELETE')
  assertNotFound(t, await app.inject({ method: 'DELETE', url: '/mcp', headers: withSession(session) }), 'a second DELETE')
  t.equal((await post(app, whoami, withSession(other))).statusCode, 200, 'another session is unaffected')
})

t.test('DELETE of a forged session is 404 and revokes nothing; DELETE without one is 400', async t => {
  const { app } = await sessionApp(t)
  const session = await openSession(t, app)
  assertNotFound(t, await app.inject({ method: 'DELETE', url: '/mcp', headers: withSession(flip(session, session.length - 2)) }), 'forged DELETE')
  t.equal((await post(app, whoami, withSession(session))).statusCode, 200, 'the real session survives')
  const bare = await app.inject({ method: 'DELETE', url: '/mcp', headers: LEGACY })
  t.equal(bare.statusCode, 400, 'DELETE without Mcp-Session-Id')
  t.ok(Number.isInteger(bareError(bare).code), 'a JSON-RPC error')
})

t.test('DELETE without sessions configured is 405', async t => {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, { serverInfo: SERVER_INFO })
  await app.ready()
  const res = await app.inject({ method: 'DELETE', url: '/mcp', headers: { 'mcp-session-id': 'anything' } })
  t.equal(res.statusCode, 405)
  t.match(String(res.headers.allow), /\bPOST\b/)
})

t.test('a session is bound to the principal it was minted for', async t => {
  const { app, counter } = await sessionApp(t, {}, {}, true)
  const alices = await openSession(t, app, 'alice')
  const anonymous = await openSession(t, app)

  const seen = whoamiOf(await post(app, whoami, withSession(alices, { 'x-user': 'alice' })))
  t.equal(seen?.principal, 'alice')
  t.equal(seen?.scope, `session:${alices}`, 'alice in her session')

  assertNotFound(t, await post(app, toolCall(1, 'count'), withSession(alices, { 'x-user': 'bob' })), 'alice\'s session used by bob')
  assertNotFound(t, await post(app, toolCall(1, 'count'), withSession(alices)), 'alice\'s session used without a principal')
  assertNotFound(t, await post(app, toolCall(1, 'count'), withSession(alices, { 'x-user': 'alicE' })), 'alice\'s session under a look-alike principal')
  assertNotFound(t, await post(app, toolCall(1, 'count'), withSession(anonymous, { 'x-user': 'alice' })), 'an anonymous session used by alice')
  assertNotFound(t, await post(app, cancel(), withSession(alices, { 'x-user': 'bob' })), 'bob cancelling in alice\'s session')
  t.equal(counter.calls, 0, 'none of them ran')

  assertNotFound(t, await app.inject({ method: 'DELETE', url: '/mcp', headers: withSession(alices, { 'x-user': 'bob' }) }), 'bob deleting alice\'s session')
  t.equal((await post(app, whoami, withSession(alices, { 'x-user': 'alice' }))).statusCode, 200, 'which stays alive for alice')
  t.equal((await app.inject({ method: 'DELETE', url: '/mcp', headers: withSession(alices, { 'x-user': 'alice' }) })).statusCode, 204, 'alice can end it')
  assertNotFound(t, await post(app, whoami, withSession(alices, { 'x-user': 'alice' })), 'after which alice gets 404 too')
  t.equal((await post(app, whoami, withSession(anonymous))).statusCode, 200, 'the anonymous session works without a principal')
})

t.test('a session expires after ttlMs', async t => {
  const { app } = await sessionApp(t, { ttlMs: 1000 })
  const clock = fakeClock(t)
  const session = await openSession(t, app)
  clock.advance(999)
  t.equal((await post(app, whoami, withSession(session))).statusCode, 200, 'valid 999 ms after initialize')
  clock.advance(1)
  assertNotFound(t, await post(app, whoami, withSession(session)), 'at ttlMs')
  assertNotFound(t, await post(app, cancel(), withSession(session)), 'a cancel in an expired session')
  assertNotFound(t, await app.inject({ method: 'DELETE', url: '/mcp', headers: withSession(session) }), 'DELETE of an expired session')
  const fresh = await openSession(t, app)
  t.equal((await post(app, whoami, withSession(fresh))).statusCode, 200, 'a new initialize starts a new session')
})

t.test('the default session lifetime is 24 hours', async t => {
  const { app } = await sessionApp(t)
  const clock = fakeClock(t)
  const session = await openSession(t, app)
  clock.advance(24 * 60 * 60 * 1000 - 1000)
  t.equal((await post(app, whoami, withSession(session))).statusCode, 200, 'valid a second before 24 h')
  clock.advance(1000)
  assertNotFound(t, await post(app, whoami, withSession(session)), 'expired at 24 h')
})

t.test('required: a legacy request other than initialize without a session is 400', async t => {
  const { app, counter } = await sessionApp(t, { required: true })
  const missing = await post(app, toolCall(1, 'count'), LEGACY)
  t.equal(missing.statusCode, 400, 'a request without Mcp-Session-Id')
  t.equal((JSON.parse(missing.payload) as { error?: { code?: number } }).error?.code, -32600)
  t.equal((await post(app, cancel(), LEGACY)).statusCode, 400, 'a notification without Mcp-Session-Id')
  t.equal((await post(app, { jsonrpc: '2.0', id: 1, method: 'ping' })).statusCode, 400, 'a request without MCP-Protocol-Version either')
  t.equal(counter.calls, 0)

  const session = await openSession(t, app)
  t.equal((await post(app, toolCall(1, 'count'), withSession(session))).statusCode, 200, 'with the session it runs')
  t.equal(counter.calls, 1)
  assertNotFound(t, await post(app, toolCall(1, 'count'), withSession(flip(session, 3))), 'a forged one is still 404')

  const modern = await postModern(app, 'tools/call', { name: 'whoami', arguments: {} })
  t.equal(modern.statusCode, 200, 'the modern era needs no session')
})

t.test('the modern era ignores Mcp-Session-Id', async t => {
  const { app } = await sessionApp(t)
  const session = await openSession(t, app)
  const revoked = await openSession(t, app)
  t.equal((await app.inject({ method: 'DELETE', url: '/mcp', headers: withSession(revoked) })).statusCode, 204)
  for (const [what, value] of [['valid', session], ['forged', flip(session, session.length - 3)], ['revoked', revoked], ['garbage', 'x']]) {
    const res = await postModern(app, 'tools/call', { name: 'whoami', arguments: {} }, { headers: { 'mcp-session-id': value! } })
    t.equal(res.statusCode, 200, `${what} session header: served`)
    const seen = whoamiOf(res)
    t.equal(seen?.sessionId, null, `${what}: no session`)
    t.match(seen?.scope, /^ip:/, `${what}: the address scope, not session:`)
    t.notOk('mcp-session-id' in res.headers, `${what}: no session header in the answer`)
  }
})

t.test('a session secret shorter than 32 bytes is FST_MCP_INVALID_OPTION', async t => {
  const register = async (secret: string | Buffer): Promise<void> => {
    const app = Fastify({ logger: false })
    t.teardown(() => app.close())
    await app.register(mcpCancellation, { sessions: { secret } })
    await app.ready()
  }
  for (const [what, secret] of [
    ['31 ASCII characters', 'x'.repeat(31)],
    ['a 31-byte Buffer', Buffer.alloc(31, 1)],
    ['10 euro signs (10 characters, 30 bytes)', '€'.repeat(10)],
    ['empty', '']
  ] as Array<[string, string | Buffer]>) {
    await t.rejects(register(secret), { code: 'FST_MCP_INVALID_OPTION', message: /sessions\.secret/ }, what)
  }
  await t.resolves(register('x'.repeat(32)), '32 bytes is enough')
  await t.resolves(register(Buffer.alloc(32, 1)), 'a 32-byte Buffer')
  await t.resolves(register('€'.repeat(11)), '11 euro signs are 33 bytes')
})
