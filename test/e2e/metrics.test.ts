/**
 * Prometheus metrics (DESIGN §7), as an operator scraping `/metrics` sees them.
 *
 * 1. A scripted run against the demo server on a real socket (every request outcome, every cancellation
 *    source and result, a kill, a lifetime cancel, evictions at the global cap), then one scrape whose
 *    values must equal the expected counts exactly, with the gauges back at 0.
 * 2. The exposition passes `promtool check metrics`.
 * 3. Registries: one per plugin instance (no duplicate-metric error, separate counts), a shared one
 *    (reused metrics, counts added up), `metrics: false` / `path: false`, the route guard, the content
 *    type, and no default process metrics from the library.
 * 4. Logs: one structured info line per cancellation (source, tool, method, sanitised reason; no
 *    address or scope at info), the scope only at debug, one warn per kill.
 */
import t from 'tap'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { Registry, register as globalRegistry } from 'prom-client'
import { buildApp as buildDemo } from '../../example/app.js'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { legacyCall, openPost, rawPost, type RawResponse } from '../helpers/http.js'
import { json, postLegacy } from '../helpers/inject.js'
import { cancelNotification, sseMessages, toolCall, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenOn } from '../helpers/listen.js'
import { captureLogs } from '../helpers/logs.js'
import { familiesText, findPromtool, parseExposition, promtoolCheck, scrape, type Exposition } from '../helpers/metrics.js'
import { registerEcho } from '../helpers/tools.js'
import { waitFor, within } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

/** The cancellation scope of an anonymous client on 127.0.0.1. */
const SCOPE = 'ip:127.0.0.1'
/** What prom-client's `Registry#contentType` is for the text format, i.e. what Prometheus expects. */
const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8'
/** Labels DESIGN §7 allows on the plugin's metrics (plus `le` of histogram buckets). */
const ALLOWED_LABELS = new Set(['method', 'outcome', 'tool', 'source', 'result', 'kind', 'status', 'bound', 'reason', 'era', 'le'])
/** The plugin's twenty-four metric families (and `mcp_bus_connected`, with `redis` only: test/redis/multi-node.test.ts). */
const FAMILIES: Record<string, string> = {
  mcp_requests_total: 'counter',
  mcp_request_duration_seconds: 'histogram',
  mcp_tool_calls_total: 'counter',
  mcp_in_flight_requests: 'gauge',
  mcp_cancellations_total: 'counter',
  mcp_cancellation_rows: 'gauge',
  mcp_cancellation_evictions_total: 'counter',
  mcp_cancel_to_stop_seconds: 'histogram',
  mcp_sse_streams: 'gauge',
  mcp_bus_errors_total: 'counter',
  mcp_input_requests_total: 'counter',
  mcp_pending_input_requests: 'gauge',
  mcp_tasks: 'gauge',
  mcp_tasks_total: 'counter',
  mcp_task_evictions_total: 'counter',
  mcp_auth_failures_total: 'counter',
  mcp_listeners: 'gauge',
  mcp_notifications_sent_total: 'counter',
  mcp_listeners_dropped_total: 'counter',
  mcp_events_dropped_total: 'counter',
  mcp_stream_resumes_total: 'counter',
  mcp_streams_paused: 'gauge',
  mcp_stream_events_dropped_total: 'counter',
  mcp_requests_refused_total: 'counter'
}

const UNKNOWN_TOOL = 'no-such-tool-7f3a'
const UNKNOWN_METHOD = 'bogus/method-7f3a'
/** Request ids used in the run: none may ever show up in the exposition. */
const REQUEST_IDS = ['client-c1', 'held-r1', 'server-s1', 'disc-d1', 'kill-k1', 'life-l1', 'evict-0-0']

/** The text of the final scrape of the scripted run, for the promtool test. */
let scriptedScrape: string | undefined

function metricsUrl (mcpUrl: URL): URL {
  return new URL('/metrics', mcpUrl)
}

async function read (mcpUrl: URL): Promise<Exposition> {
  const { status, text } = await scrape(metricsUrl(mcpUrl))
  if (status !== 200) throw new Error(`GET /metrics answered ${status}`)
  return parseExposition(text)
}

