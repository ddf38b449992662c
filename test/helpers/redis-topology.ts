/**
 * The Redis the multi-node tests run on, chosen by `MCP_TEST_REDIS`: `standalone` (the default: one
 * redis-server, redis-server.ts), `cluster` (3 primaries and 3 replicas, redis-cluster.ts) or
 * `sentinel` (a primary and a replica under three sentinels, redis-sentinel.ts). A test file asks for
 * the topology once per test and gets what it needs to stay the same test in each: the `redis` option
 * for each node, the demo's environment, a client of its own to look at keys and channels, and key
 * names as the plugin writes them there (a Cluster tags each store's keys, lib/cluster/redis-bus.ts).
 *
 * A test about one redis-server's outage (stopped, restarted) has no counterpart in the other
 * topologies: `standaloneOnly` skips it there, saying why.
 */
import { Cluster, Redis } from 'ioredis'
import { PUBLISHER_OPTIONS } from '../../lib/cluster/redis-bus.js'
import type { McpCancellationOptions } from '../../lib/index.js'
import { startRedisCluster } from './redis-cluster.js'
import { startRedisSentinel } from './redis-sentinel.js'
import { RedisServer, redisSkipReason, type RedisTool } from './redis-server.js'
import type { Teardown } from './teardown.js'

const TOPOLOGIES = ['standalone', 'cluster', 'sentinel'] as const
export type TopologyName = typeof TOPOLOGIES[number]

/** The programs each topology runs. */
const TOOLS: Record<TopologyName, readonly RedisTool[]> = {
  standalone: ['redis-server'],
  cluster: ['redis-server', 'redis-cli'],
  sentinel: ['redis-server', 'redis-sentinel']
}

/** The plugin's default `redisPrefix`: the tests never change it. */
const PREFIX = 'mcp:'

function topologyFromEnv (value: string | undefined): TopologyName {
  if (value === undefined || value === '') return 'standalone'
  const name = TOPOLOGIES.find(candidate => candidate === value)
  // A typo must not run the standalone tests under another name.
  if (name === undefined) throw new Error(`MCP_TEST_REDIS=${value}: expected one of ${TOPOLOGIES.join(', ')}`)
  return name
}

export const topology: TopologyName = topologyFromEnv(process.env.MCP_TEST_REDIS)

/** `redisSkipReason` for the programs this run's topology needs. */
export function topologySkipReason (t: { fail: (message: string) => unknown }): string | false {
  return redisSkipReason(t, TOOLS[topology])
}

/** A test's `skip` when it stops or restarts one redis-server: run under `standalone` only. */
export function standaloneOnly (what: string): string | false {
  return topology !== 'standalone' && `${what}: standalone only (MCP_TEST_REDIS=${topology})`
}

export type RedisOption = NonNullable<McpCancellationOptions['redis']>
export type RedisClient = Redis | Cluster

export interface RedisTopology {
  readonly name: TopologyName
  /** The redis-server under `standalone` (outage tests stop and start it); undefined otherwise. */
  readonly server: RedisServer | undefined
  /**
   * The `redis` option of one node: the URL, the seed URLs, or under Sentinel a fresh client built as
   * the plugin builds one from a URL (PUBLISHER_OPTIONS), disconnected at teardown (the plugin never
   * closes a client it is given).
   */
  option: () => RedisOption
  /** The demo's environment for this Redis (MCP_REDIS_URL, a comma list of seeds, or MCP_REDIS_SENTINELS and MCP_REDIS_SENTINEL_NAME). */
  demoEnv: () => Record<string, string>
  /** An application's own client (ioredis' defaults), disconnected in `t`'s teardown. */
  client: (t: Teardown, options?: { lazyConnect?: boolean }) => RedisClient
  /** The test's own client, to look at keys. */
  readonly inspect: RedisClient
  /** The key `name` as the plugin writes it: in `group`'s hash tag on a Cluster (RedisBus.key). */
  key: (name: string, group?: string) => string
  /** Every key matching `pattern`, sorted: from every primary on a Cluster. */
  scanKeys: (pattern: string) => Promise<string[]>
  /** The channels matching `pattern` that have a subscriber, sorted: plain and sharded, on every node. */
  channels: (pattern: string) => Promise<string[]>
  /** How many subscribers `channel` has, plain and sharded, on every node. */
  subscribers: (channel: string) => Promise<number>
  /**
   * Subscribes a client of the test's own to a node's own `channel` the way node messages travel
   * there (sharded on a Cluster); `handler` gets each message's text.
   */
  listenNodeChannel: (t: Teardown, channel: string, handler: (text: string) => void) => Promise<void>
}

