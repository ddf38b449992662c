/**
 * A task is acknowledged by a replica before its CreateTaskResult is sent (`WAIT`), so that a failover
 * right after cannot lose a task its client was told of. The replica replicates through a latency proxy
 * (test/helpers/tcp-proxy.ts), so that without the wait it would still lack the task when the result
 * arrives; paused, it never acknowledges: the task is created all the same after
 * `taskReplicationTimeoutMs`, and that is logged and counted.
 */
import t from 'tap'
import { Redis } from 'ioredis'
import { metricValue } from '../helpers/metrics.js'
import { RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import { startTaskNode, TaskTools } from '../helpers/task-nodes.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'
import { waitFor } from '../helpers/wait.js'

const skip = redisSkipReason(t)
const REPLICATION_LATENCY_MS = 150
const TIMEOUT_MS = 400

t.test('a new task is on the replica when its CreateTaskResult arrives; without a replica answering, it is created after the timeout, logged and counted', { skip }, async t => {
  const primary = await RedisServer.start(t)
  const link = await TcpProxy.start(t, primary.port, REPLICATION_LATENCY_MS)
  // Loaded from the socket, never written to disk: nothing lands in the working directory.
  const replica = await RedisServer.start(t, { args: ['--replicaof', '127.0.0.1', String(link.port), '--repl-diskless-sync-delay', '0', '--repl-diskless-load', 'on-empty-db'] })
  const onReplica = new Redis(replica.url, { maxRetriesPerRequest: 1 })
  t.teardown(() => { onReplica.disconnect() })
  t.ok(await waitFor(async () => /master_link_status:up/.test(await onReplica.info('replication')), 10_000), 'the replica is in sync')

  const tools = new TaskTools()
  const node = await startTaskNode(t, 'node-a', tools, { redis: primary.url, taskReplicationTimeoutMs: TIMEOUT_MS })
  const missing: string[] = []
  for (let i = 0; i < 10; i++) {
    const taskId = await node.client.create('hold', { tag: `replicated-${i}` })
    if (await onReplica.exists(`mcp:task:${taskId}`) !== 1) missing.push(taskId)
  }
  t.same(missing, [], `each of 10 tasks was on the replica when its CreateTaskResult arrived (replication ${REPLICATION_LATENCY_MS} ms behind)`)
  t.same(node.logs().filter(line => /replica/.test(String(line.msg))), [], 'no warning about replicas')

  link.pause()
  const before = await metricValue(node.url, 'mcp_bus_errors_total') ?? 0
  const startedAt = Date.now()
  const taskId = await node.client.create('hold', { tag: 'unreplicated' })
  const took = Date.now() - startedAt
  t.ok(taskId.length > 0, 'with the replica stalled, the task is still created')
  t.ok(took >= TIMEOUT_MS - 20 && took < TIMEOUT_MS + 1000, `after taskReplicationTimeoutMs (${took} ms)`)
  t.ok(node.logs().some(line => line.taskId === taskId && /no Redis replica acknowledged/.test(String(line.msg))), 'a warning names the task')
  t.equal(await metricValue(node.url, 'mcp_bus_errors_total'), before + 1, 'counted in mcp_bus_errors_total')
  link.resume()
  for (let i = 0; i < 10; i++) tools.open(`replicated-${i}`)
  tools.open('unreplicated')
})

t.test('without replicas nothing waits', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const node = await startTaskNode(t, 'alone', new TaskTools(), { redis: redis.url, taskReplicationTimeoutMs: 5000 })
  const startedAt = Date.now()
  await node.client.create('hold', { tag: 'alone' })
  t.ok(Date.now() - startedAt < 1000, `created at once (${Date.now() - startedAt} ms)`)
})
