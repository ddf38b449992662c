import type { IncomingHttpHeaders } from 'node:http'
import { ErrorCode, isJsonObject, ProtocolError, type JsonObject, type RequestId } from '../core/jsonrpc.js'
import { decodeMirroredValue, headerValue } from './header-values.js'
import { sanitizeText } from '../core/sanitize.js'
import { ERA_POLICIES, type EraPolicy } from './era-policy.js'
import { eraOf, HEADERLESS_LEGACY_VERSION, KNOWN_VERSIONS, type Era, type ProtocolVersion, type SupportedVersions } from './versions.js'

/** The per-request `_meta` keys of the modern era (docs/eras.md). */
export const MetaKey = {
  protocolVersion: 'io.modelcontextprotocol/protocolVersion',
  clientCapabilities: 'io.modelcontextprotocol/clientCapabilities',
  clientInfo: 'io.modelcontextprotocol/clientInfo',
  logLevel: 'io.modelcontextprotocol/logLevel',
  serverInfo: 'io.modelcontextprotocol/serverInfo',
  subscriptionId: 'io.modelcontextprotocol/subscriptionId'
} as const

export const LOGGING_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'] as const
export type LoggingLevel = typeof LOGGING_LEVELS[number]

export function isLoggingLevel (value: unknown): value is LoggingLevel {
  return (LOGGING_LEVELS as readonly unknown[]).includes(value)
}

/** What a message's era and revision are, once its headers and body agree. */
export interface EraBinding {
  era: Era
  /** What the era does differently (statuses, sessions, disconnects). */
  policy: EraPolicy
  version: ProtocolVersion
  /** Modern era: the minimum level the request asked log notifications for; absent means none. */
  logLevel: LoggingLevel | undefined
  clientCapabilities: JsonObject
}

/** Legacy bindings carry nothing per request (no capabilities on a stateless transport), so one per revision serves all. */
const LEGACY_BINDINGS = Object.fromEntries(KNOWN_VERSIONS.map(version => [version, Object.freeze({
  era: 'legacy', policy: ERA_POLICIES.legacy, version, logLevel: undefined, clientCapabilities: Object.freeze({})
})])) as unknown as Record<ProtocolVersion, EraBinding>

/** Methods whose `Mcp-Name` header mirrors a body field (https://github.com/modelcontextprotocol/modelcontextprotocol/blob/main/seps/2243-http-standardization.md). */
const NAMED_METHODS: Record<string, string> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId'
}

/**
 * Body-first classification (as the official SDK's v2 client sends them): a `_meta` protocol-version claim makes a message modern,
 * `initialize` is legacy. A message with neither is modern when its `MCP-Protocol-Version` header names a
 * modern revision (it then fails `_meta` validation with -32602, as 2026-07-28 requires), legacy otherwise.
 */
export function bindEra (method: string, params: JsonObject | undefined, id: RequestId | undefined,
  headers: IncomingHttpHeaders, supported: SupportedVersions): EraBinding {
  const headerVersion = headerValue(headers, 'mcp-protocol-version')
  return claimedEra(method, params, headerVersion) === 'modern'
    ? bindModern(method, params ?? {}, id, headers, supported)
    : bindLegacy(method, id, headerVersion, supported)
}

/**
 * The era a message claims before anything in it is checked (the rule `bindEra` binds by): modern when
 * its `_meta` carries a protocol-version claim, or when it is not `initialize` and `headerVersion` (its
 * `MCP-Protocol-Version`) names a modern revision; legacy otherwise.
 */
export function claimedEra (method: string, params: JsonObject | undefined, headerVersion: string | undefined): Era {
  const meta = params?._meta
  const claim = isJsonObject(meta) ? meta[MetaKey.protocolVersion] : undefined
  return claim !== undefined || (method !== 'initialize' && typeof headerVersion === 'string' && eraOf(headerVersion) === 'modern')
    ? 'modern'
    : 'legacy'
}

