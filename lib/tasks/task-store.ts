import type { JsonObject, JsonRpcErrorObject } from '../core/jsonrpc.js'
import type { TaskBound } from '../observability/observer.js'
import type { InputRequest } from '../protocol/input-requests.js'

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'cancelled' | 'failed'

export const TERMINAL_STATUSES: readonly TaskStatus[] = ['completed', 'cancelled', 'failed']

/** One task as the store keeps it: what `tasks/get` shows, and whose it is. */
export interface TaskRecord {
  taskId: string
  /** Only requests in this scope see the task. */
  scope: string
  status: TaskStatus
  statusMessage?: string | undefined
  /** `Date.now()` values; ISO 8601 on the wire. */
  createdAt: number
  lastUpdatedAt: number
  /** How long the task is kept once it has ended. */
  ttlMs: number
  pollIntervalMs: number
  /** While `input_required`: the asks still unanswered, by key. */
  inputRequests?: Record<string, InputRequest> | undefined
  /** When `completed`: what the call would have answered. */
  result?: JsonObject | undefined
  /** When `failed`: the JSON-RPC error. */
  error?: JsonRpcErrorObject | undefined
  /** `Date.now()` after which the task is gone (set when it ends). */
  expiresAt?: number | undefined
  /** The node running it (a store shared by several nodes). */
  owner?: string | undefined
}

/** A change to a live task; `inputRequests: undefined` clears them. */
export type TaskChange = Partial<Pick<TaskRecord, 'status' | 'statusMessage' | 'inputRequests' | 'result' | 'error'>>

/** A new task recorded, or the quota of its scope that refused it (429). */
export type TaskCreation = 'created' | 'maxTasksPerScope' | 'maxTaskBytesPerScope'

/**
 * What a store keeps (`lib/plugin/options.ts` documents each). Only a scope's own quota refuses: over its kept
 * bounds a scope drops its own oldest ended tasks, and over a cap the store drops ended tasks of the
 * scopes that keep the most (by count over `maxTasks`, by bytes over `maxTaskBytes`), oldest first.
 * Live tasks are never dropped: what is live beyond a cap are requests in flight, bounded per scope
 * and by what the nodes admit. Bytes are the stored record's size.
 */
export interface TaskBounds {
  maxTasksPerScope: number
  maxKeptTasksPerScope: number
  maxTaskBytesPerScope: number
  maxTasks: number
  maxTaskBytes: number
  /** Ended tasks were dropped before their ttl (`tasks/get` finds them no more). */
  onEvicted: (bound: TaskBound, count: number) => void
}

/** What a shared store holds of a task its node runs: `live` (lease renewed), `missing` (Redis came back empty), `ended` (declared lost meanwhile). */
export type LeaseState = 'live' | 'missing' | 'ended'

/**
 * Where tasks live. Every method may answer asynchronously (a store shared by several nodes); a task
 * is never visible to another scope, and a task that has ended never changes again.
 */
export interface TaskStore {
  /** Records a new live task, durably: `tasks/get` finds it once this resolves; or says which quota of its scope refused it. */
  create: (record: TaskRecord) => Promise<TaskCreation>
  /** The task, if it exists in `scope` and has not expired. */
  get: (taskId: string, scope: string) => Promise<TaskRecord | undefined>
  /** Applies `change` to a live task, ending it starts its expiry; false when the store has no such live task. */
  update: (taskId: string, change: TaskChange) => Promise<boolean>
  /** Drops expired tasks; how many. (A store that expires them itself has nothing to do.) */
  cleanup: (now: number) => number
  /** Shared store: the tasks this node runs are alive; renews their leases and says what it holds of each. */
  renew?: (taskIds: readonly string[]) => Promise<LeaseState[]>
  /**
   * Shared store: writes a task of this node whole, after the store missed changes to it (it was
   * unreachable, or came back empty). A task the store has as ended is left alone.
   */
  restore?: (record: TaskRecord) => Promise<void>
  /** Shared store: calls `handler` each time the store becomes reachable again. */
  onReachable?: (handler: () => void) => void
  /** Shared store: calls `handler` with each task this node found lost (its node died) and marked failed. */
  onLost?: (handler: (taskId: string) => void) => void
}

/** Applies `change` to a live task as every store does; true when it ended the task (its expiry starts, its asks go). */
export function applyChange (record: TaskRecord, change: TaskChange): boolean {
  Object.assign(record, change)
  const now = Date.now()
  record.lastUpdatedAt = now
  if (!TERMINAL_STATUSES.includes(record.status)) return false
  record.expiresAt = now + record.ttlMs
  record.inputRequests = undefined
  return true
}
