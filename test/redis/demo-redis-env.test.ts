/**
 * The demo's Redis environment and its readiness route: MCP_REDIS_URL (one URL, or a comma list of a
 * Cluster's seeds), MCP_REDIS_SENTINELS with MCP_REDIS_SENTINEL_NAME (a primary Sentinel manages), each
 * against the real topology; `GET /health` stays 200 while the node serves, `GET /ready` is 200 only
 * while Redis is connected and the revocations are known (`fastify.mcpReadiness()`), 503 otherwise.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, type DemoEnv } from '../../example/app.js'
import { listenOn } from '../helpers/listen.js'
import { RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import { startRedisCluster } from '../helpers/redis-cluster.js'
import { startRedisSentinel } from '../helpers/redis-sentinel.js'
import { waitFor } from '../helpers/wait.js'
import { rawPost } from '../helpers/http.js'
import { toolCall } from '../helpers/jsonrpc.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const skip = redisSkipReason(t, ['redis-server', 'redis-sentinel', 'redis-cli'])
const SESSION_SECRET = 'demo-session-secret-of-32-bytes-or-more!'

async function demo (t: Tap, env: DemoEnv): Promise<{ app: FastifyInstance, url: URL }> {
  const app = await buildApp({ MCP_SESSION_SECRET: SESSION_SECRET, ...env })
  return { app, url: await listenOn(t, app) }
}

async function readiness (url: URL): Promise<{ status: number, body: Record<string, unknown> }> {
  const response = await fetch(new URL('/ready', url))
  return { status: response.status, body: await response.json() as Record<string, unknown> }
}

const READY = { status: 'ready', ready: true, redis: 'connected', revocations: 'synced' }

t.test('MCP_REDIS_URL: ready while Redis is connected; not ready (503) while it is away, alive all along', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const node = await demo(t, { MCP_REDIS_URL: redis.url })
  t.same(await readiness(node.url), { status: 200, body: READY })
  await redis.stop()
  t.ok(await waitFor(async () => (await readiness(node.url)).status === 503, 3000), 'not ready once Redis is gone')
  t.match((await readiness(node.url)).body, { status: 'not ready', ready: false, redis: 'disconnected' })
  t.equal((await fetch(new URL('/health', node.url))).status, 200, 'alive: the node serves')
  t.match(await rawPost(node.url, toolCall(1, 'echo', { text: 'without redis' })), { status: 200, text: /without redis/ }, 'and answers MCP')
  await redis.start()
  t.ok(await waitFor(async () => (await readiness(node.url)).status === 200, 5000), 'ready again once Redis is back and the revocations are synced')
})

t.test('MCP_REDIS_URL with a comma list: the seeds of a Redis Cluster', { skip }, async t => {
  const cluster = await startRedisCluster(t)
  const node = await demo(t, { MCP_REDIS_URL: cluster.seeds.slice(0, 2).join(', ') })
  t.ok(await waitFor(async () => (await readiness(node.url)).status === 200, 5000), 'ready on the Cluster')
  t.same(await readiness(node.url), { status: 200, body: READY })
})

t.test('MCP_REDIS_SENTINELS and MCP_REDIS_SENTINEL_NAME: a primary that Sentinel manages', { skip }, async t => {
  const sentinel = await startRedisSentinel(t)
  const node = await demo(t, {
    MCP_REDIS_SENTINELS: sentinel.sentinels.map(({ host, port }) => `${host}:${port}`).join(','),
    MCP_REDIS_SENTINEL_NAME: sentinel.name
  })
  t.ok(await waitFor(async () => (await readiness(node.url)).status === 200, 5000), 'ready through the sentinels')
  t.same(await readiness(node.url), { status: 200, body: READY })
})

t.test('a Redis environment the demo cannot use stops it at startup, saying why', async t => {
  const refusals: Array<[DemoEnv, RegExp]> = [
    [{ MCP_REDIS_SENTINELS: '127.0.0.1:26379' }, /MCP_REDIS_SENTINELS needs MCP_REDIS_SENTINEL_NAME/],
    [{ MCP_REDIS_SENTINELS: '127.0.0.1', MCP_REDIS_SENTINEL_NAME: 'mymaster' }, /MCP_REDIS_SENTINELS: "127.0.0.1" is not host:port/],
    [{ MCP_REDIS_SENTINELS: '127.0.0.1:26379', MCP_REDIS_SENTINEL_NAME: 'mymaster', MCP_REDIS_URL: 'redis://127.0.0.1:6379' }, /give one of them/],
    [{ MCP_REDIS_URL: 'redis://127.0.0.1:7000,http://127.0.0.1:7001' }, /"redis": must be a redis:\/\/ or rediss:\/\/ URL, a non-empty list of them/]
  ]
  for (const [env, message] of refusals) await t.rejects(buildApp(env), { message }, JSON.stringify(env))
})

t.test('without Redis the node is always ready', async t => {
  const node = await demo(t, {})
  t.same(await readiness(node.url), { status: 200, body: { status: 'ready', ready: true, redis: 'none', revocations: 'none' } })
})
