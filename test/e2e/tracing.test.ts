/**
 * Tracing end to end (issue 14), on real listening servers with an in-memory OpenTelemetry SDK
 * (test/helpers/otel.ts): the tool call's SERVER span records who cancelled it and how its handler
 * ended, for a client cancel (SDK 1.x aborting its call), a disconnect, a lifetime cancel, a handler
 * that outlives the kill timeout (in process and in a worker thread), and, across two nodes sharing a
 * real `redis-server`, a `notifications/cancelled` or `tasks/cancel` sent to the other node: the
 * cancelled span links to the span of the request that cancelled it.
 *
 * Every node of a multi-node test runs in this process and reports to the one global SDK. Spans are
 * told apart by their trace: each request the test sends carries a `traceparent` of its own, so the
 * span a node made for it is the SERVER span whose parent is that header's span.
 *
 * Without redis-server the multi-node tests are skipped, except under CI where that is a failure.
 */
import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { SpanKind, SpanStatusCode, type Link } from '@opentelemetry/api'
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace-base'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { Redis } from 'ioredis'
import { drained, startNode, untilCrossNodeWorks } from '../helpers/cluster.js'
import { legacyCall, openPost, rawPost } from '../helpers/http.js'
import { cancelNotification, LEGACY, toolCall, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenPlugin } from '../helpers/listen.js'
import { attempt, describeError } from '../helpers/mcp-results.js'
import { metricValue } from '../helpers/metrics.js'
import { installOtel, type InMemoryOtel } from '../helpers/otel.js'
import { channels } from '../helpers/redis.js'
import { RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import { startTaskNode, TaskTools } from '../helpers/task-nodes.js'
import { registerIgnoreCancel } from '../helpers/tools.js'
import { waitFor } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const skip = redisSkipReason(t)
const SCOPE = 'ip:127.0.0.1'
const SECRET = 'tracing-e2e-secret-0123456789abcdef0123'
const SPIN_WORKER = new URL('../../example/workers/spin.ts', import.meta.url)

const CANCELLED = 'mcp.request.cancelled'
const STOPPED = 'mcp.handler.stopped'
const KILLED = 'mcp.handler.killed'
const SOURCE = 'mcp.cancellation.source'
const REASON = 'mcp.cancellation.reason'
const STOP_DURATION = 'mcp.cancellation.stop_duration'
const KILL_TIMEOUT = 'mcp.cancellation.kill_timeout_ms'

// -- trace context the test sends, and the spans it finds by it --------------------------------------

/** A span of the test's own, sent as `traceparent`: the span a node makes for that request is its child. */
interface RemoteParent {
  traceId: string
  spanId: string
  header: string
}

function remoteParent (): RemoteParent {
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` }
}

/** The finished SERVER span a node made for the request sent with `parent`, once there (undefined after `timeoutMs`). */
async function childOf (otel: InMemoryOtel, parent: RemoteParent, timeoutMs = 3000): Promise<ReadableSpan | undefined> {
  return await finishedSpan(otel, span => span.kind === SpanKind.SERVER && span.parentSpanContext?.spanId === parent.spanId &&
    span.spanContext().traceId === parent.traceId, timeoutMs)
}

/** The finished `tools/call` SERVER span of JSON-RPC request `id`, once there. */
async function toolCallSpan (otel: InMemoryOtel, id: string | number, timeoutMs = 3000): Promise<ReadableSpan | undefined> {
  return await finishedSpan(otel, span => span.kind === SpanKind.SERVER && span.attributes['mcp.method.name'] === 'tools/call' &&
    span.attributes['jsonrpc.request.id'] === String(id), timeoutMs)
}

/** Polls the finished spans until one matches (spans are exported when they end). */
async function finishedSpan (otel: InMemoryOtel, predicate: (span: ReadableSpan) => boolean, timeoutMs: number): Promise<ReadableSpan | undefined> {
  let found: ReadableSpan | undefined
  await waitFor(() => (found = otel.spans().find(predicate)) !== undefined, timeoutMs)
  return found
}

/** The names of the span's events, in order. */
function eventNames (span: ReadableSpan | undefined): string[] {
  return span?.events.map(event => event.name) ?? []
}

function eventOf (span: ReadableSpan | undefined, name: string): TimedEvent | undefined {
  return span?.events.find(event => event.name === name)
}

/** The span's links that point at `target`'s span context (same trace id and span id). */
function linksTo (span: ReadableSpan | undefined, target: ReadableSpan | undefined): Link[] {
  if (span === undefined || target === undefined) return []
  const { traceId, spanId } = target.spanContext()
  return span.links.filter(link => link.context.traceId === traceId && link.context.spanId === spanId)
}

function seconds ([s, ns]: readonly [number, number]): number {
  return s + ns / 1e9
}

/** A short description of a span, for assertion messages. */
function describeSpan (span: ReadableSpan | undefined): string {
  if (span === undefined) return 'no span'
  return JSON.stringify({
    name: span.name,
    status: span.status,
    attributes: span.attributes,
    events: span.events.map(event => [event.name, event.attributes]),
    links: span.links.map(link => [link.context.traceId, link.context.spanId, link.attributes])
  })
}

/**
 * What a cancellation the caller asked for (client, disconnect, task) and a handler that then stopped
 * leave on the tool span: one cancelled event with `source` (and `reason`), then a stopped event with a
 * duration in seconds; the source as a span attribute; no error (status UNSET, no error.type).
 */
function assertCallerCancelStopped (t: Tap, span: ReadableSpan | undefined, source: string, reason: string): void {
  t.ok(span, `the tool call's span ended (${describeSpan(span)})`)
  if (span === undefined) return
  t.same(eventNames(span), [CANCELLED, STOPPED], `events: ${CANCELLED}, then ${STOPPED}`)
  t.same(eventOf(span, CANCELLED)?.attributes, { [SOURCE]: source, [REASON]: reason },
    `${CANCELLED} says source "${source}" and the reason "${reason}"`)
  const stop = eventOf(span, STOPPED)?.attributes?.[STOP_DURATION]
  t.ok(typeof stop === 'number' && stop >= 0 && stop < 5, `${STOPPED} carries a stop duration in seconds (${String(stop)})`)
  t.equal(span.attributes[SOURCE], source, `the span's ${SOURCE} is "${source}"`)
  t.equal(span.status.code, SpanStatusCode.UNSET, 'status UNSET: a cancellation the caller asked for is no error')
  t.equal(span.attributes['error.type'], undefined, 'no error.type')
  t.equal(span.attributes['rpc.response.status_code'], undefined, 'no rpc.response.status_code')
}

/**
 * A handler that outlived its cancellation by the kill timeout: cancelled, then killed (never stopped),
 * error.type `handler_killed`, status ERROR.
 */
function assertKilled (t: Tap, span: ReadableSpan | undefined, source: string, reason: string, cancelTimeoutMs: number): void {
  t.ok(span, `the tool call's span ended (${describeSpan(span)})`)
  if (span === undefined) return
  t.same(eventNames(span), [CANCELLED, KILLED], `events: ${CANCELLED}, then ${KILLED}; no ${STOPPED}`)
  t.same(eventOf(span, CANCELLED)?.attributes, { [SOURCE]: source, [REASON]: reason }, `cancelled by "${source}" with "${reason}"`)
  t.same(eventOf(span, KILLED)?.attributes, { [KILL_TIMEOUT]: cancelTimeoutMs }, `${KILLED} carries the kill timeout (${cancelTimeoutMs} ms)`)
  const killedAfter = seconds(eventOf(span, KILLED)?.time ?? [0, 0]) - seconds(eventOf(span, CANCELLED)?.time ?? [0, 0])
  t.ok(killedAfter >= cancelTimeoutMs / 1000 - 0.02, `killed no sooner than the kill timeout after the cancel (${killedAfter.toFixed(3)} s)`)
  t.equal(span.attributes['error.type'], 'handler_killed', 'error.type handler_killed')
  t.equal(span.status.code, SpanStatusCode.ERROR, 'status ERROR')
  t.equal(span.attributes['rpc.response.status_code'], undefined, 'no rpc.response.status_code: nothing was answered')
}

/** The link from the cancelled span to the span of the request that cancelled it: exactly one, saying the source. */
function assertLinkedTo (t: Tap, span: ReadableSpan | undefined, cause: ReadableSpan | undefined, source: string, what: string): void {
  t.ok(cause, `${what}: its span ended (${describeSpan(cause)})`)
  const links = linksTo(span, cause)
  t.equal(links.length, 1, `the tool call's span links to ${what}'s span (links: ${JSON.stringify(span?.links.map(link => link.context))})`)
  t.same(links[0]?.attributes, { [SOURCE]: source }, `the link says source "${source}"`)
  t.equal(span?.links.length, 1, 'and it has no other link')
}

// -- one node -----------------------------------------------------------------------------------------

/** A fetch for the SDK transport that sends its `notifications/cancelled` POST with `parent` as traceparent, and records the answers. */
function cancelWithParent (parent: RemoteParent, statuses: number[]): (url: string | URL, init?: RequestInit) => Promise<Response> {
  return async (url, init) => {
    let method: unknown
    try { method = (JSON.parse(String(init?.body)) as { method?: unknown }).method } catch {}
    if (init?.method !== 'POST' || method !== 'notifications/cancelled') return await fetch(url, init)
    const headers = new Headers(init.headers)
    headers.set('traceparent', parent.header)
    const response = await fetch(url, { ...init, headers })
    statuses.push(response.status)
    return response
  }
}

t.test('client cancel (SDK 1.x aborts its call): cancelled by "client" with the sanitised reason, stopped, no error, linked to the notifications/cancelled span', async t => {
  const otel = installOtel(t)
  const server = await listenPlugin(t)
  const cancelParent = remoteParent()
  const cancelStatuses: number[] = []
  const client = new Client({ name: 'tracing-e2e', version: '1.0.0' })
  t.teardown(() => client.close())
  await client.connect(new StreamableHTTPClientTransport(server.url, { fetch: cancelWithParent(cancelParent, cancelStatuses) }))

  const controller = new AbortController()
  const call = attempt(client.callTool({ name: 'probe', arguments: { ms: 5000 } }, undefined, { signal: controller.signal }))
  t.ok(await waitFor(() => server.probe.calls.length === 1, 3000), 'the probe runs')
  // Controls, a line break and a bidi override: what a trace backend must not be handed as is.
  controller.abort('user\u0000 pressed\u202e stop\r\n')
  const outcome = await call
  t.ok(outcome.error !== undefined, `the client call rejects (${JSON.stringify(describeError(outcome.error))})`)
  t.ok(await waitFor(() => server.probe.calls[0]?.endedAt !== undefined, 3000), 'the probe stopped')
  t.equal(server.probe.calls[0]?.reason, 'user pressed stop', 'the handler saw the sanitised reason')

  const span = await toolCallSpan(otel, server.probe.calls[0]?.requestId ?? '?')
  t.equal(span?.name, 'tools/call probe', 'the tool call\'s SERVER span is "tools/call probe"')
  t.equal(span?.attributes['gen_ai.tool.name'], 'probe')
  assertCallerCancelStopped(t, span, 'client', 'user pressed stop')

  t.ok(await waitFor(() => cancelStatuses.length === 1, 2000), 'the SDK sent its notifications/cancelled')
  t.same(cancelStatuses, [202], 'answered 202')
  const cancelSpan = await childOf(otel, cancelParent)
  t.equal(cancelSpan?.kind, SpanKind.SERVER, 'the notifications/cancelled POST has a SERVER span of its own')
  t.same({ name: cancelSpan?.name, method: cancelSpan?.attributes['mcp.method.name'] }, { name: 'notifications/cancelled', method: 'notifications/cancelled' },
    'it is named notifications/cancelled, and so is its mcp.method.name')
  t.equal(cancelSpan?.status.code, SpanStatusCode.UNSET, 'the notification itself did not fail')
  assertLinkedTo(t, span, cancelSpan, 'client', 'the notifications/cancelled')
  t.not(span?.spanContext().traceId, cancelParent.traceId, 'a link, not a parent: the tool call stays in its own trace')
})

t.test('disconnect (the client closes its connection mid-call): cancelled by "disconnect", stopped, no error, no link', async t => {
  const otel = installOtel(t)
  const server = await listenPlugin(t)
  const post = openPost(server.url, toolCall('dc-1', 'probe', { ms: 5000 }))
  t.ok(await waitFor(() => server.probe.calls.length === 1, 3000), 'the probe runs')
  post.destroy()
  await post.done.catch(() => {})
  t.ok(await waitFor(() => server.probe.calls[0]?.endedAt !== undefined, 3000), 'the probe stopped')

  const span = await toolCallSpan(otel, 'dc-1')
  assertCallerCancelStopped(t, span, 'disconnect', 'client disconnected')
  t.same(span?.links, [], 'no link: no other request caused it')
})

t.test('a resumable stream (2025-11-25): its span tells each pause and resume, and a window nobody resumed in ends in a disconnect', async t => {
  const otel = installOtel(t)
  const server = await listenPlugin(t, { resumability: { windowMs: 600, retryMs: 100 } })
  const firstId = (text: string): string | undefined => /^id: (\S+)$/m.exec(text)?.[1]

  const resumed = legacyCall(server.url, 'rs-1', 'probe', { ms: 1500, tag: 'resumed' }, { progressToken: 'tok-1' })
  t.ok(await resumed.waitForText('notifications/progress'), 'the call streams')
  resumed.destroy()
  t.ok(await waitFor(async () => await metricValue(server.url, 'mcp_streams_paused') === 1, 3000), 'its stream paused')
  const again = await fetch(server.url, { headers: { ...LEGACY, accept: 'text/event-stream', 'last-event-id': firstId(resumed.text()) ?? '' } })
  t.equal(again.status, 200, 'a GET with its Last-Event-ID resumes it')
  t.match(await again.text(), /"id":"rs-1","result"/, 'and gets the result')
  const span = await toolCallSpan(otel, 'rs-1')
  t.same(eventNames(span).filter(name => name.startsWith('mcp.')), ['mcp.stream.paused', 'mcp.stream.resumed'], 'paused, then resumed; never cancelled')

  const abandoned = legacyCall(server.url, 'rs-2', 'probe', { ms: 5000, tag: 'abandoned' }, { progressToken: 'tok-2' })
  t.ok(await abandoned.waitForText('notifications/progress'), 'another call streams')
  abandoned.destroy()
  const expired = await toolCallSpan(otel, 'rs-2', 5000)
  t.same(eventNames(expired).filter(name => name.startsWith('mcp.')).slice(0, 2), ['mcp.stream.paused', CANCELLED], 'paused, then cancelled when its window passed')
  t.equal(eventOf(expired, CANCELLED)?.attributes?.[SOURCE], 'disconnect', 'by "disconnect"')
})

t.test('lifetime (maxStreamLifetimeMs): cancelled by "lifetime", stopped, status ERROR with error.type -32800', async t => {
  const otel = installOtel(t)
  const server = await listenPlugin(t, { maxStreamLifetimeMs: 300 })
  const response = await rawPost(server.url, toolCall('life-1', 'probe', { ms: 5000 }))
  const body = JSON.parse(response.text) as JsonRpcMessage
  t.equal(body.error?.code, -32800, 'the client is answered -32800 at the lifetime bound')

  const span = await toolCallSpan(otel, 'life-1')
  t.ok(span, `the tool call's span ended (${describeSpan(span)})`)
  t.same(eventNames(span), [CANCELLED, STOPPED], `events: ${CANCELLED}, then ${STOPPED}`)
  t.same(eventOf(span, CANCELLED)?.attributes, { [SOURCE]: 'lifetime', [REASON]: 'maximum request lifetime exceeded' }, 'by "lifetime", with its reason')
  t.equal(span?.attributes[SOURCE], 'lifetime')
  t.equal(span?.status.code, SpanStatusCode.ERROR, 'status ERROR: the server cut the request short')
  t.equal(span?.status.message, 'Request cancelled')
  t.equal(span?.attributes['error.type'], '-32800', 'error.type -32800, the code the client got')
  t.equal(span?.attributes['rpc.response.status_code'], '-32800', 'rpc.response.status_code -32800')
  t.same(span?.links, [], 'no link')
})

t.test('kill timeout', async t => {
  const CANCEL_TIMEOUT_MS = 300

  t.test('an in-process handler that ignores its signal: killed, handler_killed, status ERROR, no stopped event', async t => {
    const otel = installOtel(t)
    const server = await listenPlugin(t, { cancelTimeoutMs: CANCEL_TIMEOUT_MS }, {}, registerIgnoreCancel)
    const ignoreMs = 1500
    const startedAt = Date.now()
    const post = openPost(server.url, toolCall('stubborn-1', 'ignore-cancel', { ms: ignoreMs }))
    t.ok(await waitFor(() => server.app.mcpCancellation.inFlight('stubborn-1', SCOPE)), 'the stubborn handler runs')
    const cancelParent = remoteParent()
    t.equal((await rawPost(server.url, cancelNotification('stubborn-1', 'stop now'), { traceparent: cancelParent.header })).status, 202, 'the cancel is accepted')
    await post.done.catch(() => {})

    const span = await toolCallSpan(otel, 'stubborn-1')
    t.ok(span !== undefined && Date.now() - startedAt < ignoreMs, 'the span ended at the kill, while the handler still runs')
    assertKilled(t, span, 'client', 'stop now', CANCEL_TIMEOUT_MS)
    assertLinkedTo(t, span, await childOf(otel, cancelParent), 'client', 'the notifications/cancelled')

    // The abandoned handler settles later: that must not record anything more.
    await sleep(Math.max(0, startedAt + ignoreMs + 100 - Date.now()))
    const spans = otel.spans().filter(s => s.attributes['mcp.method.name'] === 'tools/call' && s.attributes['jsonrpc.request.id'] === 'stubborn-1')
    t.equal(spans.length, 1, 'once the abandoned handler settled, there is still one span for the call')
    t.same(eventNames(spans[0]), [CANCELLED, KILLED], 'with the same events')
  })

  t.test('a handler that stops by itself before the kill timeout: stopped (after the time it kept running, in seconds), not killed', async t => {
    const otel = installOtel(t)
    const server = await listenPlugin(t, { cancelTimeoutMs: 5000 }, {}, registerIgnoreCancel)
    const post = openPost(server.url, toolCall('slow-stop-1', 'ignore-cancel', { ms: 800 }))
    t.ok(await waitFor(() => server.app.mcpCancellation.inFlight('slow-stop-1', SCOPE)), 'the handler runs')
    const cancelledAt = Date.now()
    t.equal((await rawPost(server.url, cancelNotification('slow-stop-1', 'later'))).status, 202, 'the cancel is accepted')
    await post.done.catch(() => {})

    const span = await toolCallSpan(otel, 'slow-stop-1')
    const ranOn = span === undefined ? undefined : seconds(span.endTime) - seconds(eventOf(span, CANCELLED)?.time ?? span.endTime)
    assertCallerCancelStopped(t, span, 'client', 'later')
    const stop = eventOf(span, STOPPED)?.attributes?.[STOP_DURATION] as number | undefined
    t.ok(stop !== undefined && stop >= 0.2 && stop < 5,
      `the stop duration is the ~${((cancelledAt - Date.now()) / -1000).toFixed(1)} s the handler kept running, in seconds (${String(stop)})`)
    t.ok(stop !== undefined && ranOn !== undefined && Math.abs(stop - ranOn) < 0.05,
      `it is the time from the cancelled event to the span's end (${String(stop)} vs ${ranOn?.toFixed(3)} s)`)
  })

  t.test('a worker tool that never yields: its thread is killed, handler_killed, status ERROR, no stopped event', async t => {
    const otel = installOtel(t)
    const server = await listenPlugin(t, { cancelTimeoutMs: CANCEL_TIMEOUT_MS }, {}, app => {
      app.mcp.tool({
        name: 'spin',
        inputSchema: { type: 'object', properties: { ms: { type: 'integer', minimum: 0 } }, required: ['ms'] },
        worker: { filename: SPIN_WORKER, name: 'spin' }
      })
    })
    // The first call starts the pool's thread and loads the tool (longer than the kill timeout on a busy machine).
    const warm = await rawPost(server.url, toolCall('spin-warm', 'spin', { ms: 10 }))
    t.match((JSON.parse(warm.text) as JsonRpcMessage).result?.content?.[0]?.text, /^spun 10 ms/, 'a short spin completes')
    const warmSpan = await toolCallSpan(otel, 'spin-warm')
    t.same(eventNames(warmSpan), [], 'a call nobody cancelled has no cancellation event')
    t.equal(warmSpan?.status.code, SpanStatusCode.UNSET)

    const post = openPost(server.url, toolCall('spin-1', 'spin', { ms: 20_000 }))
    t.ok(await waitFor(() => server.app.mcpCancellation.inFlight('spin-1', SCOPE)), 'the spin runs')
    const cancelParent = remoteParent()
    t.equal((await rawPost(server.url, cancelNotification('spin-1', 'too long'), { traceparent: cancelParent.header })).status, 202, 'the cancel is accepted')
    await post.done.catch(() => {})

    const span = await toolCallSpan(otel, 'spin-1')
    assertKilled(t, span, 'client', 'too long', CANCEL_TIMEOUT_MS)
    assertLinkedTo(t, span, await childOf(otel, cancelParent), 'client', 'the notifications/cancelled')
    t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0, 2000), 'nothing is left in flight')
  })
})

