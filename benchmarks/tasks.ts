/**
 * The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`), against plugin nodes in processes
 * of their own (servers/task-node.ts: the plugin, `echo`, the task tools `hold` and `quick`, task limits
 * raised; this process is only the client, node:http on keep-alive connections, loopback):
 *
 * 1. `cancel`: `tasks/cancel` POSTed to node B → `ctx.signal` abort of the task's handler on node A,
 *    two nodes on one real `redis-server` started here on a free loopback port (as cross-node.ts).
 *    Per sample: `tools/call hold` on A (a task that waits for its cancellation) → its CreateTaskResult
 *    → `tasks/cancel` to B; measured from just before that POST is written to the abort instant A reports
 *    over IPC (`performance.timeOrigin + performance.now()` in each process, aligned by an offset
 *    measured over IPC; the ping with the smallest round trip bounds its error). Interleaved with the
 *    same cancel POSTed to A itself (same node: the baseline). After each sample the task must read
 *    `cancelled` on the node that was sent the cancel. Goal: cross-node p99 ≤ 10 ms.
 * 2. `throughput`: on one node, in memory and with the Redis store, `BENCH_CONNECTIONS` clients:
 *    - `lifecycle`: each client in a loop creates a task (`tools/call quick`, a task that ends as soon as
 *      it started) and polls `tasks/get` at once, again and again, until it reads `completed` (its result
 *      checked); reported: tasks/s (created and seen completed), tasks/get/s, polls per task;
 *    - `get`: autocannon sends `tasks/get` of one completed task (every answer byte-compared with the
 *      checked one): the read rate alone.
 *    The four rounds interleaved in each of `BENCH_ROUNDS` passes (lifecycle memory, lifecycle redis,
 *    get memory, get redis), `BENCH_WARMUP` s of warm-up before each; the median round is reported.
 * 3. `memory`: one node (in-memory store, --expose-gc); `BENCH_LIVE_TASKS` (2000) `hold` tasks are
 *    created in two halves, the node's heap measured after `gc()` before, after each half, and once all
 *    are cancelled: bytes per live task, and per ended task (kept `taskTtlMs`).
 *
 * `npm run bench -- tasks [cancel] [throughput] [memory]` (default all). BENCH_CANCELS overrides 500
 * (samples of each route, after 20 of warm-up), BENCH_LIVE_TASKS 2000. Figures, not assertions: only a
 * failed check (a wrong answer, a missing abort) fails the run.
 */
import type { ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import http from 'node:http'
import { cpus, loadavg } from 'node:os'
import { isDeepStrictEqual } from 'node:util'
import { RedisServer } from '../test/helpers/redis-server.js'
import type { TaskNodeCommand, TaskNodeMessage } from './servers/task-node.js'
import type { Benchmark } from './support/benchmark.js'
import { epochNow, estimateClockOffset, spawnServer, stopChild } from './support/child-server.js'
import type { BenchConfig } from './support/config.js'
import { checkJson, type Exchange } from './support/http-check.js'
import { envCount, ms, percentile, summarize, watchLoad, withTimeout, type LatencySummary } from './support/latency.js'
import { failures, measure, type Round } from './support/load.js'
import { waitForQuiet } from './support/noise.js'
import { fmt, printEnvironment, printTable } from './support/report.js'

const GOAL_CROSS_NODE_P99_MS = 10
const WARM_UP_CANCELS = 20
const TIMEOUT_MS = 5000
/** Clients creating or cancelling the live tasks of the memory part at once. */
const MEMORY_CLIENTS = 16
const MODERN = '2026-07-28'
const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks'
const META = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientInfo': { name: 'bench-tasks', version: '1.0.0' },
  'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS_EXTENSION]: {} } }
}
const SERVER_META = { 'io.modelcontextprotocol/serverInfo': { name: 'bench', version: '1.0.0' } }
const BASE_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
const TERMINAL = ['completed', 'failed', 'cancelled']

// ---------------------------------------------------------------- the wire

/** A 2026-07-28 request: `_meta` declaring the tasks extension; `Mcp-Name` mirrors params.name (tools/call) or params.taskId (tasks/*). */
function modernExchange (method: string, params: Record<string, unknown>, id: number | string): Exchange {
  const name = method === 'tools/call' ? params.name : params.taskId
  return {
    method: 'POST',
    path: '/mcp',
    headers: { ...BASE_HEADERS, 'mcp-protocol-version': MODERN, 'mcp-method': method, ...(typeof name === 'string' ? { 'mcp-name': name } : {}) },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: META } })
  }
}

