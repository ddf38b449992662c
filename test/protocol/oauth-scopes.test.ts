/**
 * OAuth scopes per operation (issue 21): a tool, a prompt, a resource and a resource template that
 * declare `scopes` are refused before their handler runs, in both eras and inside batches: 403
 * `insufficient_scope` with one challenge listing every scope the operation needs (the plugin-wide
 * `requiredScopes` included), 401 without an `error` for a caller with no token; `scopeSatisfies`
 * (a hierarchy) is honoured; `listing: 'permitted'` hides what the principal lacks; bad scopes in a
 * definition fail at registration; each refusal is counted in `mcp_auth_failures_total{reason}`.
 * Tokens are verified by `auth.oauth.verify`: a token is the base64url JSON of its claims.
 */
import t, { type Test } from 'tap'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import type { McpCancellationOptions } from '../../lib/index.js'
import { bearer } from '../helpers/identity.js'
import { buildApp, json, post, postLegacy, postModern } from '../helpers/inject.js'
import type { Headers } from '../helpers/jsonrpc.js'

type OAuth = NonNullable<NonNullable<McpCancellationOptions['auth']>['oauth']>

const RESOURCE = 'https://mcp.example.com/mcp'
const METADATA_URL = 'https://mcp.example.com/.well-known/oauth-protected-resource/mcp'

/** The `Authorization` header of a token for `sub` granting `scopes`. */
function tokenFor (sub: string, ...scopes: string[]): Record<string, string> {
  return bearer(Buffer.from(JSON.stringify({ sub, scope: scopes.join(' ') })).toString('base64url'))
}

/** `auth.oauth.verify`: the claims a token carries. */
function verify (token: string): unknown {
  return JSON.parse(Buffer.from(token, 'base64url').toString('utf8'))
}

/** What ran: the name of every handler that started. */
type Ran = string[]

/**
 * An app whose tool `write`, prompt `secret`, resource `test://secret` and template `test://docs/{id}`
 * declare scopes; `open`, `public` and `test://public` declare none.
 */
async function scopedApp (t: Test, oauth: Partial<OAuth> = {}, auth: Partial<NonNullable<McpCancellationOptions['auth']>> = {}): Promise<{ app: FastifyInstance, ran: Ran }> {
  const ran: Ran = []
  const app = await buildApp(t, { auth: { oauth: { resource: RESOURCE, authorizationServers: ['https://auth.example.com'], verify, ...oauth }, ...auth } }, app => {
    for (const [name, scopes] of [['write', ['files:write']], ['open', undefined]] as const) {
      app.mcp.tool({ name, scopes, inputSchema: { type: 'object' }, handler: () => { ran.push(`tool ${name}`); return { content: [{ type: 'text', text: name }] } } })
    }
    for (const [name, scopes] of [['secret', ['prompts:read']], ['public', undefined]] as const) {
      app.mcp.prompt({ name, scopes, handler: () => { ran.push(`prompt ${name}`); return { messages: [{ role: 'user', content: { type: 'text', text: name } }] } } })
    }
    for (const [uri, scopes] of [['test://secret', ['files:read']], ['test://public', undefined]] as const) {
      app.mcp.resource({ uri, name: uri, scopes, handler: uri => { ran.push(`resource ${uri}`); return { contents: [{ uri, text: uri }] } } })
    }
    app.mcp.resourceTemplate({
      uriTemplate: 'test://docs/{id}',
      name: 'docs',
      scopes: ['docs:read'],
      handler: uri => { ran.push(`template ${uri}`); return { contents: [{ uri, text: uri }] } }
    })
  })
  return { app, ran }
}

/** Each scoped operation, the request that performs it and the scope it declares. */
const OPERATIONS: Array<{ what: string, method: string, params: Record<string, unknown>, scope: string }> = [
  { what: 'a tool', method: 'tools/call', params: { name: 'write', arguments: {} }, scope: 'files:write' },
  { what: 'a prompt', method: 'prompts/get', params: { name: 'secret' }, scope: 'prompts:read' },
  { what: 'a resource', method: 'resources/read', params: { uri: 'test://secret' }, scope: 'files:read' },
  { what: 'a resource template', method: 'resources/read', params: { uri: 'test://docs/42' }, scope: 'docs:read' }
]

