/**
 * Registering the plugin: a second registration where it cannot work fails at register time with an
 * `FST_MCP_*` error that names the option to change (never Fastify's FST_ERR_DEC_ALREADY_PRESENT or
 * FST_ERR_DUPLICATED_ROUTE), two instances in sibling contexts with their own paths work side by side,
 * and `fastify.mcpCancellation` is the documented API and nothing more.
 */
import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import { Cluster, Redis } from 'ioredis'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { json, post, postLegacy } from '../helpers/inject.js'
import { LEGACY_HEADERS } from '../helpers/jsonrpc.js'
import type { Teardown } from '../helpers/teardown.js'
import { registerEcho } from '../helpers/tools.js'

function app (t: Teardown): FastifyInstance {
  const fastify = Fastify({ logger: false })
  t.teardown(() => fastify.close())
  return fastify
}

/** Registers `options` in a context of its own (a sibling of every other) with an `echo` tool that says `who`. */
function instance (fastify: FastifyInstance, who: string, options: McpCancellationOptions, prefix?: string): void {
  void fastify.register(async child => {
    await child.register(mcpCancellation, options)
    child.mcp.tool<{ text: string }>({
      name: 'echo',
      inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
      handler: ({ text }) => ({ content: [{ type: 'text', text: `${who}: ${text}` }] })
    })
  }, prefix === undefined ? {} : { prefix })
}

async function echoAt (fastify: FastifyInstance, url: string): Promise<string | undefined> {
  const response = await fastify.inject({
    method: 'POST',
    url,
    headers: LEGACY_HEADERS,
    payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' } } }
  })
  return (JSON.parse(response.body) as { result?: { content?: Array<{ text?: string }> } }).result?.content?.[0]?.text
}

t.test('registering twice in one context is FST_MCP_ALREADY_REGISTERED, not a decorator clash', async t => {
  const fastify = app(t)
  await fastify.register(mcpCancellation)
  await t.rejects(async () => { await fastify.register(mcpCancellation, { path: '/other', metrics: { path: '/other-metrics' } }) }, {
    code: 'FST_MCP_ALREADY_REGISTERED',
    message: /encapsulated context of its own/
  })
})

t.test('an instance in a child of a context that has one is refused too (decorators are inherited)', async t => {
  const fastify = app(t)
  await fastify.register(mcpCancellation)
  await t.rejects(async () => {
    await fastify.register(async child => { await child.register(mcpCancellation, { path: '/inner', metrics: { path: '/inner-metrics' } }) })
  }, { code: 'FST_MCP_ALREADY_REGISTERED' })
})

t.test('two sibling instances on the same endpoint path: FST_MCP_ROUTE_CONFLICT naming "path"', async t => {
  const fastify = app(t)
  instance(fastify, 'a', {})
  instance(fastify, 'b', { metrics: { path: '/b-metrics' } })
  await t.rejects(async () => { await fastify.ready() }, {
    code: 'FST_MCP_ROUTE_CONFLICT',
    message: 'Option "path": POST /mcp is already routed; give this instance another path'
  })
})

t.test('two sibling instances on the same metrics path: FST_MCP_ROUTE_CONFLICT naming "metrics.path"', async t => {
  const fastify = app(t)
  instance(fastify, 'a', {})
  instance(fastify, 'b', { path: '/b' })
  await t.rejects(async () => { await fastify.ready() }, {
    code: 'FST_MCP_ROUTE_CONFLICT',
    message: 'Option "metrics.path": GET /metrics is already routed; give this instance another metrics.path'
  })
})

t.test("the application's own route where the endpoint or the metrics would go is a conflict too", async t => {
  const own = app(t)
  own.get('/metrics', async () => 'mine')
  await t.rejects(async () => { await own.register(mcpCancellation) }, { code: 'FST_MCP_ROUTE_CONFLICT', message: /"metrics\.path": GET \/metrics/ })

  const docs = app(t)
  docs.get('/mcp', async () => 'documentation')
  await t.rejects(async () => { await docs.register(mcpCancellation) }, { code: 'FST_MCP_ROUTE_CONFLICT', message: /"path": GET \/mcp/ })
})

t.test('one instance with metrics.path equal to path is an invalid option', async t => {
  await t.rejects(async () => { await app(t).register(mcpCancellation, { path: '/x', metrics: { path: '/x' } }) }, {
    code: 'FST_MCP_INVALID_OPTION',
    message: /"metrics\.path": must differ from "path"/
  })
})