interface Answer { status: number, contentType: string, body: string }

function post (url: URL, agent: http.Agent, exchange: Exchange): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', agent, headers: { ...exchange.headers, 'content-length': String(Buffer.byteLength(exchange.body)) } }, response => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => { resolve({ status: response.statusCode ?? 0, contentType: response.headers['content-type'] ?? '', body: Buffer.concat(chunks).toString('utf8') }) })
      response.on('error', reject)
    })
    request.on('error', reject)
    request.end(exchange.body)
  })
}

let lastId = 0

/** One request; resolves with the JSON-RPC result of a 200 JSON answer, throws with the details otherwise. */
async function rpc (url: URL, agent: http.Agent, method: string, params: Record<string, unknown>): Promise<Record<string, any>> {
  const id = ++lastId
  const answer = await post(url, agent, modernExchange(method, params, id))
  let message: any
  try {
    message = JSON.parse(answer.body)
  } catch {}
  if (answer.status !== 200 || !answer.contentType.startsWith('application/json') || message?.id !== id || typeof message?.result !== 'object') {
    throw new Error(`${method} ${JSON.stringify(params)} to ${url.host}: status ${answer.status}, content-type ${JSON.stringify(answer.contentType)}: ${answer.body.slice(0, 300)}`)
  }
  return message.result
}

/** `tools/call` of a task tool; resolves with the id of its CreateTaskResult (checked: a working task). */
async function createTask (url: URL, agent: http.Agent, tool: string, args: Record<string, unknown>): Promise<string> {
  const result = await rpc(url, agent, 'tools/call', { name: tool, arguments: args })
  if (result.resultType !== 'task' || typeof result.taskId !== 'string' || result.status !== 'working') {
    throw new Error(`${tool} did not become a working task: ${JSON.stringify(result)}`)
  }
  return result.taskId
}

/** `tasks/cancel`; checked: the acknowledgement (an empty complete result). */
async function cancelTask (url: URL, agent: http.Agent, taskId: string): Promise<void> {
  const result = await rpc(url, agent, 'tasks/cancel', { taskId })
  if (!isDeepStrictEqual(result, { resultType: 'complete', _meta: SERVER_META })) throw new Error(`tasks/cancel ${taskId} to ${url.host}: ${JSON.stringify(result)}`)
}

/** Polls `tasks/get` every `everyMs` until the task has ended; resolves with its status. */
async function ended (url: URL, agent: http.Agent, taskId: string, everyMs = 1, timeoutMs = TIMEOUT_MS): Promise<string> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    const { status } = await rpc(url, agent, 'tasks/get', { taskId })
    if (TERMINAL.includes(status)) return status
    if (performance.now() > deadline) throw new Error(`task ${taskId} still ${String(status)} after ${timeoutMs} ms`)
    await new Promise(resolve => setTimeout(resolve, everyMs))
  }
}

function agent (): http.Agent {
  return new http.Agent({ keepAlive: true, maxSockets: 1 })
}

// ---------------------------------------------------------------- the nodes

/** servers/task-node.ts in a process of its own, with the IPC channel it reports over. */
class TaskNodeProcess {
  readonly url: URL
  readonly origin: string
  readonly pid: number
  readonly label: string
  readonly #child: ChildProcess
  readonly #waiters = new Map<string, (message: TaskNodeMessage) => void>()
  /** `aborted` reports received, and those whose source was not `task`. */
  aborts = 0
  foreignAborts: string[] = []
  /** Add to the node's epoch instants to express them on this process's clock. */
  offsetMs = 0
  /** Round trip of the ping the offset came from: the offset is exact to within half of it. */
  offsetRttMs = Infinity
  #seq = 0

  private constructor (child: ChildProcess, port: number, label: string) {
    this.#child = child
    this.pid = child.pid!
    this.label = label
    this.origin = `http://127.0.0.1:${port}`
    this.url = new URL('/mcp', this.origin)
    child.on('message', (message: TaskNodeMessage) => {
      if (message.type === 'aborted') {
        this.aborts++
        if (message.source !== 'task') this.foreignAborts.push(`${message.tag}: ${message.source}`)
      }
      const key = message.type === 'aborted' ? `aborted:${message.tag}` : `${message.type}:${message.seq}`
      const waiter = this.#waiters.get(key)
      if (waiter !== undefined) {
        this.#waiters.delete(key)
        waiter(message)
      }
    })
  }

  static async start (label: string, env: Record<string, string>, nodeArgs: readonly string[]): Promise<TaskNodeProcess> {
    const { child, port } = await spawnServer(new URL('./servers/task-node.ts', import.meta.url), env, nodeArgs, `task node ${label}`)
    return new TaskNodeProcess(child, port, label)
  }

