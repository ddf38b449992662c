/**
 * MemoryCancellationStore, the in-process cancellation table (DESIGN §4), against the ConduitMCP edge cases
 * (reference/conduit-cancellation.md §5, cases 5–35 "C") with this project's deliberate differences:
 * type-exact keys, one in-flight row per owner, idempotent repeated cancels.
 */
import t from 'tap'
import { MemoryCancellationStore, type MemoryCancellationStoreOptions } from '../../lib/lifecycle/memory-cancellation-store.js'
import type { CancellationSource } from '../../lib/core/vocabulary.js'
import type { InFlightOwner } from '../../lib/lifecycle/cancellation-store.js'
import type { RequestId } from '../../lib/core/jsonrpc.js'
import { fakeClock } from '../helpers/clock.js'

/** An in-flight owner that records the cancellations it is told about. */
class RecordingOwner implements InFlightOwner {
  readonly cancels: Array<[string | null, CancellationSource]> = []
  alive = true
  cancel (reason: string | null, source: CancellationSource): void {
    this.cancels.push([reason, source])
  }
}

function store (options: Partial<MemoryCancellationStoreOptions> = {}): MemoryCancellationStore {
  return new MemoryCancellationStore({ maxRows: 10_000, maxRowsPerScope: 256, ...options })
}

/** The ids of `scope` that still have a row, among `ids`. */
function present (s: MemoryCancellationStore, scope: string, ids: readonly RequestId[]): RequestId[] {
  return ids.filter(id => s.row(id, scope) !== undefined)
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i)

t.test('cancel records a row with its reason; the key is type-exact (C5, C6)', async t => {
  const s = store()
  t.equal(s.cancel(42, 'user pressed stop', 's'), 'recorded')
  t.equal(s.row(42, 's')?.reason, 'user pressed stop')
  t.equal(s.row(42, 's')?.scope, 's')
  t.equal(s.row(42, 's')?.requestId, 42)
  t.equal(s.row('42', 's'), undefined, '"42" is another request than 42')
  t.equal(s.cancel('req-1', 'timeout', 's'), 'recorded')
  t.equal(s.row('req-1', 's')?.reason, 'timeout')
  t.equal(s.cancel('1', null, 's'), 'recorded')
  t.equal(s.row('1', 's')?.reason, null, 'a null reason stays null')
  t.equal(s.row(1, 's'), undefined, '1 is another request than "1"')
  t.equal(s.rows, 3)
})

t.test('scopes are separate namespaces (C12–C15)', async t => {
  const s = store()
  s.cancel(1, null, 'session:a')
  t.ok(s.row(1, 'session:a'), 'session a is cancelled')
  t.equal(s.row(1, 'session:b'), undefined, 'session b with the same id is not')

  s.cancel('7', null, 'principal:alice')
  t.ok(s.row('7', 'principal:alice'))
  t.equal(s.row('7', 'principal:bob'), undefined)

  s.cancel('x', null, 'A')
  s.cancel('x', null, 'B')
  s.clear('x', 'A')
  t.equal(s.row('x', 'A'), undefined, 'clear removes A\'s row')
  t.ok(s.row('x', 'B'), 'B\'s row with the same id stays')
  t.equal(s.rows, 3)
})

t.test('a principal named like an address shares nothing with that address (C14)', async t => {
  const s = store({ maxRowsPerScope: 1 })
  t.equal(s.cancel('1', null, 'principal:203.0.113.9'), 'recorded')
  t.equal(s.cancel('2', null, 'ip:203.0.113.9'), 'recorded', 'the anonymous client has its own quota')
  t.equal(s.row('1', 'ip:203.0.113.9'), undefined, 'and its own ids')
})

t.test('clear is idempotent and only removes existing rows (C26)', async t => {
  const s = store()
  s.cancel('gone', null, 's')
  s.clear('gone', 's')
  s.clear('gone', 's')
  s.clear('never', 's')
  t.equal(s.row('gone', 's'), undefined)
  t.equal(s.rows, 0)
  t.equal(s.cancel('gone', null, 's'), 'recorded', 'a cleared id can be cancelled again')
})

