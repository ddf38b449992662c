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
import { noopObserver, type RequestObserver } from '../lib/observability/observer.js'
import { PrometheusObserver } from '../lib/observability/prometheus.js'
import type { Benchmark } from './support/benchmark.js'
import { measurePairedCost, pairCount, pct } from './support/paired-cost.js'
import { printEnvironment } from './support/report.js'

const ON = 'plugin'
const OFF = 'plugin-no-metrics'
/** Highest acceptable cost of metrics, as a fraction of the throughput without them. */
const MAX_COST = 0.05

/** The metrics route must exist exactly when metrics are on, or the comparison is meaningless. */
async function checkMetricsRoute (name: string, origin: string): Promise<void> {
  const scrape = await fetch(new URL('/metrics', origin))
  const text = await scrape.text()
  if (name === ON && (scrape.status !== 200 || !text.includes('mcp_requests_total{method="tools/call",outcome="ok"} 1'))) {
    throw new Error(`${name}: /metrics does not count the check call (status ${scrape.status})`)
  }
  if (name === OFF && scrape.status !== 404) throw new Error(`${name}: /metrics answered ${scrape.status}, expected 404 with metrics off`)
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

const metricsCost: Benchmark = {
  description: 'tools/call echo: plugin with Prometheus metrics vs metrics: false (alternating rounds)',
  async run (config, args) {
    const pairs = pairCount(args[0])
    printEnvironment(config)
    const observerNs = observerNsPerRequest(new PrometheusObserver()) - observerNsPerRequest(noopObserver)
    const { ok, offCpuUs } = await measurePairedCost(config, { what: 'metrics', on: ON, off: OFF, pairs, maxCost: MAX_COST, check: checkMetricsRoute })
    console.log(`observer calls per request, in process: ${observerNs.toFixed(0)} ns more than the no-op observer` +
      (Number.isFinite(offCpuUs) ? ` = ${pct(observerNs / 1000 / offCpuUs)} of the median server CPU per request with metrics off (${offCpuUs.toFixed(1)} µs)` : ''))
    return ok
  }
}

export default metricsCost
