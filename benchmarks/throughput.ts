/**
 * Throughput of `tools/call` → `echo` over stateless Streamable HTTP, one server process at a time:
 *
 * - plugin: this plugin, default options (responseMode 'auto'; echo emits nothing, so it answers JSON)
 * - bare: a bare Fastify route returning the same JSON-RPC result (the ceiling)
 * - sdk-stateless: the official SDK 1.x stateless pattern (new McpServer + transport per request, Express)
 * - sdk-stateless-fastify: the same SDK handler in a bare Fastify route (supplementary)
 *
 * Goals: plugin ≥ 0.8 × bare and ≥ 15 × sdk-stateless.
 */
import type { Benchmark } from './support/benchmark.js'
import type { BenchConfig } from './support/config.js'
import { echoRound } from './support/echo-round.js'
import { failures, type Round } from './support/load.js'
import { fmt, printEnvironment, printTable } from './support/report.js'

const SCENARIOS: Record<string, string> = {
  plugin: 'fastify-mcp-cancellation, defaults, echo tool',
  bare: 'bare Fastify route, same JSON',
  'sdk-stateless': 'SDK 1.x stateless pattern (Express)',
  'sdk-stateless-fastify': 'SDK 1.x stateless handler in Fastify'
}

const GOALS = [
  { against: 'bare', min: 0.8 },
  { against: 'sdk-stateless', min: 15 }
] as const

/** CPU (in cores) other processes may use during a round before its figures are flagged. */
const NOISE_LIMIT_CORES = 0.1


async function runScenario (name: string, config: BenchConfig): Promise<Round> {
  return await echoRound(name, config)
}

/** The round with the median req/s (the lower middle one for an even count). */
function median (list: readonly Round[]): Round {
  const sorted = [...list].sort((a, b) => a.reqPerSec - b.reqPerSec)
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}

const throughput: Benchmark = {
  description: 'tools/call echo: plugin vs bare Fastify vs the SDK 1.x stateless pattern',
  async run (config, args) {
    const unknown = args.filter(a => !(a in SCENARIOS))
    if (unknown.length > 0) throw new Error(`unknown scenario(s) ${unknown.join(', ')}; known: ${Object.keys(SCENARIOS).join(', ')}`)
    const names = args.length > 0 ? args : Object.keys(SCENARIOS)

    printEnvironment(config)
    // With BENCH_ROUNDS > 1 the scenarios are interleaved (a, b, c, a, b, c…) so a slow spell of a
    // shared machine hits all of them, and each is reported by its median round.
    const all = new Map<string, Round[]>(names.map(name => [name, []]))
    for (let pass = 1; pass <= config.rounds; pass++) {
      for (const name of names) {
        if (config.rounds > 1) process.stdout.write(`[round ${pass}/${config.rounds}] `)
        all.get(name)!.push(await runScenario(name, config))
      }
    }
    const rounds = new Map([...all].map(([name, list]) => [name, median(list)]))

    const plugin = rounds.get('plugin')
    console.log(`\n## throughput: POST /mcp tools/call echo, ${config.connections} connections, ${config.duration} s` +
      (config.rounds > 1 ? `, median of ${config.rounds} interleaved rounds` : '') + '\n')
    printTable(
      ['scenario', 'req/s', ...(config.rounds > 1 ? ['req/s, all rounds'] : []), 'p50', 'p99', 'max', 'requests', 'errors', 'timeouts', 'non2xx', 'mismatches', 'CPU server/autocannon/other', 'server CPU/req', 'plugin ÷ this'],
      [...rounds].map(([name, r]) => [
        name, fmt.int(r.reqPerSec),
        ...(config.rounds > 1 ? [all.get(name)!.map(x => fmt.int(x.reqPerSec)).join(', ')] : []),
        fmt.ms(r.p50Ms), fmt.ms(r.p99Ms), fmt.ms(r.maxMs), fmt.int(r.total),
        String(r.errors), String(r.timeouts), String(r.non2xx), String(r.mismatches),
        r.cpu === undefined ? 'n/a' : `${r.cpu.server.toFixed(2)} / ${r.cpu.bench.toFixed(2)} / ${r.cpu.other.toFixed(2)}`,
        r.serverCpuPerRequestUs === undefined ? 'n/a' : `${fmt.int(r.serverCpuPerRequestUs)} µs`,
        plugin === undefined ? '' : fmt.ratio(plugin.reqPerSec / r.reqPerSec)
      ])
    )

    console.log('\nreq/s: mean of per-second samples; latencies at 1 ms resolution; CPU: cores used during the measured round;\nserver CPU/req: the server process\'s CPU time (all threads, GC included) per request (less disturbed by other load than req/s).')
    if (plugin !== undefined) {
      console.log('')
      for (const goal of GOALS) {
        const other = rounds.get(goal.against)
        if (other === undefined) continue
        const ratio = plugin.reqPerSec / other.reqPerSec
        const cost = plugin.serverCpuPerRequestUs !== undefined && other.serverCpuPerRequestUs !== undefined
          ? `; by server CPU per request ${fmt.ratio(other.serverCpuPerRequestUs / plugin.serverCpuPerRequestUs)}`
          : ''
        console.log(`plugin / ${goal.against} = ${fmt.ratio(ratio)} (goal ≥ ${goal.min}×): ${ratio >= goal.min ? 'MET' : 'NOT MET'}${cost}`)
      }
    }

    const broken = [...all].filter(([, list]) => list.some(r => failures(r) > 0)).map(([name]) => name)
    if (broken.length > 0) console.error(`\nWARNING: errors, timeouts, non-2xx or mismatched bodies in: ${broken.join(', ')}; those figures are not comparable.`)
    const noisy = [...all].filter(([, list]) => list.some(r => r.cpu !== undefined && r.cpu.other > NOISE_LIMIT_CORES)).map(([name]) => name)
    if (noisy.length > 0) console.error(`\nWARNING: other processes used > ${NOISE_LIMIT_CORES} core during: ${noisy.join(', ')}; rerun on a quiet machine.`)
    return broken.length === 0
  }
}

export default throughput