t.test('a repeated cancel is idempotent: first reason kept, no quota consumed', async t => {
  const s = store({ maxRowsPerScope: 1 })
  t.equal(s.cancel(1, 'first', 's'), 'recorded')
  t.equal(s.cancel(1, 'second', 's'), 'recorded', 'the repeat is not rejected by the full quota')
  t.equal(s.row(1, 's')?.reason, 'first', 'the first reason is kept')
  t.equal(s.rows, 1, 'no second row')
  t.equal(s.cancel(2, null, 's'), 'rejected', 'the quota is still exactly one row')

  const owner = new RecordingOwner()
  s.track(1, 's', owner)
  t.equal(s.cancelInFlight(1, 'third', 's'), 'recorded', 'a client repeat of an existing row is accepted too')
  t.equal(s.row(1, 's')?.reason, 'first')
  t.equal(owner.cancels.length, 1, 'the in-flight owner is aborted')
  t.equal(owner.cancels[0]?.[1], 'client')
})

t.test('the repeat keeps the first row\'s age', async t => {
  const clock = fakeClock(t)
  const s = store()
  s.cancel(1, null, 's')
  const at = s.row(1, 's')?.at
  clock.advance(1000)
  s.cancel(1, null, 's')
  t.equal(s.row(1, 's')?.at, at)
})

t.test('per-scope quota rejects while other scopes are served (C18)', async t => {
  const s = store({ maxRowsPerScope: 3 })
  t.same(['flood-1', 'flood-2', 'flood-3'].map(id => s.cancel(id, null, 'attacker')), ['recorded', 'recorded', 'recorded'])
  t.equal(s.cancel('flood-4', null, 'attacker'), 'rejected')
  t.equal(s.row('flood-4', 'attacker'), undefined, 'a rejected cancel writes nothing')
  t.equal(s.cancel('mine', null, 'victim'), 'recorded', 'another scope is served')
  t.equal(s.rows, 4)
  s.clear('flood-1', 'attacker')
  t.equal(s.cancel('flood-4', null, 'attacker'), 'recorded', 'a cleared row frees quota')
})

t.test('a client cancel over quota is rejected and does not abort the owner', async t => {
  const s = store({ maxRowsPerScope: 1 })
  s.cancel('other', null, 's')
  const owner = new RecordingOwner()
  s.track(9, 's', owner)
  t.equal(s.cancelInFlight(9, 'stop', 's'), 'rejected')
  t.same(owner.cancels, [], 'the owner keeps running')
  t.equal(s.row(9, 's'), undefined)
})

t.test('the quota is checked before the global cap: a full scope evicts nobody (DESIGN §4)', async t => {
  const evictions: number[] = []
  const s = store({ maxRows: 4, maxRowsPerScope: 2, onEvicted: n => { evictions.push(n) } })
  s.cancel('a', null, 's1')
  s.cancel('b', null, 's1')
  s.cancel('c', null, 's2')
  s.cancel('d', null, 's2')
  t.equal(s.cancel('e', null, 's1'), 'rejected')
  t.equal(s.rows, 4)
  t.same(evictions, [], 'no row was evicted for a rejected cancel')
  t.same(present(s, 's1', ['a', 'b']), ['a', 'b'])
})

t.test('per-scope Infinity: 300 rows in one scope (C19)', async t => {
  const s = store({ maxRowsPerScope: Infinity })
  const outcomes = range(1, 300).map(i => s.cancel(i, null, 's'))
  t.ok(outcomes.every(o => o === 'recorded'), 'all recorded')
  t.equal(s.rows, 300)
})

t.test('maxRows Infinity: nothing is ever evicted (C17)', async t => {
  const evictions: number[] = []
  const s = store({ maxRows: Infinity, maxRowsPerScope: Infinity, onEvicted: n => { evictions.push(n) } })
  const outcomes = range(1, 1000).map(i => s.cancel(i, null, `scope-${i % 3}`))
  t.ok(outcomes.every(o => o === 'recorded'), 'all recorded')
  t.equal(s.rows, 1000)
  t.same(evictions, [])
  t.ok(s.row(1, 'scope-1'), 'the oldest row is still there')
})

