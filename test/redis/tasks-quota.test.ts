/**
 * Task quotas (issue 19, item 2): one scope can never deny tasks to another. A scope may have
 * `maxTasksPerScope` live tasks (one more is 429) and keep `maxKeptTasksPerScope` tasks and
 * `maxTaskBytesPerScope` bytes, live or ended (at either, its own oldest ended tasks are dropped so it
 * can go on); the store keeps `maxTasks` tasks and `maxTaskBytes` bytes in all, and at either cap it
 * drops ended tasks of the largest scopes first, oldest first, never refusing a scope under its own
 * quota. In memory and in Redis (two nodes on a real redis-server), where what the plugin keeps stays
 * under the documented memory bound and nothing is left once the tasks have expired.
 *
 * Scopes are principals named by an `x-principal` header. Tasks are the `hold` tool of
 * test/helpers/task-nodes.ts: its gate opened before the call, it ends at once, with a result of about
 * twice its tag's length.
 *
 * Without redis-server the Redis cases are skipped, except under CI where that is a failure.
 */
import t from 'tap'
import type { FastifyRequest } from 'fastify'
import { Redis } from 'ioredis'
import Fastify from 'fastify'
import mcpCancellation, { elicitation, type McpCancellationOptions } from '../../lib/index.js'
import { metricSum } from '../helpers/metrics.js'
import { channels, scanKeys } from '../helpers/redis.js'
import { RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import { startTaskNode, TaskTools, type TaskNode } from '../helpers/task-nodes.js'
import type { RpcAnswer, SendOptions } from '../helpers/tasks.js'
import { waitFor } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const skip = redisSkipReason(t)
const SECRET = 'task-quota-tests-secret-0123456789abcdef'
const PREFIX = 'mcp:'
const TERMINAL = ['completed', 'failed', 'cancelled']
const AUTH = { principal: (request: FastifyRequest) => request.headers['x-principal'], required: false }
const UNKNOWN_ID = 'AAAAAAAAAAAAAAAAAAAAAA'

const as = (principal: string): SendOptions => ({ headers: { 'x-principal': principal } })

type StoreKind = 'memory' | 'redis'

interface Deployment {
  /** The nodes: one in memory; two sharing a redis-server. */
  nodes: TaskNode[]
  tools: TaskTools
  /** A client of our own on the redis-server (Redis only). */
  inspect: Redis | undefined
}

/** One node in memory, or two nodes on a fresh redis-server, with `options` and the scopes of `x-principal`. */
async function deploy (t: Tap, kind: StoreKind, options: McpCancellationOptions): Promise<Deployment> {
  const tools = new TaskTools()
  const shared: McpCancellationOptions = { secret: SECRET, auth: AUTH, ...options }
  if (kind === 'memory') return { nodes: [await startTaskNode(t, 'node-a', tools, shared)], tools, inspect: undefined }
  const redis = await RedisServer.start(t)
  const inspect = new Redis(redis.url, { maxRetriesPerRequest: 1 })
  inspect.on('error', () => {})
  t.teardown(() => { inspect.disconnect() })
  const nodes = [
    await startTaskNode(t, 'node-a', tools, { ...shared, redis: redis.url }),
    await startTaskNode(t, 'node-b', tools, { ...shared, redis: redis.url })
  ]
  if (!await waitFor(async () => (await channels(inspect, `${PREFIX}tasks:*`)).length >= 2, 5000)) t.fail('the nodes did not subscribe to their task channels')
  return { nodes, tools, inspect }
}

let tags = 0

/** A tag unique in this process, padded to about `length` characters (a `hold` result is about twice as long). */
function tagOf (name: string, length = 0): string {
  const tag = `${name}-${++tags}`
  return tag.length >= length ? tag : tag + '.'.repeat(length - tag.length)
}

/** A task of `principal` that ends at once (completed); its id, or the refusal. */
async function endedTask (deployment: Deployment, node: TaskNode, principal: string, tagLength = 0): Promise<string> {
  const tag = tagOf(principal, tagLength)
  deployment.tools.open(tag)
  const answer = await node.client.call('hold', { tag }, as(principal))
  const taskId = createdTaskId(answer)
  if (taskId === undefined) throw new Error(`${principal}'s task was refused: HTTP ${answer.status} ${JSON.stringify(answer.body)}`)
  // The owning node shows the end at once and records it in Redis a moment later; the quota is counted
  // in Redis, so the task counts as ended once another node (which reads Redis) sees it ended.
  const reader = deployment.nodes.find(other => other !== node) ?? node
  const done = await reader.client.waitFor(taskId, TERMINAL, 3000, as(principal))
  if (done?.status !== 'completed') throw new Error(`${principal}'s task did not complete: ${JSON.stringify(done)}`)
  return taskId
}

function createdTaskId (answer: RpcAnswer): string | undefined {
  const taskId: unknown = answer.body.result?.taskId
  return answer.body.result?.resultType === 'task' && typeof taskId === 'string' ? taskId : undefined
}

/** What `tasks/get` says of `taskId` to `principal`: its status, or the error's code and message. */
async function statusOf (node: TaskNode, taskId: string, principal: string): Promise<string> {
  const { body } = await node.client.get(taskId, as(principal))
  return body.error === undefined ? String(body.result?.status) : `${String(body.error.code)} ${String(body.error.message)}`
}

const NOT_FOUND = '-32602 Invalid params: Task not found'

/** What `principal` reads of each task: `kept` ones completed, `dropped` ones not found. */
async function expectKept (t: Tap, node: TaskNode, principal: string, kept: readonly string[], dropped: readonly string[], what: string): Promise<void> {
  const seen = await Promise.all([...kept, ...dropped].map(async taskId => await statusOf(node, taskId, principal)))
  t.same(seen, [...kept.map(() => 'completed'), ...dropped.map(() => NOT_FOUND)], what)
}

/** `large-ask {bytes}`: a task that asks a question `bytes` characters long, and waits for its answer or its cancellation. */
function registerLargeAsk (node: TaskNode): void {
  node.app.mcp.tool<{ bytes: number }>({
    name: 'large-ask',
    task: 'optional',
    inputSchema: { type: 'object', properties: { bytes: { type: 'integer' } }, required: ['bytes'] },
    handler: async ({ bytes }, ctx) => {
      await ctx.startTask()
      await ctx.input({ confirm: elicitation({ message: 'q'.repeat(bytes), requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' } } } }) })
      return { content: [{ type: 'text', text: 'answered' }] }
    }
  })
}

/** The sum of MEMORY USAGE (all samples) of every key the plugin keeps for tasks, and the keys. */
async function taskMemory (redis: Redis): Promise<{ bytes: number, keys: string[] }> {
  const keys = await scanKeys(redis, `${PREFIX}task*`)
  let bytes = 0
  for (const key of keys) bytes += Number(await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0') ?? 0)
  return { bytes, keys }
}

/**
 * The README's bound on what the plugin keeps in Redis for tasks (Tasks, "Bounds"), as long as the live
 * tasks fit within the caps: 1.25 × maxTaskBytes + maxTasks × (1.5 KiB + 5 × the longest scope), a
 * scope being `principal:` and the principal id here.
 */
function redisBound (options: { maxTaskBytes: number, maxTasks: number }, principal: string): number {
  return 1.25 * options.maxTaskBytes + options.maxTasks * (1536 + 5 * Buffer.byteLength(`principal:${principal}`))
}

for (const kind of ['memory', 'redis'] as const) {
  const kindSkip = kind === 'redis' ? skip : false

  t.test(`${kind}: scope A creates tasks until it is refused; scope B's task tools still create tasks`, { skip: kindSkip }, async t => {
    const options = {
      maxTasksPerScope: 3, maxKeptTasksPerScope: 6, maxTasks: 12, maxTaskResultBytes: 4096, maxTaskBytesPerScope: 12_288, maxTaskBytes: 32_768
    }
    const deployment = await deploy(t, kind, options)
    const { nodes, tools, inspect } = deployment
    const [a, b = a] = nodes as [TaskNode, TaskNode | undefined]

    // A floods: tasks that end at once, each with a result of about 3 KB.
    const flood: string[] = []
    for (let i = 0; i < 30; i++) flood.push(await endedTask(deployment, a, 'alice', 1500))
    t.equal(flood.length, 30, 'alice creates 30 tasks that end at once, more than the store keeps in all: none is refused')

    // Then tasks that stay live, until A is refused.
    const held: string[] = []
    let refused: RpcAnswer | undefined
    for (let i = 0; i < 10 && refused === undefined; i++) {
      const tag = `alice-held-${i}`
      const answer = await a.client.call('hold', { tag }, as('alice'))
      const taskId = createdTaskId(answer)
      if (taskId === undefined) refused = answer
      else held.push(taskId)
    }
    t.equal(held.length, options.maxTasksPerScope, 'alice is refused only once she has maxTasksPerScope live tasks')
    t.equal(refused?.status, 429, 'with HTTP 429')
    t.equal(refused?.body.error?.code, -32000, 'and -32000')
    t.match(refused?.body.error?.message, /Too many tasks.*maxTasksPerScope/, 'naming the quota that is full')

    // A keeps maxKeptTasksPerScope tasks: her live ones and her newest ended ones; her older ones are gone.
    const keptEnded = flood.slice(-(options.maxKeptTasksPerScope - options.maxTasksPerScope))
    await expectKept(t, a, 'alice', keptEnded, flood.slice(0, 5), 'alice reads her newest ended tasks; her oldest are "Task not found"')

    // B, on the other node with Redis: live tasks (one short of his own quota, the room his next tasks run in), and tasks that end.
    const bobHeld: string[] = []
    for (let i = 0; i < options.maxTasksPerScope - 1; i++) {
      const taskId = createdTaskId(await b.client.call('hold', { tag: `bob-held-${i}` }, as('bob')))
      if (taskId !== undefined) bobHeld.push(taskId)
    }
    t.equal(bobHeld.length, options.maxTasksPerScope - 1, 'bob creates live tasks of his own')
    const bobEnded: string[] = []
    for (let i = 0; i < 3; i++) bobEnded.push(await endedTask(deployment, b, 'bob', 200))
    await expectKept(t, b, 'bob', bobEnded, [], 'bob\'s tasks end and he reads them')

    // Many other scopes flood too: the store is at its caps, yet bob still creates tasks.
    for (let scope = 0; scope < 4; scope++) {
      for (let i = 0; i < 6; i++) await endedTask(deployment, a, `carol-${scope}`, 1500)
    }
    const late = await endedTask(deployment, b, 'bob', 200)
    t.ok(late, 'with every cap reached, bob still creates a task, and it completes')

    // Nothing crosses scopes: alice's tasks, kept or dropped, are to bob what an unknown id is.
    const unknown = await statusOf(b, UNKNOWN_ID, 'bob')
    t.equal(unknown, NOT_FOUND)
    for (const taskId of [keptEnded.at(-1)!, flood[0]!, held[0]!]) {
      t.equal(await statusOf(b, taskId, 'bob'), unknown, 'bob reads none of alice\'s tasks')
      t.equal((await b.client.cancel(taskId, as('bob'))).body.error?.message, 'Invalid params: Task not found', 'nor cancels them')
    }
    t.equal(await statusOf(a, held[0]!, 'alice'), 'working', 'alice\'s live task is untouched')
    t.equal(await statusOf(a, late, 'alice'), NOT_FOUND, 'and alice reads none of bob\'s')

    const scopeEvictions = await metricSum(a.url, 'mcp_task_evictions_total', { bound: 'scope' })
    t.ok(scopeEvictions >= 24, `alice's own quota dropped her oldest ended tasks, counted: mcp_task_evictions_total{bound="scope"} ${scopeEvictions}`)

    if (inspect !== undefined) {
      const { bytes, keys } = await taskMemory(inspect)
      const bound = redisBound(options, 'carol-0')
      t.ok(bytes <= bound, `what the plugin keeps in Redis (${bytes} bytes in ${keys.length} keys) stays under the bound ${bound}`)
    }

    for (let i = 0; i < 10; i++) tools.open(`alice-held-${i}`)
    for (let i = 0; i < options.maxTasksPerScope; i++) tools.open(`bob-held-${i}`)
    for (const taskId of held) t.equal((await a.client.waitFor(taskId, TERMINAL, 3000, as('alice')))?.status, 'completed')
  })

  t.test(`${kind}: a scope at its own maxKeptTasksPerScope drops its own oldest ended tasks, nothing of another scope`, { skip: kindSkip }, async t => {
    const deployment = await deploy(t, kind, { maxTasksPerScope: 2, maxKeptTasksPerScope: 4, maxTasks: 100 })
    const [a] = deployment.nodes as [TaskNode]
    const bobs = [await endedTask(deployment, a, 'bob'), await endedTask(deployment, a, 'bob')]
    const alices: string[] = []
    for (let i = 0; i < 6; i++) alices.push(await endedTask(deployment, a, 'alice'))
    await expectKept(t, a, 'alice', alices.slice(2), alices.slice(0, 2), 'alice keeps her 4 newest; her 2 oldest are dropped')
    await expectKept(t, a, 'bob', bobs, [], 'bob keeps both of his, created before alice\'s')
    t.equal(await metricSum(a.url, 'mcp_task_evictions_total', { bound: 'scope' }), 2, 'mcp_task_evictions_total{bound="scope"} 2')
    t.equal(await metricSum(a.url, 'mcp_task_evictions_total', { bound: 'global' }), 0, 'and no global eviction')
  })

  t.test(`${kind}: at maxTasks, the ended tasks of the largest scope go first, oldest first`, { skip: kindSkip }, async t => {
    const deployment = await deploy(t, kind, { maxTasksPerScope: 2, maxKeptTasksPerScope: 8, maxTasks: 10 })
    const [a, b = a] = deployment.nodes as [TaskNode, TaskNode | undefined]
    const alices: string[] = []
    for (let i = 0; i < 8; i++) alices.push(await endedTask(deployment, a, 'alice'))
    const bobs = [await endedTask(deployment, b, 'bob'), await endedTask(deployment, b, 'bob')]
    const carols: string[] = []
    for (let i = 0; i < 3; i++) carols.push(await endedTask(deployment, b, 'carol'))
    await expectKept(t, a, 'alice', alices.slice(3), alices.slice(0, 3), 'carol\'s 3 tasks took the place of alice\'s 3 oldest')
    await expectKept(t, b, 'bob', bobs, [], 'bob, the smallest scope, lost nothing')
    await expectKept(t, a, 'carol', carols, [], 'carol keeps hers')
    const evicted = await Promise.all(deployment.nodes.map(async node => await metricSum(node.url, 'mcp_task_evictions_total', { bound: 'global' })))
    t.equal(evicted.reduce((sum, n) => sum + n, 0), 3, 'mcp_task_evictions_total{bound="global"} 3 (on the nodes that made room)')

    // Every task kept is live: a scope under its own quota is still never refused.
    const tags = ['dave-0', 'dave-1', 'erin-0', 'erin-1']
    for (const tag of tags) {
      const principal = tag.slice(0, 4)
      const answer = await a.client.call('hold', { tag }, as(principal))
      t.ok(createdTaskId(answer), `${tag}: created (${answer.status})`)
    }
    for (const tag of tags) deployment.tools.open(tag)
  })

  t.test(`${kind}: live tasks that hold a scope's bytes: their asks are recorded, the scope's next task is 429 (maxTaskBytesPerScope) until they end`, { skip: kindSkip }, async t => {
    const deployment = await deploy(t, kind, { maxTasksPerScope: 4, maxTaskResultBytes: 4096, maxTaskBytesPerScope: 12_000 })
    const [a, b = a] = deployment.nodes as [TaskNode, TaskNode | undefined]
    for (const node of deployment.nodes) registerLargeAsk(node)
    const asking: string[] = []
    for (let i = 0; i < 3; i++) {
      const taskId = createdTaskId(await a.client.call('large-ask', { bytes: 4500 }, as('alice')))
      t.ok(taskId, `alice's asking task ${i + 1}: created`)
      const seen = await a.client.waitFor(taskId!, ['input_required'], 3000, as('alice'))
      t.equal(seen?.inputRequests?.confirm?.params?.message?.length, 4500, 'and its question shows, whole, though the third takes her over her bytes')
      asking.push(taskId!)
    }
    const refused = await b.client.call('large-ask', { bytes: 10 }, as('alice'))
    t.equal(refused.status, 429, 'her next task: 429')
    t.match(refused.body.error?.message, /Too many tasks.*maxTaskBytesPerScope/, 'naming the bytes quota')
    t.ok(await endedTask(deployment, b, 'bob'), 'bob is not affected')
    for (const taskId of asking) await a.client.cancel(taskId, as('alice'))
    for (const taskId of asking) t.equal((await a.client.waitFor(taskId, TERMINAL, 3000, as('alice')))?.status, 'cancelled')
    t.ok(await endedTask(deployment, b, 'alice'), 'once they ended (their questions gone), alice creates tasks again')
  })

  t.test(`${kind}: bytes: a scope over maxTaskBytesPerScope drops its own oldest; at maxTaskBytes the largest scope's go first`, { skip: kindSkip }, async t => {
    const deployment = await deploy(t, kind, {
      maxTasksPerScope: 2, maxKeptTasksPerScope: 50, maxTasks: 100, maxTaskResultBytes: 8192, maxTaskBytesPerScope: 12_000, maxTaskBytes: 20_000
    })
    const [a, b = a] = deployment.nodes as [TaskNode, TaskNode | undefined]
    // Results of about 5 KB: two fit in 12 000 bytes, three do not.
    const alices = [await endedTask(deployment, a, 'alice', 2450), await endedTask(deployment, a, 'alice', 2450)]
    const bobs = [await endedTask(deployment, b, 'bob'), await endedTask(deployment, b, 'bob'), await endedTask(deployment, b, 'bob')]
    await expectKept(t, a, 'alice', alices, [], 'two large results fit alice\'s bytes')
    alices.push(await endedTask(deployment, a, 'alice', 2450))
    await expectKept(t, a, 'alice', alices.slice(1), alices.slice(0, 1), 'a third one drops her oldest')
    t.equal(await metricSum(a.url, 'mcp_task_evictions_total', { bound: 'scope' }), 1, 'mcp_task_evictions_total{bound="scope"} 1')

    const carols = [await endedTask(deployment, b, 'carol', 2450)]
    await expectKept(t, b, 'alice', alices.slice(1), [], 'with carol\'s first large result the store is under maxTaskBytes')
    carols.push(await endedTask(deployment, b, 'carol', 2450))
    await expectKept(t, a, 'alice', alices.slice(2), alices.slice(0, 2), 'carol\'s second one takes the place of the oldest of alice, who keeps the most bytes')
    await expectKept(t, a, 'bob', bobs, [], 'bob\'s small tasks are untouched')
    await expectKept(t, a, 'carol', carols, [], 'carol keeps both of hers')
  })
}

t.test('redis: expired tasks leave no keys in Redis, evicted or not', { skip }, async t => {
  const TTL_MS = 400
  const deployment = await deploy(t, 'redis', { taskTtlMs: TTL_MS, maxTasksPerScope: 2, maxKeptTasksPerScope: 3, maxTasks: 8 })
  const [a, b] = deployment.nodes as [TaskNode, TaskNode]
  const inspect = deployment.inspect!
  for (let i = 0; i < 6; i++) await endedTask(deployment, a, 'alice', 300)
  for (const principal of ['bob', 'carol', 'dave']) {
    for (let i = 0; i < 3; i++) await endedTask(deployment, b, principal, 300)
  }
  t.ok((await scanKeys(inspect, `${PREFIX}task*`)).length > 0, 'while the tasks are kept, Redis holds their keys')
  const gone = await waitFor(async () => (await scanKeys(inspect, `${PREFIX}task*`)).length === 0, TTL_MS + 2000, 50)
  t.ok(gone, 'taskTtlMs after the last one ended, no task key of any kind is left', { left: await scanKeys(inspect, `${PREFIX}task*`) })
})

t.test('redis: what the plugin keeps stays under the bound however many scopes flood it', { skip }, async t => {
  const options = { maxTasksPerScope: 2, maxKeptTasksPerScope: 4, maxTasks: 16, maxTaskResultBytes: 4096, maxTaskBytesPerScope: 8192, maxTaskBytes: 24_576 }
  const deployment = await deploy(t, 'redis', options)
  const [a, b] = deployment.nodes as [TaskNode, TaskNode]
  const inspect = deployment.inspect!
  for (let scope = 0; scope < 12; scope++) {
    for (let i = 0; i < 5; i++) await endedTask(deployment, scope % 2 === 0 ? a : b, `tenant-${scope}`, 1200)
  }
  const { bytes, keys } = await taskMemory(inspect)
  const bound = redisBound(options, 'tenant-11')
  t.ok(bytes <= bound, `60 tasks of 12 scopes: the plugin keeps ${bytes} bytes in ${keys.length} keys, under the bound ${bound}`)
})

t.test('options: the task bounds are validated at register time', async t => {
  const cases: Array<[string, Record<string, unknown>]> = [
    ['maxKeptTasksPerScope', { maxKeptTasksPerScope: 0 }],
    ['maxKeptTasksPerScope', { maxKeptTasksPerScope: 1.5 }],
    ['maxKeptTasksPerScope', { maxTasksPerScope: 8, maxKeptTasksPerScope: 4 }],
    ['maxTaskBytesPerScope', { maxTaskBytesPerScope: '1mb' }],
    ['maxTaskBytesPerScope', { maxTaskResultBytes: 4096, maxTaskBytesPerScope: 4000 }],
    ['maxTaskBytes', { maxTaskBytes: -1 }],
    ['maxTasks', { maxTasks: 0 }]
  ]
  for (const [name, options] of cases) {
    const app = Fastify({ logger: false })
    t.teardown(() => app.close())
    await t.rejects(async () => {
      await app.register(mcpCancellation, options as McpCancellationOptions)
      await app.ready()
    }, { code: 'FST_MCP_INVALID_OPTION', message: new RegExp(`"${name}"`) }, `${JSON.stringify(options)}: "${name}" is refused`)
  }
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, { maxTasksPerScope: 4, maxKeptTasksPerScope: 4, maxTaskResultBytes: 1000, maxTaskBytesPerScope: 1000, maxTaskBytes: 1000 })
  await app.ready()
  t.pass('bounds equal to the ones they must not be under are accepted')
})
