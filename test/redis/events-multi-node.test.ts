/**
 * Server events across nodes sharing a real `redis-server`: a change made on node B (a tool added,
 * `touch_resource`, a task's progress) reaches the clients listening on node A, in both eras; a legacy
 * session's `resources/subscribe` POSTed to B is honoured by its GET stream on A, and one session's
 * subscription never reaches another; a session's stream is one in the cluster (409 on B while A holds
 * it), and DELETE on B ends it on A; a task's state reaches its own principal only. While Redis is
 * stopped a node still delivers its own events and counts the bus errors; once Redis is back (empty),
 * events from the other node flow again by themselves, and a session's stream is still the only one.
 *
 * The Redis is standalone, a Cluster or Sentinel-managed, as MCP_TEST_REDIS says (test/helpers/redis-topology.ts);
 * the outage stops and starts one redis-server, so it runs standalone only.
 *
 * Without redis-server these tests are skipped, except under CI where that is a failure.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport, type SubscriptionFilter } from '@modelcontextprotocol/client'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { TOUCHES_URI } from '../../example/demo-tools.js'
import { sessionKey } from '../../lib/events/subscription-store.js'
import { startNode, type Node } from '../helpers/cluster.js'
import { EventStream, newSession, sessionStreamHeaders } from '../helpers/event-stream.js'
import { rawPost } from '../helpers/http.js'
import { SESSION_SECRET } from '../helpers/identity.js'
import { DEFAULT_HEADERS, LEGACY, META, MODERN, modernHeaders, modernMeta, toolCall, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenDemo, type Listening } from '../helpers/listen.js'
import { texts } from '../helpers/mcp-results.js'
import { metricValue } from '../helpers/metrics.js'
import { RedisServer } from '../helpers/redis-server.js'
import { standaloneOnly, startRedisTopology, topologySkipReason } from '../helpers/redis-topology.js'
import { fetchSender, Gate, TaskClient, TASKS_EXTENSION } from '../helpers/tasks.js'
import type { Teardown } from '../helpers/teardown.js'
import { waitFor } from '../helpers/wait.js'

const skip = topologySkipReason(t)
const SECRET = 'events-multi-node-secret-0123456789abcdef'
const ACK = 'notifications/subscriptions/acknowledged'
const TOOLS_CHANGED = 'notifications/tools/list_changed'
const UPDATED = 'notifications/resources/updated'
const TASK_STATUS = 'notifications/tasks'
const BUS_ERRORS = 'mcp_bus_errors_total'
const OTHER_URI = 'demo://other'
/** Long enough for anything a test waits for on a machine shared with other test files. */
const PATIENCE_MS = 5000
/** A freshly started node, or one whose Redis came back, reaches the bus within this long. */
const BUS_READY_MS = 8000
/** The tasks extension, declared by a client (`_meta` client capabilities, or the 2.x client's own). */
const WITH_TASKS = { extensions: { [TASKS_EXTENSION]: {} } }

type Demo = Listening

/** The demo on 127.0.0.1:0 as one node of a cluster: Redis, the shared `secret`, sessions. */
/** A session's GET stream its client closed is paused for this long (it keeps the session's claim meanwhile). */
const RESUME_WINDOW_MS = 500

/** `redisEnv`: the demo's Redis variables (`RedisTopology.demoEnv()`). */
async function demoNode (t: Teardown, redisEnv: Record<string, string>): Promise<Demo> {
  return await listenDemo(t, { ...redisEnv, MCP_SECRET: SECRET, MCP_SESSION_SECRET: SESSION_SECRET, MCP_RESUME_WINDOW_MS: String(RESUME_WINDOW_MS) })
}

/** The headers of a modern POST of `method`, plus `extra`. */
function modernPostHeaders (method: string, extra: Record<string, string> = {}): Record<string, string> {
  const headers: Record<string, string> = { ...DEFAULT_HEADERS }
  for (const [key, value] of Object.entries(modernHeaders(method))) if (value !== undefined) headers[key] = value
  return { ...headers, ...extra }
}

/** A raw `subscriptions/listen` on a connection of its own, closed at the end of the test. */
function rawListen (t: Teardown, url: URL, id: string, filter: Record<string, unknown>,
  options: { headers?: Record<string, string>, capabilities?: Record<string, unknown> } = {}): EventStream {
  const body = { jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { _meta: modernMeta({ [META.clientCapabilities]: options.capabilities ?? {} }), notifications: filter } }
  const stream = EventStream.post(url, body, modernPostHeaders('subscriptions/listen', options.headers))
  t.teardown(() => { stream.close() })
  return stream
}