t.test('global cap never rejects; the newest row survives (C16)', async t => {
  const clock = fakeClock(t)
  const s = store({ maxRows: 2, maxRowsPerScope: Infinity })
  t.same(['a', 'b', 'c'].map(id => { clock.advance(1); return s.cancel(id, null, 's') }), ['recorded', 'recorded', 'recorded'])
  t.ok(s.rows <= 2, `at most maxRows rows (got ${s.rows})`)
  t.ok(s.row('c', 's'), 'c, the newest, is present')
  t.equal(s.row('a', 's'), undefined, 'a, the oldest, was evicted (batch of 1)')
  t.ok(s.row('b', 's'))
})

t.test('eviction batch is max(1, floor(maxRows/20))', async t => {
  for (const [maxRows, batch] of [[1, 1], [19, 1], [20, 1], [40, 2], [59, 2], [60, 3], [100, 5], [1000, 50]] as const) {
    const evictions: number[] = []
    const s = store({ maxRows, maxRowsPerScope: Infinity, onEvicted: n => { evictions.push(n) } })
    for (const i of range(1, maxRows)) s.cancel(i, null, 's')
    t.same(evictions, [], `maxRows ${maxRows}: no eviction while filling`)
    t.equal(s.cancel('over', null, 's'), 'recorded')
    t.same(evictions, [batch], `maxRows ${maxRows}: one batch of ${batch}`)
    t.equal(s.rows, maxRows - batch + 1, `maxRows ${maxRows}: ${maxRows - batch + 1} rows left`)
    t.same(present(s, 's', range(1, Math.min(batch + 1, maxRows))), batch < maxRows ? [batch + 1] : [],
      `maxRows ${maxRows}: the ${batch} oldest went`)
    t.ok(s.row('over', 's'), `maxRows ${maxRows}: the new row is present`)
  }
})

t.test('largest scope first, oldest first within it (C21)', async t => {
  const clock = fakeClock(t)
  const evictions: number[] = []
  const s = store({ maxRows: 100, maxRowsPerScope: Infinity, onEvicted: n => { evictions.push(n) } })
  for (const i of [1, 2]) { clock.advance(1); s.cancel(`bystander-${i}`, null, 'bystander') }
  for (const i of range(1, 98)) { clock.advance(1); s.cancel(`hog-${i}`, null, 'hog') }
  t.equal(s.rows, 100)
  clock.advance(1)
  t.equal(s.cancel('small-1', null, 'small'), 'recorded')
  t.same(evictions, [5])
  t.equal(s.rows, 96)
  t.same(present(s, 'bystander', ['bystander-1', 'bystander-2']), ['bystander-1', 'bystander-2'], 'the older bystander keeps both rows')
  t.ok(s.row('small-1', 'small'), 'the caller\'s row is present')
  const hogIds = range(1, 98).map(i => `hog-${i}`)
  t.equal(present(s, 'hog', hogIds).length, 93, 'hog lost exactly 5')
  t.same(present(s, 'hog', hogIds.slice(0, 6)), ['hog-6'], 'hog-1..hog-5 gone, hog-6 present')
})

t.test('a batch spills into the next largest scope (C22)', async t => {
  const clock = fakeClock(t)
  const s = store({ maxRows: 100, maxRowsPerScope: Infinity })
  for (const i of range(1, 91)) { clock.advance(1); s.cancel(1, null, `single-${i}`) }
  for (const i of range(1, 2)) { clock.advance(1); s.cancel(`small-${i}`, null, 'small') }
  for (const i of range(1, 3)) { clock.advance(1); s.cancel(`mid-${i}`, null, 'mid') }
  for (const i of range(1, 4)) { clock.advance(1); s.cancel(`big-${i}`, null, 'big') }
  t.equal(s.rows, 100)
  clock.advance(1)
  t.equal(s.cancel('mine', null, 'caller'), 'recorded')
  t.equal(s.rows, 96)
  t.same(present(s, 'big', ['big-1', 'big-2', 'big-3', 'big-4']), [], 'big lost every row')
  t.same(present(s, 'mid', ['mid-1', 'mid-2', 'mid-3']), ['mid-2', 'mid-3'], 'mid lost its oldest')
  t.same(present(s, 'small', ['small-1', 'small-2']), ['small-1', 'small-2'], 'small is untouched')
  t.equal(range(1, 91).filter(i => s.row(1, `single-${i}`) !== undefined).length, 91, 'all 91 single rows remain')
  t.ok(s.row('mine', 'caller'))
  t.equal(s.cancel('big-5', null, 'big'), 'recorded', 'an emptied scope can record again')
})

