/**
 * Another program on the same Redis publishes on the plugin's channels (issue 24, bad input): whatever
 * it sends (not JSON, JSON that is not an object, objects of every wrong shape on each topic) is ignored
 * and counted in `mcp_bus_errors_total`, never applied and never a crash; the node keeps serving and
 * cross-node work still flows.
 */
import t from 'tap'
import { Redis } from 'ioredis'
import { echo, startNode } from '../helpers/cluster.js'
import { metricValue } from '../helpers/metrics.js'
import { channels } from '../helpers/redis.js'
import { RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

const skip = redisSkipReason(t)
const SECRET = 'bus-garbage-secret-0123456789abcdef0123'

/** Not a JSON object: each is ignored and counted. */
const NOT_OBJECTS = ['{', 'null', '42', '"text"', '[]', '[{"type":"renew"}]', '']
/** JSON objects of wrong shapes for every topic: each is ignored by its receiver (no count: the bus cannot tell). */
const WRONG_SHAPES: unknown[] = [
  {}, { type: 'renew' }, { type: 'renew', consumers: null }, { type: 'frames', consumer: 'c', frames: 'x' },
  { type: 'resume', consumer: 'c', from: 'x', stream: 's', after: 'a', scope: 's', session: 1 },
  { op: 'cancel' }, { op: 'update', taskId: 'x', inputResponses: 'no' }, { id: 7, result: 'x' }, { requestId: { a: 1 } },
  { kind: 'list_changed', list: 'nope' }, { kind: 'resource_updated', uri: 42 }, { session: 5 }, { origin: 'elsewhere', trace: 'x' }
]

t.test('garbage on every channel of a node: ignored (the not-JSON counted), nothing applied, no crash; the node serves on', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const inspect = new Redis(redis.url, { maxRetriesPerRequest: 1 })
  inspect.on('error', () => {})
  t.teardown(() => { inspect.disconnect() })
  const node = await startNode(t, 'target', { redis: redis.url, secret: SECRET, sessions: { secret: SECRET } })
  t.ok(await waitFor(async () => (await channels(inspect, 'mcp:*')).length >= 3, 10_000), 'the node subscribed to its channels')
  const all = await channels(inspect, 'mcp:*')
  const before = await metricValue(node.url, 'mcp_bus_errors_total') ?? 0

  for (const channel of all) {
    for (const text of NOT_OBJECTS) await inspect.publish(channel, text)
    for (const message of WRONG_SHAPES) await inspect.publish(channel, JSON.stringify(message))
  }
  const expected = before + all.length * NOT_OBJECTS.length
  t.ok(await waitFor(async () => await metricValue(node.url, 'mcp_bus_errors_total') === expected, 5000),
    `each message that is not a JSON object is counted (${all.length} channels × ${NOT_OBJECTS.length}; ${await metricValue(node.url, 'mcp_bus_errors_total')})`)
  t.same(await echo(node, 'still here'), { status: 200, text: 'still here' }, 'the node still serves')
  t.same(node.logs().filter(line => Number(line.level) >= 50), [], 'and logged no error: no handler threw')
  t.equal(node.app.mcpCancellation.inFlightRows, 0, 'nothing was applied: nothing in flight')
})

t.test('a message larger than any of the plugin\'s (16 Mi characters) is ignored unparsed and counted', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const inspect = new Redis(redis.url, { maxRetriesPerRequest: 1 })
  inspect.on('error', () => {})
  t.teardown(() => { inspect.disconnect() })
  const node = await startNode(t, 'target', { redis: redis.url, secret: SECRET })
  t.ok(await waitFor(async () => (await channels(inspect, 'mcp:cancel')).length === 1, 10_000), 'the node subscribed')
  const before = await metricValue(node.url, 'mcp_bus_errors_total') ?? 0
  const huge = JSON.stringify({ scope: 'ip:127.0.0.1', requestId: 1, reason: 'x'.repeat(17 * 1024 * 1024) })
  await inspect.publish('mcp:cancel', huge)
  t.ok(await waitFor(async () => await metricValue(node.url, 'mcp_bus_errors_total') === before + 1, 10_000), 'counted once')
  t.same(await echo(node, 'still here'), { status: 200, text: 'still here' }, 'the node still serves')
})
