/**
 * `npm run bench [-- <benchmark> [args…]]`: runs one benchmark by name (the file benchmarks/<name>.ts),
 * or all of them in turn. Env: BENCH_DURATION, BENCH_WARMUP, BENCH_CONNECTIONS, BENCH_NODE_ARGS, BENCH_QUIET, BENCH_ROUNDS (see support/config.ts).
 */
import type { Benchmark } from './support/benchmark.js'
import { readConfig } from './support/config.js'

/** Add a benchmark here: name → its module (default export: `Benchmark`). */
const BENCHMARKS: Record<string, () => Promise<{ default: Benchmark }>> = {
  throughput: async () => import('./throughput.js'),
  'cross-node': async () => import('./cross-node.js'),
  'metrics-cost': async () => import('./metrics-cost.js'),
  'tracing-cost': async () => import('./tracing-cost.js'),
  'auth-cost': async () => import('./auth-cost.js'),
  regression: async () => import('./regression.js'),
  'registry-ops': async () => import('./registry-ops.js'),
  'cancel-latency': async () => import('./cancel-latency.js'),
  'disconnect-latency': async () => import('./disconnect-latency.js'),
  'ask-latency': async () => import('./ask-latency.js'),
  tasks: async () => import('./tasks.js'),
  events: async () => import('./events.js'),
  resume: async () => import('./resume.js')
}

const [name, ...args] = process.argv.slice(2)

if (name === '--list' || name === '--help' || name === '-h') {
  console.log('usage: npm run bench [-- <benchmark> [args…]]\n')
  for (const [key, load] of Object.entries(BENCHMARKS)) console.log(`  ${key}: ${(await load()).default.description}`)
} else if (name !== undefined && !(name in BENCHMARKS)) {
  console.error(`unknown benchmark "${name}"; known: ${Object.keys(BENCHMARKS).join(', ')}`)
  process.exitCode = 2
} else {
  readConfig() // fails early on a malformed setting
  let ok = true
  for (const key of name === undefined ? Object.keys(BENCHMARKS) : [name]) {
    console.log(`\n# ${key}\n`)
    try {
      const benchmark = (await BENCHMARKS[key]!()).default
      ok = await benchmark.run(readConfig(process.env, benchmark.defaults), name === undefined ? [] : args) && ok
    } catch (error) {
      console.error(`\n${key} FAILED:`, error)
      ok = false
    }
  }
  if (!ok) process.exitCode = 1
}