  /** Resolves with the node's `aborted` report of `tag` (register before causing it). */
  aborted (tag: string): Promise<Extract<TaskNodeMessage, { type: 'aborted' }>> {
    return new Promise(resolve => { this.#waiters.set(`aborted:${tag}`, message => { resolve(message as Extract<TaskNodeMessage, { type: 'aborted' }>) }) })
  }

  forget (tag: string): void {
    this.#waiters.delete(`aborted:${tag}`)
  }

  async #ask<T extends 'clock' | 'memory'> (type: T): Promise<Extract<TaskNodeMessage, { type: T }>> {
    const seq = ++this.#seq
    const reply = new Promise<TaskNodeMessage>(resolve => { this.#waiters.set(`${type}:${seq}`, resolve) })
    this.#child.send({ type, seq } satisfies TaskNodeCommand)
    return await withTimeout(reply, 30_000, `${type} from node ${this.label}`) as Extract<TaskNodeMessage, { type: T }>
  }

  /** Estimates the clock offset over IPC (see `estimateClockOffset`). */
  async syncClock (pings = 50): Promise<void> {
    const { offsetMs, rttMs } = await estimateClockOffset(async () => (await this.#ask('clock')).at, pings)
    this.offsetMs = offsetMs
    this.offsetRttMs = rttMs
  }

  /** The node's live `hold` handlers and its memory after full collections. */
  async memory (): Promise<Extract<TaskNodeMessage, { type: 'memory' }>> {
    return await this.#ask('memory')
  }

  async stop (): Promise<void> {
    await stopChild(this.#child)
  }
}

/** CPU seconds (user + system, all threads) a process has used so far; undefined without /proc or once it has gone. */
function cpuSeconds (pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / 100 // USER_HZ is 100 on Linux
  } catch {
    return undefined
  }
}

/** Cores each of `pids` used (by CPU time) between `start()` and `stop()`, and the rest of the machine. */
function watchCpu (pids: Record<string, number | undefined>): { stop: () => { seconds: number, cores: Record<string, number | undefined>, other: number | undefined } } {
  const started = performance.now()
  const before = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid)]))
  const load = watchLoad(Object.values(pids).filter((pid): pid is number => pid !== undefined && pid !== process.pid))
  return {
    stop () {
      const seconds = (performance.now() - started) / 1000
      const cores: Record<string, number | undefined> = {}
      for (const [name, pid] of Object.entries(pids)) {
        const [a, b] = [before[name], cpuSeconds(pid)]
        cores[name] = a === undefined || b === undefined ? undefined : (b - a) / seconds
      }
      return { seconds, cores, other: load.stop().otherCores }
    }
  }
}

const cores = (value: number | undefined): string => value === undefined ? 'n/a' : value.toFixed(2)

// ---------------------------------------------------------------- 1. cancel latency

type Route = 'cross' | 'local'
interface CancelSample { route: Route, abortMs: number, ackMs: number }

interface CancelAgents { create: http.Agent, cancelA: http.Agent, cancelB: http.Agent, check: http.Agent }

/**
 * One task on A cancelled through `route`: `cross` POSTs `tasks/cancel` to B, `local` to A. Measured from
 * just before the POST is written to A's abort instant (on this process's clock), and to the POST's answer.
 */
async function cancelOnce (a: TaskNodeProcess, b: TaskNodeProcess, agents: CancelAgents, route: Route, tag: string, timeoutMs = TIMEOUT_MS): Promise<CancelSample> {
  const taskId = await createTask(a.url, agents.create, 'hold', { tag })
  const [target, cancelAgent] = route === 'cross' ? [b, agents.cancelB] : [a, agents.cancelA]
  const aborted = a.aborted(tag)
  let ackAt = NaN
  const sentAt = epochNow()
  const ack = cancelTask(target.url, cancelAgent, taskId).then(() => { ackAt = epochNow() })
  ack.catch(() => {}) // awaited below
  let message: Awaited<typeof aborted>
  try {
    message = await withTimeout(aborted, timeoutMs, `${tag}: abort on A after tasks/cancel to ${target.label}`)
  } catch (error) {
    // Not (yet) delivered: cancel it on A itself, so that no task is left running, and report the failure.
    await ack.catch(() => {})
    await cancelTask(a.url, agents.cancelA, taskId)
    await withTimeout(aborted, TIMEOUT_MS, `${tag}: abort after a cancel on A itself`)
    throw error
  }
  await ack
  if (message.source !== 'task') throw new Error(`${tag}: aborted with source ${message.source}, expected task`)
  const status = await ended(target.url, agents.check, taskId)
  if (status !== 'cancelled') throw new Error(`${tag}: the task reads ${status} on ${target.label}, expected cancelled`)
  return { route, abortMs: message.at + a.offsetMs - sentAt, ackMs: ackAt - sentAt }
}

async function runCancel (config: BenchConfig, redis: RedisServer, count: number): Promise<boolean> {
  const env = { BENCH_REDIS_URL: redis.url }
  const [a, b] = await Promise.all([TaskNodeProcess.start('A', env, config.nodeArgs), TaskNodeProcess.start('B', env, config.nodeArgs)])
  const agents: CancelAgents = { create: agent(), cancelA: agent(), cancelB: agent(), check: agent() }
  try {
    await a.syncClock()
    console.log(`\ncancel: nodes A ${a.url.host} (pid ${a.pid}) and B ${b.url.host} (pid ${b.pid}) in processes of their own, ` +
      `clock offset A − bench ${(-a.offsetMs).toFixed(3)} ms ±${(a.offsetRttMs / 2).toFixed(3)} ms`)
    // Both nodes subscribe to Redis asynchronously: retry the first cross-node cancel until it goes through.
    const deadline = Date.now() + 15_000
    for (let attempt = 0; ; attempt++) {
      try {
        await cancelOnce(a, b, agents, 'cross', `ready-${attempt}`, 300)
        break
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`cross-node tasks/cancel never reached node A: ${String(error)}`)
      }
    }
    for (let i = 0; i < WARM_UP_CANCELS; i++) for (const route of ['cross', 'local'] as const) await cancelOnce(a, b, agents, route, `warm-${route}-${i}`)
    if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`cancel: the machine did not go quiet within ${config.quiet} s; measuring anyway`)
    const cpu = watchCpu({ a: a.pid, b: b.pid, redis: redis.pid })
    const samples: CancelSample[] = []
    for (let i = 0; i < count; i++) {
      // The two routes alternate, each first in every other pair.
      for (const route of i % 2 === 0 ? ['cross', 'local'] as const : ['local', 'cross'] as const) samples.push(await cancelOnce(a, b, agents, route, `${route}-${i}`))
    }
    const usage = cpu.stop()
    const offsetBefore = a.offsetMs
    await a.syncClock(20)
    if (a.foreignAborts.length > 0) throw new Error(`aborts not caused by tasks/cancel: ${a.foreignAborts.slice(0, 5).join('; ')}`)

