/**
 * Principals (DESIGN §5, auth option): bearer tokens verified by `@fastify/jwt`, the principal read
 * from one claim (a string; integers stringified; anything else refused), 401 with
 * `WWW-Authenticate: Bearer error="invalid_token"` for missing/expired/invalid tokens, `required: false`
 * falling back to the address scope, and `auth.principal(request)` for any other scheme.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import Fastify from 'fastify'
import fastifyJwt from '@fastify/jwt'
import type { LightMyRequestResponse } from 'fastify'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { bearer, foreignSigner, JWT_SECRET, jwtApp, registerWhoami, unsignedToken, whoamiOf } from '../helpers/identity.js'
import { post, postModern, SERVER_INFO } from '../helpers/inject.js'
import { bareError, LEGACY, toolCall } from '../helpers/jsonrpc.js'
import { registerCounter, type Counter } from '../helpers/tools.js'

const whoami = toolCall(1, 'whoami')

/**
 * Asserts the 401 of refused or missing credentials, and that nothing ran. A refused token's challenge
 * says `error="invalid_token"`; a request that presented none gets a challenge without `error` (RFC 6750 §3.1).
 */
function assertUnauthorized (t: Test, res: LightMyRequestResponse, counter: Counter | undefined, what: string, presented = true): void {
  t.equal(res.statusCode, 401, `${what}: 401`)
  if (presented) t.match(String(res.headers['www-authenticate']), /^Bearer\b.*\berror="invalid_token"/, `${what}: WWW-Authenticate: Bearer error="invalid_token"`)
  else t.equal(res.headers['www-authenticate'], 'Bearer', `${what}: WWW-Authenticate: Bearer, without error`)
  t.match(String(res.headers['content-type']), /^application\/json/, `${what}: a JSON body`)
  let error
  try {
    error = bareError(res)
  } catch (e) {
    t.fail(`${what}: ${(e as Error).message}`)
  }
  t.ok(Number.isInteger(error?.code), `${what}: a JSON-RPC error without id`)
  if (counter !== undefined) t.equal(counter.calls, 0, `${what}: no handler ran`)
}

t.test('a valid token: the sub claim is the principal, in ctx.principal, request.mcpPrincipal and the scope', async t => {
  const { app, counter } = await jwtApp(t)
  const token = app.jwt.sign({ sub: 'alice' })

  const legacy = await post(app, whoami, { ...LEGACY, ...bearer(token) })
  t.equal(legacy.statusCode, 200)
  t.same(whoamiOf(legacy), { principal: 'alice', requestPrincipal: 'alice', sessionId: null, scope: 'principal:alice' }, 'legacy era')

  const modern = await postModern(app, 'tools/call', { name: 'whoami', arguments: {} }, { headers: bearer(token) })
  t.equal(modern.statusCode, 200)
  t.same(whoamiOf(modern), { principal: 'alice', requestPrincipal: 'alice', sessionId: null, scope: 'principal:alice' }, 'modern era')

  t.equal((await post(app, toolCall(1, 'count'), { ...LEGACY, ...bearer(app.jwt.sign({ sub: 'bob' })) })).statusCode, 200, 'another principal is served too')
  t.equal(counter.calls, 1)
})

t.test('an integer sub is the principal as a string', async t => {
  const { app } = await jwtApp(t)
  for (const sub of [42, 0, -7, Number.MAX_SAFE_INTEGER]) {
    const res = await post(app, whoami, { ...LEGACY, ...bearer(app.jwt.sign({ sub })) })
    t.equal(res.statusCode, 200, `sub ${sub}`)
    const seen = whoamiOf(res)
    t.equal(seen?.principal, String(sub), `sub ${sub} is the principal "${String(sub)}"`)
    t.equal(seen?.requestPrincipal, String(sub))
    t.equal(seen?.scope, `principal:${String(sub)}`)
  }
})

t.test('a sub that is neither a string nor an integer is refused with 401', async t => {
  const { app, counter } = await jwtApp(t)
  const payloads: Array<[string, Record<string, unknown>]> = [
    ['an object', { sub: { id: 'alice' } }],
    ['an array', { sub: ['alice'] }],
    ['true', { sub: true }],
    ['false', { sub: false }],
    ['null', { sub: null }],
    ['a fraction', { sub: 1.5 }],
    ['missing', { name: 'alice' }],
    ['empty', { sub: '' }]
  ]
  for (const [what, payload] of payloads) {
    assertUnauthorized(t, await post(app, toolCall(1, 'count'), { ...LEGACY, ...bearer(app.jwt.sign(payload)) }), counter, `sub ${what}`)
  }
})

t.test('principalClaim names the claim that carries the principal', async t => {
  const { app } = await jwtApp(t, { plugin: { auth: { jwt: true, principalClaim: 'tenant', required: true } } })
  const res = await post(app, whoami, { ...LEGACY, ...bearer(app.jwt.sign({ sub: 'alice', tenant: 'acme' })) })
  t.equal(whoamiOf(res)?.principal, 'acme', 'the tenant claim, not sub')
  t.equal(whoamiOf(res)?.scope, 'principal:acme')
  t.equal((await post(app, whoami, { ...LEGACY, ...bearer(app.jwt.sign({ sub: 'alice' })) })).statusCode, 401, 'a token without that claim is refused')
})

