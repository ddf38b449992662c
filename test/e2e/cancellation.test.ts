/**
 * Cancellation end to end (DESIGN §3–§4), on a real listening server: the official SDK 1.x client
 * aborts a call, its `notifications/cancelled` arrives on another POST, the running handler's
 * `ctx.signal` fires, the tool stops, the cancelled request gets no JSON-RPC result, and nothing is
 * left in the cancellation table. Both response shapes: SSE (a progressToken makes it stream) and JSON.
 */
import t from 'tap'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { FastifyInstance } from 'fastify'
import { openPost, rawPost } from '../helpers/http.js'
import { cancelNotification, hasResponse, LEGACY_HEADERS, sseMessages, toolCall, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenDemo, listenPlugin, type Listening } from '../helpers/listen.js'
import { attempt, describeError, texts, type Outcome } from '../helpers/mcp-results.js'
import { registerIgnoreCancel, type ProbeCall } from '../helpers/tools.js'
import { waitFor, within } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const SCOPE = 'ip:127.0.0.1'
const ABORT_AFTER_MS = 200
/** A 5 s tool that stopped within this long of being started stopped early. */
const EARLY_MS = 1500

interface WirePost {
  rpcMethod: string | undefined
  id: unknown
  params: Record<string, unknown> | undefined
  status: number
  contentType: string | null
  /** The whole response body, read from a clone (resolves when the response ends). */
  body: Promise<string>
}

/** A fetch for the SDK transport that records every POST and its answer. */
function recordingFetch (wire: WirePost[]): (url: string | URL, init?: RequestInit) => Promise<Response> {
  return async (url, init) => {
    const response = await fetch(url, init)
    if (init?.method === 'POST') {
      let message: { method?: string, id?: unknown, params?: Record<string, unknown> } = {}
      try { message = JSON.parse(String(init.body)) } catch {}
      wire.push({
        rpcMethod: message.method,
        id: message.id,
        params: message.params,
        status: response.status,
        contentType: response.headers.get('content-type'),
        body: response.clone().text().catch(() => '<body unreadable>')
      })
    }
    return response
  }
}

interface SdkSession {
  client: Client
  wire: WirePost[]
}

async function connect (t: Tap, server: Listening): Promise<SdkSession> {
  const wire: WirePost[] = []
  const client = new Client({ name: 'cancellation-e2e', version: '1.0.0' })
  const transport = new StreamableHTTPClientTransport(server.url, { fetch: recordingFetch(wire) })
  t.teardown(() => client.close())
  await client.connect(transport)
  return { client, wire }
}

/** Waits until nothing is in flight and no row is left; the time it took is how long the handler still ran. */
async function assertDrained (t: Tap, app: FastifyInstance, what: string): Promise<void> {
  t.ok(await waitFor(() => app.mcpCancellation.inFlightRows === 0, 2000), `${what}: nothing in flight afterwards`)
  t.ok(await waitFor(() => app.mcpCancellation.rows === 0, 500), `${what}: no cancellation row left (rows=${app.mcpCancellation.rows})`)
}

/**
 * The last recorded POST matching `predicate`, once its answer has arrived: the SDK rejects an aborted
 * call at once and sends its cancel fire-and-forget, so their HTTP answers may trail the rejection.
 */
async function posted (wire: readonly WirePost[], predicate: (post: WirePost) => boolean): Promise<WirePost | undefined> {
  await waitFor(() => wire.some(predicate), 2000)
  return wire.findLast(predicate)
}

async function toolCallPost (wire: readonly WirePost[], name: string): Promise<WirePost | undefined> {
  return await posted(wire, post => post.rpcMethod === 'tools/call' && post.params?.name === name)
}

async function cancelPost (wire: readonly WirePost[]): Promise<WirePost | undefined> {
  return await posted(wire, post => post.rpcMethod === 'notifications/cancelled')
}

/** Checks what the probe saw: aborted soon after `abortAt`, with `reason` and `source`, and then stopped. */
/**
 * Calls `name` for 5 s and aborts the call from the client, with `reason`, after ABORT_AFTER_MS; with
 * `progress`, the call asks for progress (it carries a progressToken, so the answer may stream).
 */
