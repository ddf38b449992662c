import type { FastifyRequest } from 'fastify'
import type { Registry } from 'prom-client'
import { randomBytes } from 'node:crypto'
import { InvalidOptionError } from '../core/errors.js'
import type { JsonLimits } from '../protocol/json-guard.js'
import type { Implementation } from '../protocol/implementation.js'
import type { OriginMatcher } from '../transport/origin-guard.js'
import type { MetricsGuard } from '../observability/metrics-route.js'
import { KNOWN_VERSIONS } from '../protocol/versions.js'
import { flag, positiveInteger } from './option-values.js'
import { resolveOAuth, type OAuthOptions, type OAuthSettings } from './oauth-options.js'
import { resolveEvents, type EventsOptions, type EventsSettings } from './events-options.js'
import { resolveResumability, type ResumabilityOptions, type ResumabilitySettings } from './resumability-options.js'
import type { AccessTokenSettings } from '../identity/access-tokens.js'
import type { ResponseMode } from '../transport/http-response-sink.js'
import type { WorkerPoolOptions } from '../server/worker-pool.js'

export type { Implementation, OriginMatcher }

/**
 * An ioredis client (`new Redis(...)`), typed by the members the plugin checks, so that applications
 * without ioredis installed still compile.
 */
export interface RedisClient {
  duplicate: (...args: never[]) => unknown
  publish: (...args: never[]) => unknown
  readonly status: string
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
  /** `ttlMs` of modern list results (how long a client may cache them). Default 60 000. */
  listTtlMs?: number | undefined
  /** Deepest object/array nesting accepted in a body. Default 64. */
  maxJsonDepth?: number | undefined
  /** Most values accepted in a body. Default 100 000. */
  maxJsonValues?: number | undefined
  /** Cancellation rows one scope may hold; more are rejected (429). Default 256; `Infinity` disables. */
  maxRowsPerScope?: number | undefined
  /**
   * Requests one scope (session, principal or address) may have running at once; one more is refused
   * with 429 and `Retry-After` before its handler runs, in both eras. Default 32; `Infinity` disables.
   * Worker tools beyond the pool's threads also wait per scope, round robin.
   */
  maxInFlightPerScope?: number | undefined
  /** Cancellation rows in all; reaching it evicts a batch, largest scope first. Default 10 000; `Infinity` disables. */
  maxRows?: number | undefined
  /** How often the janitor sweeps the cancellation table. Default 60 000 ms. */
  janitorIntervalMs?: number | undefined
  /** Age after which the janitor drops a cancellation row. Default 300 000 ms. */
  cancellationTtlMs?: number | undefined
  /** A cancelled handler still running after this long is killed (worker tools) or abandoned. Default 5 000 ms. */
  cancelTimeoutMs?: number | undefined
  /** A request running longer is cancelled (source `lifetime`, -32800 to the client). Default 600 000 ms. */
  maxStreamLifetimeMs?: number | undefined
  /** At most one progress notification per request per interval. Default 50 ms. */
  progressIntervalMs?: number | undefined
  /** SSE comment keep-alive on open streams. Default 15 000 ms. */
  keepAliveMs?: number | undefined
  /**
   * Legacy era: a client's disconnect cancels its request (a deviation from a SHOULD NOT, see README); a
   * resumable stream's only once its resume window passed. Default true.
   */
  disconnectCancels?: boolean | undefined
  /**
   * Resumable legacy streams (2025-11-25 clients): a streamed response is primed and carries event ids,
   * a dropped connection pauses it for a resume (`GET` with `Last-Event-ID`, on any node with `redis`)
   * instead of cancelling it, and `ctx.closeStream()` polls. Default on; `false` turns it off
   * (docs/resumability.md).
   */
  resumability?: boolean | ResumabilityOptions | undefined
  /** Prometheus metrics. Default: a registry of the plugin's own, served at `/metrics`. `false` disables them. */
  metrics?: MetricsOptions | false | undefined
  /**
   * OpenTelemetry spans and `mcp.server.operation.duration`, through `@opentelemetry/api`: recorded when
   * the application registered an SDK, nothing done otherwise. Default true; `false` turns them off.
   */
  tracing?: boolean | undefined
  /** Threads for tools registered with `worker` (created on first use). */
  workerPool?: WorkerPoolOptions | undefined
  /**
   * Cluster-wide cancellation, session revocation and tasks through Redis: an ioredis client (a `Redis`,
   * also one that Sentinel manages, or a `Cluster`; never closed by the plugin), a `redis://` or
   * `rediss://` (TLS) URL, or a list of them: the seed nodes of a Redis Cluster. URLs need the optional
   * peer `ioredis`. Default: this node only.
   */
  redis?: RedisClient | string | readonly string[] | undefined
  /** Prefix of the Redis channels and keys. Default `'mcp:'`. */
  redisPrefix?: string | undefined
  /** Signed stateless sessions for the legacy era. Default: off. */
  sessions?: SessionOptions | false | undefined
  /** Who a request speaks for. Default: nobody (anonymous clients are scoped by address). */
  auth?: AuthOptions | undefined
  /**
   * Server-to-client notifications (list changes, resource updates, task status) to listening clients
   * on every node: 2026-07-28 `subscriptions/listen`, and with `sessions` a legacy session's GET stream.
   * Default on; `false` turns it off (docs/notifications.md).
   */
  events?: boolean | EventsOptions | undefined
  /**
   * The key (at least 32 bytes) the signed values derive from: the `requestState` of modern input
   * rounds, the ids of legacy-era requests to the client and the event ids of resumable streams. Every
   * node of a deployment needs the same one. Default: a random key per process (a round then continues,
   * an answer is accepted, and a stream resumes, only on the node that began it).
   */
  secret?: string | Buffer | undefined
  /**
   * How long a legacy-era ask (`ctx.elicit()`, `ctx.sample()`, `ctx.roots()`, `ctx.input()`) waits for
   * the client's answer before it fails with a `ClientInputError`. Default: `maxStreamLifetimeMs` (which
   * ends the request anyway).
   */
  inputTimeoutMs?: number | undefined
  /** How long a task (tasks extension (modern era)) is kept once it has ended; its `ttlMs`. Default 600 000 ms. */
  taskTtlMs?: number | undefined
  /** The `pollIntervalMs` tasks suggest to clients. Default 1000 ms. */
  taskPollIntervalMs?: number | undefined
  /** Live tasks one scope may have; one more is refused (429). Default 16. */
  maxTasksPerScope?: number | undefined
  /**
   * Tasks one scope keeps, live or ended; at it, the scope's own oldest ended task is dropped to make
   * room. At least `maxTasksPerScope`. Default 256 (`maxTasksPerScope` when larger).
   */
  maxKeptTasksPerScope?: number | undefined
  /**
   * Bytes (the stored records: JSON in memory, hash fields and values in Redis) one scope's tasks may
   * take, live or ended; over it, the scope's own oldest ended tasks are dropped, and a new task that
   * still does not fit is refused (429). At least `maxTaskResultBytes`. Default 16 777 216 (16 MiB;
   * `maxTaskResultBytes` when larger).
   */
  maxTaskBytesPerScope?: number | undefined
  /**
   * Tasks kept in all (this node's memory, or the cluster's Redis), live or ended; over it, ended tasks
   * are dropped, from the scopes keeping the most first, oldest first. Never refuses. Default 10 000.
   */
  maxTasks?: number | undefined
  /** Bytes of all tasks kept (as `maxTaskBytesPerScope` counts them); over it, ended tasks are dropped as for `maxTasks`. Default 134 217 728 (128 MiB). */
  maxTaskBytes?: number | undefined
  /** Largest result (JSON bytes) a task keeps; a larger one fails the task. Default 1 048 576. */
  maxTaskResultBytes?: number | undefined
  /**
   * With `redis`: how long a task outlives the node running it. The node renews its tasks' leases three
   * times per lease; a live task whose lease lapses (its node died) reads as `failed` on every node.
   * Default 30 000 ms.
   */
  taskLeaseMs?: number | undefined
  /**
   * With `redis` and a primary that has replicas: how long a new task waits for one replica to
   * acknowledge it (`WAIT`) before its `CreateTaskResult` is sent, so that a failover right after cannot
   * lose it. A replica that does not answer in time is logged and counted (the task is created all the
   * same). Default 1 000 ms; `0` does not wait.
   */
  taskReplicationTimeoutMs?: number | undefined
  /** How long the `requestState` of an input round stays valid. Default 600 000 ms. */
  inputRoundTtlMs?: number | undefined
  /** Longest `requestState` issued or accepted, in bytes. Default 65 536. */
  maxRequestStateBytes?: number | undefined
  /** Most `input_required` rounds one request may take. Default 16. */
  maxInputRounds?: number | undefined
}

