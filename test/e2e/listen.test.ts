/**
 * 2026-07-28 `subscriptions/listen` end to end, on real sockets: the official
 * `@modelcontextprotocol/client` 2.x (pinned to 2026-07-28) listens to the demo and hears of tools
 * added and removed and of resources touched, only what it asked for; the stream ends gracefully at
 * shutdown and at `maxStreamLifetimeMs`, and locally with `close()`; task status reaches only the
 * task's own scope; the bounds answer 429 with Retry-After; bad filters are precise 4xx or -32602; a
 * listener that stops reading is cut off. Raw HTTP shows what the client hides: the subscription id on
 * every message, verbatim, and the completion result.
 */
import net from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { Client, StreamableHTTPClientTransport, type SubscriptionFilter } from '@modelcontextprotocol/client'
import type { FastifyRequest } from 'fastify'
import { TOUCHES_URI } from '../../example/demo-tools.js'
import { EventStream } from '../helpers/event-stream.js'
import { DEFAULT_HEADERS, hasStackTrace, jsonRpcResponseViolation, META, MODERN, modernHeaders, modernMeta, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenDemo, listenPlugin } from '../helpers/listen.js'
import { attempt, describeError, texts } from '../helpers/mcp-results.js'
import { metricValue } from '../helpers/metrics.js'
import { lastExchange } from '../helpers/recorders.js'
import { fetchSender, Gate, TaskClient, TASKS_EXTENSION } from '../helpers/tasks.js'
import type { Teardown } from '../helpers/teardown.js'
import { registerEcho } from '../helpers/tools.js'
import { waitFor, within } from '../helpers/wait.js'

const ACK = 'notifications/subscriptions/acknowledged'
const TOOLS_CHANGED = 'notifications/tools/list_changed'
const PROMPTS_CHANGED = 'notifications/prompts/list_changed'
const UPDATED = 'notifications/resources/updated'
const TASK_STATUS = 'notifications/tasks'
const PLUGIN_SERVER = { name: 'listening-plugin', version: '1.0.0' }
/** Long enough for anything a test waits for on an idle machine shared with other test files. */
const PATIENCE_MS = 5000

type Filter = Record<string, unknown>
type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

/** A `subscriptions/listen` body with the 2026-07-28 `_meta` (`notifications` left out when undefined). */
function listenBody (id: string | number, notifications: unknown, capabilities: Record<string, unknown> = {}): Record<string, unknown> {
  return { jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { _meta: modernMeta({ [META.clientCapabilities]: capabilities }), notifications } }
}

/** The headers of a modern POST of `method`. */
function headersOf (method: string, extra: Record<string, string> = {}): Record<string, string> {
  const headers: Record<string, string> = { ...DEFAULT_HEADERS }
  for (const [key, value] of Object.entries(modernHeaders(method))) if (value !== undefined) headers[key] = value
  return { ...headers, ...extra }
}

interface ListenOptions {
  capabilities?: Record<string, unknown>
  headers?: Record<string, string>
}

/** A raw listen on a connection of its own, closed at the end of the test. */
function rawListen (t: Teardown, url: URL, id: string | number, filter: Filter, options: ListenOptions = {}): EventStream {
  const stream = EventStream.post(url, listenBody(id, filter, options.capabilities), headersOf('subscriptions/listen', options.headers))
  t.teardown(() => { stream.close() })
  return stream
}

interface Answer {
  status: number
  headers: Headers
  text: string
  body: JsonRpcMessage | undefined
}

/** One POST through fetch, whole (for answers that are not streams: a hang becomes an abort). */
async function postOnce (url: URL, body: unknown, headers: Record<string, string>): Promise<Answer> {
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(PATIENCE_MS) })
  const text = await response.text()
  let parsed: JsonRpcMessage | undefined
  try {
    parsed = JSON.parse(text) as JsonRpcMessage
  } catch {}
  return { status: response.status, headers: response.headers, text, body: parsed }
}

