/**
 * Resumable legacy streams (2025-11-25 `basic/transports`, resumability and SSE polling), on real
 * sockets: the official SDK 1.x client, talking through a TCP proxy that can cut every connection,
 * resumes a dropped response stream by itself (`GET` with `Last-Event-ID`) and gets every event once,
 * then the result, without the request being cancelled; a client that never comes back has its request
 * cancelled as a disconnect once the resume window has passed, not before; `ctx.closeStream()` hands
 * the rest of the answer to the resumed stream; older revisions get no event ids and are cancelled at
 * once; ids never repeat across a session's streams, and a JSON answer carries none.
 */
import t from 'tap'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import type { McpCancellationOptions } from '../../lib/index.js'
import { legacyCall, RawCall, rawPost } from '../helpers/http.js'
import { SESSION_SECRET } from '../helpers/identity.js'
import { DEFAULT_HEADERS, initializeBody, toolCall, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenPlugin, portOf, type Listening } from '../helpers/listen.js'
import { attempt, describeError, strictlyIncreasing, texts } from '../helpers/mcp-results.js'
import { metricSum, metricValue } from '../helpers/metrics.js'
import { callCutMidway, eventIds, messagesOf, range, recordingClient, resume, resumeHeaders, resumesOf, sseEvents, StreamTools } from '../helpers/resumable.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'
import type { Teardown } from '../helpers/teardown.js'
import { waitFor } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const WINDOW_MS = 3000
const RETRY_MS = 200
/** How late after its window a stream nobody resumed may be given up: the sweep runs ten times a window, plus a noisy machine. */
const GIVE_UP_SLACK_MS = WINDOW_MS / 10 + 1000
/** A call that should stream this long is still running when the test is done with it. */
const LONG_COUNT = 200

interface Server extends Listening {
  tools: StreamTools
}

/** The bare plugin with resumable streams (a short window), uncoalesced progress and the stream tools. */
async function resumableServer (t: Teardown, options: McpCancellationOptions = {}): Promise<Server> {
  const tools = new StreamTools()
  const server = await listenPlugin(t, { progressIntervalMs: 0, resumability: { windowMs: WINDOW_MS, retryMs: RETRY_MS }, ...options }, {},
    app => { tools.register(app) })
  return { ...server, tools }
}

async function assertNothingLeft (t: Tap, server: Server): Promise<void> {
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0, 3000),
    `nothing left in flight (inFlightRows=${server.app.mcpCancellation.inFlightRows})`)
  t.ok(await waitFor(async () => await metricValue(server.url, 'mcp_streams_paused') === 0, 3000), 'no stream left paused')
}

t.test('a connection cut mid-call: the SDK client resumes by itself, gets every progress once, then the result; nothing is cancelled', async t => {
  const server = await resumableServer(t)
  const proxy = await TcpProxy.start(t, portOf(server.app))
  const { client, requests } = await recordingClient(t, new URL(`http://127.0.0.1:${proxy.port}/mcp`), 'resumability-e2e')
  t.equal(client.getServerVersion()?.name, 'listening-plugin', 'connected through the proxy')

  const { outcome, progress, seenAtCut } = await callCutMidway(client, 'cut-once', () => { proxy.cut() })
  t.ok(seenAtCut >= 3, `progress streamed before the cut (${seenAtCut})`)
  t.notOk(outcome.error, `the call succeeds (${describeError(outcome.error)})`)
  t.same(texts(outcome.value?.content), ['steps 10'], 'with the tool\'s result')
  t.same(progress, range(1, 10), `every progress 1..10 exactly once, in order (cut after ${seenAtCut})`)
  t.ok(seenAtCut < 10, 'the cut came before the call was over')

  const resumes = resumesOf(requests)
  t.ok(resumes.length >= 1, `the client resumed with GET + Last-Event-ID (${resumes.length} time(s))`)
  t.match(resumes.at(-1), { status: 200, contentType: /^text\/event-stream/ }, 'and the server took the resume')

  const run = server.tools.run('cut-once')
  t.ok(run?.endedAt !== undefined, 'the tool ran to its end')
  t.equal(run?.abortedAt, undefined, 'its signal never aborted')
  t.equal(await metricSum(server.url, 'mcp_cancellations_total', { source: 'disconnect' }), 0, 'no cancellation by disconnect')
  const resumed = await metricValue(server.url, 'mcp_stream_resumes_total', { outcome: 'resumed' })
  t.ok(resumed !== undefined && resumed >= 1, `mcp_stream_resumes_total{outcome="resumed"} counts it (${resumed})`)
  await assertNothingLeft(t, server)

  const after = await attempt(client.callTool({ name: 'probe', arguments: { ms: 0 } }, undefined, { timeout: 5000 }))
  t.same(texts(after.value?.content), ['probe 0'], 'the client keeps working afterwards')
})