    const of = (route: Route, pick: (s: CancelSample) => number): LatencySummary & { p95: number } => {
      const values = samples.filter(s => s.route === route).map(pick)
      return { ...summarize(values), p95: percentile([...values].sort((x, y) => x - y), 95) }
    }
    const cells = (s: LatencySummary & { p95: number }): string[] => [s.min, s.p50, s.p90, s.p95, s.p99, s.max, s.mean].map(ms)
    const cross = of('cross', s => s.abortMs)
    const error = `±${(a.offsetRttMs / 2).toFixed(3)} ms`
    console.log(`\n## tasks/cancel → ctx.signal abort of the task's handler on node A (${count} cancels per route, alternating, sequential, one redis-server; ${usage.seconds.toFixed(1)} s)\n`)
    printTable(['interval', 'min', 'p50', 'p90', 'p95', 'p99', 'max', 'mean'], [
      [`**cross-node**: tasks/cancel POST to node B → abort on node A (clocks aligned ${error})`, ...cells(cross)],
      [`same node: tasks/cancel POST to node A → abort on node A (clocks aligned ${error})`, ...cells(of('local', s => s.abortMs))],
      ['tasks/cancel POST to node B → B\'s answer (the acknowledgement)', ...cells(of('cross', s => s.ackMs))],
      ['tasks/cancel POST to node A → A\'s answer', ...cells(of('local', s => s.ackMs))]
    ])
    console.log(`\ncross-node p99 ${ms(cross.p99)} (goal ≤ ${GOAL_CROSS_NODE_P99_MS} ms): ${cross.p99 <= GOAL_CROSS_NODE_P99_MS ? 'MET' : 'NOT MET'}` +
      `; clock offset moved ${(a.offsetMs - offsetBefore).toFixed(3)} ms over the run (re-measured ±${(a.offsetRttMs / 2).toFixed(3)} ms)`)
    console.log(`CPU during the run, in cores: node A ${cores(usage.cores.a)}, node B ${cores(usage.cores.b)}, redis-server ${cores(usage.cores.redis)}, ` +
      `other processes ${cores(usage.other)} (this process is the client)`)
    if (usage.other !== undefined && usage.other > 0.1) console.error('WARNING: other processes used > 0.1 core during the run; tails are suspect, rerun on a quiet machine.')
    return true
  } finally {
    for (const each of Object.values(agents)) each.destroy()
    await Promise.all([a.stop(), b.stop()])
  }
}

