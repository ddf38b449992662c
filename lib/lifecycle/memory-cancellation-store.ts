import type { RequestId } from '../core/jsonrpc.js'
import type { CancellationSource } from '../core/vocabulary.js'
import type { CancellationRow, CancellationStore, CancelOutcome, InFlightOwner } from './cancellation-store.js'
import type { CleanupEvent } from '../core/events.js'

export interface MemoryCancellationStoreOptions {
  /** Rows one scope may hold; the only bound that rejects. `Infinity` disables it. */
  maxRowsPerScope: number
  /** Rows in all; reaching it evicts a batch, largest scope first. `Infinity` disables it. */
  maxRows: number
  /** Called with the number of rows each eviction removed. */
  onEvicted?: (count: number) => void
  /** Called with +1 / -1 as rows come and go. */
  onRowsChanged?: (delta: number) => void
}

/**
 * Type-exact key of a request id in a scope: `1` and `"1"` are different JSON-RPC requests
 * (docs/decisions.md). A scope may hold any character (a principal id is whatever
 * `auth.principal` returns, NUL included), so no separator can end it: it is length-prefixed, and the
 * key reads back as exactly one (scope, type, id).
 */
function keyOf (requestId: RequestId, scope: string): string {
  return `${scope.length}:${scope}${typeof requestId === 'number' ? 'n' : 's'}${requestId}`
}

function ownersOf (owners: InFlightOwner | Set<InFlightOwner> | undefined): Iterable<InFlightOwner> {
  if (owners === undefined) return []
  return owners instanceof Set ? [...owners] : [owners]
}

/**
 * Cancellation state in this process. In-flight rows are one per owner, so two requests
 * reusing an id in one scope are tracked apart; cancellation rows are counted per scope, so the quota
 * check is O(1); rows are kept in insertion order per scope and in total, so age order is free.
 */
export class MemoryCancellationStore implements CancellationStore {
  /** One owner, or (rarely: a reused id) a set of them; no Set is made for the common request. */
  readonly #inFlight = new Map<string, InFlightOwner | Set<InFlightOwner>>()
  readonly #rows = new Map<string, CancellationRow>()
  readonly #rowsPerScope = new Map<string, number>()
  readonly #options: MemoryCancellationStoreOptions
  #inFlightRows = 0
  // The registry asks about one request several times in a row (track; then untrack, inFlight, clear):
  // the key of the last one asked about is kept rather than rebuilt.
  #lastRequestId: RequestId | undefined
  #lastScope: string | undefined
  #lastKey = ''

  constructor (options: MemoryCancellationStoreOptions) {
    this.#options = options
  }

  get rows (): number {
    return this.#rows.size
  }

  get inFlightRows (): number {
    return this.#inFlightRows
  }

  track (requestId: RequestId, scope: string, owner: InFlightOwner): void {
    const key = this.#key(requestId, scope)
    const owners = this.#inFlight.get(key)
    if (owners === owner || (owners instanceof Set && owners.has(owner))) return
    if (owners === undefined) this.#inFlight.set(key, owner)
    else if (owners instanceof Set) owners.add(owner)
    else this.#inFlight.set(key, new Set([owners, owner]))
    this.#inFlightRows++
  }

  untrack (requestId: RequestId, scope: string, owner: InFlightOwner): void {
    this.#removeOwner(this.#key(requestId, scope), owner)
  }

  inFlight (requestId: RequestId, scope: string): boolean {
    return this.#inFlight.has(this.#key(requestId, scope))
  }

  cancel (requestId: RequestId, reason: string | null, scope: string): CancelOutcome {
    return this.#record(requestId, reason, scope, 'server')
  }

  cancelInFlight (requestId: RequestId, reason: string | null, scope: string): CancelOutcome {
    return this.inFlight(requestId, scope) ? this.#record(requestId, reason, scope, 'client') : 'ignored'
  }

  row (requestId: RequestId, scope: string): CancellationRow | undefined {
    return this.#rows.get(this.#key(requestId, scope))
  }

  clear (requestId: RequestId, scope: string): void {
    // Read before write: the common request was never cancelled.
    const key = this.#key(requestId, scope)
    if (this.#rows.has(key)) this.#deleteRow(key)
  }

  cleanup (ttlMs: number): CleanupEvent {
    const oldest = Date.now() - ttlMs
    let removed = 0
    for (const [key, row] of this.#rows) {
      if (row.at >= oldest) break // insertion order is age order
      this.#deleteRow(key)
      removed++
    }
    let inFlightRemoved = 0
    for (const [key, owners] of this.#inFlight) {
      for (const owner of ownersOf(owners)) {
        if (owner.alive === false) {
          this.#removeOwner(key, owner)
          inFlightRemoved++
        }
      }
    }
    return { removed, inFlightRemoved }
  }

  #key (requestId: RequestId, scope: string): string {
    if (requestId !== this.#lastRequestId || scope !== this.#lastScope) {
      this.#lastRequestId = requestId
      this.#lastScope = scope
      this.#lastKey = keyOf(requestId, scope)
    }
    return this.#lastKey
  }

  #record (requestId: RequestId, reason: string | null, scope: string, source: CancellationSource): CancelOutcome {
    const key = this.#key(requestId, scope)
    // A repeated cancel is idempotent: it neither consumes quota nor replaces the first reason.
    let row = this.#rows.get(key)
    if (row === undefined) {
      if ((this.#rowsPerScope.get(scope) ?? 0) >= this.#options.maxRowsPerScope) return 'rejected'
      // The per-scope quota is checked first: a global check that rejected would let a flood of
      // scopes, none over its quota, deny everyone else.
      if (this.#rows.size >= this.#options.maxRows) this.#evict()
      row = { scope, requestId, reason, at: Date.now() }
      this.#rows.set(key, row)
      this.#rowsPerScope.set(scope, (this.#rowsPerScope.get(scope) ?? 0) + 1)
      this.#options.onRowsChanged?.(1)
    }
    for (const owner of ownersOf(this.#inFlight.get(key))) owner.cancel?.(row.reason, source)
    return 'recorded'
  }

  /**
   * Frees a batch of max(1, maxRows/20) rows: largest scope first, oldest first within it, spilling into
   * the next largest; scopes of equal size are taken together by age. One sort per batch of inserts.
   */
  #evict (): void {
    const batch = Math.max(1, Math.floor(this.#options.maxRows / 20))
    const victims = Array.from(this.#rows, ([key, row]) => ({ key, row, size: this.#rowsPerScope.get(row.scope) ?? 0 }))
      .sort((a, b) => (b.size - a.size) || (a.row.at - b.row.at))
      .slice(0, batch)
    for (const { key } of victims) this.#deleteRow(key)
    this.#options.onEvicted?.(victims.length)
  }

  #deleteRow (key: string): void {
    const row = this.#rows.get(key)
    if (row === undefined) return
    this.#rows.delete(key)
    this.#options.onRowsChanged?.(-1)
    const count = (this.#rowsPerScope.get(row.scope) ?? 1) - 1
    if (count === 0) this.#rowsPerScope.delete(row.scope)
    else this.#rowsPerScope.set(row.scope, count)
  }

  #removeOwner (key: string, owner: InFlightOwner): void {
    const owners = this.#inFlight.get(key)
    if (owners === owner) {
      this.#inFlight.delete(key)
    } else if (owners instanceof Set && owners.delete(owner)) {
      if (owners.size === 0) this.#inFlight.delete(key)
    } else {
      return
    }
    this.#inFlightRows--
  }
}
