import { ErrorCode, ProtocolError, type JsonObject } from '../core/jsonrpc.js'
import type { Era } from './versions.js'

/**
 * What differs between the eras beyond the shape of their messages, in one place instead of a
 * ternary at each use: how a method's JSON-RPC error travels, which error code an unknown resource
 * gets, whether the era has sessions, and whether a closed response stream always cancels.
 */
export interface EraPolicy {
  readonly era: Era
  /**
   * The HTTP status a method's JSON-RPC error travels with. The modern era maps some errors to a status
   * (-32601 is a 404, -32021 a 400: the error's own `httpStatus`); legacy revisions map none (200).
   * Envelope, header and session failures are not method errors: they keep their status in both eras.
   */
  methodErrorStatus: (error: ProtocolError) => number
  /** The modern era retired -32002 for -32602; legacy revisions keep -32002. */
  readonly resourceNotFoundCode: number
  /** Legacy revisions have `Mcp-Session-Id` sessions; the modern era has none (the header is ignored). */
  readonly sessions: boolean
  /**
   * Modern era: closing the response stream MUST be treated as cancellation. Legacy revisions say it
   * SHOULD NOT, which the `disconnectCancels` option decides.
   */
  readonly disconnectAlwaysCancels: boolean
}

export const ERA_POLICIES: Readonly<Record<Era, EraPolicy>> = Object.freeze({
  legacy: Object.freeze({
    era: 'legacy',
    methodErrorStatus: () => 200,
    resourceNotFoundCode: ErrorCode.ResourceNotFound,
    sessions: true,
    disconnectAlwaysCancels: false
  }),
  modern: Object.freeze({
    era: 'modern',
    methodErrorStatus: (error: ProtocolError) => error.httpStatus,
    resourceNotFoundCode: ErrorCode.InvalidParams,
    sessions: false,
    disconnectAlwaysCancels: true
  })
})

/**
 * -32021: the client did not declare a capability the operation needs (`required`, as the error's
 * `data.requiredCapabilities`). HTTP 400 where the era maps it (`methodErrorStatus`).
 */
export function missingCapability (required: JsonObject): ProtocolError {
  return new ProtocolError(ErrorCode.MissingRequiredClientCapability, 'Missing required client capability', {
    httpStatus: 400, data: { requiredCapabilities: required }
  })
}

/** -32601 for a method the era does not serve (HTTP 404 where the era maps it). */
export function methodNotFound (detail: string): ProtocolError {
  return new ProtocolError(ErrorCode.MethodNotFound, `Method not found: ${detail}`, { httpStatus: 404 })
}
