/**
 * Resuming a legacy stream (`GET` with `Last-Event-ID`, 2025-11-25 transports) is refused, before
 * anything is streamed and without touching the stream, whenever the id is not this client's to
 * present or the stream cannot be taken: a JSON-RPC error with a precise status (406 without
 * `Accept: text/event-stream`, 400 for an id that does not verify for the request's scope and session,
 * 409 while another connection reads the stream, 404 once it ended, saying how, or when another node
 * holds it), and the call goes on for its rightful client, who resumes it afterwards and gets its
 * result. Real sockets (a resume outlives `inject`), sessions on, principals from `x-user`.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import type { McpCancellationOptions } from '../../lib/index.js'
import { EventStream } from '../helpers/event-stream.js'
import { legacyCall, rawBody, rawExchange, rawPost, rawStatus, type RawCall } from '../helpers/http.js'
import { SESSION_SECRET } from '../helpers/identity.js'
import { cancelNotification, initializeBody, jsonRpcResponseViolation, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenPlugin, portOf } from '../helpers/listen.js'
import { texts } from '../helpers/mcp-results.js'
import { metricValue } from '../helpers/metrics.js'
import { eventIds, messagesOf, resume, resumeHeaders, sseEvents, StreamTools } from '../helpers/resumable.js'
import type { Teardown } from '../helpers/teardown.js'
import { waitFor, within } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

/** The `secret` every node of the deployment shares: event ids minted by one verify on the others. */
const SECRET = 'resume-refusals-deployment-secret-0123456789'
const ALICE = { 'x-user': 'alice' }
const BOB = { 'x-user': 'bob' }

interface Server {
  app: FastifyInstance
  url: URL
  tools: StreamTools
}

/** A node with sessions, principals from `x-user` (optional), resumable streams and the stream tools. */
async function node (t: Teardown, resumability: McpCancellationOptions['resumability'] = { windowMs: 20_000, retryMs: 1000 }): Promise<Server> {
  const tools = new StreamTools()
  const { app, url } = await listenPlugin(t, {
    secret: SECRET,
    sessions: { secret: SESSION_SECRET },
    auth: { principal: request => request.headers['x-user'], required: false },
    progressIntervalMs: 0,
    resumability
  }, {}, app => { tools.register(app) })
  return { app, url, tools }
}

/** A new session of `principal` (a raw initialize): its id. */
async function sessionOf (url: URL, principal: Record<string, string>): Promise<string> {
  const response = await rawPost(url, initializeBody(), principal)
  const id = response.headers.get('mcp-session-id')
  if (response.status !== 200 || id === null) throw new Error(`initialize gave no session: HTTP ${response.status} ${response.text}`)
  return id
}

/** A running `gate` call tagged `tag` whose stream has sent its priming event and its progress: the call and those two ids. */
async function gateCall (t: Tap, url: URL, tag: string, headers: Record<string, string>): Promise<{ call: RawCall, priming: string, progress: string }> {
  const call = legacyCall(url, tag, 'gate', { tag }, { progressToken: tag, headers })
  t.teardown(() => { call.destroy() })
  if (!await call.waitForText('notifications/progress', 5000)) throw new Error(`${tag}: no progress event (${call.text()})`)
  const ids = eventIds(call.text())
  if (ids.length !== 2) throw new Error(`${tag}: expected the priming and the progress event ids, got ${JSON.stringify(call.text())}`)
  return { call, priming: ids[0]!, progress: ids[1]! }
}

interface Attempt {
  status: number | undefined
  contentType: string | undefined
  body: JsonRpcMessage | undefined
  text: string
}

/**
 * A resume that should be refused: its status, content type and JSON body. One that streams instead is
 * closed as soon as its head arrives (whatever it took goes back to waiting), so a wrong answer fails
 * the assertions rather than hanging the test.
 */
async function attemptResume (t: Teardown, url: URL, headers: Record<string, string>): Promise<Attempt> {
  const stream = EventStream.get(url, headers)
  t.teardown(() => { stream.close() })
  const head = await stream.head
  const contentType = head?.headers['content-type']
  if (contentType === undefined || contentType.startsWith('text/event-stream')) {
    stream.close()
    return { status: head?.status, contentType, body: undefined, text: stream.text() }
  }
  await within(stream.ended, 2000, undefined)
  let body: JsonRpcMessage | undefined
  try {
    body = JSON.parse(stream.text()) as JsonRpcMessage
  } catch {}
  return { status: head?.status, contentType, body, text: stream.text() }
}

