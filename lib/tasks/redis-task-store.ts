import type { RedisBus } from '../cancellation/redis-bus.js'
import { ErrorCode } from '../protocol/jsonrpc.js'
import type { LeaseState, TaskChange, TaskRecord, TaskStatus, TaskStore } from './task-store.js'

const TERMINAL = "s == 'completed' or s == 'failed' or s == 'cancelled'"

/**
 * KEYS: task, lease, the scope's live set. ARGV: task id, owner, lease ms, record ms, per-scope quota,
 * lease key prefix, then the record's field/value pairs. Live tasks of the scope whose lease has
 * lapsed (their node died) no longer count against its quota.
 */
const CREATE = `
local live = 0
for _, id in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  if redis.call('EXISTS', ARGV[6] .. id) == 1 then live = live + 1 else redis.call('SREM', KEYS[3], id) end
end
if live >= tonumber(ARGV[5]) then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 7))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
return 1`

/**
 * KEYS: task, lease, the scope's live set. ARGV: task id, now, number of field/value pairs, the pairs,
 * then fields to delete. A task that has ended never changes; one that ends now keeps its record for
 * its ttlMs, and leaves its lease and its scope's live set.
 */
const UPDATE = `
local s = redis.call('HGET', KEYS[1], 'status')
if not s or ${TERMINAL} then return 0 end
local n = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'lastUpdatedAt', ARGV[2], unpack(ARGV, 4, 3 + 2 * n))
for i = 4 + 2 * n, #ARGV do redis.call('HDEL', KEYS[1], ARGV[i]) end
s = redis.call('HGET', KEYS[1], 'status')
if ${TERMINAL} then
  local ttl = tonumber(redis.call('HGET', KEYS[1], 'ttlMs'))
  redis.call('HDEL', KEYS[1], 'inputRequests')
  redis.call('HSET', KEYS[1], 'expiresAt', tonumber(ARGV[2]) + ttl)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('DEL', KEYS[2])
  redis.call('SREM', KEYS[3], ARGV[1])
end
return 1`

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
 * KEYS: task, lease, the scope's live set. ARGV: task id, owner, lease ms, record ms, '1' when live,
 * then the record's field/value pairs. Writes a task whole, unless the store has it ended.
 */
const RESTORE = `
local s = redis.call('HGET', KEYS[1], 'status')
if s and (${TERMINAL}) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 6))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if ARGV[5] == '1' then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  redis.call('SADD', KEYS[3], ARGV[1])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
else
  redis.call('DEL', KEYS[2])
  redis.call('SREM', KEYS[3], ARGV[1])
end
return 1`

const LEASE_STATES: readonly LeaseState[] = ['missing', 'live', 'ended']

/** Fields kept as JSON text in the hash (Lua never parses them). */
const JSON_FIELDS = ['inputRequests', 'result', 'error'] as const
const NUMBER_FIELDS = ['createdAt', 'lastUpdatedAt', 'ttlMs', 'pollIntervalMs', 'expiresAt'] as const

export interface RedisTaskSettings {
  maxTasksPerScope: number
  /** How long a live task survives its node: its owner renews the lease more often than this. */
  leaseMs: number
  /** The longest a task may run (`maxStreamLifetimeMs`): a live record is dropped after that plus its ttl whatever happens. */
  maxLifetimeMs: number
  /** A task whose node died was found and marked failed (counted once, by the node that marked it). */
  onLost: () => void
}

/**
 * Tasks shared by the cluster, one Redis hash each: written (and its owner's lease set) before
 * `CreateTaskResult` is sent, so any node answers `tasks/get` at once; expired by Redis itself
 * (`PEXPIRE` ttlMs once ended). The node running a task renews its lease; a live task whose lease has
 * lapsed reads, on every node, as `failed` with an error saying its node stopped.
 */
export class RedisTaskStore implements TaskStore {
  readonly #bus: RedisBus
  readonly #settings: RedisTaskSettings

  constructor (bus: RedisBus, settings: RedisTaskSettings) {
    this.#bus = bus
    this.#settings = settings
  }

  async create (record: TaskRecord): Promise<boolean> {
    const { taskId, scope, ttlMs } = record
    const { leaseMs, maxLifetimeMs, maxTasksPerScope } = this.#settings
    const created = await this.#bus.redis.eval(CREATE, 3, this.#task(taskId), this.#lease(taskId), this.#scopeSet(scope),
      taskId, record.owner ?? '', leaseMs, maxLifetimeMs + ttlMs, maxTasksPerScope, this.#bus.key('task-lease:'), ...fieldsOf(record))
    return created === 1
  }

  async get (taskId: string, scope: string): Promise<TaskRecord | undefined> {
    const [[, hash], [, leased]] = await this.#bus.redis.multi().hgetall(this.#task(taskId)).exists(this.#lease(taskId)).exec() as [[null, Record<string, string>], [null, number]]
    if (hash.scope !== scope) return undefined
    const record = recordOf(taskId, hash)
    if (isTerminal(record.status) || leased === 1) return record
    const lost: TaskChange = {
      status: 'failed',
      statusMessage: 'The node running the task stopped',
      error: { code: ErrorCode.InternalError, message: 'The node running the task stopped before it ended (its lease expired)' }
    }
    if (await this.#update(taskId, scope, lost) === 1) this.#settings.onLost()
    return await this.get(taskId, scope)
  }

  async update (taskId: string, change: TaskChange): Promise<boolean> {
    const scope = await this.#bus.redis.hget(this.#task(taskId), 'scope')
    return scope !== null && await this.#update(taskId, scope, change) === 1
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
    await this.#bus.redis.eval(RESTORE, 3, this.#task(taskId), this.#lease(taskId), this.#scopeSet(scope),
      taskId, record.owner ?? '', this.#settings.leaseMs, keepMs, live ? '1' : '0', ...fieldsOf(record))
  }

  onReachable (handler: () => void): void {
    this.#bus.onReady(handler)
  }

  async #update (taskId: string, scope: string, change: TaskChange): Promise<unknown> {
    const set: Array<string | number> = []
    const removed: string[] = []
    for (const [field, value] of Object.entries(change)) {
      if (value === undefined) removed.push(field)
      else set.push(field, encode(field, value))
    }
    return await this.#bus.redis.eval(UPDATE, 3, this.#task(taskId), this.#lease(taskId), this.#scopeSet(scope),
      taskId, Date.now(), set.length / 2, ...set, ...removed)
  }

  #task (taskId: string): string { return this.#bus.key(`task:${taskId}`) }
  #lease (taskId: string): string { return this.#bus.key(`task-lease:${taskId}`) }
  #scopeSet (scope: string): string { return this.#bus.key(`task-live:${scope}`) }
}

function isTerminal (status: TaskStatus): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled'
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
