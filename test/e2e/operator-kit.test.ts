/**
 * The operator's kit (operations/, docs/operations.md) against the real thing:
 * 1. `promtool check rules` and `promtool test rules` pass on the alert rules and their unit tests.
 * 2. A real Prometheus scrapes two demo servers (child processes, as `npm start` runs them, on one
 *    real redis-server), an open one and one requiring JWTs, every second, while the test puts load on
 *    them: calls of both eras, errors, a client cancel, kills at the kill timeout, a dropped stream
 *    nobody resumes and one that is resumed, tasks (completed, cancelled, and enough of them to evict
 *    at the scope's bound), asks answered and declined, listeners of both eras with a notification
 *    and a session ended under its stream, refused credentials, and calls over the per-scope in-flight
 *    bound.
 *    Then every panel query of the Grafana dashboard, its variables substituted as Grafana does,
 *    returns series through `/api/v1/query`; the variables' own queries find the job and both nodes;
 *    the same Prometheus has loaded the alert rules, all evaluate healthy, and the kill alert is
 *    pending for the tool the load killed.
 * 3. The dashboard has a panel for every `mcp_` family the nodes expose, and every selector in it is
 *    filtered by `$job` and `$instance`.
 *
 * Without promtool, prometheus or redis-server the tests are skipped, except under CI (`CI` set) where
 * that is a failure, as for the other promtool and Redis tests.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { spawnSync } from 'node:child_process'
import t from 'tap'
import { startDemoChild, type DemoChild } from '../helpers/demo-child.js'
import { EventStream, newSession, sessionStreamHeaders } from '../helpers/event-stream.js'
import { legacyCall, openPost, rawPost } from '../helpers/http.js'
import { bearer, foreignSigner } from '../helpers/identity.js'
import { cancelNotification, DEFAULT_HEADERS, LEGACY, META, modernHeaders, modernMeta, toolCall } from '../helpers/jsonrpc.js'
import { findPromtool, metricValue, scrapeMetrics } from '../helpers/metrics.js'
import { findPrometheus, PrometheusServer } from '../helpers/prometheus-server.js'
import { RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import { eventIds, resume, resumeHeaders } from '../helpers/resumable.js'
import { fetchSender, TaskClient } from '../helpers/tasks.js'
import { waitFor, within } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const OPERATIONS = fileURLToPath(new URL('../../operations/', import.meta.url))
const DASHBOARD = `${OPERATIONS}grafana-dashboard.json`
const ALERTS = `${OPERATIONS}alerts.yml`
const ALERT_TESTS = `${OPERATIONS}alerts.test.yml`
/** The scrape job's name the alert rules select. */
const JOB = 'mcp'
const SECRET = 'operator-kit-secret-of-32-bytes-or-more!'
const SESSION_SECRET = 'operator-kit-session-secret-0123456789ab'
const JWT_SECRET = 'operator-kit-jwt-secret-0123456789abcdef'
/** The kill timeout of the nodes: a stubborn call is killed this long after its cancel. */
const CANCEL_TIMEOUT_MS = 200
/** What Grafana's `$__rate_interval` is at a 1 s scrape interval, with room for a slow machine. */
const RATE_INTERVAL = '15s'
/** How long Prometheus may take to show what the load did (a scrape a second, rules evaluated a second). */
const SCRAPE_PATIENCE_MS = 15_000
/** The scope's kept-task bound (`maxKeptTasksPerScope`, default 256): one task more evicts the oldest ended one. */
const KEPT_TASKS_PER_SCOPE = 256
/** The JWT node's `maxInFlightPerScope` (MCP_MAX_IN_FLIGHT_PER_SCOPE). */
const MAX_IN_FLIGHT_PER_SCOPE = 4

interface Target { refId: string, expr: string }
interface Panel { id: number, type: string, title: string, datasource?: { type: string, uid: string }, targets?: Target[], panels?: Panel[] }
interface Variable { name: string, type: string, definition?: string }
interface Dashboard { panels: Panel[], templating: { list: Variable[] } }

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard
/** Every panel, those inside rows included. */
const panels = dashboard.panels.flatMap(panel => [panel, ...panel.panels ?? []])
const queries = panels.flatMap(panel => (panel.targets ?? []).map(target => ({ panel, target })))
/** The alert names of the rule file. */
const alertNames = [...readFileSync(ALERTS, 'utf8').matchAll(/^\s*- alert: (\w+)$/gm)].map(match => match[1]!)

