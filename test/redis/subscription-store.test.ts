/**
 * RedisSubscriptionStore: legacy sessions' subscriptions and stream claims shared by the cluster
 * (lib/events/subscription-store.ts). Two RedisBus instances on one real `redis-server` are two nodes:
 * a change made on one is in Redis and announced to the other before the call resolves, the bound
 * per session holds across them, a session's keys expire with it, one node at a time holds a stream,
 * and while Redis is away every method rejects (nothing is queued) until it is back.
 *
 * Without redis-server these tests are skipped, except under CI where that is a failure.
 */
import t from 'tap'
import { Redis } from 'ioredis'
import { PUBLISHER_OPTIONS, RedisBus } from '../../lib/cluster/redis-bus.js'
import { RedisSubscriptionStore } from '../../lib/events/redis-subscription-store.js'
import type { SubscriptionChange } from '../../lib/events/subscription-store.js'
import { silentLogger } from '../helpers/logs.js'
import { scanKeys } from '../helpers/redis.js'
import { RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import type { Teardown } from '../helpers/teardown.js'
import { waitFor } from '../helpers/wait.js'

const skip = redisSkipReason(t)
const HOUR = 3_600_000
/** Redis back ⇒ the bus is ready again within this long (it reconnects every second at most). */
const RECOVERY_MS = 5000

const noop = (): void => {}

interface Node {
  bus: RedisBus
  store: RedisSubscriptionStore
  /** What the node heard, in order: its store's changes, and the messages of the `probe` channel. */
  heard: Array<SubscriptionChange | 'probe'>
}

/** A node of the cluster: its own bus on `redis` (connected as the plugin connects) and its store. */
async function node (t: Teardown, redis: RedisServer, maxSubscriptionsPerSession = 100): Promise<Node> {
  const bus = new RedisBus({ redis: new Redis(redis.url, PUBLISHER_OPTIONS), ownsClient: true, prefix: 'mcp:', maxMessageLength: 1_000_000, log: silentLogger, onError: noop })
  t.teardown(async () => { await bus.close() })
  const store = new RedisSubscriptionStore(bus, { maxSubscriptionsPerSession })
  const heard: Node['heard'] = []
  store.onChange(change => { heard.push(change) })
  bus.subscribe('probe', () => { heard.push('probe') })
  if (!await bus.started) throw new Error('the bus did not connect')
  // Subscribed once Redis counts this node among the channel's subscribers.
  await waitFor(async () => (await bus.redis.pubsub('NUMSUB', bus.key('probe')) as [string, number])[1] > 0)
  return { bus, store, heard }
}

/** A client of the test's own, to read what the store keeps. */
function inspector (t: Teardown, redis: RedisServer): Redis {
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1 })
  t.teardown(() => { client.disconnect() })
  return client
}

t.test('a subscribe on node B is in node A\'s list, and reaches A\'s handlers before anything published after it resolved', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await node(t, redis)
  const b = await node(t, redis)
  const c = await node(t, redis)

  t.equal(await b.store.subscribe('s1', 'file:///report', Date.now() + HOUR), 'added')
  void c.bus.publish('probe', {})
  t.ok(await waitFor(() => a.heard.length >= 2), 'node A heard the subscribe and the probe')
  t.same(a.heard, [{ session: 's1', uri: 'file:///report', subscribed: true }, 'probe'],
    'the change came first: it was announced before the subscribe resolved')
  t.same(await a.store.list('s1'), ['file:///report'], 'node A lists it')
  t.ok(await waitFor(() => b.heard.length >= 2), 'node B heard the probe too')
  t.same(b.heard, [{ session: 's1', uri: 'file:///report', subscribed: true }, 'probe'], 'node B\'s own handlers heard the change once')

  t.equal(await a.store.subscribe('s1', 'file:///report', Date.now() + HOUR), 'present', 'node A finds it present')
  await a.store.unsubscribe('s1', 'file:///report')
  await a.store.unsubscribe('s1', 'file:///never')
  void c.bus.publish('probe', {})
  t.ok(await waitFor(() => b.heard.length >= 4), 'node B heard the unsubscribe and the probe')
  t.same(b.heard.slice(2), [{ session: 's1', uri: 'file:///report', subscribed: false }, 'probe'],
    'one unsubscribe of a present URI, nothing for the other, and before the probe')
  t.same(await b.store.list('s1'), [])
})

