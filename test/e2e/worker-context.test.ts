/**
 * A worker tool gets the handler context an in-process tool gets (one implementation): the request's
 * facts and principal, progress back to the client, and a cancellation that is the same
 * `RequestCancelledError` (reason and source) whether it is seen on `ctx.signal` or, in a loop that
 * never yields, through `ctx.throwIfCancelled()`.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { openPost, rawPost } from '../helpers/http.js'
import { cancelNotification, LEGACY, LEGACY_HEADERS, toolCall } from '../helpers/jsonrpc.js'
import { listenPlugin, type Listening } from '../helpers/listen.js'
import { waitFor, within } from '../helpers/wait.js'
import type { ContextReport } from '../workers/context-report.js'

const WORKER = new URL('../workers/context-report.ts', import.meta.url)

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

async function workerServer (t: Tap): Promise<Listening> {
  return await listenPlugin(t, { auth: { principal: request => request.headers['x-user'], required: false }, cancelTimeoutMs: 2000 }, {}, app => {
    for (const name of ['ping', 'awaitSignal', 'busyPoll']) app.mcp.tool({ name, worker: { filename: WORKER, name } })
  })
}

/** A first call loads the tool module in the pool's thread (loading it takes longer than the kill timeout on a busy machine). */
async function warmUp (t: Tap, server: Listening): Promise<void> {
  const response = await rawPost(server.url, toolCall('warm-up', 'ping', {}))
  t.match(response.text, /"text":"pong"/, 'the worker module is loaded')
}

/** The report the worker tool writes to `file`, once it is there (undefined after 3 s). */
async function reportIn (file: string): Promise<ContextReport | undefined> {
  return await waitFor(() => existsSync(file), 3000) ? JSON.parse(readFileSync(file, 'utf8')) as ContextReport : undefined
}

for (const tool of ['awaitSignal', 'busyPoll'] as const) {
  t.test(`${tool}: the worker sees the client's cancellation as the RequestCancelledError an in-process tool gets`, async t => {
    const server = await workerServer(t)
    await warmUp(t, server)
    const file = join(t.testdir(), 'report.json')
    const call = rawPost(server.url, toolCall(`${tool}-1`, tool, { file }), { 'x-user': 'alice' })
    t.ok(await waitFor(() => server.app.mcpCancellation.inFlight(`${tool}-1`, 'principal:alice')), 'the worker tool is in flight')
    const started = tool === 'awaitSignal' ? 'waiting' : 'running'
    t.ok(await waitFor(() => existsSync(`${file}.${started}`), 3000), `and is ${started}`)
    const cancel = await rawPost(server.url, cancelNotification(`${tool}-1`, 'user pressed stop'), { 'x-user': 'alice' })
    t.equal(cancel.status, 202)
    t.same(await reportIn(file), {
      how: tool === 'awaitSignal' ? 'signal' : 'throwIfCancelled',
      requestId: `${tool}-1`,
      principal: 'alice',
      era: 'legacy',
      isRequestCancelledError: true,
      name: 'AbortError',
      reason: 'user pressed stop',
      source: 'client',
      cancelledBefore: true
    }, 'the same error type, reason and source, and ctx.cancelled() agrees')
    const response = await within(call, 3000, undefined)
    t.equal(response?.status, 202, 'the cancelled call ends without a result')
  })
}

t.test('a disconnect reaches a worker tool with source "disconnect"', async t => {
  const server = await workerServer(t)
  await warmUp(t, server)
  const file = join(t.testdir(), 'report.json')
  const call = openPost(server.url, toolCall('gone-1', 'awaitSignal', { file }))
  t.ok(await waitFor(() => existsSync(`${file}.waiting`), 3000), 'the worker tool waits on its signal')
  call.destroy()
  t.match(await reportIn(file), { isRequestCancelledError: true, reason: 'client disconnected', source: 'disconnect', principal: null })
})

t.test('a worker tool\'s ctx.closeStream() closes its resumable stream (2025-11-25); the result comes on the resumed GET', async t => {
  const server = await listenPlugin(t, {}, {}, app => {
    for (const name of ['ping', 'closesStream']) app.mcp.tool({ name, worker: { filename: WORKER, name } })
  })
  await warmUp(t, server)
  const post = await fetch(server.url, { method: 'POST', headers: LEGACY_HEADERS, body: JSON.stringify(toolCall('polled', 'closesStream', {})) })
  t.match(post.headers.get('content-type'), /^text\/event-stream/, 'the POST answers a stream')
  const body = await post.text()
  const primingId = /^id: (\S+)$/m.exec(body)?.[1]
  t.ok(primingId !== undefined, 'its priming event carries an id')
  t.notMatch(body, /"result"/, 'and it ended before the result')
  const resumed = await fetch(server.url, { headers: { ...LEGACY, accept: 'text/event-stream', 'last-event-id': primingId ?? '' } })
  t.equal(resumed.status, 200, 'the GET with its Last-Event-ID resumes it')
  t.match(await resumed.text(), /"id":"polled","result":\{"content":\[\{"type":"text","text":"answered after the stream closed"\}\]/, 'and carries the result')
})
