/**
 * Slots for at most `size` jobs at once, handed out one scope at a time, round robin, when jobs wait:
 * a scope with a long backlog delays another scope's next job by at most the time one running job takes
 * to end (first come, first served would make it wait for the whole backlog). The worker pool takes a
 * slot per call, so its own queue never fills.
 */
export class FairQueue {
  readonly #size: number
  #busy = 0
  /** The waiting jobs of each scope, oldest first. A Map keeps insertion order: the order of the round. */
  readonly #waiting = new Map<string, Waiter[]>()

  constructor (size: number) {
    this.#size = size
  }

  /**
   * A slot for a job of `scope`: undefined when one is free at once (nothing waits), else a promise of
   * it. An abort of `signal` while waiting gives up the place and rejects with the signal's reason.
   * Every slot taken is given back with `release`.
   */
  acquire (scope: string, signal?: AbortSignal): Promise<void> | undefined {
    if (this.#busy < this.#size && this.#waiting.size === 0) {
      this.#busy++
      return undefined
    }
    signal?.throwIfAborted()
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, signal, onAbort: undefined }
      if (signal !== undefined) {
        waiter.onAbort = () => {
          this.#remove(scope, waiter)
          reject(signal.reason)
        }
        signal.addEventListener('abort', waiter.onAbort, { once: true })
      }
      const queue = this.#waiting.get(scope)
      if (queue === undefined) this.#waiting.set(scope, [waiter])
      else queue.push(waiter)
    })
  }

  release (): void {
    this.#busy--
    this.#next()
  }

  /** Rejects every waiting job with `error` (the pool is closing). */
  close (error: Error): void {
    for (const queue of this.#waiting.values()) {
      for (const waiter of queue) {
        waiter.signal?.removeEventListener('abort', waiter.onAbort!)
        waiter.reject(error)
      }
    }
    this.#waiting.clear()
  }

  #next (): void {
    while (this.#busy < this.#size) {
      const first = this.#waiting.entries().next()
      if (first.done === true) return
      const [scope, queue] = first.value
      const waiter = queue.shift()!
      // The scope goes to the end of the round (or leaves it, with nothing left to wait for).
      this.#waiting.delete(scope)
      if (queue.length > 0) this.#waiting.set(scope, queue)
      waiter.signal?.removeEventListener('abort', waiter.onAbort!)
      this.#busy++
      waiter.resolve()
    }
  }

  #remove (scope: string, waiter: Waiter): void {
    const queue = this.#waiting.get(scope)
    if (queue === undefined) return
    const at = queue.indexOf(waiter)
    if (at !== -1) queue.splice(at, 1)
    if (queue.length === 0) this.#waiting.delete(scope)
  }
}

interface Waiter {
  resolve: () => void
  reject: (reason: unknown) => void
  signal: AbortSignal | undefined
  onAbort: (() => void) | undefined
}
