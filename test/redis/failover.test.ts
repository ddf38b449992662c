/**
 * A failover under load (issue 24), on both topologies that have one: a primary under three sentinels
 * with one replica (test/helpers/redis-sentinel.ts), and a 3+3 Redis Cluster
 * (test/helpers/redis-cluster.ts), where the primary killed is the one holding the task store's slot.
 * Two in-process nodes serve a mixed load the whole time (echo calls, tasks created on either node and
 * released or cancelled through the other, legacy calls cancelled through the other node) while the
 * primary is SIGKILLed. After the promotion:
 * - every task whose CreateTaskResult the client received reads, on both nodes, with its final status
 *   (within a second of the recovery for those that had ended by then; none is ever missing);
 * - the plugin reconnected by itself: cross-node cancellation works again within the failover time
 *   plus one second, and its latency (p50 and p99, each sample less the time the process running
 *   both nodes could not run) is within twice what it was before;
 * - nothing on the request path waited for Redis meanwhile (echo calls kept being answered quickly);
 * - the outage is counted (mcp_bus_errors_total) and logged once per node.
 * The failover and recovery times and the latencies are printed as comments.
 *
 * `FAILOVER_SEED=<seed>` replays the random choices (which tasks are cancelled, and when).
 * Without redis-server, redis-cli or redis-sentinel these tests are skipped, except under CI where
 * that is a failure.
 */
import t from 'tap'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import type { McpCancellationOptions } from '../../lib/index.js'
import { echo, sendCancel, startProbe, untilCrossNodeWorks } from '../helpers/cluster.js'
import { errorLines } from '../helpers/logs.js'
import { metricValue } from '../helpers/metrics.js'
import { startRedisCluster } from '../helpers/redis-cluster.js'
import { startRedisSentinel } from '../helpers/redis-sentinel.js'
import { redisSkipReason } from '../helpers/redis-server.js'
import { startTaskNode, TaskTools, type TaskNode } from '../helpers/task-nodes.js'
import type { RpcAnswer } from '../helpers/tasks.js'
import { waitFor, within } from '../helpers/wait.js'
import { seededRandom } from '../helpers/random.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

// Two topologies of up to a minute each (the file default is 60 s).
t.setTimeout(180_000)

const skip = redisSkipReason(t, ['redis-server', 'redis-cli', 'redis-sentinel'])
const SECRET = 'failover-test-secret-0123456789abcdef'
const BUS_ERRORS = 'mcp_bus_errors_total'
const BUS_CONNECTED = 'mcp_bus_connected'
/** A fresh topology needs a moment before both nodes have subscribed everywhere. */
const WARM_UP_MS = 10_000
/**
 * Cross-node cancel latency samples, before the kill and after the recovery. 200 rather than 50: with
 * 50 the p99 is the slowest sample, and on a 2-core machine running half a dozen Redis processes
 * beside the nodes about one sample in fifty takes 20–60 ms (once 400 ms) while Redis is healthy, the
 * cancel's 202 prompt and the abort late (the scheduler, not the plugin): p99 against p99 was then a
 * coin toss either way. With 200 it is the third slowest (nearest rank), steady from run to run.
 */
const SAMPLES = 200
/** A sample whose abort has not come within this long is a failed cross-node cancel. */
const SAMPLE_WAIT_MS = 2000
/** One recovery attempt every this long (each waits this long for its abort): the polling step. */
const RECOVERY_STEP_MS = 100
/** The step, plus starting the attempt's probe: how late the first successful attempt may see a recovery. */
const RECOVERY_MARGIN_MS = RECOVERY_STEP_MS + 100
/** The requirement: cross-node cancellation works again within the failover time plus this. */
const RECOVERY_AFTER_FAILOVER_MS = 1000
const RECOVERY_TIMEOUT_MS = 25_000
/**
 * p50 after ≤ max(2 × p50 before, the first) and p99 after ≤ max(2 × p99 before, the second).
 * Timestamps are whole milliseconds and a loopback cross-node cancel takes 2–3 ms at the median: when
 * a figure before is a few ms, twice it is within the noise of a few event-loop turns of the in-process
 * nodes under the mixed load. The p99 is the third slowest of 200, and on the 2-core CI host, with
 * another test file beside this one, the load after a failover (the tasks it held up, retried) makes
 * its tail 30–40 ms with no stall of this process (a CI run: 16 ms before, 33 ms after; 202s of the
 * cancel POST itself, which never waits for Redis, took 16 ms). Both floors stay below ioredis'
 * shortest reconnect or retry delay (100 ms): a cancel path that waits for Redis to recover, goes
 * through a retry, or a dead subscriber's reconnect fails the p50 in every sample and the p99 in three.
 */