// -- two nodes on one redis-server --------------------------------------------------------------------

t.test('across nodes: notifications/cancelled sent to node B cancels the call on node A, whose span links to B\'s span', { skip }, async t => {
  const otel = installOtel(t)
  const redis = await RedisServer.start(t)
  const a = await startNode(t, 'node-a', { redis: redis.url, secret: SECRET })
  const b = await startNode(t, 'node-b', { redis: redis.url, secret: SECRET })
  if (await untilCrossNodeWorks(a, b, Date.now(), 5000) === undefined) {
    t.fail('cross-node cancellation never worked within 5 s of the nodes starting')
    return
  }
  t.ok(await drained([a.app, b.app]), 'the warm-up calls are over')
  otel.reset()

  const callParent = remoteParent()
  const cancelParent = remoteParent()
  const post = openPost(a.url, toolCall('xnode-1', 'probe', { ms: 5000, tag: 'xnode' }), { traceparent: callParent.header })
  t.ok(await waitFor(() => a.probe.tagged('xnode').length === 1, 3000), 'the probe runs on node A')
  const cancel = await rawPost(b.url, cancelNotification('xnode-1', 'cancelled\u0000 through node B'), { traceparent: cancelParent.header })
  t.equal(cancel.status, 202, 'node B accepts the cancel')
  t.ok(await waitFor(() => a.probe.tagged('xnode')[0]?.endedAt !== undefined, 3000), 'node A\'s probe stopped')
  await post.done.catch(() => {})
  t.same(b.probe.tagged('xnode'), [], 'the probe never ran on node B')

  const span = await childOf(otel, callParent)
  t.equal(span?.name, 'tools/call probe', 'node A\'s tool call span (the child of the call\'s traceparent)')
  t.equal(span?.attributes['jsonrpc.request.id'], 'xnode-1')
  assertCallerCancelStopped(t, span, 'client', 'cancelled through node B')

  const cancelSpan = await childOf(otel, cancelParent)
  t.equal(otel.spans().filter(s => s.spanContext().traceId === cancelParent.traceId).length, 1,
    'the cancel\'s trace has one span: node B\'s for the POST (node A got the cancel over Redis, not over HTTP)')
  t.same({ name: cancelSpan?.name, method: cancelSpan?.attributes['mcp.method.name'] }, { name: 'notifications/cancelled', method: 'notifications/cancelled' },
    'node B\'s span is the notifications/cancelled')
  assertLinkedTo(t, span, cancelSpan, 'client', 'node B\'s notifications/cancelled')
  t.equal(linksTo(span, cancelSpan)[0]?.context.traceId, cancelParent.traceId, 'the link carries B\'s trace id')
  t.ok(await drained([a.app, b.app]), 'nothing is left in flight on either node')
})