t.test('missing, expired and invalid tokens are 401 with WWW-Authenticate and no handler runs', async t => {
  const { app, counter } = await jwtApp(t)
  const other = await foreignSigner(t)
  const good = app.jwt.sign({ sub: 'alice' })
  const [header, payload, signature] = good.split('.') as [string, string, string]
  const tampered = `${header}.${Buffer.from(JSON.stringify({ sub: 'mallory', iat: 1 })).toString('base64url')}.${signature}`
  const cases: Array<[string, Record<string, string>]> = [
    ['no Authorization header', {}],
    ['expired (expiresIn: -10)', bearer(app.jwt.sign({ sub: 'alice' }, { expiresIn: -10 }))],
    ['expired (a past exp claim)', bearer(app.jwt.sign({ sub: 'alice', exp: Math.floor(Date.now() / 1000) - 60 }))],
    ['not yet valid (nbf in the future)', bearer(app.jwt.sign({ sub: 'alice', nbf: Math.floor(Date.now() / 1000) + 3600 }))],
    ['signed with another secret', bearer(other.jwt.sign({ sub: 'alice' }))],
    ['a payload changed after signing', bearer(tampered)],
    ['a truncated signature', bearer(`${header}.${payload}.${signature.slice(0, -4)}`)],
    ['an unsigned token (alg none)', bearer(unsignedToken({ sub: 'alice' }))],
    ['not a JWT', bearer('not-a-token')],
    ['an empty bearer', { authorization: 'Bearer ' }],
    ['another scheme', { authorization: `Basic ${Buffer.from('alice:secret').toString('base64')}` }]
  ]
  for (const [what, headers] of cases) {
    const presented = Object.keys(headers).length > 0
    assertUnauthorized(t, await post(app, toolCall(1, 'count'), { ...LEGACY, ...headers }), counter, what, presented)
    const modern = await postModern(app, 'tools/call', { name: 'count', arguments: {} }, { headers })
    assertUnauthorized(t, modern, counter, `${what} (modern era)`, presented)
  }
  t.equal((await post(app, toolCall(1, 'count'), { ...LEGACY, ...bearer(good) })).statusCode, 200, 'the good token still works')
  t.equal(counter.calls, 1)
})

t.test('authentication comes before the body: a refused request is 401 whatever its body', async t => {
  const { app, counter } = await jwtApp(t, { plugin: { bodyLimit: 1024, auth: { jwt: true, principalClaim: 'sub', required: true } } })
  assertUnauthorized(t, await post(app, '{"jsonrpc":', LEGACY), counter, 'malformed JSON without a token', false)
  assertUnauthorized(t, await post(app, 'x'.repeat(64 * 1024), LEGACY), counter, 'an oversized body without a token', false)
  const expired = bearer(app.jwt.sign({ sub: 'alice' }, { expiresIn: -10 }))
  assertUnauthorized(t, await post(app, 'x'.repeat(64 * 1024), { ...LEGACY, ...expired }), counter, 'an oversized body with an expired token')
  const cancel = await post(app, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }, LEGACY)
  assertUnauthorized(t, cancel, counter, 'notifications/cancelled without a token', false)
  t.equal(app.mcpCancellation.rows, 0, 'the refused cancel wrote nothing')
  const del = await app.inject({ method: 'DELETE', url: '/mcp' })
  assertUnauthorized(t, del, counter, 'DELETE without a token', false)
})

t.test('required: false lets anonymous requests through with the address scope; bad tokens are still 401', async t => {
  const { app, counter } = await jwtApp(t, { plugin: { auth: { jwt: true, principalClaim: 'sub', required: false } } })
  const other = await foreignSigner(t)

  const signedIn = await post(app, whoami, { ...LEGACY, ...bearer(app.jwt.sign({ sub: 'alice' })) })
  t.equal(whoamiOf(signedIn)?.principal, 'alice', 'a valid token still names the principal')

  const anonymous = await post(app, whoami, LEGACY)
  t.equal(anonymous.statusCode, 200, 'no Authorization header: served')
  const seen = whoamiOf(anonymous)
  t.equal(seen?.principal, null, 'ctx.principal is null')
  t.equal(seen?.requestPrincipal, null, 'request.mcpPrincipal is null (nothing left over from the previous request)')
  t.match(seen?.scope, /^ip:/, 'the scope is the address bucket')
  t.equal(seen?.scope, 'ip:127.0.0.1')

  const modern = await postModern(app, 'tools/call', { name: 'whoami', arguments: {} })
  t.match(whoamiOf(modern)?.scope, /^ip:/, 'modern era too')

  for (const [what, headers] of [
    ['expired', bearer(app.jwt.sign({ sub: 'alice' }, { expiresIn: -10 }))],
    ['another secret', bearer(other.jwt.sign({ sub: 'alice' }))],
    ['garbage', bearer('garbage')],
    ['a sub of the wrong type', bearer(app.jwt.sign({ sub: { id: 1 } }))]
  ] as Array<[string, Record<string, string>]>) {
    assertUnauthorized(t, await post(app, toolCall(1, 'count'), { ...LEGACY, ...headers }), counter, `${what}: never downgraded to anonymous`)
  }
})

