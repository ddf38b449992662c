/**
 * OpenTelemetry tracing (issue 14), as a user exporting spans and metrics sees it: an in-memory SDK
 * (test/helpers/otel.ts) registered globally for one test, the plugin talked to through `inject`.
 *
 * 1. One SERVER span per request and notification: its name and attributes for tools/call, prompts/get,
 *    resources/read, server/discover, initialize and notifications; JSON-RPC errors, a throwing handler
 *    (-32603 without detail), a tool's `isError`, refused requests (`_OTHER` for a method nobody serves).
 * 2. Its parent: the trace context in `params._meta`, else the `traceparent` header (and with both, a
 *    link to the header's). Bad trace context (malformed, 10 kB, wrong type, invalid ids; a tracestate
 *    over the W3C limits) is ignored, never an error. The handler runs in the span (and its baggage).
 * 3. What no span carries: the session id (only its digest; none in the modern era), a token, the
 *    principal, the client address, arguments, an unsanitised id, URI or reason. The reason is checked on
 *    a real cancellation, with its events, its source and the link to the cancelling notification; a
 *    server cancellation is -32800, a killed handler `handler_killed`.
 * 4. `mcp.server.operation.duration`: the same low-cardinality attributes, no request or session id.
 * 5. Only traces, only metrics, `tracing: false`, and no SDK at all (served as usual).
  */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { propagation, SpanKind, SpanStatusCode, trace, type Attributes, type SpanContext } from '@opentelemetry/api'
import type { FastifyInstance, FastifyRequest, LightMyRequestResponse } from 'fastify'
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { ToolError, type McpCancellationOptions } from '../../lib/index.js'
import { bearer, jwtApp, SESSION_SECRET } from '../helpers/identity.js'
import { buildApp, json, post, postLegacy, postModern } from '../helpers/inject.js'
import { initializeBody, LEGACY, toolCall } from '../helpers/jsonrpc.js'
import { installOtel, type InMemoryOtel } from '../helpers/otel.js'
import type { Teardown } from '../helpers/teardown.js'
import { registerEcho } from '../helpers/tools.js'
import { waitFor } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

/** The instrumentation scope of the plugin's spans and metrics (its package name). */
const SCOPE = 'fastify-mcp-cancellation'
const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version
const DURATION = 'mcp.server.operation.duration'
/** The cancellation scope of an injected request (inject's remote address). */
const INJECT_SCOPE = 'ip:127.0.0.1'

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c'
const SPAN_ID = 'b7ad6b7169203331'
const TRACEPARENT = `00-${TRACE_ID}-${SPAN_ID}-01`
const TRACESTATE = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'
const HEADER_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const HEADER_SPAN_ID = '00f067aa0ba902b7'
const HEADER_TRACEPARENT = `00-${HEADER_TRACE_ID}-${HEADER_SPAN_ID}-01`

/** A handler failure whose text must never reach the client or a span. */
const SECRET_DETAIL = 'db password hunter2 at /srv/app/db.ts:42'
const UNKNOWN_TOOL = 'no-such-tool-7f3a'
const UNKNOWN_METHOD = 'bogus/method-7f3a'

/** Attribute keys the duration metric may carry (the conventions' low-cardinality ones). */
const METRIC_KEYS = new Set([
  'mcp.method.name', 'mcp.protocol.version', 'gen_ai.tool.name', 'gen_ai.prompt.name', 'gen_ai.operation.name',
  'error.type', 'rpc.response.status_code', 'network.transport', 'network.protocol.name', 'network.protocol.version'
])

/** What the `parents` tool saw of the spans it started. */
interface ChildSpans {
  /** The span active when the handler started. */
  active: SpanContext | undefined
  /** The `tenant` baggage entry the handler saw. */
  tenant: string | undefined
}

interface Fixture {
  app: FastifyInstance
  otel: InMemoryOtel
  children: ChildSpans
}

/**
 * An app with the in-memory SDK registered first, and: `echo`; `explode` (throws an ordinary error);
 * `refuse` (throws a ToolError: an isError result); `parents` (starts spans of tracer 'x', before and
 * after an await); the prompt `greet`, the prompt `broken` (throws) and the resource `test://doc`.
 */
async function tracedApp (t: Teardown, options: McpCancellationOptions = {}, otelOptions?: { traces?: boolean, metrics?: boolean }): Promise<Fixture> {
  const otel = installOtel(t, otelOptions)
  const children: ChildSpans = { active: undefined, tenant: undefined }
  const app = await buildApp(t, options, app => {
    registerEcho(app)
    app.mcp.tool({
      name: 'explode',
      description: 'Throws an ordinary error',
      inputSchema: { type: 'object' },
      handler: () => { throw new Error(SECRET_DETAIL) }
    })
    app.mcp.tool({
      name: 'refuse',
      description: 'Fails as a tool (isError)',
      inputSchema: { type: 'object' },
      handler: () => { throw new ToolError('the model asked for something impossible') }
    })
    app.mcp.tool({
      name: 'parents',
      description: 'Starts spans of its own',
      inputSchema: { type: 'object' },
      handler: async () => {
        children.active = trace.getActiveSpan()?.spanContext()
        children.tenant = propagation.getActiveBaggage()?.getEntry('tenant')?.value
        trace.getTracer('x').startSpan('child').end()
        await sleep(1)
        trace.getTracer('x').startSpan('child after await').end()
        return { content: [{ type: 'text', text: 'ok' }] }
      }
    })
    app.mcp.prompt({
      name: 'greet',
      description: 'A greeting',
      handler: () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'hello' } }] })
    })
    app.mcp.prompt({
      name: 'broken',
      description: 'Throws',
      handler: () => { throw new Error(SECRET_DETAIL) }
    })
    app.mcp.resource({
      uri: 'test://doc',
      name: 'A document',
      mimeType: 'text/plain',
      handler: uri => ({ contents: [{ uri, mimeType: 'text/plain', text: 'the document' }] })
    })
  })
  return { app, otel, children }
}

/** The finished spans of the plugin (not those a handler started). */
function mcpSpans (otel: InMemoryOtel): ReadableSpan[] {
  return otel.spans().filter(span => span.instrumentationScope.name === SCOPE)
}

/** The one plugin span finished since the last reset (a failed assertion, and undefined, otherwise); resets. */
function onlySpan (t: Tap, otel: InMemoryOtel, what: string): ReadableSpan | undefined {
  const spans = mcpSpans(otel)
  t.equal(spans.length, 1, `${what}: exactly one MCP span (got ${spans.map(s => s.name).join(', ')})`)
  otel.reset()
  return spans[0]
}

