import { MessageChannel } from 'node:worker_threads'
import { pathToFileURL } from 'node:url'
import { isAbsolute } from 'node:path'
import type { Piscina } from 'piscina'
import { endWork } from '../observability/tracing.js'
import { isLoggingLevel } from '../protocol/era.js'
import { ProtocolError } from '../core/jsonrpc.js'
import { ClientInputError } from '../core/errors.js'
import type { Invocation } from './invocation.js'
import { InputRequired } from '../core/errors.js'
import { SharedCancellation } from './shared-cancellation.js'
import { FairQueue } from './fair-queue.js'
import type { MainMessage, WorkerMessage, WorkerTask } from './worker-entry.js'

/** The Piscina pool that runs tools registered with `worker`. */
export interface WorkerPoolOptions {
  /** Default: Piscina's (about 1.5 × the cores). */
  maxThreads?: number | undefined
  /** Default 0: no thread runs until a worker tool is called. */
  minThreads?: number | undefined
  /** A thread idle this long exits. Default 30 000 ms. */
  idleTimeoutMs?: number | undefined
}

/** Where a worker tool lives: a module (absolute path or file URL) and the function it exports. */
export interface WorkerToolLocation {
  filename: string | URL
  /** Export to call. Default `'default'`. */
  name?: string
}

// The entry runs from source under a TypeScript loader (tests, the demo) and from dist/ when built.
const ENTRY = new URL(`./worker-entry${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url)

/**
 * Worker-thread isolation for tools that cannot be trusted to stop: a Piscina pool. Piscina is loaded
 * when a worker tool is first registered (an application without one never loads it) and the pool is
 * made on the first call. Cancelling publishes the cancellation in memory the thread shares and nudges
 * the thread; the kill timeout aborts the task, which terminates its thread: a kill that really stops
 * the work. Calls beyond the pool's threads wait in a `FairQueue` by scope (round robin), not in
 * Piscina's first-come-first-served queue: one client's backlog never holds up another's next call.
 */
export class WorkerPool {
  readonly #options: WorkerPoolOptions
  #piscina: Promise<typeof Piscina> | undefined
  #pool: Piscina | undefined
  #slots: FairQueue | undefined

  constructor (options: WorkerPoolOptions = {}) {
    this.#options = options
  }

  static moduleUrl (filename: string | URL): string {
    if (filename instanceof URL) return filename.href
    return isAbsolute(filename) ? pathToFileURL(filename).href : filename
  }

  /** Starts loading Piscina (a worker tool was registered), so the first call does not wait for it. */
  prepare (): void {
    this.#load().catch(() => {}) // a failed load is reported by the call that needs it
  }

  async run (location: WorkerToolLocation, args: unknown, invocation: Invocation): Promise<unknown> {
    const { exchange } = invocation
    const pool = this.#pool ??= new (await this.#load())({
      filename: ENTRY.href,
      // Piscina treats an explicit undefined as a value, so only set what was given.
      ...(this.#options.maxThreads === undefined ? {} : { maxThreads: this.#options.maxThreads }),
      minThreads: this.#options.minThreads ?? 0,
      idleTimeout: this.#options.idleTimeoutMs ?? 30_000
    })
    const slots = this.#slots ??= new FairQueue(pool.maxThreads * pool.options.concurrentTasksPerWorker)
    // Cancelled (or killed) while it waits: it never starts.
    await slots.acquire(exchange.scope, exchange.signal)
    try {
      return await this.#runInThread(pool, location, args, invocation)
    } finally {
      slots.release()
    }
  }

  async #runInThread (pool: Piscina, location: WorkerToolLocation, args: unknown, invocation: Invocation): Promise<unknown> {
    const { exchange } = invocation
    const cancellation = new SharedCancellation()
    const { port1, port2 } = new MessageChannel()
    const reply = (message: MainMessage): void => { port1.postMessage(message) }
    /**
     * How the thread's asks ended the request, kept here because errors do not cross threads as
     * themselves: the end of a modern round (the request answers `input_required` however the tool
     * ends), or a protocol error such as -32021 (answered when the tool fails).
     */
    let ended: InputRequired | ProtocolError | undefined
    port1.on('message', (message: WorkerMessage) => {
      switch (message.type) {
        case 'progress': invocation.progress(message.progress, message.total, message.message); break
        case 'log': if (isLoggingLevel(message.level)) invocation.log(message.level, message.data, message.logger); break
        case 'close-stream': invocation.closeStream(); break
        case 'state': invocation.state = message.state; break
        case 'ask':
        case 'start-task': {
          const { seq } = message
          const call = message.type === 'ask' ? () => invocation.ask(message.requests) : async () => { await invocation.startTask(); return {} }
          Promise.resolve().then(call).then(answers => { reply({ type: 'answers', seq, answers }) }, (error: Error) => {
            if (error instanceof InputRequired || error instanceof ProtocolError) ended ??= error
            reply({ type: 'ask-failed', seq, name: error.name, message: error.message, failure: error instanceof ClientInputError ? error.failure : undefined })
          })
        }
      }
    })
    const onCancel = (): void => {
      cancellation.publish(exchange.cancellation!)
      reply({ type: 'cancelled' })
    }
    exchange.signal.addEventListener('abort', onCancel, { once: true })
    const kill = new AbortController()
    const span = invocation.operation?.workerRun(String(exchange.params.name))
    exchange.onKill(() => {
      span?.addEvent('mcp.worker.terminated')
      kill.abort()
    })
    const task: WorkerTask = {
      filename: WorkerPool.moduleUrl(location.filename),
      name: location.name ?? 'default',
      args,
      request: {
        id: exchange.id,
        method: exchange.method,
        era: exchange.era,
        protocolVersion: exchange.protocolVersion,
        principal: exchange.principal,
        clientCapabilities: invocation.clientCapabilities,
        state: invocation.state
      },
      cancellation: cancellation.buffer,
      port: port2
    }
    try {
      const result: unknown = await pool.run(task, { transferList: [port2], signal: kill.signal })
      if (ended instanceof InputRequired) throw ended
      return result
    } catch (error) {
      throw ended ?? error
    } finally {
      exchange.signal.removeEventListener('abort', onCancel)
      port1.close()
      endWork(span, kill.signal.aborted ? 'handler_killed' : undefined, kill.signal.aborted ? 'The worker thread was terminated by the kill timeout' : undefined)
    }
  }

  async destroy (): Promise<void> {
    this.#slots?.close(new Error('The worker pool is closed'))
    this.#slots = undefined
    await this.#pool?.destroy()
    this.#pool = undefined
  }

  async #load (): Promise<typeof Piscina> {
    return await (this.#piscina ??= import('piscina').then(module => module.Piscina))
  }
}