const LATENCY_FLOOR_MS = { p50: 10, p99: 50 }
/**
 * The slowest echo call allowed while the primary is down. An echo never needs Redis: on loopback it
 * takes a few ms; one that waited for a Redis command would take at least ioredis' 100 ms retry delay
 * on a Cluster, and seconds (the failover) on Sentinel. 250 ms leaves room for a loaded 2-core machine
 * running half a dozen Redis processes beside the nodes.
 */
const ECHO_SLOWEST_MS = 250
const ECHO_PACE_MS = 10
const TASK_PACE_MS = 30
/** A task is released or cancelled at a random moment within this long of its CreateTaskResult. */
const TASK_LIFE_MS = 300
/** Meanwhile it is polled (tasks/get), on either node in turn, this often. */
const TASK_POLL_MS = 50
/** A cancel answered -32000 (the store or the owner unreachable) is sent again this often, for this long. */
const CANCEL_RETRY_MS = 100
const CANCEL_DEADLINE_MS = 20_000
/**
 * What a node could not write while the store was away is written "as soon as it is back"
 * (docs/tasks.md): once the plugin has recovered (the failover time plus a second), every task that
 * had ended by then must read final on both nodes within this long.
 */
const WRITTEN_BACK_MS = 1000
/**
 * Late or lost: past the next lease renewal (every taskLeaseMs / 3 = 10 s by default), which writes
 * back too, a task still not final on both nodes is lost.
 */
const FINAL_READ_MS = 15_000
/** Past startTask a task's CreateTaskResult is on its way; an ordinary call's answer waits for its gate. */
const ANSWER_GRACE_MS = 500
const CREATE_TIMEOUT_MS = 10_000
/**
 * Tasks all share one scope (no auth: the loopback address), and the load creates hundreds: with the
 * default 256 kept per scope the oldest ended ones would be dropped, and read as lost. Ends a node
 * could not write yet still count as live: room for them, a 429 is not what this test is about.
 */
const NODE_OPTIONS: McpCancellationOptions = { secret: SECRET, maxKeptTasksPerScope: 5000, maxTasksPerScope: 64 }

/** What the test needs of a topology: how a node connects, and the failover. */
interface Topology {
  name: string
  /** The `redis` option of one node. */
  redisFor: (t: Tap) => McpCancellationOptions['redis']
  /** SIGKILL of the primary that matters; resolves once it is gone. */
  kill: () => Promise<void>
  /** The ms from the kill until the helper sees the replica promoted. */
  waitForFailover: () => Promise<number>
}

/** Nearest-rank percentile of `values` (ms); undefined for none. */
function percentile (values: readonly number[], p: number): number | undefined {
  if (values.length === 0) return undefined
  const sorted = [...values].sort((x, y) => x - y)
  return sorted[Math.min(sorted.length, Math.ceil(p / 100 * sorted.length)) - 1]
}