/** Every string a span exports: name, attribute values, event names and attributes, link attributes, status message. */
function exportedStrings (span: ReadableSpan): string[] {
  const out: string[] = [span.name, span.status.message ?? '']
  const add = (attributes: Attributes | undefined): void => {
    for (const [key, value] of Object.entries(attributes ?? {})) {
      out.push(key)
      if (Array.isArray(value)) out.push(...value.map(String))
      else if (value !== undefined) out.push(String(value))
    }
  }
  add(span.attributes)
  for (const event of span.events) {
    out.push(event.name)
    add(event.attributes)
  }
  for (const link of span.links) add(link.attributes)
  return out
}

/** The data points of `mcp.server.operation.duration` collected so far. */
async function durationPoints (otel: InMemoryOtel): Promise<Array<{ attributes: Attributes, count: number }>> {
  const collected = await otel.collect()
  const latest = collected.at(-1)
  const points: Array<{ attributes: Attributes, count: number }> = []
  for (const scope of latest?.scopeMetrics ?? []) {
    for (const metric of scope.metrics) {
      if (metric.descriptor.name !== DURATION) continue
      for (const point of metric.dataPoints) {
        const value = point.value as { count?: number }
        points.push({ attributes: point.attributes, count: value.count ?? 0 })
      }
    }
  }
  return points
}

function statusOf (response: LightMyRequestResponse): number {
  return response.statusCode
}

const NETWORK = { 'network.transport': 'tcp', 'network.protocol.name': 'http', 'network.protocol.version': '1.1' }

t.test('span names and attributes of tools/call, prompts/get, resources/read, server/discover and initialize', async t => {
  const { app, otel } = await tracedApp(t)

  let res = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'hi' } }, { id: 'call-1' })
  t.equal(statusOf(res), 200)
  let span = onlySpan(t, otel, 'modern tools/call')
  t.equal(span?.name, 'tools/call echo', 'tools/call is named after its tool')
  t.equal(span?.kind, SpanKind.SERVER, 'a SERVER span')
  t.strictSame(span?.attributes, {
    ...NETWORK,
    'mcp.method.name': 'tools/call',
    'mcp.protocol.version': '2026-07-28',
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': 'echo',
    'jsonrpc.request.id': 'call-1'
  }, 'tools/call attributes, exactly')
  t.equal(span?.status.code, SpanStatusCode.UNSET, 'a success leaves the status unset')
  t.equal(span?.instrumentationScope.version, PACKAGE_VERSION, 'the instrumentation scope is the package with its version')

  res = await postLegacy(app, 'tools/call', { name: 'echo', arguments: { text: 'hi' } }, { id: 7 })
  t.equal(statusOf(res), 200)
  span = onlySpan(t, otel, 'legacy tools/call')
  t.equal(span?.name, 'tools/call echo')
  t.equal(span?.attributes['mcp.protocol.version'], '2025-11-25', 'the legacy protocol version')
  t.equal(span?.attributes['jsonrpc.request.id'], '7', 'a numeric id as a string')

  res = await postModern(app, 'prompts/get', { name: 'greet' })
  t.equal(statusOf(res), 200)
  span = onlySpan(t, otel, 'prompts/get')
  t.equal(span?.name, 'prompts/get greet', 'prompts/get is named after its prompt')
  t.strictSame(span?.attributes, {
    ...NETWORK, 'mcp.method.name': 'prompts/get', 'mcp.protocol.version': '2026-07-28', 'gen_ai.prompt.name': 'greet', 'jsonrpc.request.id': '1'
  }, 'prompts/get attributes, exactly (no gen_ai.operation.name: it is no tool execution)')

  res = await postModern(app, 'resources/read', { uri: 'test://doc' })
  t.equal(statusOf(res), 200)
  span = onlySpan(t, otel, 'resources/read')
  t.equal(span?.name, 'resources/read', 'resources/read is named after its method only (a URI is high-cardinality)')
  t.strictSame(span?.attributes, {
    ...NETWORK, 'mcp.method.name': 'resources/read', 'mcp.protocol.version': '2026-07-28', 'mcp.resource.uri': 'test://doc', 'jsonrpc.request.id': '1'
  }, 'resources/read attributes, exactly')

  res = await postModern(app, 'server/discover', {})
  t.equal(statusOf(res), 200)
  span = onlySpan(t, otel, 'server/discover')
  t.equal(span?.name, 'server/discover')
  t.strictSame(span?.attributes, { ...NETWORK, 'mcp.method.name': 'server/discover', 'mcp.protocol.version': '2026-07-28', 'jsonrpc.request.id': '1' })

  res = await post(app, initializeBody('init-1'))
  t.equal(json(res).result?.protocolVersion, '2025-11-25')
  span = onlySpan(t, otel, 'initialize')
  t.equal(span?.name, 'initialize')
  t.strictSame(span?.attributes, { ...NETWORK, 'mcp.method.name': 'initialize', 'mcp.protocol.version': '2025-11-25', 'jsonrpc.request.id': 'init-1' })

  // An unregistered prompt is named by its method alone: the client's name is no span name.
  res = await postModern(app, 'prompts/get', { name: 'nobody-registered-this' })
  span = onlySpan(t, otel, 'unknown prompt')
  t.equal(span?.name, 'prompts/get', 'an unknown prompt: the method alone')
  t.notOk('gen_ai.prompt.name' in (span?.attributes ?? {}), 'no gen_ai.prompt.name for an unregistered prompt')
})

t.test('notifications: one SERVER span each, named after the method, without a request id', async t => {
  const { app, otel } = await tracedApp(t)

  let res = await post(app, { jsonrpc: '2.0', method: 'notifications/initialized' }, LEGACY)
  t.equal(statusOf(res), 202)
  let span = onlySpan(t, otel, 'notifications/initialized')
  t.equal(span?.name, 'notifications/initialized', 'named after the notification')
  t.equal(span?.attributes['mcp.method.name'], 'notifications/initialized')
  t.equal(span?.kind, SpanKind.SERVER)
  t.notOk('jsonrpc.request.id' in (span?.attributes ?? {}), 'a notification has no request id')
  t.equal(span?.status.code, SpanStatusCode.UNSET)

  res = await post(app, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'nobody-home', reason: 'changed my mind' } }, LEGACY)
  t.equal(statusOf(res), 202)
  span = onlySpan(t, otel, 'legacy notifications/cancelled')
  t.equal(span?.name, 'notifications/cancelled', 'named after the notification')
  t.equal(span?.attributes['mcp.method.name'], 'notifications/cancelled')
  t.equal(span?.status.code, SpanStatusCode.UNSET, 'a cancel of nothing is no error')

  // A malformed cancel is a 400: its span says so.
  res = await post(app, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: {} } }, LEGACY)
  t.equal(statusOf(res), 400)
  span = onlySpan(t, otel, 'malformed notifications/cancelled')
  t.equal(span?.attributes['error.type'], '-32602', 'the malformed cancel is -32602')
  t.equal(span?.status.code, SpanStatusCode.ERROR)

  // A notification nobody serves: `_OTHER`, never the client's string.
  res = await post(app, { jsonrpc: '2.0', method: 'notifications/made-up-7f3a' }, LEGACY)
  t.equal(statusOf(res), 202)
  span = onlySpan(t, otel, 'unknown notification')
  t.equal(span?.name, '_OTHER')
  t.equal(span?.attributes['mcp.method.name'], '_OTHER')
  t.notOk(exportedStrings(span!).some(s => s.includes('made-up-7f3a')), 'the client\'s method name is nowhere in the span')
})

