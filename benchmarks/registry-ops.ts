/**
 * Operations per second of the cancellation store, in this process: `MemoryCancellationStore`
 * (lib/lifecycle/memory-cancellation-store.ts) constructed directly with the plugin's default bounds (maxRows
 * 10 000, maxRowsPerScope 256) and callbacks of the shape lib/plugin/stores.ts passes (into the
 * no-op observer). Keys are numeric request ids (as SDK clients send) in `ip:…` scopes.
 *
 * - track+untrack: one pair per request (the transport's begin/finish), 1000 other requests in flight.
 * - row() miss / hit and inFlight() hit / miss: the lookups of `cancelled()`, `reason()`, `inFlight()`
 *   and `finish` (1000 rows and 1000 in-flight requests present; the miss is the common case).
 * - cancel, in-flight owner: `cancel` (the library call) of a request with one in-flight owner: writes
 *   the row and calls the owner's `cancel` (a no-op counter here, so only the store is timed); and the
 *   same through `cancelInFlight` (the notifications/cancelled path). Timed in batches of 250 over 50
 *   scopes; tracking before and untrack+clear after each batch are not timed.
 * - cancel, new row below the cap: `cancel` without an owner, store at 9000 rows: the insert alone.
 * - cancel at the global cap: the store full (10 000 rows over 100 scopes), every `cancel` of a new id
 *   must make room: one eviction (a sort of all 10 000 rows) frees a batch of 500, so one insert in 500
 *   pays for it. Reported amortised, and the evicting inserts on their own.
 *
 * Each operation is warmed up, then timed `BENCH_ROUNDS` times (default 7 here; ≈ 0.25 s each),
 * operations interleaved; the table shows the median repetition, and the spread of all of them.
 *
 * `npm run bench -- registry-ops [operation…]` (names as in the table's first column before the colon).
 */
import { MemoryCancellationStore } from '../lib/lifecycle/memory-cancellation-store.js'
import type { InFlightOwner } from '../lib/lifecycle/cancellation-store.js'
import { noopObserver } from '../lib/observability/observer.js'
import type { Benchmark } from './support/benchmark.js'
import { describeLoad, median, printLatencyEnvironment, watchLoad } from './support/latency.js'
import { waitForQuiet } from './support/noise.js'
import { printTable } from './support/report.js'

/** The plugin's defaults (lib/plugin/options.ts). */
const MAX_ROWS = 10_000
const MAX_ROWS_PER_SCOPE = 256
const EVICTION_BATCH = MAX_ROWS / 20
/** Timed work per repetition. */
const TARGET_MS = 250
const DEFAULT_REPETITIONS = 7

const scopeNames = (count: number, prefix: string): string[] => Array.from({ length: count }, (_, i) => `ip:10.${prefix}.${i >> 8}.${i & 255}`)

let evicted = 0
let rowsDelta = 0
function newStore (): MemoryCancellationStore {
  return new MemoryCancellationStore({
    maxRows: MAX_ROWS,
    maxRowsPerScope: MAX_ROWS_PER_SCOPE,
    onRowsChanged: delta => { rowsDelta += delta; noopObserver.rows(delta) },
    onEvicted: count => { evicted += count; noopObserver.evicted(count) }
  })
}

let ownerCancels = 0
const newOwner = (): InFlightOwner => ({ cancel: () => { ownerCancels++ } })

/** One timed repetition: operations done, timed ns, and extra figures. */
interface Repetition { ops: number, ns: number, evictions?: { count: number, ns: number } }

/** Id source: every operation gets ids no other has used, as every request has its own. */
let nextId = 1

function check (condition: boolean, what: string): void {
  if (!condition) throw new Error(`registry-ops: ${what}`)
}

/** Runs `batch` (returns ops done and ns timed) until `TARGET_MS` of timed work. */
function repeat (batch: () => { ops: number, ns: number }): Repetition {
  let ops = 0
  let ns = 0
  while (ns < TARGET_MS * 1e6) {
    const done = batch()
    ops += done.ops
    ns += done.ns
  }
  return { ops, ns }
}

const elapsedNs = (from: number): number => (performance.now() - from) * 1e6

interface Operation { name: string, label: string, run: () => Repetition }

/** A store with `inFlight` tracked requests and `rows` cancellation rows spread over 100 scopes. */
function populated (inFlight: number, rows: number): { store: MemoryCancellationStore, scopes: string[], tracked: Array<[number, string]>, recorded: Array<[number, string]> } {
  const store = newStore()
  const scopes = scopeNames(100, '1')
  const tracked: Array<[number, string]> = []
  const recorded: Array<[number, string]> = []
  for (let i = 0; i < inFlight; i++) {
    const entry: [number, string] = [nextId++, scopes[i % scopes.length]!]
    store.track(entry[0], entry[1], newOwner())
    tracked.push(entry)
  }
  for (let i = 0; i < rows; i++) {
    const entry: [number, string] = [nextId++, scopes[i % scopes.length]!]
    check(store.cancel(entry[0], 'bench', entry[1]) === 'recorded', 'setup cancel not recorded')
    recorded.push(entry)
  }
  return { store, scopes, tracked, recorded }
}

