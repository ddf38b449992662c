/**
 * The cluster's stream of server events on one node (lib/cluster/server-events.ts): nothing before
 * `start()`, identical events coalesced within `coalesceMs` (the last one always leaves), a per-second
 * budget beyond which distinct events wait and then are dropped (counted). Across nodes:
 * test/redis/events-multi-node.test.ts.
 */
import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { ServerEvents, type ServerEvent, type ServerEventsSettings } from '../../lib/cluster/server-events.js'

function eventsWith (settings: Partial<ServerEventsSettings> = {}): { events: ServerEvents, received: ServerEvent[], dropped: () => number } {
  let dropped = 0
  const events = new ServerEvents({ coalesceMs: 20, maxEventsPerSecond: 1000, maxUriBytes: 64, onDropped: () => { dropped++ }, ...settings }, undefined)
  const received: ServerEvent[] = []
  events.subscribe(event => { received.push(event) })
  return { events, received, dropped: () => dropped }
}

t.test('nothing is announced before start(): registrations while setting up concern no listener', async t => {
  const { events, received } = eventsWith()
  t.teardown(async () => { await events.close() })
  events.publish({ kind: 'list_changed', list: 'tools' })
  t.same(received, [])
  events.start()
  events.publish({ kind: 'list_changed', list: 'tools' })
  t.same(received, [{ kind: 'list_changed', list: 'tools' }])
})

t.test('a burst of identical events leaves twice: at once, and once more at the end of the window', async t => {
  const { events, received } = eventsWith()
  t.teardown(async () => { await events.close() })
  events.start()
  for (let i = 0; i < 100; i++) events.publish({ kind: 'list_changed', list: 'prompts' })
  t.equal(received.length, 1, 'the first leaves at once')
  await sleep(60)
  t.equal(received.length, 2, 'the rest of the burst is one more, after the window')
  events.publish({ kind: 'resource_updated', uri: 'file:///a' })
  events.publish({ kind: 'resource_updated', uri: 'file:///b' })
  events.publish({ kind: 'task_changed', taskId: 'abc' })
  t.same(received.slice(2), [
    { kind: 'resource_updated', uri: 'file:///a' },
    { kind: 'resource_updated', uri: 'file:///b' },
    { kind: 'task_changed', taskId: 'abc' }
  ], 'distinct events are not coalesced')
})

t.test('over the per-second budget distinct events wait; beyond a second of them they are dropped and counted', async t => {
  const { events, received, dropped } = eventsWith({ maxEventsPerSecond: 10 })
  t.teardown(async () => { await events.close() })
  events.start()
  for (let i = 0; i < 10; i++) events.publish({ kind: 'resource_updated', uri: `file:///first/${i}` })
  t.equal(received.length, 10, 'a second of budget leaves at once')
  // At once, with the first ten's windows still open: the waiting room holds events waiting, not events sent.
  for (let i = 0; i < 15; i++) events.publish({ kind: 'resource_updated', uri: `file:///then/${i}` })
  t.equal(received.length, 10, 'with the budget spent, nothing more leaves at once')
  t.equal(dropped(), 5, 'a second of events waits; the rest is dropped and counted')
  await sleep(1500)
  t.equal(received.length, 20, 'the waiting ones left as the budget refilled')
  t.same(received.slice(10).map(event => event.kind === 'resource_updated' && event.uri), Array.from({ length: 10 }, (_, i) => `file:///then/${i}`))
})

t.test('a handler that unsubscribed hears nothing more', async t => {
  const events = new ServerEvents({ coalesceMs: 20, maxEventsPerSecond: 1000, maxUriBytes: 64, onDropped: () => {} }, undefined)
  t.teardown(async () => { await events.close() })
  events.start()
  const heard: ServerEvent[] = []
  const stop = events.subscribe(event => { heard.push(event) })
  events.publish({ kind: 'list_changed', list: 'resources' })
  stop()
  events.publish({ kind: 'list_changed', list: 'tools' })
  t.same(heard, [{ kind: 'list_changed', list: 'resources' }])
})

t.test('through a bus: what this node sends is published once; what arrives is delivered only when it is an event', async t => {
  const published: Array<Record<string, unknown>> = []
  let deliver: ((message: Record<string, unknown>) => void) | undefined
  const bus = {
    subscribe: (name: string, handler: (message: Record<string, unknown>) => void) => { t.equal(name, 'events', 'one channel for every node'); deliver = handler },
    publish: async (_name: string, message: Record<string, unknown>) => { published.push(message); return 1 }
  }
  const events = new ServerEvents({ coalesceMs: 20, maxEventsPerSecond: 1000, maxUriBytes: 16, onDropped: () => {} }, bus)
  const received: ServerEvent[] = []
  events.subscribe(event => { received.push(event) })
  events.start()
  events.publish({ kind: 'task_changed', taskId: 'abc' })
  t.same(published, [{ kind: 'task_changed', taskId: 'abc' }], 'published for the other nodes')
  t.same(received, [{ kind: 'task_changed', taskId: 'abc' }], 'and delivered here at once')
  received.length = 0
  for (const message of [
    { kind: 'list_changed', list: 'tools', origin: 'node-2' },
    { kind: 'list_changed', list: 'everything' },
    { kind: 'resource_updated', uri: 'file:///short' },
    { kind: 'resource_updated', uri: 'file:///far-too-long-for-sixteen' },
    { kind: 'resource_updated', uri: 42 },
    { kind: 'task_changed', taskId: 'x'.repeat(65) },
    { kind: 'something else' }
  ]) deliver?.(message)
  t.same(received, [{ kind: 'list_changed', list: 'tools' }, { kind: 'resource_updated', uri: 'file:///short' }], 'anything else on the channel is ignored')
  await events.close()
  events.publish({ kind: 'list_changed', list: 'tools' })
  t.equal(published.length, 1, 'nothing is announced once closed')
})

t.test('an event already waiting is replaced, never dropped, when the waiting room is full', async t => {
  const { events, received, dropped } = eventsWith({ maxEventsPerSecond: 2 })
  t.teardown(async () => { await events.close() })
  events.start()
  for (const uri of ['file:///a', 'file:///b', 'file:///c', 'file:///d', 'file:///d', 'file:///e']) events.publish({ kind: 'resource_updated', uri })
  t.equal(received.length, 2, 'the budget: a and b')
  t.equal(dropped(), 1, 'c and d wait, e finds the room full; the second d takes the first one\'s place')
  await sleep(1200)
  t.same(received.slice(2).map(event => event.kind === 'resource_updated' && event.uri), ['file:///c', 'file:///d'])
})
