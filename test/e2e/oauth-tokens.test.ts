/**
 * Access tokens end to end (issue 21): a real resource server node on 127.0.0.1 trusting a real
 * authorization server (oidc-provider, test/helpers/authorization-server.ts), spoken to over HTTP.
 * - every bad presentation and every forged or foreign token of the issue's "Bad input": 401 with the
 *   challenge that says which (`invalid_request` for a malformed presentation, `invalid_token` for a
 *   token that does not verify, no `error` without a token), a JSON-RPC error, the reason counted in
 *   `mcp_auth_failures_total`, and no handler run;
 * - key rotation at the authorization server without restarting the node, and a flood of made-up
 *   `kid`s costing it at most one key-set fetch per refresh interval;
 * - two nodes with nothing shared but the authorization server make the same principal of a token;
 * - the 2.x client (`@modelcontextprotocol/client`) signing in by itself in the 2026-07-28 era.
 */
import t from 'tap'
import http from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { Client, ClientCredentialsProvider, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { startAuthorizationServer, type AuthorizationServer } from '../helpers/authorization-server.js'
import { accessTokenClaims, hs256WithPublicKeyBytes, nonStringScope, oversized, signed, unknownKid, unsecured } from '../helpers/forged-tokens.js'
import { readResponse, type RawResponse } from '../helpers/http.js'
import { hasStackTrace, LEGACY_HEADERS, toolCall } from '../helpers/jsonrpc.js'
import { texts } from '../helpers/mcp-results.js'
import { freePort } from '../helpers/redis-server.js'
import { generateSigningKey } from '../helpers/signing-keys.js'
import { bearer, seenPrincipal, startResourceServer, type ResourceServer, type ResourceServerOptions } from '../helpers/resource-server.js'

const SCOPES = ['demo:read', 'demo:write']
/** Another service the authorization server issues tokens for. */
const OTHER_RESOURCE = 'https://other.example.com/mcp'

/** A node and its authorization server; every request needs `demo:read`, so challenges carry a scope. */
async function setUp (t: Tap, oauth: ResourceServerOptions['oauth'] = {}): Promise<{ as: AuthorizationServer, node: ResourceServer }> {
  const port = await freePort()
  const as = await startAuthorizationServer(t, { resources: [`http://127.0.0.1:${port}/mcp`, OTHER_RESOURCE], scopes: SCOPES })
  const node = await startResourceServer(t, as, { port, oauth: { requiredScopes: ['demo:read'], ...oauth } })
  return { as, node }
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

/** A legacy POST with extra header lines sent as they are, a name repeated if it is (fetch would merge them into one). */
async function postWithHeaderLines (url: URL, body: unknown, lines: Array<[string, string]>): Promise<RawResponse> {
  const payload = JSON.stringify(body)
  // Given as a list, the headers are all there is: Node adds no Host.
  const headers = [['host', url.host], ...Object.entries(LEGACY_HEADERS), ...lines, ['content-length', String(Buffer.byteLength(payload))]].flat()
  return await new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', agent: false, headers }, response => { readResponse(response).then(resolve, reject) })
    request.on('error', reject)
    request.end(payload)
  })
}

/** The JSON-RPC error of a refusal, or a description of what the body is instead. */
function jsonRpcError (response: RawResponse): { code: unknown, message: unknown } | string {
  try {
    const body = JSON.parse(response.text) as { jsonrpc?: unknown, error?: { code?: unknown, message?: unknown } }
    if (body.jsonrpc !== '2.0' || body.error === undefined) return `not a JSON-RPC error: ${response.text}`
    return { code: body.error.code, message: typeof body.error.message }
  } catch {
    return `not JSON: ${response.text.slice(0, 200)}`
  }
}

interface Refused {
  /** What the request carried. */
  name: string
  send: () => Promise<RawResponse>
  /** The `reason` counted. */
  reason: string
  /** The challenge's `error` parameter (none: the request carried no credentials). */
  error: 'invalid_request' | 'invalid_token' | undefined
}

/**
 * Asserts that each of `cases` is refused with 401, its challenge, a JSON-RPC error and its counted
 * reason, and that no handler ran.
 */
