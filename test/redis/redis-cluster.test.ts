/**
 * The plugin on a real Redis Cluster: three primaries, three replicas (test/helpers/redis-cluster.ts),
 * nodes given the seed URLs. Cross-node cancellation, session revocations (a node started later finds
 * them on the primary holding them), tasks (created on one node, read, cancelled and answered through
 * another), the answer relay of a legacy ask, and node messages on sharded channels: each store's keys
 * in one slot (its hash tag), each node's channels on one shard. A Cluster without sharded pub/sub
 * (Redis < 7, simulated by renaming the commands away) falls back to plain channels, with a warning.
 */
import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { Cluster } from 'ioredis'
import { CLUSTER_PUBLISHER_OPTIONS, RedisBus } from '../../lib/cluster/redis-bus.js'
import { legacyCall, rawPost } from '../helpers/http.js'
import { initializeBody, sseMessages } from '../helpers/jsonrpc.js'
import { silentLogger } from '../helpers/logs.js'
import { crossNodeCancelWorks, echo, startNode, untilCrossNodeWorks, type Node } from '../helpers/cluster.js'
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js'
import { redisSkipReason } from '../helpers/redis-server.js'
import { startTaskNode, TaskTools, type TaskNode } from '../helpers/task-nodes.js'
import type { McpCancellationOptions } from '../../lib/index.js'
import { waitFor } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const skip = redisSkipReason(t, ['redis-server', 'redis-cli'])
const SECRET = 'redis-cluster-test-secret-0123456789abcdef'
const TERMINAL = ['completed', 'failed', 'cancelled']
/** A fresh cluster needs a moment before every node has subscribed on every shard. */
const WARM_UP_MS = 10_000

/** The cluster's seeds as ioredis' `Cluster` takes them. */
function seedNodes (cluster: RedisCluster): Array<{ host: string, port: number }> {
  return cluster.seeds.map(seed => { const url = new URL(seed); return { host: url.hostname, port: Number(url.port) } })
}

/** An inspecting client of the test's own (the plugin's are the nodes'). */
function inspector (t: Tap, cluster: RedisCluster): Cluster {
  const client = new Cluster(seedNodes(cluster))
  client.on('error', () => {})
  t.teardown(() => { client.disconnect() })
  return client
}

/** Every key on every primary matching `pattern`. */
async function keysOn (client: Cluster, pattern: string): Promise<string[]> {
  const keys: string[] = []
  for (const node of client.nodes('master')) keys.push(...await node.keys(pattern))
  return keys.sort()
}

async function pair (t: Tap, seeds: readonly string[], options: McpCancellationOptions = {}): Promise<[Node, Node]> {
  const a = await startNode(t, 'node-a', { redis: seeds, secret: SECRET, ...options })
  const b = await startNode(t, 'node-b', { redis: seeds, secret: SECRET, ...options })
  const since = Date.now()
  if (await untilCrossNodeWorks(a, b, since, WARM_UP_MS) === undefined || await untilCrossNodeWorks(b, a, since, WARM_UP_MS) === undefined) {
    t.fail(`the nodes never cancelled across each other within ${WARM_UP_MS} ms of starting`)
  }
  return [a, b]
}

