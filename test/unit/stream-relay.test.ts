/**
 * The node-message side of resumes on another node (lib/transport/stream-relay.ts), with node messages
 * the test sends and reads: a message of the wrong shape (another program on the same Redis) is ignored
 * and never throws; a resume of a stream this node holds is accepted and replayed, of one it does not
 * hold refused with its status; the relaying node's detach pauses the stream again. On the relaying
 * side (a real listening server and client), the holding node's messages are written in the order it
 * numbered them, and one that arrives out of that order cuts the client's connection (it resumes after
 * the last event it got) instead of writing an event out of its place.
 */
import Fastify, { type FastifyRequest } from 'fastify'
import t from 'tap'
import type { NodeMessages } from '../../lib/cluster/node-messages.js'
import { deriveKey } from '../../lib/core/signed-token.js'
import { noopObserver } from '../../lib/observability/observer.js'
import { EventIds } from '../../lib/protocol/event-id.js'
import { ResumableStreams } from '../../lib/transport/resumable-streams.js'
import { StreamRelay } from '../../lib/transport/stream-relay.js'
import { EventStream } from '../helpers/event-stream.js'
import { portOf } from '../helpers/listen.js'
import { RecordingConnection } from '../helpers/resumable.js'
import type { Teardown } from '../helpers/teardown.js'
import { within } from '../helpers/wait.js'

const EVENT_ID_KEY = deriveKey(Buffer.from('q'.repeat(32)), 'eventId/v1')
const SCOPE = 'ip:127.0.0.1'

/** Node messages of node A: what it sent (to whom), and a way to hand it a message. */
function messages (): { messages: NodeMessages, sent: Array<{ node: string, message: Record<string, unknown> }>, deliver: (message: unknown) => void } {
  const sent: Array<{ node: string, message: Record<string, unknown> }> = []
  let handler: ((message: Record<string, unknown>) => void) | undefined
  return {
    messages: {
      send: async (node, _topic, message) => { sent.push({ node, message }); return true },
      receive: (_topic, receive) => { handler = receive }
    },
    sent,
    deliver: message => { handler?.(message as Record<string, unknown>) }
  }
}

/** The resumable streams of `node`, and its relay over `messages`; both closed at `t`'s end. */
function relayOn (t: Teardown, node: string, messages: NodeMessages): { streams: ResumableStreams, relay: StreamRelay } {
  const streams = new ResumableStreams({
    windowMs: 60_000, retryMs: 100, maxBufferedEvents: 16, maxBufferedBytes: 65_536, maxPausedPerScope: 16, maxPaused: 100, pollIntervalMs: 0
  }, new EventIds(EVENT_ID_KEY, node), noopObserver, () => {})
  const relay = new StreamRelay(streams, messages, node, 15_000)
  t.teardown(() => { relay.close(); streams.close() })
  return { streams, relay }
}

function setup (): ReturnType<typeof messages> & { streams: ResumableStreams } {
  const bus = messages()
  return { ...bus, streams: relayOn(t, 'node-a', bus.messages).streams }
}

const flush = async (): Promise<void> => { await new Promise(resolve => setImmediate(resolve)) }

t.test('a message of the wrong shape is ignored, and so is one for a consumer nobody knows', async t => {
  const { deliver, sent } = setup()
  const bad: unknown[] = [
    {}, { type: 'bogus', consumer: 'c' }, { type: 'accepted' }, { type: 'accepted', consumer: 7 },
    { type: 'frames', consumer: 'c', frames: 'id: x' }, { type: 'frames', consumer: 'c', frames: [1] },
    { type: 'renew' }, { type: 'renew', consumers: 'c' }, { type: 'renew', consumers: [null] },
    { type: 'refused', consumer: 'c', status: 200, code: -32600, message: 'x' }, { type: 'refused', consumer: 'c', status: 404, code: '-32600', message: 'x' },
    { type: 'resume', consumer: 'c', from: 'node-b', stream: 's', after: -1, scope: SCOPE, session: null },
    { type: 'resume', consumer: 'c', from: 'node-b', stream: 's', after: 1.5, scope: SCOPE, session: null },
    { type: 'resume', consumer: 'c', from: 'node-b', stream: 's', after: 0, scope: SCOPE, session: 5 },
    { type: 'resume', consumer: 'c', stream: 's', after: 0, scope: SCOPE, session: null },
    { type: 'accepted', consumer: 'c' }, { type: 'frames', consumer: 'c', frames: ['x'] }, { type: 'end', consumer: 'c', seq: -1 },
    { type: 'frames', consumer: 'c', seq: '1', frames: ['x'] }, { type: 'end', consumer: 'c', seq: 0.5 },
    // Well formed, for nobody: a late answer to a resume that gave up, a relay that already ended.
    { type: 'accepted', consumer: 'c', seq: 0 }, { type: 'refused', consumer: 'c', status: 404, code: -32600, message: 'x' },
    { type: 'frames', consumer: 'c', seq: 1, frames: ['x'] }, { type: 'end', consumer: 'c', seq: 2 }, { type: 'renew', consumers: ['c'] },
    { type: 'detach', consumer: 'c' }, { type: 'delivered', consumer: 'c' }
  ]
  for (const message of bad) t.doesNotThrow(() => { deliver(message) }, JSON.stringify(message))
  await flush()
  t.same(sent, [], 'nothing was sent in answer')
})

