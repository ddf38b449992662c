import { randomBytes } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import type { FastifyBaseLogger } from 'fastify'
import { MemoryRevocationStore, type RevocationStore } from '../identity/revocation-store.js'
import { RedisRevocationStore } from '../identity/redis-revocation-store.js'
import type { RequestObserver } from '../observability/observer.js'
import type { Settings } from './options.js'
import type { McpReadiness } from './decorators.js'
import { MemoryCancellationStore } from '../lifecycle/memory-cancellation-store.js'
import { MissingDependencyError } from '../core/errors.js'
import { CLUSTER_PUBLISHER_OPTIONS, PUBLISHER_OPTIONS, RedisBus, type RedisConnection } from '../cluster/redis-bus.js'
import { RedisCancellationStore } from '../lifecycle/redis-cancellation-store.js'
import type { CancellationStore } from '../lifecycle/cancellation-store.js'
import type { NodeMessages } from '../cluster/node-messages.js'
import { MemoryTaskStore } from '../tasks/memory-task-store.js'
import { RedisTaskStore } from '../tasks/redis-task-store.js'
import type { TaskBounds, TaskStore } from '../tasks/task-store.js'
import type { Tracing } from '../observability/tracing.js'
import type { SubscriptionStore } from '../events/subscription-store.js'
import { MemorySubscriptionStore } from '../events/memory-subscription-store.js'
import { RedisSubscriptionStore } from '../events/redis-subscription-store.js'

/** How long a starting node waits for Redis' revocations: an unreachable Redis must not stop it starting. */
const STARTUP_SYNC_TIMEOUT_MS = 2000

/** Where cancellation rows and session revocations live: this process, or the cluster through Redis. */
export interface Stores {
  /** This node's name in the cluster (the bus's), or a random one without Redis. */
  node: string
  store: CancellationStore
  revocations: RevocationStore | undefined
  /** Messages to one other node (answers to its asks, its tasks' updates); undefined without Redis. */
  messages: NodeMessages | undefined
  /** Tasks: in this process, or shared by the cluster. */
  tasks: TaskStore
  /** Legacy sessions' subscriptions and stream claims (with sessions and events). */
  subscriptions: SubscriptionStore | undefined
  /** The cluster's bus, which server events travel on; undefined without Redis. */
  bus: RedisBus | undefined
  /** Resolves once a starting node knows the cluster's revocations (at once without Redis). */
  synced: () => Promise<void>
  readiness: () => McpReadiness
}

const ALWAYS_READY: McpReadiness = Object.freeze({ ready: true, redis: 'none', revocations: 'none' })

/**
 * ioredis is an optional peer dependency, loaded only for URLs: an application that passes its own
 * client, or none, never loads it here. A list of URLs is the seed nodes of a Redis Cluster.
 */
async function connect (urls: string | readonly string[]): Promise<RedisConnection> {
  let ioredis: Pick<typeof import('ioredis'), 'Redis' | 'Cluster'>
  try {
    ioredis = await import('ioredis')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND') {
      throw new MissingDependencyError('redis', 'the ioredis package to connect to a URL (npm i ioredis)')
    }
    throw error
  }
  if (typeof urls === 'string') return new ioredis.Redis(urls, PUBLISHER_OPTIONS)
  const seeds = urls.map(url => new URL(url))
  const tls = seeds.some(seed => seed.protocol === 'rediss:') ? { tls: {} } : {}
  const auth = seeds[0]!.password === '' ? {} : { username: decodeURIComponent(seeds[0]!.username), password: decodeURIComponent(seeds[0]!.password) }
  return new ioredis.Cluster(seeds.map(seed => ({ host: seed.hostname, port: Number(seed.port === '' ? 6379 : seed.port) })), {
    ...CLUSTER_PUBLISHER_OPTIONS,
    redisOptions: { ...CLUSTER_PUBLISHER_OPTIONS.redisOptions, ...tls, ...auth }
  })
}

/**
 * The largest messages of ours are a relayed stream's frames (its buffer, and a response, which can be a
 * tool's whole result) and the answers and task results a body or a result carries: well within twice
 * their bounds, and never under 16 Mi characters (a subscriber Redis sends more than 32 MB at once is
 * disconnected by its default client-output-buffer-limit anyway).
 */
