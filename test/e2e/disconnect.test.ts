/**
 * A client that goes away cancels its request (DESIGN §3, fastify-style §3.1): on a real socket, the
 * response's 'close' before it finished is the signal, and the handler's `ctx.signal` must abort right
 * then (within 50 ms of the server seeing the close) with source `disconnect`, and the handler must stop.
 * A response that completed normally, on a connection that stays open, must never count as one.
 */
import t from 'tap'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client'
import type { FastifyInstance } from 'fastify'
import { legacyCall, modernCall } from '../helpers/http.js'
import { DEFAULT_HEADERS, LEGACY_HEADERS, modernHeaders, modernMeta } from '../helpers/jsonrpc.js'
import { listenDemo, listenPlugin, type Listening } from '../helpers/listen.js'
import { attempt, describeError, texts } from '../helpers/mcp-results.js'
import { cancellationEvents, recordResponses, type ResponseRecord } from '../helpers/recorders.js'
import type { ProbeCall } from '../helpers/tools.js'
import { waitFor } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

/** The abort must follow the server's view of the close this closely. */
const ABORT_WITHIN_MS = 50
/** Tools run this long unless stopped; one that ended well before stopped. */
const LONG_MS = 5000

interface Server extends Listening {
  responses: Map<unknown, ResponseRecord>
}

/** The demo; `resumable: false` turns resumable legacy streams off (their drop then cancels at once, as an unprimed response's does). */
async function demo (t: Tap, { resumable = true } = {}): Promise<Server> {
  let responses = new Map<unknown, ResponseRecord>()
  const server = await listenDemo(t, resumable ? {} : { MCP_RESUMABLE: 'false' }, {}, app => { responses = recordResponses(app) })
  return { ...server, responses }
}

/**
 * The probe call `call` was cancelled by its client leaving: the server saw its response close
 * unfinished, `ctx.signal` aborted within 50 ms of that with source `disconnect`, and the probe stopped.
 */
async function assertDisconnectAbort (t: Tap, server: Server, call: ProbeCall | undefined, clientLeftAt: number): Promise<void> {
  t.ok(call, 'the probe ran')
  if (call === undefined) return
  t.ok(await waitFor(() => call.endedAt !== undefined, 2000), 'the probe ended')
  const close = server.responses.get(call.requestId)
  t.ok(close?.closedAt !== undefined, 'the server saw its response close')
  t.equal(close?.finished, false, 'before the response had finished')
  t.ok(close?.closedAt !== undefined && close.closedAt - clientLeftAt < 1000,
    `soon after the client left (${close?.closedAt === undefined ? 'never' : close.closedAt - clientLeftAt} ms)`)
  t.ok(call.abortedAt !== undefined, 'ctx.signal aborted')
  const lag = call.abortedAt === undefined || close?.closedAt === undefined ? Infinity : call.abortedAt - close.closedAt
  t.ok(lag >= 0 && lag <= ABORT_WITHIN_MS, `within ${ABORT_WITHIN_MS} ms of the response close (${lag} ms)`)
  t.equal(call.source, 'disconnect', 'signal.reason.source is "disconnect"')
  t.equal(call.reason, 'client disconnected')
  t.ok(call.endedAt !== undefined && call.abortedAt !== undefined && call.endedAt - call.abortedAt <= ABORT_WITHIN_MS,
    'the probe stopped as soon as its signal aborted')
  t.ok(call.endedAt !== undefined && call.endedAt - call.startedAt < LONG_MS / 2, `long before its ${LONG_MS} ms`)
}

/** Aborts 200 ms after the call started, and not before `ready` holds (the call is running); returns when. */
async function abortLater (controller: AbortController, ready: () => boolean): Promise<number> {
  await new Promise(resolve => setTimeout(resolve, 200))
  await waitFor(ready, 3000)
  controller.abort('user pressed stop')
  return Date.now()
}