interface CancelSample {
  /** Which node ran the call and which took its cancel. */
  route: string
  sentAt: number
  /** Sent → the probe's abort, in ms; undefined when it never came. */
  ms: number | undefined
  /**
   * `ms` less `stallMs` (not below 0): the part of the wait the process could run in. A stall delays
   * both nodes and the test's client alike; it is the host (a GC pause, the scheduler), not the bus.
   * The stall is read when the abort is seen (within waitFor's 10 ms step of it): a lower bound.
   */
  netMs: number | undefined
  /** Sent → the 202 of the cancel POST. */
  answeredMs: number
  /** The longest the test process's event loop (both nodes run in it) was late meanwhile. */
  stallMs: number
}

/** The event loop's lateness, sampled every 5 ms: a slow sample with a stall as long is this process, not the bus. */
const loopDelay = monitorEventLoopDelay({ resolution: 5 })
loopDelay.enable()
t.teardown(() => { loopDelay.disable() })

/** A legacy probe on `owner`, cancelled through `via`: the ms from sending the cancel to the probe's abort. */
async function cancelLatency (owner: TaskNode, via: TaskNode): Promise<CancelSample> {
  const probe = await startProbe(owner, 30_000)
  loopDelay.reset()
  const sentAt = Date.now()
  await sendCancel(via, probe.id, 'latency sample')
  const answeredMs = Date.now() - sentAt
  const aborted = await waitFor(() => probe.call()?.abortedAt !== undefined, SAMPLE_WAIT_MS)
  const stallMs = Math.round(loopDelay.max / 1e6)
  if (!aborted) probe.http.destroy()
  await probe.http.done.catch(() => {})
  const ms = aborted ? probe.call()!.abortedAt! - sentAt : undefined
  return { route: `${owner.name} ← ${via.name}`, sentAt, ms, netMs: ms === undefined ? undefined : Math.max(0, ms - stallMs), answeredMs, stallMs }
}

/** `count` cross-node cancels, alternating directions; the latencies, how many never arrived, and every sample. */
async function cancelLatencies (a: TaskNode, b: TaskNode, count: number): Promise<{ latencies: number[], lost: number, samples: CancelSample[] }> {
  const samples: CancelSample[] = []
  for (let i = 0; i < count; i++) samples.push(i % 2 === 0 ? await cancelLatency(a, b) : await cancelLatency(b, a))
  const latencies = samples.flatMap(sample => sample.netMs === undefined ? [] : [sample.netMs])
  return { latencies, lost: samples.length - latencies.length, samples }
}

/** The slowest few samples, when each was sent (ms after `since`): for the log, to tell noise from a stall. */
function slowestOf (samples: readonly CancelSample[], since: number): string {
  return [...samples].sort((x, y) => (y.ms ?? Infinity) - (x.ms ?? Infinity)).slice(0, 3)
    .map(sample => `${String(sample.ms)} ms (${sample.route}, sent at +${sample.sentAt - since} ms, 202 after ${sample.answeredMs} ms, loop stalled ${sample.stallMs} ms)`).join(', ')
}

interface EchoSample {
  node: string
  startedAt: number
  ms: number
  status: number
  ok: boolean
}

/** A task whose CreateTaskResult the client received, and what the test did with it. */
interface CreatedTask {
  tag: string
  taskId: string
  owner: TaskNode
  /** The other node, through which it is cancelled. */
  via: TaskNode
  fate: 'completed' | 'cancelled'
  createdAt: number
  /** tasks/cancel sends until one was acknowledged (cancelled ones). */
  cancelAttempts: number
  cancelAcknowledged: boolean
  lastCancelError: unknown
  /** When its gate opened, or its cancel was acknowledged. */
  settledAt: number | undefined
}

/** One tasks/get of a live task: its HTTP status and the task's status, or the JSON-RPC error's code. */
interface Poll {
  at: number
  ms: number
  http: number
  outcome: string
}