const ERAS = {
  legacy: async (app: FastifyInstance, method: string, params: Record<string, unknown>, headers: Headers = {}) => await postLegacy(app, method, params, { headers }),
  modern: async (app: FastifyInstance, method: string, params: Record<string, unknown>, headers: Headers = {}) => await postModern(app, method, params, { headers })
} as const

/** Asserts a refusal: its status, its exact challenge and a JSON-RPC error for the request (id 1). */
function assertRefused (t: Test, res: LightMyRequestResponse, status: number, challenge: string, what: string): void {
  t.equal(res.statusCode, status, `${what}: ${status}`)
  t.equal(res.headers['www-authenticate'], challenge, `${what}: the challenge`)
  const body = json(res)
  t.equal(body.id, 1, `${what}: the error answers the request`)
  t.equal(body.error?.code, -32600, `${what}: a JSON-RPC error`)
  t.notOk('result' in body, `${what}: no result`)
}

for (const [era, send] of Object.entries(ERAS)) {
  t.test(`${era}: each scoped operation is refused 403 before its handler, then allowed with the scopes`, async t => {
    const { app, ran } = await scopedApp(t, { requiredScopes: ['mcp'] })
    for (const { what, method, params, scope } of OPERATIONS) {
      assertRefused(t, await send(app, method, params, tokenFor('alice', 'mcp')), 403,
        `Bearer error="insufficient_scope", scope="mcp ${scope}", resource_metadata="${METADATA_URL}"`, `${what} without ${scope}`)
      assertRefused(t, await send(app, method, params, tokenFor('alice', 'mcp', 'other:scope')), 403,
        `Bearer error="insufficient_scope", scope="mcp ${scope}", resource_metadata="${METADATA_URL}"`, `${what} with another scope`)
      t.same(ran, [], `${what}: nothing ran`)
      const allowed = await send(app, method, params, tokenFor('alice', 'mcp', scope))
      t.equal(allowed.statusCode, 200, `${what} with ${scope}: 200`)
      t.ok('result' in json(allowed), `${what} with ${scope}: a result`)
      t.equal(ran.length, 1, `${what} with ${scope}: the handler ran`)
      ran.length = 0
    }
  })

  t.test(`${era}: a token without the plugin-wide scope is refused 403 for every request, naming it`, async t => {
    const { app, ran } = await scopedApp(t, { requiredScopes: ['mcp', 'mcp:use'] })
    const res = await send(app, 'tools/call', { name: 'open', arguments: {} }, tokenFor('alice', 'mcp'))
    t.equal(res.statusCode, 403)
    t.equal(res.headers['www-authenticate'], `Bearer error="insufficient_scope", scope="mcp mcp:use", resource_metadata="${METADATA_URL}"`)
    t.same(ran, [])
    t.equal((await send(app, 'tools/call', { name: 'open', arguments: {} }, tokenFor('alice', 'mcp:use', 'mcp'))).statusCode, 200)
    t.same(ran, ['tool open'])
  })

  t.test(`${era}: with required: false a caller without a token gets 401 with the scopes and no error, and only for scoped operations`, async t => {
    const { app, ran } = await scopedApp(t, {}, { required: false })
    for (const { what, method, params, scope } of OPERATIONS) {
      assertRefused(t, await send(app, method, params), 401, `Bearer scope="${scope}", resource_metadata="${METADATA_URL}"`, `${what}, no token`)
    }
    t.same(ran, [], 'nothing ran')
    t.equal((await send(app, 'tools/call', { name: 'open', arguments: {} })).statusCode, 200, 'an operation without scopes serves a caller without a token')
    t.equal((await send(app, 'resources/read', { uri: 'test://public' })).statusCode, 200)
    t.same(ran, ['tool open', 'resource test://public'])
  })

  t.test(`${era}: with required: false and requiredScopes the 401 lists them too; a token must still grant them`, async t => {
    const { app, ran } = await scopedApp(t, { requiredScopes: ['mcp'] }, { required: false })
    assertRefused(t, await send(app, 'tools/call', { name: 'write', arguments: {} }), 401, `Bearer scope="mcp files:write", resource_metadata="${METADATA_URL}"`, 'a scoped tool, no token')
    t.equal((await send(app, 'tools/call', { name: 'open', arguments: {} }, tokenFor('alice'))).statusCode, 403, 'a token without mcp')
    t.same(ran, [])
  })

  t.test(`${era}: scopeSatisfies: a hierarchy where files satisfies files:read and files:write`, async t => {
    const { app, ran } = await scopedApp(t, { scopeSatisfies: (granted, needed) => granted.some(scope => scope === needed || needed.startsWith(`${scope}:`)) })
    t.equal((await send(app, 'tools/call', { name: 'write', arguments: {} }, tokenFor('alice', 'files'))).statusCode, 200, 'files satisfies files:write')
    t.equal((await send(app, 'resources/read', { uri: 'test://secret' }, tokenFor('alice', 'files'))).statusCode, 200, 'files satisfies files:read')
    assertRefused(t, await send(app, 'resources/read', { uri: 'test://docs/1' }, tokenFor('alice', 'files')), 403,
      `Bearer error="insufficient_scope", scope="docs:read", resource_metadata="${METADATA_URL}"`, 'files does not satisfy docs:read')
    assertRefused(t, await send(app, 'tools/call', { name: 'write', arguments: {} }, tokenFor('alice', 'files:read')), 403,
      `Bearer error="insufficient_scope", scope="files:write", resource_metadata="${METADATA_URL}"`, 'files:read does not satisfy files:write')
    t.same(ran, ['tool write', 'resource test://secret'])
  })
}