const LOOKUP_BATCH = 10_000

const OPERATIONS: Operation[] = [
  {
    name: 'track+untrack',
    label: 'track+untrack: one pair (1000 others in flight)',
    run () {
      const { store, scopes } = populated(1000, 0)
      const owners = Array.from({ length: 1024 }, newOwner)
      const rep = repeat(() => {
        const first = nextId
        const start = performance.now()
        for (let i = 0; i < LOOKUP_BATCH; i++) {
          const id = first + i
          const scope = scopes[i % 100]!
          const owner = owners[i & 1023]!
          store.track(id, scope, owner)
          store.untrack(id, scope, owner)
        }
        const ns = elapsedNs(start)
        nextId += LOOKUP_BATCH
        return { ops: LOOKUP_BATCH, ns }
      })
      check(store.inFlightRows === 1000, `in-flight rows ${store.inFlightRows} after track+untrack, expected 1000`)
      return rep
    }
  },
  ...lookup('row-miss', 'row() miss: cancelled() of a request not cancelled', (store, id, scope) => store.row(id, scope) !== undefined, 'fresh'),
  ...lookup('row-hit', 'row() hit: cancelled()/reason() of a cancelled request', (store, id, scope) => store.row(id, scope) !== undefined, 'recorded'),
  ...lookup('inflight-hit', 'inFlight() hit', (store, id, scope) => store.inFlight(id, scope), 'tracked'),
  ...lookup('inflight-miss', 'inFlight() miss (finish() of the last owner)', (store, id, scope) => store.inFlight(id, scope), 'fresh'),
  cancelWithOwner('cancel', 'cancel, in-flight owner: row written, owner cancelled', (store, id, reason, scope) => store.cancel(id, reason, scope)),
  cancelWithOwner('cancel-in-flight', 'cancelInFlight, in-flight owner (notifications/cancelled)', (store, id, reason, scope) => store.cancelInFlight(id, reason, scope) as string),
  {
    name: 'cancel-below-cap',
    label: 'cancel, new row below the cap (9000 rows, no owner)',
    run () {
      const { store } = populated(0, MAX_ROWS - 1000)
      const scopes = scopeNames(50, '2')
      const BATCH = 500
      const ids = new Array<number>(BATCH)
      return repeat(() => {
        for (let i = 0; i < BATCH; i++) ids[i] = nextId++
        const start = performance.now()
        for (let i = 0; i < BATCH; i++) store.cancel(ids[i]!, 'bench', scopes[i % 50]!)
        const ns = elapsedNs(start)
        check(store.rows === MAX_ROWS - 1000 + BATCH, `rows ${store.rows} after a batch below the cap`)
        for (let i = 0; i < BATCH; i++) store.clear(ids[i]!, scopes[i % 50]!)
        return { ops: BATCH, ns }
      })
    }
  },
  {
    name: 'cancel-at-cap',
    label: `cancel at the global cap (10 000 rows; eviction of ${EVICTION_BATCH} amortised)`,
    run () {
      const { store, scopes } = populated(0, MAX_ROWS)
      const evictedBefore = evicted
      let evictions = 0
      let evictionNs = 0
      const rep = repeat(() => {
        // The first insert finds the store full and evicts; the other 499 refill it.
        check(store.rows === MAX_ROWS, `rows ${store.rows} at the start of a batch, expected ${MAX_ROWS}`)
        const first = nextId
        nextId += EVICTION_BATCH
        let start = performance.now()
        store.cancel(first, 'bench', scopes[first % 100]!)
        const evictNs = elapsedNs(start)
        start = performance.now()
        for (let i = 1; i < EVICTION_BATCH; i++) store.cancel(first + i, 'bench', scopes[(first + i) % 100]!)
        const restNs = elapsedNs(start)
        evictions++
        evictionNs += evictNs
        return { ops: EVICTION_BATCH, ns: evictNs + restNs }
      })
      check(evicted - evictedBefore === evictions * EVICTION_BATCH, `${evicted - evictedBefore} rows evicted in ${evictions} batches, expected ${evictions * EVICTION_BATCH}`)
      return { ...rep, evictions: { count: evictions, ns: evictionNs } }
    }
  }
]

