/**
 * SSE hygiene and graceful shutdown (DESIGN §3–§4), on real sockets: keep-alive comments on open streams,
 * proxy-friendly headers, coalesced progress, not one byte after the final response or after a
 * cancellation, no compression of streams, and an `app.close()` that cancels what runs (connected
 * clients get -32800 "shutdown"), returns within the kill timeout and leaves nothing behind.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import compress from '@fastify/compress'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { buildApp as buildDemo } from '../../example/app.js'
import { legacyCall, NetCall, rawPost, type Chunk } from '../helpers/http.js'
import { cancelNotification, LEGACY_HEADERS, sseFrames, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenPlugin } from '../helpers/listen.js'
import { strictlyIncreasing } from '../helpers/mcp-results.js'
import { activeResources, failOnUnhandledRejection, resourceGrowth, resourcesSettle } from '../helpers/process.js'
import { recordResponses, type ResponseRecord } from '../helpers/recorders.js'
import { waitFor } from '../helpers/wait.js'

const KEEP_ALIVE_MS = 100

/** Registers `burst {}`: reports progress 1..200 in a tight loop (a short pause every 10), records how long it ran. */
function registerBurst (app: FastifyInstance, durations: number[]): void {
  app.mcp.tool({
    name: 'burst',
    description: 'Reports progress 1..200 as fast as it can',
    inputSchema: { type: 'object' },
    handler: async (_args, ctx) => {
      const startedAt = Date.now()
      for (let i = 1; i <= 200; i++) {
        await ctx.progress(i, 200)
        if (i % 10 === 0) await sleep(12)
      }
      durations.push(Date.now() - startedAt)
      return { content: [{ type: 'text', text: 'burst done' }] }
    }
  })
}

/** Registers `noisy {ms}`: ignores cancellation and keeps sending progress and log messages every 10 ms for `ms`. */
function registerNoisy (app: FastifyInstance, attempts: { afterCancel: number }): void {
  app.mcp.tool<{ ms: number }>({
    name: 'noisy',
    description: 'Sends progress and log messages every 10 ms, whatever happens',
    inputSchema: { type: 'object', properties: { ms: { type: 'integer' } }, required: ['ms'] },
    handler: async ({ ms }, ctx) => {
      const end = Date.now() + ms
      for (let i = 1; Date.now() < end; i++) {
        if (ctx.cancelled()) attempts.afterCancel++
        await ctx.progress(i)
        await ctx.notify('info', `tick ${i}`)
        await sleep(10)
      }
      return { content: [{ type: 'text', text: 'noisy done' }] }
    }
  })
}

/** The JSON-RPC messages of an SSE body (comment-only blocks skipped). */
function messagesOf (body: string): JsonRpcMessage[] {
  return sseFrames(body).filter(frame => frame.data !== '').map(frame => JSON.parse(frame.data) as JsonRpcMessage)
}