t.test('completions of a scoped prompt or template need its scopes: they can reveal what it holds', async t => {
  const { app, ran } = await scopedApp(t)
  for (const ref of [{ type: 'ref/prompt', name: 'secret' }, { type: 'ref/resource', uri: 'test://docs/{id}' }, { type: 'ref/prompt', name: 'public' }]) {
    app.mcp.completion({ ref: ref as { type: 'ref/prompt', name: string }, handler: () => { ran.push(`complete ${JSON.stringify(ref)}`); return ['a-secret-name'] } })
  }
  const complete = (ref: Record<string, string>): Record<string, unknown> => ({ ref, argument: { name: 'id', value: 'a' } })
  for (const [era, send] of Object.entries(ERAS)) {
    assertRefused(t, await send(app, 'completion/complete', complete({ type: 'ref/prompt', name: 'secret' }), tokenFor('alice')), 403,
      `Bearer error="insufficient_scope", scope="prompts:read", resource_metadata="${METADATA_URL}"`, `${era}: the scoped prompt's completion`)
    assertRefused(t, await send(app, 'completion/complete', complete({ type: 'ref/resource', uri: 'test://docs/{id}' }), tokenFor('alice')), 403,
      `Bearer error="insufficient_scope", scope="docs:read", resource_metadata="${METADATA_URL}"`, `${era}: the scoped template's completion`)
    t.same(ran, [], `${era}: no completion handler ran`)
    t.equal((await send(app, 'completion/complete', complete({ type: 'ref/prompt', name: 'secret' }), tokenFor('alice', 'prompts:read'))).statusCode, 200, `${era}: with the prompt's scope`)
    t.equal((await send(app, 'completion/complete', complete({ type: 'ref/resource', uri: 'test://docs/{id}' }), tokenFor('alice', 'docs:read'))).statusCode, 200, `${era}: with the template's scope`)
    t.equal((await send(app, 'completion/complete', complete({ type: 'ref/prompt', name: 'public' }), tokenFor('alice'))).statusCode, 200, `${era}: an unscoped prompt's completion needs nothing`)
    t.equal(ran.length, 3, `${era}: the allowed completions ran`)
    ran.length = 0
  }
})

/** The names a list answered, by list method. */
async function listed (app: FastifyInstance, era: keyof typeof ERAS, headers: Headers): Promise<Record<string, { names: string[], cacheScope: unknown }>> {
  const lists: Record<string, [string, string]> = {
    'tools/list': ['tools', 'name'],
    'prompts/list': ['prompts', 'name'],
    'resources/list': ['resources', 'uri'],
    'resources/templates/list': ['resourceTemplates', 'uriTemplate']
  }
  const seen: Record<string, { names: string[], cacheScope: unknown }> = {}
  for (const [method, [key, field]] of Object.entries(lists)) {
    const res = await ERAS[era](app, method, {}, headers)
    const result = json(res).result as Record<string, unknown>
    seen[method] = { names: (result[key] as Array<Record<string, string>>).map(entry => entry[field]!), cacheScope: result.cacheScope }
  }
  return seen
}

