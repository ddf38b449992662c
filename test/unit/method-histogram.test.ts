/**
 * The request-duration histogram is the plugin's own (prom-client's `observe` costs every request a
 * label hash and two allocations), so it must expose exactly what a prom-client Histogram with the same
 * observations would: same buckets, cumulative counts, `+Inf`, `_sum` and `_count`, through the registry.
 */
import t from 'tap'
import { Histogram, Registry } from 'prom-client'
import { MethodHistogram } from '../../lib/observability/method-histogram.js'

const BOUNDS = [0.001, 0.01, 0.1, 1]
// On a bound, between bounds, below the first, above the last, and zero.
const OBSERVATIONS: Array<[string, number]> = [
  ['tools/call', 0.0005], ['tools/call', 0.001], ['tools/call', 0.05], ['tools/call', 2], ['tools/call', 0.001],
  ['resources/read', 0.02], ['ping', 0]
]

function pair (): { theirs: Registry, ours: Registry, histogram: MethodHistogram } {
  const theirs = new Registry()
  const reference = new Histogram({ name: 'mcp_request_duration_seconds', help: 'Time', labelNames: ['method'], buckets: BOUNDS, registers: [theirs] })
  const ours = new Registry()
  const histogram = MethodHistogram.in(ours, 'mcp_request_duration_seconds', 'Time', BOUNDS)
  for (const [method, value] of OBSERVATIONS) {
    reference.labels(method).observe(value)
    histogram.observe(method, value)
  }
  return { theirs, ours, histogram }
}

t.test('the exposition is byte for byte that of a prom-client Histogram', async t => {
  const { theirs, ours } = pair()
  const text = await ours.metrics()
  t.equal(text, await theirs.metrics())
  t.match(text, /mcp_request_duration_seconds_bucket\{le="0.001",method="tools\/call"\} 3\n/, 'cumulative, a value on a bound counts in it')
  t.match(text, /mcp_request_duration_seconds_bucket\{le="\+Inf",method="tools\/call"\} 5\n/, 'a value above the last bound counts only in +Inf')
  t.match(text, /mcp_request_duration_seconds_count\{method="ping"\} 1\n/)
})

t.test('default labels of the registry land where prom-client puts them', async t => {
  const { theirs, ours } = pair()
  theirs.setDefaultLabels({ node: 'a' })
  ours.setDefaultLabels({ node: 'a' })
  t.equal(await ours.metrics(), await theirs.metrics())
})

t.test('JSON output carries the same samples', async t => {
  const { theirs, ours } = pair()
  type Sample = { labels: object, value: number, metricName?: string }
  const samples = async (registry: Registry) => ((await registry.getMetricsAsJSON())[0]!.values as Sample[])
    .map(({ labels, value, metricName }) => ({ labels, value, metricName }))
  t.same(await samples(ours), await samples(theirs))
})

t.test('one histogram per registry, reused by a second instance; resetMetrics empties it', async t => {
  const { ours, histogram } = pair()
  t.equal(MethodHistogram.in(ours, 'mcp_request_duration_seconds', 'Time', BOUNDS), histogram, 'the registered one is reused')
  t.equal(ours.getMetricsAsArray().length, 1)
  ours.resetMetrics()
  t.notMatch(await ours.metrics(), /_bucket/, 'no series after a reset')
  histogram.observe('ping', 0.5)
  t.match(await ours.metrics(), /mcp_request_duration_seconds_count\{method="ping"\} 1\n/, 'and it counts again')
})

t.test('a foreign metric of the same name is not silently reused', async t => {
  const registry = new Registry()
  registry.registerMetric(new Histogram({ name: 'mcp_request_duration_seconds', help: 'x', registers: [] }))
  t.throws(() => MethodHistogram.in(registry, 'mcp_request_duration_seconds', 'Time', BOUNDS), /already been registered/)
})
