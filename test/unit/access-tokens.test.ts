/**
 * AccessTokenVerifier (lib/identity/access-tokens.ts) against an authorization server of the test's
 * own, for what its answers can say: a JWT whose `iss` is no configured issuer is `issuer` without
 * the server being asked; a kid-less token during a rotation is refused for what it is (expired, not
 * "invalid"); introspection answers (RFC 7662 §2.2) are checked for `aud`, `iss` and `exp`, kept until
 * their `exp` (at most `maxCacheMs`, at most `maxCached` of them) and introspected again after, and
 * an authorization server that names no introspection endpoint makes opaque tokens `unavailable`.
 */
import t from 'tap'
import type { FastifyRequest } from 'fastify'
import type { JWTPayload } from 'jose'
import type { AuthFailureReason } from '../../lib/core/errors.js'
import { AccessTokenVerifier, type AccessTokenSettings, type IntrospectionSettings } from '../../lib/identity/access-tokens.js'
import { fakeClock } from '../helpers/clock.js'
import { accessTokenClaims, signed } from '../helpers/forged-tokens.js'
import { json, scriptedServer, type ScriptedServer } from '../helpers/scripted-server.js'
import { generateSigningKey, type SigningKey } from '../helpers/signing-keys.js'
import type { Teardown } from '../helpers/teardown.js'

const RESOURCE = 'https://mcp.example.com/mcp'
const OTHER_ISSUER = 'https://second-issuer.example.com'
const METADATA = '/.well-known/oauth-authorization-server'
const INTROSPECTION: IntrospectionSettings = { endpoint: undefined, clientId: 'resource-server', clientSecret: 'secret', maxCached: 100, maxCacheMs: 60_000 }

interface Log {
  warn: Array<Record<string, unknown>>
  info: Array<Record<string, unknown>>
}

/** A request whose log keeps what was logged at warn and info level (all the verifier logs). */
function loggingRequest (): { request: FastifyRequest, log: Log } {
  const log: Log = { warn: [], info: [] }
  const logger = {
    warn: (fields: Record<string, unknown>, message: string) => { log.warn.push({ ...fields, message }) },
    info: (fields: Record<string, unknown>, message: string) => { log.info.push({ ...fields, message }) }
  }
  return { request: { log: logger } as unknown as FastifyRequest, log }
}

/**
 * An authorization server: RFC 8414 metadata (`metadata` added to it), the public keys of `keys` at
 * /jwks, and an introspection endpoint answering `answers[token]` (`{ active: false }` for any other).
 */
async function authorizationServer (t: Teardown, { keys = [], metadata = {}, answers = {} }: {
  keys?: SigningKey[]
  metadata?: Record<string, unknown>
  answers?: Record<string, () => Record<string, unknown>>
}): Promise<ScriptedServer> {
  const server = await scriptedServer(t)
  server.route(METADATA, json({ issuer: server.origin, jwks_uri: `${server.origin}/jwks`, introspection_endpoint: `${server.origin}/introspect`, ...metadata }))
  server.route('/jwks', json({ keys: keys.map(key => key.publicJwk) }))
  server.route('/introspect', (request, response, body) => {
    const answer = answers[new URLSearchParams(body).get('token') ?? '']
    json(answer === undefined ? { active: false } : answer())(request, response, body)
  })
  return server
}

/** What the `AuthFailure` of `reason` matches. */
function refused (reason: AuthFailureReason): { name: string, reason: AuthFailureReason } {
  return { name: 'AuthFailure', reason }
}

function settingsFor (server: ScriptedServer, settings: Partial<AccessTokenSettings> = {}): AccessTokenSettings {
  return {
    resource: RESOURCE,
    issuers: [server.origin, OTHER_ISSUER],
    algorithms: ['ES256', 'RS256'],
    clockToleranceSec: 0,
    keys: { refreshIntervalMs: 1000, defaultMaxAgeMs: 60_000, maxMaxAgeMs: 3_600_000, fetch: { timeoutMs: 2000, maxBytes: 64 * 1024 } },
    introspection: undefined,
    verify: undefined,
    ...settings
  }
}

/** An active introspection answer for this resource (`fields` over it, undefined ones left out). */
function active (fields: Record<string, unknown> = {}): Record<string, unknown> {
  const answer: Record<string, unknown> = { active: true, sub: 'alice', aud: RESOURCE, client_id: 'mcp-client', scope: 'files:read', exp: Math.floor(Date.now() / 1000) + 300, ...fields }
  return Object.fromEntries(Object.entries(answer).filter(([, value]) => value !== undefined))
}

