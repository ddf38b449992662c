/** JSON-RPC 2.0 as MCP uses it: ids, message shapes, error codes, and the error type of the request path. */

export type RequestId = string | number
export type JsonObject = Record<string, unknown>

export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** Legacy implementation-defined range; used for "Too many outstanding cancellations". */
  ServerError: -32000,
  /** Legacy revisions only, as the official SDK answers an unknown or terminated session. */
  SessionNotFound: -32001,
  /** Legacy revisions only (the modern era uses InvalidParams). */
  ResourceNotFound: -32002,
  HeaderMismatch: -32020,
  MissingRequiredClientCapability: -32021,
  UnsupportedProtocolVersion: -32022,
  RequestCancelled: -32800
} as const

export interface JsonRpcErrorObject {
  code: number
  message: string
  data?: unknown
}

export interface JsonRpcResponse {
  jsonrpc: '2.0'
  id?: RequestId
  result?: unknown
  error?: JsonRpcErrorObject
}

export interface JsonRpcNotification {
  jsonrpc: '2.0'
  method: string
  params?: JsonObject
}

/** A request of the server to the client (legacy era: sent on the stream of the POST it serves). */
export interface JsonRpcRequest extends JsonRpcNotification {
  id: RequestId
}

/** Longest string id accepted, in UTF-8 bytes: ids are keys of the cancellation table. */
export const MAX_ID_BYTES = 256

export function isRequestId (value: unknown): value is RequestId {
  if (typeof value === 'number') return Number.isSafeInteger(value)
  // Cheap length test first: a UTF-8 byte is at most 3 per UTF-16 unit, at least 1.
  return typeof value === 'string' &&
    (value.length * 3 <= MAX_ID_BYTES || (value.length <= MAX_ID_BYTES && Buffer.byteLength(value) <= MAX_ID_BYTES))
}

export function isJsonObject (value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * An error that ends one JSON-RPC exchange: it carries the JSON-RPC error, the HTTP status it travels
 * with, and the request id when one could be read. Thrown anywhere on the request path, written once.
 */
export class ProtocolError extends Error {
  readonly code: number
  readonly data: unknown
  readonly httpStatus: number
  id: RequestId | undefined
  readonly headers: Record<string, string> | undefined

  constructor (code: number, message: string, options: { httpStatus?: number, data?: unknown, id?: RequestId | undefined, headers?: Record<string, string> } = {}) {
    super(message)
    this.name = 'ProtocolError'
    this.code = code
    this.data = options.data
    this.httpStatus = options.httpStatus ?? 200
    this.id = options.id
    this.headers = options.headers
  }

  /** This error travelling with `httpStatus` instead (itself when that is its status already). */
  withHttpStatus (httpStatus: number): ProtocolError {
    return httpStatus === this.httpStatus
      ? this
      : new ProtocolError(this.code, this.message, { httpStatus, data: this.data, id: this.id, headers: this.headers })
  }

  toResponse (): JsonRpcResponse {
    const error: JsonRpcErrorObject = { code: this.code, message: this.message }
    if (this.data !== undefined) error.data = this.data
    return errorResponse(this.id, error)
  }
}

export function resultResponse (id: RequestId, result: unknown): JsonRpcResponse {
  return { jsonrpc: '2.0', id, result }
}

/** The MCP schema makes `id` optional and non-nullable: an unreadable id is omitted, never `null`. */
export function errorResponse (id: RequestId | undefined, error: JsonRpcErrorObject): JsonRpcResponse {
  return id === undefined ? { jsonrpc: '2.0', error } : { jsonrpc: '2.0', id, error }
}

/** -32602 for a method's own parameter checks: an ordinary JSON-RPC error response (HTTP 200). */
export function invalidParams (detail: string, data?: unknown): ProtocolError {
  return new ProtocolError(ErrorCode.InvalidParams, `Invalid params: ${detail}`, { data })
}
