/**
 * `auth.oauth` as options (issue 21): every bad value fails at register time with an
 * `FST_MCP_INVALID_OPTION` naming the option; the Protected Resource Metadata (RFC 9728) is served only
 * with `auth.oauth`, at the path-based and the root well-known URLs, with the scopes the configuration
 * and the definitions name; and `auth.oauth` beside `auth.jwt` or `auth.principal` adds the metadata,
 * the `resource_metadata` of the challenges and the per-tool scopes to theirs. No authorization server:
 * tokens are verified by `auth.oauth.verify`, `@fastify/jwt` or `auth.principal`.
 */
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import fastifyJwt from '@fastify/jwt'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { bearer, JWT_SECRET, jwtApp } from '../helpers/identity.js'
import { buildApp, json, post, postModern, registerPlugin } from '../helpers/inject.js'
import { LEGACY, toolCall } from '../helpers/jsonrpc.js'

type OAuth = NonNullable<NonNullable<McpCancellationOptions['auth']>['oauth']>

const RESOURCE = 'https://mcp.example.com/mcp'
const ISSUER = 'https://auth.example.com'
const METADATA_PATH = '/.well-known/oauth-protected-resource/mcp'
const ROOT_METADATA_PATH = '/.well-known/oauth-protected-resource'
const METADATA_URL = `https://mcp.example.com${METADATA_PATH}`
const BASE: OAuth = { resource: RESOURCE, authorizationServers: [ISSUER] }

/** Claims from a token that is its own subject: `alice` is `{ sub: 'alice' }`, `alice:s1,s2` grants s1 and s2. */
function verifyByName (token: string): Record<string, unknown> {
  const [sub, scopes = ''] = token.split(':')
  return { sub, scope: scopes.split(',').join(' ') }
}

async function getMetadata (app: FastifyInstance, url = METADATA_PATH): Promise<LightMyRequestResponse> {
  return await app.inject({ method: 'GET', url })
}

function metadataOf (response: LightMyRequestResponse): Record<string, unknown> {
  return JSON.parse(response.payload) as Record<string, unknown>
}