/** Scrapes until `predicate` holds (or `timeoutMs` passes); returns the last exposition. */
async function readUntil (mcpUrl: URL, predicate: (e: Exposition) => boolean, timeoutMs = 3000): Promise<Exposition> {
  const deadline = Date.now() + timeoutMs
  let exposition = await read(mcpUrl)
  while (!predicate(exposition) && Date.now() < deadline) {
    await new Promise(resolve => setTimeout(resolve, 20))
    exposition = await read(mcpUrl)
  }
  return exposition
}

function parseBody (response: RawResponse | undefined): JsonRpcMessage | undefined {
  try {
    return JSON.parse(response?.text ?? '') as JsonRpcMessage
  } catch {
    return undefined
  }
}

t.test('scripted run on a real socket: the scrape equals the expected counts exactly', async t => {
  const logs = captureLogs('debug')
  const app = await buildDemo({
    MCP_CANCEL_TIMEOUT_MS: '200',
    MCP_MAX_STREAM_LIFETIME_MS: '2000',
    MCP_MAX_ROWS: '40',
    MCP_MAX_ROWS_PER_SCOPE: '2',
    MCP_RESUME_WINDOW_MS: '300'
  }, logs.options)
  const url = await listenOn(t, app)
  const api = app.mcpCancellation

  // -- plain requests ---------------------------------------------------------------------------
  const init = await rawPost(url, {
    jsonrpc: '2.0',
    id: 'init-1',
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'metrics-test', version: '1.0.0' } }
  })
  t.equal(parseBody(init)?.result?.protocolVersion, '2025-11-25', 'initialize answered')
  for (const i of [1, 2, 3]) {
    const echo = await rawPost(url, toolCall(`echo-${i}`, 'echo', { text: `hi ${i}` }))
    t.same(parseBody(echo)?.result?.content, [{ type: 'text', text: `hi ${i}` }], `echo ${i} answered`)
  }
  const invalid = await rawPost(url, toolCall('echo-bad', 'echo', {}))
  t.equal(parseBody(invalid)?.result?.isError, true, 'echo without text is an isError result')
  const unknownTool = await rawPost(url, toolCall('unknown-tool', UNKNOWN_TOOL, {}))
  t.equal(parseBody(unknownTool)?.error?.code, -32602, 'an unknown tool is -32602')
  const unknownMethod = await rawPost(url, { jsonrpc: '2.0', id: 'unknown-method', method: UNKNOWN_METHOD })
  t.equal(parseBody(unknownMethod)?.error?.code, -32601, 'an unknown method is -32601')
  const wrongEra = await rawPost(url, { jsonrpc: '2.0', id: 'wrong-era', method: 'server/discover' })
  t.equal(parseBody(wrongEra)?.error?.code, -32601, 'server/discover is not served in the legacy era')

  // -- evictions at the global cap (maxRows 40 → batches of 2), through the library API -----------
  for (let s = 0; s < 20; s++) {
    for (let r = 0; r < 2; r++) api.cancel({ requestId: `evict-${s}-${r}`, reason: 'library cancel', scope: `evict:${s}` })
  }
  let e = await read(url)
  t.equal(e.value('mcp_cancellation_rows'), 40, '40 library cancellations are 40 rows')
  t.equal(e.value('mcp_cancellation_evictions_total'), 0, 'nothing evicted below the cap')
  t.equal(api.cancel({ requestId: 'evict-20-0', reason: 'library cancel', scope: 'evict:20' }), 'recorded', 'the 41st row is recorded (the cap evicts, never rejects)')
  e = await read(url)
  t.equal(e.value('mcp_cancellation_evictions_total'), 2, 'one batch at the cap evicts max(1, 40/20) = 2 rows, counted as 2')
  t.equal(e.value('mcp_cancellation_rows'), 39, 'rows: 40 + 1 - 2')
  t.equal(api.cancelled('evict-0-0', 'evict:0'), false, 'the oldest rows of the largest scope went')
  for (let s = 0; s <= 20; s++) for (let r = 0; r < 2; r++) api.clear(`evict-${s}-${r}`, `evict:${s}`)
  t.equal((await read(url)).value('mcp_cancellation_rows'), 0, 'cleared rows leave the gauge')

  // -- client cancel (legacy notifications/cancelled) of a running sleep ---------------------------
  const c1 = openPost(url, toolCall('client-c1', 'sleep', { ms: 5000 }))
  t.ok(await waitFor(() => api.inFlight('client-c1', SCOPE)), 'sleep client-c1 is in flight')
  e = await read(url)
  t.equal(e.value('mcp_in_flight_requests'), 1, 'mcp_in_flight_requests counts the running call')
  const cancelC1 = await rawPost(url, cancelNotification('client-c1', 'user\u0007 pressed\u202e stop'))
  t.equal(cancelC1.status, 202, 'the cancel notification is accepted')
  const c1End = await within(c1.done, 3000, undefined)
  t.equal(c1End?.status, 202, 'the cancelled JSON call ends with a bare 202')

  // -- ignored and invalid client cancels ------------------------------------------------------------
  t.equal((await rawPost(url, cancelNotification('nobody-home'))).status, 202, 'a cancel of an unknown id is accepted (and ignored)')
  t.equal((await rawPost(url, cancelNotification({}))).status, 400, 'a cancel with requestId {} is a 400')

  // -- rejected: the caller's scope holds its quota (maxRowsPerScope 2) --------------------------------
  api.cancel({ requestId: 'quota-1', reason: 'hold', scope: SCOPE })
  api.cancel({ requestId: 'quota-2', reason: 'hold', scope: SCOPE })
  const r1 = openPost(url, toolCall('held-r1', 'sleep', { ms: 600 }))
  t.ok(await waitFor(() => api.inFlight('held-r1', SCOPE)), 'sleep held-r1 is in flight')
  const rejected = await rawPost(url, cancelNotification('held-r1', 'too many'))
  t.equal(rejected.status, 429, 'a cancel over the scope quota is a 429')
  const r1End = await within(r1.done, 3000, undefined)
  t.same(parseBody(r1End)?.result?.content, [{ type: 'text', text: 'slept 600' }],
    'the call whose cancel was rejected runs to its result')
  api.clear('quota-1', SCOPE)
  api.clear('quota-2', SCOPE)

  // -- server-side cancel through the library ---------------------------------------------------------
  const s1 = openPost(url, toolCall('server-s1', 'sleep', { ms: 5000 }))
  t.ok(await waitFor(() => api.inFlight('server-s1', SCOPE)), 'sleep server-s1 is in flight')
  t.equal(api.cancel({ requestId: 'server-s1', reason: 'operator\u0000 stop', scope: SCOPE }), 'recorded', 'the library cancels the running call')
  const s1End = await within(s1.done, 3000, undefined)
  t.equal(parseBody(s1End)?.error?.code, -32800, 'the client is told -32800')

  // -- disconnect mid-SSE -----------------------------------------------------------------------------
  const d1 = legacyCall(url, 'disc-d1', 'sleep', { ms: 5000 }, { progressToken: 'progress-d1' })
  t.ok(await d1.waitForText('notifications/progress'), 'the call streams progress over SSE')
  e = await read(url)
  t.equal(e.value('mcp_sse_streams'), 1, 'mcp_sse_streams counts the open stream')
  t.equal(e.value('mcp_in_flight_requests'), 1, 'and the call is in flight')
  d1.destroy()
  e = await readUntil(url, x => x.value('mcp_streams_paused') === 1)
  t.equal(e.value('mcp_streams_paused'), 1, 'its stream pauses for a resume (mcp_streams_paused)')
  t.ok(api.inFlight('disc-d1', SCOPE), 'and its call runs on')
  t.ok(await waitFor(() => !api.inFlight('disc-d1', SCOPE), 3000), 'nobody resumed it within the 300 ms window: the call stopped')

  // -- kill: stubborn ignores its cancellation, the 200 ms kill timeout gives up on it ------------------
  const k1 = openPost(url, toolCall('kill-k1', 'stubborn', { ms: 1000 }))
  t.ok(await waitFor(() => api.inFlight('kill-k1', SCOPE)), 'stubborn kill-k1 is in flight')
  const killCancelledAt = Date.now()
  t.equal((await rawPost(url, cancelNotification('kill-k1'))).status, 202, 'the cancel of stubborn is accepted')
  t.equal((await within(k1.done, 3000, undefined))?.status, 202, 'the cancelled stubborn call ends with a bare 202')
  t.ok(await waitFor(() => !api.inFlight('kill-k1', SCOPE), 2000), 'the kill timeout released it')
  t.ok(Date.now() - killCancelledAt >= 190, 'not before the 200 ms kill timeout')

  // -- lifetime: a call running past maxStreamLifetimeMs (2 s) -------------------------------------------
  const l1 = legacyCall(url, 'life-l1', 'sleep', { ms: 10_000 }, { progressToken: 'progress-l1' })
  const l1End = await within(l1.done, 6000, undefined)
  const l1Error = sseMessages(l1End?.text ?? '').find(m => m.id === 'life-l1')?.error
  t.equal(l1Error?.code, -32800, 'the lifetime cancel ends the stream with -32800')
  // The stubborn handler, abandoned at the kill, has settled by now (1 s); nothing of it may count.

  // -- the final scrape --------------------------------------------------------------------------------
  await readUntil(url, x => x.value('mcp_in_flight_requests') === 0 && x.value('mcp_sse_streams') === 0)
  const final = await scrape(metricsUrl(url))
  t.equal(final.status, 200, 'GET /metrics is served')
  t.equal(final.contentType, PROMETHEUS_TEXT, 'served as the Prometheus text format')
  scriptedScrape = final.text
  const m = parseExposition(final.text)

  for (const [name, type] of Object.entries(FAMILIES)) {
    t.equal(m.families.get(name)?.type, type, `${name} is a ${type}`)
    t.ok((m.families.get(name)?.help ?? '') !== '', `${name} has help text`)
  }

  t.strictSame(m.series('mcp_requests_total'), {
    'method=initialize,outcome=ok': 1,
    'method=tools/call,outcome=ok': 5, // 3 echo, 1 isError echo, the sleep whose cancel was rejected
    'method=tools/call,outcome=error': 1, // the unknown tool
    'method=tools/call,outcome=cancelled': 5, // client, server, disconnect, kill, lifetime
    'method=other,outcome=error': 1, // an unknown method is not a label
    'method=server/discover,outcome=error': 1 // served in the modern era only: its name is a safe label
  }, 'mcp_requests_total, every series exactly')

  t.strictSame(m.series('mcp_tool_calls_total'), {
    'outcome=ok,tool=echo': 3,
    'outcome=error,tool=echo': 1,
    'outcome=ok,tool=sleep': 1,
    'outcome=cancelled,tool=sleep': 4,
    'outcome=killed,tool=stubborn': 1
  }, 'mcp_tool_calls_total, every series exactly (the unknown tool is not counted)')

  t.strictSame(m.series('mcp_cancellations_total'), {
    'result=recorded,source=client': 2,
    'result=ignored,source=client': 1,
    'result=invalid,source=client': 1,
    'result=rejected,source=client': 1,
    'result=recorded,source=server': 1,
    'result=recorded,source=disconnect': 1,
    'result=recorded,source=lifetime': 1
  }, 'mcp_cancellations_total, every series exactly (library cancels of requests not in flight are not cancellations of requests)')

  t.strictSame(m.series('mcp_cancel_to_stop_seconds_count'), {
    'source=client': 2, 'source=server': 1, 'source=disconnect': 1, 'source=lifetime': 1
  }, 'mcp_cancel_to_stop_seconds: one observation per cancelled request, by source')
  const stopBucket = (source: string, le: string): number | undefined => m.value('mcp_cancel_to_stop_seconds_bucket', { source, le })
  t.equal(stopBucket('client', '0.1'), 1, 'the cooperative client cancel stopped within 100 ms; the killed one did not')
  t.equal(stopBucket('client', '1'), 2, 'the kill is observed at its 200 ms timeout (within 1 s)')
  for (const source of ['server', 'disconnect', 'lifetime']) {
    t.equal(stopBucket(source, '0.1'), 1, `the ${source} cancel stopped the sleep within 100 ms`)
  }

  t.strictSame(m.series('mcp_request_duration_seconds_count'), {
    'method=initialize': 1, 'method=tools/call': 11, 'method=other': 1, 'method=server/discover': 1
  }, 'one duration observation per request, by method')
  const callSeconds = m.value('mcp_request_duration_seconds_sum', { method: 'tools/call' }) ?? NaN
  t.ok(callSeconds >= 2 && callSeconds < 60, `durations are in seconds (tools/call sum ${callSeconds}, the lifetime call alone ran 2 s)`)

  t.equal(m.value('mcp_in_flight_requests'), 0, 'nothing in flight')
  t.equal(m.value('mcp_sse_streams'), 0, 'no SSE stream open')
  t.equal(m.value('mcp_cancellation_rows'), 0, 'no cancellation row left')
  t.equal(m.value('mcp_cancellation_evictions_total'), 2, 'evictions: the 2 rows of the one batch')
  t.equal(m.value('mcp_bus_errors_total'), 0, 'no bus (no Redis), no bus error')
  t.strictSame(m.series('mcp_stream_resumes_total'), { 'outcome=expired': 1 }, 'mcp_stream_resumes_total: the one stream nobody resumed')
  t.equal(m.value('mcp_streams_paused'), 0, 'no stream left paused')
  t.equal(m.value('mcp_stream_events_dropped_total'), 0, 'no buffered event dropped')

  // -- label hygiene ---------------------------------------------------------------------------------------
  const pluginSamples = m.allSamples('mcp_')
  const labelNames = new Set(pluginSamples.flatMap(s => Object.keys(s.labels)))
  t.strictSame([...labelNames].filter(name => !ALLOWED_LABELS.has(name)), [], `only ${[...ALLOWED_LABELS].join(', ')} as labels`)
  const values = pluginSamples.flatMap(s => Object.values(s.labels))
  const leaked = values.filter(v => v.includes('127.0.0.1') || v.includes('ip:') || v.includes('evict:') ||
    REQUEST_IDS.includes(v) || v.includes(UNKNOWN_TOOL) || v.includes(UNKNOWN_METHOD) || v.includes('progress-'))
  t.strictSame(leaked, [], 'no address, scope, request id, progress token, unknown tool or unknown method as a label value')
  t.notOk(final.text.includes(UNKNOWN_TOOL), 'the unknown tool name appears nowhere in the exposition')

  // -- logs (4) ----------------------------------------------------------------------------------------------
  const lines = logs.lines()
  const cancelled = lines.filter(l => l.msg === 'MCP request cancelled')
  t.equal(cancelled.length, 5, 'one info line per cancelled request')
  t.ok(cancelled.every(l => l.level === 30), 'at info')
  const summary = cancelled.map(l => ({ source: l.source, tool: l.tool, method: l.method, reason: l.reason }))
  const order = (a: { source: unknown, tool: unknown }): string => `${String(a.source)}/${String(a.tool)}`
  t.strictSame(summary.sort((a, b) => order(a).localeCompare(order(b))), [
    { source: 'client', tool: 'sleep', method: 'tools/call', reason: 'user pressed stop' },
    { source: 'client', tool: 'stubborn', method: 'tools/call', reason: null },
    { source: 'disconnect', tool: 'sleep', method: 'tools/call', reason: 'client disconnected' },
    { source: 'lifetime', tool: 'sleep', method: 'tools/call', reason: 'maximum request lifetime exceeded' },
    { source: 'server', tool: 'sleep', method: 'tools/call', reason: 'operator stop' }
  ].sort((a, b) => order(a).localeCompare(order(b))), 'source, tool, method and the sanitised reason of each')
  const pluginInfo = lines.filter(l => Number(l.level) >= 30 && typeof l.msg === 'string' && (l.msg.startsWith('MCP') || /killed/.test(l.msg)))
  const exposed = pluginInfo.filter(l => 'scope' in l || JSON.stringify(l).includes('127.0.0.1') || JSON.stringify(l).includes(SCOPE))
  t.strictSame(exposed, [], 'no scope and no client address in the plugin\'s info/warn lines')
  const scoped = lines.filter(l => l.msg === 'MCP request cancelled in scope')
  t.equal(scoped.length, 5, 'the scope of each cancellation is logged at debug')
  t.ok(scoped.every(l => l.level === 20 && l.scope === SCOPE), 'at debug, with the scope')
  const warns = lines.filter(l => l.level === 40)
  t.equal(warns.length, 1, 'exactly one warn line: the kill')
  t.match(warns[0], { method: 'tools/call', requestId: 'kill-k1', msg: /did not stop within 200 ms .*killed/ }, 'the kill warn names the request and the timeout')
  t.strictSame(lines.filter(l => Number(l.level) >= 50), [], 'no error lines')
})

