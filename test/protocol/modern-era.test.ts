import t from 'tap'
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildApp, json, messages, post, postLegacy, postModern, SERVER_INFO } from '../helpers/inject.js'
import { META, MODERN, modernHeaders, modernMeta } from '../helpers/jsonrpc.js'
import { parseExposition } from '../helpers/metrics.js'
import { Probe, registerEcho } from '../helpers/tools.js'
import { waitFor } from '../helpers/wait.js'

function fixtures (app: FastifyInstance): void {
  registerEcho(app)
  app.mcp.tool({
    name: 'needs_sampling',
    requiredClientCapabilities: { sampling: {} },
    handler: () => ({ content: [{ type: 'text', text: 'sampled' }] })
  })
  app.mcp.tool({ name: 'era', handler: (_args, ctx) => ({ content: [{ type: 'text', text: `${ctx.era} ${ctx.protocolVersion}` }] }) })
  app.mcp.resource({ uri: 'test://static-text', name: 'Static', handler: uri => ({ contents: [{ uri, text: 'static' }] }) })
  app.mcp.prompt({ name: 'greet', handler: () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'hi' } }] }) })
}

t.test('server/discover', async t => {
  const app = await buildApp(t, { instructions: 'modern instructions' }, fixtures)
  const res = await postModern(app, 'server/discover')
  t.equal(res.statusCode, 200)
  t.notOk('mcp-session-id' in res.headers, 'no Mcp-Session-Id header')
  const body = json(res)
  t.equal(body.id, 1)
  const { result } = body
  t.same(result.supportedVersions, ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26'])
  t.type(result.capabilities, 'object')
  t.ok(result.capabilities.tools, 'tools capability')
  t.ok(result.capabilities.resources, 'resources capability')
  t.ok(result.capabilities.prompts, 'prompts capability')
  t.equal(result.resultType, 'complete')
  t.same(result._meta[META.serverInfo], SERVER_INFO)
  t.equal(result.instructions, 'modern instructions')
})

t.test('server/discover supportedVersions follows protocolVersions', async t => {
  const app = await buildApp(t, { protocolVersions: ['2026-07-28', '2025-11-25'] })
  t.same(json(await postModern(app, 'server/discover')).result.supportedVersions, ['2026-07-28', '2025-11-25'])
})

t.test('a request with the _meta claim is served in the modern era', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/call', { name: 'era' })
  t.equal(res.statusCode, 200)
  const { result } = json(res)
  t.equal(result.content[0].text, `modern ${MODERN}`)
  t.equal(result.resultType, 'complete')
  t.same(result._meta[META.serverInfo], SERVER_INFO)
})

t.test('a modern result is a copy: the handler\'s object is untouched, its own keys (even a parsed __proto__) all go out', async t => {
  const shared = { content: [{ type: 'text', text: 'shared' }], _meta: { 'acme/trace': 'abc' } }
  const parsed = JSON.parse('{"content":[{"type":"text","text":"parsed"}],"__proto__":{"polluted":true},"_meta":{"__proto__":{"deep":true}}}') as { content: [] }
  const app = await buildApp(t, {}, app => {
    app.mcp.tool({ name: 'shared', handler: () => shared })
    app.mcp.tool({ name: 'parsed', handler: () => parsed })
  })
  const modern = json(await postModern(app, 'tools/call', { name: 'shared' })).result
  t.same(modern._meta, { 'acme/trace': 'abc', [META.serverInfo]: SERVER_INFO }, 'the handler\'s _meta keys and the server info')
  t.same(shared, { content: [{ type: 'text', text: 'shared' }], _meta: { 'acme/trace': 'abc' } }, 'the object the handler returned is unchanged')
  t.same(json(await postLegacy(app, 'tools/call', { name: 'shared' })).result, shared, 'so a legacy answer of it carries nothing modern')

  const res = await postModern(app, 'tools/call', { name: 'parsed' })
  t.match(res.body, /"__proto__":\{"polluted":true\}/, 'an own __proto__ key goes out as data')
  t.match(res.body, /"_meta":\{"__proto__":\{"deep":true\}/, 'also inside _meta')
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'and no prototype was touched')
})