/** The mixed load: echo calls and tasks on alternating nodes, until stopped. */
class MixedLoad {
  readonly echoes: EchoSample[] = []
  readonly tasks: CreatedTask[] = []
  readonly polls: Poll[] = []
  /** Calls of the task tool that ran as ordinary calls (no task could be created: the store was away). */
  readonly ordinary: Array<{ tag: string, at: number }> = []
  /** Calls of the task tool answered neither with a task nor a result. */
  readonly refused: Array<{ tag: string, at: number, answer: unknown }> = []
  /** How long each creation took, from the POST to its answer (or to the tool running as an ordinary call). */
  readonly creations: Array<{ at: number, ms: number }> = []
  readonly #stop = new AbortController()
  readonly #settling = new Set<Promise<void>>()
  readonly #loops: Array<Promise<void>>
  readonly #nodes: readonly [TaskNode, TaskNode]
  readonly #tools: TaskTools
  readonly #random: () => number
  readonly #prefix: string

  constructor (nodes: readonly [TaskNode, TaskNode], tools: TaskTools, random: () => number, prefix: string) {
    this.#nodes = nodes
    this.#tools = tools
    this.#random = random
    this.#prefix = prefix
    this.#loops = [this.#echoLoop(), this.#taskLoop()]
  }

  /** Stops both loops, then waits for every task's release or cancel to be done. */
  async stop (): Promise<void> {
    this.#stop.abort()
    await Promise.all(this.#loops)
    await Promise.all(this.#settling)
  }

  async #echoLoop (): Promise<void> {
    for (let i = 0; !this.#stop.signal.aborted; i++) {
      const node = this.#nodes[i % 2]!
      const startedAt = Date.now()
      const { status, text } = await echo(node, `e${i}`)
      this.echoes.push({ node: node.name, startedAt, ms: Date.now() - startedAt, status, ok: text === `e${i}` })
      await sleep(ECHO_PACE_MS)
    }
  }

  async #taskLoop (): Promise<void> {
    for (let i = 0; !this.#stop.signal.aborted; i++) {
      const [owner, via] = i % 2 === 0 ? this.#nodes : [this.#nodes[1], this.#nodes[0]]
      await this.#createOne(owner, via, `${this.#prefix}-${i}`)
      await sleep(TASK_PACE_MS)
    }
  }

  async #createOne (owner: TaskNode, via: TaskNode, tag: string): Promise<void> {
    const startedAt = Date.now()
    const reply: { answer?: RpcAnswer, failure?: unknown } = {}
    const call = owner.client.call('hold', { tag }).then(answer => { reply.answer = answer }, (error: unknown) => { reply.failure = error })
    const answered = (): boolean => reply.answer !== undefined || reply.failure !== undefined
    await waitFor(() => answered() || this.#tools.run(tag)?.afterStart === true, CREATE_TIMEOUT_MS, 2)
    // Until the answer, or until startTask() returned without a task: how long the call waited for the store.
    this.creations.push({ at: startedAt, ms: Date.now() - startedAt })
    await waitFor(answered, ANSWER_GRACE_MS, 2)
    if (!answered()) {
      // The store could not be reached: an optional task tool runs as an ordinary call, holding its POST until its gate opens.
      this.ordinary.push({ tag, at: startedAt })
      this.#tools.open(tag)
      await within(call, 5000, undefined)
      return
    }
    const result = reply.answer?.body.result
    if (result?.resultType !== 'task' || typeof result.taskId !== 'string') {
      this.refused.push({ tag, at: startedAt, answer: reply.answer?.body ?? String(reply.failure) })
      this.#tools.open(tag)
      return
    }
    const task: CreatedTask = {
      tag,
      taskId: result.taskId,
      owner,
      via,
      fate: this.#random() < 0.5 ? 'completed' : 'cancelled',
      createdAt: Date.now(),
      cancelAttempts: 0,
      cancelAcknowledged: false,
      lastCancelError: undefined,
      settledAt: undefined
    }
    this.tasks.push(task)
    const settling = this.#settle(task, this.#random() * TASK_LIFE_MS).finally(() => { this.#settling.delete(settling) })
    this.#settling.add(settling)
  }