t.test('auth.jwt without @fastify/jwt registered fails at register time with FST_MCP_MISSING_DEPENDENCY', async t => {
  for (const auth of [{ jwt: true }, { jwt: true, required: false }, { jwt: { verify: 'apiJwtVerify' } }] as const) {
    const app = Fastify({ logger: false })
    t.teardown(() => app.close())
    await t.rejects(async () => {
      await app.register(mcpCancellation, { auth })
      await app.ready()
    }, { code: 'FST_MCP_MISSING_DEPENDENCY' }, JSON.stringify(auth))
  }

  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(fastifyJwt, { secret: JWT_SECRET })
  await t.rejects(async () => {
    await app.register(mcpCancellation, { auth: { jwt: { verify: 'apiJwtVerify' } } })
    await app.ready()
  }, { code: 'FST_MCP_MISSING_DEPENDENCY' }, 'a verify method that @fastify/jwt did not decorate')
})

t.test('auth.jwt.verify uses a namespaced @fastify/jwt', async t => {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(fastifyJwt, { secret: JWT_SECRET, namespace: 'api' })
  await app.register(mcpCancellation, { serverInfo: SERVER_INFO, auth: { jwt: { verify: 'apiJwtVerify' } } })
  registerWhoami(app)
  await app.ready()
  const signer = await foreignSigner(t, JWT_SECRET)
  t.equal(whoamiOf(await post(app, whoami, { ...LEGACY, ...bearer(signer.jwt.sign({ sub: 'carol' })) }))?.principal, 'carol')
  t.equal((await post(app, whoami, LEGACY)).statusCode, 401)
})

/** An app whose principal comes from `principal(request)`, with `whoami` and `count`. */
async function customApp (t: Test, auth: NonNullable<McpCancellationOptions['auth']>): Promise<{ app: Awaited<ReturnType<typeof Fastify>>, counter: Counter }> {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, { serverInfo: SERVER_INFO, auth })
  registerWhoami(app)
  const counter = registerCounter(app)
  await app.ready()
  return { app, counter }
}

t.test('auth.principal (sync) names the principal for any scheme', async t => {
  const { app, counter } = await customApp(t, {
    principal: request => {
      const key = request.headers['x-api-key']
      if (key === undefined) return null
      if (key === 'key-of-dave') return 'dave'
      if (key === 'key-of-7') return 7
      if (key === 'key-of-object') return { id: 'dave', scopes: ['notes:read'] }
      if (key === 'key-of-nobody') return { name: 'dave' }
      throw new Error('unknown key')
    }
  })
  t.same(whoamiOf(await post(app, whoami, { ...LEGACY, 'x-api-key': 'key-of-dave' })),
    { principal: 'dave', requestPrincipal: 'dave', sessionId: null, scope: 'principal:dave' })
  t.same(whoamiOf(await post(app, whoami, { ...LEGACY, 'x-api-key': 'key-of-7' }))?.principal, '7', 'an integer is stringified')
  t.same(whoamiOf(await post(app, whoami, { ...LEGACY, 'x-api-key': 'key-of-object' }))?.principal, 'dave', 'an object names the principal by its id')
  assertUnauthorized(t, await post(app, toolCall(1, 'count'), { ...LEGACY, 'x-api-key': 'key-of-nobody' }), counter, 'an object without an id')
  assertUnauthorized(t, await post(app, toolCall(1, 'count'), { ...LEGACY, 'x-api-key': 'stolen' }), counter, 'a throwing resolver')
  assertUnauthorized(t, await post(app, toolCall(1, 'count'), LEGACY), counter, 'no credentials, required by default', false)
})

t.test('auth.principal (async) is awaited', async t => {
  const { app, counter } = await customApp(t, {
    required: false,
    principal: async request => {
      await sleep(5)
      const user = request.headers['x-user']
      if (user === 'banned') throw new Error('banned')
      return user
    }
  })
  const seen = whoamiOf(await post(app, whoami, { ...LEGACY, 'x-user': 'erin' }))
  t.equal(seen?.principal, 'erin')
  t.equal(seen?.requestPrincipal, 'erin')
  t.equal(seen?.scope, 'principal:erin')
  const modern = whoamiOf(await postModern(app, 'tools/call', { name: 'whoami', arguments: {} }, { headers: { 'x-user': 'erin' } }))
  t.equal(modern?.scope, 'principal:erin', 'modern era too')
  const anonymous = whoamiOf(await post(app, whoami, LEGACY))
  t.equal(anonymous?.principal, null, 'undefined is anonymous')
  t.match(anonymous?.scope, /^ip:/, 'and falls back to the address scope')
  assertUnauthorized(t, await post(app, toolCall(1, 'count'), { ...LEGACY, 'x-user': 'banned' }), counter, 'a rejected promise')
})
