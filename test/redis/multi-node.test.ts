/**
 * Multi-node (DESIGN §6): real listening nodes sharing a real `redis-server` (test/helpers/redis-server.ts).
 * A cancel POST that lands on another node than the running tool reaches it, only within its scope;
 * session revocations are cluster-wide, including for a node that starts later; a Redis outage degrades
 * cross-node cancellation only (local cancellation and every request keep working, one error log per
 * outage, errors counted, nothing buffered, nothing stale delivered afterwards), and it resumes by itself
 * within seconds; the plugin never closes a caller's ioredis client and leaves no handle behind.
 *
 * The Redis is standalone, a Cluster or Sentinel-managed, as MCP_TEST_REDIS says (test/helpers/redis-topology.ts);
 * the outages stop and start one redis-server, so they run standalone only.
 *
 * Without redis-server these tests are skipped, except under CI where that is a failure.
 */
import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import Fastify, { type FastifyRequest } from 'fastify'
import { Redis } from 'ioredis'
import mcpCancellation from '../../lib/index.js'
import { cancelFlood, crossNodeCancelWorks, drained, echo, sendCancel, startNode, startProbe, untilCrossNodeWorks, type Node } from '../helpers/cluster.js'
import { openPost, rawPost } from '../helpers/http.js'
import { cancelNotification, initializeBody, toolCall } from '../helpers/jsonrpc.js'
import { listenOn } from '../helpers/listen.js'
import { errorLines } from '../helpers/logs.js'
import { attempt, texts } from '../helpers/mcp-results.js'
import { metricValue, scrapeMetrics } from '../helpers/metrics.js'
import { activeResources, resourcesSettle } from '../helpers/process.js'
import { RedisServer } from '../helpers/redis-server.js'
import { standaloneOnly, startRedisTopology, topology, topologySkipReason, type RedisOption, type RedisTopology } from '../helpers/redis-topology.js'
import { waitFor, within } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const skip = topologySkipReason(t)
/** The outages stop and start the one redis-server a standalone topology has. */
const outage = skip || standaloneOnly('an outage of one redis-server')
const BUS_ERRORS = 'mcp_bus_errors_total'
const BUS_CONNECTED = 'mcp_bus_connected'
/** How long a freshly started pair of nodes may take to reach Redis and subscribe. */
const WARM_UP_MS = 5000
/** Redis back ⇒ cross-node cancellation works again within this long (DESIGN §6: "within seconds"). */
const RECOVERY_MS = 5000

/** Two nodes on one Redis, cross-node cancellation already working both ways. */
async function pair (t: Tap, redis: RedisTopology | [RedisOption, RedisOption], options: Parameters<typeof startNode>[2] = {},
  headers: Record<string, string> = {}): Promise<[Node, Node]> {
  const [redisA, redisB] = Array.isArray(redis) ? redis : [redis.option(), redis.option()]
  const a = await startNode(t, 'node-a', { redis: redisA, ...options })
  const b = await startNode(t, 'node-b', { redis: redisB, ...options })
  const since = Date.now()
  const ab = await untilCrossNodeWorks(a, b, since, WARM_UP_MS, { headers })
  const ba = await untilCrossNodeWorks(b, a, since, WARM_UP_MS, { headers })
  if (ab === undefined || ba === undefined) t.fail(`the nodes never cancelled across each other within ${WARM_UP_MS} ms of starting`)
  return [a, b]
}