async function callAndAbort (client: Client, name: string, reason: string, options: { progress?: boolean } = {}):
Promise<{ outcome: Outcome<unknown>, abortAt: number, progress: number[] }> {
  const controller = new AbortController()
  const progress: number[] = []
  const call = client.callTool({ name, arguments: { ms: 5000 } }, undefined, {
    signal: controller.signal,
    ...(options.progress === true ? { onprogress: (update: { progress: number }) => { progress.push(update.progress) } } : {})
  })
  let abortAt = 0
  setTimeout(() => { abortAt = Date.now(); controller.abort(reason) }, ABORT_AFTER_MS)
  const outcome = await attempt(call)
  return { outcome, abortAt, progress }
}

function assertProbeAborted (t: Tap, call: ProbeCall | undefined, abortAt: number, reason: string | null, source: string): void {
  t.ok(call, 'the probe ran')
  if (call === undefined) return
  t.ok(call.abortedAt !== undefined, 'the server-side ctx.signal fired')
  t.ok(call.abortedAt !== undefined && call.abortedAt - abortAt < 1000,
    `and soon after the client aborted (${call.abortedAt === undefined ? 'never' : call.abortedAt - abortAt} ms)`)
  t.notOk(call.foreignReason, 'ctx.signal.reason is a RequestCancelledError')
  t.equal(call.reason, reason, 'ctx.signal.reason carries the client\'s reason')
  t.equal(call.source, source)
  t.ok(call.endedAt !== undefined && call.endedAt - call.startedAt < EARLY_MS, 'the probe stopped early')
}

t.test('SDK 1.x, SSE response: aborting the call stops the demo sleep tool', async t => {
  const server = await listenDemo(t)
  const { client, wire } = await connect(t, server)
  const startedAt = Date.now()
  const { outcome, progress } = await callAndAbort(client, 'sleep', 'user pressed stop', { progress: true })
  t.ok(outcome.error !== undefined, `the client call rejects (${describeError(outcome.error)})`)
  t.ok(progress.length >= 1, `the call was streaming progress before the abort (${progress.length} updates)`)

  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0, 3000), 'the sleep tool ended')
  const stoppedAfter = Date.now() - startedAt
  t.ok(stoppedAfter < EARLY_MS, `long before its 5000 ms (ended after ${stoppedAfter} ms)`)
  await assertDrained(t, server.app, 'sleep')

  const cancel = await cancelPost(wire)
  const callPost = await toolCallPost(wire, 'sleep')
  t.equal(cancel?.status, 202, 'the cancel POST is answered 202')
  t.equal(await cancel?.body, '', 'with an empty body')
  t.equal(cancel?.params?.requestId, callPost?.id, 'the SDK named the running request')
  t.equal(cancel?.params?.reason, 'user pressed stop')

  t.equal(callPost?.status, 200)
  t.match(callPost?.contentType, /^text\/event-stream/, 'the call was answered with an SSE stream')
  const body = await within(callPost?.body ?? Promise.resolve(''), 2000, '<stream did not end>')
  t.not(body, '<stream did not end>', 'the stream ended after the cancellation')
  const messages = body === '<stream did not end>' ? [] : sseMessages(body)
  t.ok(messages.length >= 1, 'it carried progress events')
  t.notOk(hasResponse(messages), 'but no JSON-RPC response: the cancelled request gets no result')
  t.same(messages.filter(m => m.method !== 'notifications/progress').map(m => m.method), [], 'only progress notifications')
})

t.test('SDK 1.x, SSE response: the handler\'s ctx.signal fires with the client\'s reason', async t => {
  const server = await listenDemo(t)
  const { client } = await connect(t, server)
  const { outcome, abortAt, progress } = await callAndAbort(client, 'probe', 'user pressed stop', { progress: true })
  t.ok(outcome.error !== undefined, 'the client call rejects')
  t.ok(await waitFor(() => server.probe.calls[0]?.endedAt !== undefined, 3000), 'the probe ended')
  assertProbeAborted(t, server.probe.calls[0], abortAt, 'user pressed stop', 'client')
  t.same(progress, [0], 'the stream carried the probe\'s one progress')
  await assertDrained(t, server.app, 'probe')
})

