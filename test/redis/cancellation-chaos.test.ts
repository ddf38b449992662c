/**
 * Cancellation chaos (issue 19, item 1): a real redis-server, a latency-injecting TCP proxy in front of
 * it for each node, three plugin nodes (`a` and `b` plain, `c` with a short maxStreamLifetimeMs), and
 * some four hundred calls cancelled at moments drawn from a seeded PRNG, several at once:
 * - lifecycles: a task that asks right after `ctx.startTask()` (its first ask is written to the task
 *   store while the cancel lands), a task that holds (its gate sometimes opened in a race), a task
 *   answered through `tasks/update` racing its cancel, a legacy (2025-11-25) call that asks over SSE
 *   (sometimes answered, on its node or another), a plain long legacy call;
 * - sources: `tasks/cancel` on the owning node or another, `notifications/cancelled` on a separate POST
 *   to the same node or another, a disconnect (the POST's socket destroyed; a legacy stream's cancels
 *   once its short resume window passed), the lifetime bound (node
 *   `c`), and shutdown (a node closed mid-flight a few times per run, and replaced by a fresh one);
 * - links: per batch of calls, each proxy holds every chunk 0–5 ms, 20–80 ms or ~300 ms (jittered).
 *
 * Asserted: the process saw no unhandled rejection and no uncaught exception (either kills a node);
 * every answer is JSON-RPC with a status below 500 (Fastify's own 503 from a node that is closing
 * aside) or an ended stream, and none is an internal error; every call ends, every handler ends,
 * every task ends as its iteration allows (cancelled; failed with -32800 when the lifetime or a
 * shutdown ended it; completed when it was answered or let go first); at the end every node's tables
 * are empty (in flight, cancellation rows, pending asks, live tasks) and Redis holds no live task.
 *
 * The seed (CHAOS_SEED, else DEFAULT_SEED) fixes the plan: lifecycles, sources, nodes, moments, link
 * latencies, lifetimes, shutdowns. It is printed with the command that replays it. The interleaving is
 * the machine's: a replay runs the same plan, not the same schedule.
 *
 * Without redis-server the test is skipped, except under CI where that is a failure.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import type { FastifyRequest } from 'fastify'
import { Redis } from 'ioredis'
import { RequestCancelledError, type McpCancellationOptions } from '../../lib/index.js'
import { legacyCall, RawCall, rawPost, type CallEnd } from '../helpers/http.js'
import { cancelNotification, DEFAULT_HEADERS, META, modernHeaders, modernMeta, sseFrames, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { errorLines } from '../helpers/logs.js'
import { scrapeMetrics } from '../helpers/metrics.js'
import { cancellationEvents } from '../helpers/recorders.js'
import { channels, scanKeys } from '../helpers/redis.js'
import { RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import { startTaskNode, TaskTools, type TaskNode } from '../helpers/task-nodes.js'
import { WITH_TASKS, type RpcAnswer } from '../helpers/tasks.js'
import { TcpProxy, type Latency } from '../helpers/tcp-proxy.js'
import { waitFor, within } from '../helpers/wait.js'
import { seededRandom } from '../helpers/random.js'

const DEFAULT_SEED = 1_919_001
const SEED = seedFromEnvironment()
const REPLAY = `CHAOS_SEED=${SEED} npx tap test/redis/cancellation-chaos.test.ts`

const SECRET = 'cancellation-chaos-secret-0123456789abcdef'
const PREFIX = 'mcp:'
/** Every call speaks for a principal of its own (`x-user`): its scope, its quota, its Redis keys. */
const AUTH = { principal: (request: FastifyRequest) => request.headers['x-user'], required: false }
const CANCEL_TIMEOUT_MS = 250
/** A legacy stream whose socket is destroyed pauses for a resume this long, then its call is cancelled as a disconnect. */
const RESUME_WINDOW_MS = 300
/** Calls running at once. */
const CONCURRENCY = 6
const TERMINAL = ['completed', 'failed', 'cancelled']
const ANSWER = { action: 'accept', content: { ok: true } }

type Role = 'a' | 'b' | 'c'
type Lifecycle = 'task-ask' | 'task-hold' | 'task-update' | 'legacy-ask' | 'legacy-long'
type Source = 'cancel-home' | 'cancel-other' | 'notify-home' | 'notify-other' | 'disconnect' | 'lifetime' | 'shutdown'
type LinkName = 'fast' | 'medium' | 'slow'