t.test('errors: a JSON-RPC error, a throwing handler, a tool isError result', async t => {
  const { app, otel } = await tracedApp(t)

  let res = await postModern(app, 'tools/call', { name: UNKNOWN_TOOL, arguments: {} })
  t.equal(json(res).error?.code, -32602, 'an unknown tool is -32602')
  let span = onlySpan(t, otel, 'unknown tool')
  t.equal(span?.name, 'tools/call', 'an unknown tool: the method alone (the client\'s name is no span name)')
  t.notOk('gen_ai.tool.name' in (span?.attributes ?? {}), 'no gen_ai.tool.name for an unregistered tool')
  t.equal(span?.attributes['error.type'], '-32602')
  t.equal(span?.attributes['rpc.response.status_code'], '-32602')
  t.equal(span?.status.code, SpanStatusCode.ERROR)
  t.equal(span?.status.message, json(res).error?.message, 'the status message is the error message the client got')

  for (const [what, send] of [
    ['a tool', async () => await postModern(app, 'tools/call', { name: 'explode', arguments: {} })],
    ['a prompt', async () => await postModern(app, 'prompts/get', { name: 'broken' })],
    ['a legacy tool', async () => await postLegacy(app, 'tools/call', { name: 'explode', arguments: {} })]
  ] as const) {
    res = await send()
    t.same(json(res).error, { code: -32603, message: 'Internal error' }, `${what} that throws: -32603 Internal error`)
    span = onlySpan(t, otel, `${what} that throws`)
    t.equal(span?.attributes['error.type'], '-32603', `${what}: error.type`)
    t.equal(span?.attributes['rpc.response.status_code'], '-32603', `${what}: rpc.response.status_code`)
    t.strictSame(span?.status, { code: SpanStatusCode.ERROR, message: 'Internal error' }, `${what}: ERROR "Internal error"`)
    t.notOk(exportedStrings(span!).some(s => s.includes('hunter2')), `${what}: the handler's error text is nowhere in the span`)
    t.equal(span?.events.length, 0, `${what}: no exception event (it would carry the message and stack)`)
  }

  res = await postModern(app, 'tools/call', { name: 'refuse', arguments: {} })
  t.equal(json(res).result?.isError, true, 'a ToolError is an isError result')
  span = onlySpan(t, otel, 'isError')
  t.equal(span?.name, 'tools/call refuse')
  t.equal(span?.attributes['error.type'], 'tool_error', 'an isError result is error.type tool_error')
  t.notOk('rpc.response.status_code' in (span?.attributes ?? {}), 'no JSON-RPC status code: the request succeeded')
  t.equal(span?.status.code, SpanStatusCode.ERROR, 'the tool failed: status ERROR')

  // Invalid arguments are an isError result too.
  res = await postModern(app, 'tools/call', { name: 'echo', arguments: {} })
  t.equal(json(res).result?.isError, true)
  t.equal(onlySpan(t, otel, 'invalid arguments')?.attributes['error.type'], 'tool_error', 'invalid arguments: tool_error')
})

t.test('refused requests: one span each, with the error the client got', async t => {
  const { app, otel } = await tracedApp(t)

  let res = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { headers: { 'mcp-name': 'other' } })
  t.equal(statusOf(res), 400, 'an Mcp-Name mismatch is a 400')
  t.equal(json(res).error?.code, -32020)
  let span = onlySpan(t, otel, 'Mcp-Name mismatch')
  t.equal(span?.name, 'tools/call echo')
  t.equal(span?.kind, SpanKind.SERVER)
  t.equal(span?.attributes['error.type'], '-32020')
  t.equal(span?.attributes['rpc.response.status_code'], '-32020')
  t.equal(span?.status.code, SpanStatusCode.ERROR)
  t.equal(span?.attributes['jsonrpc.request.id'], '1')

  res = await postModern(app, UNKNOWN_METHOD, {})
  t.equal(statusOf(res), 404, 'a method nobody serves is a 404 in the modern era')
  t.equal(json(res).error?.code, -32601)
  span = onlySpan(t, otel, 'unknown method (modern)')
  t.equal(span?.name, '_OTHER', 'an unserved method is span _OTHER')
  t.equal(span?.attributes['mcp.method.name'], '_OTHER')
  t.equal(span?.attributes['error.type'], '-32601')
  t.equal(span?.attributes['rpc.response.status_code'], '-32601')
  t.equal(span?.status.code, SpanStatusCode.ERROR)
  t.notOk(Object.values(span?.attributes ?? {}).some(v => String(v).includes('method-7f3a')), 'the client\'s method name is in no attribute')

  res = await postLegacy(app, UNKNOWN_METHOD, {})
  t.equal(json(res).error?.code, -32601, 'legacy: -32601 with a 200')
  span = onlySpan(t, otel, 'unknown method (legacy)')
  t.equal(span?.name, '_OTHER')
  t.equal(span?.attributes['error.type'], '-32601')

  // A hostile method name: the span is still _OTHER, and the status message (the client's error text) is sanitised and bounded.
  const hostile = 'evil\u0007\u001b[2J\u202e/' + 'y'.repeat(10_240)
  res = await postLegacy(app, hostile, {})
  t.equal(json(res).error?.code, -32601)
  span = onlySpan(t, otel, 'hostile method name')
  t.equal(span?.name, '_OTHER')
  t.equal(span?.attributes['mcp.method.name'], '_OTHER')
  const message = span?.status.message ?? ''
  t.notMatch(message, /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/, 'no control or bidi character in the status message')
  t.ok(message.length < 1024, `the status message is bounded (${message.length} characters)`)

  // A served method in the wrong era is refused under its own (served) name.
  res = await postLegacy(app, 'server/discover', {})
  t.equal(json(res).error?.code, -32601)
  span = onlySpan(t, otel, 'served method, wrong era')
  t.equal(span?.name, 'server/discover')
  t.equal(span?.attributes['error.type'], '-32601')
})

