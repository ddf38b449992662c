import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import type { RequestCancelledError } from '../cancellation/cancellation-errors.js'
import type { Exchange } from '../cancellation/exchange.js'
import { LOGGING_LEVELS, type LoggingLevel } from '../protocol/era.js'
import type { RequestId } from '../protocol/jsonrpc.js'
import type { Era } from '../protocol/versions.js'

/**
 * What a handler gets as its last argument wherever it runs: in this process or in a worker thread
 * (a worker tool gets exactly this).
 */
export interface WorkerContext {
  readonly requestId: RequestId
  readonly method: string
  readonly era: Era
  readonly protocolVersion: string
  /** The authenticated principal id, or null (see the `auth` option). */
  readonly principal: string | null
  /** Aborts with a `RequestCancelledError` when the request is cancelled; hand it to fetch, timers, streams, child processes. */
  readonly signal: AbortSignal
  /** Polling style: true once the request is cancelled (in a worker, even inside a loop that never yields). */
  readonly cancelled: () => boolean
  /** Throws the `RequestCancelledError` once cancelled; the dispatcher treats it as cancellation, not as an error. */
  readonly throwIfCancelled: () => void
  /** `notifications/progress`, sent only when the request carried a progressToken and `progress` grows. */
  readonly progress: (progress: number, total?: number, message?: string) => Promise<void>
  /** `notifications/message` to the client, filtered by the request's log level. */
  readonly notify: (level: LoggingLevel, data: unknown, logger?: string) => Promise<void>
}

/**
 * What every tool, resource, prompt and completion handler running in this process gets: the worker
 * context and the Fastify request with its logger, which cannot cross into a worker thread.
 */
export interface HandlerContext extends WorkerContext {
  readonly request: FastifyRequest
  readonly log: FastifyBaseLogger
}

/** The request a context speaks for: an exchange in this process, or its mirror in a worker thread. */
export interface ContextSource {
  readonly id: RequestId
  readonly method: string
  readonly era: Era
  readonly protocolVersion: string
  readonly principal: string | null
  readonly signal: AbortSignal
  /** The abort reason once cancelled. */
  readonly cancellation: RequestCancelledError | undefined
  progress: (progress: number, total?: number, message?: string) => unknown
  log: (level: LoggingLevel, data: unknown, logger?: string) => unknown
}

/**
 * The one implementation of the handler context. Everything is read from the source on access and each
 * function is made (bound) on first use: most handlers touch one or two members, and a context built
 * eagerly would cost every request an AbortController and four closures. Bound, so that
 * `const { cancelled } = ctx` works as well as `ctx.cancelled()`.
 */
export class SourceContext implements WorkerContext {
  readonly #source: ContextSource
  #cancelled: (() => boolean) | undefined
  #throwIfCancelled: (() => void) | undefined
  #progress: WorkerContext['progress'] | undefined
  #notify: WorkerContext['notify'] | undefined

  constructor (source: ContextSource) {
    this.#source = source
  }

  get requestId (): RequestId { return this.#source.id }
  get method (): string { return this.#source.method }
  get era (): Era { return this.#source.era }
  get protocolVersion (): string { return this.#source.protocolVersion }
  get principal (): string | null { return this.#source.principal }
  get signal (): AbortSignal { return this.#source.signal }

  get cancelled (): () => boolean {
    const source = this.#source
    return (this.#cancelled ??= () => source.cancellation !== undefined)
  }

  get throwIfCancelled (): () => void {
    const source = this.#source
    return (this.#throwIfCancelled ??= () => {
      const cancellation = source.cancellation
      if (cancellation !== undefined) throw cancellation
    })
  }

  get progress (): WorkerContext['progress'] {
    const source = this.#source
    return (this.#progress ??= async (progress, total, message) => {
      source.progress(progress, total, message)
    })
  }

  get notify (): WorkerContext['notify'] {
    const source = this.#source
    return (this.#notify ??= async (level, data, logger) => {
      if (!LOGGING_LEVELS.includes(level)) throw new TypeError(`Unknown logging level: ${String(level)}`)
      source.log(level, data, logger)
    })
  }
}

/** The context of an in-process handler: the shared one, and the Fastify request it runs for. */
export class ExchangeContext extends SourceContext implements HandlerContext {
  readonly #exchange: Exchange

  constructor (exchange: Exchange) {
    super(exchange)
    this.#exchange = exchange
  }

  get request (): FastifyRequest { return this.#exchange.request }
  get log (): FastifyBaseLogger { return this.#exchange.request.log }
}
