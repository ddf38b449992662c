import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import type { Exchange } from '../cancellation/exchange.js'
import { LOGGING_LEVELS, type LoggingLevel } from '../protocol/era.js'
import type { RequestId } from '../protocol/jsonrpc.js'
import type { Era } from '../protocol/versions.js'

/** What every tool, resource, prompt and completion handler gets as its last argument. */
export interface HandlerContext {
  requestId: RequestId
  method: string
  era: Era
  protocolVersion: string
  request: FastifyRequest
  /** The authenticated principal id, or null (see the `auth` option). */
  principal: string | null
  log: FastifyBaseLogger
  /** Aborts when the request is cancelled; hand it to fetch, timers, streams, child processes. */
  signal: AbortSignal
  /** Polling style: true once the request is cancelled. */
  cancelled: () => boolean
  /** Throws the abort reason once cancelled; the dispatcher treats it as cancellation, not as an error. */
  throwIfCancelled: () => void
  /** `notifications/progress`, sent only when the request carried a progressToken and `progress` grows. */
  progress: (progress: number, total?: number, message?: string) => Promise<void>
  /** `notifications/message` to the client, filtered by the request's log level. */
  notify: (level: LoggingLevel, data: unknown, logger?: string) => Promise<void>
}

export function createContext (exchange: Exchange): HandlerContext {
  return {
    requestId: exchange.id,
    method: exchange.method,
    era: exchange.binding.era,
    protocolVersion: exchange.binding.version,
    request: exchange.request,
    principal: exchange.request.mcpPrincipal,
    log: exchange.request.log,
    // A getter: the AbortController is only made for handlers that use it.
    get signal () { return exchange.signal },
    cancelled: () => exchange.cancelled,
    throwIfCancelled: () => {
      const cancellation = exchange.cancellation
      if (cancellation !== undefined) throw cancellation
    },
    progress: async (progress, total, message) => {
      exchange.progress(progress, total, message)
    },
    notify: async (level, data, logger) => {
      if (!LOGGING_LEVELS.includes(level)) throw new TypeError(`Unknown logging level: ${String(level)}`)
      exchange.log(level, data, logger)
    }
  }
}
