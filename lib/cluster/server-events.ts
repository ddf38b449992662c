/**
 * What server events need of the bus (`RedisBus` is one). Kept free of the bus's imports: the
 * published types reach this module, and they must not need ioredis, an optional peer.
 */
export interface BroadcastBus {
  subscribe: (name: string, handler: (message: Record<string, unknown>) => void) => void
  publish: (name: string, message: Record<string, unknown>) => Promise<number>
}

/** The lists a client may be told have changed. */
export type ListKind = 'tools' | 'prompts' | 'resources'

export const LIST_KINDS: readonly ListKind[] = ['tools', 'prompts', 'resources']

/**
 * A change clients may be told of: small (a kind and a URI or a task id, never a payload), so that an
 * event costs the same whatever changed. A listener reads what it needs (a task's state) itself.
 */
export type ServerEvent =
  | { kind: 'list_changed', list: ListKind }
  | { kind: 'resource_updated', uri: string }
  | { kind: 'task_changed', taskId: string }

export type ServerEventHandler = (event: ServerEvent) => void

export interface ServerEventsSettings {
  /** Identical events closer together than this are sent once, at the end of the window. */
  coalesceMs: number
  /** Events this node sends per second; more wait for the next window (coalesced), beyond that they are dropped. */
  maxEventsPerSecond: number
  /** Longest URI an event may carry (longer ones from the bus are ignored). */
  maxUriBytes: number
  /** An event was dropped: more distinct events waited than a second's worth. */
  onDropped: () => void
}

/** The broadcast channel: one for every node, nothing per listener in Redis. */
const CHANNEL = 'events'

/** Task ids are 22 base64url characters; anything much longer is not one. */
const MAX_TASK_ID_LENGTH = 64

/**
 * The cluster's one stream of server events: an event published on any node reaches the handlers of
 * every node, in memory here and through Redis pub/sub (`RedisBus`, lib/cluster/redis-bus.ts) elsewhere. A node away from Redis
 * misses what was published meanwhile and re-announces nothing: list changes are idempotent, and a
 * client re-lists after it reconnects (docs/notifications.md).
 *
 * Bursts are bounded where they start: identical events within `coalesceMs` of each other leave once
 * (the last at the end of the window, so the final change is always announced), and at most
 * `maxEventsPerSecond` leave per second.
 */
export class ServerEvents {
  readonly #settings: ServerEventsSettings
  readonly #bus: BroadcastBus | undefined
  readonly #handlers = new Set<ServerEventHandler>()
  /** When each key's last event left, while its window is open (or an event of it waits). */
  readonly #sentAt = new Map<string, number>()
  /** The waiting room, by key: an event coalesced into an open window or over the budget leaves when both allow. */
  readonly #waiting = new Map<string, ServerEvent>()
  #tokens: number
  #refilledAt = performance.now()
  #flush: NodeJS.Timeout | undefined
  #started = false
  /** Publishes on their way to Redis: closing waits for them, before the bus's connection closes under them. */
  readonly #sending = new Set<Promise<number>>()

  constructor (settings: ServerEventsSettings, bus: BroadcastBus | undefined) {
    this.#settings = settings
    this.#bus = bus
    this.#tokens = settings.maxEventsPerSecond
    bus?.subscribe(CHANNEL, message => {
      const event = eventOf(message, settings.maxUriBytes)
      if (event !== undefined) this.#deliver(event)
    })
  }

  /** Announces from now on: changes made while the server is being set up concern no listener. */
  start (): void {
    this.#started = true
  }

  /** Calls `handler` for every event of the cluster; returns what stops it. */
  subscribe (handler: ServerEventHandler): () => void {
    this.#handlers.add(handler)
    return () => { this.#handlers.delete(handler) }
  }

  publish (event: ServerEvent): void {
    if (!this.#started) return
    const key = keyOf(event)
    const now = performance.now()
    if (this.#windowOpen(key, now)) {
      this.#waiting.set(key, event)
      this.#schedule()
    } else if (this.#take(now)) {
      this.#waiting.delete(key) // superseded
      this.#sentAt.set(key, now)
      this.#send(event)
      this.#schedule()
    } else if (this.#waiting.has(key) || this.#waiting.size < this.#settings.maxEventsPerSecond) {
      this.#waiting.set(key, event) // one already waiting is replaced, never dropped
      this.#schedule()
    } else {
      this.#settings.onDropped()
    }
  }

  /** Announces nothing more (what waited in a window is dropped: the server is going away) and lets what was sent reach Redis. */
  async close (): Promise<void> {
    clearTimeout(this.#flush)
    this.#flush = undefined
    this.#sentAt.clear()
    this.#waiting.clear()
    this.#started = false
    await Promise.all(this.#sending)
  }

  #send (event: ServerEvent): void {
    this.#deliver(event)
    const sending = this.#bus?.publish(CHANNEL, event)
    if (sending === undefined) return
    this.#sending.add(sending)
    void sending.finally(() => { this.#sending.delete(sending) })
  }

  #deliver (event: ServerEvent): void {
    for (const handler of this.#handlers) handler(event)
  }

  /** A token of the per-second budget, refilled continuously. */
  #take (now: number): boolean {
    const { maxEventsPerSecond } = this.#settings
    this.#tokens = Math.min(maxEventsPerSecond, this.#tokens + (now - this.#refilledAt) * maxEventsPerSecond / 1000)
    this.#refilledAt = now
    if (this.#tokens < 1) return false
    this.#tokens--
    return true
  }

  #schedule (): void {
    if (this.#flush !== undefined) return
    this.#flush = setTimeout(() => {
      this.#flush = undefined
      this.#drain()
    }, this.#settings.coalesceMs)
    this.#flush.unref()
  }

  /** Sends what waited for its window to end (as the budget allows) and forgets windows that ended quietly. */
  #drain (): void {
    const now = performance.now()
    for (const [key, event] of this.#waiting) {
      if (this.#windowOpen(key, now) || !this.#take(now)) continue
      this.#waiting.delete(key)
      this.#sentAt.set(key, now)
      this.#send(event)
    }
    for (const key of this.#sentAt.keys()) {
      if (!this.#windowOpen(key, now)) this.#sentAt.delete(key)
    }
    if (this.#sentAt.size > 0 || this.#waiting.size > 0) this.#schedule()
  }

  #windowOpen (key: string, now: number): boolean {
    const sentAt = this.#sentAt.get(key)
    return sentAt !== undefined && now - sentAt < this.#settings.coalesceMs
  }
}

function keyOf (event: ServerEvent): string {
  switch (event.kind) {
    case 'list_changed': return `l:${event.list}`
    case 'resource_updated': return `r:${event.uri}`
    case 'task_changed': return `t:${event.taskId}`
  }
}

/** An event another node published, checked: the bus carries JSON anyone with Redis access could write. */
function eventOf (message: Record<string, unknown>, maxUriBytes: number): ServerEvent | undefined {
  const { kind, list, uri, taskId } = message
  if (kind === 'list_changed' && LIST_KINDS.includes(list as ListKind)) return { kind, list: list as ListKind }
  if (kind === 'resource_updated' && typeof uri === 'string' && Buffer.byteLength(uri) <= maxUriBytes) return { kind, uri }
  if (kind === 'task_changed' && typeof taskId === 'string' && taskId.length <= MAX_TASK_ID_LENGTH) return { kind, taskId }
  return undefined
}
