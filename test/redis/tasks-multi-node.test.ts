/**
 * Tasks (2026-07-28 tasks extension) across nodes sharing a real `redis-server`: a task is durable in
 * Redis before its CreateTaskResult, so any node answers `tasks/get` at once; `tasks/cancel` and
 * `tasks/update` sent to another node are acknowledged at once and reach the owning node; results are
 * readable everywhere until taskTtlMs has passed, after which nothing is left in Redis; a task whose node
 * dies (the demo server in a child process, SIGKILLed) reads as failed everywhere once its lease lapses,
 * counted lost once; scopes and the per-scope quota hold across nodes; bad ids are -32602, never a 5xx;
 * a node closed gracefully records how its running tasks ended; and while Redis is stopped the owning
 * node serves its tasks from memory, the others say the store is unreachable, and Redis, back empty, is
 * written everything it missed.
 *
 * The Redis is standalone, a Cluster or Sentinel-managed, as MCP_TEST_REDIS says (test/helpers/redis-topology.ts);
 * the outage stops and starts one redis-server, so it runs standalone only.
 *
 * Without redis-server these tests are skipped, except under CI where that is a failure.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import type { FastifyRequest } from 'fastify'
import type { McpCancellationOptions } from '../../lib/index.js'
import { startDemoChild } from '../helpers/demo-child.js'
import { errorLines } from '../helpers/logs.js'
import { metricSum } from '../helpers/metrics.js'
import { standaloneOnly, startRedisTopology, topologySkipReason, type RedisClient, type RedisTopology } from '../helpers/redis-topology.js'
import { startTaskNode, TaskTools, type TaskNode } from '../helpers/task-nodes.js'
import { fetchSender, isIsoDate, TaskClient, type RpcAnswer, type SendOptions } from '../helpers/tasks.js'
import { waitFor } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const skip = topologySkipReason(t)
const SECRET = 'multi-node-tasks-secret-0123456789abcdef'
const PREFIX = 'mcp:'
const AUTH = { principal: (request: FastifyRequest) => request.headers['x-user'], required: false }
const ALICE: SendOptions = { headers: { 'x-user': 'alice' } }
const BOB: SendOptions = { headers: { 'x-user': 'bob' } }
const UNKNOWN_ID = 'AAAAAAAAAAAAAAAAAAAAAA'
const LOST_ERROR = { code: -32603, message: 'The node running the task stopped before it ended (its lease expired)' }
const LOST_MESSAGE = 'The node running the task stopped'
/** The fields of a task on the wire (what CreateTaskResult and tasks/get share). */
const TASK_FIELDS = ['taskId', 'status', 'statusMessage', 'createdAt', 'lastUpdatedAt', 'ttlMs', 'pollIntervalMs'] as const
const TERMINAL = ['completed', 'failed', 'cancelled']

interface Cluster {
  redis: RedisTopology
  /** A client of our own, to look at the keys. */
  inspect: RedisClient
  nodes: TaskNode[]
  tools: TaskTools
}

/** A Redis, an inspecting client, and `count` plugin nodes on it (same secret), each subscribed to its task channel. */
async function cluster (t: Tap, count: number, options: McpCancellationOptions = {}): Promise<Cluster> {
  const redis = await startRedisTopology(t)
  const { inspect } = redis
  const tools = new TaskTools()
  const nodes: TaskNode[] = []
  for (const name of ['node-a', 'node-b', 'node-c'].slice(0, count)) {
    nodes.push(await startTaskNode(t, name, tools, { redis: redis.option(), secret: SECRET, ...options }))
  }
  // Every node listens for the task control messages addressed to it before the test begins.
  const ready = await waitFor(async () => (await redis.channels(`${PREFIX}tasks:*`)).length >= count, 5000)
  if (!ready) t.fail(`the nodes did not all subscribe to their task channels (${(await redis.channels(`${PREFIX}tasks:*`)).join(', ')})`)
  return { redis, inspect, nodes, tools }
}

/** The wire fields of a task (CreateTaskResult or tasks/get result), for comparing what two nodes answer. */
function taskFields (result: Record<string, any> | undefined): Record<string, unknown> | undefined {
  if (result === undefined) return undefined
  const fields: Record<string, unknown> = {}
  for (const field of TASK_FIELDS) if (field in result) fields[field] = result[field]
  return fields
}

/** A tasks/get result without `_meta` (whose serverInfo names the node that answered). */
function withoutMeta (result: Record<string, any> | undefined): Record<string, unknown> | undefined {
  if (result === undefined) return undefined
  const { _meta, ...rest } = result
  return rest
}

/** Asserts the answer is the JSON-RPC error `code` with HTTP `status`, never a result. */
function isError (t: Tap, answer: RpcAnswer, code: number, status: number, what: string): void {
  t.equal(answer.status, status, `${what}: HTTP ${status}`)
  t.equal(answer.body.error?.code, code, `${what}: ${code}`)
  t.equal(answer.body.result, undefined, `${what}: no result`)
}