export interface MetricsOptions {
  /** Register the metrics here (existing ones of the same name are reused). Default: a new Registry per plugin instance. */
  registry?: Registry | undefined
  /** Where to serve them; `false` serves nothing (scrape the registry yourself). Default `'/metrics'`. */
  path?: string | false | undefined
  /** A guard for the metrics route (authentication, an IP allowlist). */
  onRequest?: MetricsGuard | undefined
}

export interface SessionOptions {
  /** HMAC-SHA256 key shared by every node; at least 32 bytes. */
  secret: string | Buffer
  /** Lifetime of a session. Default 24 h. */
  ttlMs?: number | undefined
  /** Legacy requests other than initialize must carry a session (400 otherwise). Default false. */
  required?: boolean | undefined
  /** Revoked sessions remembered at once (memory store). Default 100 000. */
  maxRevocations?: number | undefined
}

export interface AuthOptions {
  /**
   * Verify bearer tokens with `@fastify/jwt`, which the app registers first. `true` calls
   * `request.jwtVerify()`; `{ verify: 'name' }` names another method (a jwt `namespace`).
   */
  jwt?: boolean | { verify?: string | undefined } | undefined
  /** The JWT claim that names the principal. Default `'sub'`. */
  principalClaim?: string | undefined
  /**
   * Any other scheme: the principal of a request, as its id (a string or an integer) or as
   * `{ id, scopes?, claims? }`; null/undefined is anonymous, a throw is refused.
   */
  principal?: ((request: FastifyRequest) => unknown) | undefined
  /**
   * This endpoint as an OAuth 2.1 resource server: Protected Resource Metadata, challenges that let
   * clients sign in by themselves, access tokens verified for this resource, scopes per operation.
   * Alone it verifies the tokens itself; beside `jwt` or `principal` it adds the metadata, the
   * challenges and the scopes to theirs.
   */
  oauth?: OAuthOptions | undefined
  /** Requests without credentials are a 401. Default true. */
  required?: boolean | undefined
}