t.test('two instances in sibling contexts with their own path and metrics.path serve side by side', async t => {
  const fastify = app(t)
  instance(fastify, 'a', { path: '/a/mcp', metrics: { path: '/a/metrics' } })
  instance(fastify, 'b', { path: '/b/mcp', metrics: { path: '/b/metrics' } })
  await fastify.ready()
  t.equal(await echoAt(fastify, '/a/mcp'), 'a: hi', 'instance a answers with its own tool')
  t.equal(await echoAt(fastify, '/b/mcp'), 'b: hi', 'instance b answers with its own tool')
  for (const who of ['a', 'b']) {
    const metrics = await fastify.inject({ method: 'GET', url: `/${who}/metrics` })
    t.equal(metrics.statusCode, 200, `/${who}/metrics is served`)
    t.match(metrics.body, /mcp_tool_calls_total\{tool="echo",outcome="ok"\} 1\n/, `and counts only ${who}'s call`)
  }
})

t.test('the same path under two register prefixes is no conflict', async t => {
  const fastify = app(t)
  instance(fastify, 'a', {}, '/tenant-a')
  instance(fastify, 'b', {}, '/tenant-b')
  await fastify.ready()
  t.equal(await echoAt(fastify, '/tenant-a/mcp'), 'a: hi')
  t.equal(await echoAt(fastify, '/tenant-b/mcp'), 'b: hi')
})

t.test('fastify.mcpCancellation is the documented API: the registry itself is out of reach', async t => {
  const fastify = app(t)
  await fastify.register(mcpCancellation)
  const api = fastify.mcpCancellation
  t.same(Object.keys(api).sort(), [
    'cancel', 'cancelRequest', 'cancelled', 'cleanup', 'clear', 'inFlight', 'inFlightRows', 'reason', 'rows', 'scope', 'track', 'untrack', 'validRequestId'
  ], 'exactly the documented members')
  for (const internal of ['admit', 'begin', 'finish', 'shutdown', 'store', 'startTimers', 'close', 'disconnected', 'cancelFromNotification', 'exchangeCancelled']) {
    t.notOk(internal in api, `${internal} is not reachable`)
  }
  t.ok(Object.isFrozen(api), 'and it cannot be changed')
  const { cancel, cancelled } = api
  t.equal(cancel({ requestId: 7, scope: 'ip:192.0.2.1', reason: 'operator' }), 'recorded', 'members work detached')
  t.ok(cancelled(7, 'ip:192.0.2.1'))
  t.equal(api.reason(7, 'ip:192.0.2.1'), 'operator')
  t.equal(api.rows, 1)
})

t.test('cancel takes an options object: a positional call is a TypeError, not a silent swap', async t => {
  const fastify = app(t)
  await fastify.register(mcpCancellation)
  const positional = fastify.mcpCancellation.cancel as unknown as (...args: unknown[]) => unknown
  t.throws(() => positional(1, 'why', 'ip:192.0.2.1'), { name: 'TypeError', message: /\{ requestId, scope, reason\? \}/ })
  t.throws(() => fastify.mcpCancellation.cancel({ requestId: 1, scope: undefined as unknown as string }), TypeError)
  t.equal(fastify.mcpCancellation.rows, 0, 'nothing was recorded')
})

t.test('fastify.mcpMetrics is the registry the metrics live in', async t => {
  const fastify = app(t)
  await fastify.register(mcpCancellation)
  await fastify.ready()
  t.match(await fastify.mcpMetrics?.metrics(), /# TYPE mcp_requests_total counter/)
})

t.test('redis: a wrong value is refused at register time; an unreachable client or Cluster seed list starts, serving locally', async t => {
  for (const redis of [42, [], ['http://127.0.0.1:6379'], ['redis://127.0.0.1:7000', 7001], 'redis://', { publish: () => 1 }]) {
    await t.rejects(async () => { await app(t).register(mcpCancellation, { redis: redis as never }) }, {
      code: 'FST_MCP_INVALID_OPTION',
      message: /"redis": must be a redis:\/\/ or rediss:\/\/ URL, a non-empty list of them \(the seeds of a Redis Cluster\), or an ioredis client/
    }, `${JSON.stringify(redis)} is refused`)
  }
  // Unreachable: the plugin starts anyway (cancellation stays local) and never closes a client it was given.
  const client = new Redis({ port: 1, lazyConnect: true, retryStrategy: () => null, enableOfflineQueue: false })
  client.on('error', () => {})
  t.teardown(() => { client.disconnect() })
  const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true, clusterRetryStrategy: () => null, enableOfflineQueue: false })
  cluster.on('error', () => {})
  t.teardown(() => { cluster.disconnect() })
  for (const [what, redis] of [['a Redis client', client], ['a Cluster client', cluster], ['a seed list', ['redis://127.0.0.1:1', 'redis://127.0.0.1:2']]] as const) {
    const fastify = app(t)
    await fastify.register(mcpCancellation, { redis: redis as never })
    registerEcho(fastify)
    await fastify.ready()
    t.equal(json(await postLegacy(fastify, 'tools/call', { name: 'echo', arguments: { text: 'hi' } })).result?.content?.[0]?.text, 'hi', `${what}: served`)
    const cancel = await post(fastify, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'nobody' } }, { 'mcp-protocol-version': '2025-11-25' })
    t.equal(cancel.statusCode, 202, `${what}: a cancel is answered, no crash`)
  }
})
