import autocannon from 'autocannon'
import type { BenchConfig } from './config.js'
import type { Exchange } from './http-check.js'
import { watchNoise } from './noise.js'

export interface Round {
  /** Mean of the per-second request counts. */
  reqPerSec: number
  p50Ms: number
  p99Ms: number
  maxMs: number
  total: number
  errors: number
  timeouts: number
  non2xx: number
  mismatches: number
  /** CPU used during the measured round, in cores: by the server, by autocannon (this process), by everything else. */
  cpu: { server: number, bench: number, other: number } | undefined
  /** Server CPU time (all its threads, GC included) per completed request, in µs: the cost of one request; less disturbed by other load than req/s, though still inflated when the cores are shared. */
  serverCpuPerRequestUs: number | undefined
}

/**
 * A warm-up round (`config.warmup` s, discarded), then the measured round (`config.duration` s), both
 * with `config.connections` connections and no pipelining, as MCP clients send one request at a time.
 */
export async function measure (origin: string, serverPid: number, exchange: Exchange, config: BenchConfig, expectBody?: string): Promise<Round> {
  const options: autocannon.Options = {
    url: new URL(exchange.path, origin).href,
    method: exchange.method,
    headers: exchange.headers,
    body: exchange.body,
    connections: config.connections,
    pipelining: 1,
    ...(expectBody === undefined ? {} : { expectBody })
  }
  if (config.warmup > 0) await autocannon({ ...options, duration: config.warmup })
  const noise = watchNoise(serverPid)
  const r = await autocannon({ ...options, duration: config.duration })
  const cpu = noise.stop()
  return {
    reqPerSec: r.requests.average,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    maxMs: r.latency.max,
    total: r.requests.total,
    errors: r.errors,
    timeouts: r.timeouts,
    non2xx: r.non2xx,
    mismatches: r.mismatches,
    cpu: cpu === undefined ? undefined : { server: cpu.serverCores, bench: cpu.benchCores, other: cpu.otherCores },
    serverCpuPerRequestUs: cpu === undefined || r.requests.total === 0 ? undefined : cpu.serverCores * cpu.seconds * 1e6 / r.requests.total
  }
}

export function failures (round: Round): number {
  return round.errors + round.timeouts + round.non2xx + round.mismatches
}