/**
 * Announces a tools change on `from` every 250 ms until `stream` has heard one more than it had: true
 * once it has (the bus carries events between the two nodes), false after `timeoutMs`.
 */
async function untilHeard (from: FastifyInstance, stream: EventStream, timeoutMs: number): Promise<boolean> {
  const had = stream.notifications(TOOLS_CHANGED).length
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    from.mcp.notify.toolsChanged()
    if (await stream.received(TOOLS_CHANGED, had + 1, 250)) return true
  }
  return false
}

/** Waits until events raised on `from` reach listeners on `to`, both ways round (the nodes have reached Redis). */
async function eventsFlow (t: Teardown, a: Listening, b: Listening, headers: Record<string, string> = {}): Promise<boolean> {
  for (const [from, to] of [[b, a], [a, b]] as const) {
    const stream = rawListen(t, to.url, `warm-up-${to.url.port}`, { toolsListChanged: true }, { headers })
    const flowing = await stream.received(ACK, 1, PATIENCE_MS) && await untilHeard(from.app, stream, BUS_READY_MS)
    stream.close()
    if (!flowing) return false
  }
  return true
}

/** Two demo nodes on one Redis, events already flowing both ways. */
async function demoPair (t: Tap, redisEnv: () => Record<string, string>): Promise<[Demo, Demo]> {
  const a = await demoNode(t, redisEnv())
  const b = await demoNode(t, redisEnv())
  if (!await eventsFlow(t, a, b)) t.fail(`events did not flow between the nodes within ${BUS_READY_MS} ms of starting`)
  return [a, b]
}

/** The 2.x client pinned to 2026-07-28, connected to `url` (server/discover); closed at the end of the test. */
async function modernClient (t: Teardown, url: URL, options: { headers?: Record<string, string>, tasks?: boolean } = {}): Promise<ModernClient> {
  const client = new ModernClient({ name: 'events-multi-node', version: '2.0.0' }, {
    versionNegotiation: { mode: { pin: MODERN } },
    ...(options.tasks === true ? { capabilities: WITH_TASKS } : {})
  })
  t.teardown(() => client.close())
  await client.connect(new ModernTransport(url, { requestInit: { headers: options.headers ?? {} } }))
  return client
}

/** How many streams of `era` the node at `url` holds (`mcp_listeners`; 0 before the first). */
async function listeners (url: URL, era: 'legacy' | 'modern'): Promise<number> {
  return await metricValue(url, 'mcp_listeners', { era }) ?? 0
}

/** Resolves true once the node at `url` holds `count` streams of `era`. */
async function holds (url: URL, era: 'legacy' | 'modern', count: number): Promise<boolean> {
  return await waitFor(async () => await listeners(url, era) === count, PATIENCE_MS, 20)
}

/** A legacy request of `session` to `url` (2025-11-25): the JSON-RPC answer. */
async function sessionRequest (url: URL, session: string, method: string, params: Record<string, unknown>): Promise<JsonRpcMessage> {
  const response = await rawPost(url, { jsonrpc: '2.0', id: method, method, params }, { 'mcp-session-id': session })
  return JSON.parse(response.text) as JsonRpcMessage
}