t.test('SDK 1.x, JSON response (no progressToken): aborting stops the tool, the call gets 202', async t => {
  const server = await listenDemo(t)
  const { client, wire } = await connect(t, server)

  const startedAt = Date.now()
  t.ok((await callAndAbort(client, 'sleep', 'user pressed stop')).outcome.error !== undefined, 'the client call rejects')
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0, 3000), 'the sleep tool ended')
  t.ok(Date.now() - startedAt < EARLY_MS, `long before its 5000 ms (after ${Date.now() - startedAt} ms)`)
  await assertDrained(t, server.app, 'sleep')

  const callPost = await toolCallPost(wire, 'sleep')
  t.equal(callPost?.status, 202, 'the cancelled JSON-mode call is answered 202')
  t.equal(await within(callPost?.body ?? Promise.resolve('<none>'), 2000, '<hang>'), '', 'with an empty body: no JSON-RPC result')
  t.equal((await cancelPost(wire))?.status, 202, 'the cancel POST is answered 202')

  const { abortAt } = await callAndAbort(client, 'probe', 'changed my mind')
  t.ok(await waitFor(() => server.probe.calls[0]?.endedAt !== undefined, 3000), 'the probe ended')
  assertProbeAborted(t, server.probe.calls[0], abortAt, 'changed my mind', 'client')
  t.equal((await toolCallPost(wire, 'probe'))?.status, 202)
  await assertDrained(t, server.app, 'probe')

  const after = await client.callTool({ name: 'echo', arguments: { text: 'still here' } })
  t.same(texts(after.content), ['still here'], 'the client keeps working after a cancellation')
})

t.test('responseMode "json": a call with a progressToken is still JSON, and cancellation still works', async t => {
  const server = await listenPlugin(t, { responseMode: 'json' })
  const { client, wire } = await connect(t, server)
  const { outcome, abortAt, progress } = await callAndAbort(client, 'probe', 'user pressed stop', { progress: true })
  t.ok(outcome.error !== undefined, 'the client call rejects')
  t.ok(await waitFor(() => server.probe.calls[0]?.endedAt !== undefined, 3000), 'the probe ended')
  assertProbeAborted(t, server.probe.calls[0], abortAt, 'user pressed stop', 'client')
  t.same(progress, [], 'no progress: the response never streams in json mode')
  const callPost = await toolCallPost(wire, 'probe')
  t.equal(callPost?.status, 202)
  t.equal(await within(callPost?.body ?? Promise.resolve('<none>'), 2000, '<hang>'), '')
  t.equal((await cancelPost(wire))?.status, 202)
  await assertDrained(t, server.app, 'probe')

  const startedAt = Date.now()
  await callAndAbort(client, 'sleep', 'stop', { progress: true })
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0, 3000), 'the sleep tool ended')
  t.ok(Date.now() - startedAt < EARLY_MS, 'early')
  t.equal((await toolCallPost(wire, 'sleep'))?.status, 202)
  await assertDrained(t, server.app, 'sleep')
})

t.test('raw HTTP, JSON mode: the cancelled call is answered 202 with an empty body', async t => {
  const server = await listenDemo(t)
  const startedAt = Date.now()
  const call = rawPost(server.url, toolCall('raw-json-1', 'sleep', { ms: 5000 }))
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlight('raw-json-1', SCOPE)), 'the call is in flight in the client\'s scope')
  const cancel = await rawPost(server.url, cancelNotification('raw-json-1', 'stop'))
  t.equal(cancel.status, 202, 'the cancel is accepted')
  t.equal(cancel.text, '')
  const response = await within(call, 2000, undefined)
  t.ok(response, 'the call is answered at once')
  t.equal(response?.status, 202, 'with 202')
  t.equal(response?.text, '', 'and no JSON-RPC result')
  t.ok(Date.now() - startedAt < EARLY_MS, `long before the sleep would have ended (${Date.now() - startedAt} ms)`)
  await assertDrained(t, server.app, 'sleep')
})

t.test('raw HTTP, SSE: the stream ends without a response event', async t => {
  const server = await listenDemo(t)
  const startedAt = Date.now()
  const response = await fetch(server.url, {
    method: 'POST', headers: LEGACY_HEADERS, body: JSON.stringify(toolCall(11, 'sleep', { ms: 5000 }, 'tok-11'))
  })
  t.equal(response.status, 200)
  t.match(response.headers.get('content-type'), /^text\/event-stream/, 'the call streams')
  const body = response.text()
  await new Promise(resolve => setTimeout(resolve, ABORT_AFTER_MS))
  const cancel = await rawPost(server.url, cancelNotification(11, 'stop'))
  t.equal(cancel.status, 202)
  const text = await within(body, 2000, '<stream did not end>')
  t.not(text, '<stream did not end>', 'the stream ends once cancelled')
  const messages: JsonRpcMessage[] = text === '<stream did not end>' ? [] : sseMessages(text)
  t.ok(messages.length >= 2, `progress events came first (${messages.length})`)
  t.ok(messages.every(m => m.method === 'notifications/progress' && m.params?.progressToken === 'tok-11'), 'all of them progress of this call')
  t.notOk(hasResponse(messages), 'no response event')
  t.ok(Date.now() - startedAt < EARLY_MS, 'early')
  await assertDrained(t, server.app, 'sleep')
})

