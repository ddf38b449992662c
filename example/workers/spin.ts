import type { WorkerToolHandler } from '../../lib/index.js'

/** A CPU-bound tool that never looks at its cancellation: only terminating its thread stops it. */
export const spin: WorkerToolHandler<{ ms: number }> = ({ ms }) => {
  const end = Date.now() + ms
  let iterations = 0
  while (Date.now() < end) iterations++
  return { content: [{ type: 'text', text: `spun ${ms} ms (${iterations} iterations)` }] }
}
