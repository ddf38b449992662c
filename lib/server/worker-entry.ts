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
import type { RequestCancelledError } from '../core/errors.js'
import type { LoggingLevel } from '../protocol/era.js'
import type { JsonObject, RequestId } from '../core/jsonrpc.js'
import type { Era } from '../protocol/versions.js'
import { ClientInputError, type ClientInputFailure } from '../core/errors.js'
import { SourceContext, type InputSource, type NotificationTarget, type RequestFacts } from './context.js'
import type { InputRequest } from '../protocol/input-requests.js'
import { SharedCancellation } from './shared-cancellation.js'
import { ToolError } from '../core/errors.js'
import type { McpPrincipal } from '../identity/principal.js'

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
  principal: McpPrincipal | null
  clientCapabilities: JsonObject | undefined
  /** `ctx.state` as the request's input round carries it. */
  state: unknown
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

/** What a worker thread tells the main thread. */
export type WorkerMessage =
  | { type: 'progress', progress: number, total?: number | undefined, message?: string | undefined }
  | { type: 'log', level: LoggingLevel, data: unknown, logger?: string | undefined }
  | { type: 'close-stream' }
  | { type: 'ask', seq: number, requests: Record<string, InputRequest> }
  | { type: 'start-task', seq: number }
  | { type: 'state', state: unknown }

/** What the main thread tells a worker thread: a nudge to look at the shared cancellation, or how an ask ended. */
export type MainMessage =
  | { type: 'cancelled' }
  | { type: 'answers', seq: number, answers: JsonObject }
  | { type: 'ask-failed', seq: number, name: string, message: string, failure?: ClientInputFailure | undefined }

/** The request as a worker thread sees it: its facts, the shared cancellation, and a port back. */
class WorkerRequest implements RequestFacts, NotificationTarget, InputSource {
  readonly id: RequestId
  readonly method: string
  readonly era: Era
  readonly protocolVersion: string
  readonly principal: McpPrincipal | null
  readonly clientCapabilities: JsonObject | undefined
  #state: unknown
  readonly #cancellation: SharedCancellation
  readonly #port: MessagePort
  #controller: AbortController | undefined
  readonly #asks = new Map<number, { resolve: (answers: JsonObject) => void, reject: (error: Error) => void }>()
  #seq = 0

  constructor ({ request, cancellation, port }: WorkerTask) {
    this.id = request.id
    this.method = request.method
    this.era = request.era
    this.protocolVersion = request.protocolVersion
    this.principal = request.principal
    this.clientCapabilities = request.clientCapabilities
    this.#state = request.state
    this.#cancellation = new SharedCancellation(cancellation)
    this.#port = port
  }

  get state (): unknown { return this.#state }
  set state (value: unknown) {
    this.#state = value
    this.#port.postMessage({ type: 'state', state: value } satisfies WorkerMessage)
  }

  /** The main thread asks the client (or ends the round) and answers here. */
  async ask (requests: Record<string, InputRequest>): Promise<JsonObject> {
    return await this.#call(seq => ({ type: 'ask', seq, requests }))
  }

  async startTask (): Promise<void> {
    await this.#call(seq => ({ type: 'start-task', seq }))
  }

  async #call (message: (seq: number) => WorkerMessage): Promise<JsonObject> {
    const seq = ++this.#seq
    return await new Promise((resolve, reject) => {
      this.#asks.set(seq, { resolve, reject })
      this.#port.postMessage(message(seq))
    })
  }

  received (message: MainMessage): void {
    if (message.type === 'cancelled') {
      this.aborted()
      return
    }
    const ask = this.#asks.get(message.seq)
    if (ask === undefined) return
    this.#asks.delete(message.seq)
    if (message.type === 'answers') ask.resolve(message.answers)
    else ask.reject(this.#failure(message))
  }

  /** The ask's failure as the thread can have it; the main thread keeps the original (see `WorkerPool`). */
  #failure ({ name, message, failure }: Extract<MainMessage, { type: 'ask-failed' }>): Error {
    if (failure !== undefined) return new ClientInputError(failure, message)
    if (name === 'RequestCancelledError' && this.cancellation !== undefined) return this.cancellation
    const error = new Error(message)
    error.name = name
    return error
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

  closeStream (): void {
    this.#post({ type: 'close-stream' })
  }

  /** Nothing more is sent for a cancelled request. */
  #post (message: WorkerMessage): void {
    if (this.cancellation === undefined) this.#port.postMessage(message)
  }
}

export default async function runWorkerTool (task: WorkerTask): Promise<unknown> {
  const request = new WorkerRequest(task)
  task.port.on('message', (message: MainMessage) => { request.received(message) })
  try {
    const tool = (await load(task.filename))[task.name]
    if (typeof tool !== 'function') throw new TypeError(`${task.filename} does not export a function named "${task.name}"`)
    return await tool(task.args, new SourceContext(request, request, request))
  } catch (error) {
    // An error crosses threads as a plain Error (its class and name are lost): a ToolError is answered here.
    if (error instanceof ToolError) return ToolError.result(error.message)
    throw error
  } finally {
    task.port.close()
  }
}