t.test('all scopes of one row: the globally oldest go, by age not insertion order (C23)', async t => {
  const clock = fakeClock(t)
  const s = store({ maxRows: 100, maxRowsPerScope: Infinity })
  // Inserted newest first: scope-100 is written first but carries the latest time.
  for (let i = 100; i >= 1; i--) { clock.set(1_000_000 + i); s.cancel(1, null, `scope-${i}`) }
  clock.set(2_000_000)
  t.equal(s.cancel(1, null, 'caller'), 'recorded')
  t.equal(s.rows, 96)
  t.same(range(1, 6).filter(i => s.row(1, `scope-${i}`) !== undefined), [6], 'scope-1..5 (the oldest) were evicted')
  t.equal(range(6, 100).filter(i => s.row(1, `scope-${i}`) !== undefined).length, 95, 'scope-6..100 remain')
  t.ok(s.row(1, 'caller'))
})

t.test('scopes of equal size are taken together, by age', async t => {
  const clock = fakeClock(t)
  const s = store({ maxRows: 100, maxRowsPerScope: Infinity })
  for (const i of range(1, 48)) {
    clock.advance(1); s.cancel(i, null, 'A')
    clock.advance(1); s.cancel(i, null, 'B')
  }
  for (const i of range(1, 4)) { clock.advance(1); s.cancel(1, null, `single-${i}`) }
  clock.advance(1)
  s.cancel(1, null, 'caller')
  t.same(present(s, 'A', [1, 2, 3, 4]), [4], 'A lost 1, 2, 3')
  t.same(present(s, 'B', [1, 2, 3]), [3], 'B lost 1, 2')
  t.equal(s.rows, 96)
})

t.test('the quota keeps a victim served while attackers fill the table (C20)', async t => {
  const clock = fakeClock(t)
  const s = store({ maxRows: 100, maxRowsPerScope: 20 })
  for (const a of range(1, 6)) {
    for (const i of range(1, 20)) { clock.advance(1); s.cancel(i, null, `attacker-${a}`) }
  }
  t.ok(s.rows <= 100, `the table holds at most 100 rows (got ${s.rows})`)
  clock.advance(1)
  t.equal(s.cancel('v-1', null, 'victim'), 'recorded', 'the victim\'s first cancel is recorded')
  t.ok(s.row('v-1', 'victim'))
  for (const i of range(2, 20)) { clock.advance(1); t.equal(s.cancel(`v-${i}`, null, 'victim'), 'recorded', `v-${i}`) }
  t.equal(s.cancel('v-over', null, 'victim'), 'rejected', 'the 21st is over the victim\'s own quota')
  t.ok(s.rows <= 100)
})

t.test('track / untrack / inFlight (C27, C29)', async t => {
  const s = store()
  const owner = {}
  s.track(7, 'a', owner)
  t.ok(s.inFlight(7, 'a'))
  t.notOk(s.inFlight('7', 'a'), '"7" is another request than 7')
  t.notOk(s.inFlight(7, 'b'), 'another scope')
  t.notOk(s.inFlight(70, 'a'), 'another id')
  t.equal(s.inFlightRows, 1)
  s.track(7, 'a', owner)
  t.equal(s.inFlightRows, 1, 'tracking the same owner twice is one row')
  s.untrack(7, 'a', owner)
  t.notOk(s.inFlight(7, 'a'))
  t.equal(s.inFlightRows, 0)
  s.untrack(7, 'a', owner)
  s.untrack(8, 'a', {})
  t.equal(s.inFlightRows, 0, 'untracking what is not tracked is a no-op')
})

t.test('two owners on one key: one untracking leaves the other in flight (C28)', async t => {
  const s = store()
  const first = new RecordingOwner()
  const second = new RecordingOwner()
  s.track('dup', 's', first)
  s.track('dup', 's', second)
  t.equal(s.inFlightRows, 2)
  s.untrack('dup', 's', first)
  t.ok(s.inFlight('dup', 's'), 'the other owner is still in flight')
  t.equal(s.inFlightRows, 1)
  t.equal(s.cancelInFlight('dup', 'stop', 's'), 'recorded')
  t.same(first.cancels, [], 'the untracked owner is not told')
  t.same(second.cancels, [['stop', 'client']], 'the remaining owner is cancelled')
  s.untrack('dup', 's', second)
  t.notOk(s.inFlight('dup', 's'))
})