// First in the file, so that its baseline of active resources holds only the test runner's own.
t.test('graceful shutdown: app.close() cancels running requests, returns within cancelTimeoutMs, leaves nothing behind', async t => {
  failOnUnhandledRejection(t)
  const cancelTimeoutMs = 300
  const stubbornMs = 1000
  const resourcesBefore = activeResources()
  const listenersBefore = Object.fromEntries(process.eventNames().map(name => [String(name), process.listenerCount(name)]))

  const app = await buildDemo({ MCP_CANCEL_TIMEOUT_MS: String(cancelTimeoutMs) })
  let closed = false
  t.teardown(async () => { if (!closed) await app.close() })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const url = new URL(`http://127.0.0.1:${(app.server.address() as { port: number }).port}/mcp`)

  const sse = legacyCall(url, 'shutdown-sse', 'sleep', { ms: 5000 }, { progressToken: 's' })
  const json = legacyCall(url, 'shutdown-json', 'stubborn', { ms: stubbornMs })
  const stubbornStartedAt = Date.now()
  t.ok(await sse.waitForText('notifications/progress'), 'the SSE sleep is streaming')
  t.ok(await waitFor(() => app.mcpCancellation.inFlightRows === 2), 'both requests are in flight')

  const closeStartedAt = Date.now()
  await app.close()
  closed = true
  const closeTook = Date.now() - closeStartedAt
  t.ok(closeTook <= cancelTimeoutMs + 200, `app.close() resolves within cancelTimeoutMs + 200 ms (${closeTook} ms)`)

  const [sseEnd, jsonEnd] = await Promise.all([sse.done, json.done])
  t.ok(sseEnd.complete, 'the SSE stream was ended by the server')
  const last = sse.messages().at(-1)
  t.same({ id: last?.id, code: last?.error?.code, message: last?.error?.message, reason: last?.error?.data?.reason },
    { id: 'shutdown-sse', code: -32800, message: 'Request cancelled', reason: 'shutdown' }, 'the SSE client got -32800 with reason "shutdown"')
  t.ok(sse.messages().slice(0, -1).every(message => message.method === 'notifications/progress'), 'after its progress')
  t.equal(jsonEnd.status, 200)
  const jsonBody = jsonEnd.text === '' ? undefined : JSON.parse(jsonEnd.text) as JsonRpcMessage
  t.same({ id: jsonBody?.id, code: jsonBody?.error?.code, reason: jsonBody?.error?.data?.reason },
    { id: 'shutdown-json', code: -32800, reason: 'shutdown' }, 'the JSON client got -32800 with reason "shutdown" as its body')

  // stubborn's own timer (user code that ignores cancellation) runs out by itself; nothing of the plugin's may stay.
  await sleep(Math.max(0, stubbornStartedAt + stubbornMs + 20 - Date.now()))
  const left = await resourcesSettle(resourcesBefore, 1000)
  t.same(left, {}, `no handle or timer is left behind (before: ${JSON.stringify(resourcesBefore)}, now: ${JSON.stringify(activeResources())})`)
  const listenersAfter = Object.fromEntries(process.eventNames().map(name => [String(name), process.listenerCount(name)]))
  t.same(resourceGrowth(listenersBefore, listenersAfter), {}, `no process listener is left behind (${JSON.stringify(listenersAfter)})`)
})

t.test('an open SSE stream carries a keep-alive comment every keepAliveMs, and proxy-friendly headers', async t => {
  const server = await listenPlugin(t, { keepAliveMs: KEEP_ALIVE_MS })
  const call = legacyCall(server.url, 'ka', 'probe', { ms: 650 }, { progressToken: 'ka' })
  const head = await call.headers
  t.equal(head?.status, 200)
  t.match(head?.headers['content-type'], /^text\/event-stream/, 'the call streams (the probe sent a progress)')
  t.equal(head?.headers['x-accel-buffering'], 'no', 'X-Accel-Buffering: no')
  t.equal(head?.headers['cache-control'], 'no-cache', 'Cache-Control: no-cache')
  const end = await call.done
  t.ok(end.complete, 'the stream ended normally')

  const openedAt = call.chunks[0]?.at ?? 0
  const comments = call.chunks.flatMap(chunk => chunk.text.split('\n\n').filter(block => block === ': keep-alive').map(() => chunk.at))
  t.ok(comments.length >= 4 && comments.length <= 7, `about one ": keep-alive" comment per ${KEEP_ALIVE_MS} ms over ~650 ms (${comments.length})`)
  const gaps = comments.map((at, i) => at - (i === 0 ? openedAt : comments[i - 1]!))
  t.ok(gaps.every(gap => gap >= KEEP_ALIVE_MS * 0.5 && gap <= KEEP_ALIVE_MS * 2.5), `spaced about ${KEEP_ALIVE_MS} ms apart (${gaps.join(', ')} ms)`)
  t.ok(/(^|\n\n): keep-alive\n\n/.test(call.text()), 'each is a comment line followed by a blank line')
  const messages = call.messages()
  t.same(messages.map(message => message.method ?? ('result' in message ? 'result' : 'error')), ['notifications/progress', 'result'],
    'the comments do not disturb the events: one progress, then the result')
})

