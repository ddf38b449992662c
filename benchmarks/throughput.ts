/**
 * Throughput of `tools/call` → `echo` over stateless Streamable HTTP, each scenario its own server
 * process (the others idle while one is measured):
 *
 * - plugin: this plugin, default options (responseMode 'auto'; echo emits nothing, so it answers JSON)
 * - plugin-modern: the same server sent the 2026-07-28 form of the call (`_meta` claim, routing headers)
 * - bare: a bare Fastify route returning the same JSON-RPC result (the ceiling)
 * - sdk-stateless: the official SDK 1.x stateless pattern (new McpServer + transport per request, Express)
 * - sdk-stateless-fastify: the same SDK handler in a bare Fastify route (supplementary)
 *
 * Goals: plugin ≥ 0.85 × bare and ≥ 15 × sdk-stateless (by req/s); plugin-modern ≥ 0.95 × plugin by
 * req/s and by server CPU per request (the 2026-07-28 path costs no more than the legacy one).
 */
import type { Benchmark } from './support/benchmark.js'
import type { BenchConfig } from './support/config.js'
import { MODERN_ECHO, startEchoServer, type EchoScenario, type EchoServer } from './support/echo-round.js'
import { waitForQuiet } from './support/noise.js'
import { failures, type Round } from './support/load.js'
import { fmt, printEnvironment, printTable } from './support/report.js'

/** Measured in this order within each pass; a scenario's server and call default to its name and `LEGACY_ECHO`. */
const SCENARIOS: Record<string, Omit<EchoScenario, 'name'> & { what: string }> = {
  plugin: { what: 'fastify-mcp-cancellation, defaults, echo tool (2025-11-25 request)' },
  'plugin-modern': { what: 'the same plugin server, the 2026-07-28 request', server: 'plugin', call: MODERN_ECHO },
  bare: { what: 'bare Fastify route, same JSON' },
  'sdk-stateless': { what: 'SDK 1.x stateless pattern (Express)' },
  'sdk-stateless-fastify': { what: 'SDK 1.x stateless handler in Fastify' }
}

type Measure = 'reqPerSec' | 'serverCpuPerRequestUs'

/**
 * `subject ÷ against` must be at least `min` (median of the per-pass ratios) by every measure in `judged`;
 * the other measure is printed alongside.
 */
const GOALS: ReadonlyArray<{ subject: string, against: string, min: number, judged: readonly Measure[], why?: string }> = [
  { subject: 'plugin', against: 'bare', min: 0.85, judged: ['reqPerSec'] },
  { subject: 'plugin', against: 'sdk-stateless', min: 15, judged: ['reqPerSec'] },
  {
    subject: 'plugin-modern',
    against: 'plugin',
    min: 0.95,
    judged: ['reqPerSec', 'serverCpuPerRequestUs'],
    why: 'costs no more than legacy, within the run-to-run noise'
  }
]

/** CPU (in cores) other processes may use during a round before its figures are flagged. */
const NOISE_LIMIT_CORES = 0.1


/** The middle element by `key` (the lower middle one for an even count). */
function median<T> (list: readonly T[], key: (item: T) => number): T {
  const sorted = [...list].sort((a, b) => key(a) - key(b))
  return sorted[Math.floor((sorted.length - 1) / 2)]!
}

/**
 * `subject` ÷ `other` by `measure`, pass by pass (the two rounds of one pass ran minutes apart at most,
 * so a slow spell of the shared machine hits both), and the median of those ratios.
 */
function passRatios (subject: readonly Round[], other: readonly Round[], measure: (r: Round) => number | undefined): { each: number[], median: number } | undefined {
  const each: number[] = []
  for (const [i, round] of subject.entries()) {
    const a = measure(round)
    const b = measure(other[i]!)
    if (a !== undefined && b !== undefined) each.push(a / b)
  }
  return each.length === 0 ? undefined : { each, median: median(each, x => x) }
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
    /** `subject ÷ other`, pass by pass; by CPU per request the ratio is other ÷ subject, so that above 1 is faster either way. */
    const compare = (subject: string, other: string, measure: Measure) => {
      const subjectRounds = all.get(subject)
      const otherRounds = all.get(other)
      if (subjectRounds === undefined || otherRounds === undefined) return undefined
      return measure === 'reqPerSec'
        ? passRatios(subjectRounds, otherRounds, r => r.reqPerSec)
        : passRatios(otherRounds, subjectRounds, r => r.serverCpuPerRequestUs)
    }

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
        ((ratio) => ratio === undefined ? '' : fmt.ratio(ratio.median))(compare('plugin', name, 'reqPerSec'))
      ])
    )

    console.log('\nreq/s: mean of per-second samples; latencies at 1 ms resolution; CPU: cores used during the measured round;\nserver CPU/req: the server process\'s CPU time (all threads, GC included) per request (less disturbed by other load than req/s).' +
      (config.rounds > 1 ? '\nreq/s etc.: the median round of each scenario; plugin ÷ this: the median of the ratios of the rounds of one pass.' : ''))
    const label: Record<Measure, string> = { reqPerSec: 'by req/s', serverCpuPerRequestUs: 'by server CPU per request' }
    const each = (r: { each: number[] }) => config.rounds > 1 ? ` (passes: ${r.each.map(x => fmt.ratio(x)).join(', ')})` : ''
    let printed = false
    for (const goal of GOALS) {
      const ratios = (['reqPerSec', 'serverCpuPerRequestUs'] as const).map(m => ({ measure: m, ratio: compare(goal.subject, goal.against, m) }))
      // Server CPU is read from /proc: elsewhere a goal is judged by what was measured.
      const judged = ratios.filter(r => goal.judged.includes(r.measure) && r.ratio !== undefined)
      if (judged.length === 0) continue
      if (!printed) console.log('')
      printed = true
      const met = judged.every(r => r.ratio!.median >= goal.min)
      console.log(`${goal.subject} / ${goal.against} (goal ≥ ${goal.min}× ${goal.judged.map(m => label[m]).join(' and ')}${goal.why === undefined ? '' : `: ${goal.why}`}): ${met ? 'MET' : 'NOT MET'}`)
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
