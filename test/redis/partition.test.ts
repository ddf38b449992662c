/**
 * A partition (the open issue's second requirement): node A reaches a real `redis-server` through a
 * TCP proxy (test/helpers/tcp-proxy.ts), node B directly. The proxy partitions A from Redis while A
 * still serves its clients, in two ways:
 * - paused: every byte held in both directions, the connections left open: a half-open link, which
 *   neither TCP nor ioredis notices by itself;
 * - cut: every connection reset (A sees them close), and the new ones A makes get nowhere (accepted,
 *   nothing passed) until the link heals.
 * What the issue asks: during the partition A serves local work (echo; its own tasks read, answered,
 * cancelled and ending; a task tool called on A is answered, as a task or, when the store cannot be
 * reached, as the ordinary call docs/tasks.md describes) and says so in `/metrics`
 * (`mcp_bus_connected 0`, `mcp_bus_errors_total` rising); a session is revoked on B. Once it heals,
 * A refuses the revoked session within a bounded time, every task that ended on A reads on B with the
 * end A computed, and a listener on B following each task hears exactly one terminal
 * `notifications/tasks` (no end lost, none applied twice); cross-node cancellation works both ways.
 *
 * The partition is shorter than `taskLeaseMs`: a task whose lease lapsed in a Redis that kept it and
 * that another node read meanwhile is lost, and docs/tasks.md says that stands.
 *
 * Without redis-server these tests are skipped, except under CI where that is a failure.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport, type SubscriptionFilter } from '@modelcontextprotocol/client'
import { echo, untilCrossNodeWorks } from '../helpers/cluster.js'
import { rawPost } from '../helpers/http.js'
import { initializeBody, MODERN } from '../helpers/jsonrpc.js'
import { metricSum, metricValue } from '../helpers/metrics.js'
import { RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import { startTaskNode, TaskTools, type TaskNode } from '../helpers/task-nodes.js'
import { TASKS_EXTENSION, type RpcAnswer } from '../helpers/tasks.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'
import type { Teardown } from '../helpers/teardown.js'
import { waitFor, within } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]
type Partition = 'paused' | 'cut'

const skip = redisSkipReason(t)
const SECRET = 'partition-secret-0123456789abcdef01234567'
const SESSION_SECRET = 'partition-session-secret-0123456789abcdef'
/** Longer than the partition: A's tasks are not declared lost meanwhile. */
const LEASE_MS = 10_000
/** How long A stays partitioned: several reconnect attempts and renewals, well within the lease. */
const PARTITION_MS = 2500
/** A freshly started pair, or a healed link, works across nodes within this long (docs/multi-node.md: within seconds). */
const RECOVERY_MS = 5000
/** How long a request of local work may take on A during the partition before it counts as hanging. */
const LOCAL_MS = 2000
/** What A reports within this long of the partition: the bus's state and its errors. */
const NOTICE_MS = 3000
const TASK_STATUS = 'notifications/tasks'
const TERMINAL = ['completed', 'failed', 'cancelled']
const ANSWER = { confirm: { action: 'accept', content: { ok: true } } }

/** The 2.x client pinned to 2026-07-28 and declaring the tasks extension; closed at the end of the test. */
async function modernClient (t: Teardown, url: URL): Promise<ModernClient> {
  const client = new ModernClient({ name: 'partition-listener', version: '2.0.0' }, {
    versionNegotiation: { mode: { pin: MODERN } },
    capabilities: { extensions: { [TASKS_EXTENSION]: {} } }
  })
  t.teardown(() => client.close())
  await client.connect(new ModernTransport(url))
  return client
}

/** The end of a task as tasks/get shows it: what A computed, without the timestamps and `_meta` of the node that answered. */
function endOf (result: Record<string, any> | undefined): Record<string, unknown> {
  return { status: result?.status, statusMessage: result?.statusMessage, result: result?.result, error: result?.error }
}

/** The task id of a CreateTaskResult, or undefined (the call ran as an ordinary call, or failed). */
function createdTaskId (answer: RpcAnswer): string | undefined {
  return answer.body.result?.resultType === 'task' && typeof answer.body.result.taskId === 'string' ? answer.body.result.taskId : undefined
}