// ---------------------------------------------------------------- 2. throughput

type Store = 'memory' | 'redis'
type Kind = 'lifecycle' | 'get'
interface Scenario { kind: Kind, store: Store }
const THROUGHPUT_SCENARIOS: readonly Scenario[] = [
  { kind: 'lifecycle', store: 'memory' }, { kind: 'lifecycle', store: 'redis' },
  { kind: 'get', store: 'memory' }, { kind: 'get', store: 'redis' }
]
const scenarioName = (s: Scenario): string => `${s.kind}-${s.store}`

interface LifecycleRound {
  seconds: number
  tasks: number
  gets: number
  /** tools/call → CreateTaskResult, ms. */
  create: LatencySummary
  /** tools/call written → the tasks/get that read `completed` answered, ms. */
  complete: LatencySummary
  cpu: ReturnType<ReturnType<typeof watchCpu>['stop']>
}

/** `clients` loops of create → tasks/get until completed, for `seconds`; every answer checked. */
async function lifecycleLoops (node: TaskNodeProcess, agents: readonly http.Agent[], seconds: number): Promise<Omit<LifecycleRound, 'cpu'>> {
  const started = performance.now()
  const deadline = started + seconds * 1000
  let tasks = 0
  let gets = 0
  const create: number[] = []
  const complete: number[] = []
  await Promise.all(agents.map(async each => {
    while (performance.now() < deadline) {
      const n = ++lastId
      const t0 = performance.now()
      const taskId = await createTask(node.url, each, 'quick', { n })
      const t1 = performance.now()
      for (;;) {
        const result = await rpc(node.url, each, 'tasks/get', { taskId })
        gets++
        if (result.status === 'completed') {
          if (!isDeepStrictEqual(result.result, { content: [{ type: 'text', text: `done ${n}` }], resultType: 'complete', _meta: SERVER_META })) {
            throw new Error(`task ${taskId}: completed with ${JSON.stringify(result.result)}`)
          }
          break
        }
        if (result.status !== 'working') throw new Error(`task ${taskId}: ${JSON.stringify(result)}`)
      }
      tasks++
      create.push(t1 - t0)
      complete.push(performance.now() - t0)
    }
  }))
  return { seconds: (performance.now() - started) / 1000, tasks, gets, create: summarize(create), complete: summarize(complete) }
}

interface ThroughputNode { store: Store, node: TaskNodeProcess, agents: http.Agent[], get: Exchange, getBody: string }

async function startThroughputNode (store: Store, config: BenchConfig, redis: RedisServer | undefined): Promise<ThroughputNode> {
  const node = await TaskNodeProcess.start(store, store === 'redis' ? { BENCH_REDIS_URL: redis!.url } : {}, config.nodeArgs)
  try {
    const agents = Array.from({ length: config.connections }, agent)
    // The task every `get` round reads: a completed `quick` task, its answer checked once here, then byte-compared.
    const n = ++lastId
    const taskId = await createTask(node.url, agents[0]!, 'quick', { n })
    if (await ended(node.url, agents[0]!, taskId) !== 'completed') throw new Error(`${store}: the task to read did not complete`)
    const get = modernExchange('tasks/get', { taskId }, 1)
    const answer = JSON.parse((await post(node.url, agents[0]!, get)).body)
    const expected = {
      jsonrpc: '2.0',
      id: 1,
      result: { ...answer.result, taskId, status: 'completed', result: { content: [{ type: 'text', text: `done ${n}` }], resultType: 'complete', _meta: SERVER_META }, resultType: 'complete', _meta: SERVER_META }
    }
    const getBody = await checkJson(node.origin, get, expected)
    console.log(`${store}: servers/task-node.ts${store === 'redis' ? ` with redis ${redis!.url}` : ' (in-memory task store)'}, pid ${node.pid}, ` +
      `tasks/get answer checked (${getBody.length} bytes)`)
    return { store, node, agents, get, getBody }
  } catch (error) {
    await node.stop()
    throw error
  }
}

type ThroughputRound = { kind: 'lifecycle', round: LifecycleRound } | { kind: 'get', round: Round, redisCores: number | undefined }