/** The task id of a CreateTaskResult, or undefined (with the answer quoted) when the call did not become a task. */
function createdTaskId (answer: RpcAnswer): string | undefined {
  return answer.body.result?.resultType === 'task' && typeof answer.body.result.taskId === 'string' ? answer.body.result.taskId : undefined
}

/** A key of the task store (under its hash tag on a Redis Cluster). */
const storeKey = (redis: RedisTopology, name: string): string => redis.key(name, 'tasks')
const taskKey = (redis: RedisTopology, taskId: string): string => storeKey(redis, `task:${taskId}`)
const leaseKey = (redis: RedisTopology, taskId: string): string => storeKey(redis, `task-lease:${taskId}`)

t.test('1. a task created on node A is visible on node B immediately after its CreateTaskResult, with the same fields', { skip }, async t => {
  const { redis, inspect, nodes: [a, b], tools } = await cluster(t, 2, { taskLeaseMs: 5000, maxTasksPerScope: 32 })
  const created: Array<Record<string, any>> = []
  const mismatches: unknown[] = []
  for (let i = 0; i < 20; i++) {
    const answer = await a!.client.call('hold', { tag: `visible-${i}` })
    const result = answer.body.result as Record<string, any> | undefined
    if (createdTaskId(answer) === undefined) {
      t.fail(`hold visible-${i} did not become a task on node A`, { answer })
      return
    }
    // No wait at all: the task is in Redis before its CreateTaskResult is sent.
    const onB = await b!.client.get(String(result?.taskId))
    if (onB.status !== 200 || JSON.stringify(taskFields(onB.body.result)) !== JSON.stringify(taskFields(result))) {
      mismatches.push({ i, created: taskFields(result), onB: onB.body })
    }
    created.push(result!)
  }
  t.same(mismatches, [], 'tasks/get on node B, sent right after each of 20 CreateTaskResults of node A, shows the task with the same fields')

  const first = created[0]!
  const taskId = String(first.taskId)
  t.equal(first.status, 'working', 'CreateTaskResult: working')
  t.ok(isIsoDate(first.createdAt) && isIsoDate(first.lastUpdatedAt), 'with ISO 8601 timestamps')
  const onB = (await b!.client.get(taskId)).body.result
  t.same(taskFields(onB), taskFields(first), 'node B: taskId, status, createdAt, lastUpdatedAt, ttlMs, pollIntervalMs as created')
  t.same(taskFields((await a!.client.get(taskId)).body.result), taskFields(first), 'node A answers the same')

  const hash = await inspect.hgetall(taskKey(redis, taskId))
  t.equal(hash.status, 'working', `the task is the hash ${taskKey(redis, '<taskId>')}`)
  t.equal(await redis.subscribers(`${PREFIX}tasks:${String(hash.owner)}`), 1, 'naming as its owner a node that listens on its task channel')
  const leaseTtl = await inspect.pttl(leaseKey(redis, taskId))
  t.ok(leaseTtl > 0 && leaseTtl <= 5000, `its owner's lease ${leaseKey(redis, '<taskId>')} has a PX of at most taskLeaseMs (${leaseTtl} ms)`)
  const liveSets = await redis.scanKeys(storeKey(redis, 'task-live:*'))
  t.equal(liveSets.length, 1, `one live set for the (anonymous) scope: ${liveSets.join(', ')}`)
  t.same((await inspect.smembers(liveSets[0] ?? '')).sort(), created.map(task => String(task.taskId)).sort(), 'holding the 20 live tasks')

  for (let i = 0; i < 20; i++) tools.open(`visible-${i}`)
  const done = await b!.client.waitFor(taskId, TERMINAL, 3000)
  t.equal(done?.status, 'completed', 'released, the task completes; node B sees it')
  t.same(done?.result?.structuredContent, { tag: 'visible-0', node: 'node-a' }, 'with node A\'s result')
  t.same(tools.run('visible-0')?.node, 'node-a', 'the handler ran on node A only')
})

