import { ErrorCode, ProtocolError, type JsonObject } from '../core/jsonrpc.js'
import type { ListKind, ServerEvent, ServerEvents } from '../cluster/server-events.js'
import type { ListenerDropReason, NotificationKind, RequestObserver } from '../observability/observer.js'
import { TERMINAL_STATUSES, type TaskStatus } from '../tasks/task-store.js'
import type { SubscriptionChange, SubscriptionStore } from './subscription-store.js'
import type { Listener } from './listener.js'
import { sweepInterval } from '../lifecycle/registry.js'

export interface ListenersSettings {
  maxListenersPerScope: number
  maxListeners: number
  /** A listener with more bytes than this waiting for its socket is dropped. */
  maxListenerBufferBytes: number
  /** Listeners older than this are ended (a modern one with its completion result). */
  maxStreamLifetimeMs: number
  /** What ends a modern listen carries in `_meta`. */
  serverInfo: JsonObject
  /**
   * With a shared task store: how often the tasks listeners follow are read again. A task whose node
   * died changes only when somebody reads it after its lease lapsed; this is that somebody.
   */
  followedTasksIntervalMs: number | undefined
}

export interface ListenersParts {
  settings: ListenersSettings
  events: ServerEvents
  observer: RequestObserver
  /** A task as `tasks/get` shows it, if it exists in `scope`; undefined otherwise (or while its store is unreachable). */
  task: (taskId: string, scope: string) => Promise<JsonObject | undefined>
  /** Legacy sessions' subscriptions and stream claims; undefined without sessions. */
  subscriptions: SubscriptionStore | undefined
  /** Whether a legacy session was revoked (its stream ends). */
  revoked: (sessionId: string) => boolean
}

/** How long a node's claim on a session's standalone stream lasts unless renewed (a third of it apart). */
export const STREAM_LEASE_MS = 10_000

const NOTIFICATION_OF_LIST: Readonly<Record<ListKind, { method: string, kind: NotificationKind }>> = {
  tools: { method: 'notifications/tools/list_changed', kind: 'tools_list_changed' },
  prompts: { method: 'notifications/prompts/list_changed', kind: 'prompts_list_changed' },
  resources: { method: 'notifications/resources/list_changed', kind: 'resources_list_changed' }
}

/**
 * Every stream listening on this node, indexed by what it listens to, so that an event costs the
 * listeners it concerns and not all of them. Bounded per scope and per node; a listener whose client
 * does not read is dropped rather than buffered without limit. Events come from the cluster's
 * `ServerEvents`; a task's state is read per listening scope, so a task reaches only its own scope.
 */
export class Listeners {
  readonly #settings: ListenersSettings
  readonly #observer: RequestObserver
  readonly #task: ListenersParts['task']
  readonly #subscriptions: SubscriptionStore | undefined
  readonly #revoked: (sessionId: string) => boolean
  readonly #all = new Set<Listener>()
  readonly #perScope = new Map<string, number>()
  readonly #byList: Record<ListKind, Set<Listener>> = { tools: new Set(), prompts: new Set(), resources: new Set() }
  readonly #byResource = new Map<string, Set<Listener>>()
  readonly #byTask = new Map<string, Set<Listener>>()
  readonly #bySession = new Map<string, Listener>()
  /** Tasks whose state is being read: a change meanwhile reads it again after (never an older state last). */
  readonly #reading = new Map<string, { again: boolean }>()
  readonly #unsubscribe: () => void
  #sweep: NodeJS.Timeout | undefined
  #renewal: NodeJS.Timeout | undefined
  #followedTasks: NodeJS.Timeout | undefined

