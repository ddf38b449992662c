/**
 * What a feature costs on the hot path: `tools/call` → `echo` against a server with it (`on`) and one
 * without (`off`), in the same run. Rounds alternate off/on/on/off… (each a fresh server process), so
 * drift over the run (heat, other load) falls on both sides equally; the headline is the median, over
 * back-to-back off/on pairs, of the on ÷ off ratio (by req/s, and by server CPU per request). A
 * benchmark whose two sides are one server in two states (events.ts: with and without idle listeners)
 * runs each round itself (`round`).
 */
import type { BenchConfig } from './config.js'
import { echoRound, type EchoCall } from './echo-round.js'
import { failures, type Round } from './load.js'
import { fmt, printTable } from './report.js'

/** CPU (in cores) other processes may use during a round before its figures are flagged. */
const NOISE_LIMIT_CORES = 0.1

export interface PairedCost {
  /** What is measured, for the headings: "metrics", "tracing with an SDK"… */
  what: string
  /** The servers (`benchmarks/servers/<name>.ts`) with and without the feature. */
  on: string
  off: string
  pairs: number
  /** Highest acceptable cost, as a fraction of the throughput without the feature; none: the cost is information. */
  maxCost?: number | undefined
  /** What both are sent: `LEGACY_ECHO` when not given. */
  call?: EchoCall | undefined
  /** Checks a server after its first answer (e.g. that the feature is on, or off, there). */
  check?: ((name: string, origin: string) => Promise<void>) | undefined
  /** Measures one round of side `name` (`on` or `off`) instead of a fresh server's `echoRound`; `call` and `check` are then unused. */
  round?: ((name: string) => Promise<Round>) | undefined
}

export interface PairedCostResult {
  /** No round had errors, timeouts, non-2xx answers or mismatched bodies. */
  ok: boolean
  /** Median over pairs of on ÷ off req/s. */
  rpsRatio: number
  /** Median server CPU per request with the feature off (µs). */
  offCpuUs: number
}

function median (values: readonly number[]): number {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

export const pct = (fraction: number): string => `${(fraction * 100).toFixed(1)} %`
const ratio = (n: number): string => `${n.toFixed(3)}×`

export async function measurePairedCost (config: BenchConfig, { what, on, off, pairs, maxCost, call, check, round }: PairedCost): Promise<PairedCostResult> {
  // off, on, on, off, off, on, …: each side gets the same share of early and late slots.
  const order = Array.from({ length: pairs }, (_, i) => i % 2 === 0 ? [off, on] : [on, off]).flat()
  const measured: Array<{ name: string, round: Round }> = []
  for (const name of order) {
    measured.push({ name, round: round === undefined ? await echoRound({ name, call }, config, check === undefined ? undefined : async origin => { await check(name, origin) }) : await round(name) })
  }

  console.log(`\n## ${what} cost: POST /mcp tools/call echo, ${config.connections} connections, ${config.duration} s per round, ${pairs} round(s) per side\n`)
  printTable(
    ['round', 'server', 'req/s', 'p50', 'p99', 'errors+timeouts+non2xx+mismatches', 'CPU server/autocannon/other', 'server CPU/req'],
    measured.map(({ name, round: r }, i) => [
      String(i + 1), name, fmt.int(r.reqPerSec), fmt.ms(r.p50Ms), fmt.ms(r.p99Ms), String(failures(r)),
      r.cpu === undefined ? 'n/a' : `${r.cpu.server.toFixed(2)} / ${r.cpu.bench.toFixed(2)} / ${r.cpu.other.toFixed(2)}`,
      r.serverCpuPerRequestUs === undefined ? 'n/a' : `${r.serverCpuPerRequestUs.toFixed(1)} µs`
    ])
  )

  // Each pair (rounds 2i+1, 2i+2) is one off and one on round back to back, under about the same
  // foreign load: the ratio within a pair is what the feature changes; the median over pairs drops a
  // pair that the shared machine disturbed (a quiet /proc reading does not rule out host steal).
  const pairsOf = Array.from({ length: pairs }, (_, i) => {
    const a = measured[2 * i]!
    const b = measured[2 * i + 1]!
    return a.name === on ? { on: a.round, off: b.round } : { on: b.round, off: a.round }
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
  const offCpuUs = median(pairsOf.flatMap(p => p.off.serverCpuPerRequestUs === undefined ? [] : [p.off.serverCpuPerRequestUs]))
  const cost = 1 - rpsRatio

  console.log(`\nmean req/s: ${on} ${fmt.int(onMean)}, ${off} ${fmt.int(offMean)} (${ratio(onMean / offMean)}; round-to-round noise included)`)
  console.log(`median over pairs: ${on} ÷ ${off} = ${ratio(rpsRatio)} by req/s` +
    (cpuMedian === undefined ? '' : `, ${ratio(cpuMedian)} by server CPU per request`))
  console.log(`${what} cost (throughput, median pair) = ${pct(cost)}` +
    (maxCost === undefined ? ' (information, no goal)' : ` (goal < ${pct(maxCost)}): ${cost < maxCost ? 'MET' : 'NOT MET'}`))

  const broken = measured.filter(m => failures(m.round) > 0)
  if (broken.length > 0) console.error(`\nWARNING: errors, timeouts, non-2xx or mismatched bodies in ${broken.length} round(s); the figures are not comparable.`)
  const noisy = measured.filter(m => !quiet(m.round))
  if (noisy.length > 0) console.error(`\nWARNING: other processes used > ${NOISE_LIMIT_CORES} core during ${noisy.length} round(s); rerun on a quiet machine.`)
  return { ok: broken.length === 0, rpsRatio, offCpuUs }
}

/** The pair count a cost benchmark was given (`args[0]`), 5 by default. */
export function pairCount (arg: string | undefined): number {
  const pairs = arg === undefined ? 5 : Number(arg)
  if (!Number.isInteger(pairs) || pairs < 1) throw new Error(`pairs must be a positive integer, got ${JSON.stringify(arg)}`)
  return pairs
}