t.test('SDK 1.x client: the call runs on node A, its cancel POST goes to node B, A\'s ctx.signal fires', { skip }, async t => {
  const redis = await startRedisTopology(t)
  const [a, b] = await pair(t, redis)

  let cancelSentAt: number | undefined
  const routed: Array<{ method: string | undefined, host: string, status: number }> = []
  /** Sends every POST to node A, except a notifications/cancelled, which goes to node B. */
  const splitFetch = async (url: string | URL, init?: RequestInit): Promise<Response> => {
    let method: string | undefined
    try { method = (JSON.parse(String(init?.body)) as { method?: string }).method } catch {}
    const target = init?.method === 'POST' && method === 'notifications/cancelled' ? b.url : url
    if (target === b.url) cancelSentAt = Date.now()
    const response = await fetch(target, init)
    if (init?.method === 'POST') routed.push({ method, host: new URL(target).host, status: response.status })
    return response
  }
  const client = new Client({ name: 'multi-node', version: '1.0.0' })
  t.teardown(() => client.close())
  await client.connect(new StreamableHTTPClientTransport(a.url, { fetch: splitFetch }))

  const controller = new AbortController()
  const startedAt = Date.now()
  setTimeout(() => { controller.abort('user pressed stop') }, 200)
  await attempt(client.callTool({ name: 'probe', arguments: { ms: 5000, tag: 'sdk' } }, undefined, { signal: controller.signal }))

  const [call] = a.probe.tagged('sdk')
  t.ok(call, 'the tool ran on node A')
  t.same(b.probe.tagged('sdk'), [], 'and not on node B')
  t.ok(await waitFor(() => call?.abortedAt !== undefined, 2000), 'node A\'s ctx.signal fired')
  t.ok(await waitFor(() => cancelSentAt !== undefined, 1000), 'the SDK sent its cancel')
  const latency = call?.abortedAt !== undefined && cancelSentAt !== undefined ? call.abortedAt - cancelSentAt : undefined
  t.ok(latency !== undefined && latency < 200, `within 200 ms of the cancel POST to node B (${String(latency)} ms)`)
  t.equal(call?.source, 'client', 'as a client cancellation')
  t.equal(call?.reason, 'user pressed stop', 'carrying the client\'s reason')
  t.ok(call?.endedAt !== undefined && call.endedAt - startedAt < 1500, 'the 5 s tool stopped early')

  t.ok(await waitFor(() => routed.some(post => post.method === 'notifications/cancelled'), 2000), 'the cancel POST was answered')
  t.same(routed.filter(post => post.method === 'notifications/cancelled'), [{ method: 'notifications/cancelled', host: b.url.host, status: 202 }],
    'exactly one cancel POST, answered 202 by node B')
  t.ok(await drained([a.app, b.app]), 'afterwards no in-flight or cancellation row remains on either node')
})

t.test('a cancellation a node forwards to the others counts as forwarded, and as recorded where it lands', { skip }, async t => {
  const redis = await startRedisTopology(t)
  const secret = 'forwarded-count-secret-0123456789abcdef'
  const a = await startNode(t, 'a', { redis: redis.option(), secret })
  const b = await startNode(t, 'b', { redis: redis.option(), secret })
  const cancels = async (node: typeof a): Promise<Record<string, number>> =>
    (await scrapeMetrics(node.url)).series('mcp_cancellations_total')

  // Both nodes subscribed: a cancel published by B reaches A.
  let delivered = false
  for (let attempt = 0; attempt < 50 && !delivered; attempt++) {
    const call = openPost(a.url, toolCall(`probe-${attempt}`, 'probe', { ms: 10_000 }))
    await waitFor(() => a.probe.calls.some(c => c.requestId === `probe-${attempt}`), 2000)
    t.equal((await rawPost(b.url, cancelNotification(`probe-${attempt}`, 'from b'))).status, 202, 'the cancel on B is accepted')
    delivered = await waitFor(() => a.probe.calls.find(c => c.requestId === `probe-${attempt}`)?.source === 'client', 1000)
    call.destroy()
    await call.done.catch(() => {})
  }
  t.ok(delivered, 'the call on A was cancelled by the notification sent to B')
  const onB = await cancels(b)
  t.ok((onB['result=forwarded,source=client'] ?? 0) >= 1, `B counts result="forwarded" (${JSON.stringify(onB)})`)
  t.equal(onB['result=ignored,source=client'] ?? 0, 0, 'and nothing ignored')
  t.ok(((await cancels(a))['result=recorded,source=client'] ?? 0) >= 1, 'A, where the request ran, counts it recorded')
})

t.test('without redis, a cancellation of nothing in flight stays ignored', async t => {
  const app = Fastify()
  await app.register(mcpCancellation)
  const url = await listenOn(t, app)
  t.equal((await rawPost(url, cancelNotification('nobody-home'))).status, 202)
  const series = (await scrapeMetrics(url)).series('mcp_cancellations_total')
  t.same(series, { 'result=ignored,source=client': 1 })
  t.equal(await metricValue(url, BUS_CONNECTED), undefined, `no ${BUS_CONNECTED} without redis`)
})

