/**
 * The listeners of one node (lib/events/listeners.ts) and how streams are opened
 * (lib/events/listen-streams.ts), with sinks of the test's own: what reaches whom, a task's state read
 * once per scope and never sent older than what was sent, a listener too slow dropped, sessions' streams
 * claimed once and given up when their session ends or another node holds them. Over real sockets:
 * test/e2e/listen.test.ts, test/e2e/session-streams.test.ts.
 */
import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import type { JsonObject, JsonRpcNotification, JsonRpcResponse } from '../../lib/core/jsonrpc.js'
import { ServerEvents } from '../../lib/cluster/server-events.js'
import { Listeners } from '../../lib/events/listeners.js'
import { ListenStreams, type Deliverable } from '../../lib/events/listen-streams.js'
import type { ListenerSink } from '../../lib/events/listener.js'
import { MemorySubscriptionStore } from '../../lib/events/memory-subscription-store.js'
import { sessionKey, type SubscriptionStore } from '../../lib/events/subscription-store.js'
import { noopObserver, type ListenerDropReason, type RequestObserver } from '../../lib/observability/observer.js'
import { waitFor } from '../helpers/wait.js'

const TASKS = { extensions: { 'io.modelcontextprotocol/tasks': {} } }
const EVERYTHING: Deliverable = { lists: ['tools', 'prompts', 'resources'], resources: true, tasks: true }

class FakeSink implements ListenerSink {
  readonly messages: Array<JsonRpcNotification | JsonRpcResponse> = []
  writable = true
  acceptsStream = true
  bufferedBytes = 0
  opened = false
  ended: 'respond' | 'abandon' | 'drop' | undefined
  readonly #closeHandlers: Array<() => void> = []

  open (): void { this.opened = true }
  send (message: JsonRpcNotification): boolean {
    if (!this.writable) return false
    this.messages.push(message)
    return true
  }

