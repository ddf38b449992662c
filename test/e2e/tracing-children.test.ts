/**
 * The spans of work a request starts, under an in-memory SDK: a worker tool's run in its thread
 * (INTERNAL, child of the `tools/call` span), and a legacy-era ask to the client (CLIENT, child of the
 * request's span, from sending to the answer, linked to the POST that carried the answer; the official
 * SDK 1.x client answers it over a real socket).
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { SpanKind, SpanStatusCode } from '@opentelemetry/api'
import t from 'tap'
import { LEGACY_HEADERS } from '../helpers/jsonrpc.js'
import { listenPlugin } from '../helpers/listen.js'
import { installOtel, type InMemoryOtel } from '../helpers/otel.js'

const WORKER = new URL('../workers/context-report.ts', import.meta.url)
/** The answer POSTs' (and every POST's) HTTP trace context: what the ask's span links to. */
const HEADER_TRACE = '0af7651916cd43dd8448eb211c80319c'
const HEADER_SPAN = 'b7ad6b7169203331'

async function spansNamed (otel: InMemoryOtel, name: string, timeoutMs = 3000): Promise<ReturnType<InMemoryOtel['spans']>> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const spans = otel.spans().filter(span => span.name === name)
    if (spans.length > 0 || Date.now() >= deadline) return spans
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

t.test('a worker tool\'s run is an INTERNAL span, child of its tools/call span', async t => {
  const otel = installOtel(t)
  const server = await listenPlugin(t, {}, {}, app => { app.mcp.tool({ name: 'ping', worker: { filename: WORKER, name: 'ping' } }) })
  const answer = await fetch(server.url, {
    method: 'POST',
    headers: LEGACY_HEADERS,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'ping', arguments: {} } })
  })
  t.match(await answer.text(), /pong/)
  const [call] = await spansNamed(otel, 'tools/call ping')
  const [run] = await spansNamed(otel, 'worker ping')
  t.ok(call, 'the tools/call span')
  t.ok(run, 'the worker run\'s span')
  t.equal(run?.kind, SpanKind.INTERNAL)
  t.equal(run?.attributes['gen_ai.tool.name'], 'ping')
  t.equal(run?.parentSpanContext?.spanId, call?.spanContext().spanId, 'child of the tools/call span')
  t.equal(run?.spanContext().traceId, call?.spanContext().traceId, 'in its trace')
  t.equal(run?.status.code, SpanStatusCode.UNSET, 'a run that ended by itself is no error')
  t.same(run?.events.map(event => event.name), [], 'and was not terminated')
})

t.test('a legacy ask is a CLIENT span from sending to the answer, child of the request\'s span, linked to the answer POST', async t => {
  const otel = installOtel(t)
  const server = await listenPlugin(t, {}, {}, app => {
    app.mcp.tool({
      name: 'ask_name',
      handler: async (_args, ctx) => {
        const answer = await ctx.elicit({ message: 'Your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } })
        return { content: [{ type: 'text', text: `hello ${String(answer.content?.name)}` }] }
      }
    })
  })
  const client = new Client({ name: 'tracing-children', version: '1.0.0' }, { capabilities: { elicitation: {} } })
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Ada' } }))
  const transport = new StreamableHTTPClientTransport(server.url, { requestInit: { headers: { traceparent: `00-${HEADER_TRACE}-${HEADER_SPAN}-01` } } })
  await client.connect(transport)
  t.teardown(async () => { await client.close() })
  const result = await client.callTool({ name: 'ask_name', arguments: {} })
  t.same(result.content, [{ type: 'text', text: 'hello Ada' }])

  const [call] = await spansNamed(otel, 'tools/call ask_name')
  const [ask] = await spansNamed(otel, 'elicitation/create')
  t.ok(call, 'the tools/call span')
  t.ok(ask, 'the ask\'s span')
  t.equal(ask?.kind, SpanKind.CLIENT, 'a request this server makes: CLIENT')
  t.equal(ask?.attributes['mcp.method.name'], 'elicitation/create')
  t.equal(ask?.parentSpanContext?.spanId, call?.spanContext().spanId, 'child of the tools/call span')
  t.equal(ask?.status.code, SpanStatusCode.UNSET, 'answered: no error')
  t.same(ask?.links.map(link => [link.context.traceId, link.context.spanId]), [[HEADER_TRACE, HEADER_SPAN]], 'linked to the trace context of the POST that carried the answer')
  t.ok(ask !== undefined && call !== undefined && ask.endTime[0] * 1e9 + ask.endTime[1] <= call.endTime[0] * 1e9 + call.endTime[1], 'it ended before the call did')
})
