import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { cpus, loadavg, platform, release } from 'node:os'

/** Summary of a latency sample, in ms. */
export interface LatencySummary {
  n: number
  min: number
  p50: number
  p90: number
  p99: number
  max: number
  mean: number
}

/** Nearest-rank percentile of an ascending list (as in cross-node.ts). */
export function percentile (sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p / 100 * sorted.length) - 1))]!
}

/** The middle value (the mean of the two middle ones for an even count); NaN for none. */
export function median (values: readonly number[]): number {
  const sorted = [...values].sort((x, y) => x - y)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length === 0 ? NaN : sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

export function summarize (samples: readonly number[]): LatencySummary {
  const sorted = [...samples].sort((a, b) => a - b)
  return {
    n: sorted.length,
    min: sorted[0] ?? NaN,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? NaN,
    mean: sorted.reduce((sum, x) => sum + x, 0) / sorted.length
  }
}

/** A duration in ms, with µs precision below 10 ms. */
export function ms (value: number): string {
  if (!Number.isFinite(value)) return 'n/a'
  return value < 10 ? `${value.toFixed(3)} ms` : `${value.toFixed(1)} ms`
}

/** The cells min, p50, p90, p99, max, mean of a summary. */
export function summaryCells (s: LatencySummary): string[] {
  return [s.min, s.p50, s.p90, s.p99, s.max, s.mean].map(ms)
}

export const SUMMARY_HEADER = ['min', 'p50', 'p90', 'p99', 'max', 'mean'] as const

/**
 * The 1-minute load average and CPU use of the machine over a stretch of the run: `stop()` returns the
 * load average at both ends and the cores used by processes other than `ownPids` (this process is
 * always one of them). Linux /proc only; elsewhere the CPU figure is undefined.
 */
export function watchLoad (ownPids: readonly number[] = []): { stop: () => LoadReport } {
  const pids = [process.pid, ...ownPids]
  const loadBefore = loadavg()[0]!
  const start = cpuSample(pids)
  return {
    stop () {
      const end = cpuSample(pids)
      let otherCores: number | undefined
      if (start !== undefined && end !== undefined) {
        const perCore = (end.total - start.total) / end.cpus
        if (perCore > 0) otherCores = Math.max(0, (end.busy - start.busy) - (end.own - start.own)) / perCore
      }
      return { loadBefore, loadAfter: loadavg()[0]!, otherCores, cpus: cpus().length }
    }
  }
}

export interface LoadReport {
  loadBefore: number
  loadAfter: number
  /** Cores used by other processes on average, or undefined without /proc. */
  otherCores: number | undefined
  cpus: number
}

export function describeLoad (load: LoadReport): string {
  return `1-min load average ${load.loadBefore.toFixed(2)} before, ${load.loadAfter.toFixed(2)} after (${load.cpus} CPUs)` +
    (load.otherCores === undefined ? '' : `; other processes used ${load.otherCores.toFixed(2)} cores meanwhile`)
}

function cpuSample (pids: readonly number[]): { busy: number, total: number, cpus: number, own: number } | undefined {
  try {
    const stat = readFileSync('/proc/stat', 'utf8').split('\n')
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = stat[0]!.trim().split(/\s+/).slice(1).map(Number)
    const busy = user + nice + system + irq + softirq + steal
    let own = 0
    for (const pid of pids) {
      try {
        const line = readFileSync(`/proc/${pid}/stat`, 'utf8')
        const fields = line.slice(line.lastIndexOf(')') + 2).split(' ')
        own += Number(fields[11]) + Number(fields[12])
      } catch {} // a process that has gone
    }
    return { busy, total: busy + idle + iowait, cpus: stat.filter(line => /^cpu\d/.test(line)).length, own }
  } catch {
    return undefined
  }
}

export async function withTimeout<T> (promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([promise, new Promise<never>((_resolve, reject) => { timer = setTimeout(() => { reject(new Error(`${what}: nothing within ${timeoutMs} ms`)) }, timeoutMs) })])
  } finally {
    clearTimeout(timer)
  }
}

/** A positive integer from the environment, or `fallback`. */
export function envCount (name: string, fallback: number): number {
  const raw = process.env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`)
  return value
}

/** What report.ts's printEnvironment prints, without the load-generator settings these benchmarks do not use. */
export function printLatencyEnvironment (): void {
  const cpu = cpus()
  console.log(`node ${process.version}, ${platform()} ${release()}, ${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}`)
  console.log(`date ${new Date().toISOString()}, ${checkout()}, 1-min load average ${loadavg()[0]!.toFixed(2)}`)
}

function checkout (): string {
  try {
    const git = (...args: string[]): string => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    return `plugin from lib/ at ${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--', 'lib') === '' ? '' : ' + uncommitted changes'}`
  } catch {
    return 'plugin from lib/'
  }
}