/** How a request's credentials are read and verified. */
export type CredentialSettings =
  | { kind: 'jwt', verifyMethod: string, claim: string }
  | { kind: 'custom', principal: (request: FastifyRequest) => unknown }
  | { kind: 'oauth', tokens: AccessTokenSettings, maxTokenBytes: number, cache: { maxEntries: number, maxAgeMs: number } }

export interface AuthSettings {
  credentials: CredentialSettings
  required: boolean
  oauth: OAuthSettings | undefined
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
  json: JsonLimits
  maxRowsPerScope: number
  maxInFlightPerScope: number
  maxRows: number
  janitorIntervalMs: number
  cancellationTtlMs: number
  cancelTimeoutMs: number
  maxStreamLifetimeMs: number
  progressIntervalMs: number
  keepAliveMs: number
  disconnectCancels: boolean
  resumability: ResumabilitySettings
  tracing: boolean
  workerPool: WorkerPoolOptions | undefined
  redis: RedisClient | string | readonly string[] | undefined
  redisPrefix: string
  metrics: { registry: Registry | undefined, path: string | false, onRequest: MetricsGuard | undefined } | undefined
  sessions: Required<SessionOptions> | undefined
  auth: AuthSettings | undefined
  events: EventsSettings
  /** The `secret` option, or a random key when it was not given (`secretGiven` false). */
  secret: Buffer
  secretGiven: boolean
  inputRoundTtlMs: number
  inputTimeoutMs: number
  taskTtlMs: number
  taskPollIntervalMs: number
  maxTasksPerScope: number
  maxKeptTasksPerScope: number
  maxTaskBytesPerScope: number
  maxTasks: number
  maxTaskBytes: number
  maxTaskResultBytes: number
  taskLeaseMs: number
  taskReplicationTimeoutMs: number
  maxRequestStateBytes: number
  maxInputRounds: number
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

  const maxStreamLifetimeMs = positiveInteger('maxStreamLifetimeMs', options.maxStreamLifetimeMs, 600_000)
  const protocolVersions = options.protocolVersions ?? KNOWN_VERSIONS
  if (!Array.isArray(protocolVersions) || protocolVersions.length === 0 ||
    !protocolVersions.every(v => KNOWN_VERSIONS.includes(v))) {
    throw new InvalidOptionError('protocolVersions', `must be a non-empty subset of ${KNOWN_VERSIONS.join(', ')}`)
  }