t.test('bad auth.oauth values fail at register time, naming the option', async t => {
  const bad: Array<[string, Record<string, unknown>]> = [
    ['auth.oauth', { oauth: 'https://mcp.example.com/mcp' }],
    ['auth.oauth.resource', { oauth: { ...BASE, resource: undefined } }],
    ['auth.oauth.resource', { oauth: { ...BASE, resource: 'mcp.example.com/mcp' } }],
    ['auth.oauth.resource', { oauth: { ...BASE, resource: '/mcp' } }],
    ['auth.oauth.resource', { oauth: { ...BASE, resource: 42 } }],
    ['auth.oauth.resource', { oauth: { ...BASE, resource: 'https://mcp.example.com/mcp?tenant=a' } }],
    ['auth.oauth.resource', { oauth: { ...BASE, resource: 'https://mcp.example.com/mcp#top' } }],
    ['auth.oauth.resource', { oauth: { ...BASE, resource: 'https://user:secret@mcp.example.com/mcp' } }],
    ['auth.oauth.resource', { oauth: { ...BASE, resource: 'https://:secret@mcp.example.com/mcp' } }],
    ['auth.oauth.resource', { oauth: { ...BASE, resource: 'ftp://mcp.example.com/mcp' } }],
    ['auth.oauth.resource', { oauth: { ...BASE, resource: 'urn:example:mcp' } }],
    ['auth.oauth.authorizationServers', { oauth: { ...BASE, authorizationServers: [] } }],
    ['auth.oauth.authorizationServers', { oauth: { ...BASE, authorizationServers: undefined } }],
    ['auth.oauth.authorizationServers', { oauth: { ...BASE, authorizationServers: ISSUER } }],
    ['auth.oauth.authorizationServers', { oauth: { ...BASE, authorizationServers: ['auth.example.com'] } }],
    ['auth.oauth.authorizationServers', { oauth: { ...BASE, authorizationServers: [ISSUER, 42] } }],
    ['auth.oauth.authorizationServers', { oauth: { ...BASE, authorizationServers: [`${ISSUER}?x=1`] } }],
    ['auth.oauth.algorithms', { oauth: { ...BASE, algorithms: ['HS256'] } }],
    ['auth.oauth.algorithms', { oauth: { ...BASE, algorithms: ['RS256', 'none'] } }],
    ['auth.oauth.algorithms', { oauth: { ...BASE, algorithms: [] } }],
    ['auth.oauth.algorithms', { oauth: { ...BASE, algorithms: 'RS256' } }],
    ['auth.oauth.scopes', { oauth: { ...BASE, scopes: ['files:read files:write'] } }],
    ['auth.oauth.scopes', { oauth: { ...BASE, scopes: ['say"hi'] } }],
    ['auth.oauth.scopes', { oauth: { ...BASE, scopes: ['back\\slash'] } }],
    ['auth.oauth.scopes', { oauth: { ...BASE, scopes: [''] } }],
    ['auth.oauth.scopes', { oauth: { ...BASE, scopes: [42] } }],
    ['auth.oauth.scopes', { oauth: { ...BASE, scopes: 'files:read' } }],
    ['auth.oauth.scopes', { oauth: { ...BASE, scopes: ['caf\u00e9'] } }],
    ['auth.oauth.requiredScopes', { oauth: { ...BASE, requiredScopes: ['a b'] } }],
    ['auth.oauth.requiredScopes', { oauth: { ...BASE, requiredScopes: ['a"b'] } }],
    ['auth.oauth.requiredScopes', { oauth: { ...BASE, requiredScopes: ['a\\b'] } }],
    ['auth.oauth.requiredScopes', { oauth: { ...BASE, requiredScopes: [null] } }],
    ['auth.oauth.requiredScopes', { oauth: { ...BASE, requiredScopes: 'mcp' } }],
    ['auth.oauth.requiredScopes', { oauth: { ...BASE, requiredScopes: ['offline_access'] } }],
    ['auth.oauth.listing', { oauth: { ...BASE, listing: 'some' } }],
    ['auth.oauth.listing', { oauth: { ...BASE, listing: true } }],
    ['auth.oauth.scopeSatisfies', { oauth: { ...BASE, scopeSatisfies: 'prefix' } }],
    ['auth.oauth.resourceName', { oauth: { ...BASE, resourceName: 42 } }],
    ['auth.oauth.resourceDocumentation', { oauth: { ...BASE, resourceDocumentation: 'see the wiki' } }],
    ['auth.oauth.verify', { oauth: { ...BASE, verify: 'jwt' } }],
    ['auth.oauth.introspection', { oauth: { ...BASE, introspection: true } }],
    ['auth.oauth.introspection.clientId', { oauth: { ...BASE, introspection: { clientSecret: 's' } } }],
    ['auth.oauth.introspection.clientSecret', { oauth: { ...BASE, introspection: { clientId: 'rs' } } }],
    ['auth.oauth.introspection.clientSecret', { oauth: { ...BASE, introspection: { clientId: 'rs', clientSecret: '' } } }],
    ['auth.oauth.introspection.endpoint', { oauth: { ...BASE, introspection: { clientId: 'rs', clientSecret: 's', endpoint: 'introspect' } } }],
    ['auth.oauth.clockToleranceSec', { oauth: { ...BASE, clockToleranceSec: -1 } }],
    ['auth.oauth.maxTokenBytes', { oauth: { ...BASE, maxTokenBytes: 0 } }]
  ]
  for (const [name, auth] of bad) {
    await t.rejects(async () => { await registerPlugin(t, { auth }) }, {
      code: 'FST_MCP_INVALID_OPTION',
      message: new RegExp(`^Invalid option "${name.replace(/\./g, '\\.')}"`)
    }, `${name}: ${JSON.stringify(auth.oauth, (_key, value: unknown) => typeof value === 'function' ? 'fn' : value)}`)
  }
})