/** The number of modern listeners `/metrics` reports (0 before the first). */
async function modernListeners (url: URL): Promise<number> {
  return await metricValue(url, 'mcp_listeners', { era: 'modern' }) ?? 0
}

/** The 2.x client pinned to 2026-07-28, connected (server/discover), closed at the end of the test. */
async function connectClient (t: Teardown, url: URL, options: { headers?: Record<string, string>, tasks?: boolean } = {}): Promise<Client> {
  const client = new Client({ name: 'listen-e2e', version: '2.0.0' }, {
    versionNegotiation: { mode: { pin: MODERN } },
    ...(options.tasks === true ? { capabilities: { extensions: { [TASKS_EXTENSION]: {} } } } : {})
  })
  t.teardown(() => client.close())
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: options.headers ?? {} } }))
  return client
}

/** What a client's notification handlers received. */
interface Inbox {
  toolsChanged: number
  promptsChanged: number
  updated: string[]
  tasks: Array<Record<string, unknown>>
}

/** Registers handlers as an application would (setNotificationHandler), and a fallback for the tasks extension's notification. */
function inboxOf (client: Client): Inbox {
  const inbox: Inbox = { toolsChanged: 0, promptsChanged: 0, updated: [], tasks: [] }
  client.setNotificationHandler(TOOLS_CHANGED, () => { inbox.toolsChanged++ })
  client.setNotificationHandler(PROMPTS_CHANGED, () => { inbox.promptsChanged++ })
  client.setNotificationHandler(UPDATED, notification => { inbox.updated.push(notification.params.uri) })
  client.fallbackNotificationHandler = async notification => {
    if (notification.method === TASK_STATUS) inbox.tasks.push(notification.params as Record<string, unknown>)
  }
  return inbox
}

/** The principal named by `x-user`. */
const principal = (request: FastifyRequest): unknown => request.headers['x-user']
const as = (user: string): Record<string, string> => ({ 'x-user': user })

t.test('the 2.x client listens to the demo: list changes and resource updates it asked for, nothing else', async t => {
  const demo = await listenDemo(t, { MCP_CONFORMANCE: '1' })
  const client = await connectClient(t, demo.url)
  const inbox = inboxOf(client)
  const filter = { toolsListChanged: true, resourceSubscriptions: [TOUCHES_URI] }
  const opened = await attempt(client.listen(filter))
  t.notOk(opened.error, `listen() resolves (${describeError(opened.error)})`)
  const subscription = opened.value
  if (subscription === undefined) return
  t.same(subscription.honoredFilter, filter, 'honoredFilter is what was asked')
  // Another listener, for prompts only: it shows that the prompts change below was announced at all.
  const promptsListener = rawListen(t, demo.url, 'prompts-only', { promptsListChanged: true })
  t.ok(await promptsListener.received(ACK), 'a raw listener for prompts is acknowledged')

  await t.test('a tool added at runtime: list_changed, and re-listing shows it', async t => {
    t.notOk((await client.listTools()).tools.some(tool => tool.name === 'added_at_runtime'), 'not listed yet')
    const handle = demo.app.mcp.tool({ name: 'added_at_runtime', handler: () => ({ content: [{ type: 'text', text: 'hi' }] }) })
    t.ok(await waitFor(() => inbox.toolsChanged === 1, PATIENCE_MS), `notifications/tools/list_changed arrived (${inbox.toolsChanged})`)
    t.ok((await client.listTools()).tools.some(tool => tool.name === 'added_at_runtime'), 'tools/list now lists it')

    t.equal(handle.remove(), true, 'remove() removes it')
    t.ok(await waitFor(() => inbox.toolsChanged === 2, PATIENCE_MS), `another list_changed arrived on removal (${inbox.toolsChanged})`)
    t.notOk((await client.listTools()).tools.some(tool => tool.name === 'added_at_runtime'), 'tools/list no longer lists it')
    t.equal(handle.remove(), false, 'removing again removes nothing')
  })

  await t.test('touch_resource: updates for the URI and its sub-resources, not for a sibling sharing its prefix', async t => {
    for (const uri of [TOUCHES_URI, `${TOUCHES_URI}/x`, `${TOUCHES_URI}X`, `${TOUCHES_URI}/fence`]) {
      const touched = await client.callTool({ name: 'touch_resource', arguments: { uri } })
      t.same(texts(touched.content), [`touched ${uri}`], `touch_resource ${uri}`)
    }
    // Updates arrive in order on the one stream: once the last is in, anything for demo://touchesX would be too.
    t.ok(await waitFor(() => inbox.updated.includes(`${TOUCHES_URI}/fence`), PATIENCE_MS), 'the last update arrived')
    t.same(inbox.updated, [TOUCHES_URI, `${TOUCHES_URI}/x`, `${TOUCHES_URI}/fence`], 'the URI and its sub-resources, never demo://touchesX')
  })

  await t.test('promptsChanged() does not reach a listener that did not ask for prompts', async t => {
    demo.app.mcp.notify.promptsChanged()
    t.ok(await promptsListener.received(PROMPTS_CHANGED), 'the prompts listener got it')
    demo.app.mcp.notify.toolsChanged()
    t.ok(await waitFor(() => inbox.toolsChanged === 3, PATIENCE_MS), 'a later tools change reached the client')
    t.equal(inbox.promptsChanged, 0, 'and no prompts list_changed did, before it or since')
  })
})