  /**
   * Polls the task on either node in turn for `afterMs`, then releases it (its gate), or cancels it
   * through the other node, sending again while that is refused.
   */
  async #settle (task: CreatedTask, afterMs: number): Promise<void> {
    const until = Date.now() + afterMs
    for (let i = 0; Date.now() < until; i++) {
      await this.#poll(task, i % 2 === 0 ? task.via : task.owner)
      await sleep(Math.min(TASK_POLL_MS, Math.max(0, until - Date.now())))
    }
    if (task.fate === 'completed') {
      this.#tools.open(task.tag)
      task.settledAt = Date.now()
      return
    }
    const deadline = Date.now() + CANCEL_DEADLINE_MS
    while (Date.now() < deadline) {
      task.cancelAttempts++
      try {
        const answer = await task.via.client.cancel(task.taskId)
        if (answer.body.result !== undefined) {
          task.cancelAcknowledged = true
          task.settledAt = Date.now()
          return
        }
        task.lastCancelError = answer.body.error
      } catch (error) {
        task.lastCancelError = String(error)
      }
      await sleep(CANCEL_RETRY_MS)
    }
  }

  async #poll (task: CreatedTask, node: TaskNode): Promise<void> {
    const at = Date.now()
    try {
      const { status, body } = await node.client.get(task.taskId)
      const outcome = body.result !== undefined ? String(body.result.status) : `error ${String(body.error?.code)}`
      this.polls.push({ at, ms: Date.now() - at, http: status, outcome })
    } catch (error) {
      this.polls.push({ at, ms: Date.now() - at, http: 0, outcome: String(error) })
    }
  }
}

/** What a node answers tasks/get for `taskId`: its status, or its error. */
async function readOn (node: TaskNode, taskId: string): Promise<{ status?: unknown, error?: unknown }> {
  try {
    const { body } = await node.client.get(taskId)
    return body.result !== undefined ? { status: body.result.status } : { error: body.error }
  } catch (error) {
    return { error: String(error) }
  }
}

/**
 * Polls every task on both nodes until each reads its final status on both, or `timeoutMs` passes;
 * the tasks that never did (with what each node last answered), and when (Date.now()) the last one did.
 */
async function untilFinal (tasks: readonly CreatedTask[], nodes: readonly TaskNode[], timeoutMs: number):
Promise<{ wrong: unknown[], lastAt: number }> {
  const startedAt = Date.now()
  let pending = [...tasks]
  let seen = new Map<CreatedTask, unknown>()
  let lastAt = startedAt
  for (;;) {
    const next: CreatedTask[] = []
    seen = new Map()
    for (let at = 0; at < pending.length; at += 20) {
      await Promise.all(pending.slice(at, at + 20).map(async task => {
        const reads = await Promise.all(nodes.map(async node => await readOn(node, task.taskId)))
        if (reads.every(read => read.status === task.fate)) return
        next.push(task)
        seen.set(task, Object.fromEntries(nodes.map((node, i) => [node.name, reads[i]])))
      }))
    }
    if (next.length < pending.length) lastAt = Date.now()
    pending = next
    if (pending.length === 0 || Date.now() - startedAt >= timeoutMs) break
    await sleep(200)
  }
  const wrong = pending.map(task => ({
    tag: task.tag,
    owner: task.owner.name,
    expected: task.fate,
    createdAt: task.createdAt,
    cancel: task.fate === 'cancelled' ? { attempts: task.cancelAttempts, acknowledged: task.cancelAcknowledged } : undefined,
    seen: seen.get(task)
  }))
  return { wrong, lastAt }
}

