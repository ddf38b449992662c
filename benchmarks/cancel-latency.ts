/**
 * Cancel latency with the official SDK 1.x client: `Client` + `StreamableHTTPClientTransport` from
 * @modelcontextprotocol/sdk call `probe-sleep` (the demo's `sleep` tool, instrumented: see
 * servers/probe.ts) with `callTool(…, { signal })`; aborting the signal makes the SDK POST
 * `notifications/cancelled` (legacy era, 2025-11-25, loopback). 1000 cancels one after another, after 50
 * of warm-up.
 *
 * Measured on the server, on its own clock: from the arrival of the cancel POST (an `onRequest` hook
 * notes `performance.now()`; a `preHandler` hook recognises the POST by its body, matched afterwards
 * to the request it cancels) to the `abort` event of the tool's `ctx.signal`. Goal: p99 ≤ 2 ms.
 * Also shown: from the client's `abort()` to that event (end to end: the SDK's send, fetch, loopback),
 * the two processes' clocks aligned over IPC as in cross-node.ts.
 *
 * Server and client run in separate processes (the server is servers/probe.ts; this process is the
 * client), so the server's event loop never waits for the client's and vice versa.
 *
 * `npm run bench -- cancel-latency`. BENCH_CANCELS overrides 1000.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Benchmark } from './support/benchmark.js'
import { describeLoad, envCount, ms, printLatencyEnvironment, summarize, summaryCells, SUMMARY_HEADER, watchLoad, withTimeout } from './support/latency.js'
import { waitForQuiet } from './support/noise.js'
import { epochNow, ProbeProcess } from './support/probe-process.js'
import { printTable } from './support/report.js'

const GOAL_P99_MS = 2
const WARM_UP_CANCELS = 50
const TIMEOUT_MS = 5000

interface Sample { serverMs: number, pluginMs: number, endToEndMs: number }

async function cancelOnce (server: ProbeProcess, client: Client, tag: string): Promise<Sample> {
  const started = server.next('started', tag)
  const aborted = server.next('aborted', tag)
  const controller = new AbortController()
  const call = client.callTool({ name: 'probe-sleep', arguments: { ms: 60_000, tag } }, undefined, { signal: controller.signal })
  const outcome = call.then(() => undefined, (error: unknown) => error)
  try {
    await withTimeout(started, TIMEOUT_MS, `call ${tag}`)
  } catch (error) {
    server.forget('aborted', tag)
    controller.abort('gave up')
    throw error
  }
  const abortCalledAt = epochNow()
  controller.abort('bench')
  const message = await withTimeout(aborted, TIMEOUT_MS, `cancel of ${tag}`)
  const error = await outcome
  if (error === undefined) throw new Error(`${tag}: the aborted callTool resolved`)
  if (message.source !== 'client') throw new Error(`${tag}: cancelled with source ${String(message.source)}, expected client`)
  if (message.fromCancelArrivalMs === undefined || message.fromCancelPreHandlerMs === undefined) throw new Error(`${tag}: the server saw no notifications/cancelled POST for it`)
  return { serverMs: message.fromCancelArrivalMs, pluginMs: message.fromCancelPreHandlerMs, endToEndMs: message.abortedAt + server.offsetMs - abortCalledAt }
}

const cancelLatency: Benchmark = {
  description: 'cancel POST arrival → ctx.signal abort with the SDK 1.x client (goal p99 ≤ 2 ms)',
  async run (config, args) {
    if (args.length > 0) throw new Error(`cancel-latency takes no arguments, got ${args.join(' ')}`)
    const cancels = envCount('BENCH_CANCELS', 1000)
    printLatencyEnvironment()
    const server = await ProbeProcess.start({}, config.nodeArgs)
    const client = new Client({ name: 'bench-cancel-latency', version: '1.0.0' })
    const transport = new StreamableHTTPClientTransport(server.url)
    try {
      await client.connect(transport)
      await server.syncClock()
      console.log(`server: servers/probe.ts (demo app), pid ${server.pid}, ${server.url.href}; client: SDK 1.x in this process (pid ${process.pid}), ` +
        `protocol ${transport.protocolVersion ?? 'unknown'}; clock offset ±${(server.offsetRttMs / 2).toFixed(3)} ms`)
      if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`the machine did not go quiet within ${config.quiet} s; measuring anyway`)
      for (let i = 0; i < WARM_UP_CANCELS; i++) await cancelOnce(server, client, `warm-${i}`)
      const load = watchLoad([server.pid])
      const samples: Sample[] = []
      for (let i = 0; i < cancels; i++) samples.push(await cancelOnce(server, client, `c-${i}`))
      const loadReport = load.stop()
      const rtt = server.offsetRttMs

      const onServer = summarize(samples.map(s => s.serverMs))
      const plugin = summarize(samples.map(s => s.pluginMs))
      const endToEnd = summarize(samples.map(s => s.endToEndMs))
      console.log(`\n## cancel latency, SDK 1.x client → demo server (${samples.length} cancels, sequential, loopback, separate processes)\n`)
      printTable(['interval', ...SUMMARY_HEADER], [
        ['cancel POST arrival (onRequest) → ctx.signal abort, server clock', ...summaryCells(onServer)],
        ['of which: body read (preHandler) → ctx.signal abort', ...summaryCells(plugin)],
        [`client abort() → ctx.signal abort, clocks aligned ±${(rtt / 2).toFixed(3)} ms`, ...summaryCells(endToEnd)]
      ])
      console.log(`\np99 ${ms(onServer.p99)} (goal ≤ ${GOAL_P99_MS} ms): ${onServer.p99 <= GOAL_P99_MS ? 'MET' : 'NOT MET'}; ${describeLoad(loadReport)}`)
      return true
    } finally {
      await client.close().catch(() => {})
      await server.stop()
    }
  }
}

export default cancelLatency