t.test('2. tasks/cancel sent to node B is acknowledged at once and fires node A\'s ctx.signal with source "task"', { skip }, async t => {
  const { redis, inspect, nodes: [a, b], tools } = await cluster(t, 2)
  const taskId = await a!.client.create('hold', { tag: 'cancel-me' })
  const owner = await inspect.hget(taskKey(redis, taskId), 'owner')
  t.equal(await redis.subscribers(`${PREFIX}tasks:${String(owner)}`), 1, 'node A listens on its task channel')
  t.ok(await waitFor(() => tools.run('cancel-me')?.afterStart === true, 1000), 'the handler runs, past startTask, on node A')

  const sentAt = Date.now()
  const ack = await b!.client.cancel(taskId)
  const ackMs = Date.now() - sentAt
  t.equal(ack.status, 200, 'node B answers tasks/cancel 200')
  t.equal(ack.body.error, undefined, 'no error')
  t.equal(ack.body.result?.resultType, 'complete', 'an empty (complete) result: the acknowledgement')
  t.ok(ackMs < 500, `at once (${ackMs} ms)`)

  t.ok(await waitFor(() => tools.run('cancel-me')?.aborted !== undefined, 2000), 'node A\'s ctx.signal fires')
  t.same(tools.run('cancel-me')?.aborted, { source: 'task', reason: 'tasks/cancel' }, 'with a RequestCancelledError of source "task"')
  t.ok(await waitFor(() => tools.run('cancel-me')?.endedAt !== undefined, 1000), 'and the handler stops')
  for (const node of [b!, a!]) {
    const seen = await node.client.waitFor(taskId, TERMINAL, 2000)
    t.equal(seen?.status, 'cancelled', `tasks/get on ${node.name}: cancelled shortly after`)
    t.equal(seen?.result, undefined, `${node.name}: no result`)
    t.equal(seen?.error, undefined, `${node.name}: no error`)
  }

  t.equal(await metricSum(a!.url, 'mcp_cancellations_total', { source: 'task', result: 'recorded' }), 1,
    'node A counts it: mcp_cancellations_total{source="task",result="recorded"} 1')
  t.equal(await metricSum(b!.url, 'mcp_cancellations_total', { source: 'task' }), 0, 'node B counts no task cancellation of its own')
  t.equal(await metricSum(a!.url, 'mcp_tasks_total', { outcome: 'cancelled' }), 1, 'node A: mcp_tasks_total{outcome="cancelled"} 1')
  t.equal(await metricSum(b!.url, 'mcp_tasks_total', {}), 0, 'node B ended no task')

  const again = await b!.client.cancel(taskId)
  t.equal(again.body.result?.resultType, 'complete', 'cancelling again through node B: an ack')
  t.equal((await a!.client.get(taskId)).body.result?.status, 'cancelled', 'it stays cancelled')
  t.equal(await inspect.exists(leaseKey(redis, taskId)), 0, 'its lease is gone')
  t.same(await redis.scanKeys(storeKey(redis, 'task-live:*')), [], 'and it left its scope\'s live set')
  t.equal(await metricSum(a!.url, 'mcp_cancellations_total', { source: 'task', result: 'recorded' }), 1, 'still counted once')

  const asking = await a!.client.create('ask', { tag: 'cancel-asking' })
  t.equal((await b!.client.waitFor(asking, ['input_required', ...TERMINAL], 3000))?.status, 'input_required', 'a task of node A waiting for input, seen on node B')
  t.equal((await b!.client.cancel(asking)).body.result?.resultType, 'complete', 'cancelled through node B: an ack')
  t.ok(await waitFor(() => tools.run('cancel-asking')?.aborted !== undefined, 2000), 'its handler\'s signal fires on node A too')
  t.same(tools.run('cancel-asking')?.aborted, { source: 'task', reason: 'tasks/cancel' }, 'with source "task"')
  const stopped = await a!.client.waitFor(asking, TERMINAL, 2000)
  t.equal(stopped?.status, 'cancelled', 'and it ends cancelled')
  t.equal(stopped?.inputRequests, undefined, 'with no open question left')
  t.equal(await metricSum(a!.url, 'mcp_cancellations_total', { source: 'task', result: 'recorded' }), 2, 'node A has counted two task cancellations')
})

t.test('3. a task on node A asking after startTask is input_required on node B; tasks/update sent to B resumes A\'s handler', { skip }, async t => {
  const { nodes: [a, b], tools } = await cluster(t, 2)
  const taskId = await a!.client.create('ask', { tag: 'asker' })
  const onB = await b!.client.waitFor(taskId, ['input_required', ...TERMINAL], 3000)
  t.equal(onB?.status, 'input_required', 'node B: input_required')
  t.same(Object.keys(onB?.inputRequests ?? {}), ['confirm'], 'with the handler\'s inputRequests, by key')
  t.equal(onB?.inputRequests?.confirm?.method, 'elicitation/create')
  t.equal(onB?.inputRequests?.confirm?.params?.message, 'Go ahead with asker?')
  t.same((await a!.client.get(taskId)).body.result?.inputRequests, onB?.inputRequests, 'node A shows the same')

  // A malformed answer is ignored (the ask stays open); Redis delivers B's messages to A in order.
  const malformed = await b!.client.update(taskId, { confirm: { action: 'maybe' } })
  t.equal(malformed.body.result?.resultType, 'complete', 'a malformed answer through node B: acknowledged')
  const sentAt = Date.now()
  const ack = await b!.client.update(taskId, { confirm: { action: 'accept', content: { ok: true } } })
  const ackMs = Date.now() - sentAt
  t.equal(ack.status, 200, 'node B answers tasks/update 200')
  t.equal(ack.body.result?.resultType, 'complete', 'with an empty (complete) result')
  t.ok(ackMs < 500, `at once (${ackMs} ms)`)

  t.ok(await waitFor(() => tools.run('asker')?.answer !== undefined, 2000), 'node A\'s handler resumes')
  t.same(tools.run('asker')?.answer, { action: 'accept', content: { ok: true } }, 'with the answer sent to node B (the malformed one before it was ignored)')
  const done = await b!.client.waitFor(taskId, TERMINAL, 3000)
  t.equal(done?.status, 'completed', 'node B: completed')
  t.same(done?.result?.content, [{ type: 'text', text: 'asker: accept true' }], 'with node A\'s result')
  t.same(done?.result?.structuredContent, { tag: 'asker', node: 'node-a', action: 'accept' })
  t.equal(done?.inputRequests, undefined, 'and no inputRequests any more')
  t.same(withoutMeta((await a!.client.get(taskId)).body.result), withoutMeta(done), 'node A shows exactly the same')
  t.equal(tools.run('asker')?.aborted, undefined, 'the handler was never aborted')
})

