// The subset of autocannon 8's programmatic API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  namespace autocannon {
    interface Options {
      url: string
      title?: string
      method?: string
      headers?: Record<string, string>
      body?: string | Buffer
      connections?: number
      pipelining?: number
      /** Seconds. */
      duration?: number
      /** Seconds before a request counts as a timeout. */
      timeout?: number
      /** Each response whose body differs is counted in `mismatches`. */
      expectBody?: string
    }

    /** An HDR histogram summary: `average`/`mean`, `stddev`, `min`, `max` and percentiles `pNN`. */
    interface Histogram {
      average: number
      mean: number
      stddev: number
      min: number
      max: number
      total: number
      p50: number
      p90: number
      p97_5: number
      p99: number
      p99_9: number
    }

    interface Result {
      title?: string
      url: string
      connections: number
      pipelining: number
      duration: number
      samples: number
      errors: number
      timeouts: number
      mismatches: number
      non2xx: number
      resets: number
      '2xx': number
      statusCodeStats: Record<string, { count: number }>
      /** Milliseconds, 1 ms resolution. */
      latency: Histogram
      /** Requests per one-second sample. */
      requests: Histogram & { sent: number }
      throughput: Histogram
    }
  }

  function autocannon (options: autocannon.Options): Promise<autocannon.Result>
  export = autocannon
}
