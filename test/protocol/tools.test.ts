import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { ToolError } from '../../lib/index.js'
import { buildApp, json, messages, postLegacy, postModern } from '../helpers/inject.js'
import { hasStackTrace } from '../helpers/jsonrpc.js'
import { registerEcho } from '../helpers/tools.js'

const SECRET = 'database password is hunter2'

function tools (app: FastifyInstance): void {
  registerEcho(app)
  app.mcp.tool({
    name: 'test_simple_text',
    description: 'Returns a simple text response',
    inputSchema: { type: 'object', properties: {} },
    handler: () => ({ content: [{ type: 'text', text: 'This is a simple text response for testing.' }] })
  })
  app.mcp.tool({ name: 'no_schema', handler: args => ({ content: [{ type: 'text', text: JSON.stringify(args) }] }) })
  app.mcp.tool({
    name: 'crash',
    handler: () => { throw new Error(SECRET) }
  })
  app.mcp.tool({
    name: 'crash_async',
    handler: async () => { await Promise.resolve(); throw new TypeError(SECRET) }
  })
  app.mcp.tool({
    name: 'tool_error',
    handler: () => { throw new ToolError('the city is unknown') }
  })
  app.mcp.tool({
    name: 'strict',
    inputSchema: {
      type: 'object',
      properties: { n: { type: 'integer', minimum: 1 }, tag: { type: 'string', format: 'email' } },
      required: ['n'],
      additionalProperties: false
    },
    handler: ({ n }: { n: number }) => ({ content: [{ type: 'text', text: `n=${n}` }] })
  })
  app.mcp.tool({
    name: 'structured',
    outputSchema: { type: 'object', properties: { total: { type: 'number' } }, required: ['total'] },
    handler: ({ bad }: { bad?: boolean }) => bad === true
      ? { content: [{ type: 'text', text: 'oops' }], structuredContent: { total: 'many' } }
      : { content: [{ type: 'text', text: '{"total":3}' }], structuredContent: { total: 3 } }
  })
  app.mcp.tool({ name: 'no_content', handler: () => ({ text: 'missing content' }) as never })
}

