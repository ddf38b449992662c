/**
 * Throughput of `tools/call` → `echo` over stateless Streamable HTTP, each scenario its own server
 * process (the others idle while one is measured):
 *
 * - plugin: this plugin, default options (responseMode 'auto'; echo emits nothing, so it answers JSON)
 * - plugin-modern: the same server sent the 2026-07-28 form of the call (`_meta` claim, routing headers)
 * - bare: a bare Fastify route returning the same JSON-RPC result (the ceiling)
 * - bare-modern: the same bare route sent the 2026-07-28 call, answering what plugin-modern answers
 * - sdk-stateless: the official SDK 1.x stateless pattern (new McpServer + transport per request, Express)
 * - sdk-stateless-fastify: the same SDK handler in a bare Fastify route (supplementary)
 *
 * Goals (by req/s): plugin ≥ 0.9 × bare, plugin-modern ≥ 0.85 × bare-modern (0.9 × 0.95), plugin ≥ 15 × sdk-stateless;
 * and, by req/s and by server CPU per request, (plugin-modern ÷ bare-modern) ÷ (plugin ÷ bare) ≥ 0.95:
 * the plugin's share of a modern request is no larger than its share of a legacy one, the longer
 * messages' own cost factored out by the bare baselines (the 2026-07-28 path costs no more than the
 * legacy one). plugin-modern ÷ plugin is printed as information.
 */
import type { Benchmark } from './support/benchmark.js'
import type { BenchConfig } from './support/config.js'
import { MODERN_ECHO, startEchoServer, type EchoScenario, type EchoServer } from './support/echo-round.js'
import { waitForQuiet } from './support/noise.js'
import { failures, type Round } from './support/load.js'
import { fmt, printEnvironment, printTable } from './support/report.js'

/**
 * Measured in this order within each pass; a scenario's server and call default to its name and `LEGACY_ECHO`.
 * `sameAnswerAs`: a baseline must send exactly the bytes the scenario it is compared with sends (checked
 * when both run). The order puts plugin, plugin-modern, bare, bare-modern at 0, 1, 2, 3 rounds into the
 * pass, so a steady drift of the machine's speed cancels out of (plugin-modern × bare) ÷ (bare-modern × plugin).
 */
const SCENARIOS: Record<string, Omit<EchoScenario, 'name'> & { what: string, sameAnswerAs?: string }> = {
  plugin: { what: 'fastify-mcp-cancellation, defaults, echo tool (2025-11-25 request)' },
  'plugin-modern': { what: 'the same plugin server, the 2026-07-28 request', server: 'plugin', call: MODERN_ECHO },
  bare: { what: 'bare Fastify route, same JSON', sameAnswerAs: 'plugin' },
  'bare-modern': { what: 'the same bare route, the 2026-07-28 request, same JSON as plugin-modern', server: 'bare', call: MODERN_ECHO, sameAnswerAs: 'plugin-modern' },
  'sdk-stateless': { what: 'SDK 1.x stateless pattern (Express)' },
  'sdk-stateless-fastify': { what: 'SDK 1.x stateless handler in Fastify' }
}

type Measure = 'reqPerSec' | 'serverCpuPerRequestUs'

/** A scenario, or the ratio of two sides, taken pass by pass. */
type Side = string | Ratio
interface Ratio { subject: Side, against: Side }

const LEGACY_SHARE: Ratio = { subject: 'plugin', against: 'bare' }
const MODERN_SHARE: Ratio = { subject: 'plugin-modern', against: 'bare-modern' }

/**
 * `subject ÷ against` (median of the per-pass ratios) must be at least `min` by every measure in
 * `judged`; the other measure is printed alongside. Without `min` the ratio is information only.
 */
const COMPARISONS: ReadonlyArray<Ratio & { min?: number, judged?: readonly Measure[], why?: string }> = [
  { ...LEGACY_SHARE, min: 0.9, judged: ['reqPerSec'] },
  { ...MODERN_SHARE, min: 0.85, judged: ['reqPerSec'], why: 'the same, 2026-07-28 requests: follows from the first goal and the ratio of ratios (0.9 × 0.95)' },
  { subject: 'plugin', against: 'sdk-stateless', min: 15, judged: ['reqPerSec'] },
  {
    subject: MODERN_SHARE,
    against: LEGACY_SHARE,
    min: 0.95,
    judged: ['reqPerSec', 'serverCpuPerRequestUs'],
    why: 'the 2026-07-28 path costs no more than the legacy one, the longer messages\' own cost factored out by the bare baselines'
  },
  { subject: 'plugin-modern', against: 'plugin', why: 'information; includes the longer messages\' own cost' }
]

/** CPU (in cores) other processes may use during a round before its figures are flagged. */
const NOISE_LIMIT_CORES = 0.1

/** The middle element by `key` (the lower middle one for an even count). */
function median<T> (list: readonly T[], key: (item: T) => number): T {
  const sorted = [...list].sort((a, b) => key(a) - key(b))
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}

/**
 * A side's value in each pass by `measure`, higher is better (server CPU per request is inverted, so a
 * ratio of two sides is subject ÷ other by req/s and other ÷ subject by CPU: above 1 is faster either
 * way); a ratio of two sides is taken pass by pass (the rounds of one pass ran seconds apart, so a slow
 * spell of the shared machine hits them alike). Undefined when a scenario was not run; a pass's value is
 * undefined when a measure is missing.
 */
