/**
 * Resumable legacy streams (2025-11-25, docs/resumability.md): how fast a resume replays, on the node
 * holding the stream and on another one, and what ids and buffering cost per streamed event.
 *
 * 1. `replay`: nodes A and B (servers/resume-node.ts, processes of their own, one `secret`, one
 *    `redis-server` started here on a free loopback port as cross-node.ts does; sessions with the word
 *    `sessions`). Each turn, on a fresh connection to A, a `tools/call` of `hold` (progress 1..3, then
 *    it waits until released), read until the priming event and the three progress events arrived;
 *    the client then destroys its connection, and once A says the response closed (the stream is
 *    paused there), a `GET` with `Last-Event-ID` = the first progress event's id goes, on a fresh
 *    connection, to B (cross-node: B asks A over Redis, A replays to B, B writes to its client) or to A
 *    (local), alternating which goes first. Measured on this process's clock from just before the GET
 *    is made to the instant the chunk holding the first replayed event (`id:` and JSON `data:`) is read;
 *    TCP connect included, as for any client that reconnects. Then `hold` is released and the stream
 *    must end by itself; it must carry exactly progress 2 and 3, byte for byte as A sent them first
 *    (ids included), then the result under a new id, nothing else (a `retry:` line may come first):
 *    anything else fails the run. `BENCH_EVENTS` (200) of each after 20 of each as a warm-up. Goal:
 *    cross-node p99 ≤ 20 ms on loopback.
 * 2. `event-cost`: one process (servers/resume-cost.ts) with two plugin servers alike but for
 *    `resumability` (defaults; `false`), each with `burst` (`BENCH_BURST_EVENTS` (200) progress events
 *    at once, `progressIntervalMs` 0 so none is coalesced, then the result). A closed loop of
 *    `BENCH_CONNECTIONS` (here 8 unless set) callers on keep-alive connections calls it; every answer
 *    is checked (200 events and the result, with ids and the priming event on one side, none on the
 *    other). Rounds of `BENCH_WARMUP` + `BENCH_DURATION` s, in back-to-back pairs alternating off-on /
 *    on-off (as support/paired-cost.ts); reported: progress events delivered per second, the server's
 *    CPU per 1 000 events, the median pair's on ÷ off, and rounds other processes disturbed. No goal.
 *
 * `npm run bench -- resume [replay] [event-cost] [sessions] [pairs]` (default both parts, stateless, 5 pairs).
 * Figures, not assertions: only a failed check (a wrong replay, a refused resume, a wrong answer) fails the run.
 */
import type { ChildProcess } from 'node:child_process'
import http from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { isDeepStrictEqual } from 'node:util'
import { RedisServer } from '../test/helpers/redis-server.js'
import type { ResumeCostCommand, ResumeCostMessage } from './servers/resume-cost.js'
import type { ResumeNodeCommand, ResumeNodeMessage } from './servers/resume-node.js'
import type { Benchmark } from './support/benchmark.js'
import { ServerProcess, spawnServer } from './support/child-server.js'
import type { BenchConfig } from './support/config.js'
import { startSession, type StreamRequest } from './support/event-fixture.js'
import { describeLoad, envCount, median, ms, printLatencyEnvironment, summarize, summaryCells, SUMMARY_HEADER, watchLoad, withTimeout } from './support/latency.js'
import { waitForQuiet, watchNoise } from './support/noise.js'
import { pairCount } from './support/paired-cost.js'
import { fmt, printTable } from './support/report.js'
import { BURST_TOOL, HOLD_TOOL, resumeRequest, streamedCall, TAG_HEADER, toolResult } from './support/resume-fixture.js'

const GOAL_P99_MS = 20
const WARM_UP_REPLAYS = 20
/** Progress events `hold` sends before it waits: the resume replays all but the first. */
const HELD_PROGRESS = 3
const TIMEOUT_MS = 5000
/** Both nodes reach Redis asynchronously: the first cross-node resume is retried for this long. */
const BUS_READY_MS = 20_000
const DEFAULT_CALLERS = 8
/** CPU (in cores) other processes may use during a round before its figures are flagged (as elsewhere). */
const NOISE_LIMIT_CORES = 0.1

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never

