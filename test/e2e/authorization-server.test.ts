/**
 * The authorization server the OAuth tests stand on (test/helpers/authorization-server.ts, issue 21)
 * does what it says: real RFC 9068 JWT access tokens for a resource, verifiable with its JWKS; key
 * rotation; an outage and a restart on the same port; request counters; JWKS faults; an issuer with
 * a path; and the forged tokens of test/helpers/forged-tokens.ts are what their names say.
 */
import t from 'tap'
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, exportSPKI, jwtVerify } from 'jose'
import { startAuthorizationServer } from '../helpers/authorization-server.js'
import {
  accessTokenClaims, hs256WithPublicKeyBytes, nonStringScope, oversized, signed, unknownKid, unsecured
} from '../helpers/forged-tokens.js'
import { within } from '../helpers/wait.js'

const RESOURCE = 'http://127.0.0.1:3000/mcp'
const OTHER_RESOURCE = 'http://127.0.0.1:4000/mcp'
const SCOPES = ['demo:read', 'demo:write']

/** The error code under a failed fetch (undici puts the socket's error in `cause`). */
async function fetchErrorCode (url: string): Promise<unknown> {
  try {
    await fetch(url)
    return 'answered'
  } catch (error) {
    return ((error as Error).cause as NodeJS.ErrnoException | undefined)?.code
  }
}

t.test('a token for a resource is an RFC 9068 JWT for it, verifiable with the JWKS', async t => {
  const as = await startAuthorizationServer(t, { resources: [RESOURCE, OTHER_RESOURCE], scopes: SCOPES, accessTokenTtlSeconds: 120 })
  t.equal(as.issuer, `http://127.0.0.1:${as.port}`)

  const token = await as.token({ resource: RESOURCE, scope: ['demo:read'] })
  t.same(decodeProtectedHeader(token), { alg: 'ES256', typ: 'at+jwt', kid: as.signingKey.kid })
  const claims = decodeJwt(token)
  t.match(claims, { iss: as.issuer, aud: RESOURCE, scope: 'demo:read', client_id: as.clients[0]!.clientId, sub: as.clients[0]!.clientId, jti: String })
  t.equal(claims.exp! - claims.iat!, 120)

  const { payload } = await jwtVerify(token, createRemoteJWKSet(new URL(as.jwksUri)), { issuer: as.issuer, audience: RESOURCE, typ: 'at+jwt' })
  t.equal(payload.jti, claims.jti)

  const second = decodeJwt(await as.token({ resource: OTHER_RESOURCE, scope: SCOPES, client: as.clients[1]! }))
  t.match(second, { aud: OTHER_RESOURCE, scope: 'demo:read demo:write', client_id: as.clients[1]!.clientId })

  await t.rejects(as.token({ resource: 'http://127.0.0.1:5000/mcp', scope: 'demo:read' }), /invalid_target/)
  // A scope the server does not know is dropped, not refused (RFC 6749 §3.3 lets it issue fewer).
  t.equal(decodeJwt(await as.token({ resource: RESOURCE, scope: 'demo:read demo:admin' })).scope, 'demo:read')
  await t.rejects(as.token({ resource: RESOURCE, client: { clientId: as.clients[0]!.clientId, clientSecret: 'wrong' } }), /invalid_client/)

  for (const document of ['oauth-authorization-server', 'openid-configuration']) {
    const metadata = await (await fetch(`${as.issuer}/.well-known/${document}`)).json() as Record<string, unknown>
    t.match(metadata, { issuer: as.issuer, jwks_uri: as.jwksUri, token_endpoint: as.tokenEndpoint }, document)
  }
  t.equal(as.tokenRequests, 5)
  t.equal(as.jwksRequests, 1)
  t.equal(as.discoveryRequests, 2)
  t.same(as.requests.filter(request => request.method === 'GET').map(request => request.path),
    ['/jwks', '/.well-known/oauth-authorization-server', '/.well-known/openid-configuration'])
})