  respond (message: JsonRpcResponse): void { this.messages.push(message); this.#end('respond') }
  abandon (): void { this.#end('abandon') }
  drop (): void { this.#end('drop') }
  onClose (handler: () => void): void { this.#closeHandlers.push(handler) }

  /** The client leaves. */
  close (): void {
    this.writable = false
    for (const handler of this.#closeHandlers) handler()
  }

  methods (): string[] {
    return this.messages.map(message => 'method' in message ? message.method : 'result')
  }

  #end (how: 'respond' | 'abandon' | 'drop'): void {
    this.ended ??= how
    this.writable = false
  }
}

interface Harness {
  events: ServerEvents
  listeners: Listeners
  streams: ListenStreams
  dropped: ListenerDropReason[]
  /** What the task lookups of each scope answer: set `tasks[id] = { scope, task }`. */
  tasks: Map<string, { scope: string, task: JsonObject }>
  reads: string[]
}

function harness (t: Tap, options: { subscriptions?: SubscriptionStore, revoked?: (id: string) => boolean, maxListenerBufferBytes?: number, deliverable?: Deliverable, followedTasksIntervalMs?: number } = {}): Harness {
  const events = new ServerEvents({ coalesceMs: 1, maxEventsPerSecond: 100_000, maxUriBytes: 4096, onDropped: () => {} }, undefined)
  events.start()
  const dropped: ListenerDropReason[] = []
  const observer: RequestObserver = { ...noopObserver, listenerDropped: reason => { dropped.push(reason) } }
  const tasks = new Map<string, { scope: string, task: JsonObject }>()
  const reads: string[] = []
  const task = async (taskId: string, scope: string): Promise<JsonObject | undefined> => {
    reads.push(`${taskId}@${scope}`)
    await sleep(1)
    const found = tasks.get(taskId)
    return found?.scope === scope ? { ...found.task } : undefined
  }
  const listeners = new Listeners({
    settings: {
      maxListenersPerScope: 4,
      maxListeners: 8,
      maxListenerBufferBytes: options.maxListenerBufferBytes ?? 1024,
      maxStreamLifetimeMs: 60_000,
      serverInfo: { name: 's', version: '1' },
      followedTasksIntervalMs: options.followedTasksIntervalMs
    },
    events,
    observer,
    task,
    subscriptions: options.subscriptions,
    revoked: options.revoked ?? (() => false)
  })
  const streams = new ListenStreams({
    listeners,
    limits: { maxSubscriptions: 10, maxUriBytes: 4096 },
    deliverable: () => options.deliverable ?? EVERYTHING,
    task,
    subscriptions: options.subscriptions,
    node: 'node-1'
  })
  listeners.startTimers()
  t.teardown(async () => {
    listeners.close()
    await events.close()
  })
  return { events, listeners, streams, dropped, tasks, reads }
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

async function listen (h: Harness, scope: string, notifications: JsonObject, capabilities: JsonObject = {}): Promise<FakeSink> {
  const sink = new FakeSink()
  t.equal(await h.streams.listen({ id: `${scope}-listen`, params: { notifications }, scope, clientCapabilities: capabilities, sink }), true)
  return sink
}

t.test('each listener hears only what it asked for, what the server delivers, tagged with its id', async t => {
  const h = harness(t, { deliverable: { lists: ['tools'], resources: true, tasks: false } })
  const tools = await listen(h, 'a', { toolsListChanged: true, promptsListChanged: true })
  const files = await listen(h, 'b', { resourceSubscriptions: ['file:///a'] })
  t.same(tools.messages[0], {
    jsonrpc: '2.0',
    method: 'notifications/subscriptions/acknowledged',
    params: { notifications: { toolsListChanged: true }, _meta: { 'io.modelcontextprotocol/subscriptionId': 'a-listen' } }
  }, 'prompts are not delivered here: left out of the acknowledgement')
  t.ok(tools.opened && files.opened, 'each stream was opened before its acknowledgement')
  h.events.publish({ kind: 'list_changed', list: 'tools' })
  h.events.publish({ kind: 'list_changed', list: 'prompts' })
  h.events.publish({ kind: 'resource_updated', uri: 'file:///a/b' })
  h.events.publish({ kind: 'resource_updated', uri: 'file:///ab' })
  t.same(tools.methods(), ['notifications/subscriptions/acknowledged', 'notifications/tools/list_changed'])
  t.same(files.methods(), ['notifications/subscriptions/acknowledged', 'notifications/resources/updated'])
  t.same((files.messages[1] as JsonRpcNotification).params?.uri, 'file:///a/b', 'a sub-resource, never a sibling with a longer name')
  tools.close()
  h.events.publish({ kind: 'list_changed', list: 'tools' })
  t.equal(tools.messages.length, 2, 'a listener whose client left hears nothing more')
})

t.test('a task\'s state is read once per scope, never sent twice the same, nor older than what was sent', async t => {
  const h = harness(t)
  h.tasks.set('t1', { scope: 'alice', task: { taskId: 't1', status: 'working' } })
  const first = await listen(h, 'alice', { taskIds: ['t1', 'unknown'] }, TASKS)
  const second = await listen(h, 'alice', { taskIds: ['t1'] }, TASKS)
  const stranger = await listen(h, 'bob', { taskIds: ['t1'] }, TASKS)
  t.same((first.messages[0] as JsonRpcNotification).params?.notifications, { taskIds: ['t1'] }, 'the unknown id is left out')
  t.same((stranger.messages[0] as JsonRpcNotification).params?.notifications, {}, 'another scope\'s task is left out the same way')
  t.ok(await waitFor(() => second.methods().includes('notifications/tasks'), 1000), 'the current state follows the acknowledgement')

  await sleep(20)
  h.reads.length = 0
  h.events.publish({ kind: 'task_changed', taskId: 't1' })
  h.tasks.set('t1', { scope: 'alice', task: { taskId: 't1', status: 'working', statusMessage: 'half' } })
  h.events.publish({ kind: 'task_changed', taskId: 'x' })
  h.events.publish({ kind: 'task_changed', taskId: 't1' })
  h.events.publish({ kind: 'task_changed', taskId: 't1' })
  t.ok(await waitFor(() => first.messages.some(message => (message as JsonRpcNotification).params?.statusMessage === 'half'), 1000))
  await sleep(20)
  t.ok(h.reads.every(read => read === 't1@alice'), `read only in the followers' scope, never for a task nobody follows: ${h.reads.join(', ')}`)
  t.ok(h.reads.length <= 2, `changes during a read make one more read, not one per change (${h.reads.length})`)
  const states = first.messages.filter(message => 'method' in message && message.method === 'notifications/tasks').map(message => (message as JsonRpcNotification).params?.statusMessage ?? null)
  t.same(states, [null, 'half'], 'each state once, in order')

  h.tasks.set('t1', { scope: 'alice', task: { taskId: 't1', status: 'completed' } })
  h.events.publish({ kind: 'task_changed', taskId: 't1' })
  t.ok(await waitFor(() => first.messages.some(message => (message as JsonRpcNotification).params?.status === 'completed'), 1000), 'the terminal state arrives')
  h.tasks.set('t1', { scope: 'alice', task: { taskId: 't1', status: 'completed', statusMessage: 'later' } })
  h.events.publish({ kind: 'task_changed', taskId: 't1' })
  await sleep(20)
  t.notOk(first.messages.some(message => (message as JsonRpcNotification).params?.statusMessage === 'later'), 'a task that ended is followed no more')
  t.notOk(stranger.methods().includes('notifications/tasks'), 'another scope never hears of it')
})

t.test('with a shared task store, followed tasks are read again on a timer: a dead node\'s task, failed by the read, is heard without any event', async t => {
  const h = harness(t, { followedTasksIntervalMs: 20 })
  h.tasks.set('t1', { scope: 'alice', task: { taskId: 't1', status: 'working' } })
  const sink = await listen(h, 'alice', { taskIds: ['t1'] }, TASKS)
  t.ok(await waitFor(() => sink.methods().includes('notifications/tasks'), 1000), 'the current state follows the acknowledgement')
  h.tasks.set('t1', { scope: 'alice', task: { taskId: 't1', status: 'failed', statusMessage: 'The node running the task stopped' } })
  t.ok(await waitFor(() => sink.messages.some(message => (message as JsonRpcNotification).params?.status === 'failed'), 1000), 'the failure arrives with no task_changed event')
  await sleep(60)
  h.reads.length = 0
  await sleep(60)
  t.same(h.reads, [], 'an ended task is read no more')
  t.equal(sink.messages.filter(message => (message as JsonRpcNotification).params?.status === 'failed').length, 1, 'and heard once')
})

t.test('a listener whose client reads too slowly is dropped rather than buffered, and counted', async t => {
  const h = harness(t, { maxListenerBufferBytes: 100 })
  const slow = await listen(h, 'a', { toolsListChanged: true })
  const fast = await listen(h, 'b', { toolsListChanged: true })
  slow.bufferedBytes = 101
  h.events.publish({ kind: 'list_changed', list: 'tools' })
  t.equal(slow.ended, 'drop')
  t.same(h.dropped, ['slow'])
  t.equal(fast.messages.length, 2, 'the others are served')
  const again = await listen(h, 'a', { toolsListChanged: true })
  t.equal(again.messages.length, 1, 'the dropped listener freed its scope\'s slot')
})

t.test('a listener admitted while its client left is never registered', async t => {
  const h = harness(t)
  const gone = new FakeSink()
  gone.writable = false
  t.equal(await h.streams.listen({ id: 1, params: { notifications: { toolsListChanged: true } }, scope: 'a', clientCapabilities: {}, sink: gone }), false)
  t.same(gone.messages, [])
  const gaps = [1, 2, 3, 4].map(async () => await listen(h, 'a', { toolsListChanged: true }))
  t.equal((await Promise.all(gaps)).length, 4, 'its slot was never taken')
})

t.test('a session\'s stream: claimed once in the cluster, ended with its session or when another node takes it', async t => {
  const store = new MemorySubscriptionStore({ maxSubscriptionsPerSession: 10, maxSubscriptions: 100 })
  const revoked = new Set<string>()
  const h = harness(t, { subscriptions: store, revoked: id => revoked.has(id) })
  const open = async (sessionId: string, sink = new FakeSink()): Promise<FakeSink> => {
    await h.streams.openSession({ sessionId, expiresAt: Date.now() + 60_000, scope: `session:${sessionId}`, sink })
    return sink
  }
  await store.subscribe(sessionKey('s1'), 'file:///before', Date.now() + 60_000)
  const first = await open('s1')
  t.ok(first.opened, 'the head goes out at once')
  await t.rejects(open('s1'), { message: /Conflict/, httpStatus: 409 } as unknown as Error, 'a second stream on this node is 409')
  t.notOk(await store.claim(sessionKey('s1'), 'node-2.x', 10_000), 'the cluster knows this node holds it')
  h.events.publish({ kind: 'resource_updated', uri: 'file:///before' })
  t.same(first.methods(), ['notifications/resources/updated'], 'what the session subscribed to before the stream opened')

  t.ok(await store.claim(sessionKey('s2'), 'node-2.x', 10_000), 'another node holds s2')
  await t.rejects(open('s2'), { message: /Conflict/, httpStatus: 409 } as unknown as Error, 'and this node refuses a second stream for it')
  const gone = new FakeSink()
  gone.writable = false
  await open('s3', gone)
  t.ok(await store.claim(sessionKey('s3'), 'node-2.x', 10_000), 'a stream whose client left while it was claimed released its claim')

  await store.drop(sessionKey('s1'))
  t.equal(first.ended, 'drop', 'the session ended (DELETE on any node): its stream ends')
  t.same(h.dropped, ['revoked'])
  const renewed = await open('s4')
  revoked.add('s4')
  t.ok(await waitFor(() => renewed.ended === 'drop', 2000), 'a revoked session\'s stream ends at the next sweep')
})
