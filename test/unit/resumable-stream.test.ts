/**
 * One resumable stream on its own (lib/transport/resumable-stream.ts), with connections the test
 * drives: what a resume replays, what a full buffer gives up first (a superseded progress, then the
 * oldest progress or log; never a request to the client, never the response), and when a closed
 * connection pauses the stream or ends it.
 */
import type { IncomingMessage } from 'node:http'
import t from 'tap'
import { ResumableStream, type EventKind, type StreamBounds, type StreamEnd } from '../../lib/transport/resumable-stream.js'
import { RecordingConnection } from '../helpers/resumable.js'

interface Record {
  paused: number
  resumed: number
  ended: StreamEnd[]
  dropped: number
}

function stream (bounds: Partial<StreamBounds> = {}): { stream: ResumableStream, record: Record } {
  const record: Record = { paused: 0, resumed: 0, ended: [], dropped: 0 }
  const made = new ResumableStream({
    name: 'stream-1',
    scope: 'ip:127.0.0.1',
    session: undefined,
    request: {} as IncomingMessage,
    mint: position => `id-${position}`,
    bounds: { maxBufferedEvents: 100, maxBufferedBytes: 1_000_000, ...bounds },
    hooks: {
      paused: () => { record.paused++ },
      resumed: () => { record.resumed++ },
      ended: (_stream, end) => { record.ended.push(end) },
      dropped: count => { record.dropped += count }
    }
  })
  return { stream: made, record }
}

const progress = (token: string): EventKind => ({ droppable: true, supersededBy: token })
const LOG: EventKind = { droppable: true }
const KEPT: EventKind = { droppable: false }

t.test('a resume replays exactly the events after its cursor, with their ids, then carries the stream live', async t => {
  const { stream: s, record } = stream()
  const first = new RecordingConnection()
  s.attach(first, 0)
  for (const data of ['a', 'b', 'c']) s.push(data, LOG)
  first.close(false)
  t.equal(record.paused, 1, 'a connection that closed before the response pauses the stream')
  t.ok(s.live, 'and its request may still write to it')
  s.push('d', LOG)
  const second = new RecordingConnection()
  t.ok(s.attach(second, 2), 'a client resumes after event 2')
  t.same(second.data, ['c', 'd'], 'it gets c and d, not a or b')
  t.match(second.frames[0], /^id: id-3\n/, 'each with the id it was first sent with')
  t.equal(record.resumed, 1)
  t.notOk(s.attach(new RecordingConnection(), 0), 'a second client at once is refused')
  s.respond('result')
  t.same(second.data.slice(2), ['result'], 'live: the response follows')
  t.ok(second.ended, 'and the connection ends after it')
  t.same(record.ended, [], 'the stream ends only once the response went out')
  second.close(true)
  t.same(record.ended, ['delivered'], 'then it is delivered')
  t.notOk(s.attach(new RecordingConnection(), 0), 'and nothing resumes it')
})

t.test('a response whose connection dropped before it went out is replayed on the next resume', async t => {
  const { stream: s, record } = stream()
  const first = new RecordingConnection()
  s.attach(first, 0)
  s.push('progress', LOG)
  s.respond('result')
  first.close(false)
  t.same(record.ended, [], 'not delivered: the connection closed unfinished')
  t.equal(record.paused, 1, 'the stream pauses with its response')
  const second = new RecordingConnection()
  s.attach(second, 1)
  t.same(second.data, ['result'], 'the resume gets the response')
  t.equal(record.resumed, 1, 'and is no longer paused while it takes it')
  t.ok(second.ended, 'and ends')
  second.close(true)
  t.same(record.ended, ['delivered'])
})

t.test('polling: closing the connection pauses the stream, however cleanly it ended', async t => {
  const { stream: s, record } = stream()
  const first = new RecordingConnection()
  s.attach(first, 0)
  s.closeConnection()
  t.ok(first.ended, 'the connection ends')
  first.close(true)
  t.equal(record.paused, 1, 'the stream pauses: its response is still to come')
  t.same(record.ended, [])
})

t.test('over maxBufferedEvents: a superseded progress goes first, then the oldest droppable event; never a request or the response', async t => {
  const { stream: s, record } = stream({ maxBufferedEvents: 4 })
  s.push('ask', KEPT)
  s.push('log-1', LOG)
  s.push('p1', progress('tok'))
  s.push('p2', progress('tok'))
  s.push('p3', progress('tok'))
  const replay = new RecordingConnection()
  s.attach(replay, 0)
  t.same(replay.data, ['ask', 'log-1', 'p2', 'p3'], 'p1, superseded by p2, was given up before the older log')
  t.equal(record.dropped, 1)
  replay.close(false)

  s.push('log-2', LOG)
  const again = new RecordingConnection()
  s.attach(again, 0)
  t.same(again.data, ['ask', 'log-1', 'p3', 'log-2'], 'then p2, superseded by p3')
  again.close(false)

  s.push('log-3', LOG)
  s.respond('result')
  const last = new RecordingConnection()
  s.attach(last, 0)
  t.same(last.data, ['ask', 'log-2', 'log-3', 'result'], 'with nothing superseded, the oldest droppable ones (log-1, then p3); the ask and the response stay')
  t.equal(record.dropped, 4)
})

t.test('over maxBufferedBytes: the same order, by bytes', async t => {
  const { stream: s } = stream({ maxBufferedBytes: 200 })
  for (let i = 0; i < 10; i++) s.push(`log-${i}-${'x'.repeat(20)}`, LOG)
  const replay = new RecordingConnection()
  s.attach(replay, 0)
  const kept = replay.frames.reduce((sum, frame) => sum + Buffer.byteLength(frame), 0)
  t.ok(kept <= 200, `what a resume replays fits the bound (${kept} bytes)`)
  t.ok(replay.data.length >= 1 && replay.data.at(-1)?.startsWith('log-9'), 'the newest events are the ones kept')
})

t.test('abandoned (the request was cancelled): the connection ends, the stream ends, nothing resumes', async t => {
  const { stream: s, record } = stream()
  const first = new RecordingConnection()
  s.attach(first, 0)
  s.push('a', LOG)
  s.abandon()
  t.ok(first.ended)
  t.same(record.ended, ['cancelled'])
  s.push('late', LOG)
  s.respond('late result')
  t.same(first.data, ['a'], 'nothing is written after the end')
  s.abandon('expired')
  t.same(record.ended, ['cancelled'], 'it ends once')
  first.close(false)
  t.equal(record.paused, 0, 'an ended stream does not pause')
})

t.test('over a bound with nothing it may give up (requests to the client, the response), it keeps them all', async t => {
  const { stream: s, record } = stream({ maxBufferedEvents: 2 })
  for (const ask of ['ask-1', 'ask-2', 'ask-3']) s.push(ask, KEPT)
  s.respond('result')
  const replay = new RecordingConnection()
  s.attach(replay, 0)
  t.same(replay.data, ['ask-1', 'ask-2', 'ask-3', 'result'], 'every ask and the response replay')
  t.equal(record.dropped, 0, 'nothing dropped')
})
