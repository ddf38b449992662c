import type { BenchConfig } from './config.js'

/** What every `benchmarks/<name>.ts` default-exports, so `run.ts` can run it by name. */
export interface Benchmark {
  description: string
  /** Its own defaults for what the environment leaves unset (BENCH_DURATION, BENCH_ROUNDS). */
  defaults?: Partial<Pick<BenchConfig, 'duration' | 'rounds'>>
  /** `args` are the command-line words after the benchmark's name (e.g. scenario names). Resolves false when the figures are not trustworthy (errors during the run). */
  run (config: BenchConfig, args: readonly string[]): Promise<boolean>
}