t.test('4. results are readable on every node; after taskTtlMs the task is gone everywhere, and nothing is left in Redis', { skip }, async t => {
  const TTL_MS = 500
  const { redis, inspect, nodes: [a, b], tools } = await cluster(t, 2, { taskTtlMs: TTL_MS })
  const completed = await a!.client.create('hold', { tag: 'ok' })
  const failed = await b!.client.create('hold', { tag: 'broken', fail: true })
  const cancelled = await a!.client.create('hold', { tag: 'stopped' })
  tools.open('ok')
  tools.open('broken')
  t.equal((await b!.client.cancel(cancelled)).body.result?.resultType, 'complete', 'the third is cancelled through node B')

  const ended: Record<string, Record<string, any> | undefined> = {}
  for (const [name, taskId, reader] of [['completed', completed, b!], ['failed', failed, a!], ['cancelled', cancelled, b!]] as const) {
    ended[name] = await reader.client.waitFor(taskId, TERMINAL, 3000)
    t.equal(ended[name]?.status, name, `the ${name} task, read on the node that did not run it: ${name}`)
  }
  const endedAt = Date.now()
  t.same(ended.completed?.result?.structuredContent, { tag: 'ok', node: 'node-a' }, 'completed: node A\'s result, on node B')
  t.equal(ended.failed?.error?.code, -32603, 'failed: node B\'s JSON-RPC error, on node A')
  t.equal(ended.failed?.result, undefined, 'failed: no result')
  for (const [name, taskId] of [['completed', completed], ['failed', failed], ['cancelled', cancelled]] as const) {
    const [onA, onB] = [(await a!.client.get(taskId)).body.result, (await b!.client.get(taskId)).body.result]
    t.same(withoutMeta(onA), withoutMeta(onB), `${name}: both nodes answer the same`)
    t.equal(onA?.ttlMs, TTL_MS, `${name}: ttlMs ${TTL_MS}`)
  }

  t.same(await redis.scanKeys(storeKey(redis, 'task-lease:*')), [], 'once ended, no task-lease:* key is left')
  t.same(await redis.scanKeys(storeKey(redis, 'task-live:*')), [], 'and no task-live:* key')
  for (const taskId of [completed, failed, cancelled]) {
    const ttl = await inspect.pttl(taskKey(redis, taskId))
    t.ok(ttl > 0 && ttl <= TTL_MS, `the hash expires within taskTtlMs (PTTL ${ttl} ms)`)
  }

  const gone = await waitFor(async () => await inspect.exists(taskKey(redis, completed), taskKey(redis, failed), taskKey(redis, cancelled)) === 0, TTL_MS + 1500, 25)
  t.ok(gone, `the three hashes are gone (EXISTS 0) ${Date.now() - endedAt} ms after the tasks ended`)
  for (const node of [a!, b!]) {
    for (const taskId of [completed, failed, cancelled]) {
      for (const [method, answer] of [
        ['tasks/get', await node.client.get(taskId)],
        ['tasks/update', await node.client.update(taskId, {})],
        ['tasks/cancel', await node.client.cancel(taskId)]
      ] as const) {
        isError(t, answer, -32602, 200, `${node.name}, ${method} after taskTtlMs`)
      }
    }
  }
  t.same(await redis.scanKeys(storeKey(redis, 'task*')), [], 'no task key of any kind is left in Redis')
  const unexpected = (node: TaskNode): unknown[] => errorLines(node)
    .filter(line => !String((line.err as { message?: unknown } | undefined)?.message).includes('failed on purpose'))
  t.same([unexpected(a!), unexpected(b!)], [[], []], 'neither node logged an error but the failing handler\'s own')
})