t.test('two cuts, the second on the resumed stream: still every progress once, then the result', async t => {
  const server = await resumableServer(t)
  const proxy = await TcpProxy.start(t, portOf(server.app))
  const { client, requests } = await recordingClient(t, new URL(`http://127.0.0.1:${proxy.port}/mcp`), 'resumability-e2e')

  const progress: number[] = []
  const call = attempt(client.callTool({ name: 'steps', arguments: { count: 20, everyMs: 100, tag: 'cut-twice' } }, undefined, {
    onprogress: update => { progress.push(update.progress) }, timeout: 20_000
  }))
  t.ok(await waitFor(() => progress.length >= 3, 5000), 'progress streams')
  proxy.cut()
  t.ok(await waitFor(() => resumesOf(requests).some(request => request.status === 200), 5000), 'the client resumed once')
  const resumedFrom = progress.length
  t.ok(await waitFor(() => progress.length >= resumedFrom + 2, 5000), `progress streams on the resumed stream (${progress.join(', ')})`)
  proxy.cut()
  const outcome = await call
  t.notOk(outcome.error, `the call succeeds (${describeError(outcome.error)})`)
  t.same(texts(outcome.value?.content), ['steps 20'])
  t.same(progress, range(1, 20), 'every progress 1..20 exactly once, in order')
  t.ok(resumesOf(requests).filter(request => request.status === 200).length >= 2, 'the client resumed twice')
  t.equal(server.tools.run('cut-twice')?.abortedAt, undefined, 'the tool\'s signal never aborted')
  t.equal(await metricSum(server.url, 'mcp_cancellations_total', { source: 'disconnect' }), 0, 'no cancellation by disconnect')
  await assertNothingLeft(t, server)
})

/** The abort of the run tagged `tag`, given up after the window: source disconnect, in [leftAt + window, leftAt + window + slack]. */
async function assertGivenUpAfterWindow (t: Tap, server: Server, tag: string, leftAt: number): Promise<void> {
  t.ok(await waitFor(async () => await metricValue(server.url, 'mcp_streams_paused') === 1, 2000), 'the stream is paused (mcp_streams_paused 1)')
  const run = server.tools.run(tag)
  t.ok(await waitFor(() => run?.abortedAt !== undefined, WINDOW_MS + GIVE_UP_SLACK_MS + 2000), 'the tool\'s signal aborts in the end')
  const after = run?.abortedAt === undefined ? Infinity : run.abortedAt - leftAt
  t.ok(after >= WINDOW_MS, `not before the window (${WINDOW_MS} ms) had passed (aborted ${after} ms after the client left)`)
  t.ok(after <= WINDOW_MS + GIVE_UP_SLACK_MS, `soon after it (within ${WINDOW_MS + GIVE_UP_SLACK_MS} ms; aborted after ${after} ms)`)
  t.equal(run?.source, 'disconnect', 'signal.reason.source is "disconnect"')
  t.ok(await waitFor(() => run?.endedAt !== undefined, 1000), 'the tool stopped')
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0, 2000),
    `inFlightRows returns to 0 (${server.app.mcpCancellation.inFlightRows})`)
  t.equal(await metricValue(server.url, 'mcp_stream_resumes_total', { outcome: 'expired' }), 1, 'mcp_stream_resumes_total{outcome="expired"} is 1')
  t.equal(await metricValue(server.url, 'mcp_stream_resumes_total', { outcome: 'resumed' }) ?? 0, 0, 'nothing was resumed')
  t.equal(await metricValue(server.url, 'mcp_streams_paused'), 0, 'no stream is paused any more')
  t.equal(await metricSum(server.url, 'mcp_cancellations_total', { source: 'disconnect' }), 1, 'one cancellation by disconnect')
}