for (const era of ['legacy', 'modern'] as const) {
  t.test(`${era}: listing 'all' (the default) lists everything, whatever the scopes`, async t => {
    const { app } = await scopedApp(t)
    const seen = await listed(app, era, tokenFor('alice'))
    t.same(seen['tools/list']?.names, ['write', 'open'])
    t.same(seen['prompts/list']?.names, ['secret', 'public'])
    t.same(seen['resources/list']?.names, ['test://secret', 'test://public'])
    t.same(seen['resources/templates/list']?.names, ['test://docs/{id}'])
    for (const [method, { cacheScope }] of Object.entries(seen)) t.equal(cacheScope, era === 'modern' ? 'public' : undefined, `${method}: cacheScope`)
  })

  t.test(`${era}: listing 'permitted' hides what the principal lacks, and the lists are private`, async t => {
    const { app } = await scopedApp(t, { listing: 'permitted' })
    const none = await listed(app, era, tokenFor('alice'))
    t.same(none['tools/list']?.names, ['open'])
    t.same(none['prompts/list']?.names, ['public'])
    t.same(none['resources/list']?.names, ['test://public'])
    t.same(none['resources/templates/list']?.names, [])
    for (const [method, { cacheScope }] of Object.entries(none)) t.equal(cacheScope, era === 'modern' ? 'private' : undefined, `${method}: cacheScope`)

    const some = await listed(app, era, tokenFor('alice', 'files:write', 'docs:read'))
    t.same(some['tools/list']?.names, ['write', 'open'])
    t.same(some['prompts/list']?.names, ['public'])
    t.same(some['resources/list']?.names, ['test://public'])
    t.same(some['resources/templates/list']?.names, ['test://docs/{id}'])

    const all = await listed(app, era, tokenFor('alice', 'files:write', 'files:read', 'prompts:read', 'docs:read'))
    t.same(all['tools/list']?.names, ['write', 'open'])
    t.same(all['prompts/list']?.names, ['secret', 'public'])
    t.same(all['resources/list']?.names, ['test://secret', 'test://public'])
    t.same(all['resources/templates/list']?.names, ['test://docs/{id}'])
  })

  t.test(`${era}: listing 'permitted' with required: false shows a caller without a token only what needs no scope`, async t => {
    const { app } = await scopedApp(t, { listing: 'permitted' }, { required: false })
    const seen = await listed(app, era, {})
    t.same(seen['tools/list']?.names, ['open'])
    t.same(seen['resources/templates/list']?.names, [])
  })
}

t.test('a definition with scopes needs the auth option: FST_MCP_INVALID_DEFINITION', async t => {
  const app = await buildApp(t)
  const definitions: Array<[string, () => void]> = [
    ['tool', () => { app.mcp.tool({ name: 'w', scopes: ['files:write'], inputSchema: { type: 'object' }, handler: () => ({ content: [] }) }) }],
    ['prompt', () => { app.mcp.prompt({ name: 'p', scopes: ['p'], handler: () => ({ messages: [] }) }) }],
    ['resource', () => { app.mcp.resource({ uri: 'test://r', name: 'r', scopes: ['r'], handler: uri => ({ contents: [{ uri, text: '' }] }) }) }],
    ['resource template', () => { app.mcp.resourceTemplate({ uriTemplate: 'test://t/{id}', name: 't', scopes: ['t'], handler: uri => ({ contents: [{ uri, text: '' }] }) }) }]
  ]
  for (const [kind, define] of definitions) {
    t.throws(define, { code: 'FST_MCP_INVALID_DEFINITION', message: new RegExp(`^Invalid ${kind} .*auth option`) }, kind)
  }
  app.mcp.tool({ name: 'none', scopes: [], inputSchema: { type: 'object' }, handler: () => ({ content: [] }) })
  t.pass('an empty scopes list needs nothing')
})

t.test('scopes on a definition beside auth.principal (no auth.oauth) are accepted and enforced', async t => {
  const app = await buildApp(t, { auth: { principal: request => ({ id: 'alice', scopes: String(request.headers['x-scopes'] ?? '').split(',') }) } }, app => {
    app.mcp.tool({ name: 'w', scopes: ['files:write'], inputSchema: { type: 'object' }, handler: () => ({ content: [] }) })
  })
  const refused = await postLegacy(app, 'tools/call', { name: 'w', arguments: {} })
  t.equal(refused.statusCode, 403)
  t.equal(refused.headers['www-authenticate'], 'Bearer error="insufficient_scope", scope="files:write"', 'no resource_metadata without auth.oauth')
  t.equal((await postLegacy(app, 'tools/call', { name: 'w', arguments: {} }, { headers: { 'x-scopes': 'files:write' } })).statusCode, 200)
})