t.test('a JWT whose iss is not a string, or names no configured issuer, is refused issuer; the authorization server is not asked', async t => {
  const key = await generateSigningKey()
  const server = await authorizationServer(t, { keys: [key] })
  const verifier = new AccessTokenVerifier(settingsFor(server))
  const claims: JWTPayload = accessTokenClaims({ issuer: server.origin, audience: RESOURCE })
  for (const iss of [42, [server.origin], { href: server.origin }, undefined, 'https://unknown.example.com']) {
    const token = await signed(key, { ...claims, iss: iss as string })
    await t.rejects(verifier.verify(token, loggingRequest().request), refused('issuer'), `iss ${JSON.stringify(iss)}`)
  }
  t.equal(server.hits(METADATA) + server.hits('/jwks'), 0, 'nothing was fetched')
  t.match(await verifier.verify(await signed(key, claims), loggingRequest().request), { issuer: server.origin }, 'the same token with its iss passes')
})

t.test('a kid-less token while two keys of its type are published: verified with the one that signed it, refused for what it is', async t => {
  const [old, current] = [await generateSigningKey(), await generateSigningKey()]
  const server = await authorizationServer(t, { keys: [old!, current!] })
  const verifier = new AccessTokenVerifier(settingsFor(server))
  const { request } = loggingRequest()
  const noKid = { kid: undefined }
  const fresh = accessTokenClaims({ issuer: server.origin, audience: RESOURCE, scope: 'files:read' })
  t.match(await verifier.verify(await signed(current!, fresh, noKid), request), { subject: 'mcp-test-client-1', scopes: ['files:read'] }, 'signed with the second key: passes')
  const expired = accessTokenClaims({ issuer: server.origin, audience: RESOURCE, issuedAt: Math.floor(Date.now() / 1000) - 600 })
  await t.rejects(verifier.verify(await signed(current!, expired, noKid), request), refused('expired'), 'expired and signed with the second key: expired, not invalid')
  const forAnother = accessTokenClaims({ issuer: server.origin, audience: 'https://another.example.com/mcp' })
  await t.rejects(verifier.verify(await signed(current!, forAnother, noKid), request), refused('audience'), 'for another resource: audience')
  await t.rejects(verifier.verify(await signed(await generateSigningKey(), fresh, noKid), request), refused('invalid'), 'signed by neither: invalid')
})

t.test('a JWT without a scope claim grants no scopes', async t => {
  const key = await generateSigningKey()
  const server = await authorizationServer(t, { keys: [key] })
  const verifier = new AccessTokenVerifier(settingsFor(server))
  const principal = await verifier.verify(await signed(key, accessTokenClaims({ issuer: server.origin, audience: RESOURCE })), loggingRequest().request)
  t.same(principal.scopes, [])
})

t.test('an introspection answer: its iss (the first issuer without one) makes the principal; an issuer not configured is refused issuer', async t => {
  const server = await authorizationServer(t, {
    answers: {
      'no-iss': () => active(),
      'second-iss': () => active({ iss: OTHER_ISSUER }),
      'foreign-iss': () => active({ iss: 'https://unknown.example.com' })
    }
  })
  const verifier = new AccessTokenVerifier(settingsFor(server, { introspection: INTROSPECTION }))
  const { request } = loggingRequest()
  t.match(await verifier.verify('no-iss', request), { id: `${server.origin}#alice`, issuer: server.origin, subject: 'alice', clientId: 'mcp-client', scopes: ['files:read'] }, 'no iss: the first issuer')
  t.match(await verifier.verify('second-iss', request), { id: `${OTHER_ISSUER}#alice`, issuer: OTHER_ISSUER }, 'the second issuer: its principal')
  await t.rejects(verifier.verify('foreign-iss', request), refused('issuer'), 'an issuer not configured')
})

t.test('an introspection answer whose aud is neither a string nor an array is refused audience; an array is searched for the resource', async t => {
  const answers: Record<string, () => Record<string, unknown>> = {}
  const notForThis = [42, { aud: RESOURCE }, null, undefined, [], ['https://another.example.com/mcp', 42]]
  notForThis.forEach((aud, i) => { answers[`aud-${i}`] = () => active({ aud }) })
  answers.listed = () => active({ aud: [42, 'https://another.example.com/mcp', RESOURCE] })
  const server = await authorizationServer(t, { answers })
  const verifier = new AccessTokenVerifier(settingsFor(server, { introspection: INTROSPECTION }))
  const { request } = loggingRequest()
  for (const [i, aud] of notForThis.entries()) {
    await t.rejects(verifier.verify(`aud-${i}`, request), refused('audience'), `aud ${JSON.stringify(aud)}`)
  }
  t.match(await verifier.verify('listed', request), { subject: 'alice' }, 'the resource among others and a number: passes')
})

