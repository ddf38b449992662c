/**
 * How fast a client's disconnect, and a worker tool's kill, stop the work on the server (demo app,
 * servers/probe.ts, in a process of its own; this process is the raw HTTP client):
 *
 * 1. disconnect: a raw `node:http` client POSTs `tools/call probe-sleep` (the demo's `sleep`,
 *    instrumented) with a progressToken, so the answer is an SSE stream (legacy era, 2025-11-25, whose
 *    `disconnectCancels` defaults to true); it waits for the first event (the first progress
 *    notification), then destroys its socket. Measured on the server, on its own clock: from the
 *    `'close'` event of the response (a listener added in an `onRequest` hook, so it runs before the
 *    plugin's) to the `abort` event of the tool's `ctx.signal`. 1000 disconnects after 50 of warm-up,
 *    each on a fresh connection. Goal: p99 ≤ 5 ms. Also shown: from the client's `destroy()` to that
 *    event, the clocks aligned over IPC (as in cross-node.ts).
 * 2. kill: the demo's `spin` tool (a busy loop in a Piscina worker thread that never checks its
 *    cancellation), with cancelTimeoutMs 100. Each round first runs a 10 ms spin, so the pool has a
 *    thread with the tool loaded (the previous one was killed), then a 60 s spin, waits until that
 *    thread's event loop has been busy for 30 ms (its event-loop utilisation, read from the main
 *    thread), and POSTs `notifications/cancelled`. Measured on the server: the kill timer's lateness
 *    (when `terminate()` reaches the thread, minus cancel + 100 ms), then the thread's `'exit'` event
 *    and the in-flight row's disappearance after that terminate. 50 kills after 3 of warm-up. As a
 *    baseline for the thread's exit, 20 bare `Worker`s (an eval'd busy loop) are terminated the same way.
 *
 * `npm run bench -- disconnect-latency [disconnect] [kill]` (default both). BENCH_DISCONNECTS overrides
 * 1000, BENCH_KILLS 50.
 */
import http from 'node:http'
import { once } from 'node:events'
import { Worker } from 'node:worker_threads'
import type { Benchmark } from './support/benchmark.js'
import type { BenchConfig } from './support/config.js'
import { describeLoad, envCount, ms, printLatencyEnvironment, summarize, summaryCells, SUMMARY_HEADER, watchLoad, withTimeout } from './support/latency.js'
import { waitForQuiet } from './support/noise.js'
import { epochNow, ProbeProcess } from './support/probe-process.js'
import { printTable } from './support/report.js'

const GOAL_DISCONNECT_P99_MS = 5
const WARM_UP_DISCONNECTS = 50
const WARM_UP_KILLS = 3
const KILL_CANCEL_TIMEOUT_MS = 100
/** How long the spinning thread must have been busy before it is cancelled. */
const SPIN_BUSY_MS = 30
const TIMEOUT_MS = 5000
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' }

function toolCall (id: string, name: string, args: Record<string, unknown>, progressToken?: string): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, ...(progressToken === undefined ? {} : { _meta: { progressToken } }) } })
}

/** One POST on a fresh connection; resolves with the status and the whole body. */
async function post (url: URL, body: string): Promise<{ status: number, body: string }> {
  return await new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', agent: false, headers: { ...HEADERS, 'content-length': String(Buffer.byteLength(body)) } }, response => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => { resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }) })
      response.on('error', reject)
    })
    request.on('error', reject)
    request.end(body)
  })
}

// --- 1. disconnect ---------------------------------------------------------------------------------

interface DisconnectSample { fromCloseMs: number, endToEndMs: number }

async function disconnectOnce (server: ProbeProcess, tag: string): Promise<DisconnectSample> {
  const aborted = server.next('aborted', tag)
  const body = toolCall(tag, 'probe-sleep', { ms: 60_000, tag }, tag)
  const request = http.request(server.url, { method: 'POST', agent: false, headers: { ...HEADERS, 'content-length': String(Buffer.byteLength(body)) } })
  const firstEvent = new Promise<string>((resolve, reject) => {
    request.on('response', response => {
      if (response.statusCode !== 200 || !/^text\/event-stream\b/.test(response.headers['content-type'] ?? '')) {
        reject(new Error(`${tag}: answered ${response.statusCode} ${response.headers['content-type']}, expected an SSE stream`))
      }
      response.once('data', (chunk: Buffer) => { resolve(chunk.toString('utf8')) })
      response.on('error', () => {}) // the abort below
    })
    request.on('error', reject)
  })
  request.end(body)
  let event: string
  try {
    event = await withTimeout(firstEvent, TIMEOUT_MS, `first event of ${tag}`)
  } catch (error) {
    server.forget('aborted', tag)
    request.destroy()
    throw error
  }
  if (!event.includes('notifications/progress')) throw new Error(`${tag}: the first event is not a progress notification: ${event.slice(0, 200)}`)
  request.on('error', () => {})
  const destroyedAt = epochNow()
  request.destroy()
  const message = await withTimeout(aborted, TIMEOUT_MS, `abort of ${tag} after the disconnect`)
  if (message.source !== 'disconnect') throw new Error(`${tag}: cancelled with source ${String(message.source)}, expected disconnect`)
  if (message.fromCloseMs === undefined) throw new Error(`${tag}: the server saw no 'close' of the response before the abort`)
  return { fromCloseMs: message.fromCloseMs, endToEndMs: message.abortedAt + server.offsetMs - destroyedAt }
}

