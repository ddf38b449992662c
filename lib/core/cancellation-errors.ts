import type { CancellationSource } from './vocabulary.js'

/**
 * The abort reason every cancelled handler sees on `ctx.signal.reason`, and what `ctx.throwIfCancelled()`
 * throws: in process and in a worker thread alike.
 */
export class RequestCancelledError extends Error {
  /** The sanitised reason the canceller gave, or null. */
  readonly reason: string | null
  readonly source: CancellationSource

  constructor (reason: string | null, source: CancellationSource) {
    super(reason ?? 'Request cancelled')
    this.name = 'AbortError'
    this.reason = reason
    this.source = source
  }
}

/** Rejects `Exchange.settle` when a cancelled handler outlived the kill timeout. */
export class HandlerKilledError extends Error {
  constructor (timeoutMs: number) {
    super(`The handler did not stop within ${timeoutMs} ms of its cancellation and was killed`)
    this.name = 'HandlerKilledError'
  }
}