t.test('scope isolation holds across nodes', { skip }, async t => {
  const redis = await startRedisTopology(t)
  const auth = { principal: (request: FastifyRequest) => request.headers['x-user'] }
  const alice = { 'x-user': 'alice' }
  const bob = { 'x-user': 'bob' }
  const [a, b] = await pair(t, redis, { auth }, alice)

  t.test('bob\'s cancel for alice\'s id 1, sent to node B, touches nothing on node A', async t => {
    const target = await startProbe(a, 1000, { id: 1, headers: alice })
    const sentinel = await startProbe(a, 30_000, { id: 2, headers: alice })
    t.equal(await sendCancel(b, 1, 'bob was here', bob), 202, 'node B answers bob 202, as for any unknown id')
    // Redis delivers one publisher's messages in order: once alice's later cancel of id 2 arrived, so had bob's.
    t.equal(await sendCancel(b, 2, 'sentinel', alice), 202, 'alice cancels her id 2 through node B too')
    t.ok(await waitFor(() => sentinel.call()?.abortedAt !== undefined, 2000), 'alice\'s own cancel (the sentinel) reached node A')
    t.equal(target.call()?.abortedAt, undefined, 'alice\'s id 1 was not aborted by bob\'s cancel')
    t.equal(a.app.mcpCancellation.cancelled(1, 'principal:alice'), false, 'no row was written for it')
    const response = await within(target.http.done, 3000, undefined)
    t.equal(response?.status, 200, 'alice\'s call completes normally')
    t.same(texts((JSON.parse(response?.text ?? '{}') as { result?: { content?: unknown } }).result?.content), ['probe 1000'], 'with its result')
    await sentinel.http.done.catch(() => {})
  })

  t.test('alice\'s own cancel for id 1, sent to node B, cancels it', async t => {
    const target = await startProbe(a, 30_000, { id: 1, headers: alice })
    const sentAt = Date.now()
    t.equal(await sendCancel(b, 1, 'alice stops', alice), 202, 'node B answers alice 202')
    t.ok(await waitFor(() => target.call()?.abortedAt !== undefined, 2000), 'node A\'s ctx.signal fired')
    t.equal(target.call()?.reason, 'alice stops', 'with her reason')
    t.ok((target.call()?.abortedAt ?? Infinity) - sentAt < 500, 'promptly')
    const response = await within(target.http.done, 3000, undefined)
    t.equal(response?.status, 202, 'the cancelled JSON call is answered 202')
    t.equal(response?.text, '', 'with no result')
    t.ok(await drained([a.app, b.app]), 'nothing left on either node')
  })
})

t.test('sessions are cluster-wide: minted on A, used on B, deleted on A, refused on B and on a node started later', { skip }, async t => {
  const redis = await startRedisTopology(t)
  const options = { sessions: { secret: 'x'.repeat(32) } }
  const [a, b] = await pair(t, redis, options)

  const initialize = await rawPost(a.url, initializeBody())
  const session = initialize.headers.get('mcp-session-id')
  t.equal(initialize.status, 200, 'initialize on node A')
  t.ok(session, 'node A minted a session')
  const withSession = { 'mcp-session-id': session ?? '' }

  t.same(await echo(b, 'on b', withSession), { status: 200, text: 'on b' }, 'the session works on node B')

  const deleted = await fetch(a.url, { method: 'DELETE', headers: { ...withSession, 'mcp-protocol-version': '2025-11-25' } })
  t.equal(deleted.status, 204, 'DELETE on node A ⇒ 204')
  const deletedAt = Date.now()
  let refusedAt: number | undefined
  while (Date.now() - deletedAt < 2000) {
    if ((await echo(b, 'after delete', withSession)).status === 404) {
      refusedAt = Date.now()
      break
    }
    await sleep(5)
  }
  t.ok(refusedAt !== undefined && refusedAt - deletedAt <= 100,
    `node B refuses it (404) within 100 ms (${refusedAt === undefined ? 'not within 2 s' : `${refusedAt - deletedAt} ms`})`)
  t.equal((await echo(a, 'after delete', withSession)).status, 404, 'and so does node A')

  const c = await startNode(t, 'node-c', { redis: redis.option(), ...options })
  const listeningAt = Date.now()
  const first = await echo(c, 'late node, first request', withSession)
  t.equal(first.status, 404, `a node started after the deletion refuses the session from its first request (got ${first.status})`)
  const caughtUp = await waitFor(async () => (await echo(c, 'late node', withSession)).status === 404, 3000)
  t.ok(caughtUp, `the late node refuses it once it has caught up from Redis (${Date.now() - listeningAt} ms after listening)`)
  t.same(await echo(c, 'sessionless', {}), { status: 200, text: 'sessionless' }, 'while the late node serves requests without that session')
})

