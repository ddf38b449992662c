/**
 * The authorization server misbehaving or gone (issue 21), end to end: a real resource server node on
 * 127.0.0.1 and a real authorization server (oidc-provider, test/helpers/authorization-server.ts).
 * - its JWKS endpoint answering 500, garbage, 10 MB, nothing at all, or keys that are none: a token no cached key can verify
 *   is a 503 with `Retry-After` (never a 401 that sends the client to sign in again, never another
 *   5xx, never a crash), a token a cached key verifies still passes, and the node recovers by itself
 *   once the key set is fine again;
 * - the server stopped: the same, logged once when it starts and once when tokens verify again;
 * - the key set kept as its `Cache-Control` says: fetched again after `max-age`, `no-store` kept one
 *   refresh interval.
 */
import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { startAuthorizationServer, type AuthorizationServer, type JwksFault } from '../helpers/authorization-server.js'
import { accessTokenClaims, signed } from '../helpers/forged-tokens.js'
import { hasStackTrace } from '../helpers/jsonrpc.js'
import type { RawResponse } from '../helpers/http.js'
import { errorLines } from '../helpers/logs.js'
import { freePort } from '../helpers/redis-server.js'
import { bearer, startResourceServer, type ResourceServer, type ResourceServerOptions } from '../helpers/resource-server.js'
import type { SigningKey } from '../helpers/signing-keys.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const SCOPES = ['demo:read']
/** Short, so that the node asks the authorization server again within the test. */
const REFRESH_MS = 200
const OUTAGE_LOG = /cannot be verified: the authorization server is unreachable/
const RECOVERY_LOG = /are verified again/

interface SetUp {
  as: AuthorizationServer
  /** A node serving the resource (the first on the port the resource names). */
  node: (logLevel?: string) => Promise<ResourceServer>
  resource: string
  /**
   * A token no node has seen, signed with `key` (default the current one) as the authorization server
   * signs them: a node verifies it with its keys, where a token it accepted before comes from its cache
   * of verified tokens (lib/identity/verified-tokens.ts) and tells nothing of the keys.
   */
  freshToken: (key?: SigningKey) => Promise<string>
}

/** An authorization server for one resource URI, and a node factory for it (every node serves that resource). */
async function setUp (t: Tap, oauth: ResourceServerOptions['oauth'] = {}): Promise<SetUp> {
  const port = await freePort()
  const resource = `http://127.0.0.1:${port}/mcp`
  const as = await startAuthorizationServer(t, { resources: [resource], scopes: SCOPES })
  let first = true
  const node = async (logLevel?: string): Promise<ResourceServer> => {
    const options: ResourceServerOptions = { resource, logLevel, oauth: { jwksRefreshIntervalMs: REFRESH_MS, ...oauth } }
    if (first) options.port = port
    first = false
    return await startResourceServer(t, as, options)
  }
  const freshToken = async (key = as.signingKey): Promise<string> => await signed(key, accessTokenClaims({ issuer: as.issuer, audience: resource, scope: SCOPES.join(' ') }))
  return { as, node, resource, freshToken }
}

/** Asserts the documented outage answer: 503, `Retry-After`, a JSON-RPC error that says so, no challenge, no stack. */
function assertUnavailable (t: Tap, response: RawResponse, what: string): void {
  t.equal(response.status, 503, `${what}: 503`)
  t.equal(response.headers.get('retry-after'), String(Math.ceil(REFRESH_MS / 1000)), `${what}: Retry-After (the refresh interval, in seconds)`)
  t.equal(response.headers.get('www-authenticate'), null, `${what}: no challenge (the client must not sign in again)`)
  const error = (JSON.parse(response.text) as { error?: { code?: unknown, message?: unknown } }).error
  t.equal(error?.code, -32000, `${what}: a JSON-RPC error`)
  t.match(error?.message, /cannot be verified right now/, `${what}: that says why`)
  t.notOk(hasStackTrace(response.text), `${what}: no stack trace`)
}

/** The lines matching `pattern` among a node's log. */
function logged (node: ResourceServer, pattern: RegExp): Array<Record<string, unknown>> {
  return node.logs().filter(line => pattern.test(String(line.msg)))
}

