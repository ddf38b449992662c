/**
 * Resumable legacy streams (2025-11-25) across nodes sharing a real `redis-server` and one `secret`: a
 * stream running on node A is resumed by a `GET` + `Last-Event-ID` that lands on node B, which takes it
 * from A over node messages (A replays what was missed, then relays the rest live). The SDK 1.x client,
 * cut off from A mid-call, resumes on B by itself and gets every progress once, then the result, with
 * nothing cancelled anywhere; a resumed stream on B that drops pauses A's stream again, and a further
 * resume (on A or on B) loses and repeats nothing; a relayed stream outlives the relay lease; refusals
 * come back from A with A's status (409 connected, 404 delivered or cancelled), a node that is gone or
 * does not answer is a 503 with Retry-After within the answer timeout, garbage is a 400, and nothing is
 * streamed for any of them. The time from a resume sent to B until its first replayed event is
 * measured and reported. Without Redis, a resume on the wrong node is a 404 naming the node holding it.
 *
 * The Redis is standalone, a Cluster or Sentinel-managed, as MCP_TEST_REDIS says (test/helpers/redis-topology.ts).
 *
 * Without redis-server the Redis tests are skipped, except under CI where that is a failure.
 */
import http from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import type { McpCancellationOptions } from '../../lib/index.js'
import { RELAY_LEASE_MS } from '../../lib/transport/stream-relay.js'
import { startNode, type Node } from '../helpers/cluster.js'
import { EventStream } from '../helpers/event-stream.js'
import { legacyCall, rawPost, type RawCall } from '../helpers/http.js'
import { SESSION_SECRET } from '../helpers/identity.js'
import { cancelNotification, jsonRpcResponseViolation, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { portOf } from '../helpers/listen.js'
import { errorLines } from '../helpers/logs.js'
import { attempt, describeError, texts } from '../helpers/mcp-results.js'
import { metricSum, metricValue } from '../helpers/metrics.js'
import { startRedisTopology, topologySkipReason, type RedisTopology } from '../helpers/redis-topology.js'
import { callCutMidway, eventIds, messagesOf, range, recordingClient, resume, resumeHeaders, resumesOf, sseEvents, StreamTools } from '../helpers/resumable.js'
import { TcpProxy } from '../helpers/tcp-proxy.js'
import type { Teardown } from '../helpers/teardown.js'
import { waitFor, within } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

// Two SDK runs, a relayed stream held past the lease and about a hundred timed resumes: longer than tap's default.
t.setTimeout(240_000)

const skip = topologySkipReason(t)
/** The `secret` every node shares: an event id minted by one verifies on the others. */
const SECRET = 'resumability-multi-node-secret-0123456789abcdef'
const PREFIX = 'mcp:'
const WINDOW_MS = 3000
const RETRY_MS = 200
/** How long a resume may take to be answered when the node holding the stream does not answer (its 5 s timeout), plus a noisy machine. */
const UNANSWERED_MS = 5000 + 3000
/** Long enough for anything a test waits for on a machine shared with other test files. */
const PATIENCE_MS = 5000

interface StreamNode extends Node {
  tools: StreamTools
}

/** One node: the shared secret, resumable streams with a short window, uncoalesced progress, the stream tools. */
async function streamNode (t: Teardown, name: string, options: McpCancellationOptions = {}): Promise<StreamNode> {
  const tools = new StreamTools()
  const node = await startNode(t, name, {
    secret: SECRET, progressIntervalMs: 0, resumability: { windowMs: WINDOW_MS, retryMs: RETRY_MS }, ...options
  }, {}, app => { tools.register(app) })
  return { ...node, tools }
}

interface Cluster {
  redis: RedisTopology
  a: StreamNode
  b: StreamNode
  /** Starts one more node on the same Redis and waits until it listens for node messages. */
  another: (name: string) => Promise<StreamNode>
}

/** A Redis and nodes A and B on it, each listening for the stream messages addressed to it. */
async function cluster (t: Tap, options: McpCancellationOptions = {}): Promise<Cluster> {
  const redis = await startRedisTopology(t)
  const streamChannels = async (): Promise<string[]> => await redis.channels(`${PREFIX}resumable-stream:*`)
  const another = async (name: string): Promise<StreamNode> => {
    const known = new Set(await streamChannels())
    const node = await streamNode(t, name, { redis: redis.option(), ...options })
    const ready = await waitFor(async () => (await streamChannels()).some(channel => !known.has(channel)), PATIENCE_MS)
    if (!ready) t.fail(`${name} did not subscribe to its stream channel (${(await streamChannels()).join(', ')})`)
    return node
  }
  const a = await another('node-a')
  const b = await another('node-b')
  return { redis, a, b, another }
}

/** The node segment of an event id: the node holding its stream. */
function nodeOf (eventId: string): string {
  return eventId.split('.')[3] ?? ''
}

function mcpUrl (port: number): URL {
  return new URL(`http://127.0.0.1:${port}/mcp`)
}

/** Nothing in flight, nothing paused, no cancellation of any kind and no error logged on `node`. */
async function assertClean (t: Tap, node: StreamNode): Promise<void> {
  t.ok(await waitFor(() => node.app.mcpCancellation.inFlightRows === 0, PATIENCE_MS),
    `${node.name}: nothing left in flight (inFlightRows=${node.app.mcpCancellation.inFlightRows})`)
  t.ok(await waitFor(async () => (await metricValue(node.url, 'mcp_streams_paused') ?? 0) === 0, PATIENCE_MS),
    `${node.name}: no stream left paused (mcp_streams_paused=${await metricValue(node.url, 'mcp_streams_paused')})`)
  t.equal(await metricSum(node.url, 'mcp_cancellations_total'), 0, `${node.name}: no cancellation of any source`)
  t.same(errorLines(node), [], `${node.name}: no error logged`)
}

/** Resolves once `node` holds exactly `count` paused streams (polling its metrics), false after the patience. */
async function pausedOn (node: StreamNode, count: number): Promise<boolean> {
  return await waitFor(async () => (await metricValue(node.url, 'mcp_streams_paused') ?? 0) === count, PATIENCE_MS)
}

/** A running `gate` call tagged `tag` on `node`, its priming event and its progress sent: the call and those two ids. */
async function gateCall (t: Tap, node: StreamNode, tag: string, headers: Record<string, string> = {}): Promise<{ call: RawCall, priming: string, progress: string }> {
  const call = legacyCall(node.url, tag, 'gate', { tag }, { progressToken: tag, headers })
  t.teardown(() => { call.destroy() })
  if (!await call.waitForText('notifications/progress', PATIENCE_MS)) throw new Error(`${tag}: no progress event (${call.text()})`)
  const ids = eventIds(call.text())
  if (ids.length !== 2) throw new Error(`${tag}: expected the priming and the progress event ids, got ${JSON.stringify(call.text())}`)
  return { call, priming: ids[0]!, progress: ids[1]! }
}

/** A `gate` call on `node` whose client left after the progress: its stream is paused there. */
async function pausedGate (t: Tap, node: StreamNode, tag: string, headers: Record<string, string> = {}): Promise<{ priming: string, progress: string }> {
  const paused = await metricValue(node.url, 'mcp_streams_paused') ?? 0
  const { call, priming, progress } = await gateCall(t, node, tag, headers)
  call.destroy()
  if (!await pausedOn(node, paused + 1)) throw new Error(`${tag}: its stream did not pause on ${node.name}`)
  return { priming, progress }
}

interface Attempt {
  status: number | undefined
  contentType: string | undefined
  retryAfter: string | undefined
  body: JsonRpcMessage | undefined
  text: string
  /** Milliseconds from the GET being sent until its answer was over (or its head, for a stream). */
  ms: number
}

/**
 * A resume that should be refused: its status, content type and JSON body. One that streams instead is
 * closed as soon as its head arrives (what it took goes back to waiting), so a wrong answer fails the
 * assertions rather than hanging the test.
 */
async function attemptResume (t: Teardown, url: URL, headers: Record<string, string>): Promise<Attempt> {
  const sentAt = performance.now()
  const stream = EventStream.get(url, headers)
  t.teardown(() => { stream.close() })
  const head = await within(stream.head, UNANSWERED_MS + 2000, undefined)
  const contentType = head?.headers['content-type']
  const retryAfter = head?.headers['retry-after']
  if (contentType === undefined || contentType.startsWith('text/event-stream')) {
    stream.close()
    return { status: head?.status, contentType, retryAfter, body: undefined, text: stream.text(), ms: performance.now() - sentAt }
  }
  await within(stream.ended, 2000, undefined)
  const ms = performance.now() - sentAt
  let body: JsonRpcMessage | undefined
  try {
    body = JSON.parse(stream.text()) as JsonRpcMessage
  } catch {}
  return { status: head?.status, contentType, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined, body, text: stream.text(), ms }
}

/** `attempt` was refused with `status` and a JSON-RPC error of `code` (and a message matching `message`), nothing streamed. */
function assertRefused (t: Tap, attempt: Attempt, status: number, code: number | undefined, what: string, message?: RegExp): void {
  t.equal(attempt.status, status, `${what}: HTTP ${status} (got ${attempt.status}: ${attempt.text.slice(0, 200)})`)
  t.match(attempt.contentType, /^application\/json/, `${what}: a JSON body, not a stream`)
  t.notMatch(attempt.text, /^(retry|id|data):/m, `${what}: no SSE field written`)
  t.equal(jsonRpcResponseViolation(attempt.body), undefined, `${what}: a JSON-RPC response`)
  t.ok(attempt.body?.error !== undefined && typeof attempt.body.error.message === 'string', `${what}: an error with a message`)
  if (code !== undefined) t.equal(attempt.body?.error?.code, code, `${what}: code ${code}`)
  if (message !== undefined) t.match(attempt.body?.error?.message, message, `${what}: saying why`)
}

/** The methods (or, for a response, the ids) of the JSON-RPC messages of an SSE body, in order. */
function kinds (text: string): unknown[] {
  return messagesOf(sseEvents(text)).map(message => message.method ?? message.id)
}

t.test('1. the SDK client, cut off from node A mid-call, resumes on node B by itself: every progress once, then the result; nothing cancelled', { skip }, async t => {
  for (const sessions of [false, true]) {
    t.test(sessions ? 'with sessions (the session minted on A, presented on B)' : 'stateless', async t => {
      const { a, b } = await cluster(t, sessions ? { sessions: { secret: SESSION_SECRET } } : {})
      const proxyA = await TcpProxy.start(t, portOf(a.app))
      const { client, requests } = await recordingClient(t, mcpUrl(proxyA.port), 'resumability-multi-node', () => b.url)
      t.equal(client.getServerVersion()?.name, 'node-a', 'connected to node A through the proxy')

      const tag = `sdk-cut-${String(sessions)}`
      const { outcome, progress, seenAtCut } = await callCutMidway(client, tag, () => { proxyA.cut() }, { patienceMs: PATIENCE_MS })
      t.ok(seenAtCut >= 3, `progress streamed from A before the cut (${seenAtCut})`)
      t.notOk(outcome.error, `the call succeeds (${describeError(outcome.error)})`)
      t.same(texts(outcome.value?.content), ['steps 10'], 'with the tool\'s result')
      t.same(progress, range(1, 10), `every progress 1..10 exactly once, in order (cut after ${seenAtCut})`)
      t.ok(seenAtCut < 10, 'the cut came before the call was over')

      const resumes = resumesOf(requests)
      t.ok(resumes.length >= 1, `the client resumed with GET + Last-Event-ID (${resumes.length} time(s))`)
      t.ok(resumes.every(request => request.host === b.url.host), `every resume went to node B (${resumes.map(request => request.host).join(', ')})`)
      t.match(resumes.at(-1), { status: 200, contentType: /^text\/event-stream/ }, 'and B took it, as a stream')
      t.equal(nodeOf(resumes[0]?.lastEventId ?? ''), nodeOf(resumes.at(-1)?.lastEventId ?? ''), 'every resume names the same holding node')

      const run = a.tools.run(tag)
      t.ok(run?.endedAt !== undefined, 'the tool ran to its end on A')
      t.equal(run?.abortedAt, undefined, 'its signal never aborted')
      t.equal(b.tools.run(tag), undefined, 'and never ran on B')
      const resumed = await metricValue(b.url, 'mcp_stream_resumes_total', { outcome: 'resumed' })
      t.ok(resumed !== undefined && resumed >= 1, `B: mcp_stream_resumes_total{outcome="resumed"} counts it (${resumed})`)
      t.equal(await metricValue(b.url, 'mcp_stream_resumes_total', { outcome: 'refused' }) ?? 0, 0, 'B refused nothing')
      await assertClean(t, a)
      await assertClean(t, b)

      const after = await attempt(client.callTool({ name: 'probe', arguments: { ms: 0 } }, undefined, { timeout: 5000 }))
      t.same(texts(after.value?.content), ['probe 0'], `the client keeps working afterwards (${describeError(after.error)})`)
    })
  }
})

t.test('2. the resumed stream on B drops too: A\'s stream pauses again, and a further resume loses and repeats nothing', { skip }, async t => {
  t.test('the SDK client, cut off from A, then from B mid-stream', async t => {
    for (const second of ['B', 'A'] as const) {
      t.test(`its second resume lands on ${second}`, async t => {
        const { a, b } = await cluster(t)
        const proxyA = await TcpProxy.start(t, portOf(a.app))
        const proxyB = await TcpProxy.start(t, portOf(b.app))
        const { client, requests } = await recordingClient(t, mcpUrl(proxyA.port), 'resumability-multi-node',
          resumesBefore => resumesBefore === 0 || second === 'B' ? mcpUrl(proxyB.port) : a.url)

        const tag = `sdk-twice-${second}`
        const progress: number[] = []
        const call = attempt(client.callTool({ name: 'steps', arguments: { count: 30, everyMs: 100, tag } }, undefined, {
          onprogress: update => { progress.push(update.progress) }, timeout: 30_000
        }))
        t.ok(await waitFor(() => progress.length >= 3, PATIENCE_MS), 'progress streams from A')
        proxyA.cut()
        const seenAtFirstCut = progress.length
        // Two more progress events: at least one came on the resumed stream, so the client holds an id of it.
        t.ok(await waitFor(() => resumesOf(requests).some(request => request.status === 200) && progress.length >= seenAtFirstCut + 2, PATIENCE_MS),
          `the client resumed on B and progress flows there (${progress.length} after ${seenAtFirstCut})`)
        proxyB.cut()
        const seenAtSecondCut = progress.length
        const outcome = await call
        t.notOk(outcome.error, `the call succeeds (${describeError(outcome.error)})`)
        t.same(texts(outcome.value?.content), ['steps 30'], 'with the tool\'s result')
        t.same(progress, range(1, 30), `every progress 1..30 exactly once, in order (cuts after ${seenAtFirstCut} and ${seenAtSecondCut})`)
        t.ok(seenAtSecondCut < 30, 'the second cut came before the call was over')

        const resumes = resumesOf(requests)
        const taken = resumes.filter(request => request.status === 200)
        t.ok(taken.length >= 2, `two resumes were taken (${resumes.map(request => `${request.host} ${String(request.status)}`).join(', ')})`)
        t.equal(taken[0]?.host, mcpUrl(proxyB.port).host, 'the first on B')
        t.equal(taken.at(-1)?.host, (second === 'B' ? mcpUrl(proxyB.port) : a.url).host, `the last on ${second}`)
        t.not(taken[0]?.lastEventId, taken.at(-1)?.lastEventId, 'the second resumed after an event the first stream carried')
        t.match(taken.at(-1), { contentType: /^text\/event-stream/ })

        t.equal(a.tools.run(tag)?.abortedAt, undefined, 'the call on A was never cancelled')
        t.ok(a.tools.run(tag)?.endedAt !== undefined, 'and ran to its end')
        const resumedOn = async (node: StreamNode): Promise<number> => await metricValue(node.url, 'mcp_stream_resumes_total', { outcome: 'resumed' }) ?? 0
        t.equal(await resumedOn(b) + await resumedOn(a), taken.length, `each resume taken is counted where it landed (B ${await resumedOn(b)}, A ${await resumedOn(a)})`)
        await assertClean(t, a)
        await assertClean(t, b)
      })
    }
  })

  t.test('on the wire: cut on B after the replay, paused again on A, resumed again', async t => {
    const { a, b } = await cluster(t)
    const proxyB = await TcpProxy.start(t, portOf(b.app))
    const viaProxyB = mcpUrl(proxyB.port)

    for (const finalOn of ['B', 'A'] as const) {
      t.test(`the further resume on ${finalOn}`, async t => {
        const tag = `wire-twice-${finalOn}`
        const { priming, progress } = await pausedGate(t, a, tag)
        t.equal(nodeOf(priming), nodeOf(progress), 'the ids name node A')

        const first = resume(t, viaProxyB, resumeHeaders(priming))
        const head = await first.head
        t.equal(head?.status, 200, `B takes the resume (${head?.status === 200 ? 'ok' : first.text()})`)
        t.match(head?.headers['content-type'], /^text\/event-stream/)
        t.ok(await first.received('notifications/progress', 1, PATIENCE_MS), 'and replays the progress A holds')
        t.equal(sseEvents(first.text()).find(event => event.data !== '')?.id, progress, 'with the id it had on A')
        t.ok(await pausedOn(a, 0), 'while B\'s client reads it, the stream is not paused on A')

        proxyB.cut()
        t.same(await within(first.ended, PATIENCE_MS, undefined), { complete: false }, 'B\'s connection is cut')
        t.ok(await pausedOn(a, 1), 'A\'s stream pauses again')
        t.equal(a.tools.run(tag)?.abortedAt, undefined, 'the call runs on')

        const further = resume(t, finalOn === 'B' ? b.url : a.url, resumeHeaders(progress))
        t.equal((await further.head)?.status, 200, `${finalOn} takes the further resume, after the progress`)
        t.ok(await pausedOn(a, 0), 'the stream is read again')
        a.tools.release(tag)
        t.same(await within(further.ended, PATIENCE_MS, undefined), { complete: true }, 'the stream ends by itself after the response')
        t.same(kinds(further.text()), [tag], 'nothing replayed twice: only the response, once')
        t.same(texts(messagesOf(sseEvents(further.text())).at(-1)?.result?.content), [`released ${tag}`])
        t.equal(a.tools.run(tag)?.abortedAt, undefined, 'the call was never cancelled')

        for (const [name, node] of [['B', b], ['A', a]] as const) {
          assertRefused(t, await attemptResume(t, node.url, resumeHeaders(progress)), 404, -32600, `a resume on ${name} once delivered`, /delivered/)
        }
      })
    }

    t.test('afterwards', async t => {
      await assertClean(t, a)
      t.equal(await metricValue(b.url, 'mcp_stream_resumes_total', { outcome: 'resumed' }), 3, 'B counts its three resumes')
      t.equal(await metricValue(a.url, 'mcp_stream_resumes_total', { outcome: 'resumed' }), 1, 'A its own one')
    })
  })

  t.test('a stream B relays for longer than the relay lease stays B\'s: A does not let go of it', async t => {
    const { a, b } = await cluster(t)
    const tag = 'past-the-lease'
    const { priming } = await pausedGate(t, a, tag)
    const relayed = resume(t, b.url, resumeHeaders(priming))
    t.equal((await relayed.head)?.status, 200, 'B takes the resume')
    t.ok(await relayed.received('notifications/progress', 1, PATIENCE_MS), 'the progress is replayed')
    // The scenario is time passing: B's renewals are what keeps the stream B's. A checks the lease
    // every third of it, so without them it would have let go within 4/3 of the lease.
    const heldMs = Math.ceil(RELAY_LEASE_MS * 4 / 3) + 2000
    await sleep(heldMs)
    t.notOk(relayed.over, `B's client still reads the stream after ${heldMs} ms`)
    t.equal(await metricValue(a.url, 'mcp_streams_paused') ?? 0, 0, 'A has not paused it')
    assertRefused(t, await attemptResume(t, a.url, resumeHeaders(priming)), 409, undefined, 'a second reader on A', /connected/i)
    a.tools.release(tag)
    t.same(await within(relayed.ended, PATIENCE_MS, undefined), { complete: true }, 'the response reaches B\'s client, and the stream ends')
    t.same(kinds(relayed.text()), ['notifications/progress', tag], 'the progress, then the response, each once')
    await assertClean(t, a)
  })
})

t.test('the relaying node shuts down: its client\'s stream ends, and the stream pauses on the holding node for another resume', { skip }, async t => {
  const { a, another } = await cluster(t)
  const c = await another('node-c')
  const tag = 'relay-closed'
  const { progress } = await pausedGate(t, a, tag)
  const relayed = resume(t, c.url, resumeHeaders(progress))
  t.equal((await relayed.head)?.status, 200, 'node C relays it')
  t.ok(await pausedOn(a, 0), 'A no longer counts it paused')
  await c.app.close()
  t.same(await within(relayed.ended, PATIENCE_MS, undefined), { complete: true }, 'C ended its client\'s stream as it closed')
  t.ok(await pausedOn(a, 1), 'A\'s stream pauses again')
  const again = resume(t, a.url, resumeHeaders(progress))
  t.equal((await again.head)?.status, 200, 'and A takes the next resume')
  a.tools.release(tag)
  t.same(await within(again.ended, PATIENCE_MS, undefined), { complete: true }, 'which gets the response')
  t.same(kinds(again.text()), [tag], 'the response only, once')
  t.equal(a.tools.run(tag)?.abortedAt, undefined, 'the call was never cancelled')
})

t.test('nobody resumes, on any node: the call is cancelled as a disconnect after the window, and nothing is left in Redis', { skip }, async t => {
  const { redis, a, b } = await cluster(t)
  const keysBefore = await redis.scanKeys('*')
  const startedAt = Date.now()
  await pausedGate(t, a, 'left-for-good')
  const run = a.tools.run('left-for-good')
  t.ok(await waitFor(() => run?.abortedAt !== undefined, WINDOW_MS * 2 + PATIENCE_MS), 'the call was cancelled')
  t.equal(run?.source, 'disconnect', 'as a disconnect')
  t.ok((run?.abortedAt ?? 0) - startedAt >= WINDOW_MS, `not before the window (${(run?.abortedAt ?? 0) - startedAt} ms)`)
  t.equal(await metricValue(a.url, 'mcp_stream_resumes_total', { outcome: 'expired' }), 1, 'A counts the stream expired')
  t.ok(await waitFor(() => a.app.mcpCancellation.inFlightRows === 0, PATIENCE_MS), 'nothing in flight on A')
  t.equal(await metricValue(a.url, 'mcp_streams_paused'), 0, 'nothing paused on A')
  t.equal(await metricValue(b.url, 'mcp_streams_paused'), 0, 'nor on B')
  t.same(await redis.scanKeys('*'), keysBefore, 'the Redis keyspace is as it was before the call')
})

t.test('3. refusals across nodes come back with the holding node\'s status; nothing is streamed', { skip }, async t => {
  const { a, b, redis, another } = await cluster(t)
  let refusals = 0
  const refusedOnB = async (headers: Record<string, string>): Promise<Attempt> => {
    refusals++
    return await attemptResume(t, b.url, headers)
  }

  t.test('a stream still connected on A: 409, and A\'s connection is untouched', async t => {
    const connected = await gateCall(t, a, 'connected')
    const before = connected.call.text()
    assertRefused(t, await refusedOnB(resumeHeaders(connected.progress)), 409, undefined, 'a resume on B', /connected/i)
    t.notOk(await within(connected.call.done, 100, undefined), 'A\'s POST is still open')
    t.equal(connected.call.text().replace(/: keep-alive\n\n/g, ''), before, 'and nothing was replayed or added to it')
    a.tools.release('connected')
    t.ok((await within(connected.call.done, PATIENCE_MS, undefined))?.complete, 'the call ends for its own client')
    t.same(kinds(connected.call.text()), ['notifications/progress', 'connected'], 'with its result')
  })

  t.test('a stream read through B: a second reader is a 409 on B and on A', async t => {
    const { priming } = await pausedGate(t, a, 'relayed')
    const reader = resume(t, b.url, resumeHeaders(priming))
    t.equal((await reader.head)?.status, 200, 'B\'s client reads it')
    t.ok(await reader.received('notifications/progress', 1, PATIENCE_MS))
    assertRefused(t, await refusedOnB(resumeHeaders(priming)), 409, undefined, 'a second reader on B', /connected/i)
    assertRefused(t, await attemptResume(t, a.url, resumeHeaders(priming)), 409, undefined, 'a second reader on A', /connected/i)
    a.tools.release('relayed')
    t.same(await within(reader.ended, PATIENCE_MS, undefined), { complete: true }, 'the first reader still gets the result')
    t.same(kinds(reader.text()), ['notifications/progress', 'relayed'])
  })

  t.test('a stream A ended: 404, saying how', async t => {
    const done = legacyCall(a.url, 'done', 'steps', { count: 1, everyMs: 0, tag: 'done' }, { progressToken: 'd' })
    const end = await done.done
    t.ok(end.complete, 'the call was answered')
    const [, progress] = eventIds(end.text)
    assertRefused(t, await refusedOnB(resumeHeaders(progress ?? '')), 404, -32600, 'its response was delivered', /delivered/)

    const { progress: cancelledAt } = await pausedGate(t, a, 'cancelled')
    t.equal((await rawPost(a.url, cancelNotification('cancelled', 'no longer needed'))).status, 202, 'the client cancels it')
    t.ok(await waitFor(() => a.tools.run('cancelled')?.abortedAt !== undefined, PATIENCE_MS), 'the call is cancelled')
    assertRefused(t, await refusedOnB(resumeHeaders(cancelledAt)), 404, -32600, 'its request was cancelled', /cancelled/)
  })

  t.test('garbage: 400 on B, asking nobody', async t => {
    assertRefused(t, await refusedOnB(resumeHeaders('garbage')), 400, -32600, 'garbage')
    const { progress } = await pausedGate(t, a, 'altered')
    const altered = progress.slice(0, -1) + (progress.endsWith('A') ? 'B' : 'A')
    assertRefused(t, await refusedOnB(resumeHeaders(altered)), 400, -32600, 'an id of A with its MAC altered')
    t.equal(await metricValue(a.url, 'mcp_streams_paused'), 1, 'A\'s stream is still paused, waiting for its client')
    a.tools.release('altered')
  })

  t.test('a node that is gone: 503 -32000 with Retry-After, nothing written; a stream B relayed for it ends', async t => {
    const c = await another('node-c')
    const { priming, progress } = await pausedGate(t, c, 'gone')
    const relayed = resume(t, b.url, resumeHeaders(priming))
    t.equal((await relayed.head)?.status, 200, 'B relays a stream of node C')
    t.ok(await relayed.received('notifications/progress', 1, PATIENCE_MS))
    relayed.close()
    t.ok(await pausedOn(c, 1), 'B\'s client left: paused on C')

    const relayedAgain = resume(t, b.url, resumeHeaders(progress))
    t.equal((await relayedAgain.head)?.status, 200, 'B relays it again')
    t.ok(await pausedOn(c, 0))
    await c.app.close()
    t.ok(await within(relayedAgain.ended, PATIENCE_MS, undefined) !== undefined, 'once C is closed, the stream B relayed for it ends: its client is not left hanging')
    t.ok(await waitFor(async () => (await redis.channels(`${PREFIX}resumable-stream:${nodeOf(progress)}`)).length === 0, PATIENCE_MS),
      'C no longer listens')

    const attempt = await refusedOnB(resumeHeaders(progress))
    assertRefused(t, attempt, 503, -32000, 'a stream of a node that is gone')
    t.ok(attempt.retryAfter !== undefined && Number(attempt.retryAfter) >= 0, `with Retry-After (${attempt.retryAfter})`)
    t.ok(attempt.ms < UNANSWERED_MS, `answered within ${UNANSWERED_MS} ms (${Math.round(attempt.ms)} ms)`)
  })

  t.test('a node that listens but does not answer (a hung process): 503 -32000 within the answer timeout', async t => {
    const c = await another('node-d')
    const { progress } = await pausedGate(t, c, 'hung')
    await c.app.close()
    // Something subscribed on C's channel that never answers: the message is received, no answer comes.
    const heard: unknown[] = []
    await redis.listenNodeChannel(t, `${PREFIX}resumable-stream:${nodeOf(progress)}`, text => { heard.push(JSON.parse(text)) })

    const attempt = await refusedOnB(resumeHeaders(progress))
    assertRefused(t, attempt, 503, -32000, 'a stream of a node that does not answer')
    t.ok(attempt.retryAfter !== undefined, `with Retry-After (${attempt.retryAfter})`)
    t.ok(attempt.ms < UNANSWERED_MS, `answered within ${UNANSWERED_MS} ms, not left hanging (${Math.round(attempt.ms)} ms)`)
    t.match(heard[0], { type: 'resume' }, 'the resume did reach the silent subscriber')
  })

  t.test('afterwards', async t => {
    t.equal(await metricValue(b.url, 'mcp_stream_resumes_total', { outcome: 'refused' }), refusals,
      `B: mcp_stream_resumes_total{outcome="refused"} counts every refusal (${refusals})`)
    t.ok(await waitFor(() => a.app.mcpCancellation.inFlightRows === 0, PATIENCE_MS), 'nothing left in flight on A')
    t.ok(await pausedOn(a, 0), 'nothing left paused on A')
  })
})

interface TimedResume {
  status: number | undefined
  /** Milliseconds from the GET being sent until its first event with data arrived; undefined when none came. */
  ms: number | undefined
  text: string
}

/** A resume that is timed until its first event with data arrives, then left (the connection destroyed). */
async function timedResume (url: URL, headers: Record<string, string>, timeoutMs = PATIENCE_MS): Promise<TimedResume> {
  return await new Promise(resolve => {
    let text = ''
    let status: number | undefined
    let settled = false
    const sentAt = performance.now()
    const request = http.request(url, { method: 'GET', agent: false, headers })
    const finish = (ms: number | undefined): void => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      request.destroy()
      resolve({ status, ms, text })
    }
    const timer = setTimeout(() => { finish(undefined) }, timeoutMs)
    request.on('response', response => {
      status = response.statusCode
      response.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8')
        if (messagesOf(sseEvents(text)).length > 0) finish(performance.now() - sentAt)
      })
      response.on('end', () => { finish(undefined) })
      response.on('error', () => { finish(undefined) })
    })
    request.on('error', () => { finish(undefined) })
    request.end()
  })
}