t.test('verification options beside auth.jwt or auth.principal are refused: they would be ignored', async t => {
  const verification: Record<string, unknown> = {
    algorithms: ['ES256'],
    clockToleranceSec: 5,
    maxTokenBytes: 4096,
    jwksRefreshIntervalMs: 1000,
    jwksMaxAgeMs: 1000,
    fetchTimeoutMs: 1000,
    maxFetchBytes: 1024,
    introspection: { clientId: 'rs', clientSecret: 's' },
    verify: verifyByName
  }
  for (const [name, value] of Object.entries(verification)) {
    for (const [mode, credentials] of [['auth.jwt', { jwt: true }], ['auth.principal', { principal: () => 'alice' }]] as const) {
      await t.rejects(async () => {
        const app = Fastify({ logger: false })
        t.teardown(() => app.close())
        await app.register(fastifyJwt, { secret: JWT_SECRET })
        await app.register(mcpCancellation, { auth: { ...credentials, oauth: { ...BASE, [name]: value } } })
      }, {
        code: 'FST_MCP_INVALID_OPTION',
        message: new RegExp(`^Invalid option "auth\\.oauth\\.${name}": .*auth\\.jwt or auth\\.principal`)
      }, `${name} beside ${mode}`)
    }
  }
})

t.test('auth.oauth alone without verify still needs a valid configuration: the defaults register', async t => {
  const app = await registerPlugin(t, { auth: { oauth: BASE } })
  t.equal((await getMetadata(app)).statusCode, 200)
})