t.test('a request id is sanitised before it becomes jsonrpc.request.id', async t => {
  const { app, otel } = await tracedApp(t)
  const res = await postLegacy(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { id: 'abc\u0007\u202e\u200bdef' })
  t.equal(statusOf(res), 200)
  t.equal(onlySpan(t, otel, 'hostile id')?.attributes['jsonrpc.request.id'], 'abcdef', 'controls and invisible marks removed')
  // The longest id the transport accepts (256 bytes) is cut for the span.
  t.equal(statusOf(await postLegacy(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { id: 'z'.repeat(256) })), 200)
  const id = String(onlySpan(t, otel, 'long id')?.attributes['jsonrpc.request.id'])
  t.ok(id.length > 0 && id.length <= 128 && /^z+$/.test(id), `a 256-character id is cut (${id.length})`)
})

t.test('parent from params._meta: trace id, parent span id and tracestate kept', async t => {
  const { app, otel } = await tracedApp(t)

  for (const [era, send] of [
    ['modern', async () => await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { meta: { traceparent: TRACEPARENT, tracestate: TRACESTATE } })],
    ['legacy', async () => await postLegacy(app, 'tools/call', { name: 'echo', arguments: { text: 'x' }, _meta: { traceparent: TRACEPARENT, tracestate: TRACESTATE } })]
  ] as const) {
    const res = await send()
    t.equal(statusOf(res), 200, `${era}: served`)
    const span = onlySpan(t, otel, `${era} _meta parent`)
    t.equal(span?.spanContext().traceId, TRACE_ID, `${era}: the span joins the client's trace`)
    t.equal(span?.parentSpanContext?.spanId, SPAN_ID, `${era}: its parent is the client's span`)
    t.equal(span?.parentSpanContext?.isRemote, true, `${era}: a remote parent`)
    t.equal(span?.parentSpanContext?.traceState?.serialize(), TRACESTATE, `${era}: the parent's tracestate is kept`)
    t.equal(span?.spanContext().traceState?.serialize(), TRACESTATE, `${era}: and propagates with the span`)
    t.same(span?.links, [], `${era}: no link without an HTTP trace context`)
  }
})

t.test('parent from the HTTP request: the traceparent header, linked when _meta names another', async t => {
  const { app, otel } = await tracedApp(t)

  let res = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { headers: { traceparent: HEADER_TRACEPARENT } })
  t.equal(statusOf(res), 200)
  let span = onlySpan(t, otel, 'header only')
  t.equal(span?.spanContext().traceId, HEADER_TRACE_ID, 'without _meta, the span joins the header\'s trace')
  t.equal(span?.parentSpanContext?.spanId, HEADER_SPAN_ID, 'its parent is the header\'s span')
  t.same(span?.links, [], 'no link')

  res = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, {
    meta: { traceparent: TRACEPARENT }, headers: { traceparent: HEADER_TRACEPARENT }
  })
  t.equal(statusOf(res), 200)
  span = onlySpan(t, otel, '_meta and header')
  t.equal(span?.spanContext().traceId, TRACE_ID, 'with both, the span joins the _meta trace')
  t.equal(span?.parentSpanContext?.spanId, SPAN_ID, 'its parent is the _meta span')
  t.equal(span?.links.length, 1, 'one link')
  t.equal(span?.links[0]?.context.traceId, HEADER_TRACE_ID, 'linked to the header\'s trace')
  t.equal(span?.links[0]?.context.spanId, HEADER_SPAN_ID, 'linked to the header\'s span')

  // A notification takes its parent the same way.
  res = await post(app, { jsonrpc: '2.0', method: 'notifications/initialized', params: { _meta: { traceparent: TRACEPARENT } } }, { ...LEGACY, traceparent: HEADER_TRACEPARENT })
  t.equal(statusOf(res), 202)
  span = onlySpan(t, otel, 'notification with both')
  t.equal(span?.parentSpanContext?.spanId, SPAN_ID, 'a notification\'s parent is its _meta span')
  t.equal(span?.links[0]?.context.spanId, HEADER_SPAN_ID, 'linked to the header\'s span')

  // A refused request too.
  res = await postModern(app, UNKNOWN_METHOD, {}, { meta: { traceparent: TRACEPARENT } })
  t.equal(statusOf(res), 404)
  t.equal(onlySpan(t, otel, 'refused with _meta')?.parentSpanContext?.spanId, SPAN_ID, 'a refused request\'s parent is its _meta span')
})

