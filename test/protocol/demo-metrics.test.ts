/**
 * The demo server's `/metrics` (example/app.ts): the plugin's metrics plus prom-client's default
 * process metrics, scraped after real MCP traffic, must pass `promtool check metrics` with its lint.
 *
 * How promtool reports (checked with promtool 2.42): exit 0 and no output when clean; exit 3 with one
 * line per finding on stderr (`<name> <problem>`) for lint problems only; exit 1 with `error while
 * linting: …` for a parse error. It exits 0 on empty input, so the test first checks that the real
 * scrape is piped in, then treats any output line or any non-zero exit as a failure.
 *
 * prom-client's defaults include three gauges named `*_total` (`nodejs_active_handles_total`,
 * `nodejs_active_requests_total`, `nodejs_active_resources_total`), which the lint refuses
 * ("non-counter metrics should not have "_total" suffix"); the demo leaves them out. Their values are
 * the sums of the per-type gauges `nodejs_active_handles`, `…_requests` and `…_resources`, which stay.
 */
import t, { type Test } from 'tap'
import { collectDefaultMetrics, Registry } from 'prom-client'
import { buildApp as buildDemo } from '../../example/app.js'
import { messages, post, postLegacy, postModern } from '../helpers/inject.js'
import { findPromtool, parseExposition, promtoolCheck } from '../helpers/metrics.js'

/** The default metrics promtool's lint refuses, which the demo must not expose. */
const LINT_FAILING_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']

/** The demo, built as `npm start` builds it, after a few MCP requests of both eras: its `/metrics` text. */
async function demoScrape (t: Test): Promise<string> {
  const app = await buildDemo({})
  t.teardown(() => app.close())
  await app.ready()

  const init = await postLegacy(app, 'initialize', {
    protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'demo-metrics', version: '1.0.0' }
  }, { id: 'init' })
  t.equal(init.statusCode, 200, 'legacy initialize answered')
  const echo = await postLegacy(app, 'tools/call', { name: 'echo', arguments: { text: 'hi' } }, { id: 'echo' })
  t.same(messages(echo).at(-1)?.result?.content, [{ type: 'text', text: 'hi' }], 'legacy echo answered')
  const sleep = await postModern(app, 'tools/call', { name: 'sleep', arguments: { ms: 20, stepMs: 10 } }, { id: 'sleep', meta: { progressToken: 'p' } })
  t.same(messages(sleep).at(-1)?.result?.content, [{ type: 'text', text: 'slept 20' }], 'modern sleep answered')
  const unknown = await postLegacy(app, 'tools/call', { name: 'no-such-tool', arguments: {} }, { id: 'unknown' })
  t.equal(messages(unknown).at(-1)?.error?.code, -32602, 'an unknown tool is an error')
  const cancel = await post(app, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'nobody', reason: 'x' } },
    { 'mcp-protocol-version': '2025-11-25' })
  t.equal(cancel.statusCode, 202, 'a legacy cancel of nothing is 202')

  const scraped = await app.inject({ method: 'GET', url: '/metrics' })
  t.equal(scraped.statusCode, 200, 'GET /metrics answered')
  return scraped.payload
}

t.test('the demo /metrics keeps every default metric but the lint-failing ones', async t => {
  const text = await demoScrape(t)
  const families = parseExposition(text).families
  for (const name of LINT_FAILING_DEFAULTS) t.notOk(families.has(name), `${name} is left out`)

  const defaults = new Registry()
  collectDefaultMetrics({ register: defaults })
  const expected = defaults.getMetricsAsArray().map(m => m.name).filter(n => !LINT_FAILING_DEFAULTS.includes(n)).sort()
  const exposed = [...families.keys()].filter(n => !n.startsWith('mcp_')).sort()
  t.strictSame(exposed, expected, 'every other prom-client default metric is still exposed')
  t.ok(expected.includes('nodejs_active_handles') && expected.includes('process_cpu_seconds_total'), 'the comparison is not vacuous')

  t.equal(parseExposition(text).value('mcp_requests_total', { method: 'tools/call', outcome: 'ok' }), 2, 'the plugin counted the calls')
  t.equal(parseExposition(text).value('mcp_cancellations_total', { source: 'client', result: 'ignored' }), 1, 'and the cancel')
})

const promtool = findPromtool()
const promtoolSkip = promtool === undefined && process.env.CI === undefined
  ? 'promtool not installed (apt-get install prometheus); this test is required when CI is set'
  : false

t.test('the demo /metrics passes promtool check metrics, lint included', { skip: promtoolSkip }, async t => {
  if (promtool === undefined) {
    t.fail('promtool is not on PATH: install the Debian package "prometheus" (CI=true requires it)')
    return
  }
  const text = await demoScrape(t)
  // promtool accepts empty input: make sure the whole scrape, defaults and plugin, is what is checked.
  t.match(text, /^mcp_requests_total\{method="tools\/call",outcome="ok"\} 2$/m, 'the scrape carries the plugin\'s counts')
  t.match(text, /^# TYPE process_cpu_seconds_total counter$/m, 'and prom-client\'s default metrics')

  const checked = promtoolCheck(promtool, text)
  t.strictSame(checked.lines, [], 'no promtool finding (lint findings are printed one per line)')
  t.equal(checked.status, 0, 'promtool exits 0 (3 = lint findings, 1 = parse error)')
})