t.test('a client that never comes back: its request is cancelled as a disconnect once the window has passed, not before', async t => {
  t.test('raw POST, its socket destroyed after the priming event and a progress', async t => {
    const server = await resumableServer(t)
    const call = legacyCall(server.url, 'gone-raw', 'steps', { count: LONG_COUNT, everyMs: 100, tag: 'gone-raw' }, { progressToken: 'g' })
    t.ok(await call.waitForText('notifications/progress', 5000), 'a progress event arrived')
    const [priming, first] = sseEvents(call.text())
    t.match(priming, { id: /^e1\./, retry: RETRY_MS, data: '' }, 'after the priming event (an id, retry, empty data)')
    t.match(first, { id: /^e1\./ }, 'the progress event has an id too')
    const leftAt = call.destroy()
    await assertGivenUpAfterWindow(t, server, 'gone-raw', leftAt)
    const late = resume(t, server.url, resumeHeaders(first?.id ?? ''))
    t.equal((await late.head)?.status, 404, 'a resume after the window is refused')
  })

  t.test('SDK client behind a proxy that goes away (its reconnects fail)', async t => {
    const server = await resumableServer(t)
    const proxy = await TcpProxy.start(t, portOf(server.app))
    const { client, requests } = await recordingClient(t, new URL(`http://127.0.0.1:${proxy.port}/mcp`), 'resumability-e2e')
    const progress: number[] = []
    const call = attempt(client.callTool({ name: 'steps', arguments: { count: LONG_COUNT, everyMs: 100, tag: 'gone-sdk' } }, undefined, {
      onprogress: update => { progress.push(update.progress) }, timeout: 30_000
    }))
    t.ok(await waitFor(() => progress.length >= 3, 5000), 'progress streams')
    const leftAt = Date.now()
    await proxy.close()
    await assertGivenUpAfterWindow(t, server, 'gone-sdk', leftAt)
    t.same(resumesOf(requests).filter(request => request.status !== undefined), [], 'no resume ever reached the server')
    await client.close()
    t.ok((await call).error !== undefined, 'the pending call rejects once the client closes')
  })
})