t.test('a _meta without clientInfo is served normally', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/list', {}, { meta: { [META.clientInfo]: undefined } })
  t.equal(res.statusCode, 200)
  t.ok(Array.isArray(json(res).result.tools))
})

for (const [method, key] of [['tools/list', 'tools'], ['resources/list', 'resources'], ['resources/templates/list', 'resourceTemplates'], ['prompts/list', 'prompts']] as const) {
  t.test(`${method} results carry ttlMs and cacheScope`, async t => {
    const app = await buildApp(t, { listTtlMs: 1234 }, fixtures)
    const res = await postModern(app, method)
    t.equal(res.statusCode, 200)
    const { result } = json(res)
    t.ok(Array.isArray(result[key]), key)
    t.equal(result.ttlMs, 1234)
    t.type(result.cacheScope, 'string')
    t.equal(result.resultType, 'complete')
  })
}

t.test('legacy list results carry no ttlMs/cacheScope/resultType', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await post(app, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'mcp-protocol-version': '2025-11-25' })
  const { result } = json(res)
  t.ok(Array.isArray(result.tools))
  t.notOk('ttlMs' in result)
  t.notOk('cacheScope' in result)
  t.notOk('resultType' in result)
})

t.test('MCP-Protocol-Version header different from _meta is 400 -32020', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/list', {}, { headers: { 'mcp-protocol-version': '2025-11-25' }, id: 5 })
  t.equal(res.statusCode, 400)
  t.equal(json(res).error?.code, -32020)
  t.equal(json(res).id, 5)
})

t.test('missing MCP-Protocol-Version header on a modern body is 400 -32020', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/list', {}, { headers: { 'mcp-protocol-version': undefined } })
  t.equal(res.statusCode, 400)
  t.equal(json(res).error?.code, -32020)
})

t.test('header/body mismatch is checked before version support', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/list', {}, {
    meta: { [META.protocolVersion]: 'v999.0.0' },
    headers: { 'mcp-protocol-version': MODERN }
  })
  t.equal(res.statusCode, 400)
  t.equal(json(res).error?.code, -32020)
})

t.test('an unsupported modern version is 400 -32022 with supported and requested', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/list', {}, {
    id: 'req-9',
    meta: { [META.protocolVersion]: 'v999.0.0' },
    headers: { 'mcp-protocol-version': 'v999.0.0' }
  })
  t.equal(res.statusCode, 400)
  const body = json(res)
  t.equal(body.id, 'req-9')
  t.equal(body.error?.code, -32022)
  t.equal(body.error?.data?.requested, 'v999.0.0')
  t.ok(Array.isArray(body.error?.data?.supported))
  t.ok(body.error?.data?.supported.includes(MODERN), 'supported lists 2026-07-28')
  const discover = json(await postModern(app, 'server/discover')).result.supportedVersions as string[]
  t.ok((body.error?.data?.supported as string[]).every(v => discover.includes(v)), 'supported ⊆ server/discover.supportedVersions')
})

t.test('2026-07-28 disabled by protocolVersions is 400 -32022', async t => {
  const app = await buildApp(t, { protocolVersions: ['2025-11-25'] })
  const res = await postModern(app, 'tools/list')
  t.equal(res.statusCode, 400)
  t.equal(json(res).error?.code, -32022)
})

t.test('a modern header without _meta is 400 -32602 echoing the id', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await post(app, { jsonrpc: '2.0', id: 42, method: 'tools/list', params: {} }, modernHeaders('tools/list'))
  t.equal(res.statusCode, 400)
  t.equal(json(res).error?.code, -32602)
  t.equal(json(res).id, 42)
  const noParams = await post(app, { jsonrpc: '2.0', id: 'x', method: 'tools/list' }, modernHeaders('tools/list'))
  t.equal(noParams.statusCode, 400)
  t.equal(json(noParams).error?.code, -32602)
  t.equal(json(noParams).id, 'x')
})

t.test('_meta without clientCapabilities is 400 -32602 echoing the id', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/list', {}, { id: 43, meta: { [META.clientCapabilities]: undefined } })
  t.equal(res.statusCode, 400)
  t.equal(json(res).error?.code, -32602)
  t.equal(json(res).id, 43)
})