/** A lookup timed on 10 000 keys per batch: of tracked requests, of recorded rows, or never seen. */
function lookup (name: string, label: string, fn: (store: MemoryCancellationStore, id: number, scope: string) => boolean,
  keys: 'tracked' | 'recorded' | 'fresh'): Operation[] {
  return [{
    name,
    label,
    run () {
      const setup = populated(1000, 1000)
      const { store } = setup
      const pool = keys === 'tracked' ? setup.tracked : keys === 'recorded' ? setup.recorded : setup.tracked.map(([, scope]): [number, string] => [nextId++, scope])
      const expected = keys === 'fresh' ? 0 : LOOKUP_BATCH
      return repeat(() => {
        let hits = 0
        const start = performance.now()
        for (let i = 0; i < LOOKUP_BATCH; i++) {
          const [id, scope] = pool[i % 1000]!
          if (fn(store, id, scope)) hits++
        }
        const ns = elapsedNs(start)
        check(hits === expected, `${name}: ${hits} hits of ${LOOKUP_BATCH}, expected ${expected}`)
        return { ops: LOOKUP_BATCH, ns }
      })
    }
  }]
}

/** `cancel`/`cancelInFlight` of requests that each have one in-flight owner; 250 per batch over 50 scopes. */
function cancelWithOwner (name: string, label: string, fn: (store: MemoryCancellationStore, id: number, reason: string, scope: string) => string): Operation {
  return {
    name,
    label,
    run () {
      const store = newStore()
      const scopes = scopeNames(50, '3')
      const BATCH = 250
      const ids = new Array<number>(BATCH)
      const owners = Array.from({ length: BATCH }, newOwner)
      return repeat(() => {
        for (let i = 0; i < BATCH; i++) {
          ids[i] = nextId++
          store.track(ids[i]!, scopes[i % 50]!, owners[i]!)
        }
        const cancelsBefore = ownerCancels
        let recorded = 0
        const start = performance.now()
        for (let i = 0; i < BATCH; i++) if (fn(store, ids[i]!, 'bench', scopes[i % 50]!) === 'recorded') recorded++
        const ns = elapsedNs(start)
        check(recorded === BATCH && ownerCancels - cancelsBefore === BATCH, `${name}: ${recorded} recorded, ${ownerCancels - cancelsBefore} owners cancelled of ${BATCH}`)
        for (let i = 0; i < BATCH; i++) {
          store.untrack(ids[i]!, scopes[i % 50]!, owners[i]!)
          store.clear(ids[i]!, scopes[i % 50]!)
        }
        return { ops: BATCH, ns }
      })
    }
  }
}

const int = (n: number): string => Math.round(n).toLocaleString('en-US')

const registryOps: Benchmark = {
  description: 'MemoryCancellationStore operations per second: track/untrack, lookups, cancel, cancel at the global cap (eviction)',
  defaults: { rounds: DEFAULT_REPETITIONS },
  async run (config, args) {
    const unknown = args.filter(arg => !OPERATIONS.some(op => op.name === arg))
    if (unknown.length > 0) throw new Error(`unknown operation(s) ${unknown.join(', ')}; known: ${OPERATIONS.map(op => op.name).join(', ')}`)
    const operations = args.length > 0 ? OPERATIONS.filter(op => args.includes(op.name)) : OPERATIONS
    const repetitions = config.rounds

    printLatencyEnvironment()
    console.log(`MemoryCancellationStore in process (pid ${process.pid}), maxRows ${MAX_ROWS}, maxRowsPerScope ${MAX_ROWS_PER_SCOPE}; ${repetitions} repetitions of ≈ ${TARGET_MS} ms per operation after a warm-up one, interleaved`)
    if (config.quiet > 0 && !await waitForQuiet(config.quiet * 1000)) console.error(`the machine did not go quiet within ${config.quiet} s; measuring anyway`)

    for (const op of operations) op.run() // warm-up: JIT, inline caches
    const load = watchLoad()
    const results = new Map<Operation, Repetition[]>(operations.map(op => [op, []]))
    for (let pass = 0; pass < repetitions; pass++) {
      for (const op of operations) results.get(op)!.push(op.run())
    }
    const loadReport = load.stop()
    check(rowsDelta >= 0, 'more rows removed than added')

    console.log(`\n## MemoryCancellationStore operations (median of ${repetitions} repetitions)\n`)
    printTable(['operation', 'ops/s', 'ns/op', 'ops/s, all repetitions (min – max)'], operations.map(op => {
      const reps = results.get(op)!
      const rates = reps.map(r => r.ops / (r.ns / 1e9))
      const rate = median(rates)
      return [op.label, int(rate), (1e9 / rate).toFixed(1), `${int(Math.min(...rates))} – ${int(Math.max(...rates))}`]
    }))
    const atCap = operations.find(op => op.name === 'cancel-at-cap')
    if (atCap !== undefined) {
      const perEviction = median(results.get(atCap)!.map(r => r.evictions!.ns / r.evictions!.count))
      console.log(`\nat the cap, the evicting insert alone (sort of ${MAX_ROWS} rows, ${EVICTION_BATCH} deleted): median ${(perEviction / 1e6).toFixed(3)} ms` +
        ` = ${(perEviction / EVICTION_BATCH).toFixed(0)} ns per insert of its batch`)
    }
    console.log(`\n${describeLoad(loadReport)}`)
    return true
  }
}

export default registryOps
