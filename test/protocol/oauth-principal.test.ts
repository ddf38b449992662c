/**
 * The principal beside `auth.oauth`'s options (issue 21), as a handler sees it: `auth.principal`'s
 * `claims.client_id` is `ctx.principal.clientId`; `@fastify/jwt` whose verify answers no object (a
 * `formatUser` that makes the user a string) is a 401, never the anonymous scope; an application's
 * `auth.oauth.verify` whose claims throw when read is its own bug: a 500 without its message, not a 401
 * that would send the client to sign in again; and `resourceDocumentation` must be an http(s) URL.
 */
import t from 'tap'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import fastifyJwt from '@fastify/jwt'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { bearer, JWT_SECRET } from '../helpers/identity.js'
import { buildApp, post, SERVER_INFO } from '../helpers/inject.js'
import { bareError, LEGACY, toolCall } from '../helpers/jsonrpc.js'
import type { Teardown } from '../helpers/teardown.js'
import { registerCounter, type Counter } from '../helpers/tools.js'

type OAuth = NonNullable<NonNullable<McpCancellationOptions['auth']>['oauth']>

const BASE: OAuth = { resource: 'https://mcp.example.com/mcp', authorizationServers: ['https://auth.example.com'] }

/** Registers `principal`: answers `ctx.principal` without its claims, as JSON text. */
function registerPrincipalTool (app: FastifyInstance): void {
  app.mcp.tool({
    name: 'principal',
    description: 'Reports ctx.principal',
    inputSchema: { type: 'object' },
    handler: (_args, ctx) => {
      const { id, subject, issuer, scopes, clientId } = ctx.principal ?? {}
      return { content: [{ type: 'text', text: JSON.stringify({ id, subject, issuer, scopes, clientId }) }] }
    }
  })
}

async function principalOf (app: FastifyInstance, headers: Record<string, string> = {}): Promise<unknown> {
  const response = await post(app, toolCall(1, 'principal'), { ...LEGACY, ...headers })
  const body = JSON.parse(response.payload) as { result?: { content: Array<{ text: string }> } }
  return body.result === undefined ? undefined : JSON.parse(body.result.content[0]!.text)
}

/** Registers the plugin with `options` on a fresh app and waits for it, so register-time errors surface. */
async function register (t: Teardown, options: McpCancellationOptions): Promise<FastifyInstance> {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, options)
  await app.ready()
  return app
}

t.test('auth.principal: claims.client_id is the principal\'s clientId; one that is not a string, or none, is null', async t => {
  const answers: Record<string, unknown> = {
    client: { id: 'alice', scopes: ['files:read'], claims: { client_id: 'mcp-client' } },
    numeric: { id: 'bob', claims: { client_id: 42 } },
    plain: 'carol'
  }
  const app = await buildApp(t, { auth: { oauth: BASE, principal: request => answers[String(request.headers['x-user'])] } }, registerPrincipalTool)
  t.same(await principalOf(app, { 'x-user': 'client' }), { id: 'alice', subject: 'alice', issuer: null, scopes: ['files:read'], clientId: 'mcp-client' })
  t.same(await principalOf(app, { 'x-user': 'numeric' }), { id: 'bob', subject: 'bob', issuer: null, scopes: [], clientId: null })
  t.same(await principalOf(app, { 'x-user': 'plain' }), { id: 'carol', subject: 'carol', issuer: null, scopes: [], clientId: null })
})

t.test('@fastify/jwt whose verify answers no object (formatUser makes a string of it) is a 401: the claim cannot be read', async t => {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(fastifyJwt, { secret: JWT_SECRET, formatUser: (payload: { sub: string }) => payload.sub } as unknown as Parameters<typeof fastifyJwt>[1])
  await app.register(mcpCancellation, { serverInfo: SERVER_INFO, auth: { jwt: true, principalClaim: 'sub', required: false } })
  const counter: Counter = registerCounter(app)
  await app.ready()
  const response = await post(app, toolCall(1, 'count'), { ...LEGACY, ...bearer(app.jwt.sign({ sub: 'alice' })) })
  t.equal(response.statusCode, 401, 'refused, not served in the anonymous scope although auth is not required')
  t.match(String(response.headers['www-authenticate']), /^Bearer\b.*\berror="invalid_token"/)
  t.equal(counter.calls, 0, 'no handler ran')
})

t.test('auth.oauth.verify whose claims throw when read: a 500 JSON-RPC internal error without the message, not a 401', async t => {
  const app = await buildApp(t, {
    auth: { oauth: { ...BASE, verify: () => ({ get sub (): string { throw new Error('secret detail of the application') } }) } }
  }, app => { registerCounter(app) })
  const response: LightMyRequestResponse = await post(app, toolCall(1, 'count'), { ...LEGACY, ...bearer('a-token') })
  t.equal(response.statusCode, 500)
  t.match(bareError(response), { code: -32603 })
  t.notMatch(response.payload, /secret detail/, 'the application\'s error stays out of the answer')
  t.equal(response.headers['www-authenticate'], undefined, 'no challenge: the client is not asked to sign in again')
})

t.test('resourceDocumentation must be an absolute http(s) URL; a query or a fragment is fine', async t => {
  for (const resourceDocumentation of [42, ['https://mcp.example.com/docs'], 'ftp://mcp.example.com/docs', 'mailto:ops@example.com', '/docs']) {
    await t.rejects(register(t, { auth: { oauth: { ...BASE, verify: () => null, resourceDocumentation: resourceDocumentation as string } } }), {
      code: 'FST_MCP_INVALID_OPTION',
      message: /^Invalid option "auth\.oauth\.resourceDocumentation": must be an absolute http\(s\) URL/
    }, `${JSON.stringify(resourceDocumentation)} is refused`)
  }
  for (const resourceDocumentation of ['http://intranet.example/mcp', 'https://mcp.example.com/docs?lang=en#tokens']) {
    const app = await register(t, { auth: { oauth: { ...BASE, verify: () => null, resourceDocumentation } } })
    const document = JSON.parse((await app.inject({ method: 'GET', url: '/.well-known/oauth-protected-resource/mcp' })).payload) as Record<string, unknown>
    t.equal(document.resource_documentation, resourceDocumentation, `${resourceDocumentation} is served`)
  }
})