t.test('ctx.closeStream() (SSE polling): the connection ends after the priming event, the result comes on the resumed GET', async t => {
  const server = await resumableServer(t)

  t.test('the SDK client resumes by itself and gets the result', async t => {
    const { client, requests } = await recordingClient(t, server.url, 'resumability-e2e')
    const outcome = await attempt(client.callTool({ name: 'poll', arguments: { ms: 300, tag: 'poll-sdk' } }, undefined, { timeout: 10_000 }))
    t.notOk(outcome.error, `the call succeeds (${describeError(outcome.error)})`)
    t.same(texts(outcome.value?.content), ['polled 300'])
    const post = requests.find(request => request.method === 'POST' && request.contentType?.startsWith('text/event-stream') === true)
    t.ok(post !== undefined, 'the POST was answered with a stream')
    const resumes = resumesOf(requests)
    t.ok(resumes.length >= 1, `then the client resumed with GET + Last-Event-ID (${resumes.length})`)
    t.match(resumes.at(-1), { status: 200, contentType: /^text\/event-stream/ })
    t.equal(server.tools.run('poll-sdk')?.abortedAt, undefined, 'the tool\'s signal never aborted')
  })

  t.test('on the wire: the POST ends cleanly after the priming event; the GET replays what followed, then the result, then ends', async t => {
    const call = legacyCall(server.url, 'poll-raw', 'poll', { ms: 600, tag: 'poll-raw', progress: true }, { progressToken: 'p' })
    const end = await call.done
    t.ok(end.complete, 'the server ended the POST\'s response normally')
    t.match(end.headers?.['content-type'], /^text\/event-stream/)
    const events = sseEvents(end.text)
    t.equal(events.length, 1, `it carried one event (${JSON.stringify(end.text)})`)
    t.match(events[0], { id: /^e1\./, retry: RETRY_MS, data: '' }, 'the priming event')
    t.equal(server.tools.run('poll-raw')?.endedAt, undefined, 'while the tool still runs')

    const resumed = resume(t, server.url, resumeHeaders(events[0]?.id ?? ''))
    const head = await resumed.head
    t.equal(head?.status, 200)
    t.match(head?.headers['content-type'], /^text\/event-stream/)
    t.same((await resumed.ended).complete, true, 'the resumed stream ends by itself')
    const messages = messagesOf(sseEvents(resumed.text()))
    t.same(messages.map(message => message.method ?? message.id), ['notifications/progress', 'poll-raw'], 'the progress sent meanwhile, then the response')
    t.same(texts(messages.at(-1)?.result?.content), ['polled 600'])
    t.ok(sseEvents(resumed.text()).filter(event => event.data !== '').every(event => event.id?.startsWith('e1.') === true), 'each with an id')
    t.equal(server.tools.run('poll-raw')?.abortedAt, undefined, 'the tool\'s signal never aborted')
  })

  t.test('afterwards', async t => {
    t.equal(await metricSum(server.url, 'mcp_cancellations_total', { source: 'disconnect' }), 0, 'no cancellation by disconnect')
    await assertNothingLeft(t, server)
  })
})

t.test('while nobody reads a stream, what the request sends waits for the resume', async t => {
  t.test('a response produced while paused is replayed on the resume, after what the client missed, and the stream ends', async t => {
    const server = await resumableServer(t)
    const call = legacyCall(server.url, 'paused-answer', 'gate', { tag: 'paused-answer' }, { progressToken: 'pa' })
    t.ok(await call.waitForText('notifications/progress', 5000), 'the progress event arrived')
    const [priming, first] = eventIds(call.text())
    call.destroy()
    t.ok(await waitFor(async () => await metricValue(server.url, 'mcp_streams_paused') === 1, 3000), 'the stream is paused')
    server.tools.release('paused-answer')
    t.ok(await waitFor(() => server.tools.run('paused-answer')?.endedAt !== undefined, 3000), 'the tool answered while nobody read its stream')

    const resumed = resume(t, server.url, resumeHeaders(priming ?? ''))
    t.equal((await resumed.head)?.status, 200, 'the resume is taken')
    t.same(await resumed.ended, { complete: true }, 'and ends by itself once the response went out')
    const events = sseEvents(resumed.text()).filter(event => event.data !== '')
    t.same(messagesOf(events).map(message => message.method ?? message.id), ['notifications/progress', 'paused-answer'],
      'the progress after the priming event, then the response')
    t.equal(events[0]?.id, first, 'the replayed progress has the id it had the first time')
    t.same(texts(messagesOf(events).at(-1)?.result?.content), ['released paused-answer'])
    t.equal(server.tools.run('paused-answer')?.abortedAt, undefined, 'the call was never cancelled')
    await assertNothingLeft(t, server)
  })

  t.test('Accept: text/event-stream alone: even an answer without notifications is a primed stream', async t => {
    const server = await resumableServer(t)
    const call = legacyCall(server.url, 'sse-only', 'probe', { ms: 0 }, { headers: { accept: 'text/event-stream' } })
    const end = await call.done
    t.match(end.headers?.['content-type'], /^text\/event-stream/)
    const events = sseEvents(end.text)
    t.match(events[0], { id: /^e1\./, retry: RETRY_MS, data: '' }, 'it starts with the priming event')
    t.same(messagesOf(events).map(message => message.id), ['sse-only'], 'then the response')
    t.match(events[1], { id: /^e1\./ }, 'which has an id')
  })

  t.test('beyond maxBufferedEvents, superseded progress is given up (counted) and the rest replayed in order', async t => {
    const server = await resumableServer(t, { resumability: { windowMs: WINDOW_MS, retryMs: RETRY_MS, maxBufferedEvents: 3 } })
    const call = legacyCall(server.url, 'bounded', 'steps', { count: 10, everyMs: 60, tag: 'bounded' }, { progressToken: 'b' })
    t.ok(await call.waitForText('notifications/progress', 5000), 'the first progress event arrived')
    const [priming] = eventIds(call.text())
    call.destroy()
    t.ok(await waitFor(() => server.tools.run('bounded')?.endedAt !== undefined, 5000), 'the tool ran to its end while nobody read its stream')
    const resumed = resume(t, server.url, resumeHeaders(priming ?? ''))
    t.same(await resumed.ended, { complete: true }, 'the resume delivers and ends')
    const messages = messagesOf(sseEvents(resumed.text()))
    const progress = messages.filter(message => message.method === 'notifications/progress').map(message => message.params?.progress as number)
    t.equal(messages.length, 3, `three events kept (${messages.map(message => message.method ?? message.id).join(', ')})`)
    t.ok(strictlyIncreasing(progress), `progress in order (${progress.join(', ')})`)
    t.equal(progress.at(-1), 10, 'the latest progress is kept')
    t.equal(messages.at(-1)?.id, 'bounded', 'and the response, never given up')
    t.equal(await metricValue(server.url, 'mcp_stream_events_dropped_total'), 11 - 3,
      'mcp_stream_events_dropped_total counts what was given up (10 progress + the response, 3 kept)')
    t.equal(server.tools.run('bounded')?.abortedAt, undefined, 'the call was never cancelled')
  })
})