t.test('server shutdown ends the subscription gracefully; the last message is the completion result', async t => {
  const server = await listenPlugin(t)
  const client = await connectClient(t, server.url)
  const subscription = await client.listen({ toolsListChanged: true })
  const raw = rawListen(t, server.url, 'shutdown-1', { toolsListChanged: true })
  t.ok(await raw.received(ACK), 'the raw listener is acknowledged')
  await server.app.close()
  t.equal(await within(subscription.closed, PATIENCE_MS, 'still open'), 'graceful', 'closed resolves graceful')
  t.same(await within(raw.ended, PATIENCE_MS, 'still open'), { complete: true }, 'the server finished the raw response')
  assertCompletion(t, raw, 'shutdown-1')
})

/** The stream's last message is `{ id, result: { resultType: 'complete', _meta: { subscriptionId: id, serverInfo } } }`. */
function assertCompletion (t: Tap, stream: EventStream, id: string | number): void {
  const last = stream.messages().at(-1)
  t.same(last, {
    jsonrpc: '2.0',
    id,
    result: { resultType: 'complete', _meta: { [META.subscriptionId]: id, [META.serverInfo]: PLUGIN_SERVER } }
  }, 'the last message is the completion result, tagged with the subscription id')
}

t.test('maxStreamLifetimeMs ends a listen with the completion result', async t => {
  const server = await listenPlugin(t, { maxStreamLifetimeMs: 300 })
  const client = await connectClient(t, server.url)
  const subscription = await client.listen({ toolsListChanged: true })
  const raw = rawListen(t, server.url, 3, { toolsListChanged: true })
  t.ok(await raw.received(ACK), 'the raw listener is acknowledged')
  t.equal(await within(subscription.closed, PATIENCE_MS, 'still open'), 'graceful', 'the client\'s subscription ends graceful')
  t.same(await within(raw.ended, PATIENCE_MS, 'still open'), { complete: true }, 'the raw response is finished')
  assertCompletion(t, raw, 3)
  t.ok(await waitFor(async () => await modernListeners(server.url) === 0, PATIENCE_MS), 'mcp_listeners{era="modern"} is back to 0')
  const again = await attempt(client.listen({ toolsListChanged: true }))
  t.notOk(again.error, `the client can listen again (${describeError(again.error)})`)
})