/** What Grafana sends for `expr`: its interval macros and the dashboard's variables replaced (`$datasource` is not in an expr). */
function asGrafanaSends (expr: string, variables: Record<string, string>): string {
  return expr
    .replaceAll('$__rate_interval', RATE_INTERVAL)
    .replaceAll('$__interval', '1s')
    .replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, braced: string | undefined, bare: string | undefined) => {
      const value = variables[braced ?? bare ?? '']
      if (value === undefined) throw new Error(`${expr}: ${whole} is not a variable of the dashboard`)
      return value
    })
}

/** A multi-value variable as Grafana writes it into a `=~` matcher: each value regex-escaped (inside a PromQL string), alternatives in a group. */
function regexOf (values: readonly string[]): string {
  return `(${values.map(value => value.replace(/[.*+?^${}()|[\]\\]/g, '\\\\$&')).join('|')})`
}

/** The metric names an expr reads (`mcp_…` and `up`). */
function metricsOf (expr: string): string[] {
  return [...expr.matchAll(/\b(mcp_[a-z_]+?)(?:_bucket|_count|_sum)?\{/g)].map(match => match[1]!)
}

/** `mcp_…` families the node at `url` exposes, by their own name (histograms once). */
async function familiesOf (url: URL): Promise<string[]> {
  return [...(await scrapeMetrics(url)).families.keys()].filter(name => name.startsWith('mcp_'))
}

// ---------------------------------------------------------------------------------------------------
// 3. the dashboard itself

t.test('the dashboard: a Prometheus data source variable, job and instance variables, every selector filtered by them', async t => {
  const variables = new Map(dashboard.templating.list.map(variable => [variable.name, variable]))
  t.match(variables.get('datasource'), { type: 'datasource', query: 'prometheus' }, 'a data source variable of type prometheus')
  t.match(variables.get('job'), { type: 'query', definition: /^label_values\(mcp_\w+, job\)$/ }, 'a job variable from the plugin\'s metrics')
  t.match(variables.get('instance'), { type: 'query', definition: /^label_values\(mcp_\w+\{job=~"\$job"\}, instance\)$/ }, 'an instance variable within the job')
  t.equal(new Set(panels.map(panel => panel.id)).size, panels.length, 'panel ids are unique')
  for (const panel of panels.filter(panel => panel.type !== 'row')) {
    t.same(panel.datasource, { type: 'prometheus', uid: '${datasource}' }, `${panel.title}: the data source is the variable`)
    t.ok((panel.targets ?? []).length > 0, `${panel.title}: has a query`)
  }
  for (const { panel, target } of queries) {
    const selectors = [...target.expr.matchAll(/\b(?:mcp_[a-z_]+|up)(\{[^}]*\})?/g)]
    t.ok(selectors.length > 0, `${panel.title} [${target.refId}] reads a metric`)
    for (const [selector, labels] of selectors) {
      t.ok(labels?.includes('job=~"$job"') === true && labels.includes('instance=~"$instance"'), `${panel.title} [${target.refId}]: ${selector} is filtered by $job and $instance`)
    }
  }
})

// ---------------------------------------------------------------------------------------------------
// 1. promtool

const promtool = findPromtool()
const promtoolSkip = promtool === undefined && process.env.CI === undefined
  ? 'promtool not installed (apt-get install prometheus); this test is required when CI is set'
  : false

t.test('the alert rules pass promtool check rules, and their unit tests pass promtool test rules', { skip: promtoolSkip }, async t => {
  if (promtool === undefined) {
    t.fail('promtool is not on PATH: install the Debian package "prometheus" (CI=true requires it)')
    return
  }
  const check = spawnSync(promtool, ['check', 'rules', ALERTS], { encoding: 'utf8', timeout: 30_000 })
  t.equal(check.status, 0, 'promtool check rules exits 0', { output: `${check.stdout}${check.stderr}` })
  t.match(check.stdout, new RegExp(`SUCCESS: ${alertNames.length} rules found`), `it finds the ${alertNames.length} rules`)
  const unit = spawnSync(promtool, ['test', 'rules', ALERT_TESTS], { encoding: 'utf8', timeout: 30_000 })
  t.equal(unit.status, 0, 'promtool test rules exits 0', { output: `${unit.stdout}${unit.stderr}` })
  t.match(unit.stdout, /SUCCESS/, 'every alert test passes')
  const tested = new Set([...readFileSync(ALERT_TESTS, 'utf8').matchAll(/alertname: (\w+)/g)].map(match => match[1]!))
  t.strictSame(alertNames.filter(name => !tested.has(name)), [], 'every alert has a unit test')
})