for (const era of ['legacy', 'modern'] as const) {
  const call = async (app: FastifyInstance, params: Record<string, unknown>, id: unknown = 1) =>
    era === 'legacy' ? await postLegacy(app, 'tools/call', params, { id }) : await postModern(app, 'tools/call', params, { id })

  t.test(`${era}: tools/call returns the handler's result`, async t => {
    const app = await buildApp(t, {}, tools)
    const res = await call(app, { name: 'echo', arguments: { text: 'hello' } })
    t.equal(res.statusCode, 200)
    t.same(json(res).result.content, [{ type: 'text', text: 'hello' }])
    t.notOk(json(res).result.isError)
  })

  t.test(`${era}: input-validation failure is an isError result with HTTP 200`, async t => {
    const app = await buildApp(t, {}, tools)
    const cases: Array<Record<string, unknown>> = [
      { name: 'echo', arguments: {} },
      { name: 'echo', arguments: { text: 42 } },
      { name: 'strict', arguments: { n: 0 } },
      { name: 'strict', arguments: { n: 1.5 } },
      { name: 'strict', arguments: { n: '1' } },
      { name: 'strict', arguments: { n: 1, extra: true } },
      { name: 'strict', arguments: { n: 1, tag: 'not-an-email' } },
      { name: 'strict', arguments: 'n=1' }
    ]
    for (const params of cases) {
      const res = await call(app, params, 9)
      t.equal(res.statusCode, 200, JSON.stringify(params))
      const body = json(res)
      t.equal(body.id, 9)
      t.notOk(body.error, 'not a protocol error')
      t.equal(body.result?.isError, true)
      t.equal(body.result?.content?.[0]?.type, 'text')
      t.type(body.result?.content?.[0]?.text, 'string')
    }
  })

  t.test(`${era}: valid arguments pass the schema unchanged`, async t => {
    const app = await buildApp(t, {}, tools)
    const res = await call(app, { name: 'strict', arguments: { n: 3, tag: 'a@b.example' } })
    t.equal(json(res).result.content[0].text, 'n=3')
  })

  t.test(`${era}: an unknown tool is -32602`, async t => {
    const app = await buildApp(t, {}, tools)
    const res = await call(app, { name: 'does_not_exist', arguments: {} }, 'q')
    t.equal(res.statusCode, 200)
    const body = json(res)
    t.equal(body.id, 'q')
    t.equal(body.error?.code, -32602)
    t.notOk(body.result)
  })

  t.test(`${era}: a handler throwing a plain Error is -32603 "Internal error" without detail`, async t => {
    const app = await buildApp(t, {}, tools)
    for (const name of ['crash', 'crash_async', 'no_content']) {
      const res = await call(app, { name }, 11)
      t.ok(res.statusCode < 500, `${name}: not an HTTP 500`)
      const body = json(res)
      t.equal(body.id, 11)
      t.equal(body.error?.code, -32603, name)
      t.equal(body.error?.message, 'Internal error')
      t.notOk(res.payload.includes('hunter2'), 'the original message is not sent')
      t.notOk(res.payload.includes('missing content'), 'handler output is not leaked')
      t.notOk(hasStackTrace(res.payload), 'no stack trace')
      t.notMatch(res.payload, /tools\.test\.ts|node_modules|lib\//, 'no file paths')
    }
  })

  t.test(`${era}: a ToolError is an isError result carrying its message`, async t => {
    const app = await buildApp(t, {}, tools)
    const res = await call(app, { name: 'tool_error' })
    t.equal(res.statusCode, 200)
    const body = json(res)
    t.notOk(body.error)
    t.equal(body.result.isError, true)
    t.same(body.result.content, [{ type: 'text', text: 'the city is unknown' }])
    t.notOk(hasStackTrace(res.payload))
  })

  t.test(`${era}: a tool is called without arguments`, async t => {
    const app = await buildApp(t, {}, tools)
    const res = await call(app, { name: 'test_simple_text' })
    t.equal(res.statusCode, 200)
    t.same(json(res).result.content, [{ type: 'text', text: 'This is a simple text response for testing.' }])
    const noSchema = await call(app, { name: 'no_schema' })
    t.equal(json(noSchema).result.content[0].text, '{}', 'the handler gets {}')
  })

  t.test(`${era}: structuredContent that breaks outputSchema is an internal error`, async t => {
    const app = await buildApp(t, {}, tools)
    const ok = await call(app, { name: 'structured', arguments: {} })
    t.same(json(ok).result.structuredContent, { total: 3 })
    const bad = await call(app, { name: 'structured', arguments: { bad: true } })
    t.equal(json(bad).error?.code, -32603)
    t.notOk(hasStackTrace(bad.payload))
  })
}

t.test('tools/list lists names, schemas and metadata', async t => {
  const app = await buildApp(t, {}, app => {
    app.mcp.tool({
      name: 'described',
      title: 'Described',
      description: 'has metadata',
      inputSchema: { type: 'object', properties: { a: { type: 'string' } } },
      annotations: { readOnlyHint: true },
      handler: () => ({ content: [] })
    })
    app.mcp.tool({ name: 'bare', handler: () => ({ content: [] }) })
  })
  const res = await postLegacy(app, 'tools/list')
  const list = json(res).result.tools as Array<Record<string, unknown>>
  t.same(list.map(tool => tool.name), ['described', 'bare'])
  t.match(list[0], {
    title: 'Described',
    description: 'has metadata',
    inputSchema: { type: 'object', properties: { a: { type: 'string' } } },
    annotations: { readOnlyHint: true }
  })
  t.same(list[1]?.inputSchema, { type: 'object' }, 'a tool without a schema lists type object')
})

t.test('the handler context works destructured, and a synchronous handler can stream', async t => {
  const seen: Record<string, unknown> = {}
  const app = await buildApp(t, {}, app => {
    app.mcp.tool({
      name: 'destructured',
      // No async anywhere: the answer is synchronous, the notifications before it still stream.
      handler: (_args, { requestId, method, era, protocolVersion, principal, cancelled, throwIfCancelled, progress, notify, signal }) => {
        throwIfCancelled()
        void progress(1, 2, 'half')
        void notify('info', 'from a destructured notify')
        Object.assign(seen, { requestId, method, era, protocolVersion, principal, cancelled: cancelled(), aborted: signal.aborted })
        return { content: [{ type: 'text', text: 'done' }] }
      }
    })
  })
  const res = await postLegacy(app, 'tools/call', { name: 'destructured', _meta: { progressToken: 'p' } }, { id: 'ctx-1' })
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^text\/event-stream/, 'the notifications turned the answer into a stream')
  const frames = messages(res)
  t.same(frames.map(m => m.method ?? 'response'), ['notifications/progress', 'notifications/message', 'response'])
  t.same(frames[0]?.params, { progressToken: 'p', progress: 1, total: 2, message: 'half' })
  t.same(frames[2]?.result, { content: [{ type: 'text', text: 'done' }] })
  t.same(seen, { requestId: 'ctx-1', method: 'tools/call', era: 'legacy', protocolVersion: '2025-11-25', principal: null, cancelled: false, aborted: false })
})