t.test('on the wire: an event stream whose every message carries the listen id verbatim', async t => {
  const watched = 'file:///watched'
  const server = await listenPlugin(t, { keepAliveMs: 50 }, {}, app => {
    app.mcp.resource({ uri: watched, name: 'watched', handler: uri => ({ contents: [{ uri, text: 'w' }] }) })
  })
  const filter = { toolsListChanged: true, resourceSubscriptions: [watched] }
  for (const id of [42, 'listen-as-a-string']) {
    await t.test(`id ${JSON.stringify(id)} (${typeof id})`, async t => {
      const stream = rawListen(t, server.url, id, filter)
      const head = await within(stream.head, PATIENCE_MS, undefined)
      t.equal(head?.status, 200, 'HTTP 200')
      t.match(head?.headers['content-type'], /^text\/event-stream/, 'content-type: text/event-stream')
      t.equal(head?.headers['x-accel-buffering'], 'no', 'x-accel-buffering: no')
      t.ok(await stream.received(ACK), 'acknowledged')
      server.app.mcp.notify.toolsChanged()
      server.app.mcp.notify.resourceUpdated(`${watched}/inner`)
      t.ok(await stream.received(TOOLS_CHANGED) && await stream.received(UPDATED), 'a list change and an update arrived')
      const messages = stream.messages()
      t.same(messages[0], { jsonrpc: '2.0', method: ACK, params: { notifications: filter, _meta: { [META.subscriptionId]: id } } },
        'the first message is the acknowledgement of the whole filter')
      t.same(messages.map(message => message.params?._meta?.[META.subscriptionId]), messages.map(() => id),
        'every message carries _meta.subscriptionId, of the same type and value as the request id')
      t.same(messages.find(message => message.method === UPDATED)?.params?.uri, `${watched}/inner`, 'the update names the sub-resource')
      t.ok(await waitFor(() => stream.text().includes(': keep-alive'), PATIENCE_MS), 'keep-alive comments')
      t.notMatch(stream.text(), /^id:/m, 'no SSE event ids (nothing a 2.x client would try to resume with a GET)')
    })
  }
})

t.test('responseMode "json" still answers a listen with its stream', async t => {
  const server = await listenPlugin(t, { responseMode: 'json' })
  const stream = rawListen(t, server.url, 'json-mode', { toolsListChanged: true })
  const head = await within(stream.head, PATIENCE_MS, undefined)
  t.equal(head?.status, 200, 'HTTP 200')
  t.match(head?.headers['content-type'], /^text\/event-stream/, 'an event stream: the only answer a listen has')
  if (head !== undefined) t.ok(await stream.received(ACK, 1, PATIENCE_MS), 'the acknowledgement arrives')
})

t.test('close(): the follow-up notifications/cancelled is answered 202, closed is local, and the listener is gone', async t => {
  const demo = await listenDemo(t)
  const client = await connectClient(t, demo.url)
  const subscription = await client.listen({ toolsListChanged: true })
  t.ok(await waitFor(async () => await modernListeners(demo.url) === 1, PATIENCE_MS), 'mcp_listeners{era="modern"} is 1 while it listens')
  await subscription.close()
  t.equal(await within(subscription.closed, PATIENCE_MS, 'still open'), 'local', 'closed resolves local')
  const listenId: unknown = JSON.parse(lastExchange(demo.wire, 'subscriptions/listen')?.requestBody ?? '{}').id
  const cancelled = lastExchange(demo.wire, 'notifications/cancelled')
  t.type(listenId, 'string', 'the listen went out')
  t.equal(JSON.parse(cancelled?.requestBody ?? '{}').params?.requestId, listenId, 'the client sent notifications/cancelled for the listen id')
  t.equal(cancelled?.statusCode, 202, 'answered 202')
  t.ok(await waitFor(async () => await modernListeners(demo.url) === 0, PATIENCE_MS), 'mcp_listeners{era="modern"} is back to 0')
  const echo = await client.callTool({ name: 'echo', arguments: { text: 'after close' } })
  t.same(texts(echo.content), ['after close'], 'the client keeps working')
})