const promtool = findPromtool()
const promtoolSkip = promtool === undefined && process.env.CI === undefined
  ? 'promtool not installed (apt-get install prometheus); this test is required when CI is set'
  : false

t.test('the exposition passes promtool check metrics', { skip: promtoolSkip }, async t => {
  if (promtool === undefined) {
    t.fail('promtool is not on PATH: install the Debian package "prometheus" (CI=true requires it)')
    return
  }
  t.ok(scriptedScrape !== undefined && scriptedScrape.includes('mcp_requests_total{'), 'the scripted run produced a scrape to check')
  if (scriptedScrape === undefined) return

  // promtool accepts empty input, so check that what is piped in is the real thing.
  const pluginPart = familiesText(scriptedScrape, 'mcp_')
  t.equal(parseExposition(pluginPart).families.size, Object.keys(FAMILIES).length, 'all twenty-four plugin families are piped in')
  const plugin = promtoolCheck(promtool, pluginPart)
  t.strictSame(plugin.lines, [], 'no promtool output for the plugin\'s metrics of the scripted run')
  t.equal(plugin.status, 0, 'promtool exits 0 on them')

  const whole = promtoolCheck(promtool, scriptedScrape)
  t.strictSame(whole.lines, [], 'no promtool output for the demo\'s whole /metrics (prom-client defaults included)')
  t.equal(whole.status, 0, 'promtool exits 0 on it')

  // A plugin-only registry, scraped over HTTP after traffic: clean as a whole.
  const app = Fastify({ logger: false })
  await app.register(mcpCancellation, { serverInfo: { name: 'promtool', version: '1.0.0' } })
  registerEcho(app)
  const url = await listenOn(t, app)
  await rawPost(url, toolCall(1, 'echo', { text: 'x' }))
  await rawPost(url, cancelNotification('nobody'))
  const only = await scrape(metricsUrl(url))
  t.ok(only.text.includes('mcp_requests_total{method="tools/call",outcome="ok"} 1'), 'the plugin-only scrape carries the call')
  const checked = promtoolCheck(promtool, only.text)
  t.strictSame(checked.lines, [], 'no promtool output for a plugin-only /metrics')
  t.equal(checked.status, 0, 'promtool exits 0')
})