t.test('bad trace context in _meta is ignored: served, a fresh trace, never an error', async t => {
  const { app, otel } = await tracedApp(t)
  const bad: Array<[string, unknown]> = [
    ['malformed', 'not-a-traceparent'],
    ['upper-case hex', TRACEPARENT.toUpperCase()],
    ['version ff', `ff-${TRACE_ID}-${SPAN_ID}-01`],
    ['10 kB long (a future version with a huge suffix)', `cc-${TRACE_ID}-${SPAN_ID}-01-${'a'.repeat(10_240)}`],
    ['10 kB of padding', ' '.repeat(10_240) + TRACEPARENT],
    ['a number', 42],
    ['an object', { traceId: TRACE_ID, spanId: SPAN_ID }],
    ['an array', [TRACEPARENT]],
    ['null', null],
    ['an all-zero trace id', `00-${'0'.repeat(32)}-${SPAN_ID}-01`],
    ['an all-zero span id', `00-${TRACE_ID}-${'0'.repeat(16)}-01`]
  ]
  for (const [what, traceparent] of bad) {
    for (const era of ['modern', 'legacy'] as const) {
      const res = era === 'modern'
        ? await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { meta: { traceparent, tracestate: TRACESTATE } })
        : await postLegacy(app, 'tools/call', { name: 'echo', arguments: { text: 'x' }, _meta: { traceparent, tracestate: TRACESTATE } })
      t.equal(statusOf(res), 200, `${what} (${era}): 200`)
      t.same(json(res).result?.content, [{ type: 'text', text: 'x' }], `${what} (${era}): the tool answered`)
      const span = onlySpan(t, otel, `${what} (${era})`)
      t.equal(span?.parentSpanContext, undefined, `${what} (${era}): no parent`)
      t.ok(trace.isSpanContextValid(span!.spanContext()), `${what} (${era}): a valid span context`)
      t.not(span?.spanContext().traceId, TRACE_ID, `${what} (${era}): a fresh trace id`)
    }
  }

  // `_meta` itself of the wrong type (legacy: nothing else reads it).
  for (const meta of ['00-x', 42, [TRACEPARENT]]) {
    const res = await postLegacy(app, 'tools/call', { name: 'echo', arguments: { text: 'x' }, _meta: meta })
    t.ok(statusOf(res) < 500, `_meta ${JSON.stringify(meta)}: no 5xx (${statusOf(res)})`)
    const span = onlySpan(t, otel, `_meta ${JSON.stringify(meta)}`)
    t.equal(span?.parentSpanContext, undefined, `_meta ${JSON.stringify(meta)}: no parent`)
  }

  // Bad _meta trace context does not hide a good header: the span's parent is the header's (and no link).
  for (const [what, traceparent] of bad) {
    const res = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { meta: { traceparent }, headers: { traceparent: HEADER_TRACEPARENT } })
    t.equal(statusOf(res), 200, `${what} with a good header: 200`)
    const span = onlySpan(t, otel, `${what} with a good header`)
    t.equal(span?.parentSpanContext?.spanId, HEADER_SPAN_ID, `${what} with a good header: the header's span is the parent`)
    t.equal(span?.spanContext().traceId, HEADER_TRACE_ID, `${what} with a good header: in the header's trace`)
    t.same(span?.links, [], `${what} with a good header: no link`)
  }

  // A bad traceparent header is ignored the same way.
  const res = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { headers: { traceparent: `00-${'0'.repeat(32)}-${SPAN_ID}-01` } })
  t.equal(statusOf(res), 200, 'an all-zero header traceparent: 200')
  t.equal(onlySpan(t, otel, 'bad header')?.parentSpanContext, undefined, 'no parent')
})

t.test('a tracestate over the W3C limits is dropped whole; the parent stays', async t => {
  const { app, otel } = await tracedApp(t)
  const members = (n: number, valueLength = 4): string => Array.from({ length: n }, (_, i) => `k${i}=${'v'.repeat(valueLength)}`).join(',')
  const cases: Array<[string, string, boolean]> = [
    ['32 members (the limit)', members(32), true],
    ['512 characters (the limit)', `a=${'v'.repeat(254)},b=${'w'.repeat(253)}`, true],
    ['33 members', members(33), false],
    ['513 characters', `a=${'v'.repeat(254)},b=${'w'.repeat(254)}`, false],
    ['10 kB', members(30, 240) + ',' + 'z'.repeat(3_000), false]
  ]
  for (const [what, tracestate, kept] of cases) {
    if (what.includes('512 characters')) t.equal(tracestate.length, 512, 'the limit case is 512 characters')
    if (what.includes('513')) t.equal(tracestate.length, 513)
    const res = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { meta: { traceparent: TRACEPARENT, tracestate } })
    t.equal(statusOf(res), 200, `${what}: 200`)
    const span = onlySpan(t, otel, what)
    t.equal(span?.parentSpanContext?.spanId, SPAN_ID, `${what}: the parent is kept`)
    if (kept) {
      t.equal(span?.parentSpanContext?.traceState?.serialize(), tracestate, `${what}: the tracestate is kept`)
    } else {
      t.equal(span?.parentSpanContext?.traceState, undefined, `${what}: no tracestate`)
      t.equal(span?.spanContext().traceState?.serialize() ?? '', '', `${what}: none propagated either`)
    }
  }
  // A tracestate of the wrong type is dropped too.
  for (const tracestate of [42, { a: 'b' }, ['a=b']]) {
    const res = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { meta: { traceparent: TRACEPARENT, tracestate } })
    t.equal(statusOf(res), 200)
    const span = onlySpan(t, otel, `tracestate ${JSON.stringify(tracestate)}`)
    t.equal(span?.parentSpanContext?.spanId, SPAN_ID, `tracestate ${JSON.stringify(tracestate)}: the parent is kept`)
    t.equal(span?.parentSpanContext?.traceState, undefined, `tracestate ${JSON.stringify(tracestate)}: dropped`)
  }
})

t.test('the handler runs with the MCP span active: spans it starts are its children', async t => {
  const { app, otel, children } = await tracedApp(t)
  const res = await postModern(app, 'tools/call', { name: 'parents', arguments: {} }, { meta: { traceparent: TRACEPARENT } })
  t.equal(statusOf(res), 200)
  const mcp = mcpSpans(otel)
  t.equal(mcp.length, 1)
  const parent = mcp[0]!.spanContext()
  t.equal(children.active?.spanId, parent.spanId, 'trace.getActiveSpan() in the handler is the MCP span')
  for (const name of ['child', 'child after await']) {
    const child = otel.spans().find(span => span.name === name)
    t.ok(child, `${name} was exported`)
    t.equal(child?.parentSpanContext?.spanId, parent.spanId, `${name}: its parent is the MCP span`)
    t.equal(child?.spanContext().traceId, TRACE_ID, `${name}: in the client's trace`)
  }

  // Baggage from _meta reaches the handler too; over its W3C limit (8192 characters) it is dropped.
  otel.reset()
  await postModern(app, 'tools/call', { name: 'parents', arguments: {} }, { meta: { traceparent: TRACEPARENT, baggage: 'tenant=acme' } })
  t.equal(children.tenant, 'acme', '_meta baggage is the handler\'s active baggage')
  await postModern(app, 'tools/call', { name: 'parents', arguments: {} }, { meta: { traceparent: TRACEPARENT, baggage: 'tenant=acme,pad=' + 'p'.repeat(8_200) } })
  t.equal(children.tenant, undefined, 'baggage over 8192 characters is dropped')
  t.equal(mcpSpans(otel).at(-1)?.parentSpanContext?.spanId, SPAN_ID, 'while the parent is kept')
})

