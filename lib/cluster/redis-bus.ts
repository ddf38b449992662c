import type { Cluster, ClusterOptions, Redis, RedisOptions } from 'ioredis'
import type { FastifyBaseLogger } from 'fastify'
import type { NodeMessages } from './node-messages.js'

export type BusHandler = (message: Record<string, unknown>) => void

/**
 * What the bus needs of tracing: the sender's trace context as a JSON value to send along, and a way
 * to run the receiving handler in the context a message carried (a cancel there then links to the
 * request that caused it). `Tracing` (lib/observability/tracing.ts) is one.
 */
export interface TraceCarrier {
  carrier: () => Record<string, string> | undefined
  within: <T>(carrier: unknown, fn: () => T) => T
}

/** A standalone (or Sentinel-managed) Redis, or a Redis Cluster: the commands the stores use are the same. */
export type RedisConnection = Redis | Cluster

export interface RedisBusOptions {
  /** The publishing connection; the bus subscribes on a duplicate of it. */
  redis: RedisConnection
  /** The plugin made the client from a URL, so closing the bus closes it; an application's client stays open. */
  ownsClient: boolean
  /** Prefix of every channel and key. */
  prefix: string
  /** A message longer than this (in characters) is ignored and counted, never parsed: nothing of ours is that large. */
  maxMessageLength: number
  log: FastifyBaseLogger
  /** Counts every failure: a dropped publish, a connection error. */
  onError: () => void
  /** Called each time the connection (re)becomes ready, to catch up on what was missed. */
  onReady?: () => void
  /** Whether both connections are ready, each time that changes (false from the start until they are). */
  onConnected?: (connected: boolean) => void
  /** Carries the sender's trace context to the receiving node. */
  tracing?: TraceCarrier | undefined
}

/** Reconnect quickly and forever: cross-node cancellation must resume within seconds of Redis returning. */
const retryStrategy = (attempt: number): number => Math.min(attempt * 100, 1000)

/**
 * How the plugin connects to a `redis://` URL: nothing is queued while Redis is away, and nothing
 * retried (what was on its way when the connection closed fails, never sent again after a reconnect).
 */
export const PUBLISHER_OPTIONS: RedisOptions = { retryStrategy, enableOfflineQueue: false, maxRetriesPerRequest: 0, autoResendUnfulfilledCommands: false }

/**
 * The same for a Cluster made from seed URLs (each node's connection takes `redisOptions`). A command
 * to a shard whose primary died is retried 3 times 100 ms apart, not 16 (ioredis' default, about 2 s a
 * command), so that a failover does not hold requests.
 */
export const CLUSTER_PUBLISHER_OPTIONS: ClusterOptions = {
  clusterRetryStrategy: retryStrategy, enableOfflineQueue: false, maxRedirections: 3, redisOptions: { maxRetriesPerRequest: 0, autoResendUnfulfilledCommands: false }
}

export function isCluster (connection: RedisConnection): connection is Cluster {
  return connection.isCluster
}

/**
 * Each connection is pinged this often; one whose ping has not answered within HEARTBEAT_TIMEOUT_MS
 * has a link that holds what it is sent without failing (a half-open TCP connection, a paused
 * network path), which neither ioredis nor the kernel notices for minutes: it is closed, so that what
 * waits on it fails at once, and reconnected.
 */
const HEARTBEAT_MS = 500
const HEARTBEAT_TIMEOUT_MS = 1000

/** Whether each of the Cluster's slots, as it last read them, has its primary connected. */
function everySlotServed (cluster: Cluster): boolean {
  const connected = new Set(cluster.nodes('master').filter(node => node.status === 'ready').map(node => `${node.options.host}:${node.options.port}`))
  if (connected.size === 0) return false
  for (const owners of cluster.slots) if (owners !== undefined && !connected.has(owners[0]!)) return false
  return true
}

const ignore = (): void => {}