/** `touch_resource {uri}` on `url`, as a legacy call without a session: the text it answered. */
async function touch (url: URL, uri: string): Promise<string[]> {
  const response = await rawPost(url, toolCall(`touch-${uri}`, 'touch_resource', { uri }))
  return texts((JSON.parse(response.text) as JsonRpcMessage).result?.content)
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

t.test('a modern listen held on node A hears a tool added and a resource touched on node B', { skip }, async t => {
  const redis = await startRedisTopology(t)
  const [a, b] = await demoPair(t, redis.demoEnv)
  const client = await modernClient(t, a.url)
  const inbox = { toolsChanged: 0, updated: [] as string[] }
  client.setNotificationHandler(TOOLS_CHANGED, () => { inbox.toolsChanged++ })
  client.setNotificationHandler(UPDATED, notification => { inbox.updated.push(notification.params.uri) })
  const filter = { toolsListChanged: true, resourceSubscriptions: [TOUCHES_URI] }
  const subscription = await client.listen(filter)
  t.same(subscription.honoredFilter, filter, 'node A acknowledges the whole filter')

  b.app.mcp.tool({ name: 'added_on_b', description: 'Registered on node B at runtime', handler: () => ({ content: [] }) })
  t.ok(await waitFor(() => inbox.toolsChanged === 1, PATIENCE_MS), 'tools/list_changed from node B arrived on node A\'s stream')

  const onB = await modernClient(t, b.url)
  t.same(texts((await onB.callTool({ name: 'touch_resource', arguments: { uri: TOUCHES_URI } })).content), [`touched ${TOUCHES_URI}`], 'touch_resource on node B')
  t.ok(await waitFor(() => inbox.updated.length === 1, PATIENCE_MS), 'resources/updated arrived on node A\'s stream')
  t.same(inbox.updated, [TOUCHES_URI], `for ${TOUCHES_URI}`)
  t.equal(await listeners(b.url, 'modern'), 0, 'node B holds no stream: the event travelled through Redis')
})

t.test('a legacy GET stream held on node A: a subscribe POSTed to node B is honoured, for this session only', { skip }, async t => {
  const redis = await startRedisTopology(t)
  const [a, b] = await demoPair(t, redis.demoEnv)

  const client = new LegacyClient({ name: 'events-multi-node', version: '1.0.0' })
  const updated: string[] = []
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, notification => { updated.push(notification.params.uri) })
  const transport = new LegacyTransport(a.url)
  t.teardown(() => client.close())
  await client.connect(transport)
  const session = transport.sessionId!
  t.ok(await holds(a.url, 'legacy', 1), 'the SDK 1.x client opened its GET stream on node A')

  t.same((await sessionRequest(b.url, session, 'resources/subscribe', { uri: TOUCHES_URI })).result, {}, 'resources/subscribe POSTed to node B answers {}')
  t.same(await touch(b.url, TOUCHES_URI), [`touched ${TOUCHES_URI}`], 'touch_resource on node B')
  t.ok(await waitFor(() => updated.length === 1, PATIENCE_MS), 'node A\'s stream delivered the update')
  await touch(a.url, TOUCHES_URI)
  t.ok(await waitFor(() => updated.length === 2, PATIENCE_MS), 'and an update raised on node A itself')

  // Another session, its stream on node A too, subscribed (through node B) to another resource.
  const other = await newSession(b.url)
  const otherStream = EventStream.get(a.url, sessionStreamHeaders(other))
  t.teardown(() => { otherStream.close() })
  t.ok(await holds(a.url, 'legacy', 2), 'another session holds a stream on node A')
  t.same((await sessionRequest(b.url, other, 'resources/subscribe', { uri: OTHER_URI })).result, {}, `the other session subscribes to ${OTHER_URI}`)
  await touch(b.url, OTHER_URI)
  await touch(b.url, TOUCHES_URI)
  // Both were published on node B in this order, and are delivered in it: once the second is in, the first would be.
  t.ok(await waitFor(() => updated.length === 3, PATIENCE_MS), 'the later update of this session\'s resource arrived')
  t.same(updated, [TOUCHES_URI, TOUCHES_URI, TOUCHES_URI], `this session never got ${OTHER_URI}`)
  t.ok(await otherStream.received(UPDATED), 'which the other session got')
  t.same(otherStream.notifications(UPDATED).map(message => message.params?.uri), [OTHER_URI], 'and nothing of this session\'s')

  t.test('one stream per session in the cluster: a GET on node B while node A holds it is 409; once it closed and its resume window passed, B serves one', async t => {
    const second = await fetch(b.url, { headers: sessionStreamHeaders(session) })
    t.equal(second.status, 409, 'node B answers 409')
    t.match(await second.json(), { jsonrpc: '2.0', error: { code: -32000, message: /Only one SSE stream is allowed per session/ } }, 'with a JSON-RPC error')
    await client.close()
    // Closed, it is paused for a resume until its window passes, and keeps the session's claim.
    t.ok(await holds(a.url, 'legacy', 1), 'the client\'s stream on node A closed, and its window passed')
    // The claim is released through Redis: a GET may still meet it for a moment.
    let served: EventStream | undefined
    t.ok(await waitFor(async () => {
      const attempt = EventStream.get(b.url, sessionStreamHeaders(session))
      if ((await attempt.head)?.status === 200) served = attempt
      else attempt.close()
      return served !== undefined
    }, PATIENCE_MS, 50), 'node B opens the session\'s stream')
    t.teardown(() => { served?.close() })
    t.ok(await holds(b.url, 'legacy', 1), 'node B holds it')
  })

  t.test('DELETE on node B ends the session\'s stream on node A, and its subscriptions go from Redis', async t => {
    const subscriptionsKey = redis.key(`subs:${sessionKey(other)}`, 'subscriptions')
    t.same(await redis.scanKeys(subscriptionsKey), [subscriptionsKey], 'Redis holds the other session\'s subscriptions')
    t.equal((await fetch(b.url, { method: 'DELETE', headers: { ...LEGACY, 'mcp-session-id': other } })).status, 204, 'DELETE on node B answers 204')
    t.not(await Promise.race([otherStream.ended, sleep(PATIENCE_MS, 'still open' as const)]), 'still open', 'the stream on node A ended')
    t.same(await redis.scanKeys(subscriptionsKey), [], 'and its subscriptions are gone from Redis')
    t.same(await redis.scanKeys(redis.key(`stream:${sessionKey(other)}`, 'subscriptions')), [], 'so is its stream\'s claim')
  })
})