// -- registries, routes, guard (3) --------------------------------------------------------------------

async function pluginApp (t: Tap, options: McpCancellationOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, { serverInfo: { name: 'metrics-test', version: '1.0.0' }, ...options })
  registerEcho(app)
  await app.ready()
  return app
}

async function echo (app: FastifyInstance, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    const response = await postLegacy(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { id: i })
    if (json(response).result === undefined) throw new Error(`echo failed: ${response.payload}`)
  }
}

async function injectMetrics (app: FastifyInstance, path = '/metrics', headers: Record<string, string> = {}): Promise<{ status: number, contentType: string | undefined, exposition: Exposition | undefined }> {
  const response = await app.inject({ method: 'GET', url: path, headers })
  const contentType = response.headers['content-type']
  return {
    status: response.statusCode,
    contentType: typeof contentType === 'string' ? contentType : undefined,
    exposition: response.statusCode === 200 ? parseExposition(response.payload) : undefined
  }
}

const echoOk = (e: Exposition | undefined): number | undefined => e?.value('mcp_tool_calls_total', { tool: 'echo', outcome: 'ok' })

t.test('two plugin instances in one process: own registries, no duplicate-metric error, separate counts', async t => {
  const a = await pluginApp(t)
  const b = await pluginApp(t)
  t.not(a.mcpMetrics, b.mcpMetrics, 'each instance has its own registry')
  await echo(a, 2)
  await echo(b, 1)
  const ma = await injectMetrics(a)
  const mb = await injectMetrics(b)
  t.equal(ma.status, 200, 'A serves /metrics')
  t.equal(ma.contentType, PROMETHEUS_TEXT, 'the content type is the Prometheus text format')
  t.equal(echoOk(ma.exposition), 2, 'instance A counts its own 2 calls')
  t.equal(echoOk(mb.exposition), 1, 'instance B counts its own call')
  t.equal(ma.exposition?.value('mcp_requests_total', { method: 'tools/call', outcome: 'ok' }), 2, 'and its 2 requests')
  t.equal(globalRegistry.getSingleMetric('mcp_requests_total'), undefined, 'nothing lands in prom-client\'s global registry')
})

