/**
 * The keys of one issuer (lib/identity/issuer-keys.ts) against an authorization server of the test's
 * own: discovery tries the next well-known URL when one serves another issuer's metadata (and throws
 * the last failure when none serves its own), metadata without a usable `jwks_uri` is `not-json`, a
 * key set is kept as long as its Cache-Control says (the default without a `max-age`), and a request
 * that checked a token against a set older than the current one finds the newer set without a fetch.
 */
import t from 'tap'
import { jwtVerify } from 'jose'
import { IssuerKeys, type KeyCachePolicy } from '../../lib/identity/issuer-keys.js'
import { fakeClock } from '../helpers/clock.js'
import { accessTokenClaims, signed } from '../helpers/forged-tokens.js'
import { json, scriptedServer, type ScriptedServer } from '../helpers/scripted-server.js'
import { generateSigningKey, type SigningKey } from '../helpers/signing-keys.js'
import type { Teardown } from '../helpers/teardown.js'

const POLICY: KeyCachePolicy = {
  refreshIntervalMs: 1000,
  defaultMaxAgeMs: 60_000,
  maxMaxAgeMs: 3_600_000,
  fetch: { timeoutMs: 2000, maxBytes: 64 * 1024 }
}
const METADATA = '/.well-known/oauth-authorization-server'
const OPENID = '/.well-known/openid-configuration'

/** An authorization server publishing RFC 8414 metadata and, at /jwks, the public keys of `keys` (with `jwksHeaders`). */
async function authorizationServer (t: Teardown, keys: SigningKey[], jwksHeaders: Record<string, string> = {}): Promise<ScriptedServer> {
  const server = await scriptedServer(t)
  server.route(METADATA, json({ issuer: server.origin, jwks_uri: `${server.origin}/jwks` }))
  server.route('/jwks', json({ keys: keys.map(key => key.publicJwk) }, jwksHeaders))
  return server
}

t.test('a request that checked a token against an older set finds the newer one, fetched since, without a fetch of its own', async t => {
  const clock = fakeClock(t)
  const [old, rotated] = [await generateSigningKey(), await generateSigningKey()]
  const server = await authorizationServer(t, [old!])
  const keys = new IssuerKeys(server.origin, POLICY)
  const used = await keys.current()
  t.equal(server.hits('/jwks'), 1)

  // The server rotates a key in; two requests carrying tokens signed with it checked them against `used`.
  server.route('/jwks', json({ keys: [old!.publicJwk, rotated!.publicJwk] }))
  clock.advance(POLICY.refreshIntervalMs)
  t.equal(await keys.refreshForUnknownKey(used), true, 'the first one fetches the set again: it is newer')
  t.equal(server.hits('/jwks'), 2)
  // The second one comes later than a refresh interval after that fetch, and still needs none.
  clock.advance(POLICY.refreshIntervalMs)
  t.equal(await keys.refreshForUnknownKey(used), true, 'the second one: a newer set is there')
  t.equal(server.hits('/jwks'), 2, 'no fetch for it')

  const token = await signed(rotated!, accessTokenClaims({ issuer: server.origin, audience: 'https://mcp.example.com/mcp' }))
  // jose reads the time from `new Date()`, which the fake clock leaves alone.
  const { payload } = await jwtVerify(token, await keys.current(), { issuer: server.origin, currentDate: new Date(Date.now()) })
  t.equal(payload.iss, server.origin, 'the token of the rotated key verifies with the current set')
})

t.test('a key set is kept as its Cache-Control says, within bounds; the default without a max-age', async t => {
  const cases: Array<[string | undefined, number]> = [
    [undefined, POLICY.defaultMaxAgeMs],
    ['public', POLICY.defaultMaxAgeMs],
    ['public, must-revalidate', POLICY.defaultMaxAgeMs],
    ['public, max-age=300', 300_000],
    ['max-age=0', POLICY.refreshIntervalMs],
    ['no-store', POLICY.refreshIntervalMs],
    ['max-age=86400', POLICY.maxMaxAgeMs]
  ]
  const clock = fakeClock(t)
  for (const [cacheControl, keptMs] of cases) {
    const server = await authorizationServer(t, [await generateSigningKey()], cacheControl === undefined ? {} : { 'cache-control': cacheControl })
    const keys = new IssuerKeys(server.origin, POLICY)
    const first = await keys.current()
    clock.advance(keptMs - 1)
    t.equal(await keys.current(), first, `${String(cacheControl)}: the same set until ${keptMs} ms`)
    t.equal(server.hits('/jwks'), 1, `${String(cacheControl)}: no fetch before`)
    clock.advance(1)
    await keys.current()
    t.equal(server.hits('/jwks'), 2, `${String(cacheControl)}: fetched again at ${keptMs} ms`)
  }
})

t.test('metadata without a jwks_uri, or with one that is not a string, is not-json: the keys cannot be fetched', async t => {
  for (const jwksUri of [undefined, 42, { href: '/jwks' }]) {
    const server = await scriptedServer(t)
    server.route(METADATA, json({ issuer: server.origin, jwks_uri: jwksUri, introspection_endpoint: ['/introspect'] }))
    const keys = new IssuerKeys(server.origin, POLICY)
    t.same(await keys.metadata(), { issuer: server.origin, jwksUri: undefined, introspectionEndpoint: undefined }, `jwks_uri ${JSON.stringify(jwksUri)}: none`)
    await t.rejects(keys.current(), { name: 'FetchFailure', reason: 'not-json', message: `${server.origin}: the metadata names no jwks_uri` })
    t.equal(keys.reachable, false, 'the fetch counts as failed')
  }
})

t.test('metadata naming another issuer is not the issuer\'s: the next well-known URL is tried', async t => {
  const server = await scriptedServer(t)
  server.route(METADATA, json({ issuer: 'https://impostor.example.com', jwks_uri: 'https://impostor.example.com/jwks' }))
  server.route(OPENID, json({ issuer: server.origin, jwks_uri: `${server.origin}/jwks`, introspection_endpoint: `${server.origin}/introspect` }))
  const keys = new IssuerKeys(server.origin, POLICY)
  t.same(await keys.metadata(), { issuer: server.origin, jwksUri: `${server.origin}/jwks`, introspectionEndpoint: `${server.origin}/introspect` })
  t.equal(server.hits(METADATA), 1)
  t.equal(server.hits(OPENID), 1)
})

t.test('no well-known URL serves the issuer\'s metadata: the last failure is thrown, and the next call asks again', async t => {
  const server = await scriptedServer(t)
  const issuer = `${server.origin}/tenant`
  const urls = [`${METADATA}/tenant`, `/tenant${OPENID}`, `${OPENID}/tenant`]
  // A 404 at the first (no route), another issuer's metadata at the second, a JSON array at the third.
  server.route(urls[1]!, json({ issuer: server.origin }))
  server.route(urls[2]!, json([{ issuer }]))
  const keys = new IssuerKeys(issuer, POLICY)
  await t.rejects(keys.metadata(), { name: 'FetchFailure', reason: 'not-json', url: `${server.origin}${urls[2]!}`, message: `${server.origin}${urls[2]!}: is not the metadata of ${issuer}` })
  t.same(urls.map(url => server.hits(url)), [1, 1, 1], 'every URL was tried')

  server.route(urls[2]!, json({ issuer, jwks_uri: `${server.origin}/jwks` }))
  t.equal((await keys.metadata()).jwksUri, `${server.origin}/jwks`, 'a failed discovery is tried again')
  await keys.metadata()
  t.same(urls.map(url => server.hits(url)), [2, 2, 2], 'and kept once it succeeded')
})