/** Per-chunk latency of a proxy: uniform in [min, max] ms. */
const LINKS: Record<LinkName, { min: number, max: number }> = { fast: { min: 0, max: 5 }, medium: { min: 20, max: 80 }, slow: { min: 280, max: 320 } }
/** Batches of each link, and calls per batch (fewer where every store write takes ~600 ms). */
const BATCHES: Record<LinkName, { batches: number, calls: number }> = { fast: { batches: 8, calls: 36 }, medium: { batches: 5, calls: 18 }, slow: { batches: 2, calls: 8 } }
/** Calls per shutdown batch left running on the node that closes (no other source). */
const SHUTDOWN_VICTIMS = 3

const LIFECYCLES: Array<[Lifecycle, number]> = [['task-ask', 35], ['task-hold', 15], ['task-update', 20], ['legacy-ask', 15], ['legacy-long', 15]]
const TASK_SOURCES: Array<[Source, number]> = [['cancel-home', 35], ['cancel-other', 30], ['disconnect', 20], ['lifetime', 15]]
const LEGACY_SOURCES: Array<[Source, number]> = [['notify-home', 35], ['notify-other', 25], ['disconnect', 25], ['lifetime', 15]]
const HOMES: Array<[Role, number]> = [['a', 40], ['b', 30], ['c', 30]]

function seedFromEnvironment (): number {
  const text = process.env.CHAOS_SEED
  if (text === undefined || text === '') return DEFAULT_SEED
  const seed = Number(text)
  if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`CHAOS_SEED must be a non-negative integer, not ${JSON.stringify(text)}`)
  return seed
}

// ---------------------------------------------------------------------------------------------------
// The plan

function weighted<T> (random: () => number, choices: Array<[T, number]>): T {
  let draw = random() * choices.reduce((sum, [, weight]) => sum + weight, 0)
  for (const [choice, weight] of choices) {
    draw -= weight
    if (draw < 0) return choice
  }
  return choices[choices.length - 1]![0]
}

function shuffle<T> (random: () => number, items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[items[i], items[j]] = [items[j]!, items[i]!]
  }
  return items
}

/**
 * A moment after the create or the call: 0 a quarter of the time (the cancel then lands inside the first
 * store write), else up to three link round trips, across the task's and the ask's writes.
 */
function moment (random: () => number, link: LinkName): number {
  return random() < 0.25 ? 0 : Math.floor(random() * (3 * LINKS[link].max + 30))
}

/** One call of the run: what it is, on which node, cancelled how and when. */
interface Step {
  index: number
  batch: number
  lifecycle: Lifecycle
  source: Source
  home: Role
  /** When the source acts: ms after the create's answer (tasks/cancel) or after the call was sent. */
  delayMs: number
  /** A racing completion (tasks/update, the gate opened, the legacy ask answered), ms after the same point. */
  raceMs: number | undefined
  /** Where the racing answer goes. */
  raceTo: 'home' | 'other'
  /** The node's other plain node, for `cancel-other`, `notify-other` and answers sent elsewhere. */
  other: Role
  /** The longest per-chunk latency of the batch: the bound of every wait scales with it. */
  slowestMs: number
}

interface Batch {
  index: number
  link: LinkName
  links: Record<Role, LinkName>
  steps: Step[]
  shutdown: { role: Role, delayMs: number } | undefined
}

interface Plan {
  batches: Batch[]
  /** maxStreamLifetimeMs of each generation of node `c`. */
  lifetimes: number[]
}