  constructor (parts: ListenersParts) {
    this.#settings = parts.settings
    this.#observer = parts.observer
    this.#task = parts.task
    this.#subscriptions = parts.subscriptions
    this.#revoked = parts.revoked
    this.#unsubscribe = parts.events.subscribe(event => { this.#deliver(event) })
    parts.subscriptions?.onChange(change => { this.#subscriptionChanged(change) })
    // Back from an outage (or a Redis that lost its keys): this node's claims are taken again at once.
    parts.subscriptions?.onReady?.(() => { this.#renewClaims() })
  }

  startTimers (): void {
    const lifetime = this.#settings.maxStreamLifetimeMs
    this.#sweep = setInterval(() => { this.#endExpired(lifetime) }, sweepInterval(lifetime))
    this.#sweep.unref()
    this.#renewal = setInterval(() => { this.#renewClaims() }, STREAM_LEASE_MS / 3)
    this.#renewal.unref()
    const every = this.#settings.followedTasksIntervalMs
    if (every === undefined) return
    this.#followedTasks = setInterval(() => { for (const taskId of this.#byTask.keys()) this.refreshTask(taskId) }, every)
    this.#followedTasks.unref()
  }

  /** Throws the 429 of a scope (or a node) that has as many listeners as it may: checked before anything is opened. */
  admit (scope: string): void {
    const { maxListenersPerScope, maxListeners } = this.#settings
    if ((this.#perScope.get(scope) ?? 0) >= maxListenersPerScope) {
      throw tooMany(`this client has ${maxListenersPerScope} open (maxListenersPerScope)`)
    }
    if (this.#all.size >= maxListeners) throw tooMany(`this server has ${maxListeners} open (maxListeners)`)
  }

  /** The standalone stream a legacy session holds on this node (the cluster's claim covers the others). */
  sessionListener (key: string): Listener | undefined {
    return this.#bySession.get(key)
  }

  /** Registers a listener admitted by `admit`; it receives events from now on. */
  add (listener: Listener): void {
    this.#all.add(listener)
    this.#perScope.set(listener.scope, (this.#perScope.get(listener.scope) ?? 0) + 1)
    for (const list of listener.lists) this.#byList[list].add(listener)
    for (const uri of listener.resources) this.#index(this.#byResource, uri, listener)
    for (const taskId of listener.taskIds.keys()) this.#index(this.#byTask, taskId, listener)
    if (listener.session !== undefined) this.#bySession.set(listener.session.key, listener)
    this.#observer.listeners(listener.era, 1)
  }

  /** Forgets a listener that ended, however it ended; its session's claim is released. */
  remove (listener: Listener): void {
    if (!this.#all.delete(listener)) return
    const count = this.#perScope.get(listener.scope)! - 1
    if (count === 0) this.#perScope.delete(listener.scope)
    else this.#perScope.set(listener.scope, count)
    for (const list of listener.lists) this.#byList[list].delete(listener)
    for (const uri of listener.resources) this.#unindex(this.#byResource, uri, listener)
    for (const taskId of listener.taskIds.keys()) this.#unindex(this.#byTask, taskId, listener)
    const { session } = listener
    if (session !== undefined && this.#bySession.get(session.key) === listener) {
      this.#bySession.delete(session.key)
      this.#subscriptions?.release(session.key, session.holder).catch(() => {})
    }
    this.#observer.listeners(listener.era, -1)
  }

  /** A legacy listener's session subscribed to `uri` (read from the store, or a change). */
  subscribed (listener: Listener, uri: string): void {
    if (!this.#all.has(listener) || listener.resources.has(uri)) return
    listener.resources.add(uri)
    this.#index(this.#byResource, uri, listener)
  }

  /** Sends a task's current state to the listeners following it (after a listen's acknowledgement: what it missed). */
  refreshTask (taskId: string): void {
    const reading = this.#reading.get(taskId)
    if (reading !== undefined) {
      reading.again = true
      return
    }
    const state = { again: false }
    this.#reading.set(taskId, state)
    void this.#readTask(taskId).finally(() => {
      this.#reading.delete(taskId)
      if (state.again) this.refreshTask(taskId)
    })
  }

  /** Shutdown: every listener ends as the server's choice (a modern listen with its completion result). */
  close (): void {
    clearInterval(this.#sweep)
    clearInterval(this.#renewal)
    clearInterval(this.#followedTasks)
    this.#unsubscribe()
    for (const listener of [...this.#all]) listener.complete(this.#settings.serverInfo)
  }

  #deliver (event: ServerEvent): void {
    switch (event.kind) {
      case 'list_changed': {
        const { method, kind } = NOTIFICATION_OF_LIST[event.list]
        for (const listener of this.#byList[event.list]) this.#send(listener, method, {}, kind)
        return
      }
      case 'resource_updated':
        for (const listener of this.#subscribersOf(event.uri)) this.#send(listener, 'notifications/resources/updated', { uri: event.uri }, 'resource_updated')
        return
      case 'task_changed':
        if (this.#byTask.has(event.taskId)) this.refreshTask(event.taskId)
    }
  }

  /**
   * The listeners subscribed to `uri` or to a resource it is part of: `file:///a/b` reaches the
   * subscribers of `file:///a/b`, `file:///a/` and `file:///a` (a sub-resource, which the specification
   * allows an update to name), never those of `file:///a/bc`.
   */
  #subscribersOf (uri: string): Set<Listener> {
    const found = new Set<Listener>(this.#byResource.get(uri))
    for (let slash = uri.indexOf('/'); slash !== -1; slash = uri.indexOf('/', slash + 1)) {
      for (const prefix of [uri.slice(0, slash), uri.slice(0, slash + 1)]) {
        if (prefix === uri) continue
        for (const listener of this.#byResource.get(prefix) ?? []) found.add(listener)
      }
    }
    return found
  }

  /**
   * Reads the task once per scope that follows it and sends each listener what changed for it (an
   * event that changed nothing a listener sees sends it nothing).
   */
  async #readTask (taskId: string): Promise<void> {
    const listeners = this.#byTask.get(taskId)
    if (listeners === undefined) return
    const byScope = new Map<string, Listener[]>()
    for (const listener of listeners) {
      let followers = byScope.get(listener.scope)
      if (followers === undefined) byScope.set(listener.scope, followers = [])
      followers.push(listener)
    }
    await Promise.all([...byScope].map(async ([scope, followers]) => {
      const task = await this.#task(taskId, scope)
      if (task === undefined) return
      const text = JSON.stringify(task)
      const ended = TERMINAL_STATUSES.includes(task.status as TaskStatus)
      for (const listener of followers) {
        if (!listener.taskIds.has(taskId) || listener.taskIds.get(taskId) === text) continue
        if (this.#send(listener, 'notifications/tasks', task, 'task_status')) listener.taskIds.set(taskId, text)
        if (ended) this.#unfollow(listener, taskId)
      }
    }))
  }

  #unfollow (listener: Listener, taskId: string): void {
    listener.taskIds.delete(taskId)
    this.#unindex(this.#byTask, taskId, listener)
  }

  /** Sends, or drops a listener whose client has stopped reading. */
  #send (listener: Listener, method: string, params: JsonObject, kind: NotificationKind): boolean {
    if (listener.bufferedBytes > this.#settings.maxListenerBufferBytes) {
      this.#drop(listener, 'slow')
      return false
    }
    if (!listener.notify(method, params, kind)) return false
    this.#observer.notificationSent(kind)
    return true
  }

  #drop (listener: Listener, reason: ListenerDropReason): void {
    this.#observer.listenerDropped(reason)
    listener.drop()
  }

  #subscriptionChanged ({ session, uri, subscribed }: SubscriptionChange): void {
    const listener = this.#bySession.get(session)
    if (listener === undefined) return
    if (uri === undefined) {
      this.#drop(listener, 'revoked')
    } else if (subscribed) {
      this.subscribed(listener, uri)
    } else if (!subscribed && listener.resources.delete(uri)) {
      this.#unindex(this.#byResource, uri, listener)
    }
  }

  #endExpired (lifetimeMs: number): void {
    const oldest = performance.now() - lifetimeMs
    const now = Date.now()
    for (const listener of this.#all) {
      const { session } = listener
      if (session !== undefined && (session.expiresAt <= now || this.#revoked(session.id))) this.#drop(listener, 'revoked')
      else if (listener.startedAt <= oldest) listener.complete(this.#settings.serverInfo)
    }
  }

  /** Keeps this node's claims on its sessions' streams; a stream whose claim another node took ends. */
  #renewClaims (): void {
    const store = this.#subscriptions
    const held = [...this.#bySession.values()]
    if (store === undefined || held.length === 0) return
    const claims = held.map(({ session }) => ({ session: session!.key, holder: session!.holder }))
    store.renew(claims, STREAM_LEASE_MS).then(kept => {
      kept.forEach((still, i) => { if (!still) this.#drop(held[i]!, 'superseded') })
    }, () => {})
  }

  #index (index: Map<string, Set<Listener>>, key: string, listener: Listener): void {
    let listeners = index.get(key)
    if (listeners === undefined) index.set(key, listeners = new Set())
    listeners.add(listener)
  }

  #unindex (index: Map<string, Set<Listener>>, key: string, listener: Listener): void {
    const listeners = index.get(key)
    if (listeners?.delete(listener) === true && listeners.size === 0) index.delete(key)
  }
}

function tooMany (detail: string): ProtocolError {
  return new ProtocolError(ErrorCode.InternalError, `Subscription limit reached: ${detail}`, { httpStatus: 429, headers: { 'retry-after': '1' } })
}
