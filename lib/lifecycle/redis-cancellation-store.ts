import { isRequestId, type RequestId } from '../core/jsonrpc.js'
import type { RedisBus } from '../cluster/redis-bus.js'
import type { CancellationRow, CancellationStore, CancelOutcome, InFlightOwner } from './cancellation-store.js'
import type { CleanupEvent } from '../core/events.js'
import type { MemoryCancellationStore } from './memory-cancellation-store.js'

/**
 * Cluster-wide cancellation: everything stays in the memory store; a client's cancellation
 * that finds nothing in flight here is published, and whichever node has the request in flight in that
 * scope applies it to its own table (so quota, rows and eviction stay where the request runs). The
 * receiving node answers at once: nothing waits for Redis or for the owner.
 */
export class RedisCancellationStore implements CancellationStore {
  readonly #local: MemoryCancellationStore
  readonly #bus: RedisBus

  /** `onRemote` hears the outcome of every cancellation another node forwarded and this one applied. */
  constructor (local: MemoryCancellationStore, bus: RedisBus, onRemote: (outcome: CancelOutcome) => void) {
    this.#local = local
    this.#bus = bus
    bus.subscribe('cancel', ({ scope, requestId, reason }) => {
      if (typeof scope !== 'string' || !isRequestId(requestId) || (typeof reason !== 'string' && reason !== null)) return
      const outcome = local.cancelInFlight(requestId, reason, scope)
      if (outcome !== 'ignored') onRemote(outcome)
    })
  }

  get rows (): number {
    return this.#local.rows
  }

  get inFlightRows (): number {
    return this.#local.inFlightRows
  }

  cancelInFlight (requestId: RequestId, reason: string | null, scope: string): CancelOutcome {
    const outcome = this.#local.cancelInFlight(requestId, reason, scope)
    if (outcome !== 'ignored') return outcome
    // Not awaited: the client is answered at once, whichever node has the request.
    const forwarded = this.#bus.ready
    void this.#bus.publish('cancel', { scope, requestId, reason })
    return forwarded ? 'forwarded' : 'ignored'
  }

  track (requestId: RequestId, scope: string, owner: InFlightOwner): void { this.#local.track(requestId, scope, owner) }
  untrack (requestId: RequestId, scope: string, owner: InFlightOwner): void { this.#local.untrack(requestId, scope, owner) }
  inFlight (requestId: RequestId, scope: string): boolean { return this.#local.inFlight(requestId, scope) }
  cancel (requestId: RequestId, reason: string | null, scope: string): CancelOutcome { return this.#local.cancel(requestId, reason, scope) }
  row (requestId: RequestId, scope: string): CancellationRow | undefined { return this.#local.row(requestId, scope) }
  clear (requestId: RequestId, scope: string): void { this.#local.clear(requestId, scope) }
  cleanup (ttlMs: number): CleanupEvent { return this.#local.cleanup(ttlMs) }

  async close (): Promise<void> {
    await this.#bus.close()
  }
}