t.test('no session id in any attribute: mcp.session.id is a 32-hex digest', async t => {
  const { app, otel } = await tracedApp(t, { sessions: { secret: SESSION_SECRET } })
  const init = await post(app, initializeBody())
  const session = String(init.headers['mcp-session-id'])
  t.ok(session.length >= 16, 'initialize minted a session')
  const other = String((await post(app, initializeBody())).headers['mcp-session-id'])
  t.not(other, session)
  otel.reset()

  const digests: string[] = []
  for (const id of [session, session, other]) {
    const res = await post(app, toolCall(1, 'echo', { text: 'x' }), { ...LEGACY, 'mcp-session-id': id })
    t.equal(statusOf(res), 200, 'served in the session')
    const span = onlySpan(t, otel, 'in a session')
    const digest = String(span?.attributes['mcp.session.id'])
    t.match(digest, /^[0-9a-f]{32}$/, 'mcp.session.id is 32 hex digits')
    t.equal(digest, createHash('sha256').update(id).digest('hex').slice(0, 32), 'the first 128 bits of the id\'s SHA-256 (as documented)')
    t.notOk(exportedStrings(span!).some(s => s.includes(id) || (s.length >= 16 && id.includes(s))),
      'the raw session id (or a long piece of it) is nowhere in the span')
    digests.push(digest)
  }
  t.equal(digests[0], digests[1], 'one session, one digest: its operations group')
  t.not(digests[0], digests[2], 'another session, another digest')

  // A forged session is refused (404), and its header is not exported either.
  const forged = session.slice(0, -4) + 'AAAA'
  const res = await post(app, toolCall(1, 'echo', { text: 'x' }), { ...LEGACY, 'mcp-session-id': forged })
  t.equal(statusOf(res), 404)
  const span = onlySpan(t, otel, 'forged session')
  t.equal(span?.attributes['error.type'], '-32001')
  t.notOk(exportedStrings(span!).some(s => s.includes(forged)), 'the forged id is nowhere in the span')

  const points = await durationPoints(otel)
  t.ok(points.length > 0, 'durations recorded')
  t.notOk(points.some(p => 'mcp.session.id' in p.attributes), 'no session attribute on the duration metric')
  t.notOk(points.some(p => Object.values(p.attributes).some(v => String(v).includes(session.slice(0, 16)))), 'no session id in any metric attribute')
})

t.test('a modern-era request has no mcp.session.id: that era ignores Mcp-Session-Id', async t => {
  const { app, otel } = await tracedApp(t, { sessions: { secret: SESSION_SECRET } })
  const session = String((await post(app, initializeBody())).headers['mcp-session-id'])
  otel.reset()
  const res = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { headers: { 'mcp-session-id': session } })
  t.equal(statusOf(res), 200, 'served (the header is ignored)')
  const span = onlySpan(t, otel, 'modern request with a session header')
  t.notOk(exportedStrings(span!).some(s => s.includes(session)), 'the raw id is nowhere in the span')
  t.notOk('mcp.session.id' in (span?.attributes ?? {}), 'no mcp.session.id on a modern-era span')
})

t.test('no token, principal, client address or argument anywhere in a span', async t => {
  const otel = installOtel(t)
  const { app } = await jwtApp(t)
  const principal = 'principal-7f3a'
  const token = app.jwt.sign({ sub: principal })
  const argument = 'argument-value-7f3a'
  t.equal(statusOf(await post(app, toolCall(1, 'whoami', { note: argument }), { ...LEGACY, ...bearer(token), traceparent: HEADER_TRACEPARENT })), 200)
  t.equal(statusOf(await postModern(app, 'tools/call', { name: 'whoami', arguments: { token, note: argument } }, { headers: bearer(token) })), 200)
  t.equal(statusOf(await postModern(app, UNKNOWN_METHOD, { token }, { headers: bearer(token) })), 404)
  t.equal(statusOf(await post(app, { jsonrpc: '2.0', method: 'notifications/initialized' }, { ...LEGACY, ...bearer(token) })), 202)
  t.equal(statusOf(await post(app, toolCall(1, 'whoami'), { ...LEGACY, authorization: 'Bearer not.a.valid-token' })), 401)
  t.equal(statusOf(await post(app, toolCall(1, 'whoami'), LEGACY)), 401)
  const spans = mcpSpans(otel)
  t.same(spans.map(s => s.name), ['tools/call whoami', 'tools/call whoami', '_OTHER', 'notifications/initialized', 'mcp authorization', 'mcp authorization'],
    'one span per authenticated message, and one per request refused before the MCP layer')
  const refused = spans.filter(span => span.name === 'mcp authorization')
  t.same(refused.map(span => [span.attributes['error.type'], span.attributes['http.response.status_code'], span.status.code]),
    [['invalid', 401, SpanStatusCode.ERROR], ['missing', 401, SpanStatusCode.ERROR]], 'a refused request\'s span says why, and with which status')
  const signature = token.split('.')[2]!
  for (const span of spans) {
    const strings = exportedStrings(span)
    t.notOk(strings.some(s => s.includes(signature) || s.includes('not.a.valid-token') || /bearer/i.test(s)), `${span.name}: no token`)
    t.notOk(strings.some(s => s.includes(principal)), `${span.name}: no principal`)
    t.notOk(strings.some(s => s.includes('127.0.0.1')), `${span.name}: no client address`)
    t.notOk(strings.some(s => s.includes(argument)), `${span.name}: no argument`)
  }
})

t.test('mcp.resource.uri is sanitised and bounded', async t => {
  const { app, otel } = await tracedApp(t)
  const uri = 'test://doc\u0007\u202e/' + 'u'.repeat(10_240)
  const res = await postLegacy(app, 'resources/read', { uri })
  t.ok(statusOf(res) < 500, `an unknown 10 kB URI is no 5xx (${statusOf(res)})`)
  const exported = String(onlySpan(t, otel, 'long uri')?.attributes['mcp.resource.uri'])
  t.ok(exported.startsWith('test://doc/uuu'), `the URI, without its control and bidi characters (${exported.slice(0, 16)}…)`)
  t.ok(exported.length <= 512, `cut to 512 characters (${exported.length})`)
})

/**
 * An app with the in-memory SDK and `wait`: a tool that waits for its cancellation (or, with
 * `ignore`, sleeps that long whatever happens); `entered` counts its calls, `reasons` the abort reasons
 * it saw, `requests` the HTTP requests it ran in.
 */
async function cancellableApp (t: Teardown, options: McpCancellationOptions = {}): Promise<{
  app: FastifyInstance, otel: InMemoryOtel, entered: () => number, reasons: unknown[], requests: FastifyRequest[]
}> {
  const otel = installOtel(t)
  let entered = 0
  const reasons: unknown[] = []
  const requests: FastifyRequest[] = []
  const app = await buildApp(t, options, app => {
    app.mcp.tool<{ ignore?: number }>({
      name: 'wait',
      description: 'Waits for its cancellation',
      inputSchema: { type: 'object', properties: { ignore: { type: 'integer' } } },
      handler: async ({ ignore }, ctx) => {
        entered++
        requests.push(ctx.request)
        if (ignore !== undefined) {
          await sleep(ignore)
          return { content: [{ type: 'text', text: 'ignored' }] }
        }
        await new Promise((_resolve, reject) => {
          const timer = setTimeout(() => { reject(new Error('not cancelled in time')) }, 5000)
          ctx.signal.addEventListener('abort', () => {
            clearTimeout(timer)
            reasons.push((ctx.signal.reason as { reason?: unknown }).reason)
            reject(ctx.signal.reason)
          }, { once: true })
        })
        return { content: [{ type: 'text', text: 'never' }] }
      }
    })
  })
  return { app, otel, entered: () => entered, reasons, requests }
}

