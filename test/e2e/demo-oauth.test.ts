/**
 * The demo as an OAuth resource server (MCP_OAUTH_ISSUER, MCP_OAUTH_RESOURCE, MCP_OAUTH_SCOPES), against
 * a real authorization server: the metadata names it, tokens for the demo's resource work, `scoped_echo`
 * needs demo:write, and MCP_OAUTH_SCOPES is required of every request.
 */
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, type DemoEnv } from '../../example/app.js'
import { startAuthorizationServer } from '../helpers/authorization-server.js'
import { post } from '../helpers/inject.js'
import { LEGACY, toolCall } from '../helpers/jsonrpc.js'

const RESOURCE = 'http://127.0.0.1:3000/mcp'

async function demo (t: Test, env: DemoEnv): Promise<FastifyInstance> {
  const app = await buildApp(env)
  t.teardown(() => app.close())
  await app.ready()
  return app
}

t.test('MCP_OAUTH_ISSUER: the demo serves metadata, takes tokens for its resource, and scoped_echo needs demo:write', async t => {
  const as = await startAuthorizationServer(t, { resources: [RESOURCE], scopes: ['demo:read', 'demo:write'] })
  const app = await demo(t, { MCP_OAUTH_ISSUER: as.issuer })
  const metadata = await app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource/mcp' })
  t.same(metadata.json(), {
    resource: RESOURCE,
    authorization_servers: [as.issuer],
    scopes_supported: ['demo:write'],
    bearer_methods_supported: ['header'],
    resource_name: 'fastify-mcp-cancellation demo'
  }, 'the default resource is http://127.0.0.1:3000/mcp; scoped_echo declares demo:write')

  const none = await post(app, toolCall(1, 'echo', { text: 'hi' }), LEGACY)
  t.equal(none.statusCode, 401)
  t.equal(none.headers['www-authenticate'], 'Bearer resource_metadata="http://127.0.0.1:3000/.well-known/oauth-protected-resource/mcp"')

  const reader = await as.token({ resource: RESOURCE, scope: 'demo:read' })
  const echoed = await post(app, toolCall(1, 'echo', { text: 'hi' }), { ...LEGACY, authorization: `Bearer ${reader}` })
  t.equal(echoed.statusCode, 200, 'a token for the demo works')
  const refused = await post(app, toolCall(2, 'scoped_echo', { text: 'hi' }), { ...LEGACY, authorization: `Bearer ${reader}` })
  t.equal(refused.statusCode, 403, 'scoped_echo without demo:write: 403')
  t.match(String(refused.headers['www-authenticate']), /error="insufficient_scope", scope="demo:write"/)
  const writer = await as.token({ resource: RESOURCE, scope: 'demo:write' })
  const scoped = await post(app, toolCall(3, 'scoped_echo', { text: 'hi' }), { ...LEGACY, authorization: `Bearer ${writer}` })
  t.equal(scoped.statusCode, 200, 'and with it, 200')
  t.match(scoped.payload, /"text":"hi"/)
})

t.test('MCP_OAUTH_RESOURCE and MCP_OAUTH_SCOPES: another resource, and scopes every request needs', async t => {
  const resource = 'https://mcp.example.com/mcp'
  const as = await startAuthorizationServer(t, { resources: [resource, RESOURCE], scopes: ['demo:read', 'demo:write'] })
  const app = await demo(t, { MCP_OAUTH_ISSUER: as.issuer, MCP_OAUTH_RESOURCE: resource, MCP_OAUTH_SCOPES: 'demo:read' })
  const forDefault = await as.token({ resource: RESOURCE, scope: 'demo:read' })
  t.equal((await post(app, toolCall(1, 'echo', { text: 'hi' }), { ...LEGACY, authorization: `Bearer ${forDefault}` })).statusCode, 401, 'a token for another resource: 401')
  const writeOnly = await as.token({ resource, scope: 'demo:write' })
  const refused = await post(app, toolCall(1, 'echo', { text: 'hi' }), { ...LEGACY, authorization: `Bearer ${writeOnly}` })
  t.equal(refused.statusCode, 403, 'without the required demo:read: 403 on every request')
  t.match(String(refused.headers['www-authenticate']), /scope="demo:read", resource_metadata="https:\/\/mcp\.example\.com\/\.well-known\/oauth-protected-resource\/mcp"/)
  const both = await as.token({ resource, scope: 'demo:read demo:write' })
  t.equal((await post(app, toolCall(1, 'scoped_echo', { text: 'hi' }), { ...LEGACY, authorization: `Bearer ${both}` })).statusCode, 200)
  await t.rejects(buildApp({ MCP_OAUTH_ISSUER: as.issuer, MCP_JWT_SECRET: 'x'.repeat(32) }), /give one of them/, 'MCP_JWT_SECRET and MCP_OAUTH_ISSUER together are refused')
})