async function throughputRound (scenario: Scenario, target: ThroughputNode, config: BenchConfig, redisServerPid: number | undefined): Promise<ThroughputRound> {
  if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`${scenarioName(scenario)}: the machine did not go quiet within ${config.quiet} s; measuring anyway`)
  const redisPidOf = target.store === 'redis' ? redisServerPid : undefined
  if (scenario.kind === 'lifecycle') {
    if (config.warmup > 0) await lifecycleLoops(target.node, target.agents, config.warmup)
    const cpu = watchCpu({ server: target.node.pid, redis: redisPidOf, bench: process.pid })
    const round = await lifecycleLoops(target.node, target.agents, config.duration)
    return { kind: 'lifecycle', round: { ...round, cpu: cpu.stop() } }
  }
  // The warm-up as a round of its own (discarded), so that redis-server's CPU is read over the measured round alone.
  if (config.warmup > 0) await measure(target.node.origin, target.node.pid, target.get, { ...config, duration: config.warmup, warmup: 0 }, target.getBody)
  const before = cpuSeconds(redisPidOf)
  const started = performance.now()
  const round = await measure(target.node.origin, target.node.pid, target.get, { ...config, warmup: 0 }, target.getBody)
  const after = cpuSeconds(redisPidOf)
  const redisCores = before === undefined || after === undefined ? undefined : (after - before) / ((performance.now() - started) / 1000)
  return { kind: 'get', round, redisCores }
}

/** The round with the median value of `by` (the lower middle one for an even count). */
function medianRound<T> (rounds: readonly T[], by: (round: T) => number): T {
  return [...rounds].sort((x, y) => by(x) - by(y))[Math.floor((rounds.length - 1) / 2)]!
}

async function runThroughput (config: BenchConfig, redis: RedisServer): Promise<boolean> {
  const nodes: Record<Store, ThroughputNode | undefined> = { memory: undefined, redis: undefined }
  try {
    console.log('')
    nodes.memory = await startThroughputNode('memory', config, undefined)
    nodes.redis = await startThroughputNode('redis', config, redis)
    const redisServerPid = redis.pid
    const rounds = new Map<string, ThroughputRound[]>(THROUGHPUT_SCENARIOS.map(s => [scenarioName(s), []]))
    for (let pass = 0; pass < config.rounds; pass++) {
      for (const scenario of THROUGHPUT_SCENARIOS) {
        console.log(`${scenarioName(scenario)}${config.rounds > 1 ? ` (pass ${pass + 1})` : ''}: warm-up ${config.warmup} s, measuring ${config.duration} s…`)
        rounds.get(scenarioName(scenario))!.push(await throughputRound(scenario, nodes[scenario.store]!, config, redisServerPid))
      }
    }

    console.log(`\n## tasks on one node: ${config.connections} clients, ${config.duration} s per round${config.rounds > 1 ? `, median of ${config.rounds} rounds by tasks/s` : ''}\n`)
    console.log('lifecycle: each client in a loop: tools/call quick (a task that ends once started) → tasks/get at once, repeated until it reads completed\n')
    const lifecycle = THROUGHPUT_SCENARIOS.filter(s => s.kind === 'lifecycle').map(s => {
      const all = rounds.get(scenarioName(s))!.map(r => (r as Extract<ThroughputRound, { kind: 'lifecycle' }>).round)
      return { s, all, r: medianRound(all, r => r.tasks / r.seconds) }
    })
    printTable(['store', 'tasks/s', 'tasks/s, all rounds', 'tasks/get/s', 'tasks/get per task', 'create p50 / p99', 'create → completed read p50 / p99', 'server CPU/task', 'CPU server/redis/client/other'],
      lifecycle.map(({ s, all, r }) => [
        s.store,
        fmt.int(r.tasks / r.seconds),
        all.map(x => fmt.int(x.tasks / x.seconds)).join(', '),
        fmt.int(r.gets / r.seconds),
        (r.gets / r.tasks).toFixed(2),
        `${ms(r.create.p50)} / ${ms(r.create.p99)}`,
        `${ms(r.complete.p50)} / ${ms(r.complete.p99)}`,
        r.cpu.cores.server === undefined ? 'n/a' : `${fmt.int(r.cpu.cores.server * r.cpu.seconds * 1e6 / r.tasks)} µs`,
        [r.cpu.cores.server, s.store === 'redis' ? r.cpu.cores.redis : undefined, r.cpu.cores.bench, r.cpu.other].map(cores).join(' / ')
      ]))

    console.log('\nget: autocannon, tasks/get of one completed task (its result inlined), every answer byte-compared\n')
    const get = THROUGHPUT_SCENARIOS.filter(s => s.kind === 'get').map(s => {
      const all = rounds.get(scenarioName(s))! as Array<Extract<ThroughputRound, { kind: 'get' }>>
      return { s, all, r: medianRound(all, r => r.round.reqPerSec) }
    })
    printTable(['store', 'tasks/get/s', 'tasks/get/s, all rounds', 'p50', 'p99', 'max', 'requests', 'errors+timeouts+non2xx+mismatches', 'server CPU/req', 'CPU server/redis/autocannon/other'],
      get.map(({ s, all, r }) => [
        s.store,
        fmt.int(r.round.reqPerSec),
        all.map(x => fmt.int(x.round.reqPerSec)).join(', '),
        fmt.ms(r.round.p50Ms),
        fmt.ms(r.round.p99Ms),
        fmt.ms(r.round.maxMs),
        fmt.int(r.round.total),
        String(failures(r.round)),
        r.round.serverCpuPerRequestUs === undefined ? 'n/a' : `${fmt.int(r.round.serverCpuPerRequestUs)} µs`,
        r.round.cpu === undefined ? 'n/a' : [r.round.cpu.server, s.store === 'redis' ? r.redisCores : undefined, r.round.cpu.bench, Math.max(0, r.round.cpu.other - (s.store === 'redis' ? r.redisCores ?? 0 : 0))].map(cores).join(' / ')
      ]))

    const noisy = [...lifecycle.flatMap(({ s, all }) => all.filter(r => (r.cpu.other ?? 0) > 0.1).map(() => scenarioName(s))),
      ...get.flatMap(({ s, all }) => all.filter(r => r.round.cpu !== undefined && r.round.cpu.other - (s.store === 'redis' ? r.redisCores ?? 0 : 0) > 0.1).map(() => scenarioName(s)))]
    if (noisy.length > 0) console.error(`\nWARNING: other processes used > 0.1 core during: ${[...new Set(noisy)].join(', ')}; rerun on a quiet machine.`)
    const failed = get.some(({ all }) => all.some(r => failures(r.round) > 0))
    if (failed) console.error('\nWARNING: errors, timeouts, non-2xx or mismatched bodies during a get round; those figures are not valid.')
    return !failed
  } finally {
    for (const node of Object.values(nodes)) {
      if (node === undefined) continue
      for (const each of node.agents) each.destroy()
      await node.node.stop()
    }
  }
}