async function runDisconnects (config: BenchConfig, count: number): Promise<void> {
  const server = await ProbeProcess.start({}, config.nodeArgs)
  try {
    await server.syncClock()
    console.log(`disconnect: server servers/probe.ts (demo app), pid ${server.pid}; raw node:http client in this process (pid ${process.pid}), a fresh connection per call`)
    if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`the machine did not go quiet within ${config.quiet} s; measuring anyway`)
    for (let i = 0; i < WARM_UP_DISCONNECTS; i++) await disconnectOnce(server, `warm-${i}`)
    const load = watchLoad([server.pid])
    const samples: DisconnectSample[] = []
    for (let i = 0; i < count; i++) samples.push(await disconnectOnce(server, `d-${i}`))
    const loadReport = load.stop()
    const rtt = server.offsetRttMs

    const fromClose = summarize(samples.map(s => s.fromCloseMs))
    const endToEnd = summarize(samples.map(s => s.endToEndMs))
    console.log(`\n## disconnect latency: SSE tools/call, client destroys its socket after the first event (${samples.length} disconnects, sequential, loopback)\n`)
    printTable(['interval', ...SUMMARY_HEADER], [
      ["response 'close' → ctx.signal abort, server clock", ...summaryCells(fromClose)],
      [`client destroy() → ctx.signal abort, clocks aligned ±${(rtt / 2).toFixed(3)} ms`, ...summaryCells(endToEnd)]
    ])
    console.log(`\np99 ${ms(fromClose.p99)} (goal ≤ ${GOAL_DISCONNECT_P99_MS} ms): ${fromClose.p99 <= GOAL_DISCONNECT_P99_MS ? 'MET' : 'NOT MET'}; ${describeLoad(loadReport)}`)
  } finally {
    await server.stop()
  }
}

// --- 2. kill ---------------------------------------------------------------------------------------

interface KillSample { timerLateMs: number, exitAfterTerminateMs: number, rowGoneAfterTerminateMs: number, exitAfterCancelMs: number, waitedMs: number }

async function killOnce (server: ProbeProcess, n: string): Promise<KillSample> {
  const warm = await post(server.url, toolCall(`warm-${n}`, 'spin', { ms: 10 }))
  if (warm.status !== 200 || !warm.body.includes('spun 10 ms')) throw new Error(`warm-${n}: answered ${warm.status} ${warm.body.slice(0, 200)}`)
  const id = `k-${n}`
  const spinning = server.next('spinning', id)
  const killed = server.next('killed', id)
  server.send({ type: 'watch-kill', id })
  const call = post(server.url, toolCall(id, 'spin', { ms: 60_000 }))
  call.catch(() => {})
  server.send({ type: 'await-spin', id, busyMs: SPIN_BUSY_MS })
  const spun = await withTimeout(spinning, 15_000, `${id} spinning`)
  const cancel = await post(server.url, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'bench' } }))
  if (cancel.status !== 202) throw new Error(`cancel of ${id}: answered ${cancel.status}`)
  const answer = await withTimeout(call, TIMEOUT_MS, `answer of ${id}`)
  if (answer.status !== 202) throw new Error(`${id}: the cancelled call was answered ${answer.status}, expected 202`)
  const report = await withTimeout(killed, KILL_CANCEL_TIMEOUT_MS + 15_000, `kill of ${id}`)
  if (report.error !== undefined) throw new Error(`${id}: ${report.error}`)
  if (report.exitCode !== 1) throw new Error(`${id}: the thread exited with code ${String(report.exitCode)}, expected 1 (terminated)`)
  const { timerLateMs, exitAfterTerminateMs, rowGoneAfterTerminateMs, exitAfterCancelMs } = report
  if (timerLateMs === undefined || exitAfterTerminateMs === undefined || rowGoneAfterTerminateMs === undefined || exitAfterCancelMs === undefined) {
    throw new Error(`${id}: incomplete kill report ${JSON.stringify(report)}`)
  }
  return { timerLateMs, exitAfterTerminateMs, rowGoneAfterTerminateMs, exitAfterCancelMs, waitedMs: spun.waitedMs }
}