function perPass (side: Side, measure: Measure, all: ReadonlyMap<string, readonly Round[]>): Array<number | undefined> | undefined {
  if (typeof side === 'string') {
    return all.get(side)?.map(round => {
      const value = round[measure]
      return value === undefined ? undefined : measure === 'reqPerSec' ? value : 1 / value
    })
  }
  const subject = perPass(side.subject, measure, all)
  const against = perPass(side.against, measure, all)
  if (subject === undefined || against === undefined) return undefined
  return subject.map((a, i) => {
    const b = against[i]
    return a === undefined || b === undefined ? undefined : a / b
  })
}

/** A ratio's value in every pass where it could be computed, and the median of those. */
function passRatios (ratio: Ratio, measure: Measure, all: ReadonlyMap<string, readonly Round[]>): { each: number[], median: number } | undefined {
  const each = perPass(ratio, measure, all)?.filter((x): x is number => x !== undefined)
  return each === undefined || each.length === 0 ? undefined : { each, median: median(each, x => x) }
}

/** `plugin / bare`; a ratio of ratios in parentheses: `(plugin-modern / bare-modern) / (plugin / bare)`. */
function describe (side: Side, nested = false): string {
  if (typeof side === 'string') return side
  const text = `${describe(side.subject, true)} / ${describe(side.against, true)}`
  return nested ? `(${text})` : text
}

/**
 * Every server is started (each its own process) and warmed up once; then each pass measures every
 * scenario once, one after the other (a b c a b c…), so that the rounds compared within a pass run
 * seconds apart and a slow spell of the shared machine hits them alike. Servers idle between rounds.
 */
async function measureInterleaved (names: readonly string[], config: BenchConfig): Promise<Map<string, Round[]>> {
  const servers: EchoServer[] = []
  try {
    for (const name of names) servers.push(await startEchoServer({ name, ...SCENARIOS[name] }, config))
    for (const server of servers) {
      const other = servers.find(s => s.name === SCENARIOS[server.name]!.sameAnswerAs)
      if (other !== undefined && other.body !== server.body) {
        throw new Error(`${server.name} must answer exactly what ${other.name} answers:\n  ${server.name}: ${server.body}\n  ${other.name}: ${other.body}`)
      }
    }
    const all = new Map<string, Round[]>(names.map(name => [name, []]))
    for (let pass = 1; pass <= config.rounds; pass++) {
      // A server is warmed up before its first round only: later rounds find it warm.
      const round = pass === 1 ? config : { ...config, warmup: 0 }
      for (const server of servers) {
        if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`the machine did not go quiet within ${config.quiet} s; measuring anyway`)
        console.log(`[pass ${pass}/${config.rounds}] ${server.name}: ${round.warmup > 0 ? `warm-up ${round.warmup} s, ` : ''}measuring ${config.duration} s…`)
        all.get(server.name)!.push(await server.measure(round))
      }
    }
    return all
  } finally {
    await Promise.all(servers.map(async server => { await server.stop() }))
  }
}

const throughput: Benchmark = {
  description: 'tools/call echo: plugin (legacy and 2026-07-28 requests) vs bare Fastify vs the SDK 1.x stateless pattern',
  // Short rounds, many passes: the shared machine's speed changes from one minute to the next, and a
  // pass whose two rounds straddle a change is outvoted by the others.
  defaults: { rounds: 7, duration: 5 },
  async run (config, args) {
    const unknown = args.filter(a => !(a in SCENARIOS))
    if (unknown.length > 0) throw new Error(`unknown scenario(s) ${unknown.join(', ')}; known: ${Object.keys(SCENARIOS).join(', ')}`)
    const names = args.length > 0 ? args : Object.keys(SCENARIOS)

    printEnvironment(config)
    const all = await measureInterleaved(names, config)
    const rounds = new Map([...all].map(([name, list]) => [name, median(list, r => r.reqPerSec)]))
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
        ((ratio) => ratio === undefined ? '' : fmt.ratio(ratio.median))(passRatios({ subject: 'plugin', against: name }, 'reqPerSec', all))
      ])
    )

    console.log('\nreq/s: mean of per-second samples; latencies at 1 ms resolution; CPU: cores used during the measured round;\nserver CPU/req: the server process\'s CPU time (all threads, GC included) per request (less disturbed by other load than req/s).' +
      (config.rounds > 1 ? '\nreq/s etc.: the median round of each scenario; plugin ÷ this: the median of the ratios of the rounds of one pass.' : ''))
    const label: Record<Measure, string> = { reqPerSec: 'by req/s', serverCpuPerRequestUs: 'by server CPU per request' }
    const each = (r: { each: number[] }) => config.rounds > 1 ? ` (passes: ${r.each.map(x => fmt.ratio(x)).join(', ')})` : ''
    let printed = false
    for (const comparison of COMPARISONS) {
      const ratios = (['reqPerSec', 'serverCpuPerRequestUs'] as const).map(m => ({ measure: m, ratio: passRatios(comparison, m, all) }))
      // Server CPU is read from /proc: elsewhere a goal is judged by what was measured.
      const judged = ratios.filter(r => comparison.judged?.includes(r.measure) === true && r.ratio !== undefined)
      const { min } = comparison
      if (min === undefined ? ratios.every(r => r.ratio === undefined) : judged.length === 0) continue
      if (!printed) console.log('')
      printed = true
      const why = comparison.why === undefined ? '' : `: ${comparison.why}`
      console.log(min === undefined
        ? `${describe(comparison)} (no goal${why})`
        : `${describe(comparison)} (goal ≥ ${min}× ${comparison.judged!.map(m => label[m]).join(' and ')}${why}): ${judged.every(r => r.ratio!.median >= min) ? 'MET' : 'NOT MET'}`)
      for (const { measure, ratio } of ratios) {
        if (ratio !== undefined) console.log(`  ${label[measure]} ${fmt.ratio(ratio.median)}${each(ratio)}`)
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
