/**
 * A worker tool that holds its thread for `ms` without using a CPU (Atomics.wait blocks the thread):
 * it occupies a pool slot as a slow tool does, without the busy loop that would also slow the main
 * thread on a small machine and blur what the fairness tests measure.
 */
const blocker = new Int32Array(new SharedArrayBuffer(4))

export function occupy ({ ms }: { ms: number }): { content: Array<{ type: 'text', text: string }> } {
  Atomics.wait(blocker, 0, 0, ms)
  return { content: [{ type: 'text', text: `held a thread ${ms} ms` }] }
}
