/**
 * The plugin as an OAuth 2.1 resource server, end to end: a real authorization server (oidc-provider,
 * test/helpers/authorization-server.ts) and the official SDK 1.x client signing in by itself with
 * client credentials, from nothing but the server's URL: 401 → Protected Resource Metadata →
 * authorization server metadata → a token for this resource → the call; a scoped tool → 403 → a token
 * with the scope → the call.
 */
import t from 'tap'
import Fastify from 'fastify'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { startAuthorizationServer, type AuthorizationServer } from '../helpers/authorization-server.js'
import { freePort } from '../helpers/redis-server.js'
import type { Teardown } from '../helpers/teardown.js'
import { texts } from '../helpers/mcp-results.js'

const SCOPES = ['demo:read', 'demo:write']

/** A node serving `echo` and `scoped_echo` (needs `demo:write`) on a port known before it listens (the resource names it). */
async function resourceServer (t: Teardown, as: AuthorizationServer, port: number, oauth: Partial<NonNullable<NonNullable<McpCancellationOptions['auth']>['oauth']>> = {}): Promise<{ url: URL, metrics: () => Promise<string> }> {
  const url = new URL(`http://127.0.0.1:${port}/mcp`)
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, {
    serverInfo: { name: 'oauth-e2e', version: '1.0.0' },
    auth: { oauth: { resource: url.href, authorizationServers: [as.issuer], ...oauth } }
  })
  app.mcp.tool<{ text: string }>({
    name: 'echo',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    handler: ({ text }, ctx) => ({ content: [{ type: 'text', text: `${text} from ${ctx.principal?.subject ?? 'nobody'} via ${ctx.principal?.issuer ?? '-'}` }] })
  })
  app.mcp.tool<{ text: string }>({
    name: 'scoped_echo',
    scopes: ['demo:write'],
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    handler: ({ text }, ctx) => ({ content: [{ type: 'text', text: `${text} with ${ctx.principal?.scopes.join(',') ?? ''}` }] })
  })
  await app.listen({ host: '127.0.0.1', port })
  return { url, metrics: async () => (await app.inject({ method: 'GET', url: '/metrics' })).body }
}

t.test('the SDK 1.x client signs in by itself: 401, metadata, a token for this resource, the call; then 403 for a scope, a new token, the call', async t => {
  const port = await freePort()
  const resource = `http://127.0.0.1:${port}/mcp`
  const as = await startAuthorizationServer(t, { resources: [resource], scopes: SCOPES })
  const { url, metrics } = await resourceServer(t, as, port)
  const [credentials] = as.clients
  const provider = new ClientCredentialsProvider({ clientId: credentials!.clientId, clientSecret: credentials!.clientSecret, scope: 'demo:read' })
  const client = new Client({ name: 'oauth-e2e-client', version: '1.0.0' })
  t.teardown(() => client.close())
  await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }))

  const echoed = await client.callTool({ name: 'echo', arguments: { text: 'hello' } })
  t.same(texts(echoed.content), [`hello from ${credentials!.clientId} via ${as.issuer}`], 'the call ran as the client, principal from the token')
  t.ok(as.tokenRequests >= 1, 'the client got its token from the authorization server')
  t.ok(as.discoveryRequests >= 1, 'after discovering it from the resource metadata')
  const tokensBefore = as.tokenRequests

  // The 403 makes the SDK ask the authorization server again; its client-credentials flow asks for the
  // provider's configured scope (fetchToken in node_modules/@modelcontextprotocol/sdk/dist/esm/client/auth.js
  // reads clientMetadata.scope, not the challenge), so the new token still lacks demo:write and the SDK stops.
  await t.rejects(client.callTool({ name: 'scoped_echo', arguments: { text: 'write' } }), { code: 403 }, 'the scoped tool is refused for its scope')
  t.equal(as.tokenRequests, tokensBefore + 1, 'the SDK stepped up once and gave up, no loop')
  // A client configured for the scope the challenge named gets it and calls the tool.
  const writer = new ClientCredentialsProvider({ clientId: credentials!.clientId, clientSecret: credentials!.clientSecret, scope: 'demo:read demo:write' })
  const stepped = new Client({ name: 'oauth-e2e-writer', version: '1.0.0' })
  t.teardown(() => stepped.close())
  await stepped.connect(new StreamableHTTPClientTransport(url, { authProvider: writer }))
  const scoped = await stepped.callTool({ name: 'scoped_echo', arguments: { text: 'write' } })
  t.same(texts(scoped.content), ['write with demo:read,demo:write'], 'the scoped tool ran with a token that grants demo:write')
  const exposition = await metrics()
  t.match(exposition, /mcp_auth_failures_total\{reason="missing"\} 2\n/, 'each client\'s first request had no token')
  t.match(exposition, /mcp_auth_failures_total\{reason="scope"\} 2\n/, 'the first client was refused twice for the scope (before and after its step-up)')
})