t.test('two plugin instances sharing a caller-supplied Registry reuse its metrics and count together', async t => {
  const registry = new Registry()
  const a = await pluginApp(t, { metrics: { registry } })
  const b = await pluginApp(t, { metrics: { registry } }) // would throw "already registered" if not reused
  t.equal(a.mcpMetrics, registry, 'A uses the supplied registry')
  t.equal(b.mcpMetrics, registry, 'B too')
  await echo(a, 2)
  await echo(b, 1)
  const shared = parseExposition(await registry.metrics())
  t.equal(echoOk(shared), 3, 'the shared registry holds the calls of both')
  t.equal(echoOk((await injectMetrics(a)).exposition), 3, 'A\'s /metrics serves the shared total')
  t.equal(echoOk((await injectMetrics(b)).exposition), 3, 'B\'s /metrics serves the shared total')
  t.equal(shared.value('mcp_in_flight_requests'), 0, 'the shared gauge is back at 0 (deltas add up)')
  t.equal(registry.getMetricsAsArray().filter(metric => metric.name === 'mcp_requests_total').length, 1, 'one mcp_requests_total, not two')
})

t.test('metrics: false serves no /metrics and exposes no registry', async t => {
  const app = await pluginApp(t, { metrics: false })
  await echo(app, 1)
  t.equal((await injectMetrics(app)).status, 404, 'GET /metrics is a 404')
  t.equal(app.mcpMetrics, null, 'no registry')
})

