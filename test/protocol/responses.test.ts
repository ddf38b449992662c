import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { ToolError, type ResponseMode } from '../../lib/index.js'
import { buildApp, json, messages, post, postLegacy, postModern } from '../helpers/inject.js'
import { META, sseFrames, sseMessages, type JsonRpcMessage } from '../helpers/jsonrpc.js'

/**
 * Pause between progress reports: longer than any sane progress rate limit (the server may coalesce
 * reports sent faster), so every report that is not dropped for another reason reaches the client.
 */
const SPACING_MS = 80

function tools (app: FastifyInstance): void {
  app.mcp.tool({ name: 'quiet', handler: () => ({ content: [{ type: 'text', text: 'done' }] }) })
  app.mcp.tool({
    name: 'progress',
    handler: async (_args, ctx) => {
      for (const step of [1, 2, 3]) {
        if (step > 1) await sleep(SPACING_MS)
        await ctx.progress(step, 3, `step ${step}`)
      }
      return { content: [{ type: 'text', text: 'progressed' }] }
    }
  })
  app.mcp.tool({
    name: 'burst',
    handler: async (_args, ctx) => {
      for (let i = 1; i <= 100; i++) await ctx.progress(i, 100)
      return { content: [{ type: 'text', text: 'burst' }] }
    }
  })
  app.mcp.tool({
    name: 'jumpy',
    handler: async (_args, ctx) => {
      for (const [i, value] of [1, 1, 0.5, 2, Number.NaN, 1.9999, 3, 3].entries()) {
        if (i > 0) await sleep(SPACING_MS)
        await ctx.progress(value)
      }
      return { content: [{ type: 'text', text: 'jumped' }] }
    }
  })
  app.mcp.tool({
    name: 'log',
    handler: async (_args, ctx) => {
      for (const level of ['debug', 'info', 'warning', 'error'] as const) await ctx.notify(level, `${level} message`, 'tap')
      return { content: [{ type: 'text', text: 'logged' }] }
    }
  })
  app.mcp.tool({
    name: 'progress_then_throw',
    handler: async (_args, ctx) => {
      await ctx.progress(1)
      throw new Error('secret failure')
    }
  })
  app.mcp.tool({
    name: 'progress_then_tool_error',
    handler: async (_args, ctx) => {
      await ctx.progress(1)
      throw new ToolError('visible failure')
    }
  })
}

const app = async (t: Test, responseMode?: ResponseMode) =>
  await buildApp(t, responseMode === undefined ? {} : { responseMode }, tools)

const callLegacy = async (server: FastifyInstance, name: string, meta?: Record<string, unknown>, headers: Record<string, string | undefined> = {}) =>
  await postLegacy(server, 'tools/call', meta === undefined ? { name } : { name, _meta: meta }, { id: 1, headers })

function isJson (t: Test, res: LightMyRequestResponse): void {
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^application\/json/, 'application/json')
}

/**
 * An SSE response, framed as its era says: a 2025-11-25 stream is resumable (a priming event with an
 * id, `retry` and empty data first, then each event with its own id), a 2026-07-28 one has no ids.
 */
function isSse (t: Test, res: LightMyRequestResponse, { resumable = true } = {}): void {
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^text\/event-stream/, 'text/event-stream')
  t.equal(res.headers['x-accel-buffering'], 'no')
  t.match(String(res.headers['cache-control']), /no-cache/)
  t.ok(res.payload.endsWith('\n\n'), 'the stream ends after a complete event')
  const frames = sseFrames(res.payload)
  if (!resumable) {
    for (const frame of frames) {
      t.match(frame.raw, /^event: message\ndata: \{.*\}$/, 'each frame is event: message + one data line')
      t.notMatch(frame.raw, /^id:/m, 'no SSE ids')
    }
    return
  }
  t.match(frames[0]?.raw, /^id: e1\.\S+\nretry: \d+\ndata: $/, 'the priming event first: an id, retry and empty data')
  for (const frame of frames.slice(1)) {
    t.match(frame.raw, /^id: e1\.\S+\nevent: message\ndata: \{.*\}$/, 'each later frame: its id, event: message and one data line')
  }
  t.equal(new Set(frames.map(frame => frame.id)).size, frames.length, 'every id is distinct')
}

const final = (list: JsonRpcMessage[]) => list[list.length - 1]
const notifications = (list: JsonRpcMessage[], method: string) => list.filter(m => m.method === method)

t.test('auto: JSON when the handler emits nothing', async t => {
  const server = await app(t)
  const res = await callLegacy(server, 'quiet', { progressToken: 'p' })
  isJson(t, res)
  t.equal(json(res).result.content[0].text, 'done')
  const noToken = await callLegacy(server, 'progress')
  isJson(t, noToken)
  t.equal(json(noToken).result.content[0].text, 'progressed', 'progress without a token emits nothing')
})