t.test('the resource metadata and the challenges, as a client reads them', async t => {
  const port = await freePort()
  const resource = `http://127.0.0.1:${port}/mcp`
  const as = await startAuthorizationServer(t, { resources: [resource], scopes: SCOPES })
  const { url } = await resourceServer(t, as, port, { requiredScopes: ['demo:read'], resourceName: 'OAuth e2e' })
  const metadataUrl = `http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`
  for (const at of [metadataUrl, `http://127.0.0.1:${port}/.well-known/oauth-protected-resource`]) {
    const res = await fetch(at, { headers: { origin: 'http://localhost:6274' } })
    t.equal(res.status, 200, `${at}: 200`)
    t.equal(res.headers.get('access-control-allow-origin'), '*', 'readable cross-origin')
    t.match(res.headers.get('cache-control'), /max-age=\d+/, 'cacheable')
    t.same(await res.json(), {
      resource,
      authorization_servers: [as.issuer],
      scopes_supported: ['demo:read', 'demo:write'],
      bearer_methods_supported: ['header'],
      resource_name: 'OAuth e2e'
    })
  }
  const preflight = await fetch(metadataUrl, { method: 'OPTIONS', headers: { origin: 'http://localhost:6274', 'access-control-request-headers': 'mcp-protocol-version' } })
  t.equal(preflight.status, 204, 'a CORS preflight is answered')
  t.match(preflight.headers.get('access-control-allow-headers'), /mcp-protocol-version/)

  const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } } }
  const post = async (headers: Record<string, string>, target = url.href): Promise<Response> => await fetch(target, {
    method: 'POST', body: JSON.stringify(call), headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25', ...headers }
  })
  const none = await post({})
  t.equal(none.status, 401)
  t.equal(none.headers.get('www-authenticate'), `Bearer scope="demo:read", resource_metadata="${metadataUrl}"`, 'no token: no error parameter, the scopes every request needs, where the metadata is')
  t.equal(((await none.json()) as { error?: { code?: number } }).error?.code, -32600, 'a JSON-RPC error body')

  const foreign = await post({ authorization: `Bearer ${await as.token({ resource: 'https://other.example.com/mcp', scope: 'demo:read' }).catch(() => 'x.y.z')}` })
  t.equal(foreign.status, 401)
  t.match(foreign.headers.get('www-authenticate'), /^Bearer error="invalid_token"/, 'a token that does not verify: invalid_token')

  const inQuery = await post({}, `${url.href}?access_token=${await as.token({ resource, scope: 'demo:read' })}`)
  t.equal(inQuery.status, 401, 'a token in the query string is refused, never used')
  t.match(inQuery.headers.get('www-authenticate'), /^Bearer error="invalid_request"/)

  const readOnly = await as.token({ resource, scope: 'demo:read' })
  const ok = await post({ authorization: `Bearer ${readOnly}` })
  t.equal(ok.status, 200, 'a token for this resource with the required scope')
  const scoped = await fetch(url, {
    method: 'POST',
    body: JSON.stringify({ ...call, params: { name: 'scoped_echo', arguments: { text: 'x' } } }),
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25', authorization: `Bearer ${readOnly}` }
  })
  t.equal(scoped.status, 403)
  t.equal(scoped.headers.get('www-authenticate'), `Bearer error="insufficient_scope", scope="demo:read demo:write", resource_metadata="${metadataUrl}"`, 'one challenge with every scope the call needs')
  t.equal(((await scoped.json()) as { id?: unknown }).id, 1, 'the JSON-RPC error names the request')
})
