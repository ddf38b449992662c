/**
 * `pending`, or a rejection with `signal.reason` as soon as `signal` aborts (at once when it already
 * has). Made where it is awaited, so the abort can never reject a promise nobody handles yet (which
 * would end the process); the listener goes with the first to settle, so a signal that outlives many
 * waits does not collect one per wait.
 */
export async function unlessAborted<T> (pending: Promise<T>, signal: AbortSignal): Promise<T> {
  signal.throwIfAborted()
  let onAbort: (() => void) | undefined
  try {
    return await Promise.race([pending, new Promise<never>((_resolve, reject) => {
      onAbort = () => { reject(signal.reason) }
      signal.addEventListener('abort', onAbort, { once: true })
    })])
  } finally {
    signal.removeEventListener('abort', onAbort!)
  }
}