function maxBusMessageLength (settings: Settings): number {
  return Math.max(16 * 1024 * 1024, 2 * (settings.bodyLimit + settings.resumability.maxBufferedBytes + settings.maxTaskResultBytes))
}

export async function createStores (settings: Settings, observer: RequestObserver, log: FastifyBaseLogger, tracing: Tracing | undefined): Promise<Stores> {
  const local = new MemoryCancellationStore({
    maxRows: settings.maxRows,
    maxRowsPerScope: settings.maxRowsPerScope,
    onRowsChanged: delta => { observer.rows(delta) },
    onEvicted: count => { observer.evicted(count) }
  })
  const memory = settings.sessions === undefined ? undefined : new MemoryRevocationStore(settings.sessions.maxRevocations)
  const { maxTasksPerScope, maxKeptTasksPerScope, maxTaskBytesPerScope, maxTasks, maxTaskBytes } = settings
  const taskBounds: TaskBounds = {
    maxTasksPerScope, maxKeptTasksPerScope, maxTaskBytesPerScope, maxTasks, maxTaskBytes, onEvicted: (bound, count) => { observer.tasksEvicted(bound, count) }
  }
  const { events } = settings
  const listensInSessions = settings.sessions !== undefined && events.enabled
  if (settings.redis === undefined) {
    const tasks = new MemoryTaskStore(taskBounds)
    const subscriptions = listensInSessions
      ? new MemorySubscriptionStore({ maxSubscriptionsPerSession: events.maxSubscriptionsPerSession, maxSubscriptions: events.maxSubscriptions })
      : undefined
    const node = randomBytes(6).toString('base64url')
    return { node, store: local, revocations: memory, messages: undefined, tasks, subscriptions, bus: undefined, synced: async () => {}, readiness: () => ALWAYS_READY }
  }

  let shared: RedisRevocationStore | undefined
  const bus = new RedisBus({
    redis: typeof settings.redis === 'string' || Array.isArray(settings.redis) ? await connect(settings.redis) : settings.redis as unknown as RedisConnection,
    ownsClient: typeof settings.redis === 'string' || Array.isArray(settings.redis),
    prefix: settings.redisPrefix,
    maxMessageLength: maxBusMessageLength(settings),
    log,
    tracing,
    onError: () => { observer.busError() },
    onConnected: connected => { observer.busConnected(connected) },
    onReady: () => { shared?.resync() }
  })
  if (memory !== undefined) shared = new RedisRevocationStore(memory, bus, () => { observer.busError() })
  // Redis reachable: wait for the revocations it holds. Unreachable: nothing to wait for.
  const synced = bus.started.then(async reachable => { if (reachable) await shared?.caughtUp })
  const tasks = new RedisTaskStore(bus, {
    ...taskBounds,
    leaseMs: settings.taskLeaseMs,
    maxLifetimeMs: settings.maxStreamLifetimeMs,
    replicationTimeoutMs: settings.taskReplicationTimeoutMs,
    onUnreplicated: taskId => {
      observer.busError()
      log.warn({ taskId, timeoutMs: settings.taskReplicationTimeoutMs }, 'fastify-mcp-cancellation: no Redis replica acknowledged a new task in time; a failover now could lose it')
    }
  })
  tasks.onLost(() => { observer.taskEnded('lost') })
  return {
    node: bus.nodeId,
    tasks,
    store: new RedisCancellationStore(local, bus, outcome => { observer.cancellation('client', outcome) }),
    revocations: shared,
    messages: bus.messages(),
    subscriptions: listensInSessions ? new RedisSubscriptionStore(bus, { maxSubscriptionsPerSession: events.maxSubscriptionsPerSession }) : undefined,
    bus,
    readiness: () => {
      const connected = bus.connected
      const revocations = shared === undefined ? 'none' : shared.synced ? 'synced' : 'syncing'
      return { ready: connected && revocations !== 'syncing', redis: connected ? 'connected' : 'disconnected', revocations }
    },
    synced: async () => {
      const timeout = new AbortController()
      await Promise.race([synced, delay(STARTUP_SYNC_TIMEOUT_MS, undefined, { signal: timeout.signal }).catch(() => {})])
      timeout.abort()
    }
  }
}