async function assertDrained (t: Tap, app: FastifyInstance): Promise<void> {
  t.ok(await waitFor(() => app.mcpCancellation.inFlightRows === 0, 1000),
    `nothing left in flight (inFlightRows=${app.mcpCancellation.inFlightRows})`)
  t.ok(await waitFor(() => app.mcpCancellation.rows === 0, 500), `no cancellation row left (rows=${app.mcpCancellation.rows})`)
}

t.test('@modelcontextprotocol/client 2.x pinned to 2026-07-28: aborting a call cancels it by disconnect', async t => {
  const server = await demo(t)
  const events = cancellationEvents(t)
  const client = new ModernClient({ name: 'disconnect-modern', version: '2.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
  t.teardown(() => client.close())
  const connected = await attempt(client.connect(new ModernTransport(server.url)))
  t.notOk(connected.error, `connect succeeds (${describeError(connected.error)})`)
  t.equal(client.getNegotiatedProtocolVersion(), '2026-07-28')

  t.test('sleep streaming progress (SSE): the demo tool stops', async t => {
    const controller = new AbortController()
    const progress: number[] = []
    const startedAt = Date.now()
    const call = client.callTool({ name: 'sleep', arguments: { ms: LONG_MS } }, {
      signal: controller.signal, onprogress: update => { progress.push(update.progress) }
    })
    void abortLater(controller, () => progress.length >= 1)
    const outcome = await attempt(call)
    t.ok(outcome.error !== undefined, `the client call rejects (${describeError(outcome.error)})`)
    t.ok(progress.length >= 1, `progress streamed before the abort (${progress.length})`)
    t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0, 1000), 'the sleep tool stopped')
    t.ok(Date.now() - startedAt < 1000, `long before its ${LONG_MS} ms (${Date.now() - startedAt} ms)`)
    t.same(events.map(event => [event.source, event.reason]), [['disconnect', 'client disconnected']],
      'one cancellation, by disconnect (the modern client sends no notifications/cancelled)')
    await assertDrained(t, server.app)
  })

  t.test('probe (JSON response): ctx.signal aborts within 50 ms of the response close', async t => {
    const controller = new AbortController()
    const before = server.probe.calls.length
    const call = client.callTool({ name: 'probe', arguments: { ms: LONG_MS } }, { signal: controller.signal })
    const aborted = abortLater(controller, () => server.probe.calls.length > before)
    t.ok((await attempt(call)).error !== undefined, 'the client call rejects')
    await assertDisconnectAbort(t, server, server.probe.calls.at(-1), await aborted)
    await assertDrained(t, server.app)
  })

  t.test('probe streaming (SSE): ctx.signal aborts within 50 ms of the response close', async t => {
    const controller = new AbortController()
    const progress: number[] = []
    const call = client.callTool({ name: 'probe', arguments: { ms: LONG_MS } }, {
      signal: controller.signal, onprogress: update => { progress.push(update.progress) }
    })
    const aborted = abortLater(controller, () => progress.length >= 1)
    t.ok((await attempt(call)).error !== undefined, 'the client call rejects')
    t.same(progress, [0], 'the call was streaming (the probe\'s one progress arrived)')
    await assertDisconnectAbort(t, server, server.probe.calls.at(-1), await aborted)
    await assertDrained(t, server.app)
  })

  t.test('the client keeps working afterwards', async t => {
    const result = await attempt(client.callTool({ name: 'echo', arguments: { text: 'still here' } }))
    t.same(texts(result.value?.content), ['still here'])
  })
})

// With resumability on, a dropped 2025-11-25 stream pauses for its window instead (test/e2e/resumability.test.ts).
t.test('raw socket destroyed mid-SSE, after the first progress event (legacy era, resumability off)', async t => {
  const server = await demo(t, { resumable: false })
  const call = legacyCall(server.url, 'mid-sse', 'probe', { ms: LONG_MS }, { progressToken: 'tok' })
  t.ok(await call.waitForText('notifications/progress'), 'the first progress event arrived')
  t.match((await call.headers)?.headers['content-type'], /^text\/event-stream/, 'the response is an SSE stream')
  const leftAt = call.destroy()
  await assertDisconnectAbort(t, server, server.probe.calls[0], leftAt)
  await assertDrained(t, server.app)
})

