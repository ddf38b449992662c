import { randomBytes } from 'node:crypto'
import { ErrorCode, ProtocolError, type JsonObject, type RequestId } from '../core/jsonrpc.js'
import type { ListKind } from '../cluster/server-events.js'
import type { Era } from '../protocol/versions.js'
import { declaresTasks, tasksRequired } from '../tasks/tasks.js'
import { acknowledgedFilter, parseListenFilter, type FilterLimits } from './listen-filter.js'
import { Listener, type ListenerSink, type ListenerSpec } from './listener.js'
import type { NotificationKind } from '../observability/observer.js'
import { STREAM_LEASE_MS, type Listeners } from './listeners.js'
import { sessionKey, type SubscriptionStore } from './subscription-store.js'

/** What the server advertises it delivers in an era (its capabilities): a listener gets no more. */
export interface Deliverable {
  lists: readonly ListKind[]
  /** `resources.subscribe`. */
  resources: boolean
  /** The tasks extension. */
  tasks: boolean
}

export interface ListenStreamsParts {
  listeners: Listeners
  limits: FilterLimits
  deliverable: (era: Era) => Deliverable
  /** A task as `tasks/get` shows it, if it exists in `scope`. */
  task: (taskId: string, scope: string) => Promise<JsonObject | undefined>
  subscriptions: SubscriptionStore | undefined
  /** This node's name, in the claims of its sessions' streams. */
  node: string
}

/** A modern `subscriptions/listen` request, bound to its scope. */
export interface ListenRequest {
  id: RequestId
  params: JsonObject
  scope: string
  clientCapabilities: JsonObject | undefined
  sink: ListenerSink
  onNotified?: ((kind: NotificationKind) => void) | undefined
  /** Called once when the stream ends, however it ends. */
  onEnd?: (() => void) | undefined
}

/** A legacy `GET` with a verified session. */
export interface SessionStreamRequest {
  sessionId: string
  expiresAt: number
  scope: string
  sink: ListenerSink
}

/**
 * Opens the streams that listen: checks what is asked (before anything is written, so a refusal has
 * its own status), narrows it to what the server delivers, registers the listener, then writes. The
 * registry (`Listeners`) delivers from then on.
 */
export class ListenStreams {
  readonly #parts: ListenStreamsParts

  constructor (parts: ListenStreamsParts) {
    this.#parts = parts
  }

  /**
   * 2026-07-28 `subscriptions/listen`: the first message is the acknowledgement with the honoured
   * subset of the filter; a task id not of the caller's scope (or unknown) is left out of it, the same
   * either way. Each followed task's current state follows the acknowledgement.
   */
  async listen (request: ListenRequest): Promise<boolean> {
    const { listeners, limits, deliverable, task } = this.#parts
    const filter = parseListenFilter(request.params, limits)
    if (filter.taskIds.length > 0 && !declaresTasks(request.clientCapabilities)) throw tasksRequired()
    const delivered = deliverable('modern')
    const known = delivered.tasks ? await Promise.all(filter.taskIds.map(async id => await task(id, request.scope) !== undefined)) : []
    listeners.admit(request.scope)
    if (!request.sink.writable) return false
    const honoured = {
      lists: filter.lists.filter(list => delivered.lists.includes(list)),
      resources: delivered.resources ? filter.resources : [],
      taskIds: filter.taskIds.filter((_id, i) => known[i] === true)
    }
    const listener = this.#open({
      era: 'modern',
      scope: request.scope,
      ...honoured,
      subscriptionId: request.id,
      session: undefined,
      sink: request.sink,
      onNotified: request.onNotified,
      onEnd: request.onEnd
    })
    listener.notify('notifications/subscriptions/acknowledged', { notifications: acknowledgedFilter(honoured) }, undefined)
    for (const taskId of honoured.taskIds) listeners.refreshTask(taskId)
    return true
  }

  /**
   * A legacy session's standalone stream: one per session in the cluster (a second is 409, as the
   * official SDK's server answers), carrying the list changes and the updates of the resources the
   * session subscribed to. Without a reachable store, only this node's own streams are checked. A
   * stream of this node whose client left (paused for a resume) gives way: the client is back without
   * its cursor.
   */
  async openSession (request: SessionStreamRequest): Promise<void> {
    const { listeners, subscriptions, deliverable, node } = this.#parts
    const key = sessionKey(request.sessionId)
    const check = (): void => {
      const held = listeners.sessionListener(key)
      if (held?.paused === true) held.drop()
      else if (held !== undefined) throw conflict()
      listeners.admit(request.scope)
    }
    check()
    const holder = `${node}.${randomBytes(9).toString('base64url')}`
    const claimed = await subscriptions?.claim(key, holder, STREAM_LEASE_MS).catch(() => true) ?? true
    if (!claimed) throw conflict()
    try {
      check()
    } catch (error) {
      subscriptions?.release(key, holder).catch(() => {})
      throw error
    }
    if (!request.sink.writable) {
      subscriptions?.release(key, holder).catch(() => {})
      return
    }
    const delivered = deliverable('legacy')
    // Registered before its subscriptions are read: a subscribe meanwhile reaches it as a change.
    const listener = this.#open({
      era: 'legacy',
      scope: request.scope,
      lists: delivered.lists,
      resources: [],
      taskIds: [],
      subscriptionId: undefined,
      session: { id: request.sessionId, key, expiresAt: request.expiresAt, holder },
      sink: request.sink
    })
    if (!delivered.resources || subscriptions === undefined) return
    const uris = await subscriptions.list(key).catch(() => [])
    for (const uri of uris) listeners.subscribed(listener, uri)
  }

  /** Registers the listener (it hears events from now on), follows its connection, and opens its stream whatever `responseMode` says. */
  #open (spec: ListenerSpec): Listener {
    const { listeners } = this.#parts
    const listener: Listener = new Listener({
      ...spec,
      onEnd: () => {
        listeners.remove(listener)
        spec.onEnd?.()
      }
    })
    listeners.add(listener)
    spec.sink.onClose(() => { listener.closed() })
    spec.sink.open()
    return listener
  }
}

function conflict (): ProtocolError {
  return new ProtocolError(ErrorCode.ServerError, 'Conflict: Only one SSE stream is allowed per session', { httpStatus: 409 })
}