t.test('across nodes: tasks/cancel sent to node B cancels the task running on node A, whose tools/call span links to B\'s tasks/cancel span', { skip }, async t => {
  const otel = installOtel(t)
  const redis = await RedisServer.start(t)
  const inspect = new Redis(redis.url, { maxRetriesPerRequest: 1 })
  inspect.on('error', () => {})
  t.teardown(() => { inspect.disconnect() })
  const tools = new TaskTools()
  const a = await startTaskNode(t, 'node-a', tools, { redis: redis.url, secret: SECRET })
  const b = await startTaskNode(t, 'node-b', tools, { redis: redis.url, secret: SECRET })
  if (!await waitFor(async () => (await channels(inspect, 'mcp:tasks:*')).length >= 2, 5000)) {
    t.fail('the nodes did not both subscribe to their task channels')
    return
  }

  const callParent = remoteParent()
  const cancelParent = remoteParent()
  const taskId = await a.client.create('hold', { tag: 'traced' }, { headers: { traceparent: callParent.header } })
  t.ok(await waitFor(() => tools.run('traced')?.afterStart === true, 2000), 'the task runs on node A, past startTask')
  t.equal(tools.run('traced')?.node, 'node-a')
  const ack = await b.client.cancel(taskId, { headers: { traceparent: cancelParent.header } })
  t.equal(ack.body.result?.resultType, 'complete', 'node B acknowledges tasks/cancel')
  t.ok(await waitFor(() => tools.run('traced')?.endedAt !== undefined, 3000), 'the handler on node A stopped')
  t.same(tools.run('traced')?.aborted, { source: 'task', reason: 'tasks/cancel' }, 'its signal fired with source "task"')

  const span = await childOf(otel, callParent)
  t.equal(span?.name, 'tools/call hold', 'node A\'s tools/call span (the child of the call\'s traceparent), ended with the task\'s handler')
  t.equal(span?.attributes['mcp.protocol.version'], '2026-07-28')
  assertCallerCancelStopped(t, span, 'task', 'tasks/cancel')

  const cancelSpan = await childOf(otel, cancelParent)
  t.equal(cancelSpan?.name, 'tasks/cancel', 'node B\'s tasks/cancel span')
  t.equal(cancelSpan?.attributes['mcp.method.name'], 'tasks/cancel')
  t.equal(cancelSpan?.status.code, SpanStatusCode.UNSET, 'which did not fail')
  assertLinkedTo(t, span, cancelSpan, 'task', 'node B\'s tasks/cancel')
  t.equal(linksTo(span, cancelSpan)[0]?.context.traceId, cancelParent.traceId, 'the link carries B\'s trace id')
  t.equal((await b.client.waitFor(taskId, ['cancelled', 'completed', 'failed'], 2000))?.status, 'cancelled', 'the task reads cancelled on node B')
})
