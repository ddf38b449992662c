/**
 * Worker tools for the task end-to-end tests. `spin` becomes a task, then loops without ever yielding or
 * looking at its cancellation, writing how far it has counted to a file: only terminating its thread
 * stops it, and a count that stops moving proves the thread is gone.
 */
import { renameSync, writeFileSync } from 'node:fs'
import type { WorkerContext } from '../../lib/index.js'

/** Answers at once: a first call loads this module in the pool's thread. */
export function ping (): { content: Array<{ type: 'text', text: string }> } {
  return { content: [{ type: 'text', text: 'pong' }] }
}

/** Starts a task, then counts in a busy loop forever, writing the count to `file` every 20 ms (atomically: a reader never sees it empty). */
export async function spin ({ file }: { file: string }, ctx: WorkerContext): Promise<never> {
  await ctx.startTask()
  let count = 0
  let writtenAt = 0
  for (;;) {
    const now = Date.now()
    if (now - writtenAt >= 20) {
      writeFileSync(`${file}.tmp`, String(++count))
      renameSync(`${file}.tmp`, file)
      writtenAt = now
    }
  }
}