t.test('Redis outage while running', { skip: outage }, async t => {
  const redis = await RedisServer.start(t)
  const [a, b] = await pair(t, [redis.url, redis.url])
  const busErrorsBefore = { a: await metricValue(a.url, BUS_ERRORS), b: await metricValue(b.url, BUS_ERRORS) }
  t.equal(busErrorsBefore.b, 0, `${BUS_ERRORS} is exported (0 before the outage)`)
  t.same([await metricValue(a.url, BUS_CONNECTED), await metricValue(b.url, BUS_CONNECTED)], [1, 1], `${BUS_CONNECTED} is 1 on both nodes`)
  t.same([errorLines(a).length, errorLines(b).length], [0, 0], 'no error logged while Redis is up')

  // Echo calls on both nodes, one after another, from before the outage until after recovery.
  const echoes: Array<{ node: string, status: number, ok: boolean, at: number }> = []
  const stopEchoing = new AbortController()
  const echoLoop = (async () => {
    for (let i = 0; !stopEchoing.signal.aborted; i++) {
      const node = i % 2 === 0 ? a : b
      const { status, text } = await echo(node, `e${i}`)
      echoes.push({ node: node.name, status, ok: text === `e${i}`, at: Date.now() })
      await sleep(10)
    }
  })()
  await sleep(100)

  await redis.stop()
  const stoppedAt = Date.now()

  t.test('during the outage', async t => {
    const local = await startProbe(a, 30_000)
    t.equal(await sendCancel(a, local.id, 'local'), 202, 'a local cancel is answered 202')
    t.ok(await waitFor(() => local.call()?.abortedAt !== undefined, 1000), 'a cancel POSTed to the node running the tool still aborts it')
    t.equal((await within(local.http.done, 2000, undefined))?.status, 202, 'and the cancelled call is answered 202')

    const statuses = new Set<number>()
    for (let i = 0; i < 20; i++) statuses.add(await sendCancel(b, `elsewhere-${i}`, 'remote'))
    t.same([...statuses], [202], 'cancels for requests not on the receiving node are still answered 202')

    t.ok(await waitFor(() => errorLines(a).length > 0 && errorLines(b).length > 0, 3000), 'each node logs the outage')
    await sleep(Math.max(0, 1500 - (Date.now() - stoppedAt))) // several reconnect attempts and dropped publishes later…
    const lines = { a: errorLines(a), b: errorLines(b) }
    t.equal(lines.a.length, 1, `node A logged exactly one error line for the outage (${lines.a.length})`, { lines: lines.a.map(l => l.msg) })
    t.equal(lines.b.length, 1, `node B logged exactly one error line for the outage (${lines.b.length})`, { lines: lines.b.map(l => l.msg) })
    t.match(String(lines.b[0]?.msg), /redis/i, 'naming Redis')

    const after = { a: await metricValue(a.url, BUS_ERRORS), b: await metricValue(b.url, BUS_ERRORS) }
    t.ok((after.b ?? 0) > (busErrorsBefore.b ?? 0), `${BUS_ERRORS} increases on node B (${String(busErrorsBefore.b)} → ${String(after.b)})`)
    t.ok((after.a ?? 0) > (busErrorsBefore.a ?? 0), `${BUS_ERRORS} increases on node A (${String(busErrorsBefore.a)} → ${String(after.a)})`)
    t.same([await metricValue(a.url, BUS_CONNECTED), await metricValue(b.url, BUS_CONNECTED)], [0, 0], `${BUS_CONNECTED} says so on both nodes`)
  })

  let restartAt = Infinity
  t.test('after Redis returns', async t => {
    restartAt = Date.now()
    await redis.start()
    const elapsed = await untilCrossNodeWorks(a, b, restartAt, RECOVERY_MS)
    t.ok(elapsed !== undefined, `cross-node cancellation works again within ${RECOVERY_MS} ms (${elapsed === undefined ? 'never' : `${elapsed} ms`})`)
    t.ok(await crossNodeCancelWorks(b, a, 1000), 'in both directions')

    t.same([errorLines(a).length, errorLines(b).length], [1, 1], 'the whole outage, recovery included, cost each node one error line')
    t.same([await metricValue(a.url, BUS_CONNECTED), await metricValue(b.url, BUS_CONNECTED)], [1, 1], `${BUS_CONNECTED} is 1 again`)

    stopEchoing.abort()
    await echoLoop
    const failed = echoes.filter(e => e.status !== 200 || !e.ok).map(({ node, status }) => ({ node, status }))
    const duringOutage = echoes.filter(e => e.at > stoppedAt && e.at < restartAt).length
    t.ok(duringOutage >= 5, `echo calls kept being answered during the outage (${duringOutage} of ${echoes.length})`)
    t.same(failed, [], 'every echo call answered 200 with its text, before, during and after the outage')
  })

  t.test('a second outage is logged once more', async t => {
    await redis.stop()
    t.ok(await waitFor(() => errorLines(b).length >= 2, 3000), 'node B logs the new outage')
    await sleep(800)
    t.equal(errorLines(b).length, 2, 'once')
  })
})