t.test('auto: SSE once the handler emits progress, final response last', async t => {
  const server = await app(t)
  const res = await callLegacy(server, 'progress', { progressToken: 'tok' })
  isSse(t, res)
  const list = sseMessages(res)
  t.equal(list.length, 4)
  t.same(notifications(list, 'notifications/progress').map(m => m.params), [
    { progressToken: 'tok', progress: 1, total: 3, message: 'step 1' },
    { progressToken: 'tok', progress: 2, total: 3, message: 'step 2' },
    { progressToken: 'tok', progress: 3, total: 3, message: 'step 3' }
  ])
  t.equal(final(list)?.id, 1)
  t.equal(final(list)?.result.content[0].text, 'progressed')
  t.equal(list.filter(m => 'id' in m).length, 1, 'exactly one response')
  t.notOk(list.slice(0, -1).some(m => 'id' in m), 'notifications carry no id')
})

t.test('auto: SSE once the handler emits a log notification (legacy sends every level)', async t => {
  const server = await app(t)
  const res = await callLegacy(server, 'log')
  isSse(t, res)
  const list = sseMessages(res)
  t.same(notifications(list, 'notifications/message').map(m => m.params), [
    { level: 'debug', data: 'debug message', logger: 'tap' },
    { level: 'info', data: 'info message', logger: 'tap' },
    { level: 'warning', data: 'warning message', logger: 'tap' },
    { level: 'error', data: 'error message', logger: 'tap' }
  ])
  t.equal(final(list)?.result.content[0].text, 'logged')
})

t.test('auto: an error after a notification is the last SSE event', async t => {
  const server = await app(t)
  const res = await callLegacy(server, 'progress_then_throw', { progressToken: 1 })
  isSse(t, res)
  const list = sseMessages(res)
  t.equal(list[0]?.method, 'notifications/progress')
  t.equal(final(list)?.id, 1)
  t.equal(final(list)?.error?.code, -32603)
  t.notOk(res.payload.includes('secret failure'))
  const toolError = await callLegacy(server, 'progress_then_tool_error', { progressToken: 1 })
  isSse(t, toolError)
  t.same(final(sseMessages(toolError))?.result, { content: [{ type: 'text', text: 'visible failure' }], isError: true })
})

