/**
 * The demo server's identity environment (DESIGN §8): MCP_JWT_SECRET (HS256 bearer tokens, principal =
 * sub), MCP_SESSION_SECRET (signed legacy sessions), MCP_TRUST_PROXY (X-Forwarded-For decides the
 * address scope) and MCP_ALLOWED_ORIGINS (a comma list replacing the local-only default).
 */
import t, { type Test } from 'tap'
import fastifyJwt from '@fastify/jwt'
import Fastify, { type FastifyInstance } from 'fastify'
import { buildApp, type DemoEnv } from '../../example/app.js'
import { bearer, foreignSigner, registerWhoami, whoamiOf } from '../helpers/identity.js'
import { post } from '../helpers/inject.js'
import { bareError, initializeBody, LEGACY, toolCall } from '../helpers/jsonrpc.js'

const JWT_SECRET = 'demo-jwt-secret-for-the-env-tests-0123456789'
const SESSION_SECRET = 'demo-session-secret-of-32-bytes-or-more!'
const whoami = toolCall(1, 'whoami')
const echo = toolCall(1, 'echo', { text: 'hello' })

/** The demo app built from `env`, plus `whoami`, ready, closed at the end of the test. */
async function demo (t: Test, env: DemoEnv): Promise<FastifyInstance> {
  const app = await buildApp(env)
  t.teardown(() => app.close())
  registerWhoami(app)
  await app.ready()
  return app
}

t.test('MCP_JWT_SECRET: HS256 bearer tokens are required and sub is the principal', async t => {
  const app = await demo(t, { MCP_JWT_SECRET: JWT_SECRET })
  const token = app.jwt.sign({ sub: 'alice' })
  const seen = whoamiOf(await post(app, whoami, { ...LEGACY, ...bearer(token) }))
  t.equal(seen?.principal, 'alice', 'the principal is the sub claim')
  t.equal(seen?.scope, 'principal:alice')
  const echoed = await post(app, echo, { ...LEGACY, ...bearer(token) })
  t.equal(echoed.statusCode, 200)
  t.match(echoed.payload, /"text":"hello"/, 'the demo tools work with a token')

  const missing = await post(app, echo, LEGACY)
  t.equal(missing.statusCode, 401, 'no token: 401')
  t.equal(missing.headers['www-authenticate'], 'Bearer', 'a challenge without error: no token was presented (RFC 6750 §3.1)')
  t.ok(Number.isInteger(bareError(missing).code))

  const hs512 = Fastify({ logger: false })
  t.teardown(() => hs512.close())
  await hs512.register(fastifyJwt, { secret: JWT_SECRET, sign: { algorithm: 'HS512' } })
  await hs512.ready()
  t.equal((await post(app, echo, { ...LEGACY, ...bearer((await foreignSigner(t, JWT_SECRET)).jwt.sign({ sub: 'alice' })) })).statusCode, 200, 'the same secret from another signer, HS256: accepted')
  t.equal((await post(app, echo, { ...LEGACY, ...bearer(hs512.jwt.sign({ sub: 'alice' })) })).statusCode, 401, 'the same secret with HS512: 401 (HS256 only)')
  t.equal((await post(app, echo, { ...LEGACY, ...bearer((await foreignSigner(t)).jwt.sign({ sub: 'alice' })) })).statusCode, 401, 'another secret: 401')
  t.equal((await post(app, echo, { ...LEGACY, ...bearer(app.jwt.sign({ sub: 'alice' }, { expiresIn: -10 })) })).statusCode, 401, 'expired: 401')

  const open = await demo(t, {})
  const anonymous = whoamiOf(await post(open, whoami, LEGACY))
  t.equal(anonymous?.principal, null, 'control: without MCP_JWT_SECRET no token is needed')
  t.match(anonymous?.scope, /^ip:/)
})