// ---------------------------------------------------------------- 3. memory per live task

interface Snapshot { label: string, live: number, usage: NodeJS.MemoryUsage }

async function runMemory (config: BenchConfig, liveTasks: number): Promise<boolean> {
  const node = await TaskNodeProcess.start('memory', {}, [...config.nodeArgs, '--expose-gc'])
  const agents = Array.from({ length: MEMORY_CLIENTS }, agent)
  try {
    console.log(`\nmemory: servers/task-node.ts (in-memory task store), pid ${node.pid}, --expose-gc; ${MEMORY_CLIENTS} clients`)
    const taskIds: string[] = []
    /** Creates `count` hold tasks, `MEMORY_CLIENTS` at a time. */
    const create = async (count: number, prefix: string): Promise<string[]> => {
      const ids: string[] = []
      let next = 0
      await Promise.all(agents.map(async each => {
        while (next < count) {
          const i = next++
          ids.push(await createTask(node.url, each, 'hold', { tag: `${prefix}-${i}` }))
        }
      }))
      return ids
    }
    const cancelAll = async (ids: readonly string[]): Promise<void> => {
      let next = 0
      await Promise.all(agents.map(async each => {
        while (next < ids.length) await cancelTask(node.url, each, ids[next++]!)
      }))
    }
    const waitAborts = async (count: number): Promise<void> => {
      const deadline = performance.now() + 30_000
      while (node.aborts < count) {
        if (performance.now() > deadline) throw new Error(`only ${node.aborts} of ${count} tasks aborted`)
        await new Promise(resolve => setTimeout(resolve, 10))
      }
    }
    const snapshot = async (label: string, expectLive: number): Promise<Snapshot> => {
      const { live, gc, usage } = await node.memory()
      if (!gc) throw new Error('the node has no global.gc (--expose-gc missing)')
      if (live !== expectLive) throw new Error(`${label}: ${live} live tasks, expected ${expectLive}`)
      return { label, live, usage }
    }

    // Warm-up: the code paths run, the connections open, the store's tables grown once.
    const warm = await create(200, 'warm')
    await cancelAll(warm)
    await waitAborts(warm.length)
    const half = Math.floor(liveTasks / 2)
    const snapshots: Snapshot[] = [await snapshot('before (200 ended warm-up tasks kept)', 0)]
    const started = performance.now()
    taskIds.push(...await create(half, 'a'))
    snapshots.push(await snapshot(`${half} live`, half))
    taskIds.push(...await create(liveTasks - half, 'b'))
    snapshots.push(await snapshot(`${liveTasks} live`, liveTasks))
    const createdSeconds = (performance.now() - started) / 1000
    await cancelAll(taskIds)
    await waitAborts(warm.length + liveTasks)
    // The handlers have ended; their records are written cancelled a moment later: wait until the last one reads so.
    if (await ended(node.url, agents[0]!, taskIds[taskIds.length - 1]!) !== 'cancelled') throw new Error('the last task did not end cancelled')
    snapshots.push(await snapshot(`all ${liveTasks} cancelled (records kept taskTtlMs)`, 0))
    if (node.foreignAborts.length > 0) throw new Error(`aborts not caused by tasks/cancel: ${node.foreignAborts.slice(0, 5).join('; ')}`)

    const [base] = snapshots as [Snapshot]
    const kb = (bytes: number): string => `${fmt.int(bytes / 1024)} KiB`
    const perTask = (s: Snapshot, field: keyof NodeJS.MemoryUsage, n: number): string => n === 0 ? '—' : `${fmt.int((s.usage[field] - base.usage[field]) / n)} B`
    console.log(`\n## memory of live tasks on one node (in-memory store; heap after gc(); ${liveTasks} hold tasks created in ${createdSeconds.toFixed(1)} s)\n`)
    printTable(['state', 'heapUsed', 'external', 'rss', 'heapUsed Δ per task', 'external Δ per task', 'rss Δ per task'], snapshots.map((s, i) => {
      const n = i === 0 ? 0 : i === snapshots.length - 1 ? liveTasks : s.live
      return [s.label, kb(s.usage.heapUsed), kb(s.usage.external), kb(s.usage.rss), perTask(s, 'heapUsed', n), perTask(s, 'external', n), perTask(s, 'rss', n)]
    }))
    const [, halfway, full] = snapshots as [Snapshot, Snapshot, Snapshot]
    console.log(`\nsecond half alone: ${fmt.int((full.usage.heapUsed - halfway.usage.heapUsed) / (liveTasks - half))} B of heap per live task` +
      ' (the Δ rows are against "before"; the last row is what an ended task costs while its record is kept)')
    return true
  } finally {
    for (const each of agents) each.destroy()
    await node.stop()
  }
}