t.test('an issuer with a path: RFC 8414 metadata at the path-inserted URL only', async t => {
  const as = await startAuthorizationServer(t, { resources: [RESOURCE], scopes: SCOPES, path: '/tenant-a' })
  t.equal(as.issuer, `http://127.0.0.1:${as.port}/tenant-a`)
  const origin = `http://127.0.0.1:${as.port}`

  const inserted = await fetch(`${origin}/.well-known/oauth-authorization-server/tenant-a`)
  t.match(await inserted.json(), { issuer: as.issuer, jwks_uri: `${origin}/tenant-a/jwks`, token_endpoint: `${origin}/tenant-a/token` })
  const openid = await fetch(`${as.issuer}/.well-known/openid-configuration`)
  t.match(await openid.json(), { issuer: as.issuer, jwks_uri: as.jwksUri })
  t.equal((await fetch(`${as.issuer}/.well-known/oauth-authorization-server`)).status, 404, 'not appended')
  t.equal((await fetch(`${origin}/.well-known/oauth-authorization-server`)).status, 404, 'not at the root')
  t.equal((await fetch(`${origin}/jwks`)).status, 404, 'nothing outside the issuer path')
  t.equal(as.discoveryRequests, 2)

  const token = await as.token({ resource: RESOURCE, scope: 'demo:write' })
  const { payload } = await jwtVerify(token, createRemoteJWKSet(new URL(as.jwksUri)), { issuer: as.issuer, audience: RESOURCE })
  t.equal(payload.scope, 'demo:write')
})

t.test('only the discovery documents asked for are served', async t => {
  const as = await startAuthorizationServer(t, { resources: [RESOURCE], scopes: SCOPES, metadata: ['openid-configuration'] })
  t.equal((await fetch(`${as.issuer}/.well-known/oauth-authorization-server`)).status, 404)
  t.equal((await fetch(`${as.issuer}/.well-known/openid-configuration`)).status, 200)
  t.equal(as.discoveryRequests, 1)
})

t.test('RS256 on request', async t => {
  const as = await startAuthorizationServer(t, { resources: [RESOURCE], scopes: SCOPES, algorithm: 'RS256' })
  const token = await as.token({ resource: RESOURCE })
  t.equal(decodeProtectedHeader(token).alg, 'RS256')
  await t.resolves(jwtVerify(token, createRemoteJWKSet(new URL(as.jwksUri)), { issuer: as.issuer, audience: RESOURCE }))
})

t.test('rotateKeys: new tokens carry the new kid; the old key stays published only when kept', async t => {
  const as = await startAuthorizationServer(t, { resources: [RESOURCE], scopes: SCOPES })
  const { port, issuer } = as
  const first = as.signingKey
  const before = await as.token({ resource: RESOURCE })
  const jwksKids = async (): Promise<unknown> => ((await (await fetch(as.jwksUri)).json()) as { keys: Array<{ kid: string }> }).keys.map(key => key.kid)

  const second = await as.rotateKeys({ keepOld: true })
  t.not(second.kid, first.kid)
  t.equal(as.signingKey, second)
  t.same(await jwksKids(), [second.kid, first.kid])
  const after = await as.token({ resource: RESOURCE })
  t.equal(decodeProtectedHeader(after).kid, second.kid)
  for (const token of [before, after]) {
    await t.resolves(jwtVerify(token, createRemoteJWKSet(new URL(as.jwksUri)), { issuer, audience: RESOURCE }))
  }

  const third = await as.rotateKeys({ keepOld: false })
  t.same(await jwksKids(), [third.kid])
  t.same(as.publishedKeys, [third])
  t.equal(decodeProtectedHeader(await as.token({ resource: RESOURCE })).kid, third.kid)
  await t.rejects(jwtVerify(after, createRemoteJWKSet(new URL(as.jwksUri))), { code: 'ERR_JWKS_NO_MATCHING_KEY' })
  t.equal(as.port, port)
  t.equal(as.issuer, issuer)
})

t.test('stop refuses connections; start serves again on the same port with the same keys', async t => {
  const as = await startAuthorizationServer(t, { resources: [RESOURCE], scopes: SCOPES })
  const token = await as.token({ resource: RESOURCE })
  await as.stop()
  t.equal(as.listening, false)
  t.equal(await fetchErrorCode(as.jwksUri), 'ECONNREFUSED')
  await t.rejects(as.token({ resource: RESOURCE }))

  await as.start()
  t.equal(as.listening, true)
  t.equal(new URL(as.jwksUri).port, String(as.port))
  await t.resolves(jwtVerify(token, createRemoteJWKSet(new URL(as.jwksUri)), { issuer: as.issuer, audience: RESOURCE }))
  t.equal(decodeProtectedHeader(await as.token({ resource: RESOURCE })).kid, decodeProtectedHeader(token).kid)
})

