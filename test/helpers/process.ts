/** The test process itself: the resources it holds (to see what a run leaves behind), its heap, and its unhandled rejections. */
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import type { Teardown } from './teardown.js'

/** A forced full GC: `global.gc` when node runs with --expose-gc, otherwise one obtained at run time. */
export function collector (): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc
  if (typeof exposed === 'function') return exposed
  setFlagsFromString('--expose-gc')
  return runInNewContext('gc') as () => void
}

/** The heap in use once `gc` has run (three times, a turn apart: what only weak references hold goes too). */
export async function heapAfterGc (gc: () => void): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc()
    await new Promise(resolve => setImmediate(resolve))
  }
  return process.memoryUsage().heapUsed
}

/** `process.getActiveResourcesInfo()` as counts by kind. */
export function activeResources (): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const kind of process.getActiveResourcesInfo()) counts[kind] = (counts[kind] ?? 0) + 1
  return counts
}

/** Kinds whose count grew from `before` to `after`, with how much: `{}` when nothing was left behind. */
export function resourceGrowth (before: Record<string, number>, after: Record<string, number>, slack = 0): Record<string, number> {
  const grown: Record<string, number> = {}
  for (const [kind, count] of Object.entries(after)) {
    const growth = count - (before[kind] ?? 0)
    if (growth > slack) grown[kind] = growth
  }
  return grown
}

/** Polls until `activeResources()` has grown by at most `slack` per kind from `before`; returns the last growth. */
export async function resourcesSettle (before: Record<string, number>, timeoutMs = 2000, slack = 0): Promise<Record<string, number>> {
  const deadline = Date.now() + timeoutMs
  let grown = resourceGrowth(before, activeResources(), slack)
  while (Object.keys(grown).length > 0 && Date.now() < deadline) {
    await new Promise(resolve => setTimeout(resolve, 20))
    grown = resourceGrowth(before, activeResources(), slack)
  }
  return grown
}

/** Fails the test on any unhandled rejection while it runs. */
export function failOnUnhandledRejection (t: Teardown & { fail: (...args: any[]) => unknown }): void {
  const listener = (reason: unknown): void => {
    t.fail('unhandled rejection', { reason: reason instanceof Error ? `${reason.name}: ${reason.message}` : String(reason) })
  }
  process.on('unhandledRejection', listener)
  t.teardown(() => { process.off('unhandledRejection', listener) })
}
