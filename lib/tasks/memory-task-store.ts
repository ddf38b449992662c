import type { TaskBound } from '../observability/observer.js'
import { applyChange, TERMINAL_STATUSES, type TaskBounds, type TaskChange, type TaskCreation, type TaskRecord, type TaskStore } from './task-store.js'

/** A task as kept, with its size (its record as JSON, in bytes). */
interface Kept {
  readonly record: TaskRecord
  bytes: number
}

/** What one scope keeps. */
class ScopeTasks {
  live = 0
  /** Bytes of its tasks, live and ended. */
  bytes = 0
  /** Its ended tasks, oldest first. */
  readonly ended = new Map<string, Kept>()
  endedBytes = 0

  get kept (): number {
    return this.live + this.ended.size
  }
}

/**
 * Tasks in this process, within `TaskBounds`. Tasks end in order and are all kept `taskTtlMs`, so the
 * ended ones, in the order they ended, are in expiry order too: oldest first, in all and per scope.
 */
export class MemoryTaskStore implements TaskStore {
  readonly #bounds: TaskBounds
  readonly #tasks = new Map<string, Kept>()
  readonly #ended = new Map<string, Kept>()
  readonly #scopes = new Map<string, ScopeTasks>()
  #bytes = 0

  constructor (bounds: TaskBounds) {
    this.#bounds = bounds
  }

  async create (record: TaskRecord): Promise<TaskCreation> {
    this.cleanup(Date.now())
    const { maxTasksPerScope, maxKeptTasksPerScope, maxTaskBytesPerScope } = this.#bounds
    const scope = this.#scopes.get(record.scope) ?? new ScopeTasks()
    if (scope.live >= maxTasksPerScope) return 'maxTasksPerScope'
    const bytes = sizeOf(record)
    // Its live tasks alone leave no room: nothing it may drop would make any.
    if (scope.bytes - scope.endedBytes + bytes > maxTaskBytesPerScope) return 'maxTaskBytesPerScope'
    this.#scopes.set(record.scope, scope)
    // At its own quotas, the scope makes room with its own oldest ended tasks: nobody else loses anything.
    let dropped = 0
    for (; scope.ended.size > 0 && (scope.kept >= maxKeptTasksPerScope || scope.bytes + bytes > maxTaskBytesPerScope); dropped++) {
      this.#drop(scope.ended.values().next().value!)
    }
    this.#evicted('scope', dropped)
    const kept: Kept = { record: { ...record }, bytes: 0 }
    this.#tasks.set(record.taskId, kept)
    scope.live++
    this.#resize(scope, kept, bytes)
    this.#keepCaps()
    return 'created'
  }

  async get (taskId: string, scope: string): Promise<TaskRecord | undefined> {
    const record = this.#tasks.get(taskId)?.record
    if (record === undefined || record.scope !== scope || (record.expiresAt !== undefined && record.expiresAt <= Date.now())) return undefined
    return { ...record }
  }

  async update (taskId: string, change: TaskChange): Promise<boolean> {
    const kept = this.#tasks.get(taskId)
    if (kept === undefined || TERMINAL_STATUSES.includes(kept.record.status)) return false
    const scope = this.#scopes.get(kept.record.scope)!
    const ended = applyChange(kept.record, change)
    // A change is always recorded (a task's state is never lost); what it outgrows, ended tasks make up
    // for: the scope's own first, then the largest scopes'. Not yet among the ended, it is never dropped here.
    this.#resize(scope, kept, sizeOf(kept.record))
    let dropped = 0
    for (; scope.bytes > this.#bounds.maxTaskBytesPerScope && scope.ended.size > 0; dropped++) this.#drop(scope.ended.values().next().value!)
    this.#evicted('scope', dropped)
    this.#keepCaps()
    if (ended) {
      scope.live--
      scope.ended.set(taskId, kept)
      scope.endedBytes += kept.bytes
      this.#ended.set(taskId, kept)
    }
    return true
  }

  cleanup (now: number): number {
    let removed = 0
    for (const kept of this.#ended.values()) {
      if (kept.record.expiresAt! > now) break
      this.#drop(kept)
      removed++
    }
    return removed
  }

  /** Over `maxTasks` or `maxTaskBytes`: drops ended tasks of the scopes keeping the most, oldest first; never a live one. */
  #keepCaps (): void {
    const { maxTasks, maxTaskBytes } = this.#bounds
    if (this.#tasks.size <= maxTasks && this.#bytes <= maxTaskBytes) return
    this.cleanup(Date.now())
    let dropped = 0
    for (;;) {
      const byCount = this.#tasks.size > maxTasks
      if (!byCount && this.#bytes <= maxTaskBytes) break
      const largest = this.#largest(byCount)
      // Nothing ended is left: live tasks are neither dropped nor refused (see TaskBounds).
      if (largest === undefined) break
      this.#drop(largest.ended.values().next().value!)
      dropped++
    }
    this.#evicted('global', dropped)
  }

  /** The scope with the most ended tasks (or bytes of them), if any has one. */
  #largest (byCount: boolean): ScopeTasks | undefined {
    let largest: ScopeTasks | undefined
    let most = 0
    for (const scope of this.#scopes.values()) {
      const amount = byCount ? scope.ended.size : scope.endedBytes
      if (scope.ended.size > 0 && amount > most) {
        largest = scope
        most = amount
      }
    }
    return largest
  }

  /** Forgets an ended task. */
  #drop (kept: Kept): void {
    const { taskId } = kept.record
    const scope = this.#scopes.get(kept.record.scope)!
    this.#tasks.delete(taskId)
    this.#ended.delete(taskId)
    scope.ended.delete(taskId)
    scope.endedBytes -= kept.bytes
    this.#resize(scope, kept, 0)
    if (scope.kept === 0) this.#scopes.delete(kept.record.scope)
  }

  #resize (scope: ScopeTasks, kept: Kept, bytes: number): void {
    scope.bytes += bytes - kept.bytes
    this.#bytes += bytes - kept.bytes
    kept.bytes = bytes
  }

  #evicted (bound: TaskBound, count: number): void {
    if (count > 0) this.#bounds.onEvicted(bound, count)
  }
}

function sizeOf (record: TaskRecord): number {
  return Buffer.byteLength(JSON.stringify(record))
}