/** `attempt` was refused with `status` and a JSON-RPC error of `code` (and a message matching `message`), nothing streamed. */
function assertRefused (t: Tap, attempt: Attempt, status: number, code: number | undefined, what: string, message?: RegExp): void {
  t.equal(attempt.status, status, `${what}: HTTP ${status} (${attempt.text.slice(0, 200)})`)
  t.match(attempt.contentType, /^application\/json/, `${what}: a JSON body, not a stream`)
  t.equal(jsonRpcResponseViolation(attempt.body), undefined, `${what}: a JSON-RPC response`)
  t.ok(attempt.body?.error !== undefined && typeof attempt.body.error.message === 'string', `${what}: an error with a message`)
  if (code !== undefined) t.equal(attempt.body?.error?.code, code, `${what}: code ${code}`)
  if (message !== undefined) t.match(attempt.body?.error?.message, message, `${what}: saying why`)
}

/** The rightful client resumes after `lastEventId`, the gate is released, and the result arrives on the resumed stream, which then ends. */
async function assertResumedToTheEnd (t: Tap, server: Server, tag: string, lastEventId: string, headers: Record<string, string>): Promise<JsonRpcMessage[]> {
  const stream = resume(t, server.url, resumeHeaders(lastEventId, headers))
  const head = await stream.head
  t.equal(head?.status, 200, `${tag}: the rightful client resumes (${head?.status === 200 ? 'ok' : stream.text()})`)
  t.match(head?.headers['content-type'], /^text\/event-stream/, `${tag}: as a stream`)
  server.tools.release(tag)
  const end = await within(stream.ended, 5000, undefined)
  t.same(end, { complete: true }, `${tag}: the resumed stream ends by itself after the response`)
  const messages = messagesOf(sseEvents(stream.text()))
  const response = messages.at(-1)
  t.same({ id: response?.id, text: texts(response?.result?.content) }, { id: tag, text: [`released ${tag}`] }, `${tag}: the result comes last`)
  t.equal(server.tools.run(tag)?.abortedAt, undefined, `${tag}: the call was never cancelled`)
  return messages
}