/** Redis without sharded pub/sub (before 7.0, or with the commands renamed away) answers this. */
const UNKNOWN_COMMAND = /unknown command/i

/**
 * The cluster's message bus: one publishing connection, one subscribed duplicate. Nothing is ever
 * buffered while Redis is away (a publish is dropped and counted, never queued), nothing on the request
 * path waits for Redis, and an outage is logged once, not once per message; ioredis reconnects and
 * resubscribes by itself.
 */
export class RedisBus {
  readonly nodeId = `${process.pid}-${Math.random().toString(36).slice(2, 10)}`
  readonly #publisher: RedisConnection
  readonly #subscriber: RedisConnection
  /**
   * On a Cluster: every channel is a sharded one (`SPUBLISH`: carried by the shard owning it alone, where
   * a plain `PUBLISH` crosses the cluster bus to every node, slower and N-fold), until Redis says it has none.
   */
  #sharded: boolean
  readonly #ownsPublisher: boolean
  readonly #options: RedisBusOptions
  readonly #handlers = new Map<string, BusHandler>()
  readonly #readyHandlers: Array<() => void> = []
  #down = false
  #connected = false
  readonly #heartbeat: NodeJS.Timeout
  /** When each connection's unanswered ping was sent. */
  readonly #pinged = new Map<RedisConnection, number>()
  #settle: ((ready: boolean) => void) | undefined
  /** The first connection attempt's outcome: true once both connections are ready, false on a first failure. */
  readonly started = new Promise<boolean>(resolve => { this.#settle = resolve })

  constructor (options: RedisBusOptions) {
    this.#options = options
    this.#ownsPublisher = options.ownsClient
    this.#publisher = options.redis
    // The subscriber queues while connecting: its offline queue holds only subscriptions, never traffic.
    this.#subscriber = isCluster(options.redis)
      ? options.redis.duplicate([], { shardedSubscribers: true, enableOfflineQueue: true, clusterRetryStrategy: retryStrategy, lazyConnect: false })
      : options.redis.duplicate({ retryStrategy, enableOfflineQueue: true, maxRetriesPerRequest: null, autoResubscribe: true, lazyConnect: false })
    this.#sharded = isCluster(options.redis)
    // A caller's client made with lazyConnect would otherwise wait for a command we never send it.
    if (this.#publisher.status === 'wait') this.#publisher.connect().catch((error: Error) => { this.#fail(error) })
    options.onConnected?.(false)
    for (const connection of [this.#publisher, this.#subscriber]) {
      connection.on('error', (error: Error) => { this.#fail(error) })
      connection.on('ready', () => { this.#recovered() })
      connection.on('close', () => { this.#connectedChanged(false) })
      // A Cluster stays 'ready' while one shard is down: its node's errors are the outage.
      connection.on('node error', (error: Error) => {
        this.#fail(error)
        this.#connectedChanged(false)
      })
    }
    if (isCluster(this.#publisher)) {
      // ioredis opens its connection to a primary at the first command for it; while that opens, a Cluster
      // without an offline queue (the plugin's) refuses what follows and retries it 100 ms later, behind
      // messages sent meanwhile. Every node is connected at once instead, and the bus is ready once each
      // slot's primary is (test/redis/redis-cluster.test.ts, messages in order).
      const open = (node: Redis): void => {
        node.on('ready', () => { this.#recovered() })
        if (node.status === 'wait') node.connect().catch(ignore)
      }
      this.#publisher.on('+node', open)
      for (const node of this.#publisher.nodes('all')) open(node)
    }
    this.#subscriber.on('message', (channel: string, text: string) => { this.#deliver(channel, text) })
    this.#subscriber.on('smessage', (channel: string, text: string) => { this.#deliver(channel, text) })
    this.#heartbeat = setInterval(() => { this.#beat() }, HEARTBEAT_MS)
    this.#heartbeat.unref()
  }

  /**
   * Pings both connections; a connection whose ping is overdue is reconnected. (A Cluster's subscriber
   * connections are its own, out of reach: a Cluster client watches its nodes itself.) A Cluster that
   * lost a shard is back once every slot's primary is connected (a replica promoted in its place).
   */
  #beat (): void {
    const now = Date.now()
    if (this.#down && isCluster(this.#publisher)) this.#recovered()
    for (const connection of isCluster(this.#publisher) ? [this.#publisher] : [this.#publisher, this.#subscriber]) {
      const sentAt = this.#pinged.get(connection)
      if (sentAt !== undefined) {
        if (now - sentAt < HEARTBEAT_TIMEOUT_MS) continue
        this.#pinged.delete(connection)
        this.#fail(new Error(`Redis did not answer a ping within ${HEARTBEAT_TIMEOUT_MS} ms`))
        this.#connectedChanged(false)
        connection.disconnect(true)
        continue
      }
      if (connection.status !== 'ready') continue
      this.#pinged.set(connection, now)
      connection.ping().then(() => { this.#pinged.delete(connection) }, () => { this.#pinged.delete(connection) })
    }
  }

  /** A Redis Cluster: keys that one script or transaction uses together share a hash tag (`key`). */
  get cluster (): boolean {
    return isCluster(this.#publisher)
  }

  get ready (): boolean {
    return this.#publisher.status === 'ready' && this.#subscriber.status === 'ready'
  }

  /**
   * Both connections ready and answering, with every shard of a Cluster: what `mcp_bus_connected` and
   * readiness report. (`ready` is only the clients' status: a Cluster missing a shard, or a link that
   * stopped answering, is still "ready" for a moment.)
   */
  get connected (): boolean {
    return this.#connected
  }

  get redis (): RedisConnection {
    return this.#publisher
  }

  /**
   * The key `name` under the plugin's prefix. On a Cluster, the keys of one `group` (a store's: its
   * scripts and transactions use several at once) share a hash tag, so that they live in one slot; a
   * standalone Redis keeps its key names, so that an upgrade finds what the previous version wrote.
   */
  key (name: string, group?: string): string {
    return group === undefined || !this.cluster ? `${this.#options.prefix}${name}` : `${this.#options.prefix}{${group}}${name}`
  }

  /** Every key matching `pattern`, in batches: from each primary of a Cluster (SCAN sees one node's keys). */
  async * scan (pattern: string, count: number): AsyncIterable<string[]> {
    const nodes = isCluster(this.#publisher) ? this.#publisher.nodes('master') : [this.#publisher]
    for (const node of nodes) yield * node.scanStream({ match: pattern, count }) as AsyncIterable<string[]>
  }

  /** Calls `handler` each time both connections are ready again (after an outage: to write what Redis missed). */
  onReady (handler: () => void): void {
    this.#readyHandlers.push(handler)
  }

  subscribe (name: string, handler: BusHandler): void {
    this.#listen(name, handler, this.#sharded)
  }

  #listen (name: string, handler: BusHandler, sharded: boolean): void {
    const channel = this.key(name)
    this.#handlers.set(channel, handler)
    const subscribed = sharded ? this.#subscriber.ssubscribe(channel) : this.#subscriber.subscribe(channel)
    subscribed.catch((error: Error) => {
      if (sharded && UNKNOWN_COMMAND.test(error.message)) {
        this.#unsharded()
        this.#listen(name, handler, false)
      } else {
        this.#fail(error)
      }
    })
  }

  #unsharded (): void {
    if (!this.#sharded) return
    this.#sharded = false
    this.#options.log.warn('fastify-mcp-cancellation: this Redis Cluster has no sharded pub/sub (Redis < 7): every message crosses the cluster bus to every node')
  }

  /**
   * Dropped (and counted) when Redis is not ready, never queued. Resolves to the number of subscribers
   * Redis handed the message to (0 when dropped; on a Cluster, those connected to the node that took
   * it); never rejects, so a caller may ignore it.
   */
  async publish (name: string, message: Record<string, unknown>): Promise<number> {
    return await this.#publish(name, message, this.#sharded) ?? 0
  }

  /** The subscribers that got it, or undefined when it was dropped. */
  async #publish (name: string, message: Record<string, unknown>, sharded: boolean): Promise<number | undefined> {
    if (this.#publisher.status !== 'ready') {
      this.#fail(new Error(`Redis is ${this.#publisher.status}`))
      return undefined
    }
    const trace = this.#options.tracing?.carrier()
    const channel = this.key(name)
    const text = JSON.stringify(trace === undefined ? { ...message, origin: this.nodeId } : { ...message, origin: this.nodeId, trace })
    try {
      return Number(sharded ? await this.#publisher.spublish(channel, text) : await this.#publisher.publish(channel, text))
    } catch (error) {
      if (sharded && UNKNOWN_COMMAND.test((error as Error).message)) {
        this.#unsharded()
        return await this.#publish(name, message, false)
      }
      this.#fail(error as Error)
      return undefined
    }
  }

  /**
   * Messages to one node: each node listens on channels of its own, so a message is published to the node
   * it is for. On a Cluster without sharded channels (Redis 6: plain ones, with a warning) a publish can no
   * longer tell a message that reached nobody (a node that is gone) from one that arrived.
   */
  messages (): NodeMessages {
    return {
      send: async (node, topic, message) => {
        const received = await this.#publish(`${topic}:${node}`, message, this.#sharded)
        // A plain PUBLISH on a Cluster counts only the subscribers of the node that took it: sent is all it can tell.
        return received !== undefined && (received > 0 || (this.cluster && !this.#sharded))
      },
      receive: (topic, handler) => { this.#listen(`${topic}:${this.nodeId}`, handler, this.#sharded) }
    }
  }

  async close (): Promise<void> {
    clearInterval(this.#heartbeat)
    this.#subscriber.disconnect()
    if (this.#ownsPublisher) this.#publisher.disconnect()
  }

  /**
   * Hands a message to its channel's handler. What is not a JSON object, or is larger than any message
   * of ours (another program publishing on a channel of ours), is ignored and counted; a handler that throws is counted and logged, never let
   * out into the subscriber connection's event (where it would end the process).
   */
  #deliver (channel: string, text: string): void {
    const handler = this.#handlers.get(channel)
    if (handler === undefined) return
    let message: unknown
    try {
      message = text.length > this.#options.maxMessageLength ? undefined : JSON.parse(text)
    } catch {
      message = undefined
    }
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      this.#options.onError()
      this.#options.log.debug({ channel, length: text.length }, 'fastify-mcp-cancellation: a bus message that is not a JSON object, or too large, was ignored')
      return
    }
    if ((message as { origin?: unknown }).origin === this.nodeId) return
    const { tracing } = this.#options
    try {
      if (tracing === undefined) handler(message as Record<string, unknown>)
      else tracing.within((message as { trace?: unknown }).trace, () => { handler(message as Record<string, unknown>) })
    } catch (error) {
      this.#options.onError()
      this.#options.log.error({ err: error, channel }, 'fastify-mcp-cancellation: a bus message handler failed')
    }
  }

  #fail (error: Error): void {
    this.#settle?.(false)
    this.#options.onError()
    if (this.#down) return
    this.#down = true
    this.#options.log.error({ err: error }, 'MCP Redis bus unavailable: cancellation is local to this node until it returns')
  }

  #connectedChanged (connected: boolean): void {
    if (connected === this.#connected) return
    this.#connected = connected
    this.#options.onConnected?.(connected)
  }

  #recovered (): void {
    if (!this.ready || (isCluster(this.#publisher) && !everySlotServed(this.#publisher))) return
    if (this.#down) this.#options.log.info('MCP Redis bus available again')
    this.#down = false
    this.#connectedChanged(true)
    this.#settle?.(true)
    this.#options.onReady?.()
    for (const handler of this.#readyHandlers) handler()
  }
}