/** Node A behind the proxy, node B direct, cross-node cancellation working both ways. */
async function partitionable (t: Tap): Promise<{ proxy: TcpProxy, a: TaskNode, b: TaskNode, tools: TaskTools }> {
  const redis = await RedisServer.start(t)
  const proxy = await TcpProxy.start(t, redis.port)
  const tools = new TaskTools()
  const options = { secret: SECRET, sessions: { secret: SESSION_SECRET }, taskLeaseMs: LEASE_MS }
  const a = await startTaskNode(t, 'node-a', tools, { ...options, redis: proxy.url })
  const b = await startTaskNode(t, 'node-b', tools, { ...options, redis: redis.url })
  const since = Date.now()
  const warm = await untilCrossNodeWorks(a, b, since, RECOVERY_MS) !== undefined && await untilCrossNodeWorks(b, a, since, RECOVERY_MS) !== undefined
  if (!warm) t.fail(`the nodes never cancelled across each other within ${RECOVERY_MS} ms of starting`)
  return { proxy, a, b, tools }
}

async function partitionScenario (t: Tap, partition: Partition): Promise<void> {
  const { proxy, a, b, tools } = await partitionable(t)
  t.equal(await metricValue(a.url, 'mcp_bus_connected'), 1, 'before the partition: mcp_bus_connected 1 on node A')

  // A legacy session, minted on B, used on A.
  const initialize = await rawPost(b.url, initializeBody())
  const session = { 'mcp-session-id': initialize.headers.get('mcp-session-id') ?? '' }
  t.same(await echo(a, 'before', session), { status: 200, text: 'before' }, 'a legacy session minted on node B works on node A')

  // Tasks on A, each to end on A during the partition in its own way.
  const tag = (name: string): string => `${partition}-${name}`
  const tasks = {
    completed: await a.client.create('hold', { tag: tag('complete') }),
    failed: await a.client.create('hold', { tag: tag('fail'), fail: true }),
    cancelled: await a.client.create('hold', { tag: tag('cancel') }),
    answered: await a.client.create('ask', { tag: tag('answer') })
  }
  t.equal((await b.client.waitFor(tasks.answered, ['input_required', ...TERMINAL]))?.status, 'input_required', 'node B reads A\'s asking task input_required')

  // A 2.x client on B follows all four.
  const listener = await modernClient(t, b.url)
  const heard: Array<Record<string, any>> = []
  listener.fallbackNotificationHandler = async notification => {
    if (notification.method === TASK_STATUS) heard.push(notification.params as Record<string, any>)
  }
  await listener.listen({ taskIds: Object.values(tasks) } as SubscriptionFilter)
  const heardOf = (taskId: string): Array<Record<string, any>> => heard.filter(task => task.taskId === taskId)
  t.ok(await waitFor(() => Object.values(tasks).every(taskId => heardOf(taskId).length > 0), RECOVERY_MS),
    'the listener on node B hears the current state of each of A\'s tasks')
  const busErrorsBefore = await metricValue(a.url, 'mcp_bus_errors_total') ?? 0

  // --- The partition -------------------------------------------------------------------------------
  proxy.pause()
  if (partition === 'cut') proxy.cut()
  const partitionedAt = Date.now()

  const echoes: Array<{ status: number, text: string | undefined }> = []
  for (let i = 0; i < 10; i++) echoes.push(await echo(a, `during ${i}`))
  t.same(echoes.filter((answer, i) => answer.status !== 200 || answer.text !== `during ${i}`), [], 'during the partition node A answers echo (10 calls, each 200 with its text)')

  for (const [name, taskId] of Object.entries(tasks)) {
    const own = await within(a.client.get(taskId), LOCAL_MS, undefined)
    t.ok(own !== undefined && own.body.result !== undefined, `node A answers tasks/get for its own ${name} task from memory`)
  }
  tools.open(tag('complete'))
  tools.open(tag('fail'))
  const cancel = await within(a.client.cancel(tasks.cancelled), LOCAL_MS, undefined)
  t.equal(cancel?.body.result?.resultType, 'complete', 'tasks/cancel of its own task on node A is acknowledged during the partition')
  const update = a.client.update(tasks.answered, ANSWER)
  const updated = await within(update, LOCAL_MS, undefined)
  t.equal(updated?.body.result?.resultType, 'complete', `tasks/update of its own task on node A is acknowledged during the partition (within ${LOCAL_MS} ms)`)

  const computed: Record<string, Record<string, unknown>> = {}
  for (const [name, taskId] of Object.entries(tasks)) {
    computed[name] = endOf(await within(a.client.waitFor(taskId, TERMINAL, LOCAL_MS), LOCAL_MS + 500, undefined))
  }
  t.same(Object.fromEntries(Object.entries(computed).map(([name, end]) => [name, end.status])),
    { completed: 'completed', failed: 'failed', cancelled: 'cancelled', answered: 'completed' }, 'the four tasks end on node A during the partition')
  t.same((computed.completed?.result as Record<string, any> | undefined)?.structuredContent, { tag: tag('complete'), node: 'node-a' }, 'A computed the completed task\'s result')

  // A task tool called on A: a task, or (its store unreachable) the ordinary call docs/tasks.md describes.
  tools.open(tag('during'))
  const during = a.client.call('hold', { tag: tag('during') })
  const duringAnswer = await within(during, LOCAL_MS, undefined)
  t.ok(duringAnswer !== undefined, `a task tool called on node A during the partition is answered within ${LOCAL_MS} ms (as a task or as an ordinary call)`,
    { answer: duringAnswer?.body })
  const duringTask = duringAnswer === undefined ? undefined : createdTaskId(duringAnswer)

  const connected = await waitFor(async () => await metricValue(a.url, 'mcp_bus_connected') === 0, Math.max(0, NOTICE_MS - (Date.now() - partitionedAt)), 50)
  t.ok(connected, `node A's /metrics shows mcp_bus_connected 0 within ${NOTICE_MS} ms of the partition (${String(await metricValue(a.url, 'mcp_bus_connected'))})`)
  const busErrors = await metricValue(a.url, 'mcp_bus_errors_total') ?? 0
  t.ok(busErrors > busErrorsBefore, `node A's mcp_bus_errors_total rises during the partition (${busErrorsBefore} → ${busErrors})`)

  const revoked = await fetch(b.url, { method: 'DELETE', headers: { ...session, 'mcp-protocol-version': '2025-11-25' } })
  t.equal(revoked.status, 204, 'the session is revoked on node B during the partition (DELETE ⇒ 204)')
  t.equal((await echo(b, 'revoked on b', session)).status, 404, 'node B refuses it at once')
  t.comment(`during the partition node A answers the revoked session ${(await echo(a, 'revoked, on a', session)).status} (docs/multi-node.md: accepted until Redis is back)`)
  t.comment(`during the partition node B reads A's tasks as ${JSON.stringify(await Promise.all(Object.values(tasks).map(async taskId => (await b.client.get(taskId)).body.result?.status)))}`)

  await sleep(Math.max(0, PARTITION_MS - (Date.now() - partitionedAt)))

  // --- The partition heals -------------------------------------------------------------------------
  proxy.resume()
  const healedAt = Date.now()

  let refusedAfter: number | undefined
  while (Date.now() - healedAt < RECOVERY_MS) {
    if ((await echo(a, 'revoked, after', session)).status === 404) {
      refusedAfter = Date.now() - healedAt
      break
    }
    await sleep(20)
  }
  t.comment(`node A refused the revoked session ${String(refusedAfter)} ms after the partition healed`)
  t.ok(refusedAfter !== undefined, `node A refuses the session revoked on B within ${RECOVERY_MS} ms of the partition healing (${String(refusedAfter)} ms)`)

  let caughtUpAfter: number | undefined
  const readOnB: Record<string, Record<string, unknown>> = {}
  const caughtUp = await waitFor(async () => {
    for (const [name, taskId] of Object.entries(tasks)) readOnB[name] = endOf((await b.client.get(taskId)).body.result)
    return Object.keys(tasks).every(name => TERMINAL.includes(String(readOnB[name]?.status)))
  }, RECOVERY_MS, 25)
  if (caughtUp) caughtUpAfter = Date.now() - healedAt
  t.comment(`node B read every task's end ${String(caughtUpAfter)} ms after the partition healed`)
  for (const name of Object.keys(tasks)) {
    t.same(readOnB[name], computed[name], `the ${name} task reads on node B with the end node A computed (status, statusMessage, result, error)`)
  }

  t.equal(await metricSum(b.url, 'mcp_listeners', { era: 'modern' }), 1, 'the listener\'s stream on node B is still open (mcp_listeners{era="modern"} 1)')
  const heardEnds = await waitFor(() => Object.values(tasks).every(taskId => heardOf(taskId).some(task => TERMINAL.includes(String(task.status)))), RECOVERY_MS)
  await sleep(500) // a second terminal notification would come in this long
  for (const [name, taskId] of Object.entries(tasks)) {
    const ends = heardOf(taskId).filter(task => TERMINAL.includes(String(task.status)))
    t.equal(ends.length, 1, `the listener on node B hears exactly one terminal notifications/tasks for the ${name} task (heard ${ends.length}${heardEnds ? '' : `; states heard: ${heardOf(taskId).map(task => String(task.status)).join(', ')}`})`)
    if (ends.length > 0) t.same(endOf(ends[0]), computed[name], `the ${name} task's terminal notification carries the end node A computed`)
  }

  // The requests that hung during the partition, if any, are answered by now.
  t.equal((await within(update, RECOVERY_MS, undefined))?.body.result?.resultType, 'complete', 'the tasks/update sent to A during the partition is answered by now')
  const late = duringTask ?? (duringAnswer === undefined ? createdTaskId(await within(during, RECOVERY_MS, { status: 0, body: {} }) as RpcAnswer) : undefined)
  if (late !== undefined) t.equal((await b.client.waitFor(late, TERMINAL, RECOVERY_MS))?.status, 'completed', 'the task tool called on A during the partition completed as a task, read on B')

  const expected = { completed: 2 + (late === undefined ? 0 : 1), failed: 1, cancelled: 1, lost: 0 }
  const counted = Object.fromEntries(await Promise.all(Object.keys(expected).map(async outcome => [outcome, await metricSum(a.url, 'mcp_tasks_total', { outcome })])))
  t.same(counted, expected, 'node A counts each task end once (mcp_tasks_total by outcome)')
  t.equal(await metricSum(b.url, 'mcp_tasks_total', {}), 0, 'node B ended no task of its own, and counts none lost')

  t.ok(await waitFor(async () => await metricValue(a.url, 'mcp_bus_connected') === 1, RECOVERY_MS), 'mcp_bus_connected is 1 again on node A')
  // Timed from here, not from the heal: the waits above may already have taken RECOVERY_MS.
  const ab = await untilCrossNodeWorks(a, b, Date.now(), RECOVERY_MS)
  const ba = await untilCrossNodeWorks(b, a, Date.now(), RECOVERY_MS)
  t.ok(ab !== undefined && ba !== undefined, `cross-node cancellation works again both ways (${Date.now() - healedAt} ms after the heal: A's call cancelled through B within ${String(ab)} ms of trying, B's through A within ${String(ba)} ms)`)
  const after = await a.client.create('hold', { tag: tag('after') })
  t.equal((await b.client.cancel(after)).body.result?.resultType, 'complete', 'tasks/cancel through node B of a new task on node A is acknowledged')
  t.ok(await waitFor(() => tools.run(tag('after'))?.aborted !== undefined, 2000), 'and reaches the handler on node A')
  t.equal((await b.client.waitFor(after, TERMINAL))?.status, 'cancelled', 'which node B reads cancelled')
}

t.test('a paused link (half-open): node A keeps serving, says so in /metrics, and catches up once it heals', { skip }, async t => {
  await partitionScenario(t, 'paused')
})

t.test('a cut link: node A keeps serving, says so in /metrics, and catches up once it heals', { skip }, async t => {
  await partitionScenario(t, 'cut')
})