t.test('older revisions (2025-06-18, 2025-03-26): no event ids, and a disconnect cancels at once', async t => {
  // The default window (30 s): a cancellation that waited for it could not pass for an immediate one.
  const tools = new StreamTools()
  const server = { ...await listenPlugin(t, { progressIntervalMs: 0 }, {}, app => { tools.register(app) }), tools }

  // A 2025-03-26 client sends no MCP-Protocol-Version header at all.
  const revisions: Array<[string, Record<string, string>]> = [['2025-06-18', { 'mcp-protocol-version': '2025-06-18' }], ['2025-03-26', {}]]
  for (const [revision, versionHeader] of revisions) {
    t.test(revision, async t => {
      const call = new RawCall(server.url, toolCall(`old-${revision}`, 'probe', { ms: 10_000, tag: revision }, 'o'), { ...DEFAULT_HEADERS, ...versionHeader })
      t.ok(await call.waitForText('notifications/progress', 5000), 'a progress event arrived')
      t.match((await call.headers)?.headers['content-type'], /^text\/event-stream/, 'the answer is a stream')
      t.notMatch(call.text(), /^(id|retry):/m, `no id: or retry: line (${JSON.stringify(call.text())})`)
      const leftAt = call.destroy()
      const probe = server.probe.tagged(revision)[0]
      t.ok(await waitFor(() => probe?.abortedAt !== undefined, 3000), 'the probe\'s signal aborts')
      const lag = probe?.abortedAt === undefined ? Infinity : probe.abortedAt - leftAt
      t.ok(lag < 1000, `at once, not after a window (${lag} ms after the client left)`)
      t.equal(probe?.source, 'disconnect', 'signal.reason.source is "disconnect"')
    })
  }

  t.test('while a 2025-11-25 stream of the same server does carry ids', async t => {
    const call = legacyCall(server.url, 'new', 'probe', { ms: 0, tag: 'new' }, { progressToken: 'n' })
    const end = await call.done
    const ids = eventIds(end.text)
    t.equal(ids.length, 3, `priming, progress, response: each with an id (${ids.join(' ')})`)
  })

  t.test('afterwards', async t => {
    t.equal(await metricValue(server.url, 'mcp_stream_resumes_total', { outcome: 'expired' }) ?? 0, 0, 'no stream expired')
    t.equal(await metricValue(server.url, 'mcp_streams_paused') ?? 0, 0, 'no stream is paused')
    t.equal(await metricSum(server.url, 'mcp_cancellations_total', { source: 'disconnect' }), 2, 'two cancellations by disconnect')
    t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0, 2000), 'nothing in flight')
  })
})