/** The span of request `id`, once it has ended. */
async function spanOf (otel: InMemoryOtel, id: string): Promise<ReadableSpan | undefined> {
  await waitFor(() => mcpSpans(otel).some(s => s.attributes['jsonrpc.request.id'] === id))
  return mcpSpans(otel).find(s => s.attributes['jsonrpc.request.id'] === id)
}

t.test('a legacy cancellation: the reason in the span is the sanitised one; events, source and link', async t => {
  const { app, otel, entered, reasons } = await cancellableApp(t)
  const pending = postLegacy(app, 'tools/call', { name: 'wait', arguments: {} }, { id: 'victim-1' })
  t.ok(await waitFor(() => app.mcpCancellation.inFlight('victim-1', INJECT_SCOPE)), 'the call is in flight')
  t.equal(entered(), 1)

  const reason = 'user\u0007 pressed\u202e stop\r\n\u200b' + 'x'.repeat(10_240)
  const cancel = await post(app, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'victim-1', reason } }, LEGACY)
  t.equal(statusOf(cancel), 202, 'the cancel is accepted')
  t.equal(statusOf(await pending), 202, 'the cancelled call ends without a result')
  const victim = await spanOf(otel, 'victim-1')
  t.ok(victim, 'the cancelled call\'s span ended')
  if (victim === undefined) return

  const spans = mcpSpans(otel)
  t.equal(spans.length, 2, 'two spans: the call and the notification')
  const notification = spans.find(s => s !== victim)
  t.equal(victim.name, 'tools/call wait')
  t.equal(victim.status.code, SpanStatusCode.UNSET, 'a cancellation the client asked for is no error')
  t.notOk('error.type' in victim.attributes, 'no error.type')
  t.equal(victim.attributes['mcp.cancellation.source'], 'client')

  const cancelled = victim.events.find(e => e.name === 'mcp.request.cancelled')
  t.ok(cancelled, 'an mcp.request.cancelled event')
  t.equal(cancelled?.attributes?.['mcp.cancellation.source'], 'client')
  const exported = String(cancelled?.attributes?.['mcp.cancellation.reason'])
  t.equal(reasons.length, 1)
  t.equal(exported, reasons[0], 'the exported reason is the one the handler was given (sanitised once)')
  t.ok(exported.startsWith('user pressed stop'), `the reason text survives (${exported.slice(0, 30)}…)`)
  t.notMatch(exported, /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/, 'no control, zero-width or bidi character')
  t.ok(exported.length <= 200, `bounded (${exported.length} characters, not 10 kB)`)
  t.notOk(exportedStrings(victim).some(s => s.includes('\u202e') || s.length > 1024), 'no raw reason anywhere in the span')
  const stopped = victim.events.find(e => e.name === 'mcp.handler.stopped')
  t.type(stopped?.attributes?.['mcp.cancellation.stop_duration'], 'number', 'an mcp.handler.stopped event with the stop duration')

  t.ok(notification, 'the notification has its span')
  t.same(victim.links.map(l => l.context.spanId), [notification?.spanContext().spanId], 'the cancelled span links to the notification that cancelled it')
  t.equal(victim.links[0]?.attributes?.['mcp.cancellation.source'], 'client')
  t.notOk(exportedStrings(notification!).some(s => s.includes('\u202e') || s.includes('x'.repeat(300))), 'the notification span does not carry the raw reason either')
})

t.test('a cancellation the server makes is an error (-32800); a killed handler is handler_killed', async t => {
  const { app, otel, requests } = await cancellableApp(t, { cancelTimeoutMs: 50 })

  // The server cancels (as on shutdown): the client is told -32800.
  const pending = postLegacy(app, 'tools/call', { name: 'wait', arguments: {} }, { id: 'server-1' })
  t.ok(await waitFor(() => app.mcpCancellation.inFlight('server-1', INJECT_SCOPE)))
  t.ok(app.mcpCancellation.cancelRequest(requests[0]!, 'maintenance'), 'the server cancels the call')
  const res = await pending
  t.equal(json(res).error?.code, -32800, 'the client is told -32800')
  let span = await spanOf(otel, 'server-1')
  t.equal(span?.attributes['error.type'], '-32800')
  t.equal(span?.status.code, SpanStatusCode.ERROR)
  t.equal(span?.attributes['mcp.cancellation.source'], 'server')
  t.equal(span?.events.find(e => e.name === 'mcp.request.cancelled')?.attributes?.['mcp.cancellation.reason'], 'maintenance')
  otel.reset()

  // A handler that ignores its cancellation outlives the kill timeout (50 ms).
  const ignoring = postLegacy(app, 'tools/call', { name: 'wait', arguments: { ignore: 300 } }, { id: 'kill-1' })
  t.ok(await waitFor(() => app.mcpCancellation.inFlight('kill-1', INJECT_SCOPE)))
  t.equal(statusOf(await post(app, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'kill-1' } }, LEGACY)), 202)
  t.equal(statusOf(await ignoring), 202)
  span = await spanOf(otel, 'kill-1')
  t.equal(span?.attributes['error.type'], 'handler_killed', 'a killed handler: error.type handler_killed')
  t.equal(span?.status.code, SpanStatusCode.ERROR)
  t.equal(span?.events.find(e => e.name === 'mcp.handler.killed')?.attributes?.['mcp.cancellation.kill_timeout_ms'], 50, 'an mcp.handler.killed event')
  t.notOk(span?.events.some(e => e.name === 'mcp.handler.stopped'), 'no mcp.handler.stopped: it never stopped')
})