t.test('MCP_SESSION_SECRET: initialize mints signed sessions, DELETE revokes them', async t => {
  const app = await demo(t, { MCP_SESSION_SECRET: SESSION_SECRET })
  const init = await post(app, initializeBody())
  const session = init.headers['mcp-session-id']
  t.type(session, 'string', 'initialize mints Mcp-Session-Id')
  const withSession = { ...LEGACY, 'mcp-session-id': String(session) }
  t.equal(whoamiOf(await post(app, whoami, withSession))?.scope, `session:${String(session)}`, 'the session is the scope')
  const forged = String(session).slice(0, -1) + (String(session).endsWith('A') ? 'B' : 'A')
  const refused = await post(app, whoami, { ...LEGACY, 'mcp-session-id': forged })
  t.equal(refused.statusCode, 404, 'a forged session is 404')
  t.equal((JSON.parse(refused.payload) as { error?: { code?: number } }).error?.code, -32001)
  t.equal((await app.inject({ method: 'DELETE', url: '/mcp', headers: withSession })).statusCode, 204, 'DELETE ends it')
  t.equal((await post(app, whoami, withSession)).statusCode, 404, 'and it is gone')

  const without = await demo(t, {})
  t.notOk('mcp-session-id' in (await post(without, initializeBody())).headers, 'control: without MCP_SESSION_SECRET no session is minted')
  t.equal((await without.inject({ method: 'DELETE', url: '/mcp', headers: withSession })).statusCode, 405, 'and DELETE is 405')
})

t.test('MCP_JWT_SECRET with MCP_SESSION_SECRET: a session belongs to its sub', async t => {
  const app = await demo(t, { MCP_JWT_SECRET: JWT_SECRET, MCP_SESSION_SECRET: SESSION_SECRET })
  const alice = bearer(app.jwt.sign({ sub: 'alice' }))
  const session = String((await post(app, initializeBody(), alice)).headers['mcp-session-id'])
  t.equal(whoamiOf(await post(app, whoami, { ...LEGACY, ...alice, 'mcp-session-id': session }))?.scope, `session:${session}`)
  const bob = bearer(app.jwt.sign({ sub: 'bob' }))
  t.equal((await post(app, whoami, { ...LEGACY, ...bob, 'mcp-session-id': session })).statusCode, 404, 'bob cannot use alice\'s session')
})

t.test('MCP_TRUST_PROXY=true: X-Forwarded-For decides the address scope', async t => {
  const trusting = await demo(t, { MCP_TRUST_PROXY: 'true' })
  t.equal(whoamiOf(await post(trusting, whoami, { ...LEGACY, 'x-forwarded-for': '203.0.113.7' }))?.scope, 'ip:203.0.113.7')
  t.equal(whoamiOf(await post(trusting, whoami, { ...LEGACY, 'x-forwarded-for': '2001:db8:1:2:3:4:5:6' }))?.scope, 'ip:2001:db8:1:2::/64', 'IPv6 as its /64')
  t.equal(whoamiOf(await post(trusting, whoami, LEGACY))?.scope, 'ip:127.0.0.1', 'without the header, the peer address')

  const direct = await demo(t, {})
  t.equal(whoamiOf(await post(direct, whoami, { ...LEGACY, 'x-forwarded-for': '203.0.113.7' }))?.scope, 'ip:127.0.0.1', 'control: unset, the header is ignored')
  const off = await demo(t, { MCP_TRUST_PROXY: 'false' })
  t.equal(whoamiOf(await post(off, whoami, { ...LEGACY, 'x-forwarded-for': '203.0.113.7' }))?.scope, 'ip:127.0.0.1', '"false" is not trusted either')
})

t.test('MCP_ALLOWED_ORIGINS: a comma list replaces the local-only default', async t => {
  const app = await demo(t, { MCP_ALLOWED_ORIGINS: 'https://a.example, https://b.example:8443' })
  for (const origin of ['https://a.example', 'https://b.example:8443']) {
    t.equal((await post(app, echo, { ...LEGACY, origin })).statusCode, 200, `${origin} is allowed`)
  }
  for (const origin of ['http://localhost:3000', 'https://b.example', 'https://evil.example', ' https://a.example,']) {
    const res = await post(app, echo, { ...LEGACY, origin })
    t.equal(res.statusCode, 403, `${JSON.stringify(origin)} is refused`)
  }
  t.equal((await post(app, echo, LEGACY)).statusCode, 200, 'no Origin is fine')

  const local = await demo(t, {})
  t.equal((await post(local, echo, { ...LEGACY, origin: 'http://localhost:3000' })).statusCode, 200, 'control: by default localhost is allowed')
  t.equal((await post(local, echo, { ...LEGACY, origin: 'https://a.example' })).statusCode, 403, 'and other origins are not')
})