// ---------------------------------------------------------------- the benchmark

const PARTS = ['cancel', 'throughput', 'memory'] as const

const tasks: Benchmark = {
  description: 'tasks extension: cross-node tasks/cancel → abort latency through redis (goal p99 ≤ 10 ms), tasks created and polled per second (memory, redis), memory per live task',
  defaults: { duration: 5 },
  async run (config, args) {
    const unknown = args.filter(arg => !(PARTS as readonly string[]).includes(arg))
    if (unknown.length > 0) throw new Error(`unknown part(s) ${unknown.join(', ')}; known: ${PARTS.join(', ')}`)
    const parts = args.length > 0 ? args : PARTS
    const cancels = envCount('BENCH_CANCELS', 500)
    const liveTasks = envCount('BENCH_LIVE_TASKS', 2000)
    if (liveTasks < 2) throw new Error('BENCH_LIVE_TASKS must be at least 2')

    printEnvironment(config)
    const loadBefore = loadavg()[0]!
    const needsRedis = parts.includes('cancel') || parts.includes('throughput')
    const redis = needsRedis
      ? await RedisServer.start(undefined).catch((error: unknown) => {
        throw new Error(`tasks needs redis-server (apt-get install redis-server, or REDIS_SERVER=/path): ${String(error)}`)
      })
      : undefined
    let ok = true
    try {
      if (redis !== undefined) console.log(`redis-server ${await redis.version()} on 127.0.0.1:${redis.port} (no persistence)`)
      if (parts.includes('cancel')) ok = await runCancel(config, redis!, cancels) && ok
      if (parts.includes('throughput')) ok = await runThroughput(config, redis!) && ok
      if (parts.includes('memory')) ok = await runMemory(config, liveTasks) && ok
    } finally {
      await redis?.stop()
    }
    console.log(`\n1-min load average ${loadBefore.toFixed(2)} at the start, ${loadavg()[0]!.toFixed(2)} at the end (${cpus().length} CPUs)`)
    return ok
  }
}

export default tasks
