/**
 * What the Prometheus metrics cost on the hot path: `tools/call` → `echo` against the plugin with its
 * default metrics (servers/plugin.ts) and with `metrics: false` (servers/plugin-no-metrics.ts), in the
 * same run. Rounds alternate off/on/on/off… (each a fresh server process), so drift over the run (heat,
 * other load) falls on both sides equally; the headline is the median, over back-to-back off/on pairs,
 * of the on ÷ off ratio.
 *
 * Throughput on a shared 2-core machine is noisy, so the run also times, in this process, exactly the
 * observer calls the dispatcher makes for one successful tool call (in-flight +1/−1, request counter
 * and duration histogram, tool counter) on the Prometheus observer and on the no-op one: a per-request
 * cost that other load barely moves, set against the server CPU per request measured with metrics off.
 *
 * `npm run bench -- metrics-cost [pairs]` (default 5 pairs). Goal: metrics cost < 5 % of throughput.
 */
import { noopObserver, type RequestObserver } from '../lib/metrics/observer.js'
import { PrometheusObserver } from '../lib/metrics/prometheus.js'
import type { Benchmark } from './support/benchmark.js'
import type { BenchConfig } from './support/config.js'
import { echoRound } from './support/echo-round.js'
import { failures, type Round } from './support/load.js'
import { fmt, printEnvironment, printTable } from './support/report.js'

const ON = 'plugin'
const OFF = 'plugin-no-metrics'
/** Highest acceptable cost of metrics, as a fraction of the throughput without them. */
const MAX_COST = 0.05
/** CPU (in cores) other processes may use during a round before its figures are flagged. */
const NOISE_LIMIT_CORES = 0.1


interface Measured { name: string, round: Round }

async function runRound (name: string, config: BenchConfig): Promise<Round> {
  return await echoRound(name, config, async origin => {
    // The metrics route must exist exactly when metrics are on, or the comparison is meaningless.
    const scrape = await fetch(new URL('/metrics', origin))
    const text = await scrape.text()
    if (name === ON && (scrape.status !== 200 || !text.includes('mcp_requests_total{method="tools/call",outcome="ok"} 1'))) {
      throw new Error(`${name}: /metrics does not count the check call (status ${scrape.status})`)
    }
    if (name === OFF && scrape.status !== 404) throw new Error(`${name}: /metrics answered ${scrape.status}, expected 404 with metrics off`)
  })
}

/** Nanoseconds per request of the observer calls one successful `tools/call` makes (best of 5 runs). */
function observerNsPerRequest (observer: RequestObserver, iterations = 1_000_000): number {
  let best = Infinity
  for (let run = 0; run < 5; run++) {
    const started = process.hrtime.bigint()
    for (let i = 0; i < iterations; i++) {
      observer.inFlight(1)
      observer.inFlight(-1)
      observer.requestFinished('tools/call', 'ok', 0.0004)
      observer.toolFinished('echo', 'ok')
    }
    best = Math.min(best, Number(process.hrtime.bigint() - started) / iterations)
  }
  return best
}

