import { InvalidOptionError } from './errors.js'
import { KNOWN_VERSIONS } from './protocol/versions.js'

export type ResponseMode = 'auto' | 'json' | 'sse'
export type OriginMatcher = string | RegExp

export interface Implementation {
  name: string
  version: string
  title?: string | undefined
  [key: string]: unknown
}

export interface McpCancellationOptions {
  /** URL of the MCP endpoint. Default `'/mcp'`. */
  path?: string | undefined
  /** Reported in `initialize` and in every modern result's `_meta`. Default: this package's name and version. */
  serverInfo?: Implementation | undefined
  /** Free text for the client's model, sent in `initialize` and `server/discover`. */
  instructions?: string | undefined
  /** Revisions served. Default `['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26']`. */
  protocolVersions?: readonly string[] | undefined
  /** `'auto'` answers JSON until a handler emits a notification, then SSE. Default `'auto'`. */
  responseMode?: ResponseMode | undefined
  /** Largest accepted body in bytes. Default 1 MiB. */
  bodyLimit?: number | undefined
  /** Allowed `Origin` values (exact strings or RegExps). Default: localhost, 127.0.0.1 and [::1] on any port. */
  allowedOrigins?: readonly OriginMatcher[] | undefined
  /** Allowed `Host` values (exact strings or RegExps). Default: no Host check. */
  allowedHosts?: readonly OriginMatcher[] | undefined
  /** `ttlMs` of modern list results (SEP-2549). Default 60 000. */
  listTtlMs?: number | undefined
}

export interface Settings {
  path: string
  serverInfo: Implementation
  instructions: string | undefined
  protocolVersions: readonly string[]
  responseMode: ResponseMode
  bodyLimit: number
  allowedOrigins: readonly OriginMatcher[]
  allowedHosts: readonly OriginMatcher[] | undefined
  listTtlMs: number
}

export const DEFAULT_ALLOWED_ORIGINS: readonly OriginMatcher[] = [/^https?:\/\/(?:localhost|127\.0\.0\.1|\[::1\])(?::\d{1,5})?$/]

const RESPONSE_MODES: readonly ResponseMode[] = ['auto', 'json', 'sse']

export function resolveSettings (options: McpCancellationOptions, defaultServerInfo: Implementation): Settings {
  const path = options.path ?? '/mcp'
  if (typeof path !== 'string' || !path.startsWith('/')) throw new InvalidOptionError('path', 'must be a string starting with "/"')

  const serverInfo = options.serverInfo ?? defaultServerInfo
  if (typeof serverInfo?.name !== 'string' || typeof serverInfo.version !== 'string') {
    throw new InvalidOptionError('serverInfo', 'must be an object with string "name" and "version"')
  }
  if (options.instructions !== undefined && typeof options.instructions !== 'string') {
    throw new InvalidOptionError('instructions', 'must be a string')
  }

  const protocolVersions = options.protocolVersions ?? KNOWN_VERSIONS
  if (!Array.isArray(protocolVersions) || protocolVersions.length === 0 ||
    !protocolVersions.every(v => KNOWN_VERSIONS.includes(v))) {
    throw new InvalidOptionError('protocolVersions', `must be a non-empty subset of ${KNOWN_VERSIONS.join(', ')}`)
  }

  const responseMode = options.responseMode ?? 'auto'
  if (!RESPONSE_MODES.includes(responseMode)) throw new InvalidOptionError('responseMode', `must be one of ${RESPONSE_MODES.join(', ')}`)

  return {
    path,
    serverInfo,
    instructions: options.instructions,
    protocolVersions,
    responseMode,
    bodyLimit: positiveInteger('bodyLimit', options.bodyLimit, 1024 * 1024),
    allowedOrigins: matchers('allowedOrigins', options.allowedOrigins) ?? DEFAULT_ALLOWED_ORIGINS,
    allowedHosts: matchers('allowedHosts', options.allowedHosts),
    listTtlMs: positiveInteger('listTtlMs', options.listTtlMs, 60_000, 0)
  }
}

export function positiveInteger (name: string, value: unknown, fallback: number, min = 1): number {
  if (value === undefined) return fallback
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidOptionError(name, `must be an integer >= ${min}`)
  }
  return value
}

function matchers (name: string, value: unknown): readonly OriginMatcher[] | undefined {
  if (value === undefined) return undefined
  if (!Array.isArray(value) || !value.every(m => typeof m === 'string' || m instanceof RegExp)) {
    throw new InvalidOptionError(name, 'must be an array of strings and RegExps')
  }
  return value
}