t.test('Redis unreachable at start', { skip: outage }, async t => {
  const redis = await RedisServer.start(t, { running: false })
  const startedAt = Date.now()
  const a = await within(startNode(t, 'node-a', { redis: redis.url }), 3000, undefined)
  const b = await within(startNode(t, 'node-b', { redis: redis.url }), 3000, undefined)
  const startup = Date.now() - startedAt
  if (a === undefined || b === undefined) {
    t.fail('app.ready() never resolved while Redis was unreachable')
    return
  }
  t.ok(startup < 1000, `both nodes started and listen quickly (${startup} ms)`)

  t.same(await echo(a, 'up'), { status: 200, text: 'up' }, 'and serve requests')
  const local = await startProbe(b, 30_000)
  t.equal(await sendCancel(b, local.id, 'local'), 202, 'a local cancel is answered 202')
  t.ok(await waitFor(() => local.call()?.abortedAt !== undefined, 1000), 'local cancellation works')
  await local.http.done.catch(() => {})

  await sleep(1200) // a dozen reconnect attempts
  t.equal(errorLines(a).length, 1, `node A logged one error (${errorLines(a).length})`, { lines: errorLines(a).map(l => l.msg) })
  t.equal(errorLines(b).length, 1, `node B logged one error (${errorLines(b).length})`, { lines: errorLines(b).map(l => l.msg) })

  const restartAt = Date.now()
  await redis.start()
  const elapsed = await untilCrossNodeWorks(a, b, restartAt, RECOVERY_MS)
  t.ok(elapsed !== undefined, `once Redis starts, cross-node cancellation works within ${RECOVERY_MS} ms (${elapsed === undefined ? 'never' : `${elapsed} ms`})`)
  t.ok(await crossNodeCancelWorks(b, a, 1000), 'in both directions')
})

/** `offlineQueue` is private in ioredis's typings; it is what would grow if commands were buffered. */
function queued (client: Redis): { offline: number, command: number } {
  const internals = client as unknown as { offlineQueue: { length: number }, commandQueue: { length: number } }
  return { offline: internals.offlineQueue.length, command: internals.commandQueue.length }
}

