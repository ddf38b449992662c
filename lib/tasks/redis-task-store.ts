import type { RedisBus } from '../cluster/redis-bus.js'
import { ErrorCode } from '../core/jsonrpc.js'
import { TASK_BOUNDS } from './redis-task-bounds.js'
import { TERMINAL_STATUSES, type LeaseState, type TaskBounds, type TaskChange, type TaskCreation, type TaskRecord, type TaskStore } from './task-store.js'

const TERMINAL = "s == 'completed' or s == 'failed' or s == 'cancelled'"

/**
 * ARGV (after TASK_BOUNDS' four): owner, lease ms, record ms, maxTasksPerScope, maxKeptTasksPerScope,
 * maxTaskBytesPerScope, maxTasks, maxTaskBytes, then the record's field/value pairs. Live tasks of the
 * scope whose lease has lapsed (their node died) no longer count against its quotas. Answers 0 and 1
 * (live quota) or 2 (bytes quota) when refused, before anything is written or dropped.
 */
const CREATE = `${TASK_BOUNDS}
local live = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  if redis.call('EXISTS', P .. 'task-lease:' .. id) == 1 then live = live + 1
  else
    redis.call('SREM', KEYS[3], id)
    local state, size = indexed(id)
    if state == 'l' then setIndex(id, SCOPE, 'l', size, 'x', size) end
  end
end
if live >= tonumber(ARGV[8]) then return { 0, 1 } end
local size = 0
for i = 13, #ARGV do size = size + #ARGV[i] end
local usage = usageOf(SCOPE, live)
if usage.liveBytes + size > tonumber(ARGV[10]) then return { 0, 2 } end
fitScope(SCOPE, usage, tonumber(ARGV[9]), tonumber(ARGV[10]), 1, size)
redis.call('HSET', KEYS[1], unpack(ARGV, 13))
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[6])
redis.call('SADD', KEYS[3], ID)
redis.call('PEXPIRE', KEYS[3], ARGV[7])
setIndex(ID, SCOPE, nil, 0, 'l', size)
keepCaps(tonumber(ARGV[11]), tonumber(ARGV[12]))
return written()`

/**
 * ARGV (after TASK_BOUNDS' four): maxTaskBytesPerScope, maxTasks, maxTaskBytes, number of field/value
 * pairs, the pairs, then fields to delete. A task that has ended never changes (answers 0); one that
 * ends now keeps its record for its ttlMs, and leaves its lease and its scope's live set. A change is
 * always written: what it outgrows, ended tasks make up for (its scope's own first), never itself.
 */
const UPDATE = `${TASK_BOUNDS}
local s = redis.call('HGET', KEYS[1], 'status')
if not s or ${TERMINAL} then return { 0 } end
local n = tonumber(ARGV[8])
redis.call('HSET', KEYS[1], 'lastUpdatedAt', ARGV[2], unpack(ARGV, 9, 8 + 2 * n))
for i = 9 + 2 * n, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
s = redis.call('HGET', KEYS[1], 'status')
local ended = ${TERMINAL}
if ended then
  local ttl = tonumber(redis.call('HGET', KEYS[1], 'ttlMs'))
  redis.call('HDEL', KEYS[1], 'inputRequests')
  redis.call('HSET', KEYS[1], 'expiresAt', NOW + ttl)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('DEL', KEYS[2])
  redis.call('SREM', KEYS[3], ID)
end
local was, before = indexed(ID)
before = before or 0
local state = was or (redis.call('SISMEMBER', KEYS[3], ID) == 1 and 'l' or 'x')
local size = sizeOfHash(KEYS[1])
-- Until the caps are kept, an ending task counts as live: never one the store may drop.
setIndex(ID, SCOPE, was, before, state, size)
if size > before then
  fitScope(SCOPE, usageOf(SCOPE, redis.call('SCARD', KEYS[3])), math.huge, tonumber(ARGV[5]), 0, (ended and state == 'x') and size or 0)
end
keepCaps(tonumber(ARGV[6]), tonumber(ARGV[7]))
if ended then setIndex(ID, SCOPE, state, size, 'e', size) end
return written()`