// ---------------------------------------------------------------------------------------------------
// 2. a real Prometheus

const prometheus = findPrometheus()
const prometheusSkip = prometheus === undefined && process.env.CI === undefined
  ? 'prometheus not installed (apt-get install prometheus); this test is required when CI is set'
  : false
const skip = redisSkipReason(t) || prometheusSkip

/** The host:port Prometheus scrapes for a demo child. */
const targetOf = (node: DemoChild): string => node.url.host

/** POSTs a modern `tools/call` of `name` (with elicitation declared) and returns its JSON body. */
async function modernToolCall (url: URL, id: string, params: Record<string, unknown>): Promise<Record<string, any>> {
  const headers: Record<string, string> = { ...DEFAULT_HEADERS }
  for (const [key, value] of Object.entries(modernHeaders('tools/call', String(params.name)))) if (value !== undefined) headers[key] = value
  const body = { jsonrpc: '2.0', id, method: 'tools/call', params: { ...params, _meta: modernMeta({ [META.clientCapabilities]: { elicitation: {} } }) } }
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) })
  return JSON.parse(await response.text()) as Record<string, any>
}

/** Plain calls of both eras, and errors: an isError result, an unknown tool, an unknown method. */
async function callsAndErrors (t: Tap, url: URL): Promise<void> {
  for (let i = 0; i < 5; i++) {
    t.match(JSON.parse((await rawPost(url, toolCall(`echo-${i}`, 'echo', { text: 'hi' }))).text), { result: { content: [{ text: 'hi' }] } }, `legacy echo ${i}`)
  }
  t.match(await modernToolCall(url, 'modern-echo', { name: 'echo', arguments: { text: 'hi' } }), { result: { content: [{ text: 'hi' }] } }, 'a modern echo')
  t.match(JSON.parse((await rawPost(url, toolCall('no-text', 'echo', {}))).text), { result: { isError: true } }, 'an isError result')
  t.match(JSON.parse((await rawPost(url, toolCall('unknown', 'no-such-tool', {}))).text), { error: { code: -32602 } }, 'an unknown tool')
  t.match(JSON.parse((await rawPost(url, { jsonrpc: '2.0', id: 'bogus', method: 'bogus/method' })).text), { error: { code: -32601 } }, 'an unknown method')
}

/** A client cancel of a running sleep, and a stubborn call killed at the kill timeout. */
async function cancelAndKill (t: Tap, url: URL, id: string): Promise<void> {
  const sleeping = legacyCall(url, `sleep-${id}`, 'sleep', { ms: 10_000 }, { progressToken: `p-${id}` })
  t.ok(await sleeping.waitForText('notifications/progress'), 'the sleep runs')
  t.equal((await rawPost(url, cancelNotification(`sleep-${id}`, 'operator kit'))).status, 202, 'its cancel is accepted')
  t.ok((await within(sleeping.done, 5000, undefined)) !== undefined, 'and the call ends')

  const killedBefore = await metricValue(url, 'mcp_tool_calls_total', { tool: 'stubborn', outcome: 'killed' }) ?? 0
  // Other requests may still be running here (a listen, a stream): stubborn runs once the count is above theirs.
  const inFlightBefore = await metricValue(url, 'mcp_in_flight_requests') ?? 0
  const stubborn = openPost(url, toolCall(`stubborn-${id}`, 'stubborn', { ms: 2000 }))
  t.ok(await waitFor(async () => (await metricValue(url, 'mcp_in_flight_requests') ?? 0) > inFlightBefore, 5000), 'stubborn runs')
  t.equal((await rawPost(url, cancelNotification(`stubborn-${id}`))).status, 202, 'its cancel is accepted')
  await within(stubborn.done, 5000, undefined)
  t.ok(await waitFor(async () => (await metricValue(url, 'mcp_tool_calls_total', { tool: 'stubborn', outcome: 'killed' }) ?? 0) > killedBefore, 5000),
    `it is killed ${CANCEL_TIMEOUT_MS} ms after its cancel`)
}

