import type { JsonObject, JsonRpcNotification, JsonRpcResponse, RequestId } from '../core/jsonrpc.js'
import type { ListKind } from '../cluster/server-events.js'
import type { Era } from '../protocol/versions.js'
import { MetaKey } from '../protocol/era.js'
import type { NotificationKind } from '../observability/observer.js'

/** Where a listener's messages go: an SSE response that stays open (`HttpResponseSink`). */
export interface ListenerSink {
  readonly writable: boolean
  /** The client accepts `text/event-stream`. */
  readonly acceptsStream: boolean
  /** Bytes written but not yet taken by the socket: a client that does not read makes it grow. */
  readonly bufferedBytes: number
  /** A resumable stream whose client left: it keeps what it is sent until a resume, or its window passes. */
  readonly paused?: boolean
  /** Sends the response's headers now: the stream is open before anything is sent on it. */
  open: () => void
  send: (message: JsonRpcNotification) => boolean
  /** The last message; the stream ends. */
  respond: (message: JsonRpcResponse) => void
  /** The stream ends without a response. */
  abandon: () => void
  /** Cuts the connection (a listener too slow to keep). */
  drop: () => void
  /** Calls `handler` once the connection has closed, whoever closed it. */
  onClose: (handler: () => void) => void
}

/** A legacy session's standalone stream: whose, until when, and its claim in the cluster. */
export interface ListeningSession {
  /** The verified session id (checked against revocations). */
  id: string
  /** A digest of the id: what stores and the bus know the session by. */
  key: string
  expiresAt: number
  /** This stream's name in the session's claim. */
  holder: string
}

export interface ListenerSpec {
  era: Era
  scope: string
  lists: readonly ListKind[]
  resources: readonly string[]
  taskIds: readonly string[]
  /** Modern: the listen request's id, verbatim, tagged on every message. */
  subscriptionId: RequestId | undefined
  session: ListeningSession | undefined
  sink: ListenerSink
  /** Called for each notification it sends (a span's event, with tracing). */
  onNotified?: ((kind: NotificationKind) => void) | undefined
  /** Called once, when it ends. */
  onEnd?: (() => void) | undefined
}

/**
 * One stream that listens: a modern `subscriptions/listen` response, or a legacy session's standalone
 * GET stream. It knows what it asked for and how its era frames a notification; the listeners registry
 * decides what reaches it.
 */
export class Listener {
  readonly era: Era
  readonly scope: string
  readonly lists: ReadonlySet<ListKind>
  /** Legacy: changes as the session subscribes and unsubscribes. */
  readonly resources: Set<string>
  /** Tasks still followed (a task that ended is followed no more), with the state last sent of each (JSON). */
  readonly taskIds: Map<string, string | undefined>
  readonly session: ListeningSession | undefined
  readonly startedAt = performance.now()
  readonly #subscriptionId: RequestId | undefined
  readonly #sink: ListenerSink
  readonly #onNotified: ((kind: NotificationKind) => void) | undefined
  #onEnd: (() => void) | undefined

  constructor (spec: ListenerSpec) {
    this.era = spec.era
    this.scope = spec.scope
    this.lists = new Set(spec.lists)
    this.resources = new Set(spec.resources)
    this.taskIds = new Map(spec.taskIds.map(taskId => [taskId, undefined]))
    this.session = spec.session
    this.#subscriptionId = spec.subscriptionId
    this.#sink = spec.sink
    this.#onNotified = spec.onNotified
    this.#onEnd = spec.onEnd
  }

  get open (): boolean {
    return this.#onEnd !== undefined && this.#sink.writable
  }

  get bufferedBytes (): number {
    return this.#sink.bufferedBytes
  }

  /** Its client left a resumable stream and may resume it. */
  get paused (): boolean {
    return this.#sink.paused === true
  }

  /** Sends `method` with `params`, tagged with the subscription id in the modern era; false once the stream is gone. */
  notify (method: string, params: JsonObject, kind: NotificationKind | undefined): boolean {
    if (!this.open) return false
    const tagged = this.#subscriptionId === undefined
      ? params
      : { ...params, _meta: { [MetaKey.subscriptionId]: this.#subscriptionId } }
    const sent = this.#sink.send({ jsonrpc: '2.0', method, params: tagged })
    if (sent && kind !== undefined) this.#onNotified?.(kind)
    return sent
  }

  /** Ends the stream as the server's choice: a modern listen gets its completion result, a legacy stream just ends. */
  complete (serverInfo: JsonObject): void {
    if (!this.#end()) return
    if (this.#subscriptionId === undefined) {
      this.#sink.abandon()
      return
    }
    this.#sink.respond({
      jsonrpc: '2.0',
      id: this.#subscriptionId,
      result: { resultType: 'complete', _meta: { [MetaKey.subscriptionId]: this.#subscriptionId, [MetaKey.serverInfo]: serverInfo } }
    })
  }

  /** The client left: nothing more is written. */
  closed (): void {
    if (this.#end()) this.#sink.abandon()
  }

  /** Cut off (too slow, its session revoked, its claim lost). */
  drop (): void {
    if (this.#end()) this.#sink.drop()
  }

  /** True the first time: what ends a listener runs once. */
  #end (): boolean {
    const onEnd = this.#onEnd
    if (onEnd === undefined) return false
    this.#onEnd = undefined
    onEnd()
    return true
  }
}