t.test('metrics: { path: false } serves nothing but still counts in the registry', async t => {
  const app = await pluginApp(t, { metrics: { path: false } })
  await echo(app, 2)
  t.equal((await injectMetrics(app)).status, 404, 'GET /metrics is a 404')
  const registry = app.mcpMetrics
  t.ok(registry !== null, 'the registry is there to scrape yourself')
  t.equal(echoOk(registry === null ? undefined : parseExposition(await registry.metrics())), 2, 'and it counts')
})

t.test('metrics.path moves the route', async t => {
  const app = await pluginApp(t, { metrics: { path: '/internal/prom' } })
  await echo(app, 1)
  t.equal((await injectMetrics(app)).status, 404, 'not at /metrics')
  const moved = await injectMetrics(app, '/internal/prom')
  t.equal(moved.status, 200, 'served at the configured path')
  t.equal(echoOk(moved.exposition), 1, 'with the counts')
})

t.test('metrics.onRequest guards the route (and only the route)', async t => {
  const guard = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (request.headers.authorization !== 'Bearer scrape-secret') await reply.code(401).send({ error: 'unauthorized' })
  }
  const app = await pluginApp(t, { metrics: { onRequest: guard } })
  await echo(app, 1) // the MCP endpoint is not behind the metrics guard
  const refused = await app.inject({ method: 'GET', url: '/metrics' })
  t.equal(refused.statusCode, 401, 'without credentials: 401')
  t.notOk(refused.payload.includes('mcp_'), 'and no metrics in the body')
  t.equal((await injectMetrics(app, '/metrics', { authorization: 'Bearer wrong' })).status, 401, 'wrong credentials: 401')
  const allowed = await injectMetrics(app, '/metrics', { authorization: 'Bearer scrape-secret' })
  t.equal(allowed.status, 200, 'with credentials: 200')
  t.equal(allowed.contentType, PROMETHEUS_TEXT, 'in the Prometheus text format')
  t.equal(echoOk(allowed.exposition), 1, 'with the counts')
})

t.test('the library never collects default process metrics; the demo app adds them itself', async t => {
  const app = await pluginApp(t)
  const own = await injectMetrics(app)
  const names = [...own.exposition?.families.keys() ?? []]
  t.strictSame(names.filter(name => !name.startsWith('mcp_')).sort(), [], 'a plugin-only registry holds only mcp_ metrics')
  t.strictSame(names.filter(name => name.startsWith('mcp_')).sort(), Object.keys(FAMILIES).sort(), 'all twenty-four of them')

  const demo = await buildDemo({})
  t.teardown(() => demo.close())
  const fromDemo = await injectMetrics(demo)
  t.equal(fromDemo.status, 200, 'the demo serves /metrics')
  t.ok(fromDemo.exposition?.families.has('process_cpu_user_seconds_total'), 'the demo\'s /metrics has process_ metrics')
  t.ok(fromDemo.exposition?.families.has('nodejs_eventloop_lag_seconds'), 'and nodejs_ metrics')
  t.ok(fromDemo.exposition?.families.has('mcp_requests_total'), 'next to the plugin\'s')
})