/**
 * KEYS: task and lease of each task, in pairs. ARGV: owner, lease ms. Renews each live task's lease
 * (setting it again if it lapsed while Redis was away: the task is still live, its node still runs it);
 * per task 1 live, 0 missing (Redis came back empty), 2 ended (another node declared it lost).
 */
const RENEW = `
local states = {}
for i = 1, #KEYS, 2 do
  local s = redis.call('HGET', KEYS[i], 'status')
  if not s then states[#states + 1] = 0
  elseif ${TERMINAL} then states[#states + 1] = 2
  else
    redis.call('SET', KEYS[i + 1], ARGV[1], 'PX', ARGV[2])
    states[#states + 1] = 1
  end
end
return states`

/**
 * ARGV (after TASK_BOUNDS' four): owner, lease ms, record ms, '1' when live, maxKeptTasksPerScope,
 * maxTaskBytesPerScope, maxTasks, maxTaskBytes, then the record's field/value pairs. Writes a task
 * whole, unless the store has it ended (answers 0); never refused, it makes room as UPDATE does.
 */
const RESTORE = `${TASK_BOUNDS}
local s = redis.call('HGET', KEYS[1], 'status')
if s and (${TERMINAL}) then return { 0 } end
drop(ID)
redis.call('HSET', KEYS[1], unpack(ARGV, 13))
redis.call('PEXPIRE', KEYS[1], ARGV[7])
local live = ARGV[8] == '1'
if live then
  redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[6])
  redis.call('SADD', KEYS[3], ID)
  redis.call('PEXPIRE', KEYS[3], ARGV[7])
else
  redis.call('SREM', KEYS[3], ID)
end
local size = 0
for i = 13, #ARGV do size = size + #ARGV[i] end
local state = live and 'l' or 'x'
setIndex(ID, SCOPE, nil, 0, state, size)
fitScope(SCOPE, usageOf(SCOPE, redis.call('SCARD', KEYS[3])), tonumber(ARGV[9]), tonumber(ARGV[10]), live and 0 or 1, live and 0 or size)
keepCaps(tonumber(ARGV[11]), tonumber(ARGV[12]))
if not live then setIndex(ID, SCOPE, state, size, 'e', size) end
return written()`

const LEASE_STATES: readonly LeaseState[] = ['missing', 'live', 'ended']

/** Fields kept as JSON text in the hash (Lua never parses them). */
const JSON_FIELDS = ['inputRequests', 'result', 'error'] as const
const NUMBER_FIELDS = ['createdAt', 'lastUpdatedAt', 'ttlMs', 'pollIntervalMs', 'expiresAt'] as const

export interface RedisTaskSettings extends TaskBounds {
  /** How long a live task survives its node: its owner renews the lease more often than this. */
  leaseMs: number
  /** The longest a task may run (`maxStreamLifetimeMs`): a live record is dropped after that plus its ttl whatever happens. */
  maxLifetimeMs: number
  /** How long a new task waits for a replica of the primary to acknowledge it (0: no wait). */
  replicationTimeoutMs: number
  /** A task was created, but no replica acknowledged it within `replicationTimeoutMs`. */
  onUnreplicated: (taskId: string) => void
}

/** The quota that made CREATE refuse, by its code (1, 2). */
const REFUSALS: readonly TaskCreation[] = ['maxTasksPerScope', 'maxTaskBytesPerScope']

/**
 * Tasks shared by the cluster, one Redis hash each: written (and its owner's lease set) before
 * `CreateTaskResult` is sent, so any node answers `tasks/get` at once; expired by Redis itself
 * (`PEXPIRE` ttlMs once ended). The node running a task renews its lease; a live task whose lease has
 * lapsed reads, on every node, as `failed` with an error saying its node stopped. The bounds hold
 * across the cluster (./redis-task-bounds.ts).
 */