function makePlan (seed: number): Plan {
  const random = seededRandom(seed)
  const links = shuffle(random, (Object.keys(BATCHES) as LinkName[]).flatMap(link => Array<LinkName>(BATCHES[link].batches).fill(link)))
  // Each role is shut down once (node c's replacement gets a lifetime of its own), in batches drawn at
  // random, one of them slow: there a task's first store write outlasts cancelTimeoutMs.
  const shutdownRoles = shuffle(random, ['a', 'b', 'c'] as Role[])
  const batchesOf = (slow: boolean): number[] => shuffle(random, links.flatMap((link, i) => (link === 'slow') === slow ? [i] : []))
  const shutdownBatches = [...batchesOf(true).slice(0, 1), ...batchesOf(false).slice(0, shutdownRoles.length - 1)]
  const lifetimes: number[] = []
  const lifetime = (): number => Math.round(15 * Math.pow(400 / 15, random()))
  lifetimes.push(lifetime())
  let index = 0
  const batches = links.map((link, b): Batch => {
    // Now and then one node's link is fast while the others' are not: asymmetric paths between nodes.
    const roleLinks = { a: link, b: link, c: link }
    for (const role of ['a', 'b', 'c'] as const) if (random() < 0.25) roleLinks[role] = 'fast'
    const shutdownRole = shutdownRoles[shutdownBatches.indexOf(b)]
    // In the slow batch the node closes while its victims' task creations are on the wire (their reply
    // needs at least 2 × 280 ms), so cancelTimeoutMs runs out before they are answered.
    const closesAt = link === 'slow' ? Math.floor(random() * LINKS.slow.min) : moment(random, link)
    const shutdown = shutdownRole === undefined ? undefined : { role: shutdownRole, delayMs: closesAt }
    if (shutdown !== undefined) roleLinks[shutdown.role] = link
    if (shutdown?.role === 'c') lifetimes.push(lifetime())
    const slowestMs = Math.max(...Object.values(roleLinks).map(name => LINKS[name].max))
    const steps: Step[] = []
    for (let i = 0; i < BATCHES[link].calls; i++) {
      const lifecycle = weighted(random, LIFECYCLES)
      const task = lifecycle.startsWith('task-')
      const source = shutdown !== undefined && i < SHUTDOWN_VICTIMS ? 'shutdown' : weighted(random, task ? TASK_SOURCES : LEGACY_SOURCES)
      const home = source === 'lifetime' ? 'c' : source === 'shutdown' ? shutdown!.role : weighted(random, HOMES)
      const delayMs = moment(random, link)
      const racing = lifecycle === 'task-update' || ((lifecycle === 'task-hold' || lifecycle === 'legacy-ask') && random() < 0.4)
      const raceMs = racing ? moment(random, link) : undefined
      const raceTo = random() < 0.5 ? 'home' : 'other'
      const other: Role = home === 'a' ? 'b' : home === 'b' ? 'a' : random() < 0.5 ? 'a' : 'b'
      steps.push({ index: index++, batch: b, lifecycle, source, home, delayMs, raceMs, raceTo, other, slowestMs })
    }
    return { index: b, link, links: roleLinks, steps, shutdown }
  })
  return { batches, lifetimes }
}

function describeStep (step: Step): string {
  const race = step.raceMs === undefined ? '' : `, racing an answer at ${step.raceMs} ms to ${step.raceTo}`
  return `#${step.index} (batch ${step.batch}) ${step.lifecycle} × ${step.source} on ${step.home}, at ${step.delayMs} ms${race}`
}

const pad = (index: number): string => String(index).padStart(4, '0')
const principalOf = (step: Step): string => `chaos-${pad(step.index)}`
/** The step a scope (or a Redis key naming one) belongs to. */
function stepIndexOf (scope: string): number | undefined {
  const match = /chaos-(\d{4})$/.exec(scope)
  return match === null ? undefined : Number(match[1])
}

// ---------------------------------------------------------------------------------------------------
// The nodes

interface Member {
  role: Role
  node: TaskNode
  /** Set before the node is closed: from then on its 503s and broken connections are expected. */
  closing: boolean
}

/** The nodes of the run: one current member per role, each behind its role's proxy, replaced after a shutdown. */
class Cluster {
  readonly all: Member[] = []
  readonly #current = new Map<Role, Member>()
  readonly #replacing = new Map<Role, Promise<Member>>()
  readonly #generations: Record<Role, number> = { a: 0, b: 0, c: 0 }
  readonly #t: Parameters<typeof startTaskNode>[0]
  readonly #tools: TaskTools
  readonly #proxies: Record<Role, TcpProxy>
  readonly #inspect: Redis
  readonly #lifetimes: number[]

  constructor (t: Parameters<typeof startTaskNode>[0], tools: TaskTools, proxies: Record<Role, TcpProxy>, inspect: Redis, lifetimes: number[]) {
    this.#t = t
    this.#tools = tools
    this.#proxies = proxies
    this.#inspect = inspect
    this.#lifetimes = [...lifetimes]
  }