t.test('a modern header with _meta lacking protocolVersion is 400 -32602', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/list', {}, { id: 45, meta: { [META.protocolVersion]: undefined } })
  t.equal(res.statusCode, 400)
  t.equal(json(res).error?.code, -32602)
  t.equal(json(res).id, 45)
})

t.test('_meta with non-object clientCapabilities is 400 -32602', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/list', {}, { id: 44, meta: { [META.clientCapabilities]: 'all' } })
  t.equal(res.statusCode, 400)
  t.equal(json(res).error?.code, -32602)
  t.equal(json(res).id, 44)
})

t.test('missing or mismatched Mcp-Method is 400 -32020', async t => {
  const app = await buildApp(t, {}, fixtures)
  for (const value of [undefined, 'tools/call', 'TOOLS/LIST', '']) {
    const res = await postModern(app, 'tools/list', {}, { headers: { 'mcp-method': value } })
    t.equal(res.statusCode, 400, `Mcp-Method ${String(value)}`)
    t.equal(json(res).error?.code, -32020)
  }
})

t.test('header names are matched case-insensitively', async t => {
  const app = await buildApp(t, {}, fixtures)
  const body = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: modernMeta() } }
  const res = await post(app, body, { 'MCP-PROTOCOL-VERSION': MODERN, 'MCP-METHOD': 'tools/list' })
  t.equal(res.statusCode, 200)
})

t.test('missing or mismatched Mcp-Name is 400 -32020', async t => {
  const app = await buildApp(t, {}, fixtures)
  const cases: Array<[string, Record<string, unknown>, string | undefined]> = [
    ['tools/call', { name: 'echo', arguments: { text: 'a' } }, undefined],
    ['tools/call', { name: 'echo', arguments: { text: 'a' } }, 'Echo'],
    ['prompts/get', { name: 'greet' }, undefined],
    ['prompts/get', { name: 'greet' }, 'other'],
    ['resources/read', { uri: 'test://static-text' }, undefined],
    ['resources/read', { uri: 'test://static-text' }, 'test://other']
  ]
  for (const [method, params, name] of cases) {
    const res = await postModern(app, method, params, { headers: { 'mcp-name': name } })
    t.equal(res.statusCode, 400, `${method} Mcp-Name ${String(name)}`)
    t.equal(json(res).error?.code, -32020)
  }
})

t.test('Mcp-Name equal to params.name / params.uri is accepted', async t => {
  const app = await buildApp(t, {}, fixtures)
  t.equal((await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'a' } })).statusCode, 200)
  t.equal((await postModern(app, 'prompts/get', { name: 'greet' })).statusCode, 200)
  const read = await postModern(app, 'resources/read', { uri: 'test://static-text' })
  t.equal(read.statusCode, 200)
  t.equal(json(read).result.contents[0].text, 'static')
})

t.test('a =?base64?…?= Mcp-Name is decoded before comparison', async t => {
  const app = await buildApp(t, {}, fixtures)
  const encoded = `=?base64?${Buffer.from('echo').toString('base64')}?=`
  const res = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'b64' } }, { headers: { 'mcp-name': encoded } })
  t.equal(res.statusCode, 200)
  t.equal(json(res).result.content[0].text, 'b64')
  const wrong = `=?base64?${Buffer.from('nope').toString('base64')}?=`
  const bad = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'b64' } }, { headers: { 'mcp-name': wrong } })
  t.equal(bad.statusCode, 400)
  t.equal(json(bad).error?.code, -32020)
  const malformed = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'b64' } }, { headers: { 'mcp-name': '=?base64?***?=' } })
  t.equal(malformed.statusCode, 400)
  t.equal(json(malformed).error?.code, -32020)
})

t.test('an unknown method is 404 -32601', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/frobnicate', {}, { id: 'u1' })
  t.equal(res.statusCode, 404)
  t.equal(json(res).error?.code, -32601)
  t.equal(json(res).id, 'u1')
})

