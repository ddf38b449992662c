/**
 * The resumable streams of one node (lib/transport/resumable-streams.ts), with connections and
 * requests the test makes: what `find` answers for each state of a stream, the window that gives up a
 * paused stream (its request then cancelled as a disconnect), the bounds on paused streams per scope
 * and per node, server-side polling, and what a late resume is told.
 */
import type { IncomingMessage } from 'node:http'
import type { FastifyRequest } from 'fastify'
import t from 'tap'
import { deriveKey } from '../../lib/core/signed-token.js'
import { ProtocolError } from '../../lib/core/jsonrpc.js'
import { noopObserver, type RequestObserver, type StreamResumeOutcome } from '../../lib/observability/observer.js'
import { EventIds } from '../../lib/protocol/event-id.js'
import { ResumableStreams, type ResumableStreamsSettings } from '../../lib/transport/resumable-streams.js'
import { RecordingConnection } from '../helpers/resumable.js'
import type { Teardown } from '../helpers/teardown.js'
import { waitFor } from '../helpers/wait.js'

const IDS = new EventIds(deriveKey(Buffer.from('r'.repeat(32)), 'eventId/v1'), 'node-a')

interface Node {
  streams: ResumableStreams
  /** The requests whose disconnect counted (nobody resumed their stream in time). */
  givenUp: IncomingMessage[]
  outcomes: StreamResumeOutcome[]
  paused: () => number
}

function node (t: Teardown, settings: Partial<ResumableStreamsSettings> = {}): Node {
  const givenUp: IncomingMessage[] = []
  const outcomes: StreamResumeOutcome[] = []
  let paused = 0
  const observer: RequestObserver = {
    ...noopObserver,
    streamResumed: outcome => { outcomes.push(outcome) },
    streamsPaused: delta => { paused += delta }
  }
  const streams = new ResumableStreams({
    windowMs: 60_000, retryMs: 100, maxBufferedEvents: 16, maxBufferedBytes: 65_536, maxPausedPerScope: 16, maxPaused: 100, pollIntervalMs: 0, ...settings
  }, IDS, observer, request => { givenUp.push(request) })
  streams.startTimers()
  t.teardown(() => { streams.close() })
  return { streams, givenUp, outcomes, paused: () => paused }
}

let requests = 0

/** A legacy request of `scope` as the plugin has resolved it. */
function request (scope = 'ip:127.0.0.1', session: string | null = null): FastifyRequest {
  return { mcpScope: scope, mcpSessionId: session, raw: { n: ++requests } } as unknown as FastifyRequest
}

/** Where an id of `frame` points. */
function positionOf (frame: string, scope = 'ip:127.0.0.1'): NonNullable<ReturnType<EventIds['verify']>> {
  return IDS.verify(/^id: (\S+)$/m.exec(frame)![1]!, scope, undefined)!
}

