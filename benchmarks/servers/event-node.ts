/**
 * A node of events.ts: servers/plugin.ts (`echo`) with the listener bounds raised
 * (support/event-fixture.ts), identical events coalesced over 1 ms only and a budget of a million
 * events per second (so that neither bound shapes what is measured), legacy sessions with a secret
 * every node shares, a resource template under `FANOUT_PREFIX` (resources must exist for
 * `resources.subscribe` to be advertised and honoured), and `redis: BENCH_REDIS_URL`. Started with an
 * IPC channel (support/child-server.ts `spawnServer`), over which it answers:
 *
 * - `clock`: its instant (`performance.timeOrigin + performance.now()`), to align its clock with the benchmark's;
 * - `toolsChanged`: calls `fastify.mcp.notify.toolsChanged()` and reports the instant just before;
 * - `raise {count}`: announces `resourceUpdated` of `count` URIs never used before (`FANOUT_PREFIX` and a
 *   number), one per turn of the event loop so that the node's I/O runs in between, and reports when done.
 */
import { EVENT_COALESCE_MS, EVENT_SESSION_SECRET, FANOUT_PREFIX, MANY_LISTENERS } from '../support/event-fixture.js'
import { servePlugin } from './plugin-app.js'

export type EventNodeCommand =
  | { type: 'clock', seq: number }
  | { type: 'toolsChanged', seq: number }
  | { type: 'raise', seq: number, count: number }

export type EventNodeMessage =
  | { type: 'clock', seq: number, at: number }
  | { type: 'toolsChanged', seq: number, at: number }
  | { type: 'raise', seq: number, at: number }

const redis = process.env.BENCH_REDIS_URL
if (redis === undefined || redis === '') throw new Error('event-node needs BENCH_REDIS_URL')
if (process.send === undefined) throw new Error('event-node must be started with an IPC channel')

const now = (): number => performance.timeOrigin + performance.now()
const send = (message: EventNodeMessage): void => { process.send!(message) }

await servePlugin({
  redis,
  sessions: { secret: EVENT_SESSION_SECRET },
  events: { ...MANY_LISTENERS, coalesceMs: EVENT_COALESCE_MS, maxEventsPerSecond: 1_000_000 }
}, app => {
  app.mcp.resourceTemplate({
    uriTemplate: `${FANOUT_PREFIX}{n}`,
    name: 'fanout',
    description: 'What the fan-out announces updates of',
    handler: uri => ({ contents: [{ uri, mimeType: 'text/plain', text: '' }] })
  })
  let raised = 0
  const raise = (count: number, done: () => void): void => {
    if (count === 0) {
      done()
      return
    }
    app.mcp.notify.resourceUpdated(`${FANOUT_PREFIX}${raised++}`)
    setImmediate(raise, count - 1, done)
  }
  // The IPC channel would keep the process alive after the server closed (and --cpu-prof unwritten).
  app.addHook('onClose', async () => { process.disconnect() })
  process.on('message', (command: EventNodeCommand) => {
    switch (command.type) {
      case 'clock':
        send({ type: 'clock', seq: command.seq, at: now() })
        return
      case 'toolsChanged': {
        const at = now()
        app.mcp.notify.toolsChanged()
        send({ type: 'toolsChanged', seq: command.seq, at })
        return
      }
      case 'raise':
        raise(command.count, () => { send({ type: 'raise', seq: command.seq, at: now() }) })
    }
  })
})
