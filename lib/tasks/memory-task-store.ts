import { applyChange, TERMINAL_STATUSES, type TaskChange, type TaskRecord, type TaskStore } from './task-store.js'

export interface TaskLimits {
  /** Tasks kept in all, live or ended and not yet expired. */
  maxTasks: number
  /** Live tasks one scope may have. */
  maxTasksPerScope: number
}

/**
 * Tasks in this process, bounded twice: a scope may have `maxTasksPerScope` live tasks, and the store
 * holds `maxTasks` in all (expired ones are dropped first to make room). Over either, `create` says no.
 */
export class MemoryTaskStore implements TaskStore {
  readonly #limits: TaskLimits
  readonly #tasks = new Map<string, TaskRecord>()
  readonly #liveByScope = new Map<string, number>()

  constructor (limits: TaskLimits) {
    this.#limits = limits
  }

  async create (record: TaskRecord): Promise<boolean> {
    if (this.#tasks.size >= this.#limits.maxTasks) this.cleanup(Date.now())
    const live = this.#liveByScope.get(record.scope) ?? 0
    if (this.#tasks.size >= this.#limits.maxTasks || live >= this.#limits.maxTasksPerScope) return false
    this.#tasks.set(record.taskId, { ...record })
    this.#liveByScope.set(record.scope, live + 1)
    return true
  }

  async get (taskId: string, scope: string): Promise<TaskRecord | undefined> {
    const record = this.#tasks.get(taskId)
    if (record === undefined || record.scope !== scope || (record.expiresAt !== undefined && record.expiresAt <= Date.now())) return undefined
    return { ...record }
  }

  async update (taskId: string, change: TaskChange): Promise<boolean> {
    const record = this.#tasks.get(taskId)
    if (record === undefined || TERMINAL_STATUSES.includes(record.status)) return false
    if (!applyChange(record, change)) return true
    const live = (this.#liveByScope.get(record.scope) ?? 1) - 1
    if (live === 0) this.#liveByScope.delete(record.scope)
    else this.#liveByScope.set(record.scope, live)
    return true
  }

  cleanup (now: number): number {
    let removed = 0
    for (const [taskId, record] of this.#tasks) {
      if (record.expiresAt !== undefined && record.expiresAt <= now) {
        this.#tasks.delete(taskId)
        removed++
      }
    }
    return removed
  }
}