t.test('no buffering while Redis is down: 2 000 cross-node cancels, then nothing stale delivered', { skip: outage }, async t => {
  const redis = await RedisServer.start(t)
  const clients: [Redis, Redis] = [new Redis(redis.url), new Redis(redis.url)]
  for (const client of clients) {
    client.on('error', () => {})
    t.teardown(() => { client.disconnect() })
  }
  const [a, b] = await pair(t, clients)
  const clientB = clients[1]

  await redis.stop()
  t.ok(await waitFor(() => clientB.status !== 'ready', 2000), `node B's client noticed the outage (${clientB.status})`)

  let maxQueued = 0
  const statuses = await cancelFlood(b, Array.from({ length: 2000 }, (_, i) => i + 1), 25, () => {
    const { offline, command } = queued(clientB)
    maxQueued = Math.max(maxQueued, offline, command)
  })
  t.same(statuses, { 202: 2000 }, 'all 2 000 cancels answered 202')
  t.equal(maxQueued, 0, 'the ioredis client never queued a command (offline and command queues stayed empty)')
  t.same([b.app.mcpCancellation.rows, a.app.mcpCancellation.rows], [0, 0], 'and no node kept a row for them')

  // Requests reusing cancelled ids start after the cancels and run through Redis's return.
  const reused = [1, 1000, 2000]
  const probes = await Promise.all(reused.map(async id => await startProbe(a, 30_000, { id })))

  const restartAt = Date.now()
  await redis.start()
  const elapsed = await untilCrossNodeWorks(a, b, restartAt, 10_000)
  t.ok(elapsed !== undefined, `cross-node cancellation resumed (${elapsed === undefined ? 'never' : `${elapsed} ms`})`)
  await sleep(200)
  t.same(probes.map(probe => probe.call()?.abortedAt), reused.map(() => undefined),
    'none of the stale cancels was delivered: requests reusing their ids keep running')
  // The bus's heartbeat ping may be on its way at any moment: empty within a round trip, not at an instant.
  t.ok(await waitFor(() => { const { offline, command } = queued(clientB); return offline + command === 0 }, 500), 'the client\'s queues are empty', queued(clientB))

  for (const probe of probes) await sendCancel(a, probe.id, 'done')
  t.ok(await waitFor(() => probes.every(probe => probe.call()?.endedAt !== undefined), 2000), 'and stop when cancelled for real')
  t.ok(await drained([a.app, b.app]), 'nothing left on either node')
})

t.test('ownership of the Redis connection', { skip }, async t => {
  const redis = await startRedisTopology(t)

  t.test('a caller\'s ioredis client is used, and still usable after app.close()', async t => {
    const clients = [redis.client(t), redis.client(t)] as const
    const [a, b] = await pair(t, [clients[0], clients[1]])
    t.ok(await crossNodeCancelWorks(a, b, 1000), 'cross-node cancellation works through the callers\' clients')
    await a.app.close()
    await b.app.close()
    t.equal(clients[0].status, 'ready', 'the client is still connected')
    t.equal(await clients[0].ping(), 'PONG', 'and answers')
    t.equal(await clients[0].set('mcp-test:owned', 'yes'), 'OK')
    t.equal(await clients[1].get('mcp-test:owned'), 'yes', 'both of them')
  })

  t.test('a client created with lazyConnect works too', async t => {
    const clients = [redis.client(t, { lazyConnect: true }), redis.client(t, { lazyConnect: true })] as const
    const a = await startNode(t, 'node-a', { redis: clients[0] })
    const b = await startNode(t, 'node-b', { redis: clients[1] })
    const elapsed = await untilCrossNodeWorks(a, b, Date.now(), 3000)
    t.ok(elapsed !== undefined, `cross-node cancellation works within 3000 ms (${elapsed === undefined ? `never; client status ${clients[1].status}` : `${elapsed} ms`})`,
      { errorsLogged: errorLines(b).map(line => `${String(line.msg)}: ${String((line.err as { message?: unknown } | undefined)?.message)}`) })
  })

  t.test('with a URL, close() leaves no open handle behind', {
    skip: topology === 'sentinel' && 'under Sentinel a node is given a client, never a URL: the plugin opens no connection of its own'
  }, async t => {
    const before = activeResources()
    const app = Fastify({ logger: false })
    await app.register(mcpCancellation, { redis: redis.option() })
    await app.listen({ host: '127.0.0.1', port: 0 })
    const url = new URL(`http://127.0.0.1:${(app.server.address() as { port: number }).port}/mcp`)
    // The cancel finds nothing in flight here, so it is published: the connection is really used.
    const subscribed = await waitFor(async () => await redis.subscribers('mcp:cancel') > 0, 3000)
    t.ok(subscribed, 'the node subscribed to its channel')
    const cancel = openPost(url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'x' } })
    t.equal((await cancel.done).status, 202, 'a cancel for an id not in flight here is answered (and published)')
    await app.close()
    const grown = await resourcesSettle(before, 3000)
    t.same(grown, {}, 'no handle left (process.getActiveResourcesInfo())')
  })
})
