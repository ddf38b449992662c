/**
 * Server-to-client notifications (docs/notifications.md), against plugin nodes in processes of their
 * own (servers/event-node.ts) sharing a real `redis-server` started here on a free loopback port (as
 * cross-node.ts); this process is only the client, and holds every listening stream on a connection
 * of its own (support/notification-stream.ts counts the notifications in the bytes as they arrive).
 *
 * 1. `latency`: node A holds a 2026-07-28 listen (`toolsListChanged`) and a legacy session's GET
 *    stream (initialize, notifications/initialized, GET); node B is told over IPC to call
 *    `notify.toolsChanged()`. Measured per stream from the instant just before B's call (B's clock,
 *    aligned with this one by the offset of the IPC ping with the smallest round trip, as cross-node.ts)
 *    to the instant this process reads the notification, one event at a time, each more than
 *    `events.coalesceMs` (1 ms on these nodes) after the previous; `BENCH_EVENTS` (1000) after 50 of
 *    warm-up. Every event must reach each stream exactly once. Goal: p99 ≤ 50 ms for both streams.
 * 2. `fanout`: `BENCH_LISTENERS` (1000) listens on node A, each subscribed to `FANOUT_PREFIX`; updates
 *    of distinct URIs under it (never coalesced) raised on A itself (`local`: A also publishes each to
 *    Redis, as any node with `redis` does) or on B (`redis`: through the bus), in alternating rounds,
 *    `BENCH_ROUNDS` (3) of each. A closed loop keeps at most `WINDOW_EVENTS` events raised and not yet
 *    read by the listeners (on average), so the figure is what delivery sustains, not what a buffer absorbs. A round
 *    warms up `BENCH_WARMUP` s, measures `BENCH_DURATION` s, then waits until every listener has read
 *    every event raised (nothing lost, none dropped as slow). Reported: events/s raised, notifications/s
 *    delivered, node A's CPU per 1 000 notifications and write system calls per notification (below 1
 *    when a tick's notifications to one stream leave together), and who used the cores. No goal.
 * 3. `idle-cost`: `tools/call echo` (autocannon, as throughput.ts) on one plugin server
 *    (servers/plugin-listening.ts: only the listener bounds raised) in rounds alternating between
 *    `BENCH_LISTENERS` idle listens held open by this process (opened before the round, counted in
 *    `mcp_listeners`) and none (closed, and forgotten by the server, before it), back-to-back pairs of
 *    alternating order (support/paired-cost.ts), each round after its warm-up; the median pair's ratio.
 *    One process for both sides: the streams are then all that differs (fresh processes differ from
 *    each other by more than 5 % on this host). Goal: ≥ 0.95 × none.
 *
 * `npm run bench -- events [latency] [fanout] [idle-cost] [pairs]` (default all; pairs of idle-cost, 5).
 * Figures, not assertions: only a failed check (a wrong answer, a lost notification) fails the run.
 */