function median (values: readonly number[]): number {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
const pct = (fraction: number): string => `${(fraction * 100).toFixed(1)} %`
const ratio = (n: number): string => `${n.toFixed(3)}×`

const metricsCost: Benchmark = {
  description: 'tools/call echo: plugin with Prometheus metrics vs metrics: false (alternating rounds)',
  async run (config, args) {
    const pairs = args[0] === undefined ? 5 : Number(args[0])
    if (!Number.isInteger(pairs) || pairs < 1) throw new Error(`pairs must be a positive integer, got ${JSON.stringify(args[0])}`)
    printEnvironment(config)
    const observerNs = observerNsPerRequest(new PrometheusObserver()) - observerNsPerRequest(noopObserver)

    // off, on, on, off, off, on, …: each side gets the same share of early and late slots.
    const order = Array.from({ length: pairs }, (_, i) => i % 2 === 0 ? [OFF, ON] : [ON, OFF]).flat()
    const measured: Measured[] = []
    for (const name of order) measured.push({ name, round: await runRound(name, config) })

    console.log(`\n## metrics cost: POST /mcp tools/call echo, ${config.connections} connections, ${config.duration} s per round, ${pairs} round(s) per side\n`)
    printTable(
      ['round', 'server', 'req/s', 'p50', 'p99', 'errors+timeouts+non2xx+mismatches', 'CPU server/autocannon/other', 'server CPU/req'],
      measured.map(({ name, round: r }, i) => [
        String(i + 1), name, fmt.int(r.reqPerSec), fmt.ms(r.p50Ms), fmt.ms(r.p99Ms), String(failures(r)),
        r.cpu === undefined ? 'n/a' : `${r.cpu.server.toFixed(2)} / ${r.cpu.bench.toFixed(2)} / ${r.cpu.other.toFixed(2)}`,
        r.serverCpuPerRequestUs === undefined ? 'n/a' : `${r.serverCpuPerRequestUs.toFixed(1)} µs`
      ])
    )

    // Each pair (rounds 2i+1, 2i+2) is one off and one on round back to back, under about the same
    // foreign load: the ratio within a pair is what the metrics change; the median over pairs drops a
    // pair that the shared machine disturbed (a quiet /proc reading does not rule out host steal).
    const pairsOf = Array.from({ length: pairs }, (_, i) => {
      const a = measured[2 * i]!
      const b = measured[2 * i + 1]!
      return a.name === ON ? { on: a.round, off: b.round } : { on: b.round, off: a.round }
    })
    const cpuRatio = (p: { on: Round, off: Round }): number | undefined =>
      p.on.serverCpuPerRequestUs === undefined || p.off.serverCpuPerRequestUs === undefined ? undefined : p.on.serverCpuPerRequestUs / p.off.serverCpuPerRequestUs
    const quiet = (r: Round): boolean => r.cpu !== undefined && r.cpu.other <= NOISE_LIMIT_CORES
    console.log('')
    printTable(['pair', 'on req/s', 'off req/s', 'on ÷ off req/s', 'on ÷ off server CPU/req', 'quiet (other ≤ 0.1 core)'],
      pairsOf.map((p, i) => {
        const cpu = cpuRatio(p)
        return [String(i + 1), fmt.int(p.on.reqPerSec), fmt.int(p.off.reqPerSec), ratio(p.on.reqPerSec / p.off.reqPerSec),
          cpu === undefined ? 'n/a' : ratio(cpu), quiet(p.on) && quiet(p.off) ? 'yes' : 'no']
      }))

    const rpsRatio = median(pairsOf.map(p => p.on.reqPerSec / p.off.reqPerSec))
    const cpuRatios = pairsOf.map(cpuRatio).filter((r): r is number => r !== undefined)
    const cpuMedian = cpuRatios.length === 0 ? undefined : median(cpuRatios)
    const mean = (rounds: Round[]): number => rounds.reduce((sum, r) => sum + r.reqPerSec, 0) / rounds.length
    const onMean = mean(pairsOf.map(p => p.on))
    const offMean = mean(pairsOf.map(p => p.off))
    const offCpu = median(pairsOf.flatMap(p => p.off.serverCpuPerRequestUs === undefined ? [] : [p.off.serverCpuPerRequestUs]))
    const cost = 1 - rpsRatio

    console.log(`\nmean req/s: on ${fmt.int(onMean)}, off ${fmt.int(offMean)} (${ratio(onMean / offMean)}; round-to-round noise included)`)
    console.log(`median over pairs: on ÷ off = ${ratio(rpsRatio)} by req/s` +
      (cpuMedian === undefined ? '' : `, ${ratio(cpuMedian)} by server CPU per request`))
    console.log(`metrics cost (throughput, median pair) = ${pct(cost)} (goal < ${pct(MAX_COST)}): ${cost < MAX_COST ? 'MET' : 'NOT MET'}`)
    console.log(`observer calls per request, in process: ${observerNs.toFixed(0)} ns more than the no-op observer` +
      (Number.isFinite(offCpu) ? ` = ${pct(observerNs / 1000 / offCpu)} of the median server CPU per request with metrics off (${offCpu.toFixed(1)} µs)` : ''))

    const broken = measured.filter(m => failures(m.round) > 0)
    if (broken.length > 0) console.error(`\nWARNING: errors, timeouts, non-2xx or mismatched bodies in ${broken.length} round(s); the figures are not comparable.`)
    const noisy = measured.filter(m => !quiet(m.round))
    if (noisy.length > 0) console.error(`\nWARNING: other processes used > ${NOISE_LIMIT_CORES} core during ${noisy.length} round(s); rerun on a quiet machine.`)
    return broken.length === 0
  }
}

export default metricsCost