/** A streamed call whose client leaves for good (the stream expires), and one whose client comes back. */
async function droppedStreams (t: Tap, url: URL): Promise<void> {
  const abandoned = legacyCall(url, 'abandoned', 'sleep', { ms: 10_000 }, { progressToken: 'p-abandoned' })
  t.ok(await abandoned.waitForText('notifications/progress'), 'the abandoned call streams')
  abandoned.destroy()
  t.ok(await waitFor(async () => (await metricValue(url, 'mcp_stream_resumes_total', { outcome: 'expired' }) ?? 0) >= 1, 5000),
    'nobody resumes it: it expires')

  const resumed = legacyCall(url, 'resumed', 'sleep', { ms: 600, stepMs: 100 }, { progressToken: 'p-resumed' })
  t.ok(await resumed.waitForText('notifications/progress'), 'the resumed call streams')
  resumed.destroy()
  const lastSeen = eventIds(resumed.text()).at(-1)
  t.ok(lastSeen !== undefined, 'its events carry ids')
  if (lastSeen === undefined) return
  const again = resume(t, url, resumeHeaders(lastSeen))
  await within(again.ended, 5000, undefined)
  t.match(again.messages().at(-1), { id: 'resumed', result: { content: [{ text: 'slept 600' }] } }, 'its client resumes it and gets the result')
}

/** Tasks: one completed, one cancelled, and as many more (each cancelled at once) as evict at the scope's bound. */
async function tasks (t: Tap, url: URL): Promise<void> {
  const client = new TaskClient(fetchSender(url))
  const completed = await client.create('render', { frames: 1 })
  t.match(await client.waitFor(completed, ['completed'], 5000), { status: 'completed' }, 'a render task completes')
  const lanes = 8
  await Promise.all(Array.from({ length: lanes }, async (_, lane) => {
    for (let i = lane; i <= KEPT_TASKS_PER_SCOPE; i += lanes) {
      const taskId = await client.create('render', { frames: 100 })
      const cancelled = await client.cancel(taskId)
      if (cancelled.status !== 200 || cancelled.body.error !== undefined) t.fail(`tasks/cancel of task ${i}`, { answer: cancelled.body })
    }
  }))
  t.ok(await waitFor(async () => (await metricValue(url, 'mcp_task_evictions_total', { bound: 'scope' }) ?? 0) >= 1, 5000),
    `${KEPT_TASKS_PER_SCOPE + 2} tasks in one scope evict the oldest ended one`)
}

/** confirm_action in 2026-07-28: one round answered, one declined. */
async function asks (t: Tap, url: URL): Promise<void> {
  for (const [action, answer, told] of [['accept', { action: 'accept', content: { confirm: true } }, 'Done: water the plants'],
    ['decline', { action: 'decline' }, 'Not done: you declined to answer about "water the plants"']] as const) {
    const call = { name: 'confirm_action', arguments: { action: 'water the plants' } }
    const round = await modernToolCall(url, `ask-${action}`, call)
    t.equal(round.result?.resultType, 'input_required', `confirm_action asks (${action})`)
    const [key] = Object.keys(round.result?.inputRequests ?? {})
    const answered = await modernToolCall(url, `ask-${action}-2`, { ...call, inputResponses: { [key ?? '']: answer }, requestState: round.result?.requestState })
    t.match(answered.result?.content, [{ text: told }], `the retry with the answer (${action}) runs to its end`)
  }
}

/**
 * Listeners of both eras: a modern listen told that demo://touches changed, and a legacy session's
 * stream cut off when the session is deleted. The listen stays open (closed at teardown).
 */
