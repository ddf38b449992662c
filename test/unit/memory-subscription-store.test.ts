/**
 * MemorySubscriptionStore: legacy sessions' `resources/subscribe` and their standalone stream's claim
 * on one node (lib/events/subscription-store.ts). Bounded per session (the only refusal) and in total
 * (making room, largest sessions' oldest first, and telling the streams what they lost); expired with
 * the session; a stream's claim lapses unless renewed.
 */
import t from 'tap'
import { MemorySubscriptionStore } from '../../lib/events/memory-subscription-store.js'
import type { SubscriptionChange } from '../../lib/events/subscription-store.js'
import { fakeClock } from '../helpers/clock.js'

const HOUR = 3_600_000

function store (options: { maxSubscriptionsPerSession?: number, maxSubscriptions?: number } = {}): MemorySubscriptionStore {
  return new MemorySubscriptionStore({ maxSubscriptionsPerSession: 100, maxSubscriptions: 100_000, ...options })
}

/** The store's changes, in order, as they were announced. */
function changesOf (s: MemorySubscriptionStore): SubscriptionChange[] {
  const changes: SubscriptionChange[] = []
  s.onChange(change => { changes.push(change) })
  return changes
}

t.test('subscribe adds a URI once, up to the session\'s bound; unsubscribe and list', async t => {
  const s = store({ maxSubscriptionsPerSession: 2 })
  const expiresAt = Date.now() + HOUR
  t.equal(await s.subscribe('a', 'file:///one', expiresAt), 'added')
  t.equal(await s.subscribe('a', 'file:///one', expiresAt), 'present', 'the same URI again is already there')
  t.equal(await s.subscribe('a', 'file:///two', expiresAt), 'added')
  t.equal(await s.subscribe('a', 'file:///three', expiresAt), 'full', 'a third is beyond the session\'s bound')
  t.equal(await s.subscribe('a', 'file:///two', expiresAt), 'present', 'a URI it holds is present even when full')
  t.equal(await s.subscribe('b', 'file:///three', expiresAt), 'added', 'another session has its own bound')
  t.same(await s.list('a'), ['file:///one', 'file:///two'])
  t.same(await s.list('b'), ['file:///three'])
  t.same(await s.list('nobody'), [])

  await s.unsubscribe('a', 'file:///one')
  await s.unsubscribe('a', 'file:///never')
  await s.unsubscribe('nobody', 'file:///one')
  t.same(await s.list('a'), ['file:///two'])
  t.equal(await s.subscribe('a', 'file:///three', expiresAt), 'added', 'an unsubscribe makes room in the session')
})

t.test('URIs are opaque: case, slashes and query strings are different URIs', async t => {
  const s = store()
  const expiresAt = Date.now() + HOUR
  for (const uri of ['file:///A', 'file:///a', 'file:///a/', 'file:///a?x=1', '']) t.equal(await s.subscribe('a', uri, expiresAt), 'added', JSON.stringify(uri))
  t.equal((await s.list('a')).length, 5)
})

t.test('changes are announced to every handler, synchronously, once each', async t => {
  const s = store()
  const first = changesOf(s)
  const second = changesOf(s)
  const expiresAt = Date.now() + HOUR
  const subscribed = s.subscribe('a', 'u1', expiresAt)
  t.same(first, [{ session: 'a', uri: 'u1', subscribed: true }], 'announced before the promise settles')
  await subscribed
  await s.subscribe('a', 'u1', expiresAt)
  await s.unsubscribe('a', 'u2')
  await s.unsubscribe('a', 'u1')
  await s.unsubscribe('a', 'u1')
  await s.subscribe('a', 'u3', expiresAt)
  await s.drop('a')
  const expected = [
    { session: 'a', uri: 'u1', subscribed: true },
    { session: 'a', uri: 'u1', subscribed: false },
    { session: 'a', uri: 'u3', subscribed: true },
    { session: 'a', uri: undefined, subscribed: false }
  ]
  t.same(first, expected, 'present, an unknown unsubscribe and a repeated one announce nothing')
  t.same(second, expected, 'every handler hears the same')
})

t.test('a handler that throws stops neither the others nor the store', async t => {
  const s = store()
  s.onChange(() => { throw new Error('a broken listener') })
  const changes = changesOf(s)
  t.equal(await s.subscribe('a', 'u', Date.now() + HOUR), 'added')
  await s.drop('a')
  t.same(changes.map(change => change.subscribed), [true, false], 'the handler after it heard both changes')
  t.same(await s.list('a'), [], 'and the drop happened')
})