t.test('tasks: notifications/tasks reach the task\'s own scope only, ending with its terminal state', async t => {
  const gate = new Gate()
  const server = await listenPlugin(t, { auth: { principal } }, {}, app => {
    app.mcp.tool({
      name: 'gated',
      task: 'optional',
      handler: async (_args, ctx) => {
        await ctx.startTask()
        await gate.promise
        return { content: [{ type: 'text', text: 'done' }] }
      }
    })
  })
  const taskId = await new TaskClient(fetchSender(server.url)).create('gated', {}, { headers: as('alice') })
  const alice = await connectClient(t, server.url, { headers: as('alice'), tasks: true })
  const aliceInbox = inboxOf(alice)
  const bob = await connectClient(t, server.url, { headers: as('bob'), tasks: true })
  const bobInbox = inboxOf(bob)
  // The 2.x client keeps only the core fields of an acknowledgement (its honoredFilter has no taskIds): raw listens show them.
  const withTasks = { capabilities: { extensions: { [TASKS_EXTENSION]: {} } } }
  const aliceRaw = rawListen(t, server.url, 'alice-raw', { taskIds: [taskId] }, { ...withTasks, headers: as('alice') })
  const bobForeign = rawListen(t, server.url, 'bob-foreign', { toolsListChanged: true, taskIds: [taskId] }, { ...withTasks, headers: as('bob') })
  const bobUnknown = rawListen(t, server.url, 'bob-unknown', { toolsListChanged: true, taskIds: ['no-such-task'] }, { ...withTasks, headers: as('bob') })
  t.ok(await aliceRaw.received(ACK) && await bobForeign.received(ACK) && await bobUnknown.received(ACK), 'the raw listens are acknowledged')
  const ackOf = (stream: EventStream): unknown => stream.notifications(ACK)[0]?.params?.notifications
  t.same(ackOf(aliceRaw), { taskIds: [taskId] }, 'alice\'s listen acknowledges her task')
  t.same(ackOf(bobForeign), { toolsListChanged: true }, 'bob\'s listen on alice\'s task: acknowledged without taskIds')
  t.same(ackOf(bobUnknown), ackOf(bobForeign), 'an unknown task id is dropped the same way')

  await alice.listen({ taskIds: [taskId] } as SubscriptionFilter)
  await bob.listen({ taskIds: [taskId] } as SubscriptionFilter)
  t.ok(await waitFor(() => aliceInbox.tasks.length >= 1, PATIENCE_MS), 'alice\'s client gets the task\'s current state after the acknowledgement')
  t.match(aliceInbox.tasks[0], { taskId, status: 'working' }, 'working')

  gate.open()
  t.ok(await waitFor(() => aliceInbox.tasks.at(-1)?.status === 'completed', PATIENCE_MS), 'alice\'s client hears of the task\'s completion')
  t.same(aliceInbox.tasks.map(task => task.taskId), aliceInbox.tasks.map(() => taskId), 'every notification is about her task')
  t.same(aliceInbox.tasks.map(task => task.status).filter(status => status !== 'working'), ['completed'], 'working, then completed, last')
  t.ok(await aliceRaw.received(TASK_STATUS, 2), 'the raw listen got the states too')
  t.same(aliceRaw.notifications(TASK_STATUS).map(message => [message.params?.status, message.params?._meta?.[META.subscriptionId]]).at(-1),
    ['completed', 'alice-raw'], 'the last one completed, tagged with its subscription id')
  // A later change bob's raw listens asked for: once it is in, a task notification sent to bob would be too.
  server.app.mcp.notify.toolsChanged()
  t.ok(await bobForeign.received(TOOLS_CHANGED) && await bobUnknown.received(TOOLS_CHANGED), 'bob\'s raw listens got a tools change')
  t.same([...bobForeign.notifications(TASK_STATUS), ...bobUnknown.notifications(TASK_STATUS), ...bobInbox.tasks], [], 'bob got no notifications/tasks')

  const undeclared = await postOnce(server.url, listenBody('no-extension', { taskIds: [taskId] }), headersOf('subscriptions/listen', as('alice')))
  t.equal(undeclared.status, 400, 'taskIds without the tasks extension: HTTP 400')
  t.match(undeclared.body, { id: 'no-extension', error: { code: -32021, data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } } } }, '-32021 naming the extension')
})