async function listeners (t: Tap, url: URL): Promise<void> {
  const listenHeaders: Record<string, string> = { ...DEFAULT_HEADERS }
  for (const [key, value] of Object.entries(modernHeaders('subscriptions/listen'))) if (value !== undefined) listenHeaders[key] = value
  const listen = EventStream.post(url, {
    jsonrpc: '2.0', id: 'listen', method: 'subscriptions/listen', params: { _meta: modernMeta(), notifications: { resourceSubscriptions: ['demo://touches'] } }
  }, listenHeaders)
  t.teardown(() => { listen.close() })
  t.equal((await listen.head)?.status, 200, 'a modern listen is open')
  t.ok(await waitFor(async () => (await metricValue(url, 'mcp_listeners', { era: 'modern' }) ?? 0) >= 1, 5000), 'and counted')
  t.match(JSON.parse((await rawPost(url, toolCall('touch', 'touch_resource', { uri: 'demo://touches' }))).text), { result: { content: [{ text: 'touched demo://touches' }] } }, 'demo://touches changes')
  t.ok(await listen.received('notifications/resources/updated'), 'the listen is told')

  const session = await newSession(url)
  const sessionStream = EventStream.get(url, sessionStreamHeaders(session))
  t.teardown(() => { sessionStream.close() })
  t.equal((await sessionStream.head)?.status, 200, 'a legacy session\'s stream is open')
  t.equal((await fetch(url, { method: 'DELETE', headers: { ...LEGACY, 'mcp-session-id': session } })).status, 204, 'the session is deleted')
  t.ok(await within(sessionStream.ended, 5000, undefined), 'and its stream is cut off')
}

/** Credentials the JWT node refuses (none, garbage, expired), and one it takes. */
async function authFailures (t: Tap, url: URL): Promise<void> {
  const signer = await foreignSigner(t, JWT_SECRET)
  const echo = toolCall('auth-echo', 'echo', { text: 'hi' })
  t.equal((await rawPost(url, echo)).status, 401, 'no token: 401')
  t.equal((await rawPost(url, echo, bearer('not-a-token'))).status, 401, 'garbage: 401')
  t.equal((await rawPost(url, echo, bearer(signer.jwt.sign({ sub: 'alice' }, { expiresIn: -10 })))).status, 401, 'expired: 401')
  t.equal((await rawPost(url, echo, bearer(signer.jwt.sign({ sub: 'alice' })))).status, 200, 'a good token: 200')
}

/**
 * One principal sending twice as many calls as its scope may have running on the JWT node: those over
 * `maxInFlightPerScope` are refused with 429; then all are cancelled.
 */
async function scopeInFlightRefusals (t: Tap, url: URL): Promise<void> {
  const signer = await foreignSigner(t, JWT_SECRET)
  const tenant = bearer(signer.jwt.sign({ sub: 'busy-tenant' }))
  const calls = Array.from({ length: 2 * MAX_IN_FLIGHT_PER_SCOPE }, (_, i) => openPost(url, toolCall(`hold-${i}`, 'sleep', { ms: 30_000 }), tenant))
  let refused = 0
  for (const call of calls) void call.done.then(response => { if (response.status === 429) refused++ }, () => {})
  await waitFor(() => refused >= MAX_IN_FLIGHT_PER_SCOPE, 5000)
  t.equal(refused, MAX_IN_FLIGHT_PER_SCOPE, 'the calls over the scope\'s bound are refused at once (429)')
  await Promise.all(calls.map(async (_, i) => await rawPost(url, cancelNotification(`hold-${i}`), tenant)))
  t.ok(await waitFor(async () => (await metricValue(url, 'mcp_in_flight_requests') ?? 0) === 0, 5000), 'the others are cancelled')
}

