/** Knobs shared by every benchmark, read from the environment once. */
export interface BenchConfig {
  /** Seconds of the measured round (`BENCH_DURATION`, default 10). */
  duration: number
  /** Seconds of the warm-up round before it (`BENCH_WARMUP`, default 2; 0 skips it). */
  warmup: number
  /** Concurrent connections (`BENCH_CONNECTIONS`, default 50). */
  connections: number
  /** Extra `node` flags for the server processes, e.g. `--cpu-prof --cpu-prof-dir=prof` (`BENCH_NODE_ARGS`). */
  nodeArgs: string[]
  /** Before each round, wait up to this many seconds for the machine to go quiet (`BENCH_QUIET`, default 0: don't wait). */
  quiet: number
  /** How many times each scenario is measured, scenarios interleaved; the median round is reported (`BENCH_ROUNDS`, default 1). */
  rounds: number
}

/** The environment's settings; what it leaves unset comes from `defaults` (a benchmark's own), then the general defaults. */
export function readConfig (env: NodeJS.ProcessEnv = process.env, defaults: Partial<Pick<BenchConfig, 'duration' | 'rounds'>> = {}): BenchConfig {
  return {
    duration: number(env, 'BENCH_DURATION', defaults.duration ?? 10, 1),
    warmup: number(env, 'BENCH_WARMUP', 2, 0),
    connections: number(env, 'BENCH_CONNECTIONS', 50, 1),
    nodeArgs: (env.BENCH_NODE_ARGS ?? '').split(/\s+/).filter(arg => arg !== ''),
    quiet: number(env, 'BENCH_QUIET', 0, 0),
    rounds: number(env, 'BENCH_ROUNDS', defaults.rounds ?? 1, 1)
  }
}

function number (env: NodeJS.ProcessEnv, name: string, fallback: number, min: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw.replace(/s$/, ''))
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer >= ${min} (seconds may end in "s"), got ${JSON.stringify(raw)}`)
  return value
}