async function assertRefused (t: Tap, node: ResourceServer, cases: Refused[]): Promise<void> {
  for (const refused of cases) {
    const before = await node.failures()
    const callsBefore = node.calls
    const response = await refused.send()
    t.equal(response.status, 401, `${refused.name}: 401`)
    const error = refused.error === undefined ? '' : `error="${refused.error}", `
    t.equal(response.headers.get('www-authenticate'), `Bearer ${error}scope="demo:read", resource_metadata="${node.metadataUrl}"`,
      `${refused.name}: the challenge ${refused.error === undefined ? 'has no error parameter' : `says ${refused.error}`}`)
    t.same(jsonRpcError(response), { code: -32600, message: 'string' }, `${refused.name}: a JSON-RPC error`)
    t.notOk(hasStackTrace(response.text), `${refused.name}: no stack trace`)
    const after = await node.failures()
    const counted = Object.fromEntries(Object.entries(after).filter(([reason, value]) => value !== (before[reason] ?? 0)).map(([reason, value]) => [reason, value - (before[reason] ?? 0)]))
    t.same(counted, { [refused.reason]: 1 }, `${refused.name}: counted once as ${refused.reason}`)
    t.equal(node.calls, callsBefore, `${refused.name}: no handler ran`)
  }
}

t.test('bad presentations: no token, Bearer without one, two headers, another scheme, a token in the query string or a form', async t => {
  const { as, node } = await setUp(t)
  const token = await as.token({ resource: node.resource, scope: 'demo:read' })
  t.equal((await node.whoami(bearer(token))).status, 200, 'the same token in the header, once, is accepted')
  t.equal((await postWithHeaderLines(node.url, toolCall(1, 'whoami'), [['authorization', `Bearer ${token}`]])).status, 200, 'also as one raw header line')
  t.equal(node.calls, 2)
  await assertRefused(t, node, [
    { name: 'no Authorization header', send: async () => await node.whoami(), reason: 'missing', error: undefined },
    { name: 'Bearer with no token', send: async () => await node.whoami({ authorization: 'Bearer' }), reason: 'invalid', error: 'invalid_request' },
    {
      name: 'two Authorization headers, each a valid token',
      send: async () => await postWithHeaderLines(node.url, toolCall(1, 'whoami'), [['authorization', `Bearer ${token}`], ['authorization', `Bearer ${token}`]]),
      reason: 'invalid',
      error: 'invalid_request'
    },
    { name: 'Basic credentials', send: async () => await node.whoami({ authorization: `Basic ${Buffer.from('mcp-test-client-1:secret').toString('base64')}` }), reason: 'invalid', error: 'invalid_request' },
    { name: 'the token as the Basic password', send: async () => await node.whoami({ authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` }), reason: 'invalid', error: 'invalid_request' },
    { name: 'a token in the query string', send: async () => await node.whoami({}, `${node.url.href}?access_token=${token}`), reason: 'invalid', error: 'invalid_request' },
    {
      name: 'a token in a form field',
      send: async () => {
        const response = await fetch(node.url, { method: 'POST', headers: { ...LEGACY_HEADERS, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ access_token: token }) })
        return { status: response.status, headers: response.headers, text: await response.text() }
      },
      reason: 'missing',
      error: undefined
    }
  ])
})

t.test('tokens that do not verify: forged, foreign, expired, not yet valid, without expiry, wrong or missing audience, another issuer', async t => {
  const { as, node } = await setUp(t)
  // The node has the key set: a real token first.
  t.equal((await node.whoami(bearer(await as.token({ resource: node.resource, scope: 'demo:read' })))).status, 200)
  const claims = accessTokenClaims({ issuer: as.issuer, audience: node.resource, scope: 'demo:read' })
  const key = as.signingKey
  const now = Math.floor(Date.now() / 1000)
  const { aud: _aud, ...withoutAudience } = claims
  const { exp: _exp, ...withoutExpiry } = claims
  const presenting = (name: string, token: string | Promise<string>, reason: string): Refused =>
    ({ name, send: async () => await node.whoami(bearer(await token)), reason, error: 'invalid_token' })
  t.equal((await node.whoami(bearer(await signed(key, claims)))).status, 200, 'the forger\'s own control: these claims signed with the server\'s key pass')
  await assertRefused(t, node, [
    presenting('not a JWT', 'an-opaque-token-and-no-introspection', 'invalid'),
    presenting('three parts that are not JSON', 'aaaa.bbbb.cccc', 'invalid'),
    presenting('a JWS header, then a payload that is not JSON', `${Buffer.from(JSON.stringify({ alg: 'ES256', kid: key.kid })).toString('base64url')}.bm90LWpzb24.c2ln`, 'invalid'),
    presenting('alg: none', unsecured(claims, { kid: key.kid }), 'invalid'),
    presenting('HS256 keyed with the JWKS public key bytes', hs256WithPublicKeyBytes(key.publicJwk, claims), 'invalid'),
    presenting('signed with a key the server never published (unknown kid)', unknownKid(claims), 'invalid'),
    presenting('the server\'s kid, another key\'s signature', signed(await generateSigningKey(), claims, { kid: key.kid }), 'invalid'),
    presenting('expired an hour ago', signed(key, accessTokenClaims({ issuer: as.issuer, audience: node.resource, scope: 'demo:read', issuedAt: now - 3600 })), 'expired'),
    presenting('not valid for another hour (nbf)', signed(key, { ...claims, nbf: now + 3600 }), 'invalid'),
    presenting('issued an hour from now (iat)', signed(key, { ...claims, iat: now + 3600, exp: now + 7200 }), 'invalid'),
    presenting('no exp (RFC 9068 §2.2 requires one)', signed(key, withoutExpiry), 'invalid'),
    presenting('a real token of this authorization server for another resource', as.token({ resource: OTHER_RESOURCE, scope: 'demo:read' }), 'audience'),
    presenting('aud of another resource among others', signed(key, { ...claims, aud: [OTHER_RESOURCE, `${node.resource}/`] }), 'audience'),
    presenting('aud missing', signed(key, withoutAudience), 'audience'),
    presenting('iss of another server, signed with this one\'s key', signed(key, { ...claims, iss: 'https://evil.example.com' }), 'issuer'),
    presenting('a scope claim that is not a string', nonStringScope(key, claims), 'invalid')
  ])
})

t.test('a token of 100 KB is refused before anything parses or verifies it, bounded by Node or by maxTokenBytes', async t => {
  const port = await freePort()
  const as = await startAuthorizationServer(t, { resources: [`http://127.0.0.1:${port}/mcp`], scopes: SCOPES })
  const claims = accessTokenClaims({ issuer: as.issuer, audience: `http://127.0.0.1:${port}/mcp`, scope: 'demo:read' })
  const token = await oversized(as.signingKey, claims)
  t.ok(token.length >= 100 * 1024, `the token is ${token.length} bytes, signed by the authorization server's key`)

  // Node's own limit on a request's headers (16 KiB by default) refuses it before Fastify sees it.
  const node = await startResourceServer(t, as, { port, oauth: { requiredScopes: ['demo:read'] } })
  const byNode = await node.whoami(bearer(token))
  t.equal(byNode.status, 431, 'with Node\'s default header limit: 431 Request Header Fields Too Large')
  t.notOk(hasStackTrace(byNode.text), 'no stack trace')
  t.equal(node.calls, 0, 'no handler ran')

  // A deployment that lets Node read large headers: the plugin's own bound refuses it, counted.
  const roomy = await startResourceServer(t, as, { port: await freePort(), resource: node.resource, fastify: { http: { maxHeaderSize: 256 * 1024 } }, oauth: { requiredScopes: ['demo:read'] } })
  await assertRefused(t, roomy, [{ name: 'a 100 KB token with Node\'s limit raised', send: async () => await roomy.whoami(bearer(token)), reason: 'invalid', error: 'invalid_token' }])
  t.equal(as.discoveryRequests + as.jwksRequests, 0, 'nothing verified it: neither node even looked up the authorization server\'s keys')
  t.equal((await roomy.whoami(bearer(await signed(as.signingKey, claims)))).status, 200, 'while the same claims without the padding pass on that node')
})

t.test('a header token in the query string as well is refused, not ignored', async t => {
  const { as, node } = await setUp(t)
  const token = await as.token({ resource: node.resource, scope: 'demo:read' })
  await assertRefused(t, node, [
    { name: 'a token in the header and in the query string', send: async () => await node.whoami(bearer(token), `${node.url.href}?access_token=${token}`), reason: 'invalid', error: 'invalid_request' }
  ])
})

t.test('key rotation: a token signed with the new key is accepted without a restart; a flood of made-up kids costs one fetch per interval', async t => {
  const interval = 1000
  const { as, node } = await setUp(t, { jwksRefreshIntervalMs: interval })
  t.equal((await node.whoami(bearer(await as.token({ resource: node.resource, scope: 'demo:read' })))).status, 200, 'a token signed with the first key')
  t.equal(as.jwksRequests, 1, 'the node fetched the key set once')

  await sleep(interval)
  const newKey = await as.rotateKeys({ keepOld: true })
  const newToken = await as.token({ resource: node.resource, scope: 'demo:read' })
  t.equal(JSON.parse(Buffer.from(newToken.split('.')[0]!, 'base64url').toString()).kid, newKey.kid, 'the authorization server signs with the new key now')
  // Clients that got tokens from the new key at once arrive together: one fetch, and every one of them passes.
  const together = await Promise.all(Array.from({ length: 20 }, async () => await node.whoami(bearer(newToken))))
  t.same(together.map(answer => answer.status), together.map(() => 200), 'the new key\'s token is accepted by the same node, by every request that arrived together')
  t.equal(as.jwksRequests, 2, 'after one fetch of the key set for the kid it lacked')
  const claims = accessTokenClaims({ issuer: as.issuer, audience: node.resource, scope: 'demo:read' })
  t.equal((await node.whoami(bearer(await signed(as.publishedKeys[1]!, claims)))).status, 200, 'a token signed with the old key, still published, still verifies')
  t.equal(as.jwksRequests, 2, 'without another fetch')
  // Without a kid either published key may have signed it (two ES256 keys): each is tried.
  for (const [name, key] of [['new', newKey], ['old', as.publishedKeys[1]!]] as const) {
    t.equal((await node.whoami(bearer(await signed(key, claims, { kid: undefined })))).status, 200, `a token without a kid, signed with the ${name} key`)
  }
  const kidless = await node.whoami(bearer(await signed(await generateSigningKey(), claims, { kid: undefined })))
  t.equal(kidless.status, 401, 'a token without a kid that no published key signed is refused')
  t.equal(as.jwksRequests, 2, 'still without another fetch')

  await sleep(interval)
  const flood = await Promise.all(Array.from({ length: 50 }, async () => await unknownKid(claims)))
  const before = { jwks: as.jwksRequests, failures: await node.failures() }
  const startedAt = Date.now()
  const answers = await Promise.all(flood.map(async token => await node.whoami(bearer(token))))
  const elapsed = Date.now() - startedAt
  t.same(answers.map(answer => answer.status), flood.map(() => 401), 'every made-up kid is a 401 (not a 503: the authorization server is up)')
  t.ok(answers.every(answer => answer.headers.get('www-authenticate')?.startsWith('Bearer error="invalid_token"')), 'each challenged invalid_token')
  const fetches = as.jwksRequests - before.jwks
  t.ok(fetches >= 1 && fetches <= 1 + Math.floor(elapsed / interval), `${fetches} key-set fetch(es) for 50 unknown kids in ${elapsed} ms: at most one per ${interval} ms interval`)
  t.equal((await node.failures()).invalid, (before.failures.invalid ?? 0) + 50, 'each counted invalid')
  t.equal(node.calls, 24, 'no handler ran for any of them')
  t.equal((await node.whoami(bearer(await as.token({ resource: node.resource, scope: 'demo:read' })))).status, 200, 'and real tokens still pass')
})

t.test('two nodes, nothing shared but the authorization server: one token, the same principal on both; two issuers\' same subject, two principals', async t => {
  const resource = 'https://mcp.cluster.test/mcp'
  const [as, other] = await Promise.all([
    startAuthorizationServer(t, { resources: [resource], scopes: SCOPES }),
    startAuthorizationServer(t, { resources: [resource], scopes: SCOPES })
  ])
  const oauth = { authorizationServers: [as.issuer, other.issuer] }
  const a = await startResourceServer(t, as, { resource, oauth })
  const b = await startResourceServer(t, as, { resource, oauth })
  const token = await as.token({ resource, scope: SCOPES })
  const onA = await a.whoami(bearer(token))
  const onB = await b.whoami(bearer(token))
  t.equal(onA.status, 200, 'node A accepts the token')
  t.equal(onB.status, 200, 'node B accepts it too, having fetched the keys itself')
  const expected = { id: `${as.issuer}#mcp-test-client-1`, subject: 'mcp-test-client-1', issuer: as.issuer, scopes: SCOPES, clientId: 'mcp-test-client-1' }
  t.same(seenPrincipal(onA), expected, 'node A: the principal is the issuer and the subject, with the scopes and the client')
  t.same(seenPrincipal(onB), expected, 'node B: the same principal')
  t.equal(as.jwksRequests, 2, 'each node fetched the key set once')

  const fromOther = await a.whoami(bearer(await other.token({ resource, scope: 'demo:read' })))
  t.equal(fromOther.status, 200, 'a token of the other trusted issuer')
  t.same(seenPrincipal(fromOther), { id: `${other.issuer}#mcp-test-client-1`, subject: 'mcp-test-client-1', issuer: other.issuer, scopes: ['demo:read'], clientId: 'mcp-test-client-1' },
    'the same subject from another issuer is another principal')
})

t.test('the 2.x client signs in by itself in the 2026-07-28 era: 401, metadata, a token for this resource, the call', async t => {
  const { as, node } = await setUp(t)
  const [credentials] = as.clients
  /** What the client sent where, in order: `<method> <server><path> [<JSON-RPC method>] → <status>`. */
  const wire: string[] = []
  const recordingFetch = async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const response = await fetch(url, init)
    const { port, pathname } = new URL(url)
    let rpc = ''
    try { rpc = ` ${(JSON.parse(String(init?.body)) as { method: string }).method}` } catch {}
    wire.push(`${init?.method ?? 'GET'} ${port === String(node.port) ? 'node' : 'as'}${pathname}${rpc} → ${response.status}`)
    return response
  }
  const provider = new ClientCredentialsProvider({ clientId: credentials!.clientId, clientSecret: credentials!.clientSecret, scope: 'demo:read', expectedIssuer: as.issuer })
  const client = new Client({ name: 'oauth-2x', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
  t.teardown(() => client.close())
  await client.connect(new StreamableHTTPClientTransport(node.url, { authProvider: provider, fetch: recordingFetch }))
  const result = await client.callTool({ name: 'whoami', arguments: {} })
  t.same(JSON.parse(texts(result.content)[0] ?? '{}'), { id: `${as.issuer}#${credentials!.clientId}`, subject: credentials!.clientId, issuer: as.issuer, scopes: ['demo:read'], clientId: credentials!.clientId },
    'the call ran as the client, principal from the token')
  t.same(wire, [
    'POST node/mcp server/discover → 401',
    'GET node/.well-known/oauth-protected-resource/mcp → 200',
    'GET as/.well-known/oauth-authorization-server → 200',
    'POST as/token → 200',
    'POST node/mcp server/discover → 200',
    'POST node/mcp tools/call → 200'
  ], 'from nothing but the URL: 401, the resource metadata, the authorization server\'s, a token (for this resource: the node checks aud), the retry, the call')
})

t.test('the keys are found however the authorization server publishes its metadata: RFC 8414 only, OpenID discovery only, an issuer with a path', async t => {
  const port = await freePort()
  const resource = `http://127.0.0.1:${port}/mcp`
  const servers = await Promise.all([
    startAuthorizationServer(t, { resources: [resource], scopes: SCOPES, metadata: ['oauth-authorization-server'] }),
    startAuthorizationServer(t, { resources: [resource], scopes: SCOPES, metadata: ['openid-configuration'] }),
    startAuthorizationServer(t, { resources: [resource], scopes: SCOPES, path: '/tenant-a', metadata: ['oauth-authorization-server'] }),
    startAuthorizationServer(t, { resources: [resource], scopes: SCOPES, path: '/tenant-b', metadata: ['openid-configuration'] })
  ])
  const node = await startResourceServer(t, servers[0]!, { port, oauth: { authorizationServers: servers.map(as => as.issuer) } })
  for (const as of servers) {
    const answer = await node.whoami(bearer(await as.token({ resource, scope: 'demo:read' })))
    t.equal(answer.status, 200, `a token of ${as.issuer} (${as.requests.filter(request => request.path.includes('/.well-known/')).map(request => request.path).join(', ')})`)
    t.equal(seenPrincipal(answer)?.issuer, as.issuer, 'names its issuer')
    t.equal(as.jwksRequests, 1, 'its key set was fetched once')
  }
})

t.test('opaque tokens are introspected (RFC 7662) with the resource server\'s own credentials: accepted once and kept, refused when inactive or for another resource, 503 when the server cannot answer', async t => {
  const port = await freePort()
  const resource = `http://127.0.0.1:${port}/mcp`
  const as = await startAuthorizationServer(t, { resources: [resource, OTHER_RESOURCE], opaqueResources: [resource, OTHER_RESOURCE], scopes: SCOPES })
  const [client, resourceServerClient] = as.clients
  const node = await startResourceServer(t, as, {
    port, oauth: { requiredScopes: ['demo:read'], introspection: { clientId: resourceServerClient!.clientId, clientSecret: resourceServerClient!.clientSecret } }
  })
  const token = await as.token({ resource, scope: SCOPES })
  t.equal(token.split('.').length, 1, 'the authorization server issues an opaque token for this resource')
  const accepted = await node.whoami(bearer(token))
  t.equal(accepted.status, 200, 'accepted')
  t.same(seenPrincipal(accepted), { id: `${as.issuer}#${client!.clientId}`, subject: client!.clientId, issuer: as.issuer, scopes: SCOPES, clientId: client!.clientId }, 'the principal from the introspection answer')
  t.equal(as.introspectionRequests, 1, 'after one introspection, at the endpoint the metadata names')
  t.equal((await node.whoami(bearer(token))).status, 200, 'the same token again')
  t.equal(as.introspectionRequests, 1, 'without another introspection')

  await assertRefused(t, node, [
    { name: 'an opaque token the server never issued', send: async () => await node.whoami(bearer('bm90LWEtdG9rZW4tb2YtdGhpcy1zZXJ2ZXI')), reason: 'invalid', error: 'invalid_token' },
    { name: 'a real opaque token for another resource', send: async () => await node.whoami(bearer(await as.token({ resource: OTHER_RESOURCE, scope: 'demo:read' }))), reason: 'audience', error: 'invalid_token' }
  ])

  const misconfigured = await startResourceServer(t, as, {
    resource, oauth: { introspection: { clientId: resourceServerClient!.clientId, clientSecret: 'not-the-secret' } }
  })
  const refused = await misconfigured.whoami(bearer(await as.token({ resource, scope: SCOPES })))
  t.equal(refused.status, 503, 'a resource server whose own credentials the introspection endpoint refuses answers 503, not 401 (the client did nothing wrong)')
  t.ok(refused.headers.get('retry-after') !== null, 'with Retry-After')

  const unseen = await as.token({ resource, scope: SCOPES })
  await as.stop()
  t.equal((await node.whoami(bearer(token))).status, 200, 'the server stopped: a token introspected before still passes')
  const down = await node.whoami(bearer(unseen))
  t.equal(down.status, 503, 'one never introspected is a 503')
  t.ok(down.headers.get('retry-after') !== null, 'with Retry-After')
  t.equal((await node.failures()).unavailable, 1, 'counted unavailable')
})

t.test('auth.oauth.verify replaces the built-in verification: its claims make the principal, null or a throw is a 401', async t => {
  const port = await freePort()
  const resource = `http://127.0.0.1:${port}/mcp`
  const as = await startAuthorizationServer(t, { resources: [resource], scopes: SCOPES })
  const answers: Record<string, unknown> = {
    'token-of-ada': { iss: 'https://sso.example.com', sub: 'ada', scope: 'demo:read', client_id: 'portal' },
    'token-without-issuer': { sub: 'bob', scope: 'demo:read' },
    'a-list': ['not', 'claims'],
    'no-subject': { iss: 'https://sso.example.com', scope: 'demo:read' }
  }
  const node = await startResourceServer(t, as, {
    port,
    oauth: {
      requiredScopes: ['demo:read'],
      verify: token => {
        if (token === 'throws') throw new Error('revoked')
        return answers[token] ?? null
      }
    }
  })
  t.same(seenPrincipal(await node.whoami(bearer('token-of-ada'))), { id: 'https://sso.example.com#ada', subject: 'ada', issuer: 'https://sso.example.com', scopes: ['demo:read'], clientId: 'portal' },
    'the hook\'s claims: issuer and subject, scopes, client')
  t.same(seenPrincipal(await node.whoami(bearer('token-without-issuer'))), { id: 'bob', subject: 'bob', issuer: null, scopes: ['demo:read'], clientId: null },
    'claims without iss: the subject alone')
  await assertRefused(t, node, ['unknown', 'throws', 'a-list', 'no-subject'].map(token => ({
    name: `the hook answering ${token}`, send: async () => await node.whoami(bearer(token)), reason: 'invalid', error: 'invalid_token' as const
  })))
  t.equal(as.discoveryRequests + as.jwksRequests, 0, 'the authorization server was never asked')
})
