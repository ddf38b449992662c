/** A CPU-bound tool that never looks at its cancellation: only terminating its thread stops it. */
export function spin ({ ms }: { ms: number }): { content: Array<{ type: 'text', text: string }> } {
  const end = Date.now() + ms
  let iterations = 0
  while (Date.now() < end) iterations++
  return { content: [{ type: 'text', text: `spun ${ms} ms (${iterations} iterations)` }] }
}