t.test('event ids never repeat across the streams of one session, and a JSON answer has none', async t => {
  const server = await resumableServer(t, { sessions: { secret: SESSION_SECRET } })
  const { client, requests } = await recordingClient(t, server.url, 'resumability-e2e')

  const idsOf = async (tag: string): Promise<string[]> => {
    const ids: string[] = []
    const outcome = await attempt(client.callTool({ name: 'steps', arguments: { count: 3, everyMs: 20, tag } }, undefined, {
      onprogress: () => {}, onresumptiontoken: id => { ids.push(id) }, timeout: 10_000
    }))
    t.same(texts(outcome.value?.content), ['steps 3'], `${tag}: the call succeeds (${describeError(outcome.error)})`)
    return ids
  }
  const first = await idsOf('ids-1')
  const second = await idsOf('ids-2')
  t.equal(first.length, 5, `the first stream: priming, 3 progress, response, each with an id (${first.length})`)
  t.equal(second.length, 5, `the second likewise (${second.length})`)
  const all = [...first, ...second]
  t.equal(new Set(all).size, all.length, 'no id repeats, within a stream or across the two')
  t.ok(all.every(id => /^e1\.[A-Za-z0-9_-]+\.[0-9a-z]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(id)), `ids have the e1.<stream>.<position>.<node>.<mac> form (${first[0]})`)
  const streamOf = (id: string): string => id.split('.')[1]!
  t.equal(new Set(first.map(streamOf)).size, 1, 'one stream name within a stream')
  t.not(streamOf(first[0]!), streamOf(second[0]!), 'another for the next stream')

  const jsonIds: string[] = []
  const json = await attempt(client.callTool({ name: 'probe', arguments: { ms: 0 } }, undefined, { onresumptiontoken: id => { jsonIds.push(id) }, timeout: 10_000 }))
  t.same(texts(json.value?.content), ['probe 0'], 'a call without progress succeeds')
  t.match(requests.filter(request => request.method === 'POST').at(-1), { status: 200, contentType: /^application\/json/ }, 'as a JSON answer')
  t.same(jsonIds, [], 'which carries no event id')

  const session = await rawPost(server.url, initializeBody())
  const raw = await rawPost(server.url, toolCall('json', 'probe', { ms: 0 }), { 'mcp-session-id': session.headers.get('mcp-session-id') ?? '' })
  t.match(raw.headers.get('content-type'), /^application\/json/, 'on the wire: application/json')
  t.same(texts((JSON.parse(raw.text) as JsonRpcMessage).result?.content), ['probe 0'], 'the plain JSON-RPC response, no SSE fields')
})