t.test('bounds: listeners per scope and per node answer 429 with Retry-After, and free up when one closes', async t => {
  const filter = { toolsListChanged: true }
  const acknowledged = async (stream: EventStream): Promise<boolean> => await stream.received(ACK, 1, PATIENCE_MS)

  await t.test('maxListenersPerScope: 2', async t => {
    const server = await listenPlugin(t, { auth: { principal }, events: { maxListenersPerScope: 2 } })
    const first = rawListen(t, server.url, 'a1', filter, { headers: as('alice') })
    const second = rawListen(t, server.url, 'a2', filter, { headers: as('alice') })
    t.ok(await acknowledged(first) && await acknowledged(second), 'alice holds two')
    const third = await postOnce(server.url, listenBody('a3', filter), headersOf('subscriptions/listen', as('alice')))
    assertTooMany(t, third, 'a3', /maxListenersPerScope/)
    // A client that accepts only an event stream (all a listen answers with) is refused the same way.
    const streamOnly = await postOnce(server.url, listenBody('a3-sse', filter), headersOf('subscriptions/listen', { ...as('alice'), accept: 'text/event-stream' }))
    assertTooMany(t, streamOnly, 'a3-sse', /maxListenersPerScope/)
    t.ok(await acknowledged(rawListen(t, server.url, 'b1', filter, { headers: as('bob') })), 'bob, another scope, still listens')
    first.close()
    t.ok(await waitFor(async () => await modernListeners(server.url) === 2, PATIENCE_MS), 'alice\'s first stream is gone')
    t.ok(await acknowledged(rawListen(t, server.url, 'a4', filter, { headers: as('alice') })), 'alice can listen again')
  })

  await t.test('maxListeners: 2', async t => {
    const server = await listenPlugin(t, { auth: { principal }, events: { maxListeners: 2 } })
    const alice = rawListen(t, server.url, 'a1', filter, { headers: as('alice') })
    const bob = rawListen(t, server.url, 'b1', filter, { headers: as('bob') })
    t.ok(await acknowledged(alice) && await acknowledged(bob), 'two scopes hold one each')
    const carol = await postOnce(server.url, listenBody('c1', filter), headersOf('subscriptions/listen', as('carol')))
    assertTooMany(t, carol, 'c1', /maxListeners\b/)
    bob.close()
    t.ok(await waitFor(async () => await modernListeners(server.url) === 1, PATIENCE_MS), 'bob\'s stream is gone')
    t.ok(await acknowledged(rawListen(t, server.url, 'c2', filter, { headers: as('carol') })), 'carol can listen now')
  })
})

function assertTooMany (t: Tap, answer: Answer, id: string, detail: RegExp): void {
  t.equal(answer.status, 429, 'HTTP 429')
  t.equal(answer.headers.get('retry-after'), '1', 'Retry-After: 1')
  t.equal(jsonRpcResponseViolation(answer.body), undefined, `a JSON-RPC response (${answer.headers.get('content-type')}: ${answer.text.slice(0, 160)})`)
  t.equal(answer.body?.id, id, 'for the refused listen')
  t.equal(answer.body?.error?.code, -32603, '-32603')
  t.match(answer.body?.error?.message, detail, `naming the bound (${answer.body?.error?.message})`)
}