async function failoverUnderLoad (t: Tap, topology: Topology): Promise<void> {
  const seed = Number(process.env.FAILOVER_SEED ?? Math.floor(Math.random() * 2 ** 31))
  t.comment(`${topology.name}: FAILOVER_SEED=${seed}`)
  const tools = new TaskTools()
  const a = await startTaskNode(t, 'node-a', tools, { ...NODE_OPTIONS, redis: topology.redisFor(t) })
  const b = await startTaskNode(t, 'node-b', tools, { ...NODE_OPTIONS, redis: topology.redisFor(t) })
  const nodes = [a, b] as const
  const warmedAt = Date.now()
  if (await untilCrossNodeWorks(a, b, warmedAt, WARM_UP_MS) === undefined || await untilCrossNodeWorks(b, a, warmedAt, WARM_UP_MS) === undefined) {
    t.fail(`the nodes never cancelled across each other within ${WARM_UP_MS} ms of starting`)
    return
  }
  const busErrorsBefore = await Promise.all(nodes.map(async node => await metricValue(node.url, BUS_ERRORS) ?? 0))
  t.same(await Promise.all(nodes.map(async node => await metricValue(node.url, BUS_CONNECTED))), [1, 1], `${BUS_CONNECTED} is 1 on both nodes`)

  const load = new MixedLoad(nodes, tools, seededRandom(seed), topology.name)
  const before = await cancelLatencies(a, b, SAMPLES)
  t.equal(before.lost, 0, `before the kill, each of ${SAMPLES} cross-node cancels arrived`)
  t.ok(load.tasks.length > 0, `tasks were created before the kill (${load.tasks.length})`)
  t.same(nodes.map(node => errorLines(node).length), [0, 0], 'no error logged before the kill')

  const killedAt = Date.now()
  await topology.kill()
  const [failoverMs, ab, ba] = await Promise.all([
    topology.waitForFailover(),
    untilCrossNodeWorks(a, b, killedAt, RECOVERY_TIMEOUT_MS, { everyMs: RECOVERY_STEP_MS }),
    untilCrossNodeWorks(b, a, killedAt, RECOVERY_TIMEOUT_MS, { everyMs: RECOVERY_STEP_MS })
  ])
  const recoveryMs = ab === undefined || ba === undefined ? undefined : Math.max(ab, ba)
  t.comment(`${topology.name}: failover ${Math.round(failoverMs)} ms after the SIGKILL (the helper's view); ` +
    `cross-node cancellation back at ${String(ab)} ms (A runs, B cancels) and ${String(ba)} ms (B runs, A cancels): recovery ${String(recoveryMs)} ms`)
  const bound = failoverMs + RECOVERY_AFTER_FAILOVER_MS + RECOVERY_MARGIN_MS
  t.ok(recoveryMs !== undefined && recoveryMs <= bound,
    `cross-node cancellation works again, both ways, within the failover time + ${RECOVERY_AFTER_FAILOVER_MS} ms (+ ${RECOVERY_MARGIN_MS} ms for the polling step): ` +
    `${String(recoveryMs)} ms ≤ ${Math.round(bound)} ms`)

  const outageEnd = killedAt + Math.max(failoverMs, recoveryMs ?? RECOVERY_TIMEOUT_MS)

  // Recovered: what the nodes could not write meanwhile (ends of tasks released or cancelled during the failover) is back in the store.
  await sleep(Math.max(0, killedAt + failoverMs + RECOVERY_AFTER_FAILOVER_MS - Date.now()))
  const recoveredAt = Date.now()
  const ended = load.tasks.filter(task => task.settledAt !== undefined)
  const endedDuring = ended.filter(task => task.settledAt! >= killedAt)
  const written = await untilFinal(ended, nodes, WRITTEN_BACK_MS)
  t.comment(`${topology.name}: ${recoveredAt - killedAt} ms after the kill, ${ended.length} tasks had ended (${endedDuring.length} since the kill); ` +
    `${written.wrong.length === 0 ? `all read final on both nodes ${written.lastAt - recoveredAt} ms later` : `${written.wrong.length} did not within ${WRITTEN_BACK_MS} ms`}`)
  t.same(written.wrong, [], `after the promotion, each of the ${ended.length} tasks that had ended (released or cancelled) reads on both nodes with its final status ` +
    `(completed when released, cancelled when cancelled) within ${WRITTEN_BACK_MS} ms of the plugin's recovery (the failover time + ${RECOVERY_AFTER_FAILOVER_MS} ms)`)

  const after = await cancelLatencies(a, b, SAMPLES)
  t.equal(after.lost, 0, `after the recovery, each of ${SAMPLES} cross-node cancels arrived`)
  const raw = (samples: readonly CancelSample[], p: number): string => String(percentile(samples.flatMap(sample => sample.ms ?? []), p))
  t.comment(`${topology.name}: cross-node cancel latency as measured, ${SAMPLES} samples each: p50 ${raw(before.samples, 50)} → ${raw(after.samples, 50)} ms, ` +
    `p99 ${raw(before.samples, 99)} → ${raw(after.samples, 99)} ms`)
  t.comment(`${topology.name}: slowest before: ${slowestOf(before.samples, killedAt)}; after: ${slowestOf(after.samples, killedAt)}`)
  for (const p of [50, 99] as const) {
    const figure = { before: percentile(before.latencies, p) ?? Infinity, after: percentile(after.latencies, p) ?? Infinity }
    const floor = LATENCY_FLOOR_MS[`p${p}`]
    t.ok(figure.after <= Math.max(2 * figure.before, floor),
      `cross-node cancel p${p} (less the process's stalls) after the recovery (${figure.after} ms) ≤ max(2 × ${figure.before} ms before, ${floor} ms)`)
  }

  await load.stop()
  const stoppedAt = Date.now()
  const created = load.tasks
  const firstAfterKill = created.find(task => task.createdAt > killedAt)
  const duringFailover = load.creations.filter(creation => creation.at >= killedAt && creation.at <= outageEnd)
  t.comment(`${topology.name}: ${created.length} tasks created (${created.filter(task => task.fate === 'cancelled').length} cancelled through the other node, ` +
    `${created.filter(task => task.cancelAttempts > 1).length} of them refused at first and sent again), ` +
    `${load.ordinary.length} calls ran as ordinary calls (store unreachable), ${load.refused.length} refused; ` +
    `first CreateTaskResult after the kill at ${firstAfterKill === undefined ? 'never' : `${firstAfterKill.createdAt - killedAt} ms`}; ` +
    `slowest creation during the failover ${Math.max(0, ...duringFailover.map(creation => creation.ms))} ms`)
  t.same(load.refused, [], 'no call of the task tool was answered with an error')
  const unacknowledged = created.filter(task => task.fate === 'cancelled' && !task.cancelAcknowledged)
  t.same(unacknowledged.map(task => ({ tag: task.tag, attempts: task.cancelAttempts, error: task.lastCancelError })), [],
    `every tasks/cancel sent through the other node was acknowledged within ${CANCEL_DEADLINE_MS} ms of trying`)

  // A live task polled on either node reads live, or, from the other node while the store is away, -32000 (HTTP 200); never "Task not found".
  const outcomes: Record<string, number> = {}
  for (const poll of load.polls) outcomes[`${poll.http} ${poll.outcome}`] = (outcomes[`${poll.http} ${poll.outcome}`] ?? 0) + 1
  const pollsDuring = load.polls.filter(poll => poll.at >= killedAt && poll.at <= outageEnd)
  t.comment(`${topology.name}: ${load.polls.length} polls of live tasks: ${JSON.stringify(outcomes)}; ` +
    `slowest during the failover ${Math.max(0, ...pollsDuring.map(poll => poll.ms))} ms`)
  t.ok(load.polls.length > 0, 'the tasks were polled')
  t.same(load.polls.filter(poll => poll.http !== 200 || !['working', 'error -32000'].includes(poll.outcome)), [],
    'every poll of a live task answered HTTP 200: working, or -32000 while the store was away (never -32602, a missing task)')

  const final = await untilFinal(created, nodes, FINAL_READ_MS)
  t.comment(`${topology.name}: the load stopped ${stoppedAt - killedAt} ms after the kill; every task read final on both nodes ` +
    `${final.wrong.length === 0 ? `${final.lastAt - stoppedAt} ms after that (${final.lastAt - killedAt} ms after the kill)` : 'never'}`)
  t.same(final.wrong, [], `none is lost: each of the ${created.length} tasks whose CreateTaskResult came back reads final on both nodes ` +
    `within ${FINAL_READ_MS} ms of the load stopping, none missing (-32602 would be a lost task)`)

  const failedEchoes = load.echoes.filter(sample => sample.status !== 200 || !sample.ok)
  t.same(failedEchoes, [], `every one of ${load.echoes.length} echo calls answered 200 with its text, before, during and after the failover`)
  const echoesDuring = load.echoes.filter(sample => sample.startedAt >= killedAt && sample.startedAt <= outageEnd)
  const slowest = Math.max(0, ...echoesDuring.map(sample => sample.ms))
  t.comment(`${topology.name}: ${echoesDuring.length} echo calls during the failover, p99 ${String(percentile(echoesDuring.map(sample => sample.ms), 99))} ms, slowest ${slowest} ms`)
  t.ok(echoesDuring.length >= 20, `echo calls kept being answered during the failover (${echoesDuring.length})`)
  t.ok(slowest <= ECHO_SLOWEST_MS, `none of them waited for Redis: the slowest took ${slowest} ms (≤ ${ECHO_SLOWEST_MS} ms)`)

  t.same(await Promise.all(nodes.map(async node => await metricValue(node.url, BUS_CONNECTED))), [1, 1], `${BUS_CONNECTED} is 1 again on both nodes: they reconnected by themselves`)
  const busErrorsAfter = await Promise.all(nodes.map(async node => await metricValue(node.url, BUS_ERRORS) ?? 0))
  for (const [i, node] of nodes.entries()) {
    t.ok(busErrorsAfter[i]! > busErrorsBefore[i]!, `${node.name}: the outage is counted in ${BUS_ERRORS} (${busErrorsBefore[i]!} → ${busErrorsAfter[i]!})`)
    const lines = errorLines(node).map(line => ({ msg: line.msg, err: (line.err as { message?: unknown } | undefined)?.message, taskId: line.taskId }))
    t.equal(lines.length, 1, `${node.name}: the outage is logged once: one error line (${lines.length})`, { lines })
  }
}