/** `client` closed in `t`'s teardown, its errors left to the commands that fail (or the plugin's bus). */
function owned<T extends RedisClient> (t: Teardown, client: T): T {
  client.on('error', () => {})
  t.teardown(() => { client.disconnect() })
  return client
}

function hostPort (url: string): { host: string, port: number } {
  const { hostname, port } = new URL(url)
  return { host: hostname, port: Number(port) }
}

/** Starts this run's topology (stopped in `t`'s teardown) and a client of the test's own on it. */
export async function startRedisTopology (t: Teardown): Promise<RedisTopology> {
  let server: RedisServer | undefined
  let option: () => RedisOption
  let demoEnv: () => Record<string, string>
  let client: RedisTopology['client']
  let inspect: RedisClient
  if (topology === 'cluster') {
    const cluster = await startRedisCluster(t)
    const seeds = cluster.seeds.map(hostPort)
    option = () => cluster.seeds
    demoEnv = () => ({ MCP_REDIS_URL: cluster.seeds.join(',') })
    client = (t, options = {}) => owned(t, new Cluster(seeds, options))
    inspect = owned(t, new Cluster(seeds, { redisOptions: { maxRetriesPerRequest: 1 } }))
  } else if (topology === 'sentinel') {
    const { sentinels, name } = await startRedisSentinel(t)
    option = () => owned(t, new Redis({ ...PUBLISHER_OPTIONS, sentinels, name }))
    demoEnv = () => ({ MCP_REDIS_SENTINELS: sentinels.map(({ host, port }) => `${host}:${port}`).join(','), MCP_REDIS_SENTINEL_NAME: name })
    client = (t, options = {}) => owned(t, new Redis({ sentinels, name, ...options }))
    inspect = owned(t, new Redis({ sentinels, name, maxRetriesPerRequest: 1 }))
  } else {
    const standalone = server = await RedisServer.start(t)
    option = () => standalone.url
    demoEnv = () => ({ MCP_REDIS_URL: standalone.url })
    client = (t, options = {}) => owned(t, new Redis(standalone.url, options))
    inspect = owned(t, new Redis(standalone.url, { maxRetriesPerRequest: 1 }))
  }
  const cluster = inspect instanceof Cluster ? inspect : undefined
  await inspect.ping()
  // Each node's connection opened now, not during a test that counts the process's handles.
  if (cluster !== undefined) await Promise.all(cluster.nodes('all').map(async node => await node.ping()))
  const everyNode = (): Redis[] => cluster?.nodes('all') ?? [inspect as Redis]

  return {
    name: topology,
    server,
    option,
    demoEnv,
    client,
    inspect,
    key: (name, group) => group === undefined || cluster === undefined ? `${PREFIX}${name}` : `${PREFIX}{${group}}${name}`,
    async scanKeys (pattern) {
      const keys = new Set<string>()
      for (const node of cluster?.nodes('master') ?? [inspect as Redis]) {
        let cursor = '0'
        do {
          const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
          for (const key of batch) keys.add(key)
          cursor = next
        } while (cursor !== '0')
      }
      return [...keys].sort()
    },
    async channels (pattern) {
      const found = new Set<string>()
      for (const node of everyNode()) {
        for (const channel of await node.pubsub('CHANNELS', pattern) as string[]) found.add(channel)
        // Only a Cluster carries node messages on sharded channels (a standalone Redis 6 has none).
        if (cluster !== undefined) for (const channel of await node.pubsub('SHARDCHANNELS', pattern) as string[]) found.add(channel)
      }
      return [...found].sort()
    },
    async subscribers (channel) {
      let count = 0
      for (const node of everyNode()) {
        const [, plain] = await node.pubsub('NUMSUB', channel) as [string, number | string]
        count += Number(plain)
        if (cluster !== undefined) {
          const [, sharded] = await node.pubsub('SHARDNUMSUB', channel) as [string, number | string]
          count += Number(sharded)
        }
      }
      return count
    },
    async listenNodeChannel (t, channel, handler) {
      if (cluster !== undefined) {
        const subscriber = owned(t, cluster.duplicate([], { shardedSubscribers: true }))
        subscriber.on('smessage', (_channel: string, text: string) => { handler(text) })
        await subscriber.ssubscribe(channel)
      } else {
        const subscriber = owned(t, (inspect as Redis).duplicate())
        subscriber.on('message', (_channel: string, text: string) => { handler(text) })
        await subscriber.subscribe(channel)
      }
    }
  }
}