t.test('the metadata is served at the path-based and the root well-known URLs, CORS-readable and cacheable', async t => {
  const app = await buildApp(t, { auth: { oauth: { ...BASE, verify: verifyByName, resourceName: 'Example MCP', resourceDocumentation: 'https://mcp.example.com/docs' } } })
  const expected = {
    resource: RESOURCE,
    authorization_servers: [ISSUER],
    scopes_supported: [],
    bearer_methods_supported: ['header'],
    resource_name: 'Example MCP',
    resource_documentation: 'https://mcp.example.com/docs'
  }
  for (const url of [METADATA_PATH, ROOT_METADATA_PATH]) {
    const res = await getMetadata(app, url)
    t.equal(res.statusCode, 200, `GET ${url}`)
    t.match(String(res.headers['content-type']), /^application\/json/, `${url}: JSON`)
    t.same(metadataOf(res), expected, `${url}: the document`)
    t.equal(res.headers['access-control-allow-origin'], '*', `${url}: readable from any origin`)
    t.match(String(res.headers['cache-control']), /max-age=\d+/, `${url}: cacheable`)
    t.equal(res.headers['www-authenticate'], undefined, `${url}: needs no token`)
    const preflight = await app.inject({ method: 'OPTIONS', url, headers: { origin: 'https://inspector.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'mcp-protocol-version' } })
    t.equal(preflight.statusCode, 204, `OPTIONS ${url}: a CORS preflight is answered`)
    t.match(String(preflight.headers['access-control-allow-headers']), /mcp-protocol-version/, `${url}: the SDK's header is allowed`)
  }
})

t.test('without resourceName and resourceDocumentation the document has neither', async t => {
  const app = await buildApp(t, { auth: { oauth: { ...BASE, verify: verifyByName } } })
  const document = metadataOf(await getMetadata(app))
  t.notOk('resource_name' in document)
  t.notOk('resource_documentation' in document)
})

t.test('no metadata without auth.oauth: 404 at both URLs, with no auth, with auth.principal and with auth.jwt', async t => {
  const apps: Array<[string, FastifyInstance]> = [
    ['no auth', await buildApp(t)],
    ['auth.principal', await buildApp(t, { auth: { principal: () => 'alice' } })],
    ['auth.jwt', (await jwtApp(t)).app]
  ]
  for (const [what, app] of apps) {
    for (const url of [METADATA_PATH, ROOT_METADATA_PATH]) t.equal((await getMetadata(app, url)).statusCode, 404, `${what}: GET ${url}`)
  }
})

t.test('a trailing slash of the resource is dropped; scheme and host are lower-cased', async t => {
  const app = await buildApp(t, { auth: { oauth: { ...BASE, resource: 'HTTPS://MCP.Example.COM/mcp/', verify: verifyByName } } })
  const res = await getMetadata(app)
  t.equal(res.statusCode, 200, 'served at the path of the canonical resource')
  t.equal(metadataOf(res).resource, RESOURCE)
  const challenge = await post(app, toolCall(1, 'ping'), LEGACY)
  t.equal(challenge.headers['www-authenticate'], `Bearer resource_metadata="${METADATA_URL}"`, 'the challenge names the canonical metadata URL')
})

t.test('a resource at the origin root is described at the root URL only', async t => {
  const app = await buildApp(t, { auth: { oauth: { ...BASE, resource: 'https://mcp.example.com/', verify: verifyByName } } })
  const res = await getMetadata(app, ROOT_METADATA_PATH)
  t.equal(res.statusCode, 200)
  t.equal(metadataOf(res).resource, 'https://mcp.example.com')
  t.equal((await post(app, toolCall(1, 'ping'), LEGACY)).headers['www-authenticate'], `Bearer resource_metadata="https://mcp.example.com${ROOT_METADATA_PATH}"`)
})

t.test('scopes_supported: configured, required and every declared scope, sorted and deduplicated, never offline_access', async t => {
  const app = await buildApp(t, {
    auth: { oauth: { ...BASE, verify: verifyByName, scopes: ['b:configured', 'offline_access', 'shared'], requiredScopes: ['a:required', 'shared'] } }
  }, app => {
    app.mcp.tool({ name: 'tool', scopes: ['t:tool', 'shared'], inputSchema: { type: 'object' }, handler: () => ({ content: [] }) })
    app.mcp.prompt({ name: 'prompt', scopes: ['p:prompt'], handler: () => ({ messages: [] }) })
    app.mcp.resource({ uri: 'test://r', name: 'r', scopes: ['r:resource'], handler: uri => ({ contents: [{ uri, text: 'r' }] }) })
    app.mcp.resourceTemplate({ uriTemplate: 'test://t/{id}', name: 't', scopes: ['r:template'], handler: uri => ({ contents: [{ uri, text: 't' }] }) })
  })
  const expected = ['a:required', 'b:configured', 'p:prompt', 'r:resource', 'r:template', 'shared', 't:tool']
  t.same(metadataOf(await getMetadata(app)).scopes_supported, expected, 'path-based')
  t.same(metadataOf(await getMetadata(app, ROOT_METADATA_PATH)).scopes_supported, expected, 'root')
})

t.test('a scope declared after ready is advertised as soon as it is declared', async t => {
  const app = await buildApp(t, { auth: { oauth: { ...BASE, verify: verifyByName } } })
  t.same(metadataOf(await getMetadata(app)).scopes_supported, [])
  app.mcp.tool({ name: 'late', scopes: ['late:scope'], inputSchema: { type: 'object' }, handler: () => ({ content: [] }) })
  t.same(metadataOf(await getMetadata(app)).scopes_supported, ['late:scope'])
})

/** An instance of the plugin in a context of its own, at `path`, for the resource at that path. */
function oauthInstance (fastify: FastifyInstance, path: string, scope: string, prefix?: string): void {
  void fastify.register(async child => {
    await child.register(mcpCancellation, {
      path,
      metrics: false,
      auth: { oauth: { ...BASE, resource: `https://mcp.example.com${prefix ?? ''}${path}`, verify: verifyByName } }
    })
    child.mcp.tool({ name: 'tool', scopes: [scope], inputSchema: { type: 'object' }, handler: () => ({ content: [] }) })
  }, prefix === undefined ? {} : { prefix })
}

t.test('two instances at two paths: each serves its path-based document, the root one is served once', async t => {
  const fastify = Fastify({ logger: false })
  t.teardown(() => fastify.close())
  oauthInstance(fastify, '/a/mcp', 'a:scope')
  oauthInstance(fastify, '/b/mcp', 'b:scope')
  await fastify.ready()
  for (const who of ['a', 'b']) {
    const res = await getMetadata(fastify, `${ROOT_METADATA_PATH}/${who}/mcp`)
    t.equal(res.statusCode, 200, `${who}'s document`)
    t.same(metadataOf(res), { ...metadataOf(res), resource: `https://mcp.example.com/${who}/mcp`, scopes_supported: [`${who}:scope`] }, `${who}'s resource and scopes only`)
  }
  const root = await getMetadata(fastify, ROOT_METADATA_PATH)
  t.equal(root.statusCode, 200, 'the root document is served')
  t.equal(metadataOf(root).resource, 'https://mcp.example.com/a/mcp', 'by the first instance')
})

t.test('two instances describing the same resource: FST_MCP_ROUTE_CONFLICT naming auth.oauth.resource', async t => {
  const fastify = Fastify({ logger: false })
  t.teardown(() => fastify.close())
  for (const path of ['/a/mcp', '/b/mcp']) {
    void fastify.register(async child => {
      await child.register(mcpCancellation, { path, metrics: false, auth: { oauth: { ...BASE, verify: verifyByName } } })
    })
  }
  await t.rejects(async () => { await fastify.ready() }, {
    code: 'FST_MCP_ROUTE_CONFLICT',
    message: `Option "auth.oauth.resource": GET ${METADATA_PATH} is already routed; give this instance another auth.oauth.resource`
  })
})

t.test("the application's own route at the metadata URL is a conflict naming auth.oauth.resource", async t => {
  const fastify = Fastify({ logger: false })
  t.teardown(() => fastify.close())
  fastify.get(METADATA_PATH, async () => ({ mine: true }))
  await t.rejects(async () => { await fastify.register(mcpCancellation, { auth: { oauth: { ...BASE, verify: verifyByName } } }) }, {
    code: 'FST_MCP_ROUTE_CONFLICT',
    message: /"auth\.oauth\.resource"/
  })
})

t.test("the application's own root metadata route is left alone", async t => {
  const fastify = Fastify({ logger: false })
  t.teardown(() => fastify.close())
  fastify.get(ROOT_METADATA_PATH, async () => ({ mine: true }))
  await fastify.register(mcpCancellation, { auth: { oauth: { ...BASE, verify: verifyByName } } })
  await fastify.ready()
  t.same(metadataOf(await getMetadata(fastify, ROOT_METADATA_PATH)), { mine: true })
  t.equal(metadataOf(await getMetadata(fastify)).resource, RESOURCE)
})

t.test('an instance under a register prefix serves its metadata where its challenges say', async t => {
  const fastify = Fastify({ logger: false })
  t.teardown(() => fastify.close())
  oauthInstance(fastify, '/mcp', 'tenant:scope', '/tenant-a')
  await fastify.ready()
  const challenge = await post(fastify, toolCall(1, 'tool'), LEGACY, '/tenant-a/mcp')
  t.equal(challenge.statusCode, 401)
  const url = /resource_metadata="([^"]+)"/.exec(String(challenge.headers['www-authenticate']))?.[1]
  t.ok(url, 'the challenge names the metadata')
  const res = await getMetadata(fastify, new URL(url!).pathname)
  t.equal(res.statusCode, 200, `GET ${new URL(url!).pathname}`)
  t.equal(metadataOf(res).resource, 'https://mcp.example.com/tenant-a/mcp')
})

/** The challenge of a response, with the `resource_metadata` of this file's resource. */
function assertChallenge (t: Test, res: LightMyRequestResponse, status: number, challenge: string, what: string): void {
  t.equal(res.statusCode, status, `${what}: ${status}`)
  t.equal(res.headers['www-authenticate'], challenge, `${what}: the challenge`)
  t.ok(Number.isInteger(json(res).error?.code), `${what}: a JSON-RPC error`)
}

t.test('beside auth.jwt: metadata served, challenges gain resource_metadata, the scope claim is enforced per tool', async t => {
  const { app, counter } = await jwtApp(t, { plugin: { auth: { jwt: true, oauth: BASE } } })
  t.equal((await getMetadata(app)).statusCode, 200, 'the metadata is served')
  app.mcp.tool({ name: 'write', scopes: ['files:write'], inputSchema: { type: 'object' }, handler: () => { counter.calls++; return { content: [] } } })
  t.same(metadataOf(await getMetadata(app)).scopes_supported, ['files:write'])

  assertChallenge(t, await post(app, toolCall(1, 'count'), LEGACY), 401, `Bearer resource_metadata="${METADATA_URL}"`, 'no token')
  assertChallenge(t, await post(app, toolCall(1, 'count'), { ...LEGACY, ...bearer('not-a-jwt') }), 401,
    `Bearer error="invalid_token", resource_metadata="${METADATA_URL}"`, 'a bad token')
  const other = Fastify({ logger: false })
  t.teardown(() => other.close())
  await other.register(fastifyJwt, { secret: 'another-secret-nobody-trusts-0123456789' })
  await other.ready()
  assertChallenge(t, await post(app, toolCall(1, 'count'), { ...LEGACY, ...bearer(other.jwt.sign({ sub: 'mallory' })) }), 401,
    `Bearer error="invalid_token", resource_metadata="${METADATA_URL}"`, 'a foreign token')
  t.equal(counter.calls, 0, 'nothing ran')

  const reader = app.jwt.sign({ sub: 'alice', scope: 'files:read' })
  assertChallenge(t, await post(app, toolCall(1, 'write'), { ...LEGACY, ...bearer(reader) }), 403,
    `Bearer error="insufficient_scope", scope="files:write", resource_metadata="${METADATA_URL}"`, 'the tool needs files:write')
  t.equal(counter.calls, 0, 'the scoped tool did not run')
  t.equal((await post(app, toolCall(1, 'count'), { ...LEGACY, ...bearer(reader) })).statusCode, 200, 'a tool without scopes runs')

  const writer = app.jwt.sign({ sub: 'alice', scope: 'files:read files:write' })
  const legacy = await post(app, toolCall(1, 'write'), { ...LEGACY, ...bearer(writer) })
  t.equal(legacy.statusCode, 200, 'legacy: the scope granted')
  t.notOk(json(legacy).error)
  const modern = await postModern(app, 'tools/call', { name: 'write', arguments: {} }, { headers: bearer(writer) })
  t.equal(modern.statusCode, 200, 'modern: the scope granted')
  t.notOk(json(modern).error)
  t.equal(counter.calls, 3)
})

t.test('beside auth.principal: metadata served, challenges gain resource_metadata, the principal\'s scopes are enforced per tool', async t => {
  let calls = 0
  const app = await buildApp(t, {
    auth: {
      oauth: { ...BASE, requiredScopes: ['mcp'] },
      principal: request => {
        const key = request.headers['x-api-key']
        if (key === undefined) return null
        if (key === 'bad') throw new Error('unknown key')
        return { id: 'alice', scopes: String(key).split(',') }
      }
    }
  }, app => {
    app.mcp.tool({ name: 'write', scopes: ['files:write'], inputSchema: { type: 'object' }, handler: () => { calls++; return { content: [] } } })
  })
  t.same(metadataOf(await getMetadata(app)).scopes_supported, ['files:write', 'mcp'], 'served, with the required and the declared scopes')

  assertChallenge(t, await post(app, toolCall(1, 'write'), LEGACY), 401, `Bearer scope="mcp", resource_metadata="${METADATA_URL}"`, 'no credentials')
  assertChallenge(t, await post(app, toolCall(1, 'write'), { ...LEGACY, 'x-api-key': 'bad' }), 401,
    `Bearer error="invalid_token", scope="mcp", resource_metadata="${METADATA_URL}"`, 'refused credentials')
  assertChallenge(t, await post(app, toolCall(1, 'write'), { ...LEGACY, 'x-api-key': 'files:write' }), 403,
    `Bearer error="insufficient_scope", scope="mcp", resource_metadata="${METADATA_URL}"`, 'without the required scope')
  assertChallenge(t, await post(app, toolCall(1, 'write'), { ...LEGACY, 'x-api-key': 'mcp' }), 403,
    `Bearer error="insufficient_scope", scope="mcp files:write", resource_metadata="${METADATA_URL}"`, 'without the tool\'s scope')
  t.equal(calls, 0, 'nothing ran')
  t.equal((await post(app, toolCall(1, 'write'), { ...LEGACY, 'x-api-key': 'mcp,files:write' })).statusCode, 200, 'with both')
  t.equal(calls, 1)
})
