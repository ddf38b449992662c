import { missingCapability } from '../protocol/era-policy.js'
import { randomBytes } from 'node:crypto'
import type { FastifyBaseLogger } from 'fastify'
import { HandlerMisuseError } from '../core/errors.js'
import { unlessAborted } from '../core/abortable.js'
import type { Exchange } from '../lifecycle/exchange.js'
import { taskEndedChannel, type TaskEndedEvent } from '../core/events.js'
import type { LiveTaskStatus, RequestObserver, TaskOutcome } from '../observability/observer.js'
import { ErrorCode, invalidParams, isJsonObject, ProtocolError, resultResponse, type JsonObject, type JsonRpcResponse } from '../core/jsonrpc.js'
import type { InputRequest } from '../protocol/input-requests.js'
import type { AnswerChecks } from '../input/answer-checks.js'
import type { NodeMessages } from '../cluster/node-messages.js'
import { TaskSink } from './task-sink.js'
import { applyChange, TERMINAL_STATUSES, type TaskChange, type TaskCreation, type TaskRecord, type TaskStore } from './task-store.js'

/** The tasks extension of the modern era (docs/tasks.md). */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks'

/** Whether a tool's calls may become tasks (`optional`), or must (`required`: clients without the extension get -32021). */
export type TaskSupport = 'optional' | 'required'

/** Whether the request's client capabilities declare the tasks extension. */
export function declaresTasks (capabilities: JsonObject | undefined): boolean {
  const extensions = capabilities?.extensions
  return isJsonObject(extensions) && isJsonObject(extensions[TASKS_EXTENSION])
}

/** -32021 naming the extension. */
export function tasksRequired (): ProtocolError {
  return missingCapability({ extensions: { [TASKS_EXTENSION]: {} } })
}

export interface TaskSettings {
  store: TaskStore
  observer: RequestObserver
  /** The checks of what a task asks and what tasks/update answers, shared with the other eras. */
  answers: AnswerChecks
  log: FastifyBaseLogger
  /** How long a task is kept once it has ended. */
  ttlMs: number
  pollIntervalMs: number
  /** Largest result (JSON bytes) a task keeps; a larger one fails the task. */
  maxResultBytes: number
  janitorIntervalMs: number
  /** This node's name: a task records who runs it. */
  node: string
  /** How `tasks/update` and `tasks/cancel` reach the node running the task; undefined on a single node. */
  messages: NodeMessages | undefined
  /** How often this node renews the leases of the tasks it runs (a shared store). */
  renewIntervalMs: number
  /** The task support a tool declared. */
  taskSupport: (tool: unknown) => TaskSupport | undefined
  /** Makes a `tools/call` result what the modern era answers (resultType, serverInfo). */
  finish: (result: JsonObject) => JsonObject
  /** A task's state changed where every node reads it: listening clients are told (`notifications/tasks`). */
  changed: (taskId: string) => void
}

interface PendingAsk {
  readonly request: InputRequest
  readonly resolve: (answer: JsonObject) => void
}

/** The topic of task control messages between nodes. */
const CONTROL = 'tasks'

/**
 * A task of this node: running, or ended and not yet recorded so. Its record is what `tasks/get` shows;
 * this node answers from it, so the tasks it runs are served while a shared store cannot be reached.
 */
interface OwnedTask {
  readonly record: TaskRecord
  /** The store missed a change (it was unreachable, or came back empty): the whole task is written once it can be. */
  unsynced: boolean
}

/** A task running on this node: its exchange and the asks it waits on. */
interface RunningTask extends OwnedTask {
  readonly exchange: Exchange
  /** Outstanding asks by their key on the wire. */
  readonly asks: Map<string, PendingAsk>
  /** Every key this task has asked under: a key is never reused (the extension forbids it). */
  readonly keys: Set<string>
  /** The cluster declared it lost (its lease lapsed while Redis was away): its end is not counted again. */
  lost: boolean
}

/**
 * Tasks of the tasks extension (modern era): a `tools/call` whose handler calls `ctx.startTask()`, when
 * its tool declares task support and the client declared the extension, is answered at once with a
 * `CreateTaskResult`; its handler goes on, detached from the POST, answering into the task's record.
 * `tasks/get`, `tasks/update` and `tasks/cancel` read and drive it. Cancellation, the kill timeout,
 * worker termination and shutdown apply as to any request (`tasks/cancel` is a cancellation with source
 * `task`).
 */
