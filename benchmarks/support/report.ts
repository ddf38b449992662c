import { execFileSync } from 'node:child_process'
import { cpus, platform, release } from 'node:os'
import type { BenchConfig } from './config.js'

/** Prints a Markdown table (so a run can be pasted into benchmarks/README.md as is). */
export function printTable (header: readonly string[], rows: ReadonlyArray<readonly string[]>): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map(row => (row[i] ?? '').length)))
  const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`
  console.log(line(header))
  console.log(`|${widths.map(w => '-'.repeat(w + 2)).join('|')}|`)
  for (const row of rows) console.log(line(row))
}

export function printEnvironment (config: BenchConfig): void {
  const cpu = cpus()
  console.log(`node ${process.version}, ${platform()} ${release()}, ${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}`)
  console.log(`date ${new Date().toISOString()}, ${checkout()}`)
  console.log(`connections ${config.connections}, warm-up ${config.warmup} s, measured ${config.duration} s` +
    (config.rounds > 1 ? `, ${config.rounds} rounds` : '') +
    (config.nodeArgs.length > 0 ? `, server node args: ${config.nodeArgs.join(' ')}` : ''))
}

export const fmt = {
  int: (n: number): string => Math.round(n).toLocaleString('en-US'),
  ms: (n: number): string => `${n} ms`,
  ratio: (n: number): string => `${n.toFixed(2)}×`
}

/** The commit benchmarked, and whether lib/ differs from it (or which other copy BENCH_PLUGIN_ENTRY names). */
function checkout (): string {
  const entry = process.env.BENCH_PLUGIN_ENTRY
  if (entry !== undefined && entry !== '') return `plugin from BENCH_PLUGIN_ENTRY=${entry}`
  try {
    const git = (...args: string[]): string => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    return `plugin from lib/ at ${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--', 'lib') === '' ? '' : ' + uncommitted changes'}`
  } catch {
    return 'plugin from lib/'
  }
}