function percentile (sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!
}

t.test('4. latency: from a resume sent to B until its first replayed event, over 50 resumes', { skip }, async t => {
  const { a, b } = await cluster(t)
  const RESUMES = 50
  const measure = async (on: StreamNode, tag: string): Promise<number[]> => {
    const { priming, progress } = await pausedGate(t, a, tag)
    const times: number[] = []
    const wrong: string[] = []
    for (let i = 0; i < RESUMES; i++) {
      const timed = await timedResume(on.url, resumeHeaders(priming))
      const events = sseEvents(timed.text).filter(event => event.data !== '')
      if (timed.status !== 200 || timed.ms === undefined || events[0]?.id !== progress) {
        wrong.push(`#${i}: HTTP ${String(timed.status)}, ${JSON.stringify(timed.text.slice(0, 200))}`)
      } else {
        times.push(timed.ms)
      }
      // The client left: the stream pauses on A again before the next resume takes it.
      if (!await pausedOn(a, 1)) {
        wrong.push(`#${i}: the stream did not pause on A again`)
        break
      }
    }
    t.same(wrong, [], `on ${on.name}: each resume is taken and replays the progress, with its id`)
    a.tools.release(tag)
    return times.sort((x, y) => x - y)
  }

  const relayed = await measure(b, 'latency-b')
  const local = await measure(a, 'latency-a')
  t.equal(relayed.length, RESUMES, `${RESUMES} resumes on B measured`)
  const figures = (times: number[]): string => `p50 ${percentile(times, 0.5).toFixed(1)} ms, p99 ${percentile(times, 0.99).toFixed(1)} ms, max ${times.at(-1)?.toFixed(1) ?? '-'} ms`
  t.comment(`resume on B (relayed from A over Redis), GET sent → first replayed event: ${figures(relayed)} (n=${relayed.length})`)
  t.comment(`resume on A itself (for comparison): ${figures(local)} (n=${local.length})`)
  t.ok(relayed.length > 0 && percentile(relayed, 0.99) < 500, `p99 of a resume on B under 500 ms (${relayed.length > 0 ? percentile(relayed, 0.99).toFixed(1) : '-'} ms)`)
  t.ok(await waitFor(() => a.app.mcpCancellation.inFlightRows === 0, PATIENCE_MS), 'both calls ended')
})

