/**
 * The Redis topologies a deployment may run on, started by the test itself on loopback ports: a Redis
 * Cluster of 3 primaries and 3 replicas (test/helpers/redis-cluster.ts) and a primary with a replica
 * under three sentinels (test/helpers/redis-sentinel.ts). What is proved is what the plugin's stores
 * and bus would rely on, through ioredis: the cluster serves keys in every shard, multi-key commands
 * within a hash tag only, sharded pub/sub; a killed primary's replica takes over in both topologies
 * and the client finds it by itself. The failover times are printed as comments, not asserted.
 *
 * Without redis-server, redis-cli or redis-sentinel these tests are skipped, except under CI where
 * that is a failure.
 */
import t from 'tap'
import { Cluster, Redis, type ClusterOptions } from 'ioredis'
import { startRedisCluster, type ClusterNode, type RedisCluster } from '../helpers/redis-cluster.js'
import { startRedisSentinel } from '../helpers/redis-sentinel.js'
import { redisSkipReason } from '../helpers/redis-server.js'
import { waitFor, within } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const skip = redisSkipReason(t, ['redis-server', 'redis-cli', 'redis-sentinel'])
/** A write after a failover: the failover itself (2–3 s here) and the client finding the new primary. */
const RECOVERY_MS = 20_000
const MESSAGE_MS = 5000

/**
 * A cluster client with ioredis' defaults, which are enough: a command for a dead primary's slots is
 * retried (`retryDelayOnFailover`, `retryDelayOnClusterDown`) until `maxRedirections` and fails after
 * a second or two; once a replica has taken over, the next one is redirected (MOVED) to it within
 * about 100 ms and the slots are refreshed.
 */
function clusterClient (t: Tap, seeds: string[], options: ClusterOptions = {}): Cluster {
  const client = new Cluster(seeds, options)
  client.on('error', () => {}) // a failover makes errors; the commands' own results are asserted
  t.teardown(() => { client.disconnect() })
  return client
}

/** A client of one node only, which follows no redirection: what that node itself holds. */
function nodeClient (t: Tap, node: ClusterNode): Redis {
  const client = new Redis(node.url, { maxRetriesPerRequest: 1, lazyConnect: true })
  client.on('error', () => {})
  t.teardown(() => { client.disconnect() })
  return client
}

/** One key (or channel) served by each primary, found by trying `<prefix>0`, `<prefix>1`, … */
async function keyPerPrimary (cluster: RedisCluster, prefix = 'key:'): Promise<Map<ClusterNode, string>> {
  const keys = new Map<ClusterNode, string>()
  const primaries = cluster.nodes.filter(node => node.role === 'primary')
  for (let i = 0; keys.size < primaries.length && i < 1000; i++) {
    const owner = await cluster.primaryFor(`${prefix}${i}`)
    if (!keys.has(owner)) keys.set(owner, `${prefix}${i}`)
  }
  return keys
}

/**
 * Retries `write` until it succeeds (each try bounded, 100 ms between tries) or `timeoutMs` passes;
 * the ms from `since` to the first success, or undefined.
 */
async function firstSuccess (write: () => Promise<unknown>, since: number, timeoutMs: number): Promise<number | undefined> {
  let succeeded: number | undefined
  await waitFor(async () => {
    const ok = await within(write().then(() => true, () => false), 2000, false)
    if (ok) succeeded = performance.now() - since
    return ok
  }, timeoutMs, 100)
  return succeeded
}