// ---------------------------------------------------------------- the wire

/** One SSE event as a client parses it, with the instant (this process's `performance.now()`) of the chunk that completed it. */
interface SseEvent {
  id: string | undefined
  retry: number | undefined
  /** Undefined without a `data:` line (a block of `retry:` alone). */
  data: string | undefined
  /** The block as sent, without its blank line. */
  raw: string
  at: number
}

/** Events with a JSON-RPC message (not the priming event's empty data, not a `retry:` alone). */
const messages = (events: readonly SseEvent[]): SseEvent[] => events.filter(event => event.data !== undefined && event.data !== '')

/** A request on a fresh connection (or `agent`'s), its SSE body parsed as it arrives. */
class SseCall {
  readonly events: SseEvent[] = []
  /** The status and content type, and the instant the head arrived. */
  readonly head: Promise<{ status: number, contentType: string, at: number }>
  /** Settles once the response is over: `complete` when it ended cleanly. */
  readonly ended: Promise<{ complete: boolean }>
  readonly #request: http.ClientRequest
  readonly #waiters: Array<{ test: () => boolean, resolve: () => void }> = []
  #text = ''
  #pending = ''

  constructor (url: URL, { method, headers, body }: StreamRequest) {
    this.#request = http.request(url, {
      method,
      agent: false,
      headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) }
    })
    let resolveHead!: (head: { status: number, contentType: string, at: number }) => void
    let rejectHead!: (error: Error) => void
    this.head = new Promise((resolve, reject) => { resolveHead = resolve; rejectHead = reject })
    this.head.catch(() => {})
    this.ended = new Promise(resolve => {
      let over = false
      const end = (complete: boolean): void => {
        if (over) return
        over = true
        rejectHead(new Error('the request failed before its head'))
        resolve({ complete })
        this.#check()
      }
      this.#request.on('response', response => {
        resolveHead({ status: response.statusCode ?? 0, contentType: String(response.headers['content-type']), at: performance.now() })
        response.setEncoding('utf8')
        response.on('data', (chunk: string) => { this.#take(chunk, performance.now()) })
        response.on('end', () => { end(true) })
        response.on('error', () => { end(false) })
        response.on('close', () => { end(false) })
      })
      this.#request.on('error', () => { end(false) })
      this.#request.on('close', () => { setImmediate(end, false) })
    })
    this.#request.end(body)
  }

  /** Everything received so far. */
  get text (): string {
    return this.#text
  }

  /** Resolves once `test` holds of the events (checked as each chunk arrives), throws after `timeoutMs`. */
  async until (test: (events: readonly SseEvent[]) => boolean, timeoutMs: number, what: string): Promise<void> {
    if (test(this.events)) return
    const reached = new Promise<void>(resolve => { this.#waiters.push({ test: () => test(this.events), resolve }) })
    await withTimeout(Promise.race([reached, this.ended.then(() => { if (!test(this.events)) throw new Error(`${what}: the response ended first (${JSON.stringify(this.#text.slice(0, 500))})`) })]), timeoutMs, what)
  }

  /** The client goes away: destroys its connection. */
  destroy (): void {
    this.#request.destroy()
  }

  #take (chunk: string, at: number): void {
    this.#text += chunk
    this.#pending += chunk
    for (let end = this.#pending.indexOf('\n\n'); end !== -1; end = this.#pending.indexOf('\n\n')) {
      const raw = this.#pending.slice(0, end)
      this.#pending = this.#pending.slice(end + 2)
      const event: SseEvent = { id: undefined, retry: undefined, data: undefined, raw, at }
      let fields = 0
      for (const line of raw.split('\n')) {
        if (line === '' || line.startsWith(':')) continue // a comment (keep-alive, `: open`)
        fields++
        const colon = line.indexOf(':')
        const name = colon === -1 ? line : line.slice(0, colon)
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (name === 'id') event.id = value
        else if (name === 'retry') event.retry = Number(value)
        else if (name === 'data') event.data = event.data === undefined ? value : `${event.data}\n${value}`
      }
      if (fields > 0) this.events.push(event)
    }
    this.#check()
  }

  #check (): void {
    for (let i = this.#waiters.length - 1; i >= 0; i--) {
      const waiter = this.#waiters[i]!
      if (waiter.test()) {
        this.#waiters.splice(i, 1)
        waiter.resolve()
      }
    }
  }
}