/**
 * Server-side times of the progress events written for one request, without the flush the dispatcher
 * makes right before the result (DESIGN: the latest value goes out before the response, whatever the interval).
 */
function progressWrites (record: ResponseRecord | undefined): Chunk[] {
  const writes = record?.writes ?? []
  const progress = writes.filter(write => write.text.includes('"notifications/progress"'))
  const result = writes.find(write => write.text.includes('"result"'))
  const last = progress.at(-1)
  if (last !== undefined && result !== undefined && result.at - last.at <= 10) progress.pop()
  return progress
}

function gapsOf (writes: readonly Chunk[]): number[] {
  return writes.slice(1).map((write, i) => write.at - writes[i]!.at)
}

t.test('progress reported 1..200 in a tight loop is coalesced to at most one event per progressIntervalMs', async t => {
  const durations: number[] = []
  let responses = new Map<unknown, ResponseRecord>()
  const server = await listenPlugin(t, { progressIntervalMs: 50, keepAliveMs: KEEP_ALIVE_MS }, {}, app => {
    registerBurst(app, durations)
    responses = recordResponses(app)
  })
  const body = { jsonrpc: '2.0', id: 'burst', method: 'tools/call', params: { name: 'burst', arguments: {}, _meta: { progressToken: 'b' } } }
  const call = new NetCall(server.url, body, LEGACY_HEADERS)
  t.teardown(() => { call.close() })
  t.ok(await call.waitForCompletion(3000), 'the response completes')
  const messages = messagesOf(call.body())
  const progress = messages.filter(message => message.method === 'notifications/progress').map(message => message.params?.progress as number)
  const duration = durations[0] ?? 0
  t.ok(strictlyIncreasing(progress), `strictly increasing values (${progress.join(', ')})`)
  t.ok(progress.length >= 2 && progress.length <= Math.floor(duration / 50) + 2,
    `far fewer than 200 events: ${progress.length} in the ${duration} ms the tool ran`)
  t.equal(progress.at(-1), 200, 'the last value before the result is 200')
  t.same(messages.at(-1)?.result?.content, [{ type: 'text', text: 'burst done' }], 'the result comes last')
  t.ok(messages.filter(message => message.method === 'notifications/progress').every(message => message.params?.total === 200), 'each carries total 200')
  const gaps = gapsOf(progressWrites(responses.get('burst')))
  t.ok(gaps.every(gap => gap >= 45), `the server wrote them at least progressIntervalMs apart (gaps ${gaps.join(', ')} ms)`)

  await sleep(KEEP_ALIVE_MS * 3)
  t.equal(call.bytesAfterCompletion(), 0, `not one byte after the final response (waited ${KEEP_ALIVE_MS * 3} ms on the open connection)`)
})

t.test('progressIntervalMs holds when the event loop stalls between reports', async t => {
  let responses = new Map<unknown, ResponseRecord>()
  const server = await listenPlugin(t, { progressIntervalMs: 50 }, {}, app => {
    responses = recordResponses(app)
    // Two reports, a 60 ms synchronous stall (the coalescing timer comes due but cannot run), two more reports.
    app.mcp.tool({
      name: 'stall',
      description: 'Reports progress around a blocked event loop',
      inputSchema: { type: 'object' },
      handler: async (_args, ctx) => {
        await ctx.progress(1)
        await ctx.progress(2)
        const until = Date.now() + 60
        while (Date.now() < until) { /* the event loop is blocked */ }
        await ctx.progress(3)
        await ctx.progress(4)
        await sleep(150)
        return { content: [{ type: 'text', text: 'stalled' }] }
      }
    })
  })
  const call = legacyCall(server.url, 'stall', 'stall', {}, { progressToken: 's' })
  await call.done
  const values = call.messages().filter(message => message.method === 'notifications/progress').map(message => message.params?.progress as number)
  t.equal(values.at(-1), 4, `the latest value is delivered (${values.join(', ')})`)
  const writes = progressWrites(responses.get('stall'))
  const gaps = gapsOf(writes)
  t.ok(gaps.every(gap => gap >= 45), `no two progress events less than progressIntervalMs apart (gaps ${gaps.join(', ')} ms)`)
})