for (const method of ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe']) {
  t.test(`legacy-only ${method} is 404 -32601 in the modern era`, async t => {
    const app = await buildApp(t, {}, fixtures)
    const params: Record<string, unknown> = method === 'initialize'
      ? { protocolVersion: MODERN, capabilities: {}, clientInfo: { name: 'c', version: '1' } }
      : method === 'logging/setLevel' ? { level: 'info' } : method.startsWith('resources/') ? { uri: 'test://static-text' } : {}
    const res = await postModern(app, method, params)
    t.equal(res.statusCode, 404)
    t.equal(json(res).error?.code, -32601)
  })
}

t.test('a tool needing an undeclared client capability is 400 -32021', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/call', { name: 'needs_sampling' }, { id: 3 })
  t.equal(res.statusCode, 400)
  const body = json(res)
  t.equal(body.id, 3)
  t.equal(body.error?.code, -32021)
  t.same(body.error?.data?.requiredCapabilities, { sampling: {} })
})

t.test('a tool needing a declared client capability runs', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/call', { name: 'needs_sampling' }, { meta: { [META.clientCapabilities]: { sampling: {} } } })
  t.equal(res.statusCode, 200)
  t.equal(json(res).result.content[0].text, 'sampled')
})

t.test('notifications/cancelled with modern _meta is 202', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await post(app, {
    jsonrpc: '2.0',
    method: 'notifications/cancelled',
    params: { requestId: 1, reason: 'bye', _meta: modernMeta() }
  }, modernHeaders('notifications/cancelled'))
  t.equal(res.statusCode, 202)
  t.equal(res.payload, '')
})

/** The cancellation scope of an anonymous inject client. */
const SCOPE = 'ip:127.0.0.1'

/** A bare `notifications/cancelled` as a stdio→HTTP bridge sends it, with `_meta` and `Mcp-Method` only when asked for. */
async function modernCancel (app: FastifyInstance, requestId: unknown, { meta = false, mcpMethod = false } = {}): Promise<LightMyRequestResponse> {
  const params: Record<string, unknown> = { requestId, reason: 'x' }
  if (meta) params._meta = modernMeta()
  return await post(app, { jsonrpc: '2.0', method: 'notifications/cancelled', params },
    { 'mcp-protocol-version': MODERN, 'mcp-method': mcpMethod ? 'notifications/cancelled' : undefined })
}

/** `mcp_cancellations_total` as `{ 'result=…,source=…': value }`. */
async function cancellationCounts (app: FastifyInstance): Promise<Record<string, number>> {
  return parseExposition((await app.inject({ method: 'GET', url: '/metrics' })).payload).series('mcp_cancellations_total')
}

t.test('a modern-header notifications/cancelled is 202 and ignored, with or without _meta and Mcp-Method', async t => {
  const probe = new Probe()
  const app = await buildApp(t, {}, app => { fixtures(app); probe.register(app) })
  const events: unknown[] = []
  const onCancelled = (event: unknown): void => { events.push(event) }
  subscribe('mcp:request:cancelled', onCancelled)
  t.teardown(() => { unsubscribe('mcp:request:cancelled', onCancelled) })

  for (const meta of [false, true]) {
    for (const mcpMethod of [false, true]) {
      const tag = `${meta ? 'with' : 'without'} _meta, ${mcpMethod ? 'with' : 'without'} Mcp-Method`
      const call = postModern(app, 'tools/call', { name: 'probe', arguments: { ms: 200, tag } }, { id: 1 })
      t.ok(await waitFor(() => app.mcpCancellation.inFlight(1, SCOPE)), `${tag}: request 1 is in flight`)
      const res = await modernCancel(app, 1, { meta, mcpMethod })
      t.equal(res.statusCode, 202, `${tag}: 202`)
      t.equal(res.payload, '', `${tag}: empty body`)
      t.notOk(app.mcpCancellation.cancelled(1, SCOPE), `${tag}: no cancellation recorded`)
      t.equal(app.mcpCancellation.rows, 0, `${tag}: the table holds no cancellation row`)
      const done = await call
      t.equal(done.statusCode, 200, `${tag}: the running call is answered`)
      t.same(messages(done).at(-1)?.result?.content, [{ type: 'text', text: 'probe 200' }], `${tag}: with its normal result`)
      t.equal(probe.tagged(tag)[0]?.abortedAt, undefined, `${tag}: its signal never aborted`)
    }
  }
  t.strictSame(events, [], 'no mcp:request:cancelled event')
  const counts = await cancellationCounts(app)
  t.strictSame(Object.keys(counts).filter(key => /source=client/.test(key)), [], 'mcp_cancellations_total counted no client cancellation')
  t.strictSame(counts, {}, 'nor anything else')

  // Control: the same notification under a legacy header cancels a running call, and is counted.
  const legacy = postLegacy(app, 'tools/call', { name: 'probe', arguments: { ms: 5000, tag: 'legacy' } }, { id: 1 })
  t.ok(await waitFor(() => app.mcpCancellation.inFlight(1, SCOPE)), 'control: the legacy call is in flight')
  const cancel = await post(app, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, reason: 'x' } },
    { 'mcp-protocol-version': '2025-11-25' })
  t.equal(cancel.statusCode, 202)
  t.equal((await legacy).statusCode, 202, 'control: the legacy call is cancelled (a bare 202, no result)')
  t.equal(probe.tagged('legacy')[0]?.source, 'client', 'control: its signal aborted, source client')
  t.equal((await cancellationCounts(app))['result=recorded,source=client'], 1, 'control: and it is counted')
})

