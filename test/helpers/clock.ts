/** A controllable `Date.now()` for tests of age-ordered state (cancellation rows store `Date.now()`). */
import type { Teardown } from './teardown.js'

export interface FakeClock {
  readonly now: number
  set: (ms: number) => void
  advance: (ms: number) => void
}

/** Replaces `Date.now` until the end of the test; the clock only moves when told to. */
export function fakeClock (t: Teardown, start = 1_700_000_000_000): FakeClock {
  const realNow = Date.now
  let now = start
  Date.now = () => now
  t.teardown(() => { Date.now = realNow })
  return {
    get now () { return now },
    set (ms: number) { now = ms },
    advance (ms: number) { now += ms }
  }
}