t.test('on a 3-primary, 3-replica Redis Cluster', { skip }, async t => {
  const cluster = await startRedisCluster(t)
  const inspect = inspector(t, cluster)

  t.test('cross-node cancellation, both ways; every channel is a sharded one', async t => {
    const [a, b] = await pair(t, cluster.seeds)
    t.ok(await crossNodeCancelWorks(a, b, 2000), 'a cancel POSTed to B stops the call on A')
    t.ok(await crossNodeCancelWorks(b, a, 2000), 'and the other way')
    const sharded = new Set<string>()
    const plain = new Set<string>()
    // A plain subscription sits on any one node (replicas too); a sharded one on its shard's primary.
    for (const node of inspect.nodes('all')) {
      for (const channel of await node.pubsub('SHARDCHANNELS', 'mcp:*') as string[]) sharded.add(channel)
      for (const channel of await node.pubsub('CHANNELS', 'mcp:*') as string[]) plain.add(channel)
    }
    t.ok([...sharded].some(channel => channel.startsWith('mcp:tasks:')), 'each node\'s own channels are sharded', { sharded: [...sharded] })
    t.ok(sharded.has('mcp:cancel'), 'and so are those every node listens to (one shard carries each, instead of every node)')
    t.same([...plain], [], 'no plain channel: a plain PUBLISH crosses the cluster bus to every node')
  })

  t.test('messages a node publishes at once, to shards it has not used yet, arrive in the order it sent them', async t => {
    // ioredis opens a connection to each primary on first use. While it opens, a Cluster without an offline
    // queue (the plugin's) refused what followed the first message and retried it 100 ms later, behind a
    // message sent meanwhile: a relayed stream showed a live event before the replayed ones.
    const bus = (): RedisBus => {
      const made = new RedisBus({ redis: new Cluster(seedNodes(cluster), CLUSTER_PUBLISHER_OPTIONS), ownsClient: true, prefix: 'order:', maxMessageLength: 1_000_000, log: silentLogger, onError: () => {} })
      t.teardown(async () => { await made.close() })
      return made
    }
    const receiver = bus()
    t.ok(await receiver.started, 'the receiving bus connects')
    // One channel on each shard.
    const byShard = new Map<string, string>()
    for (let i = 0; byShard.size < 3 && i < 1000; i++) {
      const primary = await cluster.primaryFor(receiver.key(`channel-${i}`))
      if (!byShard.has(primary.url)) byShard.set(primary.url, `channel-${i}`)
    }
    const names = [...byShard.values()]
    t.equal(names.length, 3, 'a channel on each of the three shards')
    const received = new Map(names.map(name => [name, [] as unknown[]]))
    for (const name of names) receiver.subscribe(name, message => { received.get(name)!.push(message.n) })
    const subscribed = async (): Promise<boolean> => {
      const counts = await Promise.all(inspect.nodes('master').map(async node => await node.pubsub('SHARDNUMSUB', ...names.map(name => receiver.key(name))) as Array<string | number>))
      return names.every(name => counts.some(count => Number(count[count.indexOf(receiver.key(name)) + 1]) > 0))
    }
    t.ok(await waitFor(subscribed, 5000), 'subscribed on every shard')

    const sender = bus()
    t.ok(await sender.started, 'a new bus connects')
    for (const name of names) {
      void sender.publish(name, { n: 1 })
      void sender.publish(name, { n: 2 })
    }
    await sleep(50)
    for (const name of names) void sender.publish(name, { n: 3 })
    t.ok(await waitFor(() => [...received.values()].every(list => list.length >= 3), 3000), 'every message arrives')
    for (const name of names) t.same(received.get(name), [1, 2, 3], `in order on ${name}'s shard`)
  })

  t.test('revocations: deleted on A, refused on B at once and by a node started later (scanned from the primary holding them)', async t => {
    const options = { sessions: { secret: 'x'.repeat(32) } }
    const [a, b] = await pair(t, cluster.seeds, options)
    const sessions: string[] = []
    for (let i = 0; i < 5; i++) {
      const initialized = await rawPost(a.url, initializeBody(i))
      sessions.push(initialized.headers.get('mcp-session-id') ?? '')
    }
    for (const session of sessions) {
      const deleted = await fetch(a.url, { method: 'DELETE', headers: { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' } })
      t.equal(deleted.status, 204, 'DELETE on A')
    }
    t.ok(await waitFor(async () => (await echo(b, 'x', { 'mcp-session-id': sessions[4]! })).status === 404, 2000), 'B refuses the session')
    const revoked = await keysOn(inspect, 'mcp:{revocations}*')
    t.equal(revoked.length, 5, 'the revocations are in Redis, under one hash tag', { revoked })
    t.equal(new Set(await Promise.all(revoked.map(async key => await cluster.slotOf(key)))).size, 1, 'in one slot')
    const c = await startNode(t, 'node-c', { redis: cluster.seeds, secret: SECRET, ...options })
    for (const session of sessions) t.equal((await echo(c, 'late', { 'mcp-session-id': session })).status, 404, 'a node started later refuses each from its first request')
  })

  t.test('tasks: created on A, read, answered and cancelled through B; the store\'s keys in one slot', async t => {
    const tools = new TaskTools()
    const options = { redis: cluster.seeds, secret: SECRET }
    const a: TaskNode = await startTaskNode(t, 'node-a', tools, options)
    const b: TaskNode = await startTaskNode(t, 'node-b', tools, options)
    await untilCrossNodeWorks(a, b, Date.now(), WARM_UP_MS)

    const held = await a.client.create('hold', { tag: 'held' })
    t.equal((await b.client.get(held)).body.result?.status, 'working', 'B reads the task A created, at once')
    t.equal((await b.client.cancel(held)).body.result?.resultType, 'complete', 'tasks/cancel through B is acknowledged')
    t.ok(await waitFor(() => tools.run('held')?.aborted !== undefined, 3000), 'and reaches the handler on A')
    t.equal((await b.client.waitFor(held, TERMINAL, 3000))?.status, 'cancelled', 'the task ends cancelled, seen on B')

    const asking = await a.client.create('ask', { tag: 'asker' })
    t.equal((await b.client.waitFor(asking, ['input_required', ...TERMINAL], 3000))?.status, 'input_required', 'a task asking, seen on B')
    const updated = await b.client.update(asking, { confirm: { action: 'accept', content: { ok: true } } })
    t.equal(updated.status, 200, 'tasks/update through B')
    t.equal((await b.client.waitFor(asking, TERMINAL, 3000))?.status, 'completed', 'resumes the handler on A, which completes')

    const keys = await keysOn(inspect, 'mcp:{tasks}*')
    t.ok(keys.some(key => key.startsWith('mcp:{tasks}task:')), 'the tasks are under the store\'s hash tag', { keys })
    t.equal(new Set(await Promise.all(keys.map(async key => await cluster.slotOf(key)))).size, 1, 'every key of the store in one slot (its scripts span them)')
  })

  t.test('a legacy ask of a call on A, answered through B, reaches the handler', async t => {
    const tools = new TaskTools()
    const options = { redis: cluster.seeds, secret: SECRET, resumability: false as const }
    const a = await startTaskNode(t, 'node-a', tools, options)
    const b = await startTaskNode(t, 'node-b', tools, options)
    await untilCrossNodeWorks(a, b, Date.now(), WARM_UP_MS)
    const call = legacyCall(a.url, 'ask-1', 'ask', { tag: 'legacy-ask' }, { progressToken: 'p' })
    const asked = (): ReturnType<typeof sseMessages>[number] | undefined => sseMessages(call.text()).find(message => message.method === 'elicitation/create')
    t.ok(await waitFor(() => asked() !== undefined, 3000), 'A sends the ask on the call\'s stream')
    const answered = await rawPost(b.url, { jsonrpc: '2.0', id: asked()?.id, result: { action: 'accept', content: { ok: true } } })
    t.equal(answered.status, 202, 'the answer POSTed to B is accepted')
    const end = await call.done
    t.match(sseMessages(end.text).find(message => message.id === 'ask-1'), { result: { content: [{ text: 'legacy-ask: accept true' }] } }, 'and reaches the handler on A')
  })
})

t.test('a Redis Cluster without sharded pub/sub (the commands renamed away, as on Redis < 7) falls back to plain channels', { skip }, async t => {
  const cluster = await startRedisCluster(t, { args: ['--rename-command', 'SPUBLISH', '', '--rename-command', 'SSUBSCRIBE', ''] })
  const tools = new TaskTools()
  const options = { redis: cluster.seeds, secret: SECRET }
  const a = await startTaskNode(t, 'node-a', tools, options)
  const b = await startTaskNode(t, 'node-b', tools, options)
  await untilCrossNodeWorks(a, b, Date.now(), WARM_UP_MS)
  const held = await a.client.create('hold', { tag: 'unsharded' })
  const ack = await b.client.cancel(held)
  t.equal(ack.body.result?.resultType, 'complete', 'tasks/cancel through B (a node message to A)', { ack: ack.body })
  t.ok(await waitFor(() => tools.run('unsharded')?.aborted !== undefined, 3000), 'reaches the handler on A')
  t.ok(a.logs().some(line => /no sharded pub\/sub/.test(String(line.msg))), 'and the node warned that its messages cross the cluster bus to every node')
})