  /** Starts the node of `role` and resolves once it listens on its task channel. */
  async start (role: Role): Promise<Member> {
    const known = new Set(await channels(this.#inspect, `${PREFIX}tasks:*`))
    const options: McpCancellationOptions = {
      redis: this.#proxies[role].url,
      secret: SECRET,
      auth: AUTH,
      cancelTimeoutMs: CANCEL_TIMEOUT_MS,
      maxTasksPerScope: 64,
      resumability: { windowMs: RESUME_WINDOW_MS }
    }
    if (role === 'c') options.maxStreamLifetimeMs = this.#lifetimes.shift()
    const node = await startTaskNode(this.#t, `${role}${++this.#generations[role]}`, this.#tools, options)
    const member: Member = { role, node, closing: false }
    const listening = await waitFor(async () => (await channels(this.#inspect, `${PREFIX}tasks:*`)).some(channel => !known.has(channel)), 10_000)
    if (!listening) throw new Error(`node ${node.name} did not subscribe to its task channel`)
    this.all.push(member)
    this.#current.set(role, member)
    return member
  }

  /** The live member of `role` (once its replacement listens, when it is being replaced). */
  async current (role: Role): Promise<Member> {
    return await (this.#replacing.get(role) ?? Promise.resolve(this.#current.get(role)!))
  }

  /** The member of `role`, or, while it closes, the other plain node: where a follow-up request goes. */
  async serving (role: Role): Promise<Member> {
    const member = this.#current.get(role)!
    if (!member.closing) return member
    return await this.current(role === 'a' ? 'b' : role === 'b' ? 'a' : 'a')
  }

  /** Closes the node of `role` with work in flight (graceful shutdown), then starts its replacement. */
  async shutdown (role: Role, violation: (message: string) => void): Promise<void> {
    const member = this.#current.get(role)!
    member.closing = true
    const replaced = (async () => {
      const closed = await within(member.node.app.close().then(() => 'closed'), 15_000, 'hung')
      if (closed === 'hung') violation(`shutdown: ${member.node.name}'s close() did not resolve within 15 s`)
      const left = { inFlight: member.node.app.mcpCancellation.inFlightRows, rows: member.node.app.mcpCancellation.rows }
      if (left.inFlight !== 0 || left.rows !== 0) violation(`shutdown: ${member.node.name} closed with ${JSON.stringify(left)}`)
      return await this.start(role)
    })()
    this.#replacing.set(role, replaced)
    try {
      await replaced
    } finally {
      this.#replacing.delete(role)
    }
  }

  live (): Member[] {
    return [...this.#current.values()]
  }
}

// ---------------------------------------------------------------------------------------------------
// Requests

/** What one step did: what its tasks may end as, and what it saw. */
interface StepRecord {
  step: Step
  home: Member | undefined
  /** Task ids the client learned (CreateTaskResult, or its scope's live set after a disconnect). */
  taskIds: Set<string>
  /** A completion was sent (tasks/update, the gate opened): the task may have completed first. */
  completionSent: boolean
  /** The node closed while the step ran: a shutdown may have failed its task. */
  hitByShutdown: boolean
  notes: string[]
}

const errorText = (error: unknown): string => error instanceof Error ? `${error.name}: ${error.message}` : String(error)

/** Every JSON-RPC message of a body: one JSON message, or the messages of an SSE stream. */
function messagesOf (end: CallEnd): JsonRpcMessage[] {
  if (String(end.headers?.['content-type'] ?? '').startsWith('text/event-stream')) {
    return sseFrames(end.text).filter(frame => frame.data !== '').map(frame => JSON.parse(frame.data) as JsonRpcMessage)
  }
  return end.text === '' ? [] : [JSON.parse(end.text) as JsonRpcMessage]
}

/** A modern (2026-07-28) `tools/call` declaring the tasks extension, over a connection of its own (so it can be cut). */
function taskCall (url: URL, id: number, name: string, args: Record<string, unknown>, headers: Record<string, string>): RawCall {
  const body = { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, _meta: modernMeta({ [META.clientCapabilities]: WITH_TASKS }) } }
  const sent: Record<string, string> = { ...headers }
  for (const [key, value] of Object.entries({ ...DEFAULT_HEADERS, ...modernHeaders('tools/call', name) })) if (value !== undefined) sent[key] = value
  return new RawCall(url, body, sent)
}

t.comment(`cancellation chaos: seed ${SEED}; replay with: ${REPLAY}`)

const skip = redisSkipReason(t)

t.test(`cancellation at random moments across task and ask lifecycles (seed ${SEED})`, { skip }, async t => {
  const startedAt = Date.now()
  const plan = makePlan(SEED)
  const steps = plan.batches.flatMap(batch => batch.steps)

  // What would kill a node's process. With a listener installed Node does not exit: the test says what it was.
  const events = cancellationEvents(t)
  const crashes: string[] = []
  const crashed = (kind: string) => (reason: unknown): void => {
    if (!(reason instanceof RequestCancelledError)) {
      crashes.push(`${kind}: ${errorText(reason)}${reason instanceof Error ? ` — ${reason.stack ?? ''}` : ''}`)
      return
    }
    // The rejection is reported once the microtasks of the cancellation have run: it comes from one of
    // the cancellations of its source published in the last millisecond (a lifetime sweep cancels several).
    const last = events.findLast(event => event.source === reason.source)
    const suspects = events.filter(event => event.source === reason.source && last !== undefined && last.at - event.at <= 1)
      .map(event => stepIndexOf(event.scope)).filter(index => index !== undefined).map(index => describeStep(steps[index]!))
    const stack = (reason.stack ?? '').split('\n').slice(1, 4).map(line => line.trim()).join(' < ')
    crashes.push(`${kind}: RequestCancelledError (source "${reason.source}"): ${reason.message}; cancelled: ${suspects.join(' | ') || 'unknown'}; ${stack}`)
  }
  const onRejection = crashed('unhandledRejection')
  const onException = crashed('uncaughtException')
  process.on('unhandledRejection', onRejection)
  process.on('uncaughtException', onException)
  t.teardown(() => {
    process.off('unhandledRejection', onRejection)
    process.off('uncaughtException', onException)
  })

  const redis = await RedisServer.start(t)
  const inspect = new Redis(redis.url, { maxRetriesPerRequest: 1 })
  inspect.on('error', () => {})
  t.teardown(() => { inspect.disconnect() })
  const jitter = seededRandom(SEED ^ 0x9E3779B9)
  const latency = (link: LinkName): Latency => () => LINKS[link].min + jitter() * (LINKS[link].max - LINKS[link].min)
  const proxies = {} as Record<Role, TcpProxy>
  for (const role of ['a', 'b', 'c'] as const) proxies[role] = await TcpProxy.start(t, redis.port, 0)
  const tools = new TaskTools()
  const cluster = new Cluster(t, tools, proxies, inspect, plan.lifetimes)
  for (const role of ['a', 'b', 'c'] as const) await cluster.start(role)

  const violations: string[] = []
  const records: StepRecord[] = []
  const statuses: Record<string, number> = {}

  /** Checks one HTTP answer: JSON-RPC, below 500 (a closing node's 503 aside), and no internal error. */
  const checkAnswer = (record: StepRecord, what: string, member: Member, status: number | undefined, messages: () => JsonRpcMessage[]): JsonRpcMessage[] => {
    statuses[String(status)] = (statuses[String(status)] ?? 0) + 1
    if (status === 503 && member.closing) return []
    if (status === undefined || status >= 500) {
      violations.push(`${describeStep(record.step)}: ${what} on ${member.node.name} answered HTTP ${String(status)}`)
      return []
    }
    let parsed: JsonRpcMessage[]
    try {
      parsed = messages()
    } catch (error) {
      violations.push(`${describeStep(record.step)}: ${what} on ${member.node.name} answered HTTP ${status} with a body that is not JSON-RPC (${errorText(error)})`)
      return []
    }
    for (const message of parsed) {
      if (message.jsonrpc !== '2.0' || message.error?.code === -32603) {
        violations.push(`${describeStep(record.step)}: ${what} on ${member.node.name} answered HTTP ${status} ${JSON.stringify(message).slice(0, 300)}`)
      }
    }
    return parsed
  }

  /** A tasks/* request over fetch, checked; undefined when the node closed under it. */
  const rpc = async (record: StepRecord, what: string, member: Member, send: (node: TaskNode) => Promise<RpcAnswer>): Promise<RpcAnswer | undefined> => {
    try {
      const answer = await send(member.node)
      checkAnswer(record, what, member, answer.status, () => [answer.body])
      return answer
    } catch (error) {
      if (!member.closing) violations.push(`${describeStep(record.step)}: ${what} on ${member.node.name} got no answer (${errorText(error)})`)
      return undefined
    }
  }

  /** A raw POST (notification, answer to an ask), checked. */
  const post = async (record: StepRecord, what: string, member: Member, body: unknown): Promise<void> => {
    try {
      const response = await rawPost(member.node.url, body, { 'x-user': principalOf(record.step) })
      checkAnswer(record, what, member, response.status, () => response.text === '' ? [] : [JSON.parse(response.text) as JsonRpcMessage])
    } catch (error) {
      if (!member.closing) violations.push(`${describeStep(record.step)}: ${what} on ${member.node.name} got no answer (${errorText(error)})`)
    }
  }

  const boundOf = (step: Step): number => 3000 + 15 * step.slowestMs
  const options = (step: Step): { headers: Record<string, string> } => ({ headers: { 'x-user': principalOf(step) } })
  const after = async (ms: number, act: () => Promise<unknown> | unknown): Promise<void> => {
    await sleep(ms)
    await act()
  }

  /** Waits for the handler tagged `tag` to end; a handler that never started (the call was cut first) is fine. */
  const handlerEnds = async (record: StepRecord, tag: string, appearMs: number): Promise<void> => {
    if (!await waitFor(() => tools.run(tag) !== undefined, appearMs, 5)) return
    if (!await waitFor(() => tools.run(tag)?.endedAt !== undefined, boundOf(record.step))) {
      violations.push(`${describeStep(record.step)}: its handler never ended (${JSON.stringify(tools.run(tag))})`)
    }
  }

  /** Polls tasks/get on a serving plain node until the task has ended; a task still live after the bound is a violation. */
  const taskEnds = async (record: StepRecord, taskId: string): Promise<void> => {
    const deadline = Date.now() + boundOf(record.step)
    let last: unknown
    for (;;) {
      const reader = await cluster.serving(record.step.other)
      const answer = await rpc(record, 'tasks/get', reader, node => node.client.get(taskId, options(record.step)))
      last = answer?.body.result?.status ?? answer?.body.error
      if (TERMINAL.includes(String(last))) return
      if (Date.now() >= deadline) {
        violations.push(`${describeStep(record.step)}: task ${taskId} still ${JSON.stringify(last)} after ${boundOf(record.step)} ms`)
        return
      }
      await sleep(10 + record.step.slowestMs)
    }
  }

  const cancelTask = async (record: StepRecord, taskId: string, role: Role): Promise<void> => {
    const member = await cluster.serving(role)
    await rpc(record, 'tasks/cancel', member, node => node.client.cancel(taskId, options(record.step)))
  }

  async function taskStep (record: StepRecord): Promise<void> {
    const { step } = record
    const tag = principalOf(step)
    const home = record.home = await cluster.current(step.home)
    const call = taskCall(home.node.url, step.index, step.lifecycle === 'task-hold' ? 'hold' : 'ask', { tag }, options(step).headers)
    let cut = false
    const disconnect = step.source === 'disconnect'
      ? setTimeout(() => { cut = true; call.destroy() }, step.delayMs)
      : undefined
    const end = await within(call.done, boundOf(step), undefined)
    clearTimeout(disconnect)
    let taskId: string | undefined
    if (end === undefined) {
      violations.push(`${describeStep(step)}: tools/call on ${home.node.name} was never answered`)
      call.destroy()
    } else if (end.complete) {
      const [answer] = checkAnswer(record, 'tools/call', home, end.status, () => messagesOf(end))
      if (answer?.result?.resultType === 'task' && typeof answer.result.taskId === 'string') taskId = answer.result.taskId
    } else if (!cut && !home.closing) {
      violations.push(`${describeStep(step)}: tools/call on ${home.node.name} broke off (HTTP ${String(end.status)}, ${JSON.stringify(end.text.slice(0, 200))})`)
    }

    if (taskId === undefined) {
      // No CreateTaskResult reached the client. When the server sent one as the client left, the task runs
      // on (leaving is no cancellation once the call is a task): its scope's live set in Redis names it.
      await waitFor(() => { const run = tools.run(tag); return run !== undefined && (run.afterStart || run.endedAt !== undefined) }, 1000 + 4 * step.slowestMs, 5)
      const run = tools.run(tag)
      if (run?.afterStart === true && run.endedAt === undefined && step.source !== 'shutdown' && !home.closing) {
        for (const key of await scanKeys(inspect, `${PREFIX}task-live:*${tag}`)) {
          for (const orphan of await inspect.smembers(key)) {
            record.taskIds.add(orphan)
            record.notes.push('created as the client left')
            await cancelTask(record, orphan, step.other)
          }
        }
      }
    } else {
      record.taskIds.add(taskId)
      const acts: Array<Promise<void>> = []
      if (step.source === 'cancel-home' || step.source === 'cancel-other') {
        acts.push(after(step.delayMs, () => cancelTask(record, taskId, step.source === 'cancel-home' ? step.home : step.other)))
      } else if (step.source === 'disconnect') {
        // The disconnect came after the CreateTaskResult: it is no cancellation, the client cancels the task.
        record.notes.push('disconnected after the CreateTaskResult')
        acts.push(cancelTask(record, taskId, step.home))
      }
      if (step.raceMs !== undefined) {
        acts.push(after(step.raceMs, async () => {
          record.completionSent = true
          if (step.lifecycle === 'task-hold') tools.open(tag)
          else {
            const member = await cluster.serving(step.raceTo === 'home' ? step.home : step.other)
            await rpc(record, 'tasks/update', member, node => node.client.update(taskId, { confirm: ANSWER }, options(step)))
          }
        }))
      }
      await Promise.all(acts)
    }
    for (const id of record.taskIds) await taskEnds(record, id)
    await handlerEnds(record, tag, 1000 + 4 * step.slowestMs)
    record.hitByShutdown = home.closing
  }

  async function legacyStep (record: StepRecord): Promise<void> {
    const { step } = record
    const tag = principalOf(step)
    const home = record.home = await cluster.current(step.home)
    const call = legacyCall(home.node.url, step.index, step.lifecycle === 'legacy-ask' ? 'ask' : 'hold', { tag }, options(step))
    const notify = async (): Promise<void> => {
      const member = await cluster.serving(step.source === 'notify-home' ? step.home : step.other)
      await post(record, 'notifications/cancelled', member, cancelNotification(step.index, 'chaos'))
    }
    const acts: Array<Promise<void>> = []
    let inFlightAtNotify = false
    if (step.source === 'notify-home' || step.source === 'notify-other') {
      acts.push(after(step.delayMs, async () => {
        inFlightAtNotify = tools.run(tag) !== undefined
        await notify()
      }))
    } else if (step.source === 'disconnect') {
      acts.push(after(step.delayMs, () => { call.destroy() }))
    }
    if (step.raceMs !== undefined) {
      acts.push((async () => {
        const asked = (): JsonRpcMessage | undefined => {
          try {
            return call.messages().find(message => message.method === 'elicitation/create' && 'id' in message)
          } catch {
            return undefined
          }
        }
        if (!await waitFor(() => asked() !== undefined || call.destroyedAt !== undefined, boundOf(step), 5)) return
        const request = asked()
        if (request === undefined) return
        await sleep(step.raceMs!)
        const member = await cluster.serving(step.raceTo === 'home' ? step.home : step.other)
        await post(record, 'the answer to elicitation/create', member, { jsonrpc: '2.0', id: request.id, result: ANSWER })
      })())
    }
    await Promise.all(acts)
    // A notification sent before the handler started finds nothing in flight (nothing to cancel yet): the client sends it again.
    let end = await within(call.done, inFlightAtNotify ? boundOf(step) : 300 + 8 * step.slowestMs, undefined)
    for (let again = 0; end === undefined && !inFlightAtNotify && (step.source === 'notify-home' || step.source === 'notify-other') && again < 5; again++) {
      record.notes.push('notified again')
      inFlightAtNotify = tools.run(tag) !== undefined
      await notify()
      end = await within(call.done, inFlightAtNotify ? boundOf(step) : 300 + 8 * step.slowestMs, undefined)
    }
    end ??= await within(call.done, boundOf(step), undefined)
    if (end === undefined) {
      violations.push(`${describeStep(step)}: the legacy call's stream on ${home.node.name} never ended (${JSON.stringify(call.text().slice(-300))})`)
      call.destroy()
    } else if (end.status !== undefined) {
      checkAnswer(record, 'tools/call', home, end.status, () => messagesOf(end))
    }
    await handlerEnds(record, tag, 1000 + 4 * step.slowestMs)
    record.hitByShutdown = home.closing
  }

  const runStep = async (step: Step): Promise<void> => {
    const record: StepRecord = { step, home: undefined, taskIds: new Set(), completionSent: false, hitByShutdown: false, notes: [] }
    records.push(record)
    try {
      await (step.lifecycle.startsWith('task-') ? taskStep(record) : legacyStep(record))
    } catch (error) {
      violations.push(`${describeStep(step)}: the step threw ${errorText(error)}`)
    }
  }

  for (const batch of plan.batches) {
    for (const role of ['a', 'b', 'c'] as const) proxies[role].latency = latency(batch.links[role])
    const shutdown = batch.shutdown === undefined
      ? undefined
      : after(batch.shutdown.delayMs, () => cluster.shutdown(batch.shutdown!.role, message => { violations.push(`batch ${batch.index}: ${message}`) }))
    // The shutdown's victims come first in the batch: they are running when their node closes.
    let next = 0
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < batch.steps.length) await runStep(batch.steps[next++]!)
    }))
    await shutdown
  }
  const ranMs = Date.now() - startedAt

  // ------------------------------------------------------------------------------------------------
  // Everything settled: what is left

  for (const role of ['a', 'b', 'c'] as const) proxies[role].latency = 0
  const gauges = async (member: Member): Promise<Record<string, number>> => {
    const exposition = await scrapeMetrics(member.node.url)
    const sum = (name: string): number => exposition.samples(name).reduce((total, sample) => total + sample.value, 0)
    return {
      mcp_in_flight_requests: sum('mcp_in_flight_requests'),
      mcp_cancellation_rows: sum('mcp_cancellation_rows'),
      mcp_pending_input_requests: sum('mcp_pending_input_requests'),
      mcp_tasks: sum('mcp_tasks'),
      inFlightRows: member.node.app.mcpCancellation.inFlightRows,
      rows: member.node.app.mcpCancellation.rows
    }
  }
  const empty = { mcp_in_flight_requests: 0, mcp_cancellation_rows: 0, mcp_pending_input_requests: 0, mcp_tasks: 0, inFlightRows: 0, rows: 0 }
  await waitFor(async () => {
    for (const member of cluster.live()) if (JSON.stringify(await gauges(member)) !== JSON.stringify(empty)) return false
    return true
  }, 5000, 50)

  const leaks: string[] = []
  const unexpected: string[] = []
  const ended: Record<string, number> = {}
  const byIndex = new Map(records.map(record => [record.step.index, record]))
  const stored = new Set<string>()
  for (const key of await scanKeys(inspect, `${PREFIX}task:*`)) {
    const taskId = key.slice(`${PREFIX}task:`.length)
    stored.add(taskId)
    const hash = await inspect.hgetall(key)
    const index = stepIndexOf(hash.scope ?? '')
    const record = index === undefined ? undefined : byIndex.get(index)
    const what = `task ${taskId} of ${record === undefined ? `scope ${String(hash.scope)}` : describeStep(record.step)}${record?.notes.length ? ` [${record.notes.join(', ')}]` : ''}`
    const status = String(hash.status)
    if (!TERMINAL.includes(status)) {
      leaks.push(`${what}: ${status} in Redis (owner ${String(hash.owner)}, lease ${await inspect.exists(`${PREFIX}task-lease:${taskId}`) === 1 ? 'held' : 'lapsed'})`)
      continue
    }
    ended[status] = (ended[status] ?? 0) + 1
    const allowed = new Set(['cancelled'])
    // The lifetime (node c) and a shutdown end a task that already answered its client as failed, with -32800.
    if (record?.step.home === 'c' || record?.hitByShutdown === true) allowed.add('failed')
    if (record?.completionSent === true) allowed.add('completed')
    if (record === undefined || !allowed.has(status)) unexpected.push(`${what}: ${status}, expected ${[...allowed].join(' or ')}`)
    else if (status === 'failed' && JSON.parse(hash.error ?? '{}').code !== -32800) unexpected.push(`${what}: failed with ${String(hash.error)}`)
  }
  const missing = records.flatMap(record => [...record.taskIds].filter(id => !stored.has(id)).map(id => `task ${id} of ${describeStep(record.step)}: acknowledged, not in Redis`))

  const counts = (key: (record: StepRecord) => string): Record<string, number> => {
    const out: Record<string, number> = {}
    for (const record of records) out[key(record)] = (out[key(record)] ?? 0) + 1
    return out
  }
  t.comment(`seed ${SEED}: ${records.length} calls in ${ranMs} ms (${plan.batches.length} batches, shutdowns of ${plan.batches.filter(batch => batch.shutdown !== undefined).map(batch => `${batch.shutdown!.role} in batch ${batch.index} (${batch.link}) at ${batch.shutdown!.delayMs} ms`).join(', ')}, node c lifetimes ${plan.lifetimes.join('/')} ms)`)
  t.comment(`lifecycles ${JSON.stringify(counts(record => record.step.lifecycle))}; sources ${JSON.stringify(counts(record => record.step.source))}`)
  t.comment(`HTTP statuses ${JSON.stringify(statuses)}; tasks ended ${JSON.stringify(ended)}; notes ${JSON.stringify(counts(record => record.notes.join('+') || '-'))}; running on a node that closed: ${records.filter(record => record.hitByShutdown).length}`)

  // The first 20 of each, and how many in all.
  t.same(crashes.slice(0, 20), [], `no unhandled rejection or uncaught exception (each would have killed the node's process): ${crashes.length}; replay: ${REPLAY}`)
  t.same(violations.slice(0, 20), [], `every answer JSON-RPC below 500 (or an ended stream), every call and handler ended, every task ended: ${violations.length} violations; replay: ${REPLAY}`)
  for (const member of cluster.live()) {
    t.same(await gauges(member), empty, `${member.node.name}: nothing in flight, no cancellation row, no pending ask, no live task (metrics and fastify.mcpCancellation)`)
  }
  t.same(leaks, [], 'Redis holds no task still working or input_required')
  t.same(await scanKeys(inspect, `${PREFIX}task-lease:*`), [], 'nor any task lease')
  t.same(await scanKeys(inspect, `${PREFIX}task-live:*`), [], 'nor any live set')
  t.same(unexpected, [], 'every task ended as its step allows (cancelled; failed with -32800 by the lifetime or a shutdown; completed when answered or let go)')
  t.same(missing, [], 'every task a client was told of is in Redis')
  t.same([...tools.runs.values()].filter(run => run.endedAt === undefined).map(run => `${run.tag} on ${run.node}`), [], 'every handler has ended')
  t.same(cluster.all.flatMap(member => errorLines(member.node).map(line => `${member.node.name}: ${String(line.msg)}`)), [], 'no node logged an error')
})