t.test('Sentinel: the primary SIGKILLed under load, its replica promoted', { skip }, async t => {
  const sentinel = await startRedisSentinel(t)
  await failoverUnderLoad(t, {
    name: 'sentinel',
    redisFor: t => {
      // The options the plugin gives a client it makes from a URL (lib/cluster/redis-bus.ts PUBLISHER_OPTIONS).
      const client = new Redis({
        sentinels: sentinel.sentinels,
        name: sentinel.name,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        autoResendUnfulfilledCommands: false,
        retryStrategy: (attempt: number) => Math.min(attempt * 100, 1000)
      })
      // The bus listens too once the node starts; until then an error must not be unhandled.
      client.on('error', () => {})
      // A client of the application's: the plugin never closes it.
      t.teardown(() => { client.disconnect() })
      return client
    },
    kill: async () => { await sentinel.killPrimary() },
    waitForFailover: async () => await sentinel.waitForFailover()
  })
})

t.test('Redis Cluster: the primary of the task store\'s slot SIGKILLed under load, its replica promoted', { skip }, async t => {
  const cluster = await startRedisCluster(t)
  // Every key of the task store shares the {tasks} hash tag: this primary holds them all.
  const victim = await cluster.primaryFor('mcp:{tasks}x')
  t.comment(`cluster: the task store's slot is on the primary on port ${victim.port}`)
  await failoverUnderLoad(t, {
    name: 'cluster',
    redisFor: () => cluster.seeds,
    kill: async () => { await cluster.kill(victim) },
    waitForFailover: async () => await cluster.waitForFailover(victim)
  })
})
