/**
 * Whether a change slowed the hot path: `tools/call` → `echo` against this checkout's plugin
 * (servers/plugin.ts) and another copy of it (servers/plugin-baseline.ts, loaded from
 * BENCH_BASELINE_ENTRY, e.g. `git worktree add /tmp/base <commit>` then `/tmp/base/lib/index.ts`), in
 * alternating rounds (support/paired-cost.ts). On a host whose speed drifts from round to round, this
 * tells a regression from noise better than comparing two throughput runs made at different times.
 *
 * `BENCH_BASELINE_ENTRY=… npm run bench -- regression [pairs] [modern]` (default 5 pairs of the legacy
 * request; `modern`: the 2026-07-28 request). Goal: < 3 % slower.
 */
import type { Benchmark } from './support/benchmark.js'
import { LEGACY_ECHO, MODERN_ECHO } from './support/echo-round.js'
import { measurePairedCost, pairCount } from './support/paired-cost.js'
import { printEnvironment } from './support/report.js'

const regression: Benchmark = {
  description: 'tools/call echo: this checkout vs BENCH_BASELINE_ENTRY (alternating rounds)',
  async run (config, args) {
    const baseline = process.env.BENCH_BASELINE_ENTRY
    if (baseline === undefined || baseline === '') throw new Error('set BENCH_BASELINE_ENTRY to the baseline plugin (…/lib/index.ts or …/dist/index.js)')
    printEnvironment(config)
    console.log(`baseline: ${baseline}`)
    const modern = args.includes('modern')
    const pairs = pairCount(args.find(arg => arg !== 'modern'))
    const { ok } = await measurePairedCost(config, {
      what: `this checkout over the baseline (${modern ? '2026-07-28' : 'legacy'} request)`, on: 'plugin', off: 'plugin-baseline', pairs, maxCost: 0.03, call: modern ? MODERN_ECHO : LEGACY_ECHO
    })
    return ok
  }
}

export default regression