t.test('a real Prometheus scraping the demo under load: every panel query has data, every alert rule is healthy', { skip, timeout: 90_000 }, async t => {
  if (prometheus === undefined) {
    t.fail('prometheus is not on PATH: install the Debian package "prometheus" (CI=true requires it)')
    return
  }
  const startedAt = Date.now()
  const redis = await RedisServer.start(t)
  const shared = { MCP_REDIS_URL: redis.url, MCP_SECRET: SECRET, MCP_CANCEL_TIMEOUT_MS: String(CANCEL_TIMEOUT_MS) }
  const [open, authenticated] = await Promise.all([
    startDemoChild(t, { ...shared, MCP_SESSION_SECRET: SESSION_SECRET, MCP_RESUME_WINDOW_MS: '300' }),
    startDemoChild(t, { ...shared, MCP_JWT_SECRET: JWT_SECRET, MCP_MAX_IN_FLIGHT_PER_SCOPE: String(MAX_IN_FLIGHT_PER_SCOPE) })
  ])
  const server = await PrometheusServer.start(t, prometheus, { job: JOB, targets: [targetOf(open), targetOf(authenticated)], ruleFiles: [ALERTS] })
  t.comment(`redis, two demo nodes and prometheus started in ${Date.now() - startedAt} ms`)

  const loadStartedAt = Date.now()
  await t.test('load', async t => {
    await Promise.all([callsAndErrors(t, open.url), authFailures(t, authenticated.url), asks(t, open.url), scopeInFlightRefusals(t, authenticated.url)])
    await cancelAndKill(t, open.url, '1')
    await Promise.all([droppedStreams(t, open.url), tasks(t, open.url), listeners(t, open.url)])
    // A label set's first sample is where increase() starts counting: the kill alert sees the second kill.
    t.ok(await waitFor(async () => (await server.query('mcp_tool_calls_total{outcome="killed"}')).length > 0, SCRAPE_PATIENCE_MS, 200), 'Prometheus has scraped the first kill')
    await cancelAndKill(t, open.url, '2')
  })
  t.comment(`load in ${Date.now() - loadStartedAt} ms`)

  t.ok(await server.targetsUp(SCRAPE_PATIENCE_MS), 'Prometheus scrapes both nodes')
  const exposed = new Set([...await familiesOf(open.url), ...await familiesOf(authenticated.url)])
  const read = new Set(queries.flatMap(({ target }) => metricsOf(target.expr)))
  t.strictSame([...exposed].filter(name => !read.has(name)).sort(), [], 'every mcp_ family the nodes expose has a panel')

  const instances = [targetOf(open), targetOf(authenticated)]
  t.same(new Set(await server.api<string[]>('label/job/values', { 'match[]': 'mcp_in_flight_requests' })), new Set([JOB]), 'the job variable finds the job')
  t.same(new Set(await server.api<string[]>('label/instance/values', { 'match[]': `mcp_in_flight_requests{job=~"${JOB}"}` })), new Set(instances), 'the instance variable finds both nodes')

  const variables = { job: JOB, instance: regexOf(instances) }
  const queriedAt = Date.now()
  const deadline = queriedAt + SCRAPE_PATIENCE_MS
  for (const { panel, target } of queries) {
    const expr = asGrafanaSends(target.expr, variables)
    let series = await server.query(expr)
    while (series.length === 0 && Date.now() < deadline) {
      await new Promise(resolve => setTimeout(resolve, 250))
      series = await server.query(expr)
    }
    t.ok(series.length > 0, `${panel.title} [${target.refId}] has data`, { expr, series: series.slice(0, 4) })
  }
  t.comment(`${queries.length} panel queries answered in ${Date.now() - queriedAt} ms`)
  const connected = await server.query(`mcp_bus_connected{job="${JOB}"}`)
  t.same(Object.fromEntries(connected.map(sample => [sample.metric.instance, sample.value[1]])), Object.fromEntries(instances.map(instance => [instance, '1'])),
    'the Bus connected panel shows both nodes connected to Redis')

  const evaluatedAfter = new Date(loadStartedAt).toISOString()
  let rules = await server.rules()
  while ((rules.length < alertNames.length || rules.some(rule => rule.lastEvaluation < evaluatedAfter)) && Date.now() < deadline) {
    await new Promise(resolve => setTimeout(resolve, 250))
    rules = await server.rules()
  }
  t.strictSame(rules.map(rule => rule.name).sort(), [...alertNames].sort(), 'Prometheus loaded every alert rule of operations/alerts.yml')
  for (const rule of rules) {
    t.ok(rule.health === 'ok' && (rule.lastError ?? '') === '', `${rule.name} evaluates healthy`, { health: rule.health, lastError: rule.lastError })
  }
  const killed = async (): Promise<boolean> => (await server.rules()).find(rule => rule.name === 'McpToolsKilled')?.alerts?.some(alert => alert.labels.tool === 'stubborn') === true
  t.ok(await waitFor(killed, SCRAPE_PATIENCE_MS, 250), 'McpToolsKilled is pending for the tool the load killed (it fires after its 10 minutes)')
  const quiet = rules.filter(rule => ['McpTargetDown', 'McpNoScrapes', 'McpBusDisconnected'].includes(rule.name))
  t.strictSame(quiet.map(rule => [rule.name, rule.state]), quiet.map(rule => [rule.name, 'inactive']), 'nodes up and connected: no target or bus alert')
  t.comment(`the whole run in ${Date.now() - startedAt} ms`)
})
