import { RequestCancelledError } from '../core/errors.js'
import type { CancellationSource } from '../core/vocabulary.js'

const SOURCES: readonly CancellationSource[] = ['client', 'disconnect', 'lifetime', 'server', 'task']
/** Int32 slots before the reason: published (0 or 1), source index, reason length in bytes (-1: null). */
const HEADER_SLOTS = 3
/** Reasons are sanitised to at most 800 UTF-8 bytes before they get here. */
const REASON_BYTES = 1024

/**
 * A request's cancellation in memory shared with the worker thread that runs its tool: a tool busy in a
 * loop that never yields cannot receive a message, but can read this, so `ctx.cancelled()` and
 * `ctx.throwIfCancelled()` see the exact `RequestCancelledError` (reason and source) at once.
 */
export class SharedCancellation {
  readonly buffer: SharedArrayBuffer
  readonly #header: Int32Array
  readonly #reason: Uint8Array
  #read: RequestCancelledError | undefined

  constructor (buffer = new SharedArrayBuffer(HEADER_SLOTS * 4 + REASON_BYTES)) {
    this.buffer = buffer
    this.#header = new Int32Array(buffer, 0, HEADER_SLOTS)
    this.#reason = new Uint8Array(buffer, HEADER_SLOTS * 4)
  }

  /** Main thread: publishes the cancellation. The flag is stored last, so a reader that sees it sees the rest. */
  publish (cancellation: RequestCancelledError): void {
    const { reason, source } = cancellation
    this.#header[1] = SOURCES.indexOf(source)
    this.#header[2] = reason === null ? -1 : new TextEncoder().encodeInto(reason, this.#reason).written
    Atomics.store(this.#header, 0, 1)
  }

  /** Worker thread: the cancellation once published (the same error every time), else undefined. */
  read (): RequestCancelledError | undefined {
    if (this.#read !== undefined || Atomics.load(this.#header, 0) !== 1) return this.#read
    const length = this.#header[2]!
    // TextDecoder refuses views of shared memory: decode a copy.
    const reason = length < 0 ? null : new TextDecoder().decode(this.#reason.slice(0, length))
    return (this.#read = new RequestCancelledError(reason, SOURCES[this.#header[1]!] ?? 'server'))
  }
}
