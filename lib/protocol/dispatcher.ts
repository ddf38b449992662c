import type { FastifyRequest } from 'fastify'
import { Exchange } from '../cancellation/exchange.js'
import { bindEra, type EraBinding } from './era.js'
import { ErrorCode, errorResponse, ProtocolError, resultResponse, type RequestId } from './jsonrpc.js'
import type { IncomingMessage } from './message.js'
import { sanitizeText } from './sanitize.js'
import type { SupportedVersions } from './versions.js'
import type { McpServer, MethodSpec } from '../server/mcp-server.js'
import type { ResponseSink } from '../transport/response-channel.js'

type Request = Extract<IncomingMessage, { kind: 'request' }>
type Notification = Extract<IncomingMessage, { kind: 'notification' }>

/**
 * Takes one checked JSON-RPC message from the transport to the server. Everything decided before a
 * handler runs (era, headers, method lookup) throws a `ProtocolError` that the transport writes with
 * its HTTP status; once the exchange exists, every outcome goes to the exchange's response sink.
 */
export class Dispatcher {
  readonly #server: McpServer
  readonly #versions: SupportedVersions

  constructor (server: McpServer, versions: SupportedVersions) {
    this.#server = server
    this.#versions = versions
  }

  /** Binds the request to its era and method; throws what must be answered before dispatch. */
  prepare (message: Request, request: FastifyRequest): { binding: EraBinding, method: MethodSpec } {
    const binding = bindEra(message.method, message.params, message.id, request.headers, this.#versions)
    const method = this.#server.method(message.method, binding.era)
    if (method === undefined) {
      throw new ProtocolError(ErrorCode.MethodNotFound, `Method not found: ${sanitizeText(message.method)}`, {
        id: message.id,
        // 2026-07-28: an unimplemented method is an HTTP 404; legacy revisions map no error to a status.
        httpStatus: binding.era === 'modern' ? 404 : 200
      })
    }
    try {
      method.preflight?.(message.params, binding, request.headers)
    } catch (error) {
      if (error instanceof ProtocolError) error.id = message.id
      throw error
    }
    return { binding, method }
  }

  /** Runs a prepared request to its end: result, JSON-RPC error, or (when cancelled) no response at all. */
  async run (message: Request, binding: EraBinding, method: MethodSpec, request: FastifyRequest, sink: ResponseSink): Promise<void> {
    const exchange = new Exchange(request, message.id, message.method, message.params, binding, sink)
    try {
      const result = await method.handler(exchange)
      if (exchange.cancelled) sink.abandon()
      else sink.respond(resultResponse(message.id, this.#server.finishResult(result, method, binding.era)))
    } catch (error) {
      if (exchange.cancelled) sink.abandon()
      else sink.respond(this.#errorResponse(error, message.id, request))
    }
  }

  /** Notifications need no answer but 202; one the transport cannot accept throws a 4xx `ProtocolError`. */
  notify (message: Notification, request: FastifyRequest): void {
    bindEra(message.method, message.params, undefined, request.headers, this.#versions)
  }

  #errorResponse (error: unknown, id: RequestId, request: FastifyRequest): ReturnType<typeof errorResponse> {
    if (error instanceof ProtocolError) {
      error.id = id
      return error.toResponse()
    }
    // Handler bugs are logged in full and answered without detail: no stack trace crosses the wire.
    request.log.error({ err: error }, 'MCP request handler failed')
    return errorResponse(id, { code: ErrorCode.InternalError, message: 'Internal error' })
  }
}