t.test('mcp.server.operation.duration: the span\'s low-cardinality attributes, never a request or session id', async t => {
  const { app, otel } = await tracedApp(t)
  for (const id of ['a-1', 'a-2', 'a-3']) await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { id })
  for (const id of ['b-1', 'b-2']) await postModern(app, 'tools/call', { name: UNKNOWN_TOOL, arguments: {} }, { id })
  await postModern(app, 'tools/call', { name: 'refuse', arguments: {} }, { id: 'c-1' })
  await postModern(app, 'tools/call', { name: 'explode', arguments: {} }, { id: 'd-1' })
  await postModern(app, 'prompts/get', { name: 'greet' }, { id: 'e-1' })
  await postModern(app, 'resources/read', { uri: 'test://doc' }, { id: 'f-1' })
  await postModern(app, UNKNOWN_METHOD, {}, { id: 'g-1' })
  await post(app, { jsonrpc: '2.0', method: 'notifications/initialized' }, { ...LEGACY, 'mcp-session-id': 'raw-session-header-7f3a' })

  const points = await durationPoints(otel)
  const find = (attributes: Attributes): { attributes: Attributes, count: number } | undefined =>
    points.find(p => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v) &&
      Object.keys(p.attributes).every(k => k in attributes || !['error.type', 'gen_ai.tool.name', 'gen_ai.prompt.name'].includes(k)))

  const ok = find({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'echo', 'gen_ai.operation.name': 'execute_tool', 'mcp.protocol.version': '2026-07-28', ...NETWORK })
  t.equal(ok?.count, 3, 'three echo calls with three request ids: one series, count 3')
  t.notOk(ok !== undefined && 'error.type' in ok.attributes, 'a success has no error.type')
  t.equal(find({ 'mcp.method.name': 'tools/call', 'error.type': '-32602', 'rpc.response.status_code': '-32602' })?.count, 2,
    'two unknown-tool calls: one series with error.type -32602 (and no tool name)')
  t.equal(find({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'refuse', 'error.type': 'tool_error' })?.count, 1, 'isError: error.type tool_error')
  t.equal(find({ 'mcp.method.name': 'tools/call', 'gen_ai.tool.name': 'explode', 'error.type': '-32603' })?.count, 1, 'a throwing handler: -32603')
  t.equal(find({ 'mcp.method.name': 'prompts/get', 'gen_ai.prompt.name': 'greet' })?.count, 1, 'prompts/get with its prompt name')
  t.equal(find({ 'mcp.method.name': 'resources/read' })?.count, 1, 'resources/read')
  t.equal(find({ 'mcp.method.name': '_OTHER', 'error.type': '-32601' })?.count, 1, 'an unserved method: _OTHER')
  t.equal(find({ 'mcp.method.name': 'notifications/initialized' })?.count, 1, 'the notification under its own name')
  t.equal(points.reduce((sum, p) => sum + p.count, 0), 11, 'every request and the notification recorded once')

  for (const point of points) {
    const keys = Object.keys(point.attributes)
    t.same(keys.filter(k => !METRIC_KEYS.has(k)), [], `${String(point.attributes['mcp.method.name'])}: only low-cardinality attributes (${keys.join(', ')})`)
    const values = Object.values(point.attributes).map(String)
    t.notOk(values.some(v => /^[a-g]-\d$/.test(v) || v.includes('raw-session-header') || v.includes('test://doc') || v.includes('method-7f3a')),
      `${String(point.attributes['mcp.method.name'])}: no request id, session, URI or client method name`)
  }
  const unit = (await otel.collect()).at(-1)?.scopeMetrics.flatMap(s => s.metrics).find(m => m.descriptor.name === DURATION)?.descriptor.unit
  t.equal(unit, 's', 'recorded in seconds')
})

t.test('metrics without traces, traces without metrics', async t => {
  t.test('only a meter provider: the duration is recorded, no span', async t => {
    const { app, otel } = await tracedApp(t, {}, { traces: false })
    t.equal(statusOf(await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } })), 200)
    t.equal(otel.spans().length, 0, 'no span')
    t.equal((await durationPoints(otel)).reduce((sum, p) => sum + p.count, 0), 1, 'one duration')
  })
  t.test('only a tracer provider: spans, no duration', async t => {
    const { app, otel } = await tracedApp(t, {}, { metrics: false })
    t.equal(statusOf(await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } })), 200)
    t.equal(mcpSpans(otel).length, 1, 'one span')
    t.same(await durationPoints(otel), [], 'no duration')
  })
})

t.test('tracing: false records nothing, even with an SDK', async t => {
  const { app, otel, children } = await tracedApp(t, { tracing: false })
  for (const res of [
    await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { meta: { traceparent: TRACEPARENT } }),
    await postLegacy(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { headers: { traceparent: HEADER_TRACEPARENT } }),
    await postModern(app, 'tools/call', { name: 'parents', arguments: {} }),
    await postModern(app, UNKNOWN_METHOD, {}),
    await post(app, { jsonrpc: '2.0', method: 'notifications/initialized' }, LEGACY)
  ]) t.ok([200, 202, 404].includes(statusOf(res)), `served (${statusOf(res)})`)
  t.same(mcpSpans(otel), [], 'no MCP span')
  t.equal(children.active, undefined, 'the handler runs in no MCP span')
  t.same((await durationPoints(otel)), [], 'no duration metric')
})

t.test('without any SDK: served as usual', async t => {
  const calls: Array<string | undefined> = []
  const app = await buildApp(t, {}, app => {
    registerEcho(app)
    app.mcp.tool({
      name: 'active',
      description: 'Reports whether a span is active',
      inputSchema: { type: 'object' },
      handler: () => {
        calls.push(trace.getActiveSpan()?.spanContext().spanId)
        return { content: [{ type: 'text', text: 'ok' }] }
      }
    })
  })
  let res = await postModern(app, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { meta: { traceparent: TRACEPARENT, tracestate: TRACESTATE } })
  t.same(json(res).result?.content, [{ type: 'text', text: 'x' }], 'modern, with _meta trace context')
  res = await postLegacy(app, 'tools/call', { name: 'echo', arguments: { text: 'y' }, _meta: { traceparent: 42 } }, { headers: { traceparent: HEADER_TRACEPARENT } })
  t.same(json(res).result?.content, [{ type: 'text', text: 'y' }], 'legacy, with a header and a bad _meta')
  res = await postModern(app, 'tools/call', { name: UNKNOWN_TOOL, arguments: {} })
  t.equal(json(res).error?.code, -32602, 'errors as usual')
  t.equal(statusOf(await postModern(app, UNKNOWN_METHOD, {})), 404)
  t.equal(statusOf(await post(app, { jsonrpc: '2.0', method: 'notifications/initialized' }, LEGACY)), 202)
  t.equal(statusOf(await postModern(app, 'tools/call', { name: 'active', arguments: {} })), 200)
  t.same(calls, [undefined], 'no span is active in the handler')
})
