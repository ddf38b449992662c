import { jsonStructureViolation, type JsonLimits } from './json-guard.js'
import { ErrorCode, isJsonObject, isRequestId, ProtocolError, type JsonObject, type RequestId } from '../core/jsonrpc.js'

/** One JSON-RPC message from a POST body, after the envelope has been checked. */
export type IncomingMessage =
  | { kind: 'request', id: RequestId, method: string, params: JsonObject }
  | { kind: 'notification', method: string, params: JsonObject | undefined }
  | { kind: 'response', id: RequestId, result: unknown, error: unknown }

/** Parses a body after the structural checks of `json-guard.ts`; both failures are a 400 without id. */
export function parseJson (body: string, limits: JsonLimits): unknown {
  const violation = jsonStructureViolation(body, limits)
  if (violation !== undefined) throw new ProtocolError(ErrorCode.InvalidRequest, `Invalid Request: ${violation}`, { httpStatus: 400 })
  try {
    return JSON.parse(body)
  } catch {
    throw new ProtocolError(ErrorCode.ParseError, 'Parse error: the body is not valid JSON', { httpStatus: 400 })
  }
}

/**
 * Checks the JSON-RPC 2.0 envelope. What the transport rejects here is a 400; what a method answers
 * later is an ordinary response. The id is echoed whenever it is valid, so errors stay correlatable.
 */
export function toIncomingMessage (value: unknown): IncomingMessage {
  if (!isJsonObject(value) || value.jsonrpc !== '2.0') throw invalidRequest(undefined)
  const hasId = 'id' in value
  const id = isRequestId(value.id) ? value.id : undefined
  if (hasId && id === undefined) throw invalidRequest(undefined, 'id must be a string of at most 256 bytes or a safe integer')

  if (!('method' in value)) {
    if (id !== undefined && ('result' in value || 'error' in value)) return { kind: 'response', id, result: value.result, error: value.error }
    throw invalidRequest(id)
  }
  if (typeof value.method !== 'string') throw invalidRequest(id, 'method must be a string')
  const params = value.params
  if (params !== undefined && !isJsonObject(params)) {
    throw new ProtocolError(ErrorCode.InvalidParams, 'Invalid params: params must be an object', { httpStatus: 400, id })
  }
  return id === undefined
    ? { kind: 'notification', method: value.method, params }
    : { kind: 'request', id, method: value.method, params: params ?? {} }
}

function invalidRequest (id: RequestId | undefined, detail?: string): ProtocolError {
  const message = detail === undefined ? 'Invalid Request' : `Invalid Request: ${detail}`
  return new ProtocolError(ErrorCode.InvalidRequest, message, { httpStatus: 400, id })
}