t.test('a session\'s standalone GET stream resumes too: what the server announced while its client was away arrives once', async t => {
  const server = await resumableServer(t, { sessions: { secret: SESSION_SECRET } })
  const proxy = await TcpProxy.start(t, portOf(server.app))
  const { client, requests } = await recordingClient(t, new URL(`http://127.0.0.1:${proxy.port}/mcp`), 'resumability-e2e')
  const heard: number[] = []
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => { heard.push(performance.now()) })
  t.ok(await waitFor(() => requests.some(request => request.method === 'GET' && request.status === 200), 5000), 'the client opened its GET stream')
  t.ok(await waitFor(async () => await metricValue(server.url, 'mcp_listeners', { era: 'legacy' }) === 1, 5000), 'the server holds it')
  server.app.mcp.notify.toolsChanged()
  t.ok(await waitFor(() => heard.length === 1, 5000), 'a list change arrives on it')

  proxy.cut()
  t.ok(await waitFor(async () => await metricValue(server.url, 'mcp_streams_paused') === 1 || resumesOf(requests).length > 0, 5000),
    'the server sees the stream drop')
  // Two announced while the client is away (or reconnecting), past each other's coalescing window.
  const awayFrom = performance.now()
  server.app.mcp.notify.toolsChanged()
  await new Promise(resolve => setTimeout(resolve, 150))
  server.app.mcp.notify.toolsChanged()
  t.ok(await waitFor(() => heard.length === 3, 5000), `both arrive after the reconnection (${heard.length - 1} in all)`)
  await new Promise(resolve => setTimeout(resolve, 300))
  t.equal(heard.length, 3, 'each exactly once')
  t.ok(heard.slice(1).every(at => at > awayFrom), 'both after the cut')
  const resumes = resumesOf(requests)
  t.ok(resumes.length >= 1, `the client resumed its GET stream with Last-Event-ID (${resumes.length} time(s))`)
  t.match(resumes.at(-1), { status: 200, contentType: /^text\/event-stream/ }, 'and the server took the resume')
  t.equal(await metricValue(server.url, 'mcp_listeners', { era: 'legacy' }), 1, 'still one listener: the same stream, resumed')
  t.equal(await metricValue(server.url, 'mcp_streams_paused'), 0, 'and nothing paused')
})

t.test('resumability.pollIntervalMs: every long stream is a polling one; the SDK client holds no connection for long and loses nothing', async t => {
  const POLL_MS = 300
  const server = await resumableServer(t, { resumability: { windowMs: WINDOW_MS, retryMs: RETRY_MS, pollIntervalMs: POLL_MS } })
  const { client, requests } = await recordingClient(t, server.url, 'resumability-e2e')
  const progress: number[] = []
  const outcome = await attempt(client.callTool({ name: 'steps', arguments: { count: 15, everyMs: 100, tag: 'polled' } }, undefined, {
    onprogress: update => { progress.push(update.progress) }, timeout: 20_000
  }))
  t.notOk(outcome.error, `the call succeeds (${describeError(outcome.error)})`)
  t.same(texts(outcome.value?.content), ['steps 15'], 'with the tool\'s result')
  t.same(progress, range(1, 15), 'every progress 1..15 exactly once, in order')
  const resumes = resumesOf(requests)
  // 1.5 s of work, a connection closed every 300 ms: about four resumes; two at least on a slow machine.
  t.ok(resumes.length >= 2, `the server closed the connection and the client resumed it ${resumes.length} times`)
  t.ok(resumes.every(resume => resume.status === 200), 'each resume was taken')
  t.equal(server.tools.run('polled')?.abortedAt, undefined, 'the tool was never cancelled')
  await assertNothingLeft(t, server)
})

t.test('a streamed call its client cancels (notifications/cancelled) ends at once without a result, resumable or not', async t => {
  const server = await resumableServer(t)
  for (const version of ['2025-11-25', '2025-06-18']) {
    t.test(version, async t => {
      const tag = `cancelled-${version}`
      const call = legacyCall(server.url, tag, 'gate', { tag }, { progressToken: 'c', headers: { 'mcp-protocol-version': version } })
      t.ok(await call.waitForText('notifications/progress', 5000), 'the call streams')
      const cancel = await rawPost(server.url, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: tag, reason: 'stop' } }, { 'mcp-protocol-version': version })
      t.equal(cancel.status, 202, 'the cancel is accepted')
      const end = await call.done
      t.ok(end.complete, 'the stream ends cleanly')
      t.notMatch(end.text, /"result"/, 'without a result')
      t.ok(await waitFor(() => server.tools.run(tag)?.source === 'client', 3000), 'the tool was cancelled by its client')
      const ids = eventIds(end.text)
      if (version === '2025-06-18') {
        t.same(ids, [], 'no ids: nothing to resume')
        return
      }
      const late = await fetch(server.url, { headers: resumeHeaders(ids[0] ?? '') })
      t.equal(late.status, 404, 'a resume is a 404')
      t.match(await late.json(), { error: { code: -32600, message: /its request was cancelled/ } }, 'saying it was cancelled')
    })
  }
})