t.test('5. node death: the demo server running a task is SIGKILLed; the task reads as failed on the other nodes, counted lost once', { skip }, async t => {
  const LEASE_MS = 600
  const redis = await startRedisTopology(t)
  const { inspect } = redis
  const child = await startDemoChild(t, { MCP_CONFORMANCE: '1', ...redis.demoEnv(), MCP_SECRET: SECRET, MCP_TASK_LEASE_MS: String(LEASE_MS) })
  const tools = new TaskTools()
  const b = await startTaskNode(t, 'node-b', tools, { redis: redis.option(), secret: SECRET })
  const c = await startTaskNode(t, 'node-c', tools, { redis: redis.option(), secret: SECRET })
  const viaA = new TaskClient(fetchSender(child.url))

  const taskId = await viaA.create('slow_compute', { seconds: 60, label: 'doomed' })
  t.equal((await b.client.get(taskId)).body.result?.status, 'working', 'node B sees the demo node\'s task working')
  const owner = await inspect.hget(taskKey(redis, taskId), 'owner')
  t.match(owner, new RegExp(`^${child.pid}-`), 'owned by the child process')
  const leaseTtl = await inspect.pttl(leaseKey(redis, taskId))
  t.ok(leaseTtl > 0 && leaseTtl <= LEASE_MS, `its lease has a PX of at most MCP_TASK_LEASE_MS (${leaseTtl} ms)`)

  await sleep(2 * LEASE_MS + 100)
  t.equal((await b.client.get(taskId)).body.result?.status, 'working', `while the node lives, its task outlives two leases (${2 * LEASE_MS + 100} ms): renewed`)
  t.equal(await metricSum(b.url, 'mcp_tasks_total', { outcome: 'lost' }), 0, 'nothing lost yet')

  await child.kill()
  const killedAt = Date.now()
  t.ok(child.exited, 'the demo node is gone (SIGKILL)')
  let failedAt: number | undefined
  let seen: Record<string, any> | undefined
  while (Date.now() - killedAt < 4000) {
    seen = (await b.client.get(taskId)).body.result
    if (seen?.status !== 'working') {
      failedAt = Date.now()
      break
    }
    await sleep(25)
  }
  const elapsed = failedAt === undefined ? undefined : failedAt - killedAt
  t.ok(elapsed !== undefined && elapsed <= 2000, `tasks/get on node B: no longer working within 2 s of the kill (${String(elapsed)} ms)`)
  t.equal(seen?.status, 'failed', 'but failed')
  t.same(seen?.error, LOST_ERROR, 'with the lease error')
  t.equal(seen?.statusMessage, LOST_MESSAGE, 'and a status message saying so')
  t.equal(seen?.result, undefined, 'no result')
  t.equal(await metricSum(b.url, 'mcp_tasks_total', { outcome: 'lost' }), 1, 'node B, which noticed: mcp_tasks_total{outcome="lost"} 1')

  const again = (await b.client.get(taskId)).body.result
  t.same(withoutMeta(again), withoutMeta(seen), 'another tasks/get on node B: the same failed task')
  const onC = (await c.client.get(taskId)).body.result
  t.same(withoutMeta(onC), withoutMeta(seen), 'node C reads it failed too, the same')
  t.equal(await metricSum(b.url, 'mcp_tasks_total', { outcome: 'lost' }), 1, 'node B did not count it again')
  t.equal(await metricSum(c.url, 'mcp_tasks_total', { outcome: 'lost' }), 0, 'node C did not count it at all')

  t.equal((await b.client.cancel(taskId)).body.result?.resultType, 'complete', 'tasks/cancel of the lost task: an ack')
  t.equal((await c.client.get(taskId)).body.result?.status, 'failed', 'that changes nothing')
  t.equal(await inspect.exists(leaseKey(redis, taskId)), 0, 'no lease is left')
  t.same(await redis.scanKeys(storeKey(redis, 'task-live:*')), [], 'nor any live set')
  const hashTtl = await inspect.pttl(taskKey(redis, taskId))
  t.ok(hashTtl > 0 && hashTtl <= 600_000, `the hash now expires within its ttlMs (PTTL ${hashTtl} ms)`)
  t.same([errorLines(b), errorLines(c)], [[], []], 'nodes B and C logged no error', { childOutput: child.output().slice(-2000) })
})