t.test('the bound per session holds across the nodes', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await node(t, redis, 2)
  const b = await node(t, redis, 2)
  const expiresAt = Date.now() + HOUR
  t.equal(await a.store.subscribe('s1', 'u1', expiresAt), 'added')
  t.equal(await b.store.subscribe('s1', 'u2', expiresAt), 'added')
  t.equal(await a.store.subscribe('s1', 'u3', expiresAt), 'full', 'a third, on either node, is beyond the bound')
  t.equal(await b.store.subscribe('s1', 'u1', expiresAt), 'present', 'one it holds is present')
  t.equal(await b.store.subscribe('s2', 'u3', expiresAt), 'added', 'another session has its own bound')
  t.same((await a.store.list('s1')).sort(), ['u1', 'u2'])
  t.equal(a.heard.filter(change => change !== 'probe' && change.subscribed).length, 3, 'node A heard the three subscriptions added')
})

t.test('URIs are opaque: Lua patterns, separators and other bytes are stored as they are', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await node(t, redis)
  const uris = ['file:///%d*?[]', 'a:b:c', 'x\ny', '', 'émoji 🎉']
  for (const uri of uris) t.equal(await a.store.subscribe('s1', uri, Date.now() + HOUR), 'added', JSON.stringify(uri))
  t.same((await a.store.list('s1')).sort(), [...uris].sort())
})

t.test('a session\'s subscriptions expire in Redis at its expiresAt', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await node(t, redis)
  const client = inspector(t, redis)
  const expiresAt = Date.now() + HOUR
  await a.store.subscribe('s1', 'u1', expiresAt)
  t.equal(await client.pexpiretime('mcp:subs:s1'), expiresAt, 'the set expires exactly at the session\'s expiresAt')

  await a.store.subscribe('s2', 'u1', Date.now() + 200)
  t.ok(await waitFor(async () => (await a.store.list('s2')).length === 0, 3000), 'a session that ends soon loses its subscriptions')
  t.same(await a.store.list('s1'), ['u1'], 'the other keeps its own')
})

t.test('drop deletes the session\'s keys and tells every node', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await node(t, redis)
  const b = await node(t, redis)
  const client = inspector(t, redis)
  await a.store.subscribe('s1', 'u1', Date.now() + HOUR)
  await a.store.subscribe('s2', 'u1', Date.now() + HOUR)
  t.ok(await a.store.claim('s1', 'node-a', 60_000))
  t.same(await scanKeys(client, 'mcp:*'), ['mcp:stream:s1', 'mcp:subs:s1', 'mcp:subs:s2'])

  await b.store.drop('s1')
  t.same(await scanKeys(client, 'mcp:*'), ['mcp:subs:s2'], 'the session\'s set and claim are gone, the other session\'s set stays')
  t.ok(await waitFor(() => a.heard.length >= 3), 'node A heard the drop')
  t.same(a.heard.at(-1), { session: 's1', uri: undefined, subscribed: false })
  t.same(b.heard.at(-1), { session: 's1', uri: undefined, subscribed: false }, 'and so did node B\'s own handlers')
})

t.test('a message on the channel that is not a change is ignored', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await node(t, redis)
  const client = inspector(t, redis)
  for (const message of ['{"session":1,"subscribed":true}', '{"session":"s","uri":2,"subscribed":true}', '{"session":"s","uri":"u"}', '{"session":"s","subscribed":true}', '[]', 'not json']) {
    await client.publish('mcp:subscriptions', message)
  }
  await client.publish('mcp:subscriptions', '{"session":"s","uri":"u","subscribed":true,"origin":"another node"}')
  t.ok(await waitFor(() => a.heard.length > 0), 'node A heard the valid change')
  t.same(a.heard, [{ session: 's', uri: 'u', subscribed: true }], 'and only it, without the envelope\'s fields')
})