import type { ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { isDeepStrictEqual } from 'node:util'
import { metricSum, metricValue } from '../test/helpers/metrics.js'
import { RedisServer } from '../test/helpers/redis-server.js'
import type { EventNodeCommand, EventNodeMessage } from './servers/event-node.js'
import type { Benchmark } from './support/benchmark.js'
import { ServerProcess, spawnServer } from './support/child-server.js'
import type { BenchConfig } from './support/config.js'
import { startEchoServer } from './support/echo-round.js'
import {
  ACKNOWLEDGED, EVENT_COALESCE_MS, FANOUT_PREFIX, listenRequest, RESOURCE_UPDATED, sessionStreamRequest, startSession, TOOLS_CHANGED
} from './support/event-fixture.js'
import { describeLoad, envCount, median, ms, printLatencyEnvironment, summarize, summaryCells, SUMMARY_HEADER, watchLoad, withTimeout, type LoadReport } from './support/latency.js'
import { waitForQuiet, watchNoise } from './support/noise.js'
import { NotificationStream } from './support/notification-stream.js'
import { measurePairedCost, pairCount } from './support/paired-cost.js'
import { fmt, printTable } from './support/report.js'

const GOAL_P99_MS = 50
const IDLE_MAX_COST = 0.05
const WARM_UP_EVENTS = 50
const TIMEOUT_MS = 5000
/** A freshly started node reaches the bus within this long. */
const BUS_READY_MS = 10_000
/** The fan-out's closed loop: events raised and not yet read by the listeners (on average), at most. */
const WINDOW_EVENTS = 16
/** Streams opened at once (the server's accept backlog is finite). */
const OPEN_BATCH = 100
/** CPU (in cores) other processes may use during a round before its figures are flagged (as elsewhere). */
const NOISE_LIMIT_CORES = 0.1

// ---------------------------------------------------------------- the nodes

/** servers/event-node.ts in a process of its own, with the IPC channel it is commanded over. */
class EventNode extends ServerProcess {
  readonly #waiters = new Map<number, (message: EventNodeMessage) => void>()
  #seq = 0

  private constructor (child: ChildProcess, port: number) {
    super(child, port)
    child.on('message', (message: EventNodeMessage) => {
      const waiter = this.#waiters.get(message.seq)
      this.#waiters.delete(message.seq)
      waiter?.(message)
    })
  }

  static async start (redisUrl: string, nodeArgs: readonly string[], label: string): Promise<EventNode> {
    const { child, port } = await spawnServer(new URL('./servers/event-node.ts', import.meta.url), { BENCH_REDIS_URL: redisUrl }, nodeArgs, label)
    return new EventNode(child, port)
  }

  /** Sends `command`; resolves with the node's answer to it. */
  async command (command: DistributiveOmit<EventNodeCommand, 'seq'>): Promise<EventNodeMessage> {
    const seq = ++this.#seq
    const answer = new Promise<EventNodeMessage>(resolve => { this.#waiters.set(seq, resolve) })
    this.child.send({ ...command, seq })
    return await withTimeout(answer, TIMEOUT_MS, `${command.type} on ${this.url.host}`)
  }

  protected async clockAt (): Promise<number> {
    return (await this.command({ type: 'clock' })).at
  }
}

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never

/** Two nodes on `redis`, started together, stopped whatever `use` does. */
async function withNodes<T> (config: BenchConfig, redis: RedisServer, use: (a: EventNode, b: EventNode) => Promise<T>): Promise<T> {
  const [a, b] = await Promise.all([EventNode.start(redis.url, config.nodeArgs, 'node A'), EventNode.start(redis.url, config.nodeArgs, 'node B')])
  try {
    return await use(a, b)
  } finally {
    await Promise.all([a.stop(), b.stop()])
  }
}

// ---------------------------------------------------------------- the wire

/** Throws unless `stream`'s first message acknowledges exactly `filter`. */
async function expectAcknowledged (stream: NotificationStream, filter: Record<string, unknown>, what: string): Promise<void> {
  const ack = JSON.parse(await withTimeout(stream.first, TIMEOUT_MS, what)) as { method?: string, params?: { notifications?: unknown } }
  if (stream.status !== 200 || ack.method !== ACKNOWLEDGED || !isDeepStrictEqual(ack.params?.notifications, filter)) {
    throw new Error(`${what}: HTTP ${String(stream.status)}, first message ${JSON.stringify(ack)}; expected ${ACKNOWLEDGED} of ${JSON.stringify(filter)}`)
  }
}

/** `count` listens on `url` with `filter`, opened `OPEN_BATCH` at a time, each acknowledged; `onMatch` as in NotificationStream. */
async function openListens (url: URL, count: number, filter: Record<string, unknown>, marker: string, onMatch?: (found: number) => void): Promise<NotificationStream[]> {
  const streams: NotificationStream[] = []
  try {
    while (streams.length < count) {
      const batch = Array.from({ length: Math.min(OPEN_BATCH, count - streams.length) }, (_, i) =>
        new NotificationStream(url, listenRequest(`listen-${streams.length + i}`, filter), marker, onMatch))
      streams.push(...batch)
      await Promise.all(batch.map(async (stream, i) => { await expectAcknowledged(stream, filter, `listen ${streams.length - batch.length + i} on ${url.host}`) }))
    }
    const held = await metricValue(url, 'mcp_listeners', { era: 'modern' })
    if (held !== count) throw new Error(`${url.host} reports ${String(held)} modern listeners (mcp_listeners), expected ${count}`)
    return streams
  } catch (error) {
    for (const stream of streams) stream.close()
    throw error
  }
}

/**
 * Both nodes reach Redis asynchronously: announces a tools change on `b` every 100 ms until each of
 * `streams` (tools listeners) has heard one, then lets the stragglers arrive.
 */
async function untilHeard (b: EventNode, streams: Record<string, NotificationStream>): Promise<void> {
  const deadline = performance.now() + BUS_READY_MS
  while (Object.values(streams).some(stream => stream.count === 0)) {
    if (performance.now() > deadline || Object.values(streams).some(stream => stream.over)) {
      const heard = Object.entries(streams).map(([name, stream]) => `${name} heard ${stream.count} (HTTP ${String(stream.status)}${stream.over ? ', ended' : ''})`)
      throw new Error(`node B's tools/list_changed did not reach node A within ${BUS_READY_MS} ms: ${heard.join(', ')}`)
    }
    await b.command({ type: 'toolsChanged' })
    await sleep(100)
  }
  await sleep(200)
}

// ---------------------------------------------------------------- 1. latency

interface LatencyResult { modern: number[], legacy: number[], offsetRttMs: number, offsetDriftMs: number, load: LoadReport }

async function measureLatency (config: BenchConfig, redis: RedisServer, events: number): Promise<LatencyResult> {
  return await withNodes(config, redis, async (a, b) => {
    await b.syncClock()
    const offset = b.offsetMs
    const modern = new NotificationStream(a.url, listenRequest('latency', { toolsListChanged: true }), TOOLS_CHANGED)
    const legacy = new NotificationStream(a.url, sessionStreamRequest(await startSession(a.url)), TOOLS_CHANGED)
    try {
      await expectAcknowledged(modern, { toolsListChanged: true }, 'the listen on node A')
      await untilHeard(b, { modern, legacy })
      const heard = { modern: modern.count, legacy: legacy.count }
      if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`latency: the machine did not go quiet within ${config.quiet} s; measuring anyway`)
      const samples = { modern: [] as number[], legacy: [] as number[] }
      const pid = redis.pid
      const load = watchLoad([a.pid, b.pid, ...pid === undefined ? [] : [pid]])
      for (let i = 0; i < WARM_UP_EVENTS + events; i++) {
        const arrivals = Promise.all([modern.reached(modern.count + 1), legacy.reached(legacy.count + 1)])
        const published = await b.command({ type: 'toolsChanged' })
        const [modernAt, legacyAt] = await withTimeout(arrivals, TIMEOUT_MS, `event ${i} on node A's streams`)
        if (i >= WARM_UP_EVENTS) {
          samples.modern.push(modernAt - (published.at + b.offsetMs))
          samples.legacy.push(legacyAt - (published.at + b.offsetMs))
        }
        await sleep(EVENT_COALESCE_MS + 1) // the next event opens a window of its own
      }
      const loadReport = load.stop()
      await sleep(200)
      const sent = WARM_UP_EVENTS + events
      if (modern.count - heard.modern !== sent || legacy.count - heard.legacy !== sent) {
        throw new Error(`${sent} events raised on B; node A's listen heard ${modern.count - heard.modern}, its GET stream ${legacy.count - heard.legacy} (each must hear each once)`)
      }
      await b.syncClock(20) // a drifting offset shows as another offset
      return { ...samples, offsetRttMs: b.offsetRttMs, offsetDriftMs: b.offsetMs - offset, load: loadReport }
    } finally {
      modern.close()
      legacy.close()
    }
  })
}

async function runLatency (config: BenchConfig, redis: RedisServer): Promise<boolean> {
  const events = envCount('BENCH_EVENTS', 1000)
  const result = await measureLatency(config, redis, events)
  const modern = summarize(result.modern)
  const legacy = summarize(result.legacy)
  console.log(`\n## notify.toolsChanged() on node B → the notification read from node A's stream (${events} events, one at a time; clocks ±${ms(result.offsetRttMs / 2)}, drift over the run ${ms(result.offsetDriftMs)})\n`)
  printTable(['stream on A', ...SUMMARY_HEADER], [
    ['2026-07-28 subscriptions/listen', ...summaryCells(modern)],
    ['legacy GET stream (session)', ...summaryCells(legacy)]
  ])
  const met = modern.p99 <= GOAL_P99_MS && legacy.p99 <= GOAL_P99_MS
  console.log(`\np99 ${ms(modern.p99)} / ${ms(legacy.p99)} (goal ≤ ${GOAL_P99_MS} ms for both): ${met ? 'MET' : 'NOT MET'}; ${describeLoad(result.load)} (nodes and redis-server excluded)`)
  return true
}

// ---------------------------------------------------------------- 2. fanout

/** The fan-out listeners on node A and what they have read. */
class Fanout {
  streams: NotificationStream[] = []
  /** Notifications read, every listener together. */
  delivered = 0
  /** Events the nodes have reported raised, both routes together. */
  raised = 0
  #requested = 0
  #raising: EventNode | undefined
  #busy = false

  static async open (a: EventNode, listeners: number): Promise<Fanout> {
    const fanout = new Fanout()
    fanout.streams = await openListens(a.url, listeners, { resourceSubscriptions: [FANOUT_PREFIX] }, RESOURCE_UPDATED, found => {
      fanout.delivered += found
      fanout.#topUp()
    })
    return fanout
  }

  /** Keeps `raiser` raising, `WINDOW_EVENTS` ahead of the readers' average at most, until `stop()`. */
  start (raiser: EventNode): void {
    this.#raising = raiser
    this.#topUp()
  }

  /** Raises no more; resolves once every listener has read every event raised. */
  async stop (): Promise<void> {
    this.#raising = undefined
    while (this.#busy) await sleep(1)
    const deadline = performance.now() + TIMEOUT_MS
    while (this.streams.some(stream => stream.count < this.#requested)) {
      const cut = this.streams.filter(stream => stream.over).length
      if (cut > 0 || performance.now() > deadline) {
        const behind = this.streams.filter(stream => stream.count < this.#requested).length
        throw new Error(`${behind} of ${this.streams.length} listeners have not read all ${this.#requested} events raised (${cut} streams ended)`)
      }
      await sleep(10)
    }
  }

  close (): void {
    for (const stream of this.streams) stream.close()
  }

  /** Raises the next batch when the readers have caught up with half the window. */
  #topUp (): void {
    const raiser = this.#raising
    if (raiser === undefined || this.#busy) return
    const ahead = this.#requested - this.delivered / this.streams.length
    if (ahead > WINDOW_EVENTS / 2) return
    const count = WINDOW_EVENTS - Math.ceil(ahead)
    this.#busy = true
    this.#requested += count
    raiser.command({ type: 'raise', count }).then(() => {
      this.raised += count
      this.#busy = false
      this.#topUp()
    }, (error: unknown) => {
      console.error(`raising on ${raiser.url.host} failed: ${String(error)}`)
      this.#busy = false
      this.#raising = undefined
    })
  }
}

interface FanoutRound {
  route: 'local' | 'redis'
  seconds: number
  eventsPerSec: number
  notificationsPerSec: number
  /** Node A's CPU time per 1 000 notifications delivered, ms. */
  cpuPerThousandMs: number | undefined
  /** Node A's write system calls (`writev` included) per notification: how many notifications leave together. */
  writesPerNotification: number | undefined
  cores: { a: number, b: number, redis: number, bench: number, other: number } | undefined
}

async function fanoutRound (config: BenchConfig, fanout: Fanout, route: FanoutRound['route'], a: EventNode, b: EventNode, redis: number | undefined): Promise<FanoutRound> {
  if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`fanout ${route}: the machine did not go quiet within ${config.quiet} s; measuring anyway`)
  fanout.start(route === 'local' ? a : b)
  try {
    await sleep(config.warmup * 1000)
    const start = { delivered: fanout.delivered, raised: fanout.raised, at: performance.now() }
    const [onA, onB] = [watchNoise(a.pid), watchNoise(b.pid)]
    const onRedis = redis === undefined ? undefined : watchNoise(redis)
    const others = watchLoad([a.pid, b.pid, ...redis === undefined ? [] : [redis]])
    const writesBefore = writeCalls(a.pid)
    await sleep(config.duration * 1000)
    const seconds = (performance.now() - start.at) / 1000
    const [cpuA, cpuB, cpuRedis, load] = [onA.stop(), onB.stop(), onRedis?.stop(), others.stop()]
    const writes = writeCalls(a.pid)
    const delivered = fanout.delivered - start.delivered
    return {
      route,
      seconds,
      eventsPerSec: (fanout.raised - start.raised) / seconds,
      notificationsPerSec: delivered / seconds,
      cpuPerThousandMs: cpuA === undefined || delivered === 0 ? undefined : cpuA.serverCores * cpuA.seconds * 1e6 / delivered,
      writesPerNotification: writes === undefined || writesBefore === undefined || delivered === 0 ? undefined : (writes - writesBefore) / delivered,
      cores: cpuA === undefined || cpuB === undefined || load.otherCores === undefined
        ? undefined
        : { a: cpuA.serverCores, b: cpuB.serverCores, redis: cpuRedis?.serverCores ?? 0, bench: cpuA.benchCores, other: load.otherCores }
    }
  } finally {
    await fanout.stop()
  }
}

/** The write system calls a process has made (`syscw` of /proc/<pid>/io, Linux), or undefined. */
function writeCalls (pid: number): number | undefined {
  try {
    return Number(/^syscw: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1])
  } catch {
    return undefined
  }
}

async function runFanout (config: BenchConfig, redis: RedisServer): Promise<boolean> {
  const listeners = envCount('BENCH_LISTENERS', 1000)
  return await withNodes(config, redis, async (a, b) => {
    const fanout = await Fanout.open(a, listeners)
    try {
      console.log(`fanout: ${listeners} listens on node A ${a.url.host} (pid ${a.pid}), node B ${b.url.host} (pid ${b.pid}); ${config.rounds} round(s) per route, ${config.warmup} s warm-up + ${config.duration} s each`)
      const probe = new NotificationStream(a.url, listenRequest('probe', { toolsListChanged: true }), TOOLS_CHANGED)
      try {
        await expectAcknowledged(probe, { toolsListChanged: true }, 'the probe listen on node A')
        await untilHeard(b, { probe })
      } finally {
        probe.close()
      }
      const pid = redis.pid
      const rounds: FanoutRound[] = []
      for (let pass = 0; pass < config.rounds; pass++) {
        for (const route of pass % 2 === 0 ? ['local', 'redis'] as const : ['redis', 'local'] as const) {
          console.log(`[pass ${pass + 1}/${config.rounds}] ${route}…`)
          rounds.push(await fanoutRound(config, fanout, route, a, b, pid))
        }
      }
      const dropped = await metricSum(a.url, 'mcp_listeners_dropped_total') + await metricSum(a.url, 'mcp_events_dropped_total') + await metricSum(b.url, 'mcp_events_dropped_total')
      console.log(`\n## fan-out to ${listeners} listeners on node A: resources/updated of distinct URIs, at most ${WINDOW_EVENTS} events ahead of the readers\n`)
      printTable(['round', 'raised on', 'events/s', 'notifications/s', 'A CPU per 1 000', 'A writes per notification', 'cores A / B / redis / bench / other'], rounds.map((r, i) => [
        String(i + 1), r.route === 'local' ? 'A (local)' : 'B (through Redis)', fmt.int(r.eventsPerSec), fmt.int(r.notificationsPerSec),
        r.cpuPerThousandMs === undefined ? 'n/a' : ms(r.cpuPerThousandMs),
        r.writesPerNotification === undefined ? 'n/a' : r.writesPerNotification.toFixed(2),
        r.cores === undefined ? 'n/a' : [r.cores.a, r.cores.b, r.cores.redis, r.cores.bench, r.cores.other].map(c => c.toFixed(2)).join(' / ')
      ]))
      console.log('')
      printTable(['raised on', 'median events/s', 'median notifications/s', 'median A CPU per 1 000 notifications'], (['local', 'redis'] as const).map(route => {
        const of = rounds.filter(r => r.route === route)
        const cpu = of.flatMap(r => r.cpuPerThousandMs === undefined ? [] : [r.cpuPerThousandMs])
        return [route === 'local' ? 'A (local)' : 'B (through Redis)', fmt.int(median(of.map(r => r.eventsPerSec))), fmt.int(median(of.map(r => r.notificationsPerSec))), cpu.length === 0 ? 'n/a' : ms(median(cpu))]
      }))
      console.log(`\nevery listener read every one of the ${fanout.raised} events raised; listeners dropped and events dropped (mcp_listeners_dropped_total, mcp_events_dropped_total): ${dropped}`)
      const noisy = rounds.filter(r => r.cores === undefined || r.cores.other > NOISE_LIMIT_CORES).length
      if (noisy > 0) console.error(`\nWARNING: other processes used > ${NOISE_LIMIT_CORES} core during ${noisy} round(s); rerun on a quiet machine.`)
      return dropped === 0
    } finally {
      fanout.close()
    }
  })
}

// ---------------------------------------------------------------- 3. idle-cost

/** The two sides of idle-cost: one server, with and without the idle listens. */
const IDLE = { on: 'listened', off: 'unlistened' } as const

async function runIdleCost (config: BenchConfig, pairs: number): Promise<boolean> {
  const listeners = envCount('BENCH_LISTENERS', 1000)
  let url!: URL
  const server = await startEchoServer({ name: 'plugin-listening' }, config, async origin => { url = new URL('/mcp', origin) })
  let held: NotificationStream[] = []
  try {
    const { ok } = await measurePairedCost(config, {
      what: `${fmt.int(listeners)} idle listeners`,
      ...IDLE,
      pairs,
      maxCost: IDLE_MAX_COST,
      round: async name => {
        if (name === IDLE.on && held.length === 0) held = await openListens(url, listeners, { toolsListChanged: true }, TOOLS_CHANGED)
        if (name === IDLE.off && held.length > 0) {
          for (const stream of held) stream.close()
          held = []
          await untilListeners(url, 0)
        }
        if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`${name}: the machine did not go quiet within ${config.quiet} s; measuring anyway`)
        console.log(`${name} (${held.length} listens open): warm-up ${config.warmup} s, measuring ${config.duration} s…`)
        return await server.measure(config)
      }
    })
    return ok
  } finally {
    for (const stream of held) stream.close()
    await server.stop()
  }
}

/** Resolves once the server of `url` reports `count` modern listeners (a closed stream is forgotten when its close is read). */
async function untilListeners (url: URL, count: number): Promise<void> {
  const deadline = performance.now() + TIMEOUT_MS
  while ((await metricValue(url, 'mcp_listeners', { era: 'modern' }) ?? 0) !== count) {
    if (performance.now() > deadline) throw new Error(`${url.host} still reports other than ${count} modern listeners after ${TIMEOUT_MS} ms`)
    await sleep(20)
  }
}

// ----------------------------------------------------------------

const PARTS = ['latency', 'fanout', 'idle-cost'] as const

const events: Benchmark = {
  description: 'notifications: node B → listeners on node A through Redis (goal p99 ≤ 50 ms), fan-out to 1 000 listeners, the echo cost of 1 000 idle listeners (goal ≥ 0.95×)',
  defaults: { rounds: 3 },
  async run (config, args) {
    const words = args.filter(arg => !/^\d+$/.test(arg))
    const unknown = words.filter(arg => !(PARTS as readonly string[]).includes(arg))
    if (unknown.length > 0) throw new Error(`unknown part(s) ${unknown.join(', ')}; known: ${PARTS.join(', ')}`)
    const parts = words.length > 0 ? words : PARTS
    const pairs = pairCount(args.find(arg => /^\d+$/.test(arg)))
    printLatencyEnvironment()
    let ok = true
    if (parts.includes('latency') || parts.includes('fanout')) {
      const redis = await RedisServer.start(undefined).catch((error: unknown) => {
        throw new Error(`events needs redis-server (apt-get install redis-server, or REDIS_SERVER=/path): ${String(error)}`)
      })
      try {
        console.log(`redis-server ${await redis.version()} on 127.0.0.1:${redis.port} (no persistence)`)
        if (parts.includes('latency')) ok = await runLatency(config, redis) && ok
        if (parts.includes('fanout')) ok = await runFanout(config, redis) && ok
      } finally {
        await redis.stop()
      }
    }
    if (parts.includes('idle-cost')) ok = await runIdleCost(config, pairs) && ok
    return ok
  }
}

export default events