t.test('raw socket destroyed mid-JSON, no progressToken, default responseMode (legacy era)', async t => {
  const server = await demo(t)
  const call = legacyCall(server.url, 'mid-json', 'probe', { ms: LONG_MS })
  t.ok(await waitFor(() => server.probe.calls.length === 1), 'the probe runs')
  t.equal(await Promise.race([call.headers, new Promise(resolve => setTimeout(() => { resolve('none') }, 50))]), 'none',
    'no response head was sent yet (a JSON answer waits for the result)')
  const leftAt = call.destroy()
  await assertDisconnectAbort(t, server, server.probe.calls[0], leftAt)
  await assertDrained(t, server.app)
})

t.test('raw socket destroyed mid-SSE and mid-JSON (modern era)', async t => {
  const server = await demo(t)
  const sse = modernCall(server.url, 'modern-sse', 'probe', { ms: LONG_MS, tag: 'sse' }, { progressToken: 'tok' })
  t.ok(await sse.waitForText('notifications/progress'), 'the first progress event arrived')
  await assertDisconnectAbort(t, server, server.probe.tagged('sse')[0], sse.destroy())

  const json = modernCall(server.url, 'modern-json', 'probe', { ms: LONG_MS, tag: 'json' })
  t.ok(await waitFor(() => server.probe.tagged('json').length === 1), 'the probe runs')
  await assertDisconnectAbort(t, server, server.probe.tagged('json')[0], json.destroy())
  await assertDrained(t, server.app)
})

t.test('SDK 1.x client.close() while a call runs cancels it by disconnect (legacy, default disconnectCancels, resumability off)', async t => {
  const server = await demo(t, { resumable: false })
  const events = cancellationEvents(t)
  for (const tag of ['json', 'sse']) {
    const client = new LegacyClient({ name: `disconnect-legacy-${tag}`, version: '1.0.0' })
    await client.connect(new LegacyTransport(server.url))
    const progress: number[] = []
    // With onprogress the call carries a progressToken, so the probe's first progress turns the answer into a stream.
    const options = tag === 'sse' ? { onprogress: (update: { progress: number }) => { progress.push(update.progress) } } : {}
    const call = attempt(client.callTool({ name: 'probe', arguments: { ms: LONG_MS, tag } }, undefined, options))
    t.ok(await waitFor(() => server.probe.tagged(tag).length === 1), `${tag}: the probe runs`)
    if (tag === 'sse') t.ok(await waitFor(() => progress.length === 1), 'sse: its progress event arrived')
    const closedAt = Date.now()
    await client.close()
    const outcome = await call
    t.ok(outcome.error !== undefined, `${tag}: the pending call rejects (${describeError(outcome.error)})`)
    await assertDisconnectAbort(t, server, server.probe.tagged(tag)[0], closedAt)
  }
  t.same(events.map(event => event.source), ['disconnect', 'disconnect'], 'no notifications/cancelled was involved')
  await assertDrained(t, server.app)
})