function refusal (t: Tap, fn: () => unknown, status: number, message: RegExp, what: string): void {
  try {
    fn()
    t.fail(`${what}: not refused`)
  } catch (error) {
    t.ok(error instanceof ProtocolError, `${what}: a ProtocolError`)
    t.match({ status: (error as ProtocolError).httpStatus, message: (error as Error).message }, { status, message }, what)
  }
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

t.test('find: a connected stream is a 409, a paused one is found, a position it never reached is a 400', async t => {
  const { streams, paused } = node(t)
  const first = new RecordingConnection()
  const stream = streams.start(request(), first)
  t.match(first.frames[0], /^id: e1\.\S+\nretry: 100\ndata: \n\n$/, 'the priming event, with retry')
  stream.push('{"n":1}', { droppable: true })
  const at = positionOf(first.frames[1]!)
  refusal(t, () => streams.find(at, 'ip:127.0.0.1', undefined), 409, /still connected/, 'while connected')
  first.close()
  t.equal(paused(), 1, 'a closed connection pauses it (mcp_streams_paused)')
  t.equal(streams.find(at, 'ip:127.0.0.1', undefined), stream, 'found once paused')
  refusal(t, () => streams.find({ ...at, position: at.position + 1 }, 'ip:127.0.0.1', undefined), 400, /does not name a stream/, 'a position past its latest event')
  refusal(t, () => streams.find(at, 'ip:10.0.0.1', undefined), 404, /no such stream/, 'another scope')
  refusal(t, () => streams.find({ ...at, stream: IDS.newStream() }, 'ip:127.0.0.1', undefined), 404, /no such stream/, 'a stream this node never held')
  const second = new RecordingConnection()
  t.ok(streams.attach(stream, second, at.position - 1), 'a resume attaches')
  t.equal(paused(), 0, 'and it is no longer paused')
})

t.test('the window: a stream nobody resumed is given up, its request\'s disconnect counts; a late resume is told why', async t => {
  const { streams, givenUp, outcomes } = node(t, { windowMs: 100 })
  const running = request()
  const first = new RecordingConnection()
  const stream = streams.start(running, first)
  const at = positionOf(first.frames[0]!)
  first.close()
  t.ok(await waitFor(() => givenUp.length === 1, 2000), 'given up once its window passed')
  t.equal(givenUp[0], running.raw, 'the request whose disconnect now counts')
  t.same(outcomes, ['expired'], 'counted expired')
  t.ok(stream.ended, 'the stream ended')
  refusal(t, () => streams.find(at, 'ip:127.0.0.1', undefined), 404, /nobody resumed it within its resume window/, 'a resume after the window')

  const answered = new RecordingConnection()
  const done = streams.start(request(), answered)
  done.respond('{"result":{}}')
  answered.close(false)
  t.ok(await waitFor(() => done.ended, 2000), 'a stream whose response waited is given up too')
  t.equal(givenUp.length, 1, 'but its request had ended: nothing to cancel')
})

t.test('a stream that ended is remembered for one window, then forgotten', async t => {
  const { streams } = node(t, { windowMs: 100 })
  const first = new RecordingConnection()
  const stream = streams.start(request(), first)
  const at = positionOf(first.frames[0]!)
  stream.abandon()
  refusal(t, () => streams.find(at, 'ip:127.0.0.1', undefined), 404, /its request was cancelled/, 'cancelled')
  t.ok(await waitFor(() => {
    try {
      streams.find(at, 'ip:127.0.0.1', undefined)
    } catch (error) {
      return /no such stream/.test((error as Error).message)
    }
    return false
  }, 2000), 'after a window, only "no such stream"')
})

t.test('maxPausedPerScope: beyond it the scope\'s oldest paused stream is given up; another scope\'s are not', async t => {
  const { streams, givenUp, paused } = node(t, { maxPausedPerScope: 2 })
  const other = request('ip:10.0.0.2')
  const pause = (req: FastifyRequest): void => {
    const connection = new RecordingConnection()
    streams.start(req, connection)
    connection.close()
  }
  pause(other)
  const mine = [request(), request(), request()]
  for (const req of mine) pause(req)
  t.same(givenUp, [mine[0]!.raw], 'the third of a scope gives up its first')
  t.equal(paused(), 3, 'two of it paused, and the other scope\'s')
})

t.test('maxPaused: beyond it the node\'s oldest paused stream is given up, whatever its scope', async t => {
  const { streams, givenUp } = node(t, { maxPaused: 2 })
  const reqs = [request('ip:10.0.0.1'), request('ip:10.0.0.2'), request('ip:10.0.0.3')]
  for (const req of reqs) {
    const connection = new RecordingConnection()
    streams.start(req, connection)
    connection.close()
  }
  t.same(givenUp, [reqs[0]!.raw], 'the oldest of all')
})

t.test('pollIntervalMs: a connection older than it is ended, and the stream pauses for its client to resume', async t => {
  const { streams, paused } = node(t, { pollIntervalMs: 50 })
  const first = new RecordingConnection()
  const stream = streams.start(request(), first)
  t.ok(await waitFor(() => first.ended, 2000), 'the server ends the connection')
  first.close(true)
  t.equal(paused(), 1, 'the stream is paused, not over')
  t.ok(stream.live, 'its request may still write to it')
})

t.test('close: every stream ends (shutdown)', async t => {
  const { streams } = node(t)
  const connection = new RecordingConnection()
  const stream = streams.start(request(), connection)
  streams.close()
  t.ok(stream.ended, 'ended')
  t.ok(connection.ended, 'its connection too')
  t.equal(streams.size, 0, 'none is left')
})

t.test('at most 50 000 ended streams are remembered: the oldest is forgotten first', async t => {
  const { streams } = node(t)
  const ended = (): ReturnType<typeof positionOf> => {
    const connection = new RecordingConnection()
    streams.start(request(), connection).abandon()
    return positionOf(connection.frames[0]!)
  }
  const first = ended()
  const second = ended()
  for (let i = 2; i < 50_000; i++) ended()
  refusal(t, () => streams.find(first, 'ip:127.0.0.1', undefined), 404, /its request was cancelled/, 'at the bound, the first is remembered')
  ended()
  refusal(t, () => streams.find(first, 'ip:127.0.0.1', undefined), 404, /no such stream/, 'one more: the first is forgotten')
  refusal(t, () => streams.find(second, 'ip:127.0.0.1', undefined), 404, /its request was cancelled/, 'the second is still remembered')
})
