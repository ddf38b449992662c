/**
 * What OpenTelemetry costs on the hot path, `tools/call` → `echo`, in two alternating-round comparisons
 * (see support/paired-cost.ts):
 *
 * - no SDK: the plugin with its default `tracing: true` and no SDK registered (servers/plugin.ts) against
 *   `tracing: false` (servers/plugin-no-tracing.ts). Goal: no measurable cost (< 2 %), so the hot path
 *   stays ≥ 0.85 × bare Fastify without an SDK.
 * - with an SDK: the plugin under an SDK that records every span and exports spans and metrics by OTLP
 *   in batches (servers/plugin-otel.ts) against the plugin without one. Measured and recorded, no goal:
 *   most of it is the SDK's (recording, batching, encoding, sending every span), and sampling cuts it.
 *
 * `npm run bench -- tracing-cost [pairs] [no-sdk|sdk…]` (default 5 pairs, both comparisons).
 */
import type { Benchmark } from './support/benchmark.js'
import { measurePairedCost, pairCount } from './support/paired-cost.js'
import { printEnvironment } from './support/report.js'

const COMPARISONS = {
  'no-sdk': { what: 'tracing without an SDK', on: 'plugin', off: 'plugin-no-tracing', maxCost: 0.02 },
  sdk: { what: 'tracing with an SDK (every span, OTLP batches)', on: 'plugin-otel', off: 'plugin' }
} as const

/** The OTel server must export what it records: spans and metrics reach its sink. */
async function checkExports (name: string, origin: string): Promise<void> {
  if (name !== 'plugin-otel') return
  const answer = await fetch(new URL('/otel-exports', origin))
  const { exports } = await answer.json() as { exports: number }
  if (answer.status !== 200 || exports < 2) throw new Error(`${name}: the check call was not exported (status ${answer.status}, ${exports} export request(s))`)
}

const tracingCost: Benchmark = {
  description: 'tools/call echo: tracing on without an SDK vs tracing: false; under an OTLP-exporting SDK vs none (alternating rounds)',
  async run (config, args) {
    const numeric = args.find(arg => /^\d+$/.test(arg))
    const pairs = pairCount(numeric)
    const names = args.filter(arg => arg !== numeric)
    for (const name of names) if (!(name in COMPARISONS)) throw new Error(`unknown comparison "${name}"; known: ${Object.keys(COMPARISONS).join(', ')}`)
    printEnvironment(config)
    let ok = true
    for (const [name, comparison] of Object.entries(COMPARISONS)) {
      if (names.length > 0 && !names.includes(name)) continue
      ok = (await measurePairedCost(config, { ...comparison, pairs, check: checkExports })).ok && ok
    }
    return ok
  }
}

export default tracingCost