/** The principal named by `x-user`. */
const principal = (request: FastifyRequest): unknown => request.headers['x-user']
const as = (user: string): Record<string, string> => ({ 'x-user': user })

/** `work` (a task for clients of the extension): reports progress, waits for `gate`, then works a few hundred ms more with progress. */
function registerWork (app: FastifyInstance, gate: Gate): void {
  app.mcp.tool({
    name: 'work',
    description: 'Works in steps, reporting progress; a task for clients of the tasks extension',
    task: 'optional',
    handler: async (_args, ctx) => {
      await ctx.startTask()
      await ctx.progress(1, 4, 'started')
      await gate.promise
      for (const step of [2, 3, 4]) {
        await sleep(120, undefined, { signal: ctx.signal })
        await ctx.progress(step, 4, `step ${step}`)
      }
      return { content: [{ type: 'text', text: 'worked' }] }
    }
  })
}

t.test('a task started on node B: its principal listening on node A hears its states to the end, another principal nothing', { skip }, async t => {
  const redis = await startRedisTopology(t)
  const gate = new Gate()
  const options = { secret: SECRET, auth: { principal } }
  const a: Node = await startNode(t, 'node-a', { redis: redis.option(), ...options }, {}, app => { registerWork(app, gate) })
  const b: Node = await startNode(t, 'node-b', { redis: redis.option(), ...options }, {}, app => { registerWork(app, gate) })
  if (!await eventsFlow(t, a, b, as('warm-up'))) t.fail(`events did not flow between the nodes within ${BUS_READY_MS} ms of starting`)

  const taskId = await new TaskClient(fetchSender(b.url)).create('work', {}, { headers: as('alice') })
  const alice = await modernClient(t, a.url, { headers: as('alice'), tasks: true })
  const aliceTasks: Array<Record<string, unknown>> = []
  alice.fallbackNotificationHandler = async notification => {
    if (notification.method === TASK_STATUS) aliceTasks.push(notification.params as Record<string, unknown>)
  }
  const bob = await modernClient(t, a.url, { headers: as('bob'), tasks: true })
  const bobTasks: unknown[] = []
  bob.fallbackNotificationHandler = async notification => {
    if (notification.method === TASK_STATUS) bobTasks.push(notification.params)
  }
  // The 2.x client's honoredFilter keeps only the core fields: raw listens show what the acknowledgement says of taskIds.
  const aliceRaw = rawListen(t, a.url, 'alice-raw', { taskIds: [taskId] }, { headers: as('alice'), capabilities: WITH_TASKS })
  const bobRaw = rawListen(t, a.url, 'bob-raw', { toolsListChanged: true, taskIds: [taskId] }, { headers: as('bob'), capabilities: WITH_TASKS })
  t.ok(await aliceRaw.received(ACK) && await bobRaw.received(ACK), 'both raw listens on node A are acknowledged')
  t.same(aliceRaw.notifications(ACK)[0]?.params?.notifications, { taskIds: [taskId] }, 'alice\'s acknowledgement names her task')
  t.same(bobRaw.notifications(ACK)[0]?.params?.notifications, { toolsListChanged: true }, 'bob\'s has no taskIds')

  await alice.listen({ taskIds: [taskId] } as SubscriptionFilter)
  await bob.listen({ taskIds: [taskId] } as SubscriptionFilter)
  t.ok(await waitFor(() => aliceTasks.length >= 1, PATIENCE_MS), 'alice\'s client on node A gets the task\'s current state')
  t.match(aliceTasks[0], { taskId, status: 'working' }, 'working')
  const beforeGate = aliceTasks.length

  gate.open()
  t.ok(await waitFor(() => aliceTasks.at(-1)?.status === 'completed', PATIENCE_MS), 'alice\'s client hears of the completion on node B')
  const statuses = aliceTasks.map(task => task.status)
  t.same(statuses.slice(0, -1).filter(status => status !== 'working'), [], 'every state before the last is working', { statuses })
  t.ok(aliceTasks.slice(beforeGate, -1).some(task => String(task.statusMessage).startsWith('step')),
    'the progress node B made after the listen began arrived as working states', { messages: aliceTasks.map(task => task.statusMessage) })
  t.same(aliceTasks.map(task => task.taskId), aliceTasks.map(() => taskId), 'all of them about her task')
  t.ok(await waitFor(() => aliceRaw.notifications(TASK_STATUS).at(-1)?.params?.status === 'completed', PATIENCE_MS), 'the raw listen ends with completed too')

  // A later change bob's raw listen asked for, raised on node B: once it is in, a task state sent to bob would be too.
  t.ok(await untilHeard(b.app, bobRaw, PATIENCE_MS), 'bob\'s raw listen hears a later tools change from node B')
  t.same([...bobRaw.notifications(TASK_STATUS), ...bobTasks], [], 'bob got no notifications/tasks, on either listen')
})