// ---------------------------------------------------------------- 1. replay

/** servers/resume-node.ts in a process of its own, with the IPC channel it is commanded over. */
class ResumeNode extends ServerProcess {
  readonly #answers = new Map<number, (message: ResumeNodeMessage) => void>()
  readonly #closed = new Map<string, () => void>()
  #seq = 0

  private constructor (child: ChildProcess, port: number) {
    super(child, port)
    child.on('message', (message: ResumeNodeMessage) => {
      if (message.type === 'closed') {
        this.#closed.get(message.tag)?.()
        this.#closed.delete(message.tag)
        return
      }
      this.#answers.get(message.seq)?.(message)
      this.#answers.delete(message.seq)
    })
  }

  static async start (redisUrl: string, sessions: boolean, nodeArgs: readonly string[], label: string): Promise<ResumeNode> {
    const { child, port } = await spawnServer(new URL('./servers/resume-node.ts', import.meta.url),
      { BENCH_REDIS_URL: redisUrl, BENCH_RESUME_SESSIONS: sessions ? '1' : '0' }, nodeArgs, label)
    return new ResumeNode(child, port)
  }

  async command (command: DistributiveOmit<ResumeNodeCommand, 'seq'>): Promise<ResumeNodeMessage> {
    const seq = ++this.#seq
    const answer = new Promise<ResumeNodeMessage>(resolve => { this.#answers.set(seq, resolve) })
    this.child.send({ ...command, seq })
    return await withTimeout(answer, TIMEOUT_MS, `${command.type} on ${this.url.host}`)
  }

  /** Resolves once the node says the response of the POST tagged `tag` closed (register before causing it). */
  closed (tag: string): Promise<void> {
    return new Promise(resolve => { this.#closed.set(tag, resolve) })
  }

  protected async clockAt (): Promise<number> {
    const answer = await this.command({ type: 'clock' })
    return answer.type === 'clock' ? answer.at : NaN
  }
}

interface Replay { headMs: number, eventMs: number }

/** What a replay is checked against: the progress events the cut stream carried, the resume's cursor, the ids used. */
interface CutStream { id: number, tag: string, after: string, missed: SseEvent[], ids: Set<string> }

let calls = 0

/**
 * A `hold` call on A, read until its priming event and its progress arrived, then cut; resolves once
 * A has paused it. Its first event must be the priming one, every event must have an id, all distinct.
 */
async function cutStream (a: ResumeNode, extra: Record<string, string>): Promise<CutStream> {
  const id = ++calls
  const tag = `r${id}`
  const closed = a.closed(tag)
  const call = new SseCall(a.url, streamedCall(id, HOLD_TOOL, { tag, count: HELD_PROGRESS }, { ...extra, [TAG_HEADER]: tag }))
  try {
    await call.until(events => messages(events).length >= HELD_PROGRESS, TIMEOUT_MS, `the progress of call ${id} on A`)
  } catch (error) {
    call.destroy()
    throw error
  }
  const head = await call.head
  const [priming, ...progress] = call.events
  const ids = new Set(call.events.map(event => event.id))
  const wrong = ((): string | undefined => {
    if (head.status !== 200 || !head.contentType.startsWith('text/event-stream')) return `HTTP ${head.status} ${head.contentType}`
    if (priming?.id === undefined || priming.data !== '' || priming.retry === undefined) return 'no priming event first'
    if (progress.length !== HELD_PROGRESS || ids.size !== HELD_PROGRESS + 1 || ids.has(undefined)) return 'not one distinct id per event'
    const expected = (i: number): unknown => ({ progressToken: `p${id}`, progress: i + 1, total: HELD_PROGRESS })
    if (progress.some((event, i) => !isDeepStrictEqual((JSON.parse(event.data!) as { params?: unknown }).params, expected(i)))) return 'not progress 1..3 of its token'
    return undefined
  })()
  call.destroy()
  if (wrong !== undefined) throw new Error(`call ${id} on A: ${wrong}: ${JSON.stringify(call.text.slice(0, 1000))}`)
  await withTimeout(closed, TIMEOUT_MS, `A seeing call ${id}'s connection close`)
  return { id, tag, after: progress[0]!.id!, missed: progress.slice(1), ids: ids as Set<string> }
}

/**
 * Resumes `cut` on `target`, timed to its first replayed event; then releases the call and checks the
 * whole resumed stream (see the header). `retryUntil`: a 503 (a node not yet on the bus) or a 409 (A
 * still holding the failed attempt) is retried until then instead of failing.
 */
async function resumeStream (a: ResumeNode, target: ResumeNode, cut: CutStream, extra: Record<string, string>, retryUntil = 0): Promise<Replay> {
  const what = `the resume of call ${cut.id} on ${target === a ? 'A' : 'B'}`
  for (;;) {
    const sentAt = performance.now()
    const resumed = new SseCall(target.url, resumeRequest(cut.after, extra))
    try {
      const head = await withTimeout(resumed.head, TIMEOUT_MS + 2000, what)
      if (head.status !== 200 || !head.contentType.startsWith('text/event-stream')) {
        await withTimeout(resumed.ended, TIMEOUT_MS, what)
        if ((head.status === 503 || head.status === 409) && performance.now() < retryUntil) {
          await sleep(200)
          continue
        }
        throw new Error(`${what}: HTTP ${head.status} ${head.contentType}: ${resumed.text.slice(0, 300)}`)
      }
      await resumed.until(events => messages(events).length > 0, TIMEOUT_MS, what)
      const first = messages(resumed.events)[0]!
      const replay = { headMs: head.at - sentAt, eventMs: first.at - sentAt }
      await resumed.until(events => messages(events).length >= cut.missed.length, TIMEOUT_MS, `${what}: the replay`)
      await a.command({ type: 'release', tag: cut.tag })
      const { complete } = await withTimeout(resumed.ended, TIMEOUT_MS, `${what}: its end`)
      checkReplay(cut, resumed.events, complete, what)
      return replay
    } finally {
      resumed.destroy()
    }
  }
}

/** Throws unless `events` are (after any `retry:` alone) exactly the missed events, then the result under a new id, and the stream ended cleanly. */
function checkReplay (cut: CutStream, events: readonly SseEvent[], complete: boolean, what: string): void {
  let i = 0
  while (i < events.length && events[i]!.data === undefined && events[i]!.id === undefined && events[i]!.retry !== undefined) i++
  const rest = events.slice(i)
  const replayed = rest.slice(0, cut.missed.length)
  const result = rest[cut.missed.length]
  const shown = (): string => JSON.stringify(events.map(event => event.raw))
  if (!complete) throw new Error(`${what}: the stream did not end by itself after the result: ${shown()}`)
  if (replayed.length !== cut.missed.length || replayed.some((event, j) => event.raw !== cut.missed[j]!.raw)) {
    throw new Error(`${what}: replayed ${shown()}, expected exactly ${JSON.stringify(cut.missed.map(event => event.raw))} (after ${cut.after})`)
  }
  if (result === undefined || result.id === undefined || cut.ids.has(result.id) || result.data === undefined ||
    !isDeepStrictEqual(JSON.parse(result.data), toolResult(cut.id, `held ${cut.tag}`))) {
    throw new Error(`${what}: expected the result under a new id after the replay: ${shown()}`)
  }
  if (rest.length !== cut.missed.length + 1) throw new Error(`${what}: events after the result: ${shown()}`)
}

async function runReplay (config: BenchConfig, sessions: boolean): Promise<boolean> {
  const replays = envCount('BENCH_EVENTS', 200)
  const redis = await RedisServer.start(undefined).catch((error: unknown) => {
    throw new Error(`resume replay needs redis-server (apt-get install redis-server, or REDIS_SERVER=/path): ${String(error)}`)
  })
  try {
    console.log(`redis-server ${await redis.version()} on 127.0.0.1:${redis.port} (no persistence)`)
    const [a, b] = await Promise.all([
      ResumeNode.start(redis.url, sessions, config.nodeArgs, 'node A'),
      ResumeNode.start(redis.url, sessions, config.nodeArgs, 'node B')
    ])
    try {
      const extra: Record<string, string> = sessions ? { 'mcp-session-id': await startSession(a.url) } : {}
      console.log(`replay: nodes A ${a.url.host} (pid ${a.pid}) and B ${b.url.host} (pid ${b.pid}), ${sessions ? 'a legacy session minted on A' : 'stateless'}; ` +
        `${replays} resumes on each after ${WARM_UP_REPLAYS} of warm-up`)
      const ready = performance.now()
      await resumeStream(a, b, await cutStream(a, extra), extra, performance.now() + BUS_READY_MS)
      console.log(`the first cross-node resume went through after ${ms(performance.now() - ready)}`)
      if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`replay: the machine did not go quiet within ${config.quiet} s; measuring anyway`)
      const samples = { local: [] as Replay[], cross: [] as Replay[] }
      const pid = redis.pid
      let load = watchLoad([a.pid, b.pid, ...pid === undefined ? [] : [pid]])
      for (let i = 0; i < WARM_UP_REPLAYS + replays; i++) {
        if (i === WARM_UP_REPLAYS) load = watchLoad([a.pid, b.pid, ...pid === undefined ? [] : [pid]])
        for (const target of i % 2 === 0 ? [b, a] : [a, b]) {
          const replay = await resumeStream(a, target, await cutStream(a, extra), extra)
          if (i >= WARM_UP_REPLAYS) samples[target === a ? 'local' : 'cross'].push(replay)
        }
      }
      const loadReport = load.stop()
      const local = summarize(samples.local.map(r => r.eventMs))
      const cross = summarize(samples.cross.map(r => r.eventMs))
      console.log(`\n## GET with Last-Event-ID → its first replayed event read (${replays} resumes of each, ${HELD_PROGRESS - 1} events replayed, ${sessions ? 'with a session' : 'stateless'})\n`)
      printTable(['resume sent to', ...SUMMARY_HEADER, 'head p50 / p99'], [
        ['A, the node holding the stream (local)', ...summaryCells(local), headCells(samples.local)],
        ['B, through Redis (cross-node)', ...summaryCells(cross), headCells(samples.cross)]
      ])
      console.log(`\ncross-node p99 ${ms(cross.p99)} (goal ≤ ${GOAL_P99_MS} ms): ${cross.p99 <= GOAL_P99_MS ? 'MET' : 'NOT MET'}; ` +
        `every replay exact (${2 * (WARM_UP_REPLAYS + replays) + 1} checked); ${describeLoad(loadReport)} (nodes and redis-server excluded)`)
      return true
    } finally {
      await Promise.all([a.stop(), b.stop()])
    }
  } finally {
    await redis.stop()
  }
}

function headCells (replays: readonly Replay[]): string {
  const head = summarize(replays.map(r => r.headMs))
  return `${ms(head.p50)} / ${ms(head.p99)}`
}

// ---------------------------------------------------------------- 2. event-cost

/** servers/resume-cost.ts: two servers in one process, the ports of both over IPC. */
class CostServer extends ServerProcess {
  readonly #answers = new Map<number, (message: ResumeCostMessage) => void>()
  #seq = 0

  private constructor (child: ChildProcess, port: number) {
    super(child, port)
    child.on('message', (message: ResumeCostMessage) => {
      this.#answers.get(message.seq)?.(message)
      this.#answers.delete(message.seq)
    })
  }

  static async start (nodeArgs: readonly string[]): Promise<CostServer> {
    const { child, port } = await spawnServer(new URL('./servers/resume-cost.ts', import.meta.url), {}, nodeArgs, 'resume-cost')
    return new CostServer(child, port)
  }

  async command (command: DistributiveOmit<ResumeCostCommand, 'seq'>): Promise<ResumeCostMessage> {
    const seq = ++this.#seq
    const answer = new Promise<ResumeCostMessage>(resolve => { this.#answers.set(seq, resolve) })
    this.child.send({ ...command, seq })
    return await withTimeout(answer, TIMEOUT_MS, `${command.type} on resume-cost`)
  }

  async urls (): Promise<Record<Side, URL>> {
    const answer = await this.command({ type: 'ports' })
    if (answer.type !== 'ports') throw new Error('resume-cost: no ports')
    return { on: new URL(`http://127.0.0.1:${answer.on}/mcp`), off: new URL(`http://127.0.0.1:${answer.off}/mcp`) }
  }

  protected async clockAt (): Promise<number> {
    const answer = await this.command({ type: 'clock' })
    return answer.type === 'clock' ? answer.at : NaN
  }
}

type Side = 'on' | 'off'

/** Occurrences of `needle` in `text`. */
function occurrences (text: string, needle: string): number {
  let count = 0
  for (let i = text.indexOf(needle); i !== -1; i = text.indexOf(needle, i + needle.length)) count++
  return count
}

/** What is wrong with the answer to burst call `id` (of `count` events) from side `side`, cheaply; undefined when right. */
function burstFault (side: Side, status: number, contentType: string | undefined, body: string, id: number, count: number): string | undefined {
  if (status !== 200 || contentType?.startsWith('text/event-stream') !== true) return `HTTP ${status} ${String(contentType)}`
  if (occurrences(body, 'event: message\n') !== count + 1 || occurrences(body, '"notifications/progress"') !== count) return `not ${count} progress events and a result`
  const ids = occurrences(body, '\nid: ') + (body.startsWith('id: ') ? 1 : 0)
  if (side === 'on' && (ids !== count + 2 || !body.startsWith('id: ') || !body.includes('\nretry: '))) return `${ids} ids, expected ${count + 2} and the priming event first`
  if (side === 'off' && ids !== 0) return `${ids} ids, expected none (resumability: false)`
  const last = body.lastIndexOf('\ndata: ')
  try {
    if (last !== -1 && isDeepStrictEqual(JSON.parse(body.slice(last + 7)), toolResult(id, `${BURST_TOOL} ${count}`))) return undefined
  } catch {}
  return 'not the result last'
}

let burstIds = 0

/** One burst call on `agent`: its duration, or what was wrong. */
async function burstCall (url: URL, agent: http.Agent, side: Side, count: number): Promise<{ ms: number, bytes: number } | string> {
  const id = ++burstIds
  const { headers, body } = streamedCall(id, BURST_TOOL, { count })
  const started = performance.now()
  return await new Promise(resolve => {
    const request = http.request(url, { method: 'POST', agent, headers: { ...headers, 'content-length': String(Buffer.byteLength(body!)) } }, response => {
      const chunks: string[] = []
      response.setEncoding('latin1')
      response.on('data', (chunk: string) => { chunks.push(chunk) })
      response.on('end', () => {
        const text = chunks.join('')
        const fault = burstFault(side, response.statusCode ?? 0, response.headers['content-type'], text, id, count)
        resolve(fault ?? { ms: performance.now() - started, bytes: text.length })
      })
      response.on('error', error => { resolve(`the response failed: ${error.message}`) })
    })
    request.on('error', error => { resolve(`the request failed: ${error.message}`) })
    request.end(body)
  })
}

/** The up-front check of a side: one call parsed whole, every event in order, ids (distinct) exactly where resumability is on. */
async function checkBurst (url: URL, side: Side, count: number): Promise<number> {
  const id = ++burstIds
  const call = new SseCall(url, streamedCall(id, BURST_TOOL, { count }))
  const { complete } = await withTimeout(call.ended, TIMEOUT_MS, `the check call on ${side}`)
  const all = call.events
  const events = messages(all)
  const progress = events.slice(0, -1).map(event => (JSON.parse(event.data!) as { params?: { progress?: number } }).params?.progress)
  const ids = new Set(all.map(event => event.id))
  const fine = complete && events.length === count + 1 &&
    isDeepStrictEqual(progress, Array.from({ length: count }, (_, i) => i + 1)) &&
    isDeepStrictEqual(JSON.parse(events.at(-1)!.data!), toolResult(id, `${BURST_TOOL} ${count}`)) &&
    (side === 'on'
      ? all.length === count + 2 && all[0]!.data === '' && all[0]!.retry !== undefined && ids.size === all.length && !ids.has(undefined)
      : all.length === count + 1 && ids.size === 1 && ids.has(undefined))
  if (!fine) throw new Error(`the check call on ${side} (resumability ${side === 'on' ? 'on' : 'false'}): ${JSON.stringify(call.text.slice(0, 1000))}`)
  return call.text.length
}

interface CostRound {
  side: Side
  seconds: number
  calls: number
  eventsPerSec: number
  callP50Ms: number
  callP99Ms: number
  /** The server process's CPU per 1 000 progress events delivered, ms. */
  cpuPerThousandMs: number | undefined
  cores: { server: number, bench: number, other: number } | undefined
}

/** `callers` callers, each calling burst in a loop on its own keep-alive connection for `seconds`; every answer checked. */
async function closedLoop (url: URL, side: Side, callers: number, seconds: number, count: number): Promise<{ durations: number[], elapsed: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: callers })
  const durations: number[] = []
  const started = performance.now()
  const deadline = started + seconds * 1000
  try {
    await Promise.all(Array.from({ length: callers }, async () => {
      while (performance.now() < deadline) {
        const answer = await burstCall(url, agent, side, count)
        if (typeof answer === 'string') throw new Error(`burst call on ${side}: ${answer}`)
        durations.push(answer.ms)
      }
    }))
  } finally {
    agent.destroy()
  }
  return { durations, elapsed: (performance.now() - started) / 1000 }
}

async function costRound (config: BenchConfig, server: CostServer, url: URL, side: Side, callers: number, count: number): Promise<CostRound> {
  if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`event-cost ${side}: the machine did not go quiet within ${config.quiet} s; measuring anyway`)
  console.log(`${side}: warm-up ${config.warmup} s, measuring ${config.duration} s…`)
  if (config.warmup > 0) await closedLoop(url, side, callers, config.warmup, count)
  const noise = watchNoise(server.pid)
  const { durations, elapsed } = await closedLoop(url, side, callers, config.duration, count)
  const cpu = noise.stop()
  const events = durations.length * count
  const latency = summarize(durations)
  return {
    side,
    seconds: elapsed,
    calls: durations.length,
    eventsPerSec: events / elapsed,
    callP50Ms: latency.p50,
    callP99Ms: latency.p99,
    cpuPerThousandMs: cpu === undefined || events === 0 ? undefined : cpu.serverCores * cpu.seconds * 1e6 / events,
    cores: cpu === undefined ? undefined : { server: cpu.serverCores, bench: cpu.benchCores, other: cpu.otherCores }
  }
}

async function runEventCost (config: BenchConfig, pairs: number): Promise<boolean> {
  const count = envCount('BENCH_BURST_EVENTS', 200)
  const callers = process.env.BENCH_CONNECTIONS === undefined || process.env.BENCH_CONNECTIONS === '' ? DEFAULT_CALLERS : config.connections
  const server = await CostServer.start(config.nodeArgs)
  try {
    const urls = await server.urls()
    const bytes = { on: await checkBurst(urls.on, 'on', count), off: await checkBurst(urls.off, 'off', count) }
    console.log(`event-cost: servers/resume-cost.ts, pid ${server.pid}: resumability on ${urls.on.host}, false ${urls.off.host}; ` +
      `answers checked (${fmt.int(bytes.on)} and ${fmt.int(bytes.off)} bytes for ${count} events); ${callers} callers, ${pairs} pair(s)`)
    const order = Array.from({ length: pairs }, (_, i) => i % 2 === 0 ? ['off', 'on'] as const : ['on', 'off'] as const).flat()
    const rounds: CostRound[] = []
    for (const side of order) rounds.push(await costRound(config, server, urls[side], side, callers, count))

    const quiet = (r: CostRound): boolean => r.cores !== undefined && r.cores.other <= NOISE_LIMIT_CORES
    const cpu = (r: CostRound): string => r.cpuPerThousandMs === undefined ? 'n/a' : ms(r.cpuPerThousandMs)
    console.log(`\n## cost of ids and buffering per streamed event: tools/call ${BURST_TOOL} (${count} progress events at once), ${callers} callers, ${config.duration} s per round\n`)
    printTable(['round', 'resumability', 'progress events/s', 'calls/s', 'call p50 / p99', 'server CPU per 1 000 events', 'cores server / bench / other'], rounds.map((r, i) => [
      String(i + 1), r.side === 'on' ? 'on (defaults)' : 'false', fmt.int(r.eventsPerSec), fmt.int(r.calls / r.seconds), `${ms(r.callP50Ms)} / ${ms(r.callP99Ms)}`, cpu(r),
      r.cores === undefined ? 'n/a' : [r.cores.server, r.cores.bench, r.cores.other].map(c => c.toFixed(2)).join(' / ')
    ]))
    const pairsOf = Array.from({ length: pairs }, (_, i) => {
      const [x, y] = [rounds[2 * i]!, rounds[2 * i + 1]!]
      return x.side === 'on' ? { on: x, off: y } : { on: y, off: x }
    })
    const cpuRatio = (p: { on: CostRound, off: CostRound }): number | undefined =>
      p.on.cpuPerThousandMs === undefined || p.off.cpuPerThousandMs === undefined ? undefined : p.on.cpuPerThousandMs / p.off.cpuPerThousandMs
    console.log('')
    printTable(['pair', 'on events/s', 'off events/s', 'on ÷ off events/s', 'on ÷ off CPU per event', 'quiet (other ≤ 0.1 core)'], pairsOf.map((p, i) => {
      const ratio = cpuRatio(p)
      return [String(i + 1), fmt.int(p.on.eventsPerSec), fmt.int(p.off.eventsPerSec), `${(p.on.eventsPerSec / p.off.eventsPerSec).toFixed(3)}×`,
        ratio === undefined ? 'n/a' : `${ratio.toFixed(3)}×`, quiet(p.on) && quiet(p.off) ? 'yes' : 'no']
    }))
    const rpsRatio = median(pairsOf.map(p => p.on.eventsPerSec / p.off.eventsPerSec))
    const cpuRatios = pairsOf.flatMap(p => { const ratio = cpuRatio(p); return ratio === undefined ? [] : [ratio] })
    const side = (name: Side, pick: (r: CostRound) => number | undefined): number => median(rounds.filter(r => r.side === name).flatMap(r => { const v = pick(r); return v === undefined ? [] : [v] }))
    console.log(`\nmedian round: on ${fmt.int(side('on', r => r.eventsPerSec))} events/s, ${ms(side('on', r => r.cpuPerThousandMs))} of server CPU per 1 000; ` +
      `off ${fmt.int(side('off', r => r.eventsPerSec))} events/s, ${ms(side('off', r => r.cpuPerThousandMs))}`)
    console.log(`median over pairs: on ÷ off = ${rpsRatio.toFixed(3)}× by events/s` + (cpuRatios.length === 0 ? '' : `, ${median(cpuRatios).toFixed(3)}× by server CPU per event`) +
      ' (information, no goal)')
    const noisy = rounds.filter(r => !quiet(r)).length
    if (noisy > 0) console.error(`\nWARNING: other processes used > ${NOISE_LIMIT_CORES} core during ${noisy} of ${rounds.length} round(s); rerun on a quiet machine.`)
    return true
  } finally {
    await server.stop()
  }
}

// ----------------------------------------------------------------

const PARTS = ['replay', 'event-cost'] as const

const resume: Benchmark = {
  description: 'resumable legacy streams: Last-Event-ID → first replayed event, locally and from another node through Redis (goal cross-node p99 ≤ 20 ms), and the cost of ids and buffering per streamed event',
  async run (config, args) {
    const words = args.filter(arg => !/^\d+$/.test(arg))
    const unknown = words.filter(arg => arg !== 'sessions' && !(PARTS as readonly string[]).includes(arg))
    if (unknown.length > 0) throw new Error(`unknown part(s) ${unknown.join(', ')}; known: ${PARTS.join(', ')} (and the word sessions)`)
    const named = PARTS.filter(part => words.includes(part))
    const parts = named.length > 0 ? named : PARTS
    const pairs = pairCount(args.find(arg => /^\d+$/.test(arg)))
    printLatencyEnvironment()
    const entry = process.env.BENCH_PLUGIN_ENTRY
    if (entry !== undefined && entry !== '') console.log(`plugin from BENCH_PLUGIN_ENTRY=${entry}`)
    let ok = true
    if (parts.includes('replay')) ok = await runReplay(config, words.includes('sessions')) && ok
    if (parts.includes('event-cost')) ok = await runEventCost(config, pairs) && ok
    return ok
  }
}

export default resume