t.test('JWKS faults: 500, garbage, a 10 MB key set, no answer', async t => {
  const as = await startAuthorizationServer(t, { resources: [RESOURCE], scopes: SCOPES })

  as.jwksFault = '500'
  t.equal((await fetch(as.jwksUri)).status, 500)

  as.jwksFault = 'garbage'
  const garbage = await fetch(as.jwksUri)
  t.equal(garbage.status, 200)
  const garbageText = await garbage.text()
  t.throws(() => JSON.parse(garbageText) as unknown)

  as.jwksFault = 'huge'
  const huge = await fetch(as.jwksUri)
  t.equal(huge.headers.get('content-length'), null, 'chunked')
  const text = await huge.text()
  t.ok(text.length >= 10 * 1024 * 1024)
  t.same((JSON.parse(text) as { keys: unknown }).keys, [as.signingKey.publicJwk], 'valid JSON with the real keys')

  as.jwksFault = 'hang'
  const hung = fetch(as.jwksUri)
  t.equal(await within(hung, 300, 'no answer'), 'no answer')
  as.jwksFault = undefined
  as.jwksCacheControl = 'max-age=60'
  const served = await fetch(as.jwksUri)
  t.equal(served.status, 200)
  t.equal(served.headers.get('cache-control'), 'max-age=60')
  t.same(((await served.json()) as { keys: unknown }).keys, [as.signingKey.publicJwk])
  t.equal(as.jwksRequests, 5)

  await as.stop()
  await t.rejects(hung, 'stop drops the hanging request')
})

t.test('forged tokens are what their names say', async t => {
  const as = await startAuthorizationServer(t, { resources: [RESOURCE], scopes: SCOPES })
  const jwks = createRemoteJWKSet(new URL(as.jwksUri))
  const claims = accessTokenClaims({ issuer: as.issuer, audience: RESOURCE, scope: 'demo:read', clientId: as.clients[0]!.clientId })
  const expected = { issuer: as.issuer, audience: RESOURCE, typ: 'at+jwt' }

  const { payload } = await jwtVerify(await signed(as.signingKey, claims), jwks, expected)
  t.same(payload, claims, 'signed with the server key: verifies as one of its tokens')
  const expired = await signed(as.signingKey, { ...claims, exp: claims.iat! - 1 })
  await t.rejects(jwtVerify(expired, jwks, expected), { code: 'ERR_JWT_EXPIRED' })
  t.same(decodeProtectedHeader(await signed(as.signingKey, claims, { kid: undefined, typ: 'JWT' })), { alg: 'ES256', typ: 'JWT' })

  const none = unsecured(claims, { kid: as.signingKey.kid })
  t.same(decodeProtectedHeader(none), { alg: 'none', typ: 'at+jwt', kid: as.signingKey.kid })
  t.ok(none.endsWith('.'), 'no signature')
  t.same(decodeJwt(none), claims)

  const confused = await hs256WithPublicKeyBytes(as.signingKey.publicJwk, claims)
  t.same(decodeProtectedHeader(confused), { alg: 'HS256', typ: 'at+jwt', kid: as.signingKey.kid })
  const pem = new TextEncoder().encode(await exportSPKI(as.signingKey.publicKey))
  await t.resolves(jwtVerify(confused, pem, expected), 'an HMAC keyed with the PEM text verifies it')
  await t.rejects(jwtVerify(confused, jwks, expected))

  const stranger = await unknownKid(claims)
  t.notOk(as.publishedKeys.some(key => key.kid === decodeProtectedHeader(stranger).kid))
  await t.rejects(jwtVerify(stranger, jwks, expected), { code: 'ERR_JWKS_NO_MATCHING_KEY' })

  const big = await oversized(as.signingKey, claims)
  t.ok(big.length >= 100 * 1024)
  await t.resolves(jwtVerify(big, jwks, expected), 'oversized but genuine')

  const listed = await nonStringScope(as.signingKey, claims)
  t.same((await jwtVerify(listed, jwks, expected)).payload.scope, ['demo:read', 'demo:write'])
})