t.test('bad scopes in a definition: FST_MCP_INVALID_DEFINITION', async t => {
  const { app } = await scopedApp(t)
  const bad: unknown[] = [['files write'], ['say"hi'], ['back\\slash'], [''], [42], [null], 'files:write', { 0: 'files:write' }, ['offline_access']]
  for (const scopes of bad) {
    t.throws(() => { app.mcp.tool({ name: 'bad', scopes: scopes as string[], inputSchema: { type: 'object' }, handler: () => ({ content: [] }) }) },
      { code: 'FST_MCP_INVALID_DEFINITION', message: /^Invalid tool "bad": scopes/ }, `tool scopes ${JSON.stringify(scopes)}`)
    t.throws(() => { app.mcp.prompt({ name: 'bad', scopes: scopes as string[], handler: () => ({ messages: [] }) }) },
      { code: 'FST_MCP_INVALID_DEFINITION' }, `prompt scopes ${JSON.stringify(scopes)}`)
    t.throws(() => { app.mcp.resource({ uri: 'test://bad', name: 'bad', scopes: scopes as string[], handler: uri => ({ contents: [{ uri, text: '' }] }) }) },
      { code: 'FST_MCP_INVALID_DEFINITION' }, `resource scopes ${JSON.stringify(scopes)}`)
    t.throws(() => { app.mcp.resourceTemplate({ uriTemplate: 'test://bad/{id}', name: 'bad', scopes: scopes as string[], handler: uri => ({ contents: [{ uri, text: '' }] }) }) },
      { code: 'FST_MCP_INVALID_DEFINITION' }, `template scopes ${JSON.stringify(scopes)}`)
  }
  t.equal((await postLegacy(app, 'tools/list', {}, { headers: tokenFor('alice') })).payload.includes('"bad"'), false, 'nothing was registered')
})

/** A 2025-03-26 batch (no MCP-Protocol-Version header): the only era with batches. */
async function postBatch (app: FastifyInstance, items: unknown[], headers: Headers): Promise<LightMyRequestResponse> {
  return await post(app, items, headers)
}

const batchItem = (id: number, method: string, params: Record<string, unknown>): Record<string, unknown> => ({ jsonrpc: '2.0', id, method, params })

t.test('a batch with an item that lacks a scope: 403 for the whole batch, one challenge with every scope the batch needs, nothing run', async t => {
  const { app, ran } = await scopedApp(t, { requiredScopes: ['mcp'] })
  const batch = [
    batchItem(1, 'tools/call', { name: 'open', arguments: {} }),
    batchItem(2, 'tools/call', { name: 'write', arguments: {} }),
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    batchItem(3, 'resources/read', { uri: 'test://secret' }),
    batchItem(4, 'resources/read', { uri: 'test://docs/7' })
  ]
  const refused = await postBatch(app, batch, tokenFor('alice', 'mcp', 'docs:read'))
  t.equal(refused.statusCode, 403, '403, so the client can step up')
  t.equal(refused.headers['www-authenticate'], `Bearer error="insufficient_scope", scope="mcp files:write files:read docs:read", resource_metadata="${METADATA_URL}"`,
    'every scope the batch needs, the granted docs:read too (a token with only the challenged ones would fail the batch again)')
  const body = JSON.parse(refused.payload) as Record<string, unknown>
  t.notOk(Array.isArray(body), 'one JSON-RPC error, not an array')
  t.equal((body.error as { code?: unknown } | undefined)?.code, -32600)
  t.same(ran, [], 'no item ran, not even the one that needs no scope')

  const allowed = await postBatch(app, batch, tokenFor('alice', 'mcp', 'files:write', 'files:read', 'docs:read'))
  t.equal(allowed.statusCode, 200, 'with every scope: the batch runs')
  const answers = JSON.parse(allowed.payload) as Array<{ id: number, result?: unknown }>
  t.same(answers.map(answer => answer.id).sort(), [1, 2, 3, 4])
  t.ok(answers.every(answer => answer.result !== undefined), 'every item has a result')
  t.equal(ran.length, 4)
})