t.test('6. scope isolation across nodes: alice\'s task on node A is -32602 for bob on node B, and untouched', { skip }, async t => {
  const { nodes: [a, b], tools } = await cluster(t, 2, { auth: AUTH })
  const taskId = await a!.client.create('ask', { tag: 'alice-ask' }, ALICE)
  const asking = await b!.client.waitFor(taskId, ['input_required', ...TERMINAL], 3000, ALICE)
  t.equal(asking?.status, 'input_required', 'alice sees her task on node B')
  const unknown = (await b!.client.get(UNKNOWN_ID, BOB)).body.error
  t.equal(unknown?.code, -32602, 'an unknown id is -32602 for bob')

  for (const [who, options] of [['bob', BOB], ['an anonymous client', {}]] as const) {
    for (const node of [b!, a!]) {
      const answers = [
        await node.client.get(taskId, options),
        await node.client.update(taskId, { confirm: { action: 'accept', content: { ok: false } } }, options),
        await node.client.cancel(taskId, options)
      ]
      for (const [i, answer] of answers.entries()) {
        const what = `${who} on ${node.name}: ${['tasks/get', 'tasks/update', 'tasks/cancel'][i]!}`
        isError(t, answer, -32602, 200, what)
        t.same(answer.body.error, unknown, `${what}: exactly what an unknown id answers`)
      }
    }
  }
  // Redis delivers node B's messages in order: once alice's own cancel of a sentinel reached node A,
  // anything bob's requests might have sent would have too.
  const sentinel = await a!.client.create('hold', { tag: 'alice-sentinel' }, ALICE)
  t.equal((await b!.client.cancel(sentinel, ALICE)).body.result?.resultType, 'complete', 'alice cancels a sentinel task of node A through node B')
  t.ok(await waitFor(() => tools.run('alice-sentinel')?.aborted !== undefined, 2000), 'the sentinel\'s cancel reached node A')

  const after = (await b!.client.get(taskId, ALICE)).body.result
  t.equal(after?.status, 'input_required', 'alice\'s task is neither answered nor cancelled')
  t.same(after?.inputRequests, asking?.inputRequests, 'its question is still open')
  t.equal(tools.run('alice-ask')?.aborted, undefined, 'its handler was not aborted')
  t.equal(tools.run('alice-ask')?.answer, undefined, 'nor answered')

  const bobs = await b!.client.create('hold', { tag: 'bob-hold' }, BOB)
  isError(t, await a!.client.get(bobs, ALICE), -32602, 200, 'the other way round: bob\'s task on node B, alice on node A')
  t.equal((await a!.client.get(bobs, BOB)).body.result?.status, 'working', 'while bob sees it on node A')
  tools.open('bob-hold')

  await b!.client.update(taskId, { confirm: { action: 'accept', content: { ok: true } } }, ALICE)
  const done = await a!.client.waitFor(taskId, TERMINAL, 3000, ALICE)
  t.equal(done?.status, 'completed', 'alice answers through node B and her task completes')
  t.same(done?.result?.content, [{ type: 'text', text: 'alice-ask: accept true' }])
})

t.test('7. the per-scope quota holds across nodes; an ended task frees its place, and so does a dead node\'s', { skip }, async t => {
  const LEASE_MS = 600
  const { redis, nodes: [a, b], tools } = await cluster(t, 2, { auth: AUTH, maxTasksPerScope: 2 })

  await t.test('two live tasks of alice on nodes A and B: a third is 429 -32000 on either node', async t => {
    const first = await a!.client.create('hold', { tag: 'q1' }, ALICE)
    await b!.client.create('hold', { tag: 'q2' }, ALICE)
    for (const node of [a!, b!]) {
      const tag = `q3-${node.name}`
      const refused = await node.client.call('hold', { tag }, ALICE)
      isError(t, refused, -32000, 429, `a third on ${node.name}`)
      t.match(refused.body.error?.message, /Too many tasks/)
      t.equal(tools.run(tag)?.afterStart, false, 'its handler did not get past startTask')
    }
    const bobs = createdTaskId(await a!.client.call('hold', { tag: 'q-bob' }, BOB))
    t.ok(bobs, 'bob has a quota of his own')
    tools.open('q-bob')

    tools.open('q1')
    t.equal((await b!.client.waitFor(first, TERMINAL, 3000, ALICE))?.status, 'completed', 'alice\'s task on node A ends')
    const again = await b!.client.call('hold', { tag: 'q4' }, ALICE)
    t.ok(createdTaskId(again), 'then a new one is accepted on node B', { answer: again.body })
    isError(t, await a!.client.call('hold', { tag: 'q5' }, ALICE), -32000, 429, 'and with two live again, a third is refused on node A')
    tools.open('q2')
    tools.open('q4')
  })

  await t.test('the live tasks of a node that died no longer count once their lease lapsed', async t => {
    const child = await startDemoChild(t, { MCP_CONFORMANCE: '1', ...redis.demoEnv(), MCP_SECRET: SECRET, MCP_TASK_LEASE_MS: String(LEASE_MS) })
    const viaDead = new TaskClient(fetchSender(child.url))
    // Anonymous clients: the demo node and nodes A and B all scope them by address.
    const dead = [
      await viaDead.create('slow_compute', { seconds: 60, label: 'orphan' }),
      await viaDead.create('confirm_delete', { filename: 'orphan.txt' })
    ]
    t.equal((await b!.client.waitFor(dead[1]!, ['input_required', ...TERMINAL], 3000))?.status, 'input_required', 'one working, one waiting for input')
    isError(t, await b!.client.call('hold', { tag: 'd-refused' }), -32000, 429, 'the demo node\'s two live tasks fill the scope\'s quota on node B')

    // One lease renewal (every LEASE_MS / 3) after both were created: their leases then lapse together.
    await sleep(LEASE_MS / 2)
    await child.kill()
    const killedAt = Date.now()
    let acceptedAt: number | undefined
    let attempts = 0
    const accepted: string[] = []
    while (Date.now() - killedAt < 4000) {
      const taskId = createdTaskId(await b!.client.call('hold', { tag: `d-${++attempts}` }))
      if (taskId !== undefined) {
        acceptedAt = Date.now()
        accepted.push(taskId)
        break
      }
      await sleep(50)
    }
    const elapsed = acceptedAt === undefined ? undefined : acceptedAt - killedAt
    t.ok(elapsed !== undefined && elapsed <= 2000, `node B accepts a task once the dead node's leases lapsed (${String(elapsed)} ms after the kill, ${attempts} attempts), no tasks/get needed`)
    const second = createdTaskId(await a!.client.call('hold', { tag: 'd-second' }))
    t.ok(second, 'and a second one, on node A')
    if (second !== undefined) accepted.push(second)
    isError(t, await b!.client.call('hold', { tag: 'd-third' }), -32000, 429, 'a third live one is refused again')

    // Both nodes notice at the same moment, several times over: each task is still counted lost once.
    const reads = await Promise.all(dead.flatMap(taskId => [a!, b!, a!, b!].map(async node => (await node.client.get(taskId)).body.result)))
    t.same(reads.map(read => [read?.status, read?.error]), reads.map(() => ['failed', LOST_ERROR]), 'read at once on both nodes, each dead task is failed with the lease error')
    const lost = await metricSum(a!.url, 'mcp_tasks_total', { outcome: 'lost' }) + await metricSum(b!.url, 'mcp_tasks_total', { outcome: 'lost' })
    t.equal(lost, 2, 'mcp_tasks_total{outcome="lost"} over nodes A and B: 2, one per task')
    for (let i = 1; i <= attempts; i++) tools.open(`d-${i}`)
    tools.open('d-second')
    for (const taskId of accepted) t.equal((await b!.client.waitFor(taskId, TERMINAL, 3000))?.status, 'completed', 'the accepted tasks complete')
  })
})