t.test('a Redis Cluster of 3 primaries and 3 replicas', { skip }, async t => {
  const cluster = await startRedisCluster(t)
  const primaries = cluster.nodes.filter(node => node.role === 'primary')
  t.equal(primaries.length, 3, 'three primaries')
  t.equal(cluster.nodes.filter(node => node.role === 'replica').length, 3, 'three replicas')
  const client = clusterClient(t, cluster.seeds)

  t.test('serves keys in all three shards, each held by its own primary', async t => {
    const keys = await keyPerPrimary(cluster)
    t.equal(keys.size, 3, 'a key for each primary')
    for (const [primary, key] of keys) {
      t.equal(await client.set(key, `on ${primary.port}`), 'OK', `SET ${key} through the cluster client`)
      t.equal(await client.get(key), `on ${primary.port}`, `GET ${key} through the cluster client`)
      t.equal(await nodeClient(t, primary).get(key), `on ${primary.port}`, `the primary on port ${primary.port} holds ${key}`)
      const other = primaries.find(node => node !== primary)!
      await t.rejects(nodeClient(t, other).get(key), /MOVED/, `the primary on port ${other.port} redirects ${key}`)
    }
  })

  t.test('a multi-key command within one hash tag works; across slots it fails with CROSSSLOT', async t => {
    t.equal(await client.mset('{x}a', '1', '{x}b', '2'), 'OK', 'MSET {x}a 1 {x}b 2')
    t.same(await client.mget('{x}a', '{x}b'), ['1', '2'], 'MGET {x}a {x}b')
    t.not(await cluster.slotOf('a'), await cluster.slotOf('b'), 'a and b hash to different slots')
    await t.rejects(client.mset('a', '1', 'b', '2'), /CROSSSLOT/, 'MSET a 1 b 2 ⇒ CROSSSLOT')
  })

  t.test('sharded pub/sub: a subscriber of a channel in each shard gets what is published there', async t => {
    const subscriber = clusterClient(t, cluster.seeds, { shardedSubscribers: true })
    const received: Array<[string, string]> = []
    subscriber.on('smessage', (channel: string, message: string) => { received.push([channel, message]) })
    // A sharded channel lives in the slot of its name, like a key.
    const channels = [...(await keyPerPrimary(cluster, 'channel:')).values()]
    t.equal(channels.length, 3, 'a channel in each shard')
    for (const channel of channels) await subscriber.ssubscribe(channel)
    for (const channel of channels) {
      t.equal(await client.spublish(channel, `to ${channel}`), 1, `SPUBLISH ${channel} reaches one subscriber`)
    }
    t.ok(await waitFor(() => received.length === channels.length, MESSAGE_MS), 'every message arrives')
    t.same(received.sort(), channels.map(channel => [channel, `to ${channel}`]).sort(), 'on its own channel (event smessage)')
  })

  t.test('after SIGKILL of a primary its replica is promoted, and a write to a key of its slots succeeds again', async t => {
    const [victim, key] = [...(await keyPerPrimary(cluster))][0]!
    // Written and replicated before the crash (WAIT), so the promoted replica must have it.
    const direct = nodeClient(t, victim)
    await direct.set(key, 'before')
    t.equal(await direct.call('WAIT', 1, 5000), 1, 'the write reached the replica')
    t.equal(await client.get(key), 'before', 'the cluster client reads it')

    const killedAt = performance.now()
    await cluster.kill(victim)
    const [failoverMs, writeMs] = await Promise.all([
      cluster.waitForFailover(victim),
      firstSuccess(async () => await client.set(key, 'after'), killedAt, RECOVERY_MS)
    ])
    t.comment(`cluster failover: a replica served the slots ${Math.round(failoverMs)} ms after the SIGKILL; the client's first successful write came at ${writeMs === undefined ? 'never' : Math.round(writeMs)} ms`)
    t.not(writeMs, undefined, `a write to ${key} succeeds again within ${RECOVERY_MS} ms`)
    const successor = await cluster.primaryFor(key)
    t.not(successor, victim, `a new primary (port ${successor.port}) serves ${key}`)
    t.equal(victim.role, 'replica', 'the killed primary is a replica from now on')
    t.equal(await nodeClient(t, successor).get(key), 'after', 'the new primary holds the write')

    await cluster.restart(victim)
    t.equal(victim.role, 'replica', 'restarted, the old primary rejoins as a replica')
    t.equal(await nodeClient(t, victim).call('ROLE').then(role => (role as unknown[])[0]), 'slave', 'it says so itself')
  })
})

t.test('a primary and a replica under three sentinels: the client follows the failover by itself', { skip }, async t => {
  const sentinel = await startRedisSentinel(t)
  const client = new Redis({ sentinels: sentinel.sentinels, name: sentinel.name })
  client.on('error', () => {}) // the crash makes errors; the commands' own results are asserted
  t.teardown(() => { client.disconnect() })

  const first = await sentinel.primary()
  t.equal(await client.set('k', 'before'), 'OK', 'a write through the sentinels')
  t.equal(await client.call('WAIT', 1, 5000), 1, 'replicated before the crash')
  t.match(await client.info('server'), `tcp_port:${first.port}`, `the client is on the primary (port ${first.port})`)

  const killedAt = performance.now()
  await sentinel.killPrimary()
  const [failoverMs, writeMs] = await Promise.all([
    sentinel.waitForFailover(),
    firstSuccess(async () => await client.set('k', 'after'), killedAt, RECOVERY_MS)
  ])
  t.comment(`sentinel failover: every sentinel named the promoted replica ${Math.round(failoverMs)} ms after the SIGKILL; the client's first successful write came at ${writeMs === undefined ? 'never' : Math.round(writeMs)} ms`)
  t.not(writeMs, undefined, `a write succeeds again within ${RECOVERY_MS} ms`)
  const promoted = await sentinel.primary()
  t.not(promoted.port, first.port, `the sentinels name a new primary (port ${promoted.port})`)
  t.match(await client.info('server'), `tcp_port:${promoted.port}`, 'the client is on it')
  t.equal(await client.get('k'), 'after', 'with the write')
})