t.test('cancelInFlight only touches a request in flight in that scope', async t => {
  const s = store()
  const owner = new RecordingOwner()
  s.track(1, 'mine', owner)
  t.equal(s.cancelInFlight(1, 'x', 'theirs'), 'ignored', 'another scope\'s id 1')
  t.equal(s.cancelInFlight('1', 'x', 'mine'), 'ignored', '"1" is not in flight')
  t.equal(s.cancelInFlight(2, 'x', 'mine'), 'ignored', 'an unknown id')
  t.equal(s.rows, 0, 'nothing was written')
  t.same(owner.cancels, [])
  t.equal(s.cancelInFlight(1, 'x', 'mine'), 'recorded')
  t.same(owner.cancels, [['x', 'client']])
  t.equal(s.row(1, 'mine')?.reason, 'x')
})

t.test('the library cancel records whether or not in flight, and aborts what is', async t => {
  const s = store()
  t.equal(s.cancel('later', null, 's'), 'recorded', 'not in flight: recorded anyway')
  const owners = [new RecordingOwner(), new RecordingOwner()]
  for (const owner of owners) s.track(5, 's', owner)
  t.equal(s.cancel(5, 'shutdown', 's'), 'recorded')
  t.same(owners.map(o => o.cancels), [[['shutdown', 'server']], [['shutdown', 'server']]], 'every owner of the key is aborted')
})

t.test('cleanup removes rows strictly older than ttlMs (C30, C35)', async t => {
  const clock = fakeClock(t)
  const s = store()
  s.cancel('stale', null, 's')
  clock.advance(30_000)
  s.cancel('boundary', null, 's')
  clock.advance(30_000)
  s.cancel('fresh', null, 's')
  t.same(s.cleanup(30_000), { removed: 1, inFlightRemoved: 0 })
  t.equal(s.row('stale', 's'), undefined, 'the 60 s old row is gone')
  t.ok(s.row('boundary', 's'), 'a row exactly ttlMs old is kept')
  t.ok(s.row('fresh', 's'))
  clock.advance(1)
  t.same(s.cleanup(30_000), { removed: 1, inFlightRemoved: 0 }, 'one ms later it is removed')
  t.same(s.cleanup(30_000), { removed: 0, inFlightRemoved: 0 })
  t.equal(s.rows, 1)
  t.equal(s.cancel('stale', null, 's'), 'recorded', 'the removed rows gave their quota back')
})

t.test('cleanup frees quota of removed rows', async t => {
  const clock = fakeClock(t)
  const s = store({ maxRowsPerScope: 2 })
  s.cancel(1, null, 's')
  s.cancel(2, null, 's')
  t.equal(s.cancel(3, null, 's'), 'rejected')
  clock.advance(10_001)
  s.cleanup(10_000)
  t.equal(s.cancel(3, null, 's'), 'recorded')
})

t.test('cleanup removes in-flight rows of ended owners only (C31, C32)', async t => {
  const s = store()
  const leaked = new RecordingOwner()
  const live = new RecordingOwner()
  const shared = new RecordingOwner()
  s.track('leaked', 's', leaked)
  s.track('live', 's', live)
  s.track('shared', 's', shared)
  s.track('shared', 's', live)
  s.track('plain', 's', {}) // no `alive`: a library caller's token, never swept
  leaked.alive = false
  shared.alive = false
  t.same(s.cleanup(30_000), { removed: 0, inFlightRemoved: 2 })
  t.notOk(s.inFlight('leaked', 's'), 'the leaked row is gone')
  t.ok(s.inFlight('live', 's'))
  t.ok(s.inFlight('shared', 's'), 'the live owner of "shared" remains')
  t.ok(s.inFlight('plain', 's'))
  t.equal(s.inFlightRows, 3)
  t.equal(s.cancelInFlight('shared', null, 's'), 'recorded')
  t.same(shared.cancels, [], 'the swept owner is not aborted')
  t.same(live.cancels, [[null, 'client']])
})