export class RedisTaskStore implements TaskStore {
  readonly #bus: RedisBus
  readonly #settings: RedisTaskSettings
  /** The keys of TASK_BOUNDS' indexes. */
  readonly #indexes: readonly string[]
  readonly #lostHandlers: Array<(taskId: string) => void> = []

  constructor (bus: RedisBus, settings: RedisTaskSettings) {
    this.#bus = bus
    this.#settings = settings
    this.#indexes = ['task-index', 'task-expiry', 'task-ranking:count', 'task-ranking:bytes', 'task-bytes'].map(name => this.#key(name))
  }

  /**
   * Written (CREATE), then, when the primary has replicas, acknowledged by one of them (`WAIT`) before
   * the caller sends `CreateTaskResult`: a failover promotes a replica, and one that never had the task
   * would lose a task its client was told of. ROLE travels with the script (one round trip; on a
   * Cluster the pipeline goes to the node of the task's slot), WAIT after it only when there are replicas.
   */
  async create (record: TaskRecord): Promise<TaskCreation> {
    const { taskId, scope, ttlMs } = record
    const { leaseMs, maxLifetimeMs, maxTasksPerScope, maxKeptTasksPerScope, maxTaskBytesPerScope, maxTasks, maxTaskBytes, replicationTimeoutMs } = this.#settings
    const [answer, role] = await this.#eval(CREATE, taskId, scope, [record.owner ?? '', leaseMs, maxLifetimeMs + ttlMs,
      maxTasksPerScope, maxKeptTasksPerScope, maxTaskBytesPerScope, maxTasks, maxTaskBytes, ...fieldsOf(record)], replicationTimeoutMs > 0)
    if (answer[0] !== 1) return REFUSALS[answer[1]! - 1]!
    const replicas = Array.isArray(role) && Array.isArray(role[2]) ? role[2].length : 0
    if (replicas > 0) {
      const [, [, acknowledged]] = await this.#bus.redis.pipeline().exists(this.#task(taskId)).wait(1, replicationTimeoutMs).exec() as [unknown, [null, number]]
      if (acknowledged < 1) this.#settings.onUnreplicated(taskId)
    }
    return 'created'
  }

  async get (taskId: string, scope: string): Promise<TaskRecord | undefined> {
    const [[, hash], [, leased]] = await this.#bus.redis.multi().hgetall(this.#task(taskId)).exists(this.#lease(taskId)).exec() as [[null, Record<string, string>], [null, number]]
    if (hash.scope !== scope) return undefined
    const record = recordOf(taskId, hash)
    if (TERMINAL_STATUSES.includes(record.status) || leased === 1) return record
    const lost: TaskChange = {
      status: 'failed',
      statusMessage: 'The node running the task stopped',
      error: { code: ErrorCode.InternalError, message: 'The node running the task stopped before it ended (its lease expired)' }
    }
    // Only the node whose write ended it tells: counted once, announced once.
    if (await this.#update(taskId, scope, lost)) for (const handler of this.#lostHandlers) handler(taskId)
    return await this.get(taskId, scope)
  }

  async update (taskId: string, change: TaskChange): Promise<boolean> {
    const scope = await this.#bus.redis.hget(this.#task(taskId), 'scope')
    return scope !== null && await this.#update(taskId, scope, change)
  }

  cleanup (): number {
    return 0
  }

  async renew (taskIds: readonly string[]): Promise<LeaseState[]> {
    if (taskIds.length === 0) return []
    const keys = taskIds.flatMap(taskId => [this.#task(taskId), this.#lease(taskId)])
    const states = await this.#bus.redis.eval(RENEW, keys.length, ...keys, this.#bus.nodeId, this.#settings.leaseMs) as number[]
    return states.map(state => LEASE_STATES[state]!)
  }

  async restore (record: TaskRecord): Promise<void> {
    const { taskId, scope, expiresAt } = record
    const live = expiresAt === undefined
    const keepMs = live ? this.#settings.maxLifetimeMs + record.ttlMs : expiresAt - Date.now()
    if (keepMs <= 0) return
    const { leaseMs, maxKeptTasksPerScope, maxTaskBytesPerScope, maxTasks, maxTaskBytes } = this.#settings
    await this.#eval(RESTORE, taskId, scope, [record.owner ?? '', leaseMs, keepMs, live ? '1' : '0',
      maxKeptTasksPerScope, maxTaskBytesPerScope, maxTasks, maxTaskBytes, ...fieldsOf(record)])
  }

  onReachable (handler: () => void): void {
    this.#bus.onReady(handler)
  }

  onLost (handler: (taskId: string) => void): void {
    this.#lostHandlers.push(handler)
  }

  async #update (taskId: string, scope: string, change: TaskChange): Promise<boolean> {
    const set: Array<string | number> = []
    const removed: string[] = []
    for (const [field, value] of Object.entries(change)) {
      if (value === undefined) removed.push(field)
      else set.push(field, encode(field, value))
    }
    const { maxTaskBytesPerScope, maxTasks, maxTaskBytes } = this.#settings
    const [answer] = await this.#eval(UPDATE, taskId, scope, [maxTaskBytesPerScope, maxTasks, maxTaskBytes, set.length / 2, ...set, ...removed])
    return answer[0] === 1
  }

  /**
   * Runs a script of TASK_BOUNDS on the task's keys, and with `role` the primary's ROLE in the same round
   * trip; counts what it dropped.
   */
  async #eval (script: string, taskId: string, scope: string, args: Array<string | number>, role = false): Promise<[number[], unknown]> {
    const keys = [this.#task(taskId), this.#lease(taskId), this.#key(`task-live:${scope}`), this.#key(`task-ended:${scope}`), ...this.#indexes]
    const pipeline = this.#bus.redis.pipeline().eval(script, keys.length, ...keys, this.#key(''), Date.now(), taskId, scope, ...args)
    const [[failed, answer], roleReply] = await (role ? pipeline.role() : pipeline).exec() as Array<[Error | null, unknown]> as [[Error | null, number[]], [Error | null, unknown]?]
    if (failed !== null) throw failed
    const [written, byScope = 0, byCaps = 0] = answer
    if (written === 1) {
      if (byScope > 0) this.#settings.onEvicted('scope', byScope)
      if (byCaps > 0) this.#settings.onEvicted('global', byCaps)
    }
    return [answer, roleReply?.[1]]
  }

  #task (taskId: string): string { return this.#key(`task:${taskId}`) }
  #lease (taskId: string): string { return this.#key(`task-lease:${taskId}`) }
  /** Every key of the store is of one group: its bounds are kept over all tasks, atomically, in one script. */
  #key (name: string): string { return this.#bus.key(name, 'tasks') }
}

function encode (field: string, value: unknown): string | number {
  return (JSON_FIELDS as readonly string[]).includes(field) ? JSON.stringify(value) : value as string | number
}

function fieldsOf (record: TaskRecord): Array<string | number> {
  const fields: Array<string | number> = []
  for (const [field, value] of Object.entries(record)) {
    if (value !== undefined && field !== 'taskId') fields.push(field, encode(field, value))
  }
  return fields
}

function recordOf (taskId: string, hash: Record<string, string>): TaskRecord {
  const record: Record<string, unknown> = { taskId }
  for (const [field, value] of Object.entries(hash)) {
    record[field] = (JSON_FIELDS as readonly string[]).includes(field)
      ? JSON.parse(value)
      : (NUMBER_FIELDS as readonly string[]).includes(field) ? Number(value) : value
  }
  return record as unknown as TaskRecord
}
