/**
 * Runs one worker tool inside a pool thread, with the context implementation an in-process handler
 * gets: `cancelled()` and `throwIfCancelled()` read the cancellation from shared memory, so even a busy
 * loop that never yields sees it; `signal` aborts when the thread's event loop gets to the main thread's
 * nudge; progress and log messages travel back over a MessagePort. If the tool ignores all of it, the
 * kill timeout terminates the thread.
 */
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import type { MessagePort } from 'node:worker_threads'
import type { RequestCancelledError } from '../cancellation/cancellation-errors.js'
import type { LoggingLevel } from '../protocol/era.js'
import type { RequestId } from '../protocol/jsonrpc.js'
import type { Era } from '../protocol/versions.js'
import { SourceContext, type ContextSource } from './context.js'
import { SharedCancellation } from './shared-cancellation.js'

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

/** What the main thread knows of the request and hands to the thread (structured-cloneable). */
export interface WorkerRequestFacts {
  id: RequestId
  method: string
  era: Era
  protocolVersion: string
  principal: string | null
}

export interface WorkerTask {
  filename: string
  name: string
  args: unknown
  request: WorkerRequestFacts
  /** A `SharedCancellation`'s buffer. */
  cancellation: SharedArrayBuffer
  port: MessagePort
}

export type WorkerMessage =
  | { type: 'progress', progress: number, total?: number | undefined, message?: string | undefined }
  | { type: 'log', level: LoggingLevel, data: unknown, logger?: string | undefined }

/** The request as a worker thread sees it: its facts, the shared cancellation, and a port back. */
class WorkerRequest implements ContextSource {
  readonly id: RequestId
  readonly method: string
  readonly era: Era
  readonly protocolVersion: string
  readonly principal: string | null
  readonly #cancellation: SharedCancellation
  readonly #port: MessagePort
  #controller: AbortController | undefined

  constructor ({ request, cancellation, port }: WorkerTask) {
    this.id = request.id
    this.method = request.method
    this.era = request.era
    this.protocolVersion = request.protocolVersion
    this.principal = request.principal
    this.#cancellation = new SharedCancellation(cancellation)
    this.#port = port
  }

  get cancellation (): RequestCancelledError | undefined {
    return this.#cancellation.read()
  }

  get signal (): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController()
      this.aborted()
    }
    return this.#controller.signal
  }

  /** Aborts the signal once the cancellation is published (the main thread's nudge calls it too). */
  aborted (): void {
    const cancellation = this.cancellation
    if (cancellation !== undefined) this.#controller?.abort(cancellation)
  }

  progress (progress: number, total?: number, message?: string): void {
    this.#post({ type: 'progress', progress, total, message })
  }

  log (level: LoggingLevel, data: unknown, logger?: string): void {
    this.#post({ type: 'log', level, data, logger })
  }

  /** Nothing more is sent for a cancelled request. */
  #post (message: WorkerMessage): void {
    if (this.cancellation === undefined) this.#port.postMessage(message)
  }
}

export default async function runWorkerTool (task: WorkerTask): Promise<unknown> {
  const request = new WorkerRequest(task)
  task.port.on('message', () => { request.aborted() })
  try {
    const tool = (await load(task.filename))[task.name]
    if (typeof tool !== 'function') throw new TypeError(`${task.filename} does not export a function named "${task.name}"`)
    return await tool(task.args, new SourceContext(request))
  } finally {
    task.port.close()
  }
}