t.test('8. unknown, forged and oversized task ids sent to node B are -32602, never a 5xx', { skip }, async t => {
  const { redis, nodes: [a, b], tools } = await cluster(t, 2)
  const real = await a!.client.create('hold', { tag: 'real' })
  const flip = (c: string): string => c === 'A' ? 'B' : 'A'
  const ids: Array<[string, string]> = [
    ['an unknown id of the right shape', UNKNOWN_ID],
    ['a real id with its last character changed', real.slice(0, -1) + flip(real.slice(-1))],
    ['a real id with its first character changed', flip(real[0]!) + real.slice(1)],
    ['a real id plus one character', `${real}A`],
    ['a real id less one character', real.slice(0, -1)],
    ['a glob', '*'],
    ['a real id\'s prefix and a glob', `${real.slice(0, 8)}*`],
    ['another key\'s name', `task-lease:${real}`],
    ['a path', `../task:${real}`],
    ['64 characters', 'a'.repeat(64)],
    ['65 characters', 'a'.repeat(65)],
    ['10 kB', 'A'.repeat(10_000)]
  ]
  if (real.toLowerCase() !== real) ids.push(['a real id in lower case', real.toLowerCase()])
  const failures: unknown[] = []
  for (const [what, id] of ids) {
    for (const [method, answer] of [
      ['tasks/get', await b!.client.get(id)],
      ['tasks/update', await b!.client.update(id, { confirm: { action: 'accept', content: { ok: true } } })],
      ['tasks/cancel', await b!.client.cancel(id)]
    ] as const) {
      const error = answer.body.error
      if (answer.status !== 200 || error?.code !== -32602 || !/Task not found/.test(error.message) || error.message.length > 200 || answer.body.result !== undefined) {
        failures.push({ what, method, status: answer.status, body: JSON.stringify(answer.body).slice(0, 300) })
      }
    }
  }
  t.same(failures, [], `node B answers each of ${ids.length} bad ids HTTP 200 -32602 "Task not found" (short) for get, update and cancel`)
  t.equal((await b!.client.get(real)).body.result?.status, 'working', 'the real task is untouched')
  await sleep(100)
  t.equal(tools.run('real')?.aborted, undefined, 'its handler was not aborted')
  t.same(await redis.scanKeys(storeKey(redis, 'task:*')), [taskKey(redis, real)], 'no key was made for any bad id')
  t.same([errorLines(a!), errorLines(b!)], [[], []], 'no node logged an error')
  tools.open('real')
})