t.test('bad input: a precise 4xx or an in-band -32602, never a 5xx', async t => {
  const base = 'file:///project'
  const server = await listenPlugin(t, {}, {}, app => {
    registerEcho(app)
    app.mcp.resource({ uri: base, name: 'project', handler: uri => ({ contents: [{ uri, text: 'p' }] }) })
  })
  const listenHeaders = headersOf('subscriptions/listen')
  const removed = (method: string): Record<string, unknown> => ({ jsonrpc: '2.0', id: 'l', method, params: { uri: base, _meta: modernMeta() } })
  const refusals: Array<[string, unknown, Record<string, string>, number, number]> = [
    ['no notifications', listenBody('l', undefined), listenHeaders, 200, -32602],
    ['notifications an array', listenBody('l', ['toolsListChanged']), listenHeaders, 200, -32602],
    ['notifications a string', listenBody('l', 'toolsListChanged'), listenHeaders, 200, -32602],
    ['toolsListChanged: "yes"', listenBody('l', { toolsListChanged: 'yes' }), listenHeaders, 200, -32602],
    ['10 000 URIs (over maxSubscriptionsPerSession, 100)', listenBody('l', { resourceSubscriptions: Array.from({ length: 10_000 }, (_, i) => `${base}/${i}`) }), listenHeaders, 200, -32602],
    ['a URI of maxUriBytes + 1 (4 097 bytes)', listenBody('l', { resourceSubscriptions: [`${base}/${'x'.repeat(4097 - base.length - 1)}`] }), listenHeaders, 200, -32602],
    ['a 1 MiB URI (over the body limit)', listenBody('l', { resourceSubscriptions: [`${base}/${'x'.repeat(1024 * 1024)}`] }), listenHeaders, 413, -32600],
    ['Accept: application/json only', listenBody('l', { toolsListChanged: true }), { ...listenHeaders, accept: 'application/json' }, 406, -32600],
    ['resources/subscribe (removed in 2026-07-28)', removed('resources/subscribe'), headersOf('resources/subscribe'), 404, -32601],
    ['resources/unsubscribe (removed in 2026-07-28)', removed('resources/unsubscribe'), headersOf('resources/unsubscribe'), 404, -32601]
  ]
  for (const [name, body, headers, status, code] of refusals) {
    const answer = await postOnce(server.url, body, headers)
    t.equal(answer.status, status, `${name}: HTTP ${status}`)
    t.equal(jsonRpcResponseViolation(answer.body), undefined, `${name}: a well-formed JSON-RPC response (${answer.text.slice(0, 120)})`)
    t.equal(answer.body?.error?.code, code, `${name}: ${code}`)
    t.notOk(hasStackTrace(answer.text), `${name}: no stack trace`)
  }
  t.equal(await modernListeners(server.url), 0, 'no refused listen left a listener')

  await t.test('unknown filter keys are left out of the acknowledgement', async t => {
    const stream = rawListen(t, server.url, 'unknown-keys', { toolsListChanged: true, futureListChanged: true, somethingElse: { deep: 1 } })
    t.ok(await stream.received(ACK), 'acknowledged')
    t.same(stream.notifications(ACK)[0]?.params?.notifications, { toolsListChanged: true }, 'with the fields it knows only')
  })

  await t.test('a URI named three times is acknowledged once, and updated once', async t => {
    const uri = `${base}/dup`
    const stream = rawListen(t, server.url, 'duplicates', { resourceSubscriptions: [uri, uri, uri] })
    t.ok(await stream.received(ACK), 'acknowledged')
    t.same(stream.notifications(ACK)[0]?.params?.notifications, { resourceSubscriptions: [uri] }, 'the URI once')
    server.app.mcp.notify.resourceUpdated(uri)
    server.app.mcp.notify.resourceUpdated(`${uri}/after`)
    t.ok(await waitFor(() => stream.text().includes(`${uri}/after`), PATIENCE_MS), 'the update after it arrived')
    t.same(stream.notifications(UPDATED).map(message => message.params?.uri), [uri, `${uri}/after`], 'one update for the URI')
  })

  await t.test('the server is unharmed: echo answers', async t => {
    const echo = await postOnce(server.url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'fine' }, _meta: modernMeta() } },
      { ...headersOf('tools/call'), 'mcp-name': 'echo' })
    t.same(texts(echo.body?.result?.content), ['fine'])
  })
})