t.test('an introspection answer without exp is kept (maxCacheMs); one whose exp has passed is refused expired; no scope is no scopes', async t => {
  const server = await authorizationServer(t, {
    answers: {
      'no-exp': () => active({ exp: undefined, scope: undefined }),
      expired: () => active({ exp: Math.floor(Date.now() / 1000) - 1 })
    }
  })
  const verifier = new AccessTokenVerifier(settingsFor(server, { introspection: INTROSPECTION }))
  const { request } = loggingRequest()
  t.match(await verifier.verify('no-exp', request), { subject: 'alice', scopes: [] })
  await verifier.verify('no-exp', request)
  t.equal(server.hits('/introspect'), 1, 'introspected once for two requests')
  await t.rejects(verifier.verify('expired', request), refused('expired'))
  await t.rejects(verifier.verify('expired', request), refused('expired'))
  t.equal(server.hits('/introspect'), 3, 'a refusal is not kept')
})

t.test('an introspection answer is kept until its exp, at most maxCacheMs: then introspected again', async t => {
  const clock = fakeClock(t, Date.now())
  const server = await authorizationServer(t, {
    answers: {
      'ten-seconds': () => active({ exp: Math.floor(clock.now / 1000) + 10 }),
      'no-exp': () => active({ exp: undefined })
    }
  })
  const verifier = new AccessTokenVerifier(settingsFor(server, { introspection: INTROSPECTION }))
  const { request } = loggingRequest()
  await verifier.verify('ten-seconds', request)
  const exp = Number((await verifier.verify('ten-seconds', request)).claims.exp) * 1000
  t.equal(server.hits('/introspect'), 1)
  clock.set(exp)
  // The server still answers the same exp: the token is now expired, not served from the cache.
  server.route('/introspect', json(active({ exp: exp / 1000 })))
  await t.rejects(verifier.verify('ten-seconds', request), refused('expired'), 'at its exp: introspected again, and expired')
  t.equal(server.hits('/introspect'), 2)

  server.route('/introspect', json(active({ exp: undefined })))
  await verifier.verify('no-exp', request)
  clock.advance(INTROSPECTION.maxCacheMs - 1)
  await verifier.verify('no-exp', request)
  t.equal(server.hits('/introspect'), 3, 'without exp: kept until maxCacheMs')
  clock.advance(1)
  await verifier.verify('no-exp', request)
  t.equal(server.hits('/introspect'), 4, 'introspected again at maxCacheMs')
})

t.test('at most maxCached introspection answers are kept: the oldest is introspected again', async t => {
  const server = await authorizationServer(t, { answers: { first: () => active(), second: () => active(), third: () => active() } })
  const verifier = new AccessTokenVerifier(settingsFor(server, { introspection: { ...INTROSPECTION, maxCached: 2 } }))
  const { request } = loggingRequest()
  for (const token of ['first', 'second', 'third']) await verifier.verify(token, request)
  t.equal(server.hits('/introspect'), 3)
  await verifier.verify('third', request)
  await verifier.verify('second', request)
  t.equal(server.hits('/introspect'), 3, 'the two newest are kept')
  await verifier.verify('first', request)
  t.equal(server.hits('/introspect'), 4, 'the oldest was dropped')
})

t.test('introspection without an endpoint, from an authorization server naming none: unavailable, logged once as an outage', async t => {
  const server = await authorizationServer(t, { metadata: { introspection_endpoint: undefined } })
  const verifier = new AccessTokenVerifier(settingsFor(server, { introspection: INTROSPECTION }))
  const { request, log } = loggingRequest()
  await t.rejects(verifier.verify('opaque-token', request), refused('unavailable'))
  await t.rejects(verifier.verify('opaque-token', request), refused('unavailable'))
  t.equal(server.hits('/introspect'), 0, 'nothing was introspected')
  t.match(log.warn, [{ authorizationServer: server.origin, detail: /names no introspection_endpoint/ }], 'the operator is told why, once')
})
