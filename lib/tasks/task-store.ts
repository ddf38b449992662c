import type { JsonObject, JsonRpcErrorObject } from '../protocol/jsonrpc.js'
import type { InputRequest } from '../server/input-requests.js'

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

/**
 * Where tasks live. Every method may answer asynchronously (a store shared by several nodes); a task
 * is never visible to another scope, and a task that has ended never changes again.
 */
export interface TaskStore {
  /** Records a new task, durably: `tasks/get` finds it once this resolves. False over a quota. */
  create: (record: TaskRecord) => Promise<boolean>
  /** The task, if it exists in `scope` and has not expired. */
  get: (taskId: string, scope: string) => Promise<TaskRecord | undefined>
  /** Applies `change` to a live task (ended ones are left alone); ending it starts its expiry. */
  update: (taskId: string, change: TaskChange) => Promise<void>
  /** Drops expired tasks; how many. (A store that expires them itself has nothing to do.) */
  cleanup: (now: number) => number
  /** The tasks this node runs are still alive: a shared store keeps their owner's lease. */
  renew?: (taskIds: readonly string[]) => Promise<void>
}