  const maxTasksPerScope = positiveInteger('maxTasksPerScope', options.maxTasksPerScope, 16)
  const maxTaskResultBytes = positiveInteger('maxTaskResultBytes', options.maxTaskResultBytes, 1_048_576)

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
    listTtlMs: positiveInteger('listTtlMs', options.listTtlMs, 60_000, 0),
    json: {
      maxDepth: positiveInteger('maxJsonDepth', options.maxJsonDepth, 64),
      maxValues: positiveInteger('maxJsonValues', options.maxJsonValues, 100_000)
    },
    maxRowsPerScope: limit('maxRowsPerScope', options.maxRowsPerScope, 256),
    maxInFlightPerScope: limit('maxInFlightPerScope', options.maxInFlightPerScope, 32),
    maxRows: limit('maxRows', options.maxRows, 10_000),
    janitorIntervalMs: positiveInteger('janitorIntervalMs', options.janitorIntervalMs, 60_000),
    cancellationTtlMs: positiveInteger('cancellationTtlMs', options.cancellationTtlMs, 300_000),
    cancelTimeoutMs: positiveInteger('cancelTimeoutMs', options.cancelTimeoutMs, 5_000),
    maxStreamLifetimeMs,
    progressIntervalMs: positiveInteger('progressIntervalMs', options.progressIntervalMs, 50, 0),
    keepAliveMs: positiveInteger('keepAliveMs', options.keepAliveMs, 15_000),
    disconnectCancels: flag('disconnectCancels', options.disconnectCancels, true),
    resumability: resolveResumability(options.resumability),
    tracing: flag('tracing', options.tracing, true),
    workerPool: options.workerPool,
    redis: resolveRedis(options.redis),
    redisPrefix: typeof options.redisPrefix === 'string' ? options.redisPrefix : 'mcp:',
    metrics: resolveMetrics(options.metrics, path),
    sessions: resolveSessions(options.sessions),
    auth: resolveAuth(options.auth),
    events: resolveEvents(options.events),
    secret: options.secret === undefined ? randomBytes(32) : secretOf('secret', options.secret),
    secretGiven: options.secret !== undefined,
    inputRoundTtlMs: positiveInteger('inputRoundTtlMs', options.inputRoundTtlMs, 600_000),
    inputTimeoutMs: positiveInteger('inputTimeoutMs', options.inputTimeoutMs, maxStreamLifetimeMs),
    taskTtlMs: positiveInteger('taskTtlMs', options.taskTtlMs, 600_000),
    taskPollIntervalMs: positiveInteger('taskPollIntervalMs', options.taskPollIntervalMs, 1000),
    maxTasksPerScope,
    // A scope under its live quota always has an ended task to drop, and the largest result always fits.
    maxKeptTasksPerScope: positiveInteger('maxKeptTasksPerScope', options.maxKeptTasksPerScope, Math.max(256, maxTasksPerScope), maxTasksPerScope),
    maxTaskBytesPerScope: positiveInteger('maxTaskBytesPerScope', options.maxTaskBytesPerScope, Math.max(16_777_216, maxTaskResultBytes), maxTaskResultBytes),
    maxTasks: positiveInteger('maxTasks', options.maxTasks, 10_000),
    maxTaskBytes: positiveInteger('maxTaskBytes', options.maxTaskBytes, 134_217_728),
    maxTaskResultBytes,
    taskLeaseMs: positiveInteger('taskLeaseMs', options.taskLeaseMs, 30_000, 30),
    taskReplicationTimeoutMs: positiveInteger('taskReplicationTimeoutMs', options.taskReplicationTimeoutMs, 1000, 0),
    maxRequestStateBytes: positiveInteger('maxRequestStateBytes', options.maxRequestStateBytes, 65_536, 256),
    maxInputRounds: positiveInteger('maxInputRounds', options.maxInputRounds, 16)
  }
}

/** A key of at least 32 bytes, as a Buffer. */
function secretOf (name: string, value: unknown): Buffer {
  if ((typeof value !== 'string' && !Buffer.isBuffer(value)) || Buffer.byteLength(value) < 32) {
    throw new InvalidOptionError(name, 'must be a string or Buffer of at least 32 bytes')
  }
  return Buffer.from(value)
}

