import type { CleanupEvent } from '../core/events.js'
import type { RequestId } from '../core/jsonrpc.js'
import type { CancellationSource } from '../core/vocabulary.js'

/**
 * Something running under a tracked request id: an exchange of the transport, or any object a library
 * caller passes to `track`. Its identity is what tells two requests with the same id apart.
 */
export interface InFlightOwner {
  /** Aborts the owner's work; called when a cancellation for its {scope, id} is recorded. */
  cancel?: (reason: string | null, source: CancellationSource) => unknown
  /** False once the owner has ended without untracking itself (the janitor then removes its row). */
  readonly alive?: boolean
}

export interface CancellationRow {
  scope: string
  requestId: RequestId
  reason: string | null
  /** `Date.now()` when recorded. */
  at: number
}

/**
 * `recorded`: a row was written (or already existed) and the in-flight owners were aborted;
 * `ignored`: nothing in flight under that {scope, id}, nothing written;
 * `rejected`: the scope holds its quota of rows;
 * `forwarded`: nothing in flight here, and the cancellation went to the other nodes (with `redis`), where
 * the node that has the request in flight applies it.
 */
export type CancelOutcome = 'recorded' | 'ignored' | 'rejected' | 'forwarded'

/**
 * Where cancellation state lives, in the shape of @fastify/rate-limit's stores: `MemoryCancellationStore` holds
 * everything in this process; a cluster store wraps it and carries cancellations between nodes (the
 * node that has the request in flight applies them, so rows, quota and eviction stay local to it).
 * Ids and reasons arrive validated and sanitised; every operation is O(1) but eviction.
 */
export interface CancellationStore {
  track: (requestId: RequestId, scope: string, owner: InFlightOwner) => void
  untrack: (requestId: RequestId, scope: string, owner: InFlightOwner) => void
  inFlight: (requestId: RequestId, scope: string) => boolean
  /** Records a cancellation whether or not the request is in flight (the library `cancel`). */
  cancel: (requestId: RequestId, reason: string | null, scope: string) => CancelOutcome
  /** Records a client's cancellation only for a request in flight in its scope (`notifications/cancelled`). */
  cancelInFlight: (requestId: RequestId, reason: string | null, scope: string) => CancelOutcome | Promise<CancelOutcome>
  row: (requestId: RequestId, scope: string) => CancellationRow | undefined
  clear: (requestId: RequestId, scope: string) => void
  /** Removes rows older than `ttlMs` and in-flight rows of owners that ended; what it removed (the cleanup event's counts). */
  cleanup: (ttlMs: number) => CleanupEvent
  readonly rows: number
  readonly inFlightRows: number
  close?: () => void | Promise<void>
}