t.test('json: never streams, progress and logs are dropped', async t => {
  const server = await app(t, 'json')
  for (const name of ['progress', 'log']) {
    const res = await callLegacy(server, name, { progressToken: 'tok' })
    isJson(t, res)
    const body = json(res)
    t.equal(body.id, 1)
    t.ok(body.result.content[0].text, `${name} result`)
    t.notMatch(res.payload, /notifications\//)
  }
})

t.test('sse: always streams', async t => {
  const server = await app(t, 'sse')
  const quiet = await callLegacy(server, 'quiet')
  isSse(t, quiet)
  const list = sseMessages(quiet)
  t.equal(list.length, 1)
  t.equal(list[0]?.result.content[0].text, 'done')
  const ping = await postLegacy(server, 'ping', undefined, { id: 'p' })
  isSse(t, ping)
  t.same(sseMessages(ping), [{ jsonrpc: '2.0', id: 'p', result: {} }])
  const progress = await callLegacy(server, 'progress', { progressToken: 5 })
  isSse(t, progress)
  t.equal(sseMessages(progress).length, 4)
})

t.test('2025-06-18 and 2025-03-26 streams carry no ids (they may not close early, so never resume), nor any with resumability off', async t => {
  const server = await app(t)
  for (const version of ['2025-06-18', '2025-03-26']) {
    const res = await callLegacy(server, 'progress', { progressToken: 'tok' }, { 'mcp-protocol-version': version })
    t.comment(version)
    isSse(t, res, { resumable: false })
  }
  const off = await buildApp(t, { resumability: false }, tools)
  isSse(t, await callLegacy(off, 'progress', { progressToken: 'tok' }), { resumable: false })
})

t.test('sse: a protocol error before dispatch is still plain JSON with its status', async t => {
  const server = await app(t, 'sse')
  const res = await postLegacy(server, 'ping', undefined, { headers: { 'mcp-protocol-version': '1999-01-01' } })
  t.equal(res.statusCode, 400)
  t.match(res.headers['content-type'], /^application\/json/)
})

for (const mode of ['auto', 'sse'] as const) {
  t.test(`${mode}: Accept: application/json never gets SSE`, async t => {
    const server = await app(t, mode)
    for (const name of ['quiet', 'progress', 'log']) {
      const res = await callLegacy(server, name, { progressToken: 'tok' }, { accept: 'application/json' })
      isJson(t, res)
      t.equal(json(res).id, 1)
      t.ok(json(res).result, name)
    }
  })
}

t.test('auto: Accept: text/event-stream only always gets SSE', async t => {
  const server = await app(t)
  const res = await callLegacy(server, 'quiet', undefined, { accept: 'text/event-stream' })
  isSse(t, res)
  t.equal(sseMessages(res)[0]?.result.content[0].text, 'done')
})

t.test('the progress token keeps its JSON type', async t => {
  const server = await app(t)
  for (const token of [7, '7', 0, '']) {
    const res = await callLegacy(server, 'progress', { progressToken: token })
    isSse(t, res)
    const list = notifications(sseMessages(res), 'notifications/progress')
    t.equal(list.length, 3, `token ${JSON.stringify(token)}`)
    for (const message of list) {
      t.equal(message.params?.progressToken, token)
      t.equal(typeof message.params?.progressToken, typeof token)
    }
    t.ok(res.payload.includes(`"progressToken":${JSON.stringify(token)}`), 'raw token type on the wire')
  }
})

t.test('a burst of progress arrives increasing, ends at its latest value, before the response', async t => {
  const server = await app(t)
  const res = await callLegacy(server, 'burst', { progressToken: 'b' })
  isSse(t, res)
  const list = sseMessages(res)
  const values = notifications(list, 'notifications/progress').map(m => m.params?.progress as number)
  t.ok(values.length >= 1, `${values.length} progress notifications`)
  t.ok(values.every((v, i) => i === 0 || v > (values[i - 1] as number)), 'strictly increasing')
  t.equal(values[values.length - 1], 100, 'the latest value is delivered')
  t.equal(final(list)?.result.content[0].text, 'burst', 'the response is last')
})

t.test('non-increasing progress values are dropped', async t => {
  const server = await app(t)
  const res = await callLegacy(server, 'jumpy', { progressToken: 'j' })
  isSse(t, res)
  const values = notifications(sseMessages(res), 'notifications/progress').map(m => m.params?.progress)
  t.same(values, [1, 2, 3])
})

t.test('modern: progress is sent when the request carries a progressToken', async t => {
  const server = await app(t)
  const res = await postModern(server, 'tools/call', { name: 'progress' }, { meta: { progressToken: 99 } })
  isSse(t, res, { resumable: false })
  const list = sseMessages(res)
  t.same(notifications(list, 'notifications/progress').map(m => m.params?.progress), [1, 2, 3])
  t.equal(notifications(list, 'notifications/progress')[0]?.params?.progressToken, 99)
  t.equal(final(list)?.result.resultType, 'complete')
  const none = await postModern(server, 'tools/call', { name: 'progress' })
  isJson(t, none)
})

t.test('modern: log notifications only when a logLevel is requested', async t => {
  const server = await app(t)
  const res = await postModern(server, 'tools/call', { name: 'log' })
  isJson(t, res)
  t.equal(json(res).result.content[0].text, 'logged')
  t.notMatch(res.payload, /notifications\/message/)
})

t.test('modern: log notifications at or above the requested level', async t => {
  const server = await app(t)
  const cases: Array<[string, string[]]> = [
    ['debug', ['debug', 'info', 'warning', 'error']],
    ['info', ['info', 'warning', 'error']],
    ['warning', ['warning', 'error']],
    ['error', ['error']]
  ]
  for (const [level, expected] of cases) {
    const res = await postModern(server, 'tools/call', { name: 'log' }, { meta: { [META.logLevel]: level } })
    isSse(t, res, { resumable: false })
    const list = sseMessages(res)
    t.same(notifications(list, 'notifications/message').map(m => m.params?.level), expected, `logLevel ${level}`)
    t.equal(final(list)?.id, 1)
  }
  const emergency = await postModern(server, 'tools/call', { name: 'log' }, { meta: { [META.logLevel]: 'emergency' } })
  isJson(t, emergency)
  t.equal(messages(emergency).length, 1, 'nothing passes "emergency"')
})

t.test('modern: an invalid logLevel is 400 -32602', async t => {
  const server = await app(t)
  for (const level of ['loud', 'INFO', 3, null]) {
    const res = await postModern(server, 'tools/call', { name: 'log' }, { id: 8, meta: { [META.logLevel]: level } })
    t.equal(res.statusCode, 400, `logLevel ${JSON.stringify(level)}`)
    t.equal(json(res).error?.code, -32602)
    t.equal(json(res).id, 8)
  }
})

t.test('a request without progress token or log emits no notification frames in sse mode', async t => {
  const server = await app(t, 'sse')
  const res = await post(server, {
    jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'progress' }
  }, { 'mcp-protocol-version': '2025-11-25' })
  isSse(t, res)
  t.equal(sseMessages(res).length, 1)
})
