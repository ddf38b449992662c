import type { Metric, Registry } from 'prom-client'

interface Series {
  /** Observations per bucket (not cumulative), by index of the upper bound; +Inf is `count`. */
  readonly buckets: number[]
  sum: number
  count: number
}

/** A sample as prom-client's Histogram lays it out: `le` apart from the series' own labels. */
interface Sample {
  labels: Record<string, string | number>
  sharedLabels: Record<string, string>
  value: number
  metricName: string
}

interface Samples<T> {
  name: string
  help: string
  type: 'histogram'
  aggregator: 'sum'
  values: T[]
}

/**
 * A histogram with one label, `method`, observed once per request. prom-client's Histogram hashes the
 * label values and makes a closure and an object on every `observe`; this one adds to a few numbers.
 * It is registered in a prom-client registry as a metric of its own and answers with the samples a
 * prom-client Histogram would (`_bucket` with `le`, cumulative, then `_sum` and `_count`), so the
 * registry's exposition, JSON output, default labels and cluster aggregation treat it as one.
 */
export class MethodHistogram {
  readonly name: string
  readonly help: string
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  readonly labelNames = ['method']
  readonly #upperBounds: readonly number[]
  readonly #series = new Map<string, Series>()

  constructor (name: string, help: string, upperBounds: readonly number[]) {
    this.name = name
    this.help = help
    this.#upperBounds = [...upperBounds].sort((a, b) => a - b)
  }

  /** The histogram of that name in `registry`, or a new one registered there. */
  static in (registry: Registry, name: string, help: string, upperBounds: readonly number[]): MethodHistogram {
    const existing = registry.getSingleMetric(name) as unknown
    if (existing instanceof MethodHistogram) return existing
    const histogram = new MethodHistogram(name, help, upperBounds)
    // prom-client types accept only its own classes; the registry itself needs only name, get and reset.
    registry.registerMetric(histogram as unknown as Metric)
    return histogram
  }

  observe (method: string, value: number): void {
    let series = this.#series.get(method)
    if (series === undefined) this.#series.set(method, series = { buckets: this.#upperBounds.map(() => 0), sum: 0, count: 0 })
    const bounds = this.#upperBounds
    let i = 0
    while (i < bounds.length && value > bounds[i]!) i++
    if (i < bounds.length) series.buckets[i]!++
    series.sum += value
    series.count++
  }

  reset (): void {
    this.#series.clear()
  }

  /** What the registry prints (the registry puts default labels between `le` and `method`, as for its own histograms). */
  async getForPromString (): Promise<Samples<Sample>> {
    const values: Sample[] = []
    const bucket = `${this.name}_bucket`
    for (const [method, series] of this.#series) {
      const sharedLabels = { method }
      let cumulative = 0
      for (const [i, le] of this.#upperBounds.entries()) {
        cumulative += series.buckets[i]!
        values.push({ labels: { le }, sharedLabels, value: cumulative, metricName: bucket })
      }
      values.push({ labels: { le: '+Inf' }, sharedLabels, value: series.count, metricName: bucket })
      values.push({ labels: {}, sharedLabels, value: series.sum, metricName: `${this.name}_sum` })
      values.push({ labels: {}, sharedLabels, value: series.count, metricName: `${this.name}_count` })
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values }
  }

  /** The samples with their labels merged (JSON output, cluster aggregation). */
  async get (): Promise<Samples<Omit<Sample, 'sharedLabels'>>> {
    const samples = await this.getForPromString()
    return { ...samples, values: samples.values.map(({ labels, sharedLabels, ...sample }) => ({ ...sample, labels: { ...labels, ...sharedLabels } })) }
  }
}