t.test('disconnectCancels: false keeps a legacy request running after its client left; a modern one is still cancelled', async t => {
  let responses = new Map<unknown, ResponseRecord>()
  const server: Server = { ...await listenPlugin(t, { disconnectCancels: false }, {}, app => { responses = recordResponses(app) }), responses }
  const events = cancellationEvents(t)

  const legacySse = legacyCall(server.url, 'legacy-sse', 'probe', { ms: 400, tag: 'legacy-sse' }, { progressToken: 'tok' })
  t.ok(await legacySse.waitForText('notifications/progress'), 'legacy SSE: the first progress event arrived')
  legacySse.destroy()
  const legacyJson = legacyCall(server.url, 'legacy-json', 'probe', { ms: 400, tag: 'legacy-json' })
  t.ok(await waitFor(() => server.probe.tagged('legacy-json').length === 1), 'legacy JSON: the probe runs')
  legacyJson.destroy()

  const modern = modernCall(server.url, 'modern-sse', 'probe', { ms: LONG_MS, tag: 'modern' }, { progressToken: 'tok' })
  t.ok(await modern.waitForText('notifications/progress'), 'modern SSE: the first progress event arrived')
  await assertDisconnectAbort(t, server, server.probe.tagged('modern')[0], modern.destroy())

  for (const tag of ['legacy-sse', 'legacy-json']) {
    const call = server.probe.tagged(tag)[0]
    t.ok(await waitFor(() => call?.endedAt !== undefined, 2000), `${tag}: the probe ended`)
    t.ok(server.responses.get(call?.requestId)?.finished === false, `${tag}: its response did close unfinished`)
    t.equal(call?.abortedAt, undefined, `${tag}: ctx.signal never aborted`)
    t.ok(call?.endedAt !== undefined && call.endedAt - call.startedAt >= 395, `${tag}: the probe ran its full 400 ms`)
  }
  t.same(events.map(event => event.requestId), ['modern-sse'], 'only the modern request was cancelled')
  await assertDrained(t, server.app)
})

t.test('completed responses never count as disconnects: 50 sequential calls over keep-alive', async t => {
  const server = await demo(t)
  const events = cancellationEvents(t)
  let connections = 0
  server.app.server.on('connection', () => { connections++ })

  const kinds = ['echo', 'probe-json', 'probe-sse', 'sleep-sse', 'modern-probe-json', 'modern-probe-sse']
  const failures: string[] = []
  for (let i = 0; i < 50; i++) {
    const kind = kinds[i % kinds.length]!
    const modern = kind.startsWith('modern')
    const name = kind === 'echo' ? 'echo' : kind === 'sleep-sse' ? 'sleep' : 'probe'
    const args = name === 'echo' ? { text: `echo ${i}` } : name === 'sleep' ? { ms: 20, stepMs: 5 } : { ms: 5, tag: 'keep-alive' }
    const meta: Record<string, unknown> = kind.endsWith('-sse') ? { progressToken: `tok-${i}` } : {}
    const body = {
      jsonrpc: '2.0',
      id: i,
      method: 'tools/call',
      params: { name, arguments: args, _meta: modern ? modernMeta(meta) : meta }
    }
    const headers = modern
      ? { ...DEFAULT_HEADERS, ...modernHeaders('tools/call', name) as Record<string, string> }
      : LEGACY_HEADERS
    const response = await fetch(server.url, { method: 'POST', headers, body: JSON.stringify(body) })
    const text = await response.text()
    const streamed = (response.headers.get('content-type') ?? '').startsWith('text/event-stream')
    const ok = response.status === 200 && text.includes('"result"') && !text.includes('"error"') && streamed === kind.endsWith('-sse')
    if (!ok) failures.push(`${i} ${kind}: ${response.status} ${text.slice(0, 200)}`)
  }
  t.same(failures, [], 'every call got its result, as JSON or as a stream as asked')
  t.ok(connections >= 1 && connections <= 2, `the calls shared a kept-alive connection (${connections} connections for 50 calls)`)

  // The kept-alive connection responses only now, long after every response finished.
  server.app.server.closeAllConnections()
  await new Promise(resolve => setTimeout(resolve, 50))
  const probes = server.probe.tagged('keep-alive')
  t.ok(probes.length >= 30, `the probe ran for its share of the calls (${probes.length})`)
  t.same(probes.filter(call => call.abortedAt !== undefined).map(call => call.requestId), [], 'no probe signal ever aborted')
  t.same(events, [], 'no cancellation event was published')
  t.equal(server.app.mcpCancellation.inFlightRows, 0, 'inFlightRows is 0')
  t.equal(server.app.mcpCancellation.rows, 0, 'no cancellation rows')
})