const FAULTS: JwksFault[] = ['500', 'garbage', 'huge', 'hang', 'not-keys', 'bad-keys']

t.test('the JWKS endpoint answering 500, garbage, 10 MB, nothing or unusable keys: 503 + Retry-After for what no cached key verifies, cached keys still pass, recovery by itself', async t => {
  const { as, node: startNode, resource } = await setUp(t, { fetchTimeoutMs: 500 })
  const warm = await startNode()
  t.equal((await warm.whoami(bearer(await as.token({ resource, scope: SCOPES })))).status, 200, 'a node that has the key set')
  for (const fault of FAULTS) {
    t.test(`JWKS ${fault}`, async t => {
      const cached = await as.token({ resource, scope: SCOPES })
      await as.rotateKeys({ keepOld: true })
      const rotated = await as.token({ resource, scope: SCOPES })
      const cold = await startNode()
      const calls = { warm: warm.calls, cold: cold.calls }
      const failures = (await warm.failures()).unavailable ?? 0
      await sleep(REFRESH_MS)
      as.jwksFault = fault
      const jwksBefore = as.jwksRequests

      assertUnavailable(t, await cold.whoami(bearer(cached)), 'a node that has no key set yet')
      t.equal(as.jwksRequests - jwksBefore, 1, 'it asked once')
      t.equal((await cold.whoami(bearer(cached))).status, 503, 'asked again at once: still 503')
      t.equal(as.jwksRequests - jwksBefore, 1, 'without asking the authorization server again within the refresh interval')
      assertUnavailable(t, await warm.whoami(bearer(rotated)), 'a token signed with a key rotated in since the node fetched the set')
      t.equal(as.jwksRequests - jwksBefore, 2, 'that node asked once')
      t.equal((await warm.whoami(bearer(rotated))).status, 503, 'asked again at once: still 503')
      t.equal(as.jwksRequests - jwksBefore, 2, 'without asking again within the refresh interval')
      // Keys that are no keys replace the set like any answer that is a key set: the warm node holds them now.
      const stillCached = fault !== 'bad-keys'
      t.equal((await warm.whoami(bearer(cached))).status, stillCached ? 200 : 503, stillCached ? 'a token a cached key verifies passes' : 'the node holds the unusable keys now: 503 for every token')
      t.equal((await warm.failures()).unavailable, failures + (stillCached ? 2 : 3), 'counted unavailable')
      t.same({ warm: warm.calls, cold: cold.calls }, { warm: calls.warm + (stillCached ? 1 : 0), cold: calls.cold }, 'no handler ran for a refused request')

      as.jwksFault = undefined
      await sleep(REFRESH_MS)
      t.equal((await cold.whoami(bearer(cached))).status, 200, 'the key set fine again: the cold node verifies, by itself')
      t.equal((await warm.whoami(bearer(rotated))).status, 200, 'and the warm node verifies the rotated key')
      t.same([...errorLines(warm), ...errorLines(cold)], [], 'nothing logged as an error')
    })
  }
})