function resolveRedis (redis: unknown): RedisClient | string | readonly string[] | undefined {
  if (redis === undefined) return undefined
  const refusal = 'must be a redis:// or rediss:// URL, a non-empty list of them (the seeds of a Redis Cluster), or an ioredis client'
  if (typeof redis === 'string' || Array.isArray(redis)) {
    const urls: unknown[] = typeof redis === 'string' ? [redis] : redis
    if (urls.length === 0 || !urls.every(url => typeof url === 'string' && /^rediss?:\/\/[^\s]/.test(url))) throw new InvalidOptionError('redis', refusal)
    return redis as string | readonly string[]
  }
  const client = redis as Partial<RedisClient> | null
  if (typeof client?.duplicate !== 'function' || typeof client.publish !== 'function') throw new InvalidOptionError('redis', refusal)
  return client as RedisClient
}

function resolveMetrics (metrics: McpCancellationOptions['metrics'], endpointPath: string): Settings['metrics'] {
  if (metrics === false) return undefined
  const { registry, path = '/metrics', onRequest } = metrics ?? {}
  if (path !== false && (typeof path !== 'string' || !path.startsWith('/'))) throw new InvalidOptionError('metrics.path', 'must be a path starting with "/" or false')
  if (path === endpointPath) throw new InvalidOptionError('metrics.path', 'must differ from "path", where the MCP endpoint is')
  if (onRequest !== undefined && typeof onRequest !== 'function') throw new InvalidOptionError('metrics.onRequest', 'must be a hook function')
  if (registry !== undefined && typeof registry?.getSingleMetric !== 'function') throw new InvalidOptionError('metrics.registry', 'must be a prom-client Registry')
  return { registry, path, onRequest }
}

function resolveSessions (sessions: McpCancellationOptions['sessions']): Required<SessionOptions> | undefined {
  if (sessions === undefined || sessions === false) return undefined
  if (typeof sessions !== 'object' || sessions === null) throw new InvalidOptionError('sessions', 'must be an object or false')
  return {
    secret: secretOf('sessions.secret', sessions.secret),
    ttlMs: positiveInteger('sessions.ttlMs', sessions.ttlMs, 24 * 60 * 60 * 1000),
    required: flag('sessions.required', sessions.required, false),
    maxRevocations: positiveInteger('sessions.maxRevocations', sessions.maxRevocations, 100_000)
  }
}

function resolveAuth (auth: McpCancellationOptions['auth']): AuthSettings | undefined {
  if (auth === undefined) return undefined
  if (typeof auth !== 'object' || auth === null) throw new InvalidOptionError('auth', 'must be an object')
  const required = flag('auth.required', auth.required, true)
  const jwt = auth.jwt ?? false
  if (jwt !== false && auth.principal !== undefined) throw new InvalidOptionError('auth', 'give either jwt or principal, not both')
  const oauth = resolveOAuth(auth.oauth, jwt === false && auth.principal === undefined)
  if (jwt !== false) {
    const verifyMethod = jwt === true ? 'jwtVerify' : jwt.verify ?? 'jwtVerify'
    if (typeof verifyMethod !== 'string' || verifyMethod === '') throw new InvalidOptionError('auth.jwt.verify', 'must be a method name')
    const claim = auth.principalClaim ?? 'sub'
    if (typeof claim !== 'string' || claim === '') throw new InvalidOptionError('auth.principalClaim', 'must be a non-empty string')
    return { credentials: { kind: 'jwt', verifyMethod, claim }, required, oauth }
  }
  if (auth.principal !== undefined) {
    if (typeof auth.principal !== 'function') throw new InvalidOptionError('auth.principal', 'must be a function')
    return { credentials: { kind: 'custom', principal: auth.principal }, required, oauth }
  }
  if (oauth?.tokens === undefined) throw new InvalidOptionError('auth', 'needs jwt, a principal function or oauth')
  return { credentials: { kind: 'oauth', tokens: oauth.tokens, maxTokenBytes: oauth.maxTokenBytes, cache: oauth.verifiedTokens }, required, oauth }
}

/** A bound: a positive integer, or `Infinity` to disable it. */
function limit (name: string, value: unknown, fallback: number): number {
  return value === Infinity ? Infinity : positiveInteger(name, value, fallback)
}

function matchers (name: string, value: unknown): readonly OriginMatcher[] | undefined {
  if (value === undefined) return undefined
  if (!Array.isArray(value) || !value.every(m => typeof m === 'string' || m instanceof RegExp)) {
    throw new InvalidOptionError(name, 'must be an array of strings and RegExps')
  }
  return value
}