t.test('drop removes the session\'s subscriptions and its stream\'s claim, and nobody else\'s', async t => {
  const s = store()
  const expiresAt = Date.now() + HOUR
  await s.subscribe('a', 'u', expiresAt)
  await s.subscribe('b', 'u', expiresAt)
  t.ok(await s.claim('a', 'node-1', 1000))
  t.ok(await s.claim('b', 'node-1', 1000))
  await s.drop('a')
  t.same(await s.list('a'), [])
  t.same(await s.list('b'), ['u'], 'session b keeps its subscription')
  t.ok(await s.claim('a', 'node-2', 1000), 'a\'s claim went with it')
  t.notOk(await s.claim('b', 'node-2', 1000), 'b\'s claim stays')
  await s.drop('never')
  t.same(await s.list('b'), ['u'], 'dropping a session that holds nothing changes nothing')
  t.equal(await s.subscribe('b', 'v', expiresAt), 'added', 'and the count stays right')
})

t.test('a session\'s subscriptions vanish at its expiresAt', async t => {
  const clock = fakeClock(t)
  const s = store()
  const changes = changesOf(s)
  await s.subscribe('a', 'u', clock.now + 1000)
  await s.subscribe('b', 'u', clock.now + 5000)
  clock.advance(999)
  t.same(await s.list('a'), ['u'], 'still there 1 ms before')
  clock.advance(1)
  t.same(await s.list('a'), [], 'gone at expiresAt')
  t.equal(changes.length, 2, 'silently, as Redis expires a key: the session\'s streams end by its expiry')
  t.same(await s.list('b'), ['u'], 'another session lives on')
  t.equal(await s.subscribe('a', 'v', clock.now + 1000), 'added', 'the expired session starts afresh')
  t.same(await s.list('a'), ['v'])
})

t.test('an expired session\'s subscriptions count for nothing against its bound', async t => {
  const clock = fakeClock(t)
  const s = store({ maxSubscriptionsPerSession: 1 })
  await s.subscribe('a', 'u', clock.now + 1000)
  clock.advance(1000)
  t.equal(await s.subscribe('a', 'v', clock.now + 1000), 'added')
})

t.test('the total cap refuses nothing: it drops the largest session\'s oldest subscriptions, announced', async t => {
  const clock = fakeClock(t)
  // A batch of max(1, floor(4/20)) = 1.
  const s = store({ maxSubscriptionsPerSession: 10, maxSubscriptions: 4 })
  const changes = changesOf(s)
  const expiresAt = clock.now + HOUR
  await s.subscribe('small', 's1', expiresAt)
  for (const uri of ['b1', 'b2', 'b3']) await s.subscribe('big', uri, expiresAt)
  t.equal(await s.subscribe('newcomer', 'n1', expiresAt), 'added', 'a fifth subscription is added, not refused')
  t.same(await s.list('big'), ['b2', 'b3'], 'the largest session lost its oldest')
  t.same(await s.list('small'), ['s1'])
  t.same(await s.list('newcomer'), ['n1'])
  t.same(changes.at(-2), { session: 'big', uri: 'b1', subscribed: false }, 'the stream is told what it lost')
  t.same(changes.at(-1), { session: 'newcomer', uri: 'n1', subscribed: true })

  t.equal(await s.subscribe('newcomer', 'n2', expiresAt), 'added')
  t.same(await s.list('big'), ['b3'], 'big, still the largest, loses its next oldest')
  t.equal(await s.subscribe('newcomer', 'n3', expiresAt), 'added')
  t.same([await s.list('small'), await s.list('big'), await s.list('newcomer')], [['s1'], ['b3'], ['n2', 'n3']],
    'then newcomer was the largest')
})

t.test('sessions of equal size lose their subscriptions by age, across sessions', async t => {
  const s = store({ maxSubscriptions: 4 })
  const expiresAt = Date.now() + HOUR
  await s.subscribe('a', 'a1', expiresAt)
  await s.subscribe('b', 'b1', expiresAt)
  await s.subscribe('b', 'b2', expiresAt)
  await s.subscribe('a', 'a2', expiresAt)
  await s.subscribe('c', 'c1', expiresAt)
  t.same([await s.list('a'), await s.list('b')], [['a2'], ['b1', 'b2']], 'a1, the oldest of the two largest, went')
})