t.test('5. without Redis: a resume on the wrong node is a 404 that says another node holds the stream; nothing is written', async t => {
  const a = await streamNode(t, 'alone-a')
  const b = await streamNode(t, 'alone-b')
  const { priming, progress } = await pausedGate(t, a, 'no-redis')
  const attempt = await attemptResume(t, b.url, resumeHeaders(progress))
  assertRefused(t, attempt, 404, -32600, 'a resume on B of a stream A holds')
  // The node's name (its process id among it) is the operator's, not the client's to read.
  t.match(attempt.body?.error?.message, /another server node; without redis only that node can resume it/, 'the message says why')
  t.notOk(attempt.body?.error?.message.includes(nodeOf(progress)), 'without naming the node')
  t.equal(await metricValue(b.url, 'mcp_stream_resumes_total', { outcome: 'refused' }), 1, 'B counts the refusal')
  t.equal(a.tools.run('no-redis')?.abortedAt, undefined, 'the call on A runs on')
  t.equal(await metricValue(a.url, 'mcp_streams_paused'), 1, 'its stream still paused there')

  const rightful = resume(t, a.url, resumeHeaders(priming))
  t.equal((await rightful.head)?.status, 200, 'A itself takes the resume')
  a.tools.release('no-redis')
  t.same(await within(rightful.ended, PATIENCE_MS, undefined), { complete: true })
  t.same(kinds(rightful.text()), ['notifications/progress', 'no-redis'], 'the progress, then the result')
})