t.test('9. fastify.close() on the owning node: its running tasks read as failed (shutdown) on the other nodes at once, not working until their lease lapses', { skip }, async t => {
  const LEASE_MS = 5000
  const { redis, nodes: [a, b], tools } = await cluster(t, 2, { taskLeaseMs: LEASE_MS })
  const held = await a!.client.create('hold', { tag: 'shut-hold' })
  const asking = await a!.client.create('ask', { tag: 'shut-ask' })
  t.equal((await b!.client.waitFor(asking, ['input_required', ...TERMINAL], 3000))?.status, 'input_required', 'two tasks on node A, one waiting for input')

  await a!.app.close()
  t.same(tools.run('shut-hold')?.aborted, { source: 'server', reason: 'shutdown' }, 'closing node A cancelled its task handlers (reason shutdown)')
  t.same(tools.run('shut-ask')?.aborted, { source: 'server', reason: 'shutdown' }, 'both of them')
  for (const [name, taskId] of [['the working task', held], ['the asking task', asking]] as const) {
    const seen = await b!.client.waitFor(taskId, TERMINAL, 1000)
    t.equal(seen?.status, 'failed', `${name}: node B reads it failed within 1 s of node A's close (README: shutdown fails running tasks), not still ${String(seen?.status)} until its ${LEASE_MS} ms lease lapses`)
    t.equal(seen?.error?.code, -32800, `${name}: with the shutdown's cancellation error`, { seen })
  }
  t.same(await redis.scanKeys(storeKey(redis, 'task-lease:*')), [], 'no lease is left: the tasks ended')
  t.same(errorLines(a!).map(line => ({ msg: line.msg, err: (line.err as { message?: unknown } | undefined)?.message })), [],
    'node A logged no error (no "MCP task could not be recorded as ended")')
  await sleep(LEASE_MS / 10)
  t.equal(await metricSum(b!.url, 'mcp_tasks_total', { outcome: 'lost' }), 0, 'and node B counts nothing lost')
})

t.test('10. Redis stopped mid-task: node A keeps serving its tasks, node B says the store is unreachable (not a 5xx), and everything resumes when Redis returns', { skip: skip || standaloneOnly('an outage of one redis-server') }, async t => {
  const LEASE_MS = 1500
  const { redis: { server: redis }, nodes: [a, b], tools } = await cluster(t, 2, { taskLeaseMs: LEASE_MS })
  const asking = await a!.client.create('ask', { tag: 'outage-ask' })
  const held = await a!.client.create('hold', { tag: 'outage-hold' })
  const stopped = await a!.client.create('hold', { tag: 'outage-cancel' })
  t.equal((await b!.client.waitFor(asking, ['input_required', ...TERMINAL]))?.status, 'input_required', 'node B reads the asking task before the outage')

  await redis!.stop()
  const onA = (await a!.client.get(asking)).body.result
  t.equal(onA?.status, 'input_required', 'Redis down: node A still answers tasks/get for its own task')
  t.equal(onA?.inputRequests?.confirm?.method, 'elicitation/create', 'with its question')
  const onB = await b!.client.get(asking)
  t.ok(onB.status < 500, `node B: HTTP ${onB.status}, not a 5xx`)
  t.equal(onB.body.error?.code, -32000, 'node B: a JSON-RPC error')
  t.match(onB.body.error?.message, /task store cannot be reached/, 'saying why')

  t.same(withoutMeta((await a!.client.update(asking, { confirm: { action: 'accept', content: { ok: true } } })).body.result), { resultType: 'complete' },
    'tasks/update on node A during the outage: acknowledged')
  const answered = await a!.client.waitFor(asking, TERMINAL)
  t.equal(answered?.status, 'completed', 'node A\'s handler got the answer and the task completed')
  t.same(tools.run('outage-ask')?.answer, { action: 'accept', content: { ok: true } })
  t.same(withoutMeta((await a!.client.cancel(stopped)).body.result), { resultType: 'complete' }, 'tasks/cancel on node A during the outage: acknowledged')
  t.same(tools.run('outage-cancel')?.aborted, { source: 'task', reason: 'tasks/cancel' }, 'and its handler\'s signal fired')
  t.equal((await a!.client.get(stopped)).body.result?.status, 'cancelled', 'node A reads it cancelled')
  t.equal((await a!.client.get(held)).body.result?.status, 'working', 'the third task still works on node A')

  // Longer than the lease: the leases lapse in a Redis that comes back (this one comes back empty).
  await sleep(LEASE_MS + 500)
  await redis!.start()
  t.ok(await waitFor(async () => (await b!.client.get(asking)).body.result?.status === 'completed', 5000),
    'Redis back: node B reads the task that completed during the outage')
  t.same(withoutMeta((await b!.client.get(asking)).body.result), withoutMeta((await a!.client.get(asking)).body.result), 'as node A does')
  t.equal((await b!.client.get(stopped)).body.result?.status, 'cancelled', 'and the one cancelled during the outage')
  t.equal((await b!.client.get(held)).body.result?.status, 'working', 'the running task is working on node B, not lost')

  t.same(withoutMeta((await b!.client.cancel(held)).body.result), { resultType: 'complete' }, 'tasks/cancel on node B after the outage')
  t.ok(await waitFor(() => tools.run('outage-hold')?.aborted !== undefined, 2000), 'reaches node A\'s handler')
  t.same(tools.run('outage-hold')?.aborted, { source: 'task', reason: 'tasks/cancel' })
  t.equal((await b!.client.waitFor(held, TERMINAL))?.status, 'cancelled', 'which node B reads cancelled')
  await sleep(LEASE_MS)
  for (const node of [a!, b!]) t.equal(await metricSum(node.url, 'mcp_tasks_total', { outcome: 'lost' }), 0, `${node.name} counts nothing lost`)
})
