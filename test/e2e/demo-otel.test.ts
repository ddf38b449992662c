/**
 * The demo server exports OpenTelemetry when `OTEL_EXPORTER_OTLP_ENDPOINT` is set: its spans (the MCP
 * span under `@fastify/otel`'s HTTP span) and `mcp.server.operation.duration` reach an OTLP/HTTP
 * receiver (here a small JSON one written for the test) with `service.name` from `OTEL_SERVICE_NAME`.
 * Without the variable no SDK is started, and nothing is exported.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { startDemoChild } from '../helpers/demo-child.js'
import { LEGACY_HEADERS } from '../helpers/jsonrpc.js'
import { waitFor } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

interface OtlpValue { stringValue?: string, intValue?: number | string }
interface OtlpAttribute { key: string, value: OtlpValue }
interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes: OtlpAttribute[]
  status?: { code?: number }
}

/** What the receiver got, by path. */
interface Received {
  /** Every span with its resource's `service.name`. */
  spans: Array<OtlpSpan & { service: string | undefined }>
  metrics: Array<{ name: string, service: string | undefined }>
  contentTypes: Set<string>
}

function attribute (attributes: OtlpAttribute[] | undefined, key: string): string | undefined {
  return attributes?.find(entry => entry.key === key)?.value.stringValue
}

async function body (request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

/** An OTLP/HTTP JSON receiver on 127.0.0.1 (the JSON protocol only: protobuf bodies are counted, not read). */
async function receiver (t: Tap): Promise<{ url: string, received: Received }> {
  const received: Received = { spans: [], metrics: [], contentTypes: new Set() }
  const server: Server = createServer((request, response) => {
    void body(request).then(text => {
      received.contentTypes.add(String(request.headers['content-type']))
      if (request.headers['content-type'] === 'application/json') {
        const payload = JSON.parse(text) as Record<string, Array<Record<string, any>>>
        for (const resource of payload.resourceSpans ?? []) {
          const service = attribute(resource.resource?.attributes, 'service.name')
          for (const scope of resource.scopeSpans ?? []) for (const span of scope.spans ?? []) received.spans.push({ ...span, service })
        }
        for (const resource of payload.resourceMetrics ?? []) {
          const service = attribute(resource.resource?.attributes, 'service.name')
          for (const scope of resource.scopeMetrics ?? []) for (const metric of scope.metrics ?? []) received.metrics.push({ name: metric.name, service })
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>(resolve => { server.close(() => { resolve() }) }))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received }
}

async function callEcho (url: URL): Promise<Response> {
  return await fetch(url, {
    method: 'POST',
    headers: LEGACY_HEADERS,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'traced' } } })
  })
}

t.test('with OTEL_EXPORTER_OTLP_ENDPOINT (http/json): spans and the operation metric arrive, with service.name', async t => {
  const { url, received } = await receiver(t)
  const demo = await startDemoChild(t, {
    OTEL_EXPORTER_OTLP_ENDPOINT: url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: 'mcp-demo-under-test',
    OTEL_BSP_SCHEDULE_DELAY: '100',
    OTEL_METRIC_EXPORT_INTERVAL: '300'
  })
  const answer = await callEcho(demo.url)
  t.equal(answer.status, 200)
  t.match(await answer.text(), /traced/)

  t.ok(await waitFor(() => received.spans.some(span => span.name === 'tools/call echo'), 10_000), 'the MCP span arrives', { output: demo.output() })
  const mcp = received.spans.find(span => span.name === 'tools/call echo')!
  t.equal(mcp.service, 'mcp-demo-under-test', 'service.name from OTEL_SERVICE_NAME')
  t.equal(mcp.kind, 2, 'a SERVER span')
  t.equal(attribute(mcp.attributes, 'mcp.method.name'), 'tools/call')
  t.equal(attribute(mcp.attributes, 'gen_ai.tool.name'), 'echo')
  t.ok(await waitFor(() => received.spans.some(span => span.spanId === mcp.parentSpanId), 5000), 'its parent, the HTTP handling span of @fastify/otel, arrives too')
  const parent = received.spans.find(span => span.spanId === mcp.parentSpanId)!
  t.equal(parent.traceId, mcp.traceId, 'in the same trace')
  t.notOk(parent.name.startsWith('tools/call'), `the parent is Fastify's (${parent.name}), not an MCP span`)

  t.ok(await waitFor(() => received.metrics.some(metric => metric.name === 'mcp.server.operation.duration'), 10_000), 'mcp.server.operation.duration arrives')
  t.equal(received.metrics.find(metric => metric.name === 'mcp.server.operation.duration')?.service, 'mcp-demo-under-test')
  t.same([...received.contentTypes], ['application/json'], 'every export is OTLP JSON')
})

t.test('http/protobuf (the default protocol) reaches the receiver as protobuf', async t => {
  const { url, received } = await receiver(t)
  const demo = await startDemoChild(t, { OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_BSP_SCHEDULE_DELAY: '100', OTEL_METRIC_EXPORT_INTERVAL: '300' })
  t.equal((await callEcho(demo.url)).status, 200)
  t.ok(await waitFor(() => received.contentTypes.has('application/x-protobuf'), 10_000), 'exports arrive as application/x-protobuf')
})

t.test('without OTEL_EXPORTER_OTLP_ENDPOINT the demo starts no SDK: nothing is exported', async t => {
  const { url, received } = await receiver(t)
  // Exporters would honour these if an SDK were started.
  const demo = await startDemoChild(t, {
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${url}/v1/traces`,
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `${url}/v1/metrics`,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '100',
    OTEL_METRIC_EXPORT_INTERVAL: '300'
  })
  t.equal((await callEcho(demo.url)).status, 200)
  await new Promise(resolve => setTimeout(resolve, 1500))
  t.same(received.spans, [], 'no span')
  t.same(received.metrics, [], 'no metric')
  t.same([...received.contentTypes], [], 'no export at all')
})
