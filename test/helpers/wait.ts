/** Waiting without hanging: polling a condition, and bounding a promise. */
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * Polls `predicate` (sync or async) every `everyMs` until it holds (true) or `timeoutMs` passes
 * (false); the predicate is always tried once more at the deadline.
 */
export async function waitFor (predicate: () => boolean | Promise<boolean>, timeoutMs = 2000, everyMs = 10): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await predicate()) return true
    if (Date.now() >= deadline) return false
    await sleep(everyMs)
  }
}

/** Resolves `promise`, or `timeout` after `ms`: a hang becomes a failed assertion, not a stuck test. */
export async function within<T, U> (promise: Promise<T>, ms: number, timeout: U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([promise, new Promise<U>(resolve => { timer = setTimeout(() => { resolve(timeout) }, ms) })])
  } finally {
    clearTimeout(timer)
  }
}