/**
 * Baseline for the thread's exit: a bare `Worker` (an eval'd busy loop, no Piscina, no loader, no
 * server) started in this process, terminated while it spins; terminate() → 'exit' event.
 */
async function bareWorkerExits (count: number): Promise<number[]> {
  const samples: number[] = []
  for (let i = 0; i < count; i++) {
    const worker = new Worker('require("node:worker_threads").parentPort.postMessage("up"); const end = Date.now() + 60000; while (Date.now() < end);', { eval: true })
    await once(worker, 'message')
    await new Promise(resolve => setTimeout(resolve, SPIN_BUSY_MS))
    const exited = once(worker, 'exit')
    const terminatedAt = performance.now()
    void worker.terminate()
    await exited
    samples.push(performance.now() - terminatedAt)
  }
  return samples
}

async function runKills (config: BenchConfig, count: number): Promise<void> {
  const server = await ProbeProcess.start({ BENCH_CANCEL_TIMEOUT_MS: String(KILL_CANCEL_TIMEOUT_MS) }, config.nodeArgs)
  try {
    console.log(`kill: server servers/probe.ts (demo app, cancelTimeoutMs ${KILL_CANCEL_TIMEOUT_MS}), pid ${server.pid}; raw node:http client in this process`)
    if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`the machine did not go quiet within ${config.quiet} s; measuring anyway`)
    for (let i = 0; i < WARM_UP_KILLS; i++) await killOnce(server, `warm-${i}`)
    const load = watchLoad([server.pid])
    const samples: KillSample[] = []
    for (let i = 0; i < count; i++) samples.push(await killOnce(server, String(i)))
    const loadReport = load.stop()
    const bare = await bareWorkerExits(20)

    console.log(`\n## kill latency: spin (worker thread) cancelled, cancelTimeoutMs ${KILL_CANCEL_TIMEOUT_MS} (${samples.length} kills, sequential)\n`)
    const row = (label: string, pick: (s: KillSample) => number): string[] => [label, ...summaryCells(summarize(samples.map(pick)))]
    printTable(['interval (server clock)', ...SUMMARY_HEADER], [
      row(`kill timer lateness: terminate() call − (cancel + ${KILL_CANCEL_TIMEOUT_MS} ms)`, s => s.timerLateMs),
      row("terminate() → thread 'exit' event", s => s.exitAfterTerminateMs),
      row('terminate() → in-flight row gone (first event-loop turn after)', s => s.rowGoneAfterTerminateMs),
      row('kill timer due → thread exit (lateness + exit)', s => s.timerLateMs + s.exitAfterTerminateMs),
      row("cancel → thread 'exit' event (total)", s => s.exitAfterCancelMs),
      ["baseline: bare Worker (eval'd busy loop) in the client process, terminate() → 'exit' (20 threads)", ...summaryCells(summarize(bare))]
    ])
    const waited = summarize(samples.map(s => s.waitedMs))
    console.log(`\nthe thread was spinning before each cancel (busy ≥ ${SPIN_BUSY_MS} ms; ${ms(waited.p50)} median from the call to the cancel); ${describeLoad(loadReport)}`)
  } finally {
    await server.stop()
  }
}

const PARTS = ['disconnect', 'kill'] as const

const disconnectLatency: Benchmark = {
  description: "client disconnect → ctx.signal abort (goal p99 ≤ 5 ms), and a worker tool's kill: kill timer → thread exit",
  async run (config, args) {
    const unknown = args.filter(arg => !(PARTS as readonly string[]).includes(arg))
    if (unknown.length > 0) throw new Error(`unknown part(s) ${unknown.join(', ')}; known: ${PARTS.join(', ')}`)
    const parts = args.length > 0 ? args : PARTS
    const disconnects = envCount('BENCH_DISCONNECTS', 1000)
    const kills = envCount('BENCH_KILLS', 50)
    printLatencyEnvironment()
    if (parts.includes('disconnect')) await runDisconnects(config, disconnects)
    if (parts.includes('kill')) await runKills(config, kills)
    return true
  }
}

export default disconnectLatency