t.test('a modern-header notifications/cancelled is not validated: it is ignored whatever it carries', async t => {
  const app = await buildApp(t, {}, fixtures)
  const bodies: Array<[string, Record<string, unknown>, Record<string, string | undefined>]> = [
    ['no params', { jsonrpc: '2.0', method: 'notifications/cancelled' }, {}],
    ['an object requestId', { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: {} } }, {}],
    ['_meta without clientCapabilities', { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1, _meta: { [META.protocolVersion]: MODERN } } }, {}],
    ['a different Mcp-Method', { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }, { 'mcp-method': 'tools/call' }]
  ]
  for (const [label, body, headers] of bodies) {
    const res = await post(app, body, { 'mcp-protocol-version': MODERN, ...headers })
    t.equal(res.statusCode, 202, `${label}: 202`)
    t.equal(res.payload, '', `${label}: empty body`)
  }
  t.strictSame(await cancellationCounts(app), {}, 'mcp_cancellations_total counted none of them')
})

t.test('other modern notifications keep their validation', async t => {
  const app = await buildApp(t, {}, fixtures)
  const noMeta = await post(app, { jsonrpc: '2.0', method: 'notifications/initialized' }, modernHeaders('notifications/initialized'))
  t.equal(noMeta.statusCode, 400, 'notifications/initialized without _meta: 400')
  t.equal(json(noMeta).error?.code, -32602)
  const noMethod = await post(app, { jsonrpc: '2.0', method: 'notifications/initialized', params: { _meta: modernMeta() } },
    { 'mcp-protocol-version': MODERN })
  t.equal(noMethod.statusCode, 400, 'notifications/initialized without Mcp-Method: 400')
  t.equal(json(noMethod).error?.code, -32020)
  const valid = await post(app, { jsonrpc: '2.0', method: 'notifications/initialized', params: { _meta: modernMeta() } },
    modernHeaders('notifications/initialized'))
  t.equal(valid.statusCode, 202, 'control: a valid one is 202')
})

t.test('a legacy notifications/cancelled is still validated', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await post(app, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: {} } }, { 'mcp-protocol-version': '2025-11-25' })
  t.equal(res.statusCode, 400)
  t.equal(json(res).error?.code, -32602)
  t.strictSame(await cancellationCounts(app), { 'result=invalid,source=client': 1 }, 'and counted as invalid')
})

t.test('Mcp-Session-Id on a modern request is ignored and never echoed', async t => {
  const app = await buildApp(t, {}, fixtures)
  const res = await postModern(app, 'tools/list', {}, { headers: { 'mcp-session-id': 'made-up' } })
  t.equal(res.statusCode, 200)
  t.notOk('mcp-session-id' in res.headers)
})