t.test('refused resumes: nothing is streamed, and the call goes on for its rightful client', async t => {
  const server = await node(t)
  const s1 = await sessionOf(server.url, ALICE)
  const s2 = await sessionOf(server.url, ALICE)
  const inS1 = { ...ALICE, 'mcp-session-id': s1 }
  const inS2 = { ...ALICE, 'mcp-session-id': s2 }
  let refusals = 0
  const refused = async (headers: Record<string, string>): Promise<Attempt> => {
    refusals++
    return await attemptResume(t, server.url, headers)
  }

  // c1: the stream every refusal aims at; c2 another session's, c3 one without a session (alice's principal scope).
  const c1 = await gateCall(t, server.url, 'c1', inS1)
  const c2 = await gateCall(t, server.url, 'c2', inS2)
  const c3 = await gateCall(t, server.url, 'c3', ALICE)
  t.not(c1.progress, c2.progress, 'each stream has ids of its own')

  t.test('while the POST that started the stream is still connected: 409', async t => {
    const before = c1.call.text()
    assertRefused(t, await refused(resumeHeaders(c1.progress, inS1)), 409, undefined, 'a second reader', /connected/i)
    t.equal(server.tools.run('c1')?.abortedAt, undefined, 'the call goes on')
    t.notOk(await within(c1.call.done, 100, undefined), 'its POST is still open')
    t.equal(c1.call.text().replace(/: keep-alive\n\n/g, ''), before, 'and nothing was replayed or added to it')
  })

  t.test('the original connections drop: the streams pause', async t => {
    c1.call.destroy()
    c2.call.destroy()
    c3.call.destroy()
    t.ok(await waitFor(async () => await metricValue(server.url, 'mcp_streams_paused') === 3, 3000), 'three streams are paused')
  })

  t.test('no Accept: text/event-stream: 406', async t => {
    assertRefused(t, await refused({ ...resumeHeaders(c1.progress, inS1), accept: 'application/json' }), 406, -32600, 'Accept: application/json')
  })

  t.test('an id that does not verify for this client: 400 -32600', async t => {
    const flipped = c1.progress.slice(0, -1) + (c1.progress.endsWith('A') ? 'B' : 'A')
    const parts = c1.progress.split('.')
    const moved = [...parts.slice(0, 2), (parseInt(parts[2]!, 36) + 1).toString(36), ...parts.slice(3)].join('.')
    const cases: Array<[string, Record<string, string>]> = [
      ['garbage', resumeHeaders('garbage', inS1)],
      ['empty', resumeHeaders('', inS1)],
      ['10 KB', resumeHeaders(`e1.${'A'.repeat(10_240)}`, inS1)],
      ['its MAC altered', resumeHeaders(flipped, inS1)],
      ['its position altered', resumeHeaders(moved, inS1)],
      ['another session\'s id', resumeHeaders(c2.progress, inS1)],
      ['a valid id with another Mcp-Session-Id', resumeHeaders(c1.progress, inS2)],
      ['a session\'s id without its Mcp-Session-Id', resumeHeaders(c1.progress, ALICE)],
      ['a session\'s id, anonymous and without it', resumeHeaders(c1.progress)],
      ['another principal\'s id', resumeHeaders(c3.progress, BOB)],
      ['a principal\'s id, anonymous', resumeHeaders(c3.progress)],
      ['a principal\'s id with a session of the same principal', resumeHeaders(c3.progress, inS1)]
    ]
    for (const [what, headers] of cases) {
      assertRefused(t, await refused(headers), 400, -32600, what)
    }
  })

  t.test('alice\'s session presented by bob is refused as a session (it is bound to its principal)', async t => {
    const attempt = await refused(resumeHeaders(c1.progress, { ...BOB, 'mcp-session-id': s1 }))
    t.ok(attempt.status !== undefined && attempt.status >= 400 && attempt.status < 500, `a 4xx (${attempt.status})`)
    t.match(attempt.contentType, /^application\/json/, 'a JSON body, not a stream')
    t.equal(jsonRpcResponseViolation(attempt.body), undefined, 'a JSON-RPC response')
    t.ok(attempt.body?.error !== undefined, 'an error')
  })

  t.test('an id of another node of the deployment (it verifies, but this node does not hold the stream): 404', async t => {
    const other = await node(t)
    const elsewhere = await gateCall(t, other.url, 'c4', inS1)
    assertRefused(t, await refused(resumeHeaders(elsewhere.progress, inS1)), 404, -32600, 'another node\'s stream')
    t.equal(other.tools.run('c4')?.abortedAt, undefined, 'the call on the other node goes on')
    other.tools.release('c4')
    t.ok(await waitFor(() => other.tools.run('c4')?.endedAt !== undefined, 3000), 'and ends there')
  })

  t.test('a header value with a control character', async t => {
    // fetch and node:http refuse to send such a value; written raw, Node's HTTP parser rejects it and
    // Fastify answers 400 itself, before the plugin sees the request. It must still never be a stream.
    const raw = async (lastEventId: string): Promise<string> => {
      const headers = { host: server.url.host, ...resumeHeaders(lastEventId, inS1) }
      return await rawExchange(portOf(server.app), `GET /mcp HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`)
    }
    for (const [what, char] of [['\\x01', '\x01'], ['DEL', '\x7f']]) {
      const answer = await raw(`${c1.progress.slice(0, 10)}${char}${c1.progress.slice(10)}`)
      t.equal(rawStatus(answer), 400, `${what}: HTTP 400 (${answer.slice(0, 60).replace(/\r\n/g, ' | ')})`)
      t.notMatch(answer, /text\/event-stream|notifications\/progress/, `${what}: nothing streamed`)
    }
    // A tab is allowed in a header value: the plugin sees it, and the id does not verify.
    refusals++
    const tab = await raw(`${c1.progress.slice(0, 10)}\t${c1.progress.slice(10)}`)
    t.equal(rawStatus(tab), 400, 'a tab inside the id: HTTP 400')
    t.match(tab, /\r\ncontent-type: application\/json/i, 'a JSON body, not a stream')
    t.equal((JSON.parse(rawBody(tab)) as JsonRpcMessage).error?.code, -32600, 'a JSON-RPC error -32600')
  })

  t.test('none of it touched the calls', async t => {
    for (const tag of ['c1', 'c2', 'c3']) t.equal(server.tools.run(tag)?.abortedAt, undefined, `${tag} still runs`)
    t.equal(await metricValue(server.url, 'mcp_streams_paused'), 3, 'their streams are still paused, waiting for their clients')
    t.equal(await metricValue(server.url, 'mcp_stream_resumes_total', { outcome: 'refused' }), refusals,
      `mcp_stream_resumes_total{outcome="refused"} counts every refusal (${refusals})`)
    t.equal(await metricValue(server.url, 'mcp_stream_resumes_total', { outcome: 'resumed' }) ?? 0, 0, 'and nothing was resumed')
  })

  t.test('their rightful clients resume them and get their results', async t => {
    const replayed = await assertResumedToTheEnd(t, server, 'c1', c1.priming, inS1)
    t.same(replayed.map(message => message.method ?? message.id), ['notifications/progress', 'c1'],
      'c1, resumed after its priming event: the progress it had seen is replayed, then the result')
    const c2Messages = await assertResumedToTheEnd(t, server, 'c2', c2.progress, inS2)
    t.same(c2Messages.map(message => message.method ?? message.id), ['c2'], 'c2, resumed after its progress: only the result')
    await assertResumedToTheEnd(t, server, 'c3', c3.progress, ALICE)
    t.equal(await metricValue(server.url, 'mcp_stream_resumes_total', { outcome: 'resumed' }), 3, 'three resumes')
  })

  t.test('once the response was delivered: 404, saying so', async t => {
    assertRefused(t, await refused(resumeHeaders(c1.progress, inS1)), 404, -32600, 'c1 after its result', /delivered/)
    assertRefused(t, await refused(resumeHeaders(c1.priming, inS1)), 404, -32600, 'c1 from its priming event', /delivered/)
  })

  t.test('once the request was cancelled: 404, saying so', async t => {
    const connected = await gateCall(t, server.url, 'c5', inS1)
    const cancel = await rawPost(server.url, cancelNotification('c5', 'changed my mind'), inS1)
    t.equal(cancel.status, 202)
    t.ok(await waitFor(() => server.tools.run('c5')?.abortedAt !== undefined, 3000), 'c5 is cancelled')
    t.equal(server.tools.run('c5')?.source, 'client')
    t.ok((await within(connected.call.done, 3000, undefined))?.complete, 'its stream ended')
    assertRefused(t, await refused(resumeHeaders(connected.progress, inS1)), 404, -32600, 'c5, cancelled while connected', /cancelled/)

    const paused = await gateCall(t, server.url, 'c6', inS1)
    paused.call.destroy()
    t.ok(await waitFor(async () => await metricValue(server.url, 'mcp_streams_paused') === 1, 3000), 'c6 is paused')
    t.equal((await rawPost(server.url, cancelNotification('c6', 'gone anyway'), inS1)).status, 202)
    t.ok(await waitFor(() => server.tools.run('c6')?.abortedAt !== undefined, 3000), 'c6 is cancelled while nobody reads its stream')
    t.equal(server.tools.run('c6')?.source, 'client')
    t.ok(await waitFor(async () => await metricValue(server.url, 'mcp_streams_paused') === 0, 3000), 'its stream is no longer paused')
    assertRefused(t, await refused(resumeHeaders(paused.progress, inS1)), 404, -32600, 'c6, cancelled while paused', /cancelled/)
  })
})

t.test('once the resume window passed: the request is cancelled as a disconnect, and a resume is a 404 saying so', async t => {
  const windowMs = 1500
  const server = await node(t, { windowMs, retryMs: 500 })
  const session = await sessionOf(server.url, ALICE)
  const headers = { ...ALICE, 'mcp-session-id': session }
  const late = await gateCall(t, server.url, 'late', headers)
  late.call.destroy()
  t.ok(await waitFor(() => server.tools.run('late')?.abortedAt !== undefined, windowMs * 3 + 2000), 'the call is cancelled after the window')
  t.equal(server.tools.run('late')?.source, 'disconnect')
  t.equal(await metricValue(server.url, 'mcp_stream_resumes_total', { outcome: 'expired' }), 1, 'mcp_stream_resumes_total{outcome="expired"} 1')
  const attempt = await attemptResume(t, server.url, resumeHeaders(late.progress, headers))
  assertRefused(t, attempt, 404, -32600, 'a resume after the window', /window/)
  t.equal(await metricValue(server.url, 'mcp_stream_resumes_total', { outcome: 'resumed' }) ?? 0, 0, 'nothing was resumed')
})
