/**
 * Runs one worker tool inside a pool thread. The tool sees the same context as an in-process tool:
 * `cancelled()` reads a shared flag, so even a busy loop that never yields can poll it; `signal` aborts
 * when the thread's event loop gets to the cancel message; progress and log messages travel back over
 * a MessagePort. If the tool ignores all of it, the kill timeout terminates the thread.
 */
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import type { MessagePort } from 'node:worker_threads'

const requireModule = createRequire(import.meta.url)

/**
 * `require` first, as Piscina loads its own entry: it goes through CommonJS loader hooks, which also
 * apply inside worker threads (TypeScript loaders in tests), and loads ES modules on Node >= 20.19.
 * `import()` covers the rest (top-level await).
 */
async function load (url: string): Promise<Record<string, unknown>> {
  try {
    return requireModule(fileURLToPath(url)) as Record<string, unknown>
  } catch {
    return await import(url) as Record<string, unknown>
  }
}

export interface WorkerTask {
  filename: string
  name: string
  args: unknown
  context: { requestId: string | number, method: string, era: string, protocolVersion: string }
  /** Int32Array view: 0 running, 1 cancelled. */
  cancelled: SharedArrayBuffer
  port: MessagePort
}

export type WorkerMessage =
  | { type: 'progress', progress: number, total?: number | undefined, message?: string | undefined }
  | { type: 'log', level: string, data: unknown, logger?: string | undefined }

export default async function runWorkerTool ({ filename, name, args, context, cancelled, port }: WorkerTask): Promise<unknown> {
  const flag = new Int32Array(cancelled)
  const controller = new AbortController()
  const abort = (reason: string | null): void => {
    const error = new Error(reason ?? 'Request cancelled')
    error.name = 'AbortError'
    controller.abort(error)
  }
  port.on('message', (message: { type: 'cancel', reason: string | null }) => { abort(message.reason) })
  const isCancelled = (): boolean => Atomics.load(flag, 0) === 1
  const post = (message: WorkerMessage): void => { if (!isCancelled()) port.postMessage(message) }
  const ctx = {
    ...context,
    signal: controller.signal,
    cancelled: isCancelled,
    throwIfCancelled: () => {
      if (isCancelled() && !controller.signal.aborted) abort(null)
      controller.signal.throwIfAborted()
    },
    progress: async (progress: number, total?: number, message?: string) => { post({ type: 'progress', progress, total, message }) },
    notify: async (level: string, data: unknown, logger?: string) => { post({ type: 'log', level, data, logger }) }
  }
  try {
    const tool = (await load(filename))[name]
    if (typeof tool !== 'function') throw new TypeError(`${filename} does not export a function named "${name}"`)
    return await tool(args, ctx)
  } finally {
    port.close()
  }
}