export class Tasks {
  readonly #settings: TaskSettings
  readonly #running = new Map<string, RunningTask>()
  /** Tasks that ended while the store could not be reached, until their end is recorded (or they expire). */
  readonly #unrecorded = new Map<string, OwnedTask>()
  readonly #byExchange = new Map<Exchange, RunningTask>()
  /** Tasks being recorded: a second `startTask()` meanwhile waits for the first instead of making another. */
  readonly #starting = new Map<Exchange, Promise<void>>()
  #janitor: NodeJS.Timeout | undefined
  #renewal: NodeJS.Timeout | undefined
  /** Ends of tasks still being written to the store: closing waits for them (shutdown fails running tasks). */
  readonly #endings = new Set<Promise<void>>()

  constructor (settings: TaskSettings) {
    this.#settings = settings
    // This node found a dead node's task and marked it failed: listening clients hear it as any change.
    settings.store.onLost?.(taskId => { settings.changed(taskId) })
    // Another node received tasks/update or tasks/cancel for a task this node runs.
    settings.messages?.receive(CONTROL, ({ op, taskId, scope, inputResponses }) => {
      const running = typeof taskId === 'string' ? this.#running.get(taskId) : undefined
      if (running === undefined || running.record.scope !== scope) return
      if (op === 'cancel') running.exchange.cancel('tasks/cancel', 'task')
      else if (op === 'update' && isJsonObject(inputResponses)) {
        this.#answer(running, inputResponses).catch((error: unknown) => { settings.log.warn({ err: error, taskId }, 'MCP task update from another node could not be recorded') })
      }
    })
  }

  startTimers (): void {
    const { store, janitorIntervalMs, renewIntervalMs } = this.#settings
    this.#janitor = setInterval(() => { store.cleanup(Date.now()) }, janitorIntervalMs)
    this.#janitor.unref()
    if (store.renew === undefined) return
    this.#renewal = setInterval(() => { this.#resync() }, renewIntervalMs)
    this.#renewal.unref()
    store.onReachable?.(() => { this.#resync() })
  }

  /**
   * Renews the leases of the tasks this node runs, and writes to the store what it missed while it was
   * away: tasks whose changes failed, tasks it lost (Redis came back empty), ends not yet recorded.
   * A task the cluster declared lost meanwhile is stopped here too.
   */
  #resync (): void {
    const { store, log } = this.#settings
    const running = [...this.#running.values()]
    const resync = async (): Promise<void> => {
      const states = await store.renew!(running.map(task => task.record.taskId))
      for (const [i, task] of running.entries()) {
        if (states[i] === 'ended' && this.#running.get(task.record.taskId) === task) {
          task.lost = true
          task.exchange.cancel('The task was declared lost: its lease lapsed while the task store was unreachable', 'task')
        } else if (states[i] === 'missing' || task.unsynced) {
          task.unsynced = true
          await this.#writeBack(task)
        }
      }
      for (const [taskId, task] of this.#unrecorded) {
        if (task.record.expiresAt! > Date.now()) await this.#writeBack(task)
        if (!task.unsynced || task.record.expiresAt! <= Date.now()) this.#unrecorded.delete(taskId)
      }
    }
    resync().catch((error: unknown) => { log.warn({ err: error }, 'MCP task leases could not be renewed') })
  }

  /**
   * Writes a task the store missed changes to, whole; once written, its listeners on every node are
   * told, since what was announced while the store was away (its end, say) reached nobody elsewhere.
   */
  async #writeBack (task: OwnedTask): Promise<void> {
    const unsynced = task.unsynced
    await this.#write(task, {})
    if (unsynced && !task.unsynced) this.#settings.changed(task.record.taskId)
  }

  /**
   * Records a change of a task this node owns. A store that fails it is written the whole task later
   * (`#resync`); a store that no longer has the task live (Redis came back empty) is written it now.
   */
  async #write (task: OwnedTask, change: TaskChange, whole: TaskRecord = task.record): Promise<void> {
    const { store } = this.#settings
    try {
      if (task.unsynced || !await store.update(task.record.taskId, change)) await store.restore?.(whole)
      task.unsynced = false
    } catch {
      task.unsynced = true
    }
  }

  /**
   * Records a change of a running task in the store, then here (its gauge too). This node answers for
   * its tasks from memory: a status it showed before the store had it (input_required) could send the
   * client's answer to a node that still reads the old one. A task that ended meanwhile shows its end.
   */
  async #change (running: RunningTask, change: TaskChange): Promise<void> {
    const whole = { ...running.record }
    applyChange(whole, change)
    await this.#write(running, change, whole)
    if (this.#running.get(running.record.taskId) !== running) return
    const before = running.record.status as LiveTaskStatus
    applyChange(running.record, change)
    this.#settings.changed(running.record.taskId)
    const after = running.record.status
    if (after !== before) {
      this.#settings.observer.tasksLive(before, -1)
      if (after === 'working' || after === 'input_required') this.#settings.observer.tasksLive(after, 1)
    }
  }