t.test('keys are type-exact over HTTP: cancelling "7" leaves request 7 running', async t => {
  const server = await listenDemo(t)
  const call = rawPost(server.url, toolCall(7, 'sleep', { ms: 600 }))
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlight(7, SCOPE)))
  const cancel = await rawPost(server.url, cancelNotification('7', 'wrong type'))
  t.equal(cancel.status, 202, 'accepted (fire and forget)')
  t.equal(server.app.mcpCancellation.rows, 0, 'but nothing recorded')
  const response = await call
  t.equal(response.status, 200)
  const message = JSON.parse(response.text) as JsonRpcMessage
  t.equal(message.id, 7)
  t.same(texts(message.result?.content), ['slept 600'], 'request 7 ran to completion')

  const late = await rawPost(server.url, cancelNotification(7))
  t.equal(late.status, 202, 'a cancel of a finished request is accepted')
  t.equal(server.app.mcpCancellation.rows, 0, 'and ignored')
})

t.test('an invalid requestId is a 400 with -32602 and touches nothing', async t => {
  const server = await listenDemo(t)
  const call = rawPost(server.url, toolCall(1, 'probe', { ms: 800 }))
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlight(1, SCOPE)))
  for (const requestId of [1.5, 2 ** 53, true, { id: 1 }, [1], 'x'.repeat(257)]) {
    const response = await rawPost(server.url, cancelNotification(requestId))
    t.equal(response.status, 400, `${JSON.stringify(requestId).slice(0, 20)}: 400`)
    const body = JSON.parse(response.text) as JsonRpcMessage
    t.equal(body.error?.code, -32602)
    t.notOk('id' in body && body.id !== null, 'no id')
  }
  t.equal(server.app.mcpCancellation.rows, 0)
  const response = await call
  t.same(texts((JSON.parse(response.text) as JsonRpcMessage).result?.content), ['probe 800'], 'the running request was not cancelled')
  t.equal(server.probe.calls[0]?.abortedAt, undefined)
})

t.test('a full per-scope quota answers 429, -32000, Retry-After', async t => {
  // A tool that ignores cancellation keeps its row (and the quota) until it ends.
  const server = await listenPlugin(t, { maxRowsPerScope: 1 }, {}, registerIgnoreCancel)
  const calls = [1, 2].map(id => rawPost(server.url, toolCall(id, 'ignore-cancel', { ms: 700 })))
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 2))
  t.equal((await rawPost(server.url, cancelNotification(1))).status, 202)
  const refused = await rawPost(server.url, cancelNotification(2))
  t.equal(refused.status, 429)
  t.ok(Number(refused.headers.get('retry-after')) >= 1, 'Retry-After')
  const body = JSON.parse(refused.text) as JsonRpcMessage
  t.equal(body.error?.code, -32000)
  t.match(body.error?.message, /Too many outstanding cancellations/)
  const [first, second] = await Promise.all(calls)
  t.equal(first?.status, 202, 'the recorded cancel ended request 1 without a result')
  t.equal(second?.status, 200, 'request 2 was not cancelled')
  await assertDrained(t, server.app, 'stubborn')
})

// A resumable 2025-11-25 stream is cancelled so only once its resume window passed (test/e2e/resumability.test.ts).
t.test('a client that disconnects cancels its request (legacy, default disconnectCancels, resumability off)', async t => {
  const server = await listenDemo(t, { MCP_RESUMABLE: 'false' })
  for (const [tag, progressToken] of [['json', undefined], ['sse', 'tok']] as const) {
    const post = openPost(server.url, toolCall(`disconnect-${tag}`, 'probe', { ms: 5000, tag }, progressToken))
    t.ok(await waitFor(() => server.probe.tagged(tag).length === 1), `${tag}: the probe runs`)
    const abortAt = Date.now()
    post.destroy()
    t.ok(await waitFor(() => server.probe.tagged(tag)[0]?.endedAt !== undefined, 3000), `${tag}: the probe ended`)
    assertProbeAborted(t, server.probe.tagged(tag)[0], abortAt, 'client disconnected', 'disconnect')
    await assertDrained(t, server.app, tag)
  }
})