t.test('a stream\'s claim: one holder in the cluster, renewed by it, lapsing after leaseMs, released by it only', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await node(t, redis)
  const b = await node(t, redis)
  const client = inspector(t, redis)

  t.ok(await a.store.claim('s1', 'node-a', 60_000), 'node A claims the session\'s stream')
  t.ok(await a.store.claim('s1', 'node-a', 60_000), 'and again: it holds it')
  t.notOk(await b.store.claim('s1', 'node-b', 60_000), 'node B is refused')
  t.equal(await client.get('mcp:stream:s1'), 'node-a', 'the refused claim changed nothing')

  t.ok(await a.store.claim('s2', 'node-a', 200))
  t.ok(await a.store.claim('s3', 'node-a', 200))
  t.same(await a.store.renew([{ session: 's2', holder: 'node-a' }, { session: 's1', holder: 'node-b' }], 60_000),
    [true, false], 'renew extends the holder\'s claims, never another holder\'s')
  t.ok(await client.pttl('mcp:stream:s2') > 1000, 'the renewed claim lasts the new lease')
  t.ok(await waitFor(async () => await b.store.claim('s3', 'node-b', 60_000), 3000), 'the claim that was not renewed lapses, and node B takes it')
  t.notOk(await b.store.claim('s2', 'node-b', 60_000), 'the renewed one is still node A\'s')
  t.same(await a.store.renew([{ session: 's3', holder: 'node-a' }], 60_000), [false], 'node A no longer holds what lapsed and B took')
  t.same(await a.store.renew([{ session: 'gone', holder: 'node-a' }], 60_000), [true], 'a claim nobody holds (Redis lost it) is taken again')
  t.equal(await client.get('mcp:stream:gone'), 'node-a')
  t.same(await a.store.renew([], 60_000), [])

  await b.store.release('s1', 'node-b')
  t.notOk(await b.store.claim('s1', 'node-b', 60_000), 'a release by another holder leaves the claim alone')
  await a.store.release('s1', 'node-a')
  t.ok(await b.store.claim('s1', 'node-b', 60_000), 'its holder\'s release frees it')
})

t.test('while Redis is away every method rejects, and works again once it is back', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await node(t, redis)
  const b = await node(t, redis)
  await a.store.subscribe('s1', 'u1', Date.now() + HOUR)
  t.ok(await a.store.claim('s1', 'node-a', 60_000))

  await redis.stop()
  t.ok(await waitFor(() => !a.bus.ready), 'node A noticed the outage')
  const calls: Array<[string, () => Promise<unknown>]> = [
    ['subscribe', async () => await a.store.subscribe('s1', 'during the outage', Date.now() + HOUR)],
    ['unsubscribe', async () => { await a.store.unsubscribe('s1', 'u1') }],
    ['list', async () => await a.store.list('s1')],
    ['drop', async () => { await a.store.drop('s1') }],
    ['claim', async () => await a.store.claim('s2', 'node-a', 60_000)],
    ['renew', async () => await a.store.renew([{ session: 's1', holder: 'node-a' }], 60_000)],
    ['release', async () => { await a.store.release('s1', 'node-a') }]
  ]
  for (const [name, call] of calls) await t.rejects(call(), `${name} rejects`)
  t.same(a.heard.filter(change => change !== 'probe' && !change.subscribed), [], 'and announces nothing')

  await redis.start()
  t.ok(await waitFor(() => a.bus.ready && b.bus.ready, RECOVERY_MS), 'both nodes reconnected')
  t.equal(await a.store.subscribe('s1', 'u2', Date.now() + HOUR), 'added', 'subscribe works again (Redis came back empty)')
  t.same(await a.store.list('s1'), ['u2'], 'the subscribe refused during the outage was not queued')
  t.ok(await waitFor(() => b.heard.some(change => change !== 'probe' && change.uri === 'u2')), 'and node B hears the change again')
  t.ok(await a.store.claim('s1', 'node-a', 60_000), 'claims work again')
})
