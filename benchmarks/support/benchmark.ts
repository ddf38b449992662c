import type { BenchConfig } from './config.js'

/** What every `benchmarks/<name>.ts` default-exports, so `run.ts` can run it by name. */
export interface Benchmark {
  description: string
  /** `args` are the command-line words after the benchmark's name (e.g. scenario names). Resolves false when the figures are not trustworthy (errors during the run). */
  run (config: BenchConfig, args: readonly string[]): Promise<boolean>
}