t.test('Redis stopped while a listener is open on node A: A delivers its own events, counts the bus errors, and hears B again once Redis is back', { skip: skip || standaloneOnly('an outage of one redis-server') }, async t => {
  const redis = await RedisServer.start(t)
  const [a, b] = await demoPair(t, () => ({ MCP_REDIS_URL: redis.url }))
  const stream = rawListen(t, a.url, 'outage', { toolsListChanged: true, resourceSubscriptions: [TOUCHES_URI] })
  t.ok(await stream.received(ACK), 'a listen on node A is acknowledged')
  const session = await newSession(a.url)
  const held = EventStream.get(a.url, sessionStreamHeaders(session))
  t.teardown(() => { held.close() })
  t.ok(await holds(a.url, 'legacy', 1), 'and a legacy session\'s GET stream')
  const busErrorsBefore = await metricValue(a.url, BUS_ERRORS) ?? 0

  await redis.stop()
  a.app.mcp.notify.toolsChanged()
  t.same(await touch(a.url, TOUCHES_URI), [`touched ${TOUCHES_URI}`], 'touch_resource on node A answers')
  t.ok(await stream.received(TOOLS_CHANGED) && await stream.received(UPDATED), 'node A\'s listener got both of node A\'s events')
  t.ok(await waitFor(async () => (await metricValue(a.url, BUS_ERRORS) ?? 0) > busErrorsBefore, PATIENCE_MS), `${BUS_ERRORS} counts on node A`)
  t.same(await touch(b.url, TOUCHES_URI), [`touched ${TOUCHES_URI}`], 'node B answers as well')
  const subscribe = await rawPost(a.url, { jsonrpc: '2.0', id: 's', method: 'resources/subscribe', params: { uri: TOUCHES_URI } }, { 'mcp-session-id': session })
  t.ok(subscribe.status < 500, `a legacy resources/subscribe is no 5xx (${subscribe.status})`)
  t.match(JSON.parse(subscribe.text), { id: 's', error: { code: -32603, message: /unavailable/ } }, 'but a JSON-RPC error saying the store is unreachable')
  t.notOk(stream.over, 'the listener is still open')

  await redis.start()
  t.ok(await untilHeard(b.app, stream, BUS_READY_MS), 'once Redis is back, node A\'s listener hears node B again')
  t.same((await sessionRequest(a.url, session, 'resources/subscribe', { uri: TOUCHES_URI })).result, {}, 'and resources/subscribe works again')

  // Redis came back empty (no persistence), without the claim node A made for the session's stream.
  t.test('node A\'s session stream is still the only one: node B refuses a second GET for it (409)', async t => {
    const second = EventStream.get(b.url, sessionStreamHeaders(session))
    t.teardown(() => { second.close() })
    t.equal((await second.head)?.status, 409, 'node B answers 409, as before the restart')
    t.notOk(held.over, 'node A\'s stream is open')
  })
})