t.test('a listener that stops reading is cut off; the others and the process carry on', async t => {
  const prefix = 'file:///flood'
  const server = await listenPlugin(t, { events: { maxListenerBufferBytes: 65_536, maxEventsPerSecond: 1_000_000 } }, {}, app => {
    registerEcho(app)
    app.mcp.resource({ uri: prefix, name: 'flood', handler: uri => ({ contents: [{ uri, text: 'f' }] }) })
  })
  const filter = { resourceSubscriptions: [prefix] }
  // Sends the listen and never reads: what the server writes piles up in the socket, then in its buffers.
  const stalled = new StalledListen(server.url, listenBody('stalled', filter), headersOf('subscriptions/listen'))
  t.teardown(() => { stalled.socket.destroy() })
  const reader = rawListen(t, server.url, 'reader', filter)
  t.ok(await reader.received(ACK), 'a reading listener is acknowledged')
  t.ok(await waitFor(async () => await modernListeners(server.url) === 2, PATIENCE_MS), 'both listen')

  // Distinct URIs (each its own event, none coalesced) of some kilobytes, in small bursts a reader keeps up with.
  const padding = 'x'.repeat(4000)
  let sent = 0
  const dropped = async (): Promise<number> => await metricValue(server.url, 'mcp_listeners_dropped_total', { reason: 'slow' }) ?? 0
  // Checked every 50 bursts (a scrape costs more than a burst); 20 000 updates are 80 MB, far beyond any socket buffer.
  for (let burst = 0; sent < 20_000 && (burst % 50 !== 0 || await dropped() === 0); burst++) {
    for (let i = 0; i < 8; i++) server.app.mcp.notify.resourceUpdated(`${prefix}/${padding}/${sent++}`)
    await sleep(1)
  }
  t.equal(await dropped(), 1, `mcp_listeners_dropped_total{reason="slow"} is 1 after ${sent} updates of 4 kB`)
  t.ok(await waitFor(async () => await modernListeners(server.url) === 1, PATIENCE_MS), 'one listener is left')
  server.app.mcp.notify.resourceUpdated(`${prefix}/last`)
  t.ok(await waitFor(() => reader.text().includes(`${prefix}/last`), PATIENCE_MS), 'the reading listener still gets updates')
  t.notOk(reader.over, 'and is still open')
  reader.close()
  t.ok(await waitFor(async () => await modernListeners(server.url) === 0, PATIENCE_MS), 'mcp_listeners{era="modern"} is back to 0')
  const echo = await postOnce(server.url, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'alive' }, _meta: modernMeta() } },
    { ...headersOf('tools/call'), 'mcp-name': 'echo' })
  t.same(texts(echo.body?.result?.content), ['alive'], 'echo still answers')
})

/** A POST written on a bare socket that is never read from (the client's receive window fills, then the server's buffers). */
class StalledListen {
  readonly socket: net.Socket

  constructor (url: URL, body: unknown, headers: Record<string, string>) {
    const payload = Buffer.from(JSON.stringify(body))
    const lines = [`POST ${url.pathname} HTTP/1.1`, `host: ${url.host}`, `content-length: ${payload.length}`]
    for (const [key, value] of Object.entries(headers)) lines.push(`${key}: ${value}`)
    this.socket = net.connect(Number(url.port), url.hostname)
    this.socket.on('error', () => {})
    this.socket.pause()
    this.socket.write(Buffer.concat([Buffer.from(lines.join('\r\n') + '\r\n\r\n'), payload]))
  }
}