t.test('a batch whose items all have their scopes runs as before; one without a token (required: false) gets 401', async t => {
  const { app, ran } = await scopedApp(t, {}, { required: false })
  const open = await postBatch(app, [batchItem(1, 'tools/call', { name: 'open', arguments: {} }), batchItem(2, 'resources/read', { uri: 'test://public' })], {})
  t.equal(open.statusCode, 200)
  t.equal((JSON.parse(open.payload) as unknown[]).length, 2)
  t.same(ran.sort(), ['resource test://public', 'tool open'])
  ran.length = 0
  const scoped = await postBatch(app, [batchItem(1, 'tools/call', { name: 'open', arguments: {} }), batchItem(2, 'tools/call', { name: 'write', arguments: {} })], {})
  t.equal(scoped.statusCode, 401)
  t.equal(scoped.headers['www-authenticate'], `Bearer scope="files:write", resource_metadata="${METADATA_URL}"`)
  t.same(ran, [])
})

t.test('mcp_auth_failures_total{reason="scope"} counts each refusal: single requests in both eras and a batch', async t => {
  const { app } = await scopedApp(t, { requiredScopes: ['mcp'] }, { required: false })
  const reasons = async (): Promise<Record<string, number>> => {
    const exposition = (await app.inject({ method: 'GET', url: '/metrics' })).body
    const counts: Record<string, number> = {}
    for (const [, reason, value] of exposition.matchAll(/^mcp_auth_failures_total\{reason="([a-z]+)"\} (\d+)$/gm)) counts[reason!] = Number(value)
    return counts
  }
  for (const { method, params } of OPERATIONS) {
    await ERAS.legacy(app, method, params, tokenFor('alice', 'mcp'))
    await ERAS.modern(app, method, params, tokenFor('alice', 'mcp'))
  }
  t.same(await reasons(), { scope: 8 }, 'four operations refused in two eras')
  await ERAS.legacy(app, 'tools/call', { name: 'open', arguments: {} }, tokenFor('alice'))
  t.same(await reasons(), { scope: 9 }, 'the plugin-wide scope missing')
  await postBatch(app, [batchItem(1, 'tools/call', { name: 'write', arguments: {} }), batchItem(2, 'resources/read', { uri: 'test://secret' })], tokenFor('alice', 'mcp'))
  t.same(await reasons(), { scope: 10 }, 'a refused batch is one refusal')
  await ERAS.legacy(app, 'tools/call', { name: 'write', arguments: {} })
  t.same(await reasons(), { scope: 10, missing: 1 }, 'no token for a scoped tool is counted as missing')
  await ERAS.legacy(app, 'tools/call', { name: 'write', arguments: {} }, tokenFor('alice', 'mcp', 'files:write'))
  await ERAS.legacy(app, 'tools/call', { name: 'open', arguments: {} })
  t.same(await reasons(), { scope: 10, missing: 1 }, 'what is allowed counts nothing')
})

t.test('subscribing to a resource needs the scopes reading it needs: legacy resources/subscribe and a listen\'s resourceSubscriptions', async t => {
  const { app } = await scopedApp(t)
  const challenge = (scope: string): string => `Bearer error="insufficient_scope", scope="${scope}", resource_metadata="${METADATA_URL}"`
  assertRefused(t, await postLegacy(app, 'resources/subscribe', { uri: 'test://secret' }, { headers: tokenFor('alice') }), 403, challenge('files:read'), 'a legacy subscribe')
  assertRefused(t, await postLegacy(app, 'resources/subscribe', { uri: 'test://docs/7' }, { headers: tokenFor('alice', 'files:read') }), 403, challenge('docs:read'), 'a legacy subscribe under a template')
  t.same(json(await postLegacy(app, 'resources/subscribe', { uri: 'test://secret' }, { headers: tokenFor('alice', 'files:read') })).result, {}, 'with the scope')
  t.same(json(await postLegacy(app, 'resources/unsubscribe', { uri: 'test://public' }, { headers: tokenFor('alice') })).result, {}, 'a resource that declares none')
  const listen = await postModern(app, 'subscriptions/listen', { notifications: { toolsListChanged: true, resourceSubscriptions: ['test://public', 'test://secret', 'test://docs/1'] } }, { headers: tokenFor('alice') })
  assertRefused(t, listen, 403, challenge('files:read docs:read'), 'a listen naming resources it may not read: one challenge for every scope')
})
