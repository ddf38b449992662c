/**
 * What the server says about server-to-client notifications, through `inject` (streams that stay open
 * are in test/e2e/listen.test.ts and test/e2e/session-streams.test.ts): capabilities advertise
 * `listChanged` and `subscribe` exactly where they are delivered, definitions can be removed with their
 * handle at any time, `notify` refuses what is not a URI or a task id, the `events` option is checked,
 * and a listen refused before its stream opens is answered with its status.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, json, post, postLegacy, postModern, registerPlugin } from '../helpers/inject.js'
import { initializeBody, LEGACY } from '../helpers/jsonrpc.js'

const SESSIONS = { secret: 'a-session-secret-of-at-least-32-bytes!' }
const text = (value: string): { content: Array<{ type: 'text', text: string }> } => ({ content: [{ type: 'text', text: value }] })

function registerOneOfEach (app: FastifyInstance): void {
  app.mcp.tool({ name: 'one', handler: () => text('one') })
  app.mcp.prompt({ name: 'greeting', handler: () => ({ messages: [] }) })
  app.mcp.resource({ uri: 'file:///notes', name: 'notes', handler: uri => ({ contents: [{ uri, text: 'n' }] }) })
}

async function legacyCapabilities (app: FastifyInstance): Promise<Record<string, unknown>> {
  const response = await post(app, initializeBody())
  return (json(response).result as { capabilities: Record<string, unknown> }).capabilities
}

async function modernCapabilities (app: FastifyInstance): Promise<Record<string, unknown>> {
  const response = await postModern(app, 'server/discover')
  return (json(response).result as { capabilities: Record<string, unknown> }).capabilities
}

t.test('capabilities advertise listChanged and subscribe exactly where notifications are delivered', async t => {
  t.test('events on (the default), with sessions: both eras', async t => {
    const app = await buildApp(t, { sessions: SESSIONS }, registerOneOfEach)
    for (const capabilities of [await legacyCapabilities(app), await modernCapabilities(app)]) {
      t.same(capabilities.tools, { listChanged: true })
      t.same(capabilities.prompts, { listChanged: true })
      t.same(capabilities.resources, { subscribe: true, listChanged: true })
    }
  })
  t.test('without sessions the legacy era has no stream: it claims neither', async t => {
    const app = await buildApp(t, {}, registerOneOfEach)
    const legacy = await legacyCapabilities(app)
    t.same([legacy.tools, legacy.prompts, legacy.resources], [{}, {}, {}])
    const modern = await modernCapabilities(app)
    t.same(modern.tools, { listChanged: true }, 'the modern era listens without sessions')
    t.same(modern.resources, { subscribe: true, listChanged: true })
  })
  t.test('events: false claims nothing, and subscriptions/listen is an unknown method', async t => {
    const app = await buildApp(t, { events: false, sessions: SESSIONS }, registerOneOfEach)
    const modern = await modernCapabilities(app)
    t.same([modern.tools, modern.prompts, modern.resources], [{}, {}, {}])
    const legacy = await legacyCapabilities(app)
    t.same([legacy.tools, legacy.resources], [{}, {}])
    const listen = await postModern(app, 'subscriptions/listen', { notifications: { toolsListChanged: true } })
    t.equal(listen.statusCode, 404)
    t.equal(json(listen).error?.code, -32601)
  })
  t.test('a kind nothing is registered of is not advertised', async t => {
    const app = await buildApp(t, {}, app => { app.mcp.tool({ name: 'only', handler: () => text('only') }) })
    const modern = await modernCapabilities(app)
    t.same(modern.tools, { listChanged: true })
    t.notOk('prompts' in modern || 'resources' in modern)
  })
})

t.test('a definition registered after ready is served, and its handle removes it once', async t => {
  const app = await buildApp(t)
  const handle = app.mcp.tool({ name: 'late', handler: () => text('late') })
  const call = await postModern(app, 'tools/call', { name: 'late', arguments: {} })
  t.same((json(call).result as { content: unknown }).content, text('late').content)
  t.equal(handle.remove(), true, 'removed')
  t.equal(handle.remove(), false, 'a second remove does nothing')
  const gone = await postModern(app, 'tools/call', { name: 'late', arguments: {} })
  t.equal(json(gone).error?.code, -32602, 'the removed tool is unknown')
  const again = app.mcp.tool({ name: 'late', handler: () => text('again') })
  t.equal(handle.remove(), false, 'the old handle never removes the new definition')
  const served = await postModern(app, 'tools/call', { name: 'late', arguments: {} })
  t.same((json(served).result as { content: unknown }).content, text('again').content)
  t.equal(again.remove(), true)

  const prompt = app.mcp.prompt({ name: 'p', handler: () => ({ messages: [] }) })
  const resource = app.mcp.resource({ uri: 'file:///r', name: 'r', handler: uri => ({ contents: [{ uri, text: 'r' }] }) })
  const template = app.mcp.resourceTemplate({ uriTemplate: 'file:///t/{name}', name: 't', handler: uri => ({ contents: [{ uri, text: 't' }] }) })
  t.same([prompt.remove(), resource.remove(), template.remove()], [true, true, true])
  const lists = await Promise.all(['prompts/list', 'resources/list', 'resources/templates/list'].map(async method => json(await postModern(app, method)).result))
  t.same(lists.map(result => Object.values(result as Record<string, unknown>)[0]), [[], [], []], 'each list is empty again')
})

t.test('notify refuses what is not a URI or a task id, naming the bound', async t => {
  const app = await buildApp(t, { events: { maxUriBytes: 16 } })
  t.throws(() => { app.mcp.notify.resourceUpdated('file:///far-too-long-for-sixteen') }, { name: 'TypeError', message: /1 to 16 bytes/ })
  t.throws(() => { app.mcp.notify.resourceUpdated('') }, TypeError)
  t.throws(() => { app.mcp.notify.resourceUpdated(42 as unknown as string) }, TypeError)
  t.throws(() => { app.mcp.notify.taskChanged({} as unknown as string) }, TypeError)
  t.doesNotThrow(() => {
    app.mcp.notify.toolsChanged()
    app.mcp.notify.promptsChanged()
    app.mcp.notify.resourcesChanged()
    app.mcp.notify.resourceUpdated('file:///short')
    app.mcp.notify.taskChanged('no-such-task')
  }, 'with nobody listening, a change is announced to nobody')
})

t.test('the events option is checked at register time', async t => {
  for (const events of ['yes', 1, null, { maxListeners: 0 }, { maxListenersPerScope: 1.5 }, { coalesceMs: -1 }, { maxUriBytes: 'big' }]) {
    await t.rejects(registerPlugin(t, { events }), { code: 'FST_MCP_INVALID_OPTION', message: /events/ }, JSON.stringify(events))
  }
})

t.test('a listen refused before its stream opens is answered with its status', async t => {
  const app = await buildApp(t, {}, registerOneOfEach)
  const cases: Array<[string, Record<string, unknown>, number, number]> = [
    ['no notifications', {}, 200, -32602],
    ['notifications not an object', { notifications: ['toolsListChanged'] }, 200, -32602],
    ['a flag of the wrong type', { notifications: { toolsListChanged: 'yes' } }, 200, -32602],
    ['URIs not strings', { notifications: { resourceSubscriptions: [1] } }, 200, -32602],
    ['more URIs than a listen may name', { notifications: { resourceSubscriptions: Array.from({ length: 101 }, (_, i) => `file:///${i}`) } }, 200, -32602],
    ['an empty URI', { notifications: { resourceSubscriptions: [''] } }, 200, -32602],
    ['a URI over maxUriBytes', { notifications: { resourceSubscriptions: [`file:///${'x'.repeat(4096)}`] } }, 200, -32602],
    ['taskIds without the tasks extension', { notifications: { taskIds: ['t'] } }, 400, -32021]
  ]
  for (const [name, params, status, code] of cases) {
    const response = await postModern(app, 'subscriptions/listen', params, { id: 'listen-1' })
    t.equal(response.statusCode, status, `${name}: HTTP ${status}`)
    t.equal(json(response).error?.code, code, `${name}: ${code}`)
    t.equal(json(response).id, 'listen-1', `${name}: the error carries the listen id`)
  }
  const jsonOnly = await postModern(app, 'subscriptions/listen', { notifications: { toolsListChanged: true } }, { headers: { accept: 'application/json' } })
  t.equal(jsonOnly.statusCode, 406, 'a client that accepts no event stream cannot listen')
  for (const method of ['resources/subscribe', 'resources/unsubscribe']) {
    const removed = await postModern(app, method, { uri: 'file:///notes' })
    t.equal(removed.statusCode, 404, `${method} does not exist in 2026-07-28`)
    t.equal(json(removed).error?.code, -32601)
  }
})

t.test('legacy resources/subscribe: checked, kept per session, bounded per session', async t => {
  const app = await buildApp(t, { sessions: SESSIONS, events: { maxSubscriptionsPerSession: 2 } }, registerOneOfEach)
  const session = String((await post(app, initializeBody())).headers['mcp-session-id'])
  const subscribe = async (uri: unknown, headers: Record<string, string> = { 'mcp-session-id': session }): Promise<ReturnType<typeof json>> =>
    json(await postLegacy(app, 'resources/subscribe', { uri }, { headers: { ...LEGACY, ...headers } }))
  for (const uri of [42, '', `file:///${'x'.repeat(4096)}`]) t.equal((await subscribe(uri)).error?.code, -32602, `uri ${String(uri).slice(0, 12)}…: -32602`)
  t.same((await subscribe('file:///a')).result, {})
  t.same((await subscribe('file:///a')).result, {}, 'a subscription held already takes no room')
  t.same((await subscribe('file:///b')).result, {})
  const full = await subscribe('file:///c')
  t.equal(full.error?.code, -32603)
  t.match(full.error?.message, /maxSubscriptionsPerSession/)
  t.same((await subscribe('file:///c', {})).result, {}, 'without a session nothing is kept, and the subscribe is acknowledged')
  const unsubscribed = json(await postLegacy(app, 'resources/unsubscribe', { uri: 'file:///a' }, { headers: { ...LEGACY, 'mcp-session-id': session } }))
  t.same(unsubscribed.result, {})
  t.same((await subscribe('file:///c')).result, {}, 'an unsubscribe frees room')
})

t.test('GET: 405 without sessions or for a 2026-07-28 client; its refusals with sessions', async t => {
  const plain = await buildApp(t)
  const noSessions = await plain.inject({ method: 'GET', url: '/mcp', headers: { accept: 'text/event-stream' } })
  t.equal(noSessions.statusCode, 405)
  t.equal(noSessions.headers.allow, 'POST')
  const app = await buildApp(t, { sessions: SESSIONS })
  const get = async (headers: Record<string, string>): Promise<{ statusCode: number, code: number | undefined }> => {
    const response = await app.inject({ method: 'GET', url: '/mcp', headers: { accept: 'text/event-stream', ...LEGACY, ...headers } })
    return { statusCode: response.statusCode, code: JSON.parse(response.payload).error?.code }
  }
  t.same(await get({ 'mcp-protocol-version': '2026-07-28' }), { statusCode: 405, code: -32600 })
  t.same(await get({}), { statusCode: 400, code: -32600 }, 'no session')
  t.same(await get({ 'mcp-session-id': 'forged' }), { statusCode: 404, code: -32001 }, 'a forged session')
  const session = String((await post(app, initializeBody())).headers['mcp-session-id'])
  t.same(await get({ 'mcp-session-id': session, accept: 'application/json' }), { statusCode: 406, code: -32600 }, 'no event stream accepted')
  t.same(await get({ 'mcp-session-id': session, 'mcp-protocol-version': '1999-01-01' }), { statusCode: 400, code: -32600 }, 'an unsupported version')
})

t.test('events over the per-second budget are dropped and counted in mcp_events_dropped_total', async t => {
  const app = await buildApp(t, { events: { maxEventsPerSecond: 2 } })
  for (let i = 0; i < 10; i++) app.mcp.notify.resourceUpdated(`file:///${i}`)
  const metrics = await app.inject({ method: 'GET', url: '/metrics' })
  const dropped = /^mcp_events_dropped_total (\d+)$/m.exec(metrics.payload)
  t.ok(Number(dropped?.[1]) >= 1, `dropped and counted: ${String(dropped?.[0])}`)
})