function bindLegacy (method: string, id: RequestId | undefined, headerVersion: string | undefined,
  supported: SupportedVersions): EraBinding {
  // initialize negotiates in its body; the header only applies to what follows it.
  if (method === 'initialize') return LEGACY_BINDINGS[supported.legacy[0] as ProtocolVersion]
  const version = headerVersion ?? HEADERLESS_LEGACY_VERSION
  if (supported.hasLegacy(version)) return LEGACY_BINDINGS[version]
  const message = headerVersion === undefined
    ? 'Bad Request: MCP-Protocol-Version header is required'
    : `Bad Request: unsupported protocol version ${sanitizeText(headerVersion, 40)} (supported: ${supported.legacy.join(', ')})`
  throw new ProtocolError(ErrorCode.InvalidRequest, message, { httpStatus: 400, id })
}

/** The modern era's checks, in one fixed order (header≠body before unsupported version, as conformance pins). */
function bindModern (method: string, params: JsonObject, id: RequestId | undefined,
  headers: IncomingHttpHeaders, supported: SupportedVersions): EraBinding {
  const meta = isJsonObject(params._meta) ? params._meta : undefined
  const claim = meta?.[MetaKey.protocolVersion]
  const headerVersion = headerValue(headers, 'mcp-protocol-version')
  if (claim !== undefined && headerVersion !== claim) {
    throw headerMismatch(id, headerVersion === undefined
      ? 'MCP-Protocol-Version header is required'
      : 'MCP-Protocol-Version header does not match _meta protocolVersion')
  }
  if (meta === undefined) throw invalidMeta(id, '_meta is required')
  if (typeof claim !== 'string') throw invalidMeta(id, `_meta["${MetaKey.protocolVersion}"] must be a string`)
  const clientCapabilities = meta[MetaKey.clientCapabilities]
  if (!isJsonObject(clientCapabilities)) throw invalidMeta(id, `_meta["${MetaKey.clientCapabilities}"] must be an object`)
  if (!supported.has(claim) || eraOf(claim) !== 'modern') {
    throw new ProtocolError(ErrorCode.UnsupportedProtocolVersion, 'Unsupported protocol version', {
      httpStatus: 400, id, data: { supported: supported.all, requested: sanitizeText(claim, 40) }
    })
  }
  checkMirroredHeaders(method, params, id, headers)
  return { era: 'modern', policy: ERA_POLICIES.modern, version: claim, logLevel: logLevelOf(meta, id), clientCapabilities }
}

function checkMirroredHeaders (method: string, params: JsonObject, id: RequestId | undefined, headers: IncomingHttpHeaders): void {
  if (headerValue(headers, 'mcp-method') !== method) throw headerMismatch(id, 'Mcp-Method header must equal the request method')
  const field = NAMED_METHODS[method]
  if (field === undefined) return
  const header = headerValue(headers, 'mcp-name')
  const name = header === undefined ? undefined : decodeMirroredValue(header)
  if (name === undefined || name !== params[field]) throw headerMismatch(id, `Mcp-Name header must equal params.${field}`)
}

function logLevelOf (meta: JsonObject, id: RequestId | undefined): LoggingLevel | undefined {
  const level = meta[MetaKey.logLevel]
  if (level === undefined) return undefined
  if (!isLoggingLevel(level)) throw invalidMeta(id, `_meta["${MetaKey.logLevel}"] is not a logging level`)
  return level as LoggingLevel
}

export function headerMismatch (id: RequestId | undefined, message: string): ProtocolError {
  return new ProtocolError(ErrorCode.HeaderMismatch, `Header mismatch: ${message}`, { httpStatus: 400, id })
}

function invalidMeta (id: RequestId | undefined, message: string): ProtocolError {
  return new ProtocolError(ErrorCode.InvalidParams, `Invalid params: ${message}`, { httpStatus: 400, id })
}