t.test('a resume of a stream this node does not hold is refused with the status it would get here', async t => {
  const { deliver, sent } = setup()
  deliver({ type: 'resume', consumer: 'c1', from: 'node-b', stream: new EventIds(EVENT_ID_KEY, 'node-a').newStream(), after: 0, scope: SCOPE, session: null })
  await flush()
  t.match(sent, [{ node: 'node-b', message: { type: 'refused', consumer: 'c1', status: 404, code: -32600, message: /no such stream/ } }])
})

t.test('a resume of a paused stream is accepted, then replayed; the relaying node\'s detach pauses it again', async t => {
  const { deliver, sent, streams } = setup()
  const first = new RecordingConnection()
  const stream = streams.start({ mcpScope: SCOPE, mcpSessionId: null, raw: {} } as unknown as FastifyRequest, first)
  stream.push('{"n":1}', { droppable: true })
  first.close()
  t.ok(stream.pausedAt !== undefined, 'paused')
  deliver({ type: 'resume', consumer: 'c2', from: 'node-b', stream: stream.name, after: 0, scope: SCOPE, session: null })
  await flush()
  t.same(sent.map(({ message }) => [message.type, message.seq]), [['accepted', 0], ['frames', 1]], 'accepted, then the replay, numbered')
  t.match(sent[1]?.message, { consumer: 'c2', frames: [/^id: e1\..*\nevent: message\ndata: \{"n":1\}\n\n$/] }, 'the event it missed, with its id')
  t.equal(stream.pausedAt, undefined, 'read from node B now')
  deliver({ type: 'renew', consumers: ['c2'] })
  deliver({ type: 'detach', consumer: 'c2' })
  t.ok(stream.pausedAt !== undefined, 'node B\'s client left: paused again')
})

/** Node B relaying a stream node A holds, to a client of a real server: the client's stream, and the consumer A is asked to serve. */
async function relaying (t: Teardown): Promise<ReturnType<typeof messages> & { client: EventStream, consumer: string }> {
  const bus = messages()
  const { relay } = relayOn(t, 'node-b', bus.messages)
  const app = Fastify()
  app.get('/resume', async (_request, reply) => {
    await relay.resume({ stream: 's', position: 3, node: 'node-a' }, SCOPE, undefined, reply)
    return reply
  })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close() })
  const client = EventStream.get(new URL(`http://127.0.0.1:${portOf(app)}/resume`), {})
  t.teardown(() => { client.close() })
  for (let i = 0; i < 100 && bus.sent.length === 0; i++) await flush()
  const resume = bus.sent[0]?.message
  if (resume?.type !== 'resume' || typeof resume.consumer !== 'string') throw new Error(`B did not ask A to resume (${JSON.stringify(bus.sent)})`)
  return { ...bus, client, consumer: resume.consumer }
}

const frame = (n: number): string => `id: e1.s.${n}\nevent: message\ndata: {"n":${n}}\n\n`

t.test('the relaying node writes the holding node\'s messages in order, and ends the stream with its end', async t => {
  const { deliver, sent, client, consumer } = await relaying(t)
  deliver({ type: 'accepted', consumer, seq: 0 })
  deliver({ type: 'frames', consumer, seq: 1, frames: [frame(4), frame(5)] })
  deliver({ type: 'frames', consumer, seq: 2, frames: [frame(6)] })
  deliver({ type: 'end', consumer, seq: 3 })
  t.same(await within(client.ended, 2000, 'still open'), { complete: true }, 'the client\'s stream ends cleanly')
  t.same([...client.text().matchAll(/"n":(\d+)/g)].map(match => Number(match[1])), [4, 5, 6], 'with every event, in order')
  await flush()
  t.match(sent.at(-1), { node: 'node-a', message: { type: 'delivered', consumer } }, 'and A is told it was delivered')
})

t.test('a message that arrives out of the holding node\'s order cuts the client\'s connection, and pauses the stream there', async t => {
  for (const late of ['a frame', 'the acceptance'] as const) {
    t.test(`${late} overtaken`, async t => {
      const { deliver, sent, client, consumer } = await relaying(t)
      if (late === 'a frame') {
        deliver({ type: 'accepted', consumer, seq: 0 })
        deliver({ type: 'frames', consumer, seq: 2, frames: [frame(6)] })
        deliver({ type: 'frames', consumer, seq: 1, frames: [frame(4), frame(5)] })
      } else {
        deliver({ type: 'frames', consumer, seq: 1, frames: [frame(4), frame(5)] })
        deliver({ type: 'accepted', consumer, seq: 0 })
        deliver({ type: 'frames', consumer, seq: 2, frames: [frame(6)] })
      }
      t.same(await within(client.ended, 2000, 'still open'), { complete: false }, 'the client\'s connection is cut, so that it resumes after its last event')
      t.notMatch(client.text(), /"n":6/, 'the overtaking event was never written')
      await flush()
      t.match(sent.at(-1), { node: 'node-a', message: { type: 'detach', consumer } }, 'and A is told the client left (its stream pauses)')
    })
  }
})