t.test('the authorization server stopped: cached keys pass, the rest is 503 + Retry-After; the outage is logged once, the recovery once', async t => {
  const { as, node: startNode, resource, freshToken } = await setUp(t)
  const node = await startNode('info')
  t.equal((await node.whoami(bearer(await as.token({ resource, scope: SCOPES })))).status, 200, 'the node has the key set')
  const oldKey = as.signingKey
  await as.rotateKeys({ keepOld: true })
  const rotated = await as.token({ resource, scope: SCOPES })
  await as.stop()
  await sleep(REFRESH_MS)

  t.equal((await node.whoami(bearer(await freshToken(oldKey)))).status, 200, 'a token whose key is cached still passes')
  assertUnavailable(t, await node.whoami(bearer(rotated)), 'a token whose key is not cached')
  // Cached keys keep verifying between the refusals: the outage goes on all the same.
  for (let i = 0; i < 3; i++) {
    t.equal((await node.whoami(bearer(await freshToken(oldKey)))).status, 200, `a cached key again (${i + 1})`)
    await sleep(REFRESH_MS)
    t.equal((await node.whoami(bearer(rotated))).status, 503, `the rotated key still 503 (${i + 1})`)
  }
  t.equal(logged(node, OUTAGE_LOG).length, 1, 'the outage is logged once')
  t.equal(logged(node, OUTAGE_LOG)[0]?.level, 40, 'as a warning')
  t.same(logged(node, RECOVERY_LOG), [], 'and no recovery while it lasts')

  await as.start()
  await sleep(REFRESH_MS)
  t.equal((await node.whoami(bearer(rotated))).status, 200, 'the server back: the rotated key verifies')
  t.equal((await node.whoami(bearer(await freshToken(oldKey)))).status, 200, 'and the old one')
  t.equal(logged(node, RECOVERY_LOG).length, 1, 'the recovery is logged once')
  t.equal(logged(node, OUTAGE_LOG).length, 1, 'the outage still once')
  t.same(errorLines(node), [], 'nothing logged as an error')
})

t.test('a node that starts while the authorization server is down answers 503, then verifies once it is up', async t => {
  const { as, node: startNode, resource } = await setUp(t)
  const token = await as.token({ resource, scope: SCOPES })
  await as.stop()
  const node = await startNode()
  assertUnavailable(t, await node.whoami(bearer(token)), 'no metadata, no keys')
  await as.start()
  await sleep(REFRESH_MS)
  t.equal((await node.whoami(bearer(token))).status, 200, 'once it is up, by itself')
})

t.test('the key set is kept as its Cache-Control says: fetched again after max-age; no-store kept one refresh interval', async t => {
  const { as, node: startNode, freshToken } = await setUp(t, { jwksMaxAgeMs: 3_600_000 })
  /** The key-set fetches a token the node has not seen costs it. */
  const fetches = async (node: ResourceServer): Promise<number> => {
    const before = as.jwksRequests
    t.equal((await node.whoami(bearer(await freshToken()))).status, 200)
    return as.jwksRequests - before
  }
  as.jwksCacheControl = undefined
  const plain = await startNode()
  t.equal(await fetches(plain), 1, 'no Cache-Control: fetched once')
  as.jwksCacheControl = 'public, max-age=1'
  const oneSecond = await startNode()
  t.equal(await fetches(oneSecond), 1, 'max-age=1: fetched once')
  t.equal(await fetches(oneSecond), 0, 'and kept')
  await sleep(1100)
  t.equal(await fetches(plain), 0, 'without Cache-Control the set is kept jwksMaxAgeMs (an hour here)')
  t.equal(await fetches(oneSecond), 1, 'after its max-age the set is fetched again')
  t.equal(await fetches(oneSecond), 0, 'and kept again')

  as.jwksCacheControl = 'no-store'
  await sleep(1100)
  t.equal(await fetches(oneSecond), 1, 'the next fetch says no-store')
  t.equal(await fetches(oneSecond), 0, 'kept for the refresh interval')
  await sleep(REFRESH_MS + 50)
  t.equal(await fetches(oneSecond), 1, 'and fetched again after it')

  as.jwksCacheControl = 'max-age=1'
  await sleep(REFRESH_MS + 50)
  t.equal(await fetches(oneSecond), 1, 'max-age=1 again')
  await as.stop()
  await sleep(1100)
  t.equal((await oneSecond.whoami(bearer(await freshToken()))).status, 200, 'an expired set whose fetch fails still verifies the keys it has (the server is down)')
})

t.test('an authorization server whose answers declare more than maxFetchBytes: 503, nothing read', async t => {
  const { as, node: startNode, resource } = await setUp(t, { maxFetchBytes: 64 })
  const node = await startNode()
  assertUnavailable(t, await node.whoami(bearer(await as.token({ resource, scope: SCOPES }))), 'metadata larger than the limit at every well-known URL')
  t.equal(as.discoveryRequests, 2, 'both discovery documents were asked for')
  t.equal(as.jwksRequests, 0, 'and no key set')
  t.equal((await node.failures()).unavailable, 1, 'counted unavailable')
})