t.test('not one byte after a cancellation, even from a handler that keeps reporting', async t => {
  const attempts = { afterCancel: 0 }
  const server = await listenPlugin(t, { keepAliveMs: KEEP_ALIVE_MS, cancelTimeoutMs: 2000 }, {}, app => { registerNoisy(app, attempts) })

  t.test('cancelled by notifications/cancelled: the stream ends without a response', async t => {
    const body = { jsonrpc: '2.0', id: 'noisy-1', method: 'tools/call', params: { name: 'noisy', arguments: { ms: 700 }, _meta: { progressToken: 'n' } } }
    const call = new NetCall(server.url, body, LEGACY_HEADERS)
    t.teardown(() => { call.close() })
    t.ok(await call.waitForText('notifications/progress'), 'the stream carries progress')
    await sleep(60)
    const cancel = await rawPost(server.url, cancelNotification('noisy-1', 'stop'))
    t.equal(cancel.status, 202)
    t.ok(await call.waitForCompletion(500), 'the stream ends at once')
    const messages = messagesOf(call.body())
    t.notOk(messages.some(message => 'result' in message || 'error' in message), 'without a JSON-RPC response')
    t.ok(messages.some(message => message.method === 'notifications/message'), 'log messages had been streamed before')
    await sleep(400)
    t.ok(attempts.afterCancel >= 10, `the handler kept reporting after the cancel (${attempts.afterCancel} attempts)`)
    t.equal(call.bytesAfterCompletion(), 0, 'but not one byte was written after the stream ended: no progress, log or keep-alive')
  })

  t.test('cancelled by the server (lifetime): -32800 is the last event, then nothing', async t => {
    const lifetime = await listenPlugin(t, { keepAliveMs: KEEP_ALIVE_MS, maxStreamLifetimeMs: 200, cancelTimeoutMs: 2000 }, {},
      app => { registerNoisy(app, attempts) })
    attempts.afterCancel = 0
    const body = { jsonrpc: '2.0', id: 'noisy-2', method: 'tools/call', params: { name: 'noisy', arguments: { ms: 700 }, _meta: { progressToken: 'n' } } }
    const call = new NetCall(lifetime.url, body, LEGACY_HEADERS)
    t.teardown(() => { call.close() })
    t.ok(await call.waitForCompletion(1000), 'the stream ends at the lifetime bound')
    const last = messagesOf(call.body()).at(-1)
    t.same({ id: last?.id, code: last?.error?.code }, { id: 'noisy-2', code: -32800 }, 'with -32800 as its last event')
    await sleep(400)
    t.ok(attempts.afterCancel >= 10, `the handler kept reporting after the cancel (${attempts.afterCancel} attempts)`)
    t.equal(call.bytesAfterCompletion(), 0, 'not one byte after it')
  })
})

t.test('@fastify/compress (global, threshold 0) does not compress an SSE response', async t => {
  const server = await listenPlugin(t, {}, {}, undefined, async app => {
    await app.register(compress, { global: true, threshold: 0 })
  })
  const json = legacyCall(server.url, 'echo-gzip', 'probe', { ms: 0 }, { headers: { 'accept-encoding': 'gzip' } })
  t.equal((await json.headers)?.headers['content-encoding'], 'gzip', 'the compression plugin is active: a JSON answer is gzipped')
  await json.done

  const sse = legacyCall(server.url, 'sse-gzip', 'probe', { ms: 300 }, { progressToken: 'g', headers: { 'accept-encoding': 'gzip' } })
  const head = await sse.headers
  t.match(head?.headers['content-type'], /^text\/event-stream/, 'the call streams')
  t.equal(head?.headers['content-encoding'], undefined, 'the SSE response has no Content-Encoding')
  t.ok(await sse.waitForText('notifications/progress', 250), 'its first event is readable while the tool still runs')
  const end = await sse.done
  t.same(sse.messages().map(message => message.method ?? 'response'), ['notifications/progress', 'response'], 'plain-text events throughout')
  t.ok(end.complete)
})