t.test('making room drops expired sessions first, and only them when that is enough', async t => {
  const clock = fakeClock(t)
  const s = store({ maxSubscriptions: 4 })
  const changes = changesOf(s)
  await s.subscribe('short', 'x1', clock.now + 1000)
  await s.subscribe('short', 'x2', clock.now + 1000)
  await s.subscribe('long', 'l1', clock.now + HOUR)
  await s.subscribe('long', 'l2', clock.now + HOUR)
  clock.advance(1000)
  t.equal(await s.subscribe('long', 'l3', clock.now + HOUR), 'added')
  t.same(await s.list('long'), ['l1', 'l2', 'l3'], 'no live subscription was dropped')
  t.same(changes.filter(change => !change.subscribed), [], 'the expired session went, silently, and made the room')
})

t.test('a batch of max(1, floor(maxSubscriptions/20)) is dropped at a time', async t => {
  for (const [maxSubscriptions, batch] of [[10, 1], [20, 1], [40, 2], [100, 5]] as const) {
    const s = store({ maxSubscriptionsPerSession: Infinity, maxSubscriptions })
    const changes = changesOf(s)
    const expiresAt = Date.now() + HOUR
    for (let i = 0; i < maxSubscriptions; i++) await s.subscribe('a', `u${i}`, expiresAt)
    t.equal(changes.filter(change => !change.subscribed).length, 0, `${maxSubscriptions}: nothing dropped while filling`)
    await s.subscribe('b', 'u', expiresAt)
    const dropped = changes.filter(change => !change.subscribed).map(change => change.uri)
    t.same(dropped, Array.from({ length: batch }, (_, i) => `u${i}`), `${maxSubscriptions}: the oldest ${batch} in one batch`)
    for (let i = 1; i < batch; i++) await s.subscribe('b', `v${i}`, expiresAt)
    t.equal(changes.filter(change => !change.subscribed).length, batch, `${maxSubscriptions}: the batch made room for ${batch} subscriptions`)
  }
})

t.test('a claim: one holder per session, renewed by it, lapsing after leaseMs, released by it only', async t => {
  const clock = fakeClock(t)
  const s = store()
  t.ok(await s.claim('a', 'node-1', 1000), 'a free session is claimed')
  t.ok(await s.claim('a', 'node-1', 1000), 'its holder claims it again')
  t.notOk(await s.claim('a', 'node-2', 1000), 'another holder is refused')
  t.ok(await s.claim('b', 'node-2', 1000), 'another session is free')

  clock.advance(900)
  t.same(await s.renew([{ session: 'a', holder: 'node-1' }, { session: 'b', holder: 'node-1' }], 1000),
    [true, false], 'renew extends the holder\'s claims, never another holder\'s')
  clock.advance(900)
  t.notOk(await s.claim('a', 'node-2', 1000), 'the renewed claim still holds after the first lease')
  t.ok(await s.claim('b', 'node-1', 1000), 'the claim that was not renewed lapsed')

  clock.advance(1000)
  t.same(await s.renew([{ session: 'a', holder: 'node-1' }, { session: 'c', holder: 'node-1' }], 1000), [true, true],
    'a claim nobody holds (lapsed, or never made) is taken again by its renewal')
  t.notOk(await s.claim('a', 'node-2', 1000), 'and is its holder\'s again')
  clock.advance(1000)
  t.ok(await s.claim('a', 'node-2', 1000), 'once lapsed, another holder may take it')
  t.same(await s.renew([{ session: 'a', holder: 'node-1' }], 1000), [false], 'and then its renewal is refused')

  await s.release('a', 'node-1')
  t.notOk(await s.claim('a', 'node-1', 1000), 'a release by another holder leaves the claim alone')
  await s.release('a', 'node-2')
  t.ok(await s.claim('a', 'node-1', 1000), 'its holder\'s release frees it')
  t.same(await s.renew([], 1000), [])
})

t.test('lapsed claims nobody touches again are forgotten', async t => {
  const clock = fakeClock(t)
  const s = store()
  for (let i = 0; i < 1000; i++) await s.claim(`s${i}`, 'node-1', 1000)
  t.equal(s.claims, 1000)
  clock.advance(1000)
  await s.claim('new', 'node-1', 1000)
  t.equal(s.claims, 1, 'the next claim swept the lapsed ones')
})
