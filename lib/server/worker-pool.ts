import { MessageChannel } from 'node:worker_threads'
import { pathToFileURL } from 'node:url'
import { isAbsolute } from 'node:path'
import { Piscina } from 'piscina'
import type { Exchange } from '../cancellation/exchange.js'
import { LOGGING_LEVELS, type LoggingLevel } from '../protocol/era.js'
import type { WorkerMessage, WorkerTask } from './worker-entry.js'

/** Where a worker tool lives: a module (absolute path or file URL) and the function it exports. */
export interface WorkerToolLocation {
  filename: string | URL
  /** Export to call. Default `'default'`. */
  name?: string
}

export interface WorkerPoolOptions {
  /** Default: Piscina's (about 1.5 × the cores). */
  maxThreads?: number | undefined
  minThreads?: number | undefined
  /** A thread idle this long exits. Default 30 000 ms. */
  idleTimeoutMs?: number | undefined
}

// The entry runs from source under a TypeScript loader (tests, the demo) and from dist/ when built.
const ENTRY = new URL(`./worker-entry${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url)

/**
 * Worker-thread isolation for tools that cannot be trusted to stop (DESIGN §1): a Piscina pool, created
 * on first use. Cancelling raises the task's shared flag and posts a cancel message; the kill timeout
 * aborts the task, which terminates its thread: a kill that really stops the work.
 */
export class WorkerPool {
  readonly #options: WorkerPoolOptions
  #pool: Piscina | undefined

  constructor (options: WorkerPoolOptions = {}) {
    this.#options = options
  }

  static moduleUrl (filename: string | URL): string {
    if (filename instanceof URL) return filename.href
    return isAbsolute(filename) ? pathToFileURL(filename).href : filename
  }

  async run (location: WorkerToolLocation, args: unknown, exchange: Exchange): Promise<unknown> {
    const pool = this.#pool ??= new Piscina({
      filename: ENTRY.href,
      // Piscina treats an explicit undefined as a value, so only set what was given.
      ...(this.#options.maxThreads === undefined ? {} : { maxThreads: this.#options.maxThreads }),
      minThreads: this.#options.minThreads ?? 0,
      idleTimeout: this.#options.idleTimeoutMs ?? 30_000
    })
    const cancelled = new SharedArrayBuffer(4)
    const { port1, port2 } = new MessageChannel()
    port1.on('message', (message: WorkerMessage) => {
      if (message.type === 'progress') exchange.progress(message.progress, message.total, message.message)
      else if ((LOGGING_LEVELS as readonly string[]).includes(message.level)) exchange.log(message.level as LoggingLevel, message.data, message.logger)
    })
    const onCancel = (): void => {
      Atomics.store(new Int32Array(cancelled), 0, 1)
      port1.postMessage({ type: 'cancel', reason: (exchange.signal.reason as Error).message })
    }
    exchange.signal.addEventListener('abort', onCancel, { once: true })
    const kill = new AbortController()
    exchange.onKill(() => { kill.abort() })
    const task: WorkerTask = {
      filename: WorkerPool.moduleUrl(location.filename),
      name: location.name ?? 'default',
      args,
      context: { requestId: exchange.id, method: exchange.method, era: exchange.binding.era, protocolVersion: exchange.binding.version },
      cancelled,
      port: port2
    }
    try {
      return await pool.run(task, { transferList: [port2], signal: kill.signal })
    } finally {
      exchange.signal.removeEventListener('abort', onCancel)
      port1.close()
    }
  }

  async destroy (): Promise<void> {
    await this.#pool?.destroy()
    this.#pool = undefined
  }
}
