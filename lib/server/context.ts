import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import type { Exchange } from '../cancellation/exchange.js'
import { LOGGING_LEVELS, type LoggingLevel } from '../protocol/era.js'
import type { RequestId } from '../protocol/jsonrpc.js'
import type { Era } from '../protocol/versions.js'

/** What every tool, resource, prompt and completion handler gets as its last argument. */
export interface HandlerContext {
  readonly requestId: RequestId
  readonly method: string
  readonly era: Era
  readonly protocolVersion: string
  readonly request: FastifyRequest
  /** The authenticated principal id, or null (see the `auth` option). */
  readonly principal: string | null
  readonly log: FastifyBaseLogger
  /** Aborts when the request is cancelled; hand it to fetch, timers, streams, child processes. */
  readonly signal: AbortSignal
  /** Polling style: true once the request is cancelled. */
  readonly cancelled: () => boolean
  /** Throws the abort reason once cancelled; the dispatcher treats it as cancellation, not as an error. */
  readonly throwIfCancelled: () => void
  /** `notifications/progress`, sent only when the request carried a progressToken and `progress` grows. */
  readonly progress: (progress: number, total?: number, message?: string) => Promise<void>
  /** `notifications/message` to the client, filtered by the request's log level. */
  readonly notify: (level: LoggingLevel, data: unknown, logger?: string) => Promise<void>
}

/**
 * The handler context of one exchange. Everything is read from the exchange on access and each
 * function is made (bound) on first use: most handlers touch one or two members, and a context built
 * eagerly would cost every request an AbortController and four closures. Bound, so that
 * `const { cancelled } = ctx` works as well as `ctx.cancelled()`.
 */
export class ExchangeContext implements HandlerContext {
  readonly #exchange: Exchange
  #cancelled: (() => boolean) | undefined
  #throwIfCancelled: (() => void) | undefined
  #progress: HandlerContext['progress'] | undefined
  #notify: HandlerContext['notify'] | undefined

  constructor (exchange: Exchange) {
    this.#exchange = exchange
  }

  get requestId (): RequestId { return this.#exchange.id }
  get method (): string { return this.#exchange.method }
  get era (): Era { return this.#exchange.binding.era }
  get protocolVersion (): string { return this.#exchange.binding.version }
  get request (): FastifyRequest { return this.#exchange.request }
  get principal (): string | null { return this.#exchange.request.mcpPrincipal }
  get log (): FastifyBaseLogger { return this.#exchange.request.log }
  get signal (): AbortSignal { return this.#exchange.signal }

  get cancelled (): () => boolean {
    const exchange = this.#exchange
    return (this.#cancelled ??= () => exchange.cancelled)
  }

  get throwIfCancelled (): () => void {
    const exchange = this.#exchange
    return (this.#throwIfCancelled ??= () => {
      const cancellation = exchange.cancellation
      if (cancellation !== undefined) throw cancellation
    })
  }

  get progress (): HandlerContext['progress'] {
    const exchange = this.#exchange
    return (this.#progress ??= async (progress, total, message) => {
      exchange.progress(progress, total, message)
    })
  }

  get notify (): HandlerContext['notify'] {
    const exchange = this.#exchange
    return (this.#notify ??= async (level, data, logger) => {
      if (!LOGGING_LEVELS.includes(level)) throw new TypeError(`Unknown logging level: ${String(level)}`)
      exchange.log(level, data, logger)
    })
  }
}