  /**
   * Stops the timers and waits until every task that ended has been recorded, before the store's
   * connection closes. A task still being created may already be in the store: its creation is waited
   * for first, so that shutdown (which cancelled its request) ends it there too instead of leaving it
   * live until its lease lapses.
   */
  async close (): Promise<void> {
    clearInterval(this.#janitor)
    clearInterval(this.#renewal)
    await Promise.allSettled(this.#starting.values())
    await Promise.all(this.#endings)
  }

  /** Whether the exchange's request has become a task. */
  isTask (exchange: Exchange): boolean {
    return this.#byExchange.has(exchange)
  }

  /**
   * `ctx.startTask()`: makes the call a task when its tool allows and its client declared the extension
   * (resolves once the task is durably recorded and the client has its `CreateTaskResult`); otherwise the
   * call goes on as an ordinary request. A tool without task support calling it is a programming error.
   */
  async start (exchange: Exchange): Promise<void> {
    if (this.#byExchange.has(exchange)) return
    let starting = this.#starting.get(exchange)
    if (starting === undefined) {
      starting = this.#start(exchange).finally(() => { this.#starting.delete(exchange) })
      this.#starting.set(exchange, starting)
    }
    await starting
  }

  async #start (exchange: Exchange): Promise<void> {
    const support = exchange.method === 'tools/call' ? this.#settings.taskSupport(exchange.params.name) : undefined
    if (support === undefined) throw new HandlerMisuseError('ctx.startTask() needs a tool registered with the option "task" (\'optional\' or \'required\')')
    if (exchange.era !== 'modern' || !declaresTasks(exchange.binding.clientCapabilities)) return
    if (exchange.cancellation !== undefined) throw exchange.cancellation
    const { store, ttlMs, pollIntervalMs } = this.#settings
    const now = Date.now()
    const record: TaskRecord = {
      taskId: randomBytes(16).toString('base64url'), scope: exchange.scope, status: 'working', createdAt: now, lastUpdatedAt: now, ttlMs, pollIntervalMs, owner: this.#settings.node
    }
    let created: TaskCreation
    try {
      created = await store.create(record)
    } catch (error) {
      // No task can be durably created: an optional one runs as an ordinary call, which the extension allows.
      if (support === 'optional') {
        this.#settings.log.warn({ err: error, tool: exchange.params.name }, 'MCP task store unreachable: the call runs without a task')
        return
      }
      throw storeUnreachable()
    }
    if (created !== 'created') {
      // Only the client's own quota refuses (a full server drops ended tasks instead): it may retry once one of its tasks has ended.
      const quota = created === 'maxTasksPerScope' ? 'as many live tasks as it may (maxTasksPerScope)' : 'live tasks that take all the room it may use (maxTaskBytesPerScope)'
      throw new ProtocolError(ErrorCode.ServerError, `Too many tasks: this client has ${quota}`, { httpStatus: 429 })
    }
    const running: RunningTask = { record: { ...record }, unsynced: false, exchange, asks: new Map(), keys: new Set(), lost: false }
    this.#settings.observer.tasksLive('working', 1)
    this.#running.set(record.taskId, running)
    this.#byExchange.set(exchange, running)
    // The request may have been cancelled (its client left) while the task was being recorded.
    if (exchange.cancelled) {
      this.#end(running, undefined)
      throw exchange.cancellation
    }
    exchange.sink.respond(resultResponse(exchange.id, this.#settings.finish({ resultType: 'task', ...wireTask(record) })))
    exchange.detach(new TaskSink(response => { this.#end(running, response) }, progress => { this.#progress(running, progress) }))
  }

  /** A task's asks: its status becomes `input_required` until `tasks/update` has answered them all. */
  async ask (exchange: Exchange, requests: Record<string, InputRequest>, capabilities: JsonObject): Promise<JsonObject> {
    const running = this.#byExchange.get(exchange)!
    this.#settings.answers.asked(requests, capabilities)
    if (exchange.cancellation !== undefined) throw exchange.cancellation
    const keys = Object.keys(requests)
    // Never rejects: a cancelled task's asks are dropped with it.
    const answers = Promise.all(keys.map(key => new Promise<JsonObject>(resolve => {
      running.asks.set(this.#freshKey(running, key), { request: requests[key]!, resolve })
    })))
    await this.#change(running, { status: 'input_required', inputRequests: outstanding(running) })
    const values = await unlessAborted(answers, exchange.signal)
    return Object.fromEntries(keys.map((key, i) => [key, values[i]]))
  }

  /** `tasks/get`: the task as the extension shows it. */
  async get (params: JsonObject, scope: string): Promise<JsonObject> {
    const record = await this.#find(params, scope)
    const task = wireTask(record)
    if (record.status === 'input_required' && record.inputRequests !== undefined) task.inputRequests = record.inputRequests
    if (record.status === 'completed') task.result = record.result
    if (record.status === 'failed') task.error = record.error
    return task
  }

  /** The task as `tasks/get` shows it, if `scope` may see it: undefined for any other (or while its store cannot be reached). */
  async peek (taskId: string, scope: string): Promise<JsonObject | undefined> {
    try {
      return await this.get({ taskId }, scope)
    } catch (error) {
      if (error instanceof ProtocolError) return undefined
      throw error
    }
  }

  /**
   * `tasks/update`: answers outstanding asks by key. Keys not outstanding are ignored, and so is an
   * answer `AnswerChecks` refuses (the ask stays outstanding); acknowledged with an empty result once the
   * task shows what is still asked, or once the node running it has received the update. The status
   * this node reads may lag behind the owner's, so any live task of another node gets the update.
   */
  async update (params: JsonObject, scope: string): Promise<JsonObject> {
    const { inputResponses } = params
    if (!isJsonObject(inputResponses)) throw invalidParams('inputResponses must be an object')
    const record = await this.#find(params, scope)
    const running = this.#running.get(record.taskId)
    if (running?.record === record) await this.#answer(running, inputResponses)
    else if (!TERMINAL_STATUSES.includes(record.status)) await this.#forward(record, { op: 'update', inputResponses })
    return {}
  }

  async #answer (running: RunningTask, inputResponses: JsonObject): Promise<void> {
    const outstandingBefore = running.asks.size
    if (outstandingBefore === 0) return
    for (const [key, answer] of Object.entries(inputResponses)) {
      const ask = running.asks.get(key)
      if (ask === undefined) continue
      let checked: JsonObject
      try {
        checked = this.#settings.answers.received(ask.request, `inputResponses.${key}`, answer)
      } catch {
        continue
      }
      running.asks.delete(key)
      ask.resolve(checked)
    }
    // Nothing answered (unknown keys, wrong shapes): nothing to record.
    if (running.asks.size === outstandingBefore) return
    await this.#change(running, running.asks.size > 0
      ? { inputRequests: outstanding(running) }
      : { status: 'working', inputRequests: undefined })
  }

  /** The handler's progress, the only way the extension shows it: the task's `statusMessage`. */
  #progress (running: RunningTask, { progress, total, message }: JsonObject): void {
    const amount = typeof total === 'number' ? `${String(progress)}/${total}` : String(progress)
    const statusMessage = typeof message === 'string' ? `${message} (${amount})` : `Progress: ${amount}`
    this.#change(running, { statusMessage }).catch(() => {})
  }

  /** `tasks/cancel`: cancels a live task through the path every cancellation takes; idempotent once it has ended. */
  async cancel (params: JsonObject, scope: string): Promise<JsonObject> {
    const record = await this.#find(params, scope)
    if (TERMINAL_STATUSES.includes(record.status)) return {}
    const running = this.#running.get(record.taskId)
    if (running?.record === record) running.exchange.cancel('tasks/cancel', 'task')
    else if (record.owner !== undefined && record.owner !== this.#settings.node && this.#settings.messages !== undefined) await this.#forward(record, { op: 'cancel' })
    // Its node is this one, yet it does not run here: nothing will ever end it but this.
    else if (await unavailableUnless(this.#settings.store.update(record.taskId, { status: 'cancelled' }))) this.#settings.changed(record.taskId)
    return {}
  }

  /**
   * Sends a control message to the node running the task; resolves once that node has received it (the
   * extension lets it take effect later). A message nobody received is refused, never acknowledged and lost.
   */
  async #forward (record: TaskRecord, message: JsonObject): Promise<void> {
    const { messages, node } = this.#settings
    const delivered = record.owner !== undefined && record.owner !== node && messages !== undefined &&
      await messages.send(record.owner, CONTROL, { ...message, taskId: record.taskId, scope: record.scope })
    if (!delivered) throw ownerUnreachable()
  }

  /** The task in `scope`: this node's own from memory (the store may be unreachable), any other from the store. */
  async #find (params: JsonObject, scope: string): Promise<TaskRecord> {
    const { taskId } = params
    if (typeof taskId !== 'string') throw invalidParams('taskId must be a string')
    const owned = (this.#running.get(taskId) ?? this.#unrecorded.get(taskId))?.record
    const record = owned ?? (taskId.length <= 64 ? await unavailableUnless(this.#settings.store.get(taskId, scope)) : undefined)
    // Another scope's task answers exactly as an unknown one does.
    if (record === undefined || record.scope !== scope || (record.expiresAt ?? Infinity) <= Date.now()) throw invalidParams('Task not found')
    return record
  }

  /** The handler's key, or a fresh variant of it when this task already asked under it. */
  #freshKey (running: RunningTask, key: string): string {
    let fresh = key
    for (let n = 2; running.keys.has(fresh); n++) fresh = `${key}-${n}`
    running.keys.add(fresh)
    return fresh
  }

  /** The task's handler has ended: its record says how (no response: cancelled), and so do the metrics and the log. */
  #end (running: RunningTask, response: JsonRpcResponse | undefined): void {
    const { record: { taskId, status: before }, exchange } = running
    this.#running.delete(taskId)
    this.#byExchange.delete(exchange)
    running.asks.clear()
    const change = changeFor(response, this.#settings.maxResultBytes)
    applyChange(running.record, change)
    const status = change.status as TaskEndedEvent['status']
    const { observer, log } = this.#settings
    observer.tasksLive(before as LiveTaskStatus, -1)
    if (!running.lost) observer.taskEnded(exchange.cancellationSource === 'lifetime' ? 'expired' : status satisfies TaskOutcome)
    log.info({ taskId, tool: exchange.params.name, status: running.lost ? 'lost' : status }, 'MCP task ended')
    if (taskEndedChannel.hasSubscribers) taskEndedChannel.publish({ taskId, scope: exchange.scope, status } satisfies TaskEndedEvent)
    this.#unrecorded.set(taskId, running)
    const ending = this.#write(running, change).then(() => {
      this.#settings.changed(taskId)
      if (!running.unsynced) this.#unrecorded.delete(taskId)
      // A warning, not an error: the outage itself is logged once, by the bus.
      else log.warn({ taskId }, 'MCP task could not be recorded as ended: the task store is unreachable; it is written once it is back')
    }).finally(() => { this.#endings.delete(ending) })
    this.#endings.add(ending)
  }
}

/**
 * A shared store that cannot be reached (Redis down) is an error saying so, answered as an ordinary
 * JSON-RPC error (not a 5xx: this node is healthy, and a load balancer must not take it out for it).
 */
function storeUnreachable (): ProtocolError {
  return new ProtocolError(ErrorCode.ServerError, 'Tasks are unavailable: the task store cannot be reached; try again shortly', { httpStatus: 200 })
}

/** A control message for a task reached no node running it (that node lost its link to Redis): the client may retry. */
function ownerUnreachable (): ProtocolError {
  return new ProtocolError(ErrorCode.ServerError, 'The node running the task cannot be reached; try again shortly', { httpStatus: 200 })
}

async function unavailableUnless<T> (pending: Promise<T>): Promise<T> {
  try {
    return await pending
  } catch {
    throw storeUnreachable()
  }
}

function changeFor (response: JsonRpcResponse | undefined, maxResultBytes: number): TaskChange {
  if (response === undefined) return { status: 'cancelled' }
  if (response.error !== undefined) return { status: 'failed', error: response.error, statusMessage: response.error.message }
  const result = response.result as JsonObject
  if (Buffer.byteLength(JSON.stringify(result)) > maxResultBytes) {
    const error = { code: ErrorCode.InternalError, message: `The task's result is larger than maxTaskResultBytes (${maxResultBytes})` }
    return { status: 'failed', error, statusMessage: error.message }
  }
  return { status: 'completed', result }
}

function outstanding (running: RunningTask): Record<string, InputRequest> {
  return Object.fromEntries([...running.asks].map(([key, ask]) => [key, ask.request]))
}

/** The fields of a task on the wire. */
function wireTask (record: TaskRecord): JsonObject {
  const task: JsonObject = {
    taskId: record.taskId,
    status: record.status,
    createdAt: new Date(record.createdAt).toISOString(),
    lastUpdatedAt: new Date(record.lastUpdatedAt).toISOString(),
    ttlMs: record.ttlMs,
    pollIntervalMs: record.pollIntervalMs
  }
  if (record.statusMessage !== undefined) task.statusMessage = record.statusMessage
  return task
}
