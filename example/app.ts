/**
 * The demo server (DESIGN §8): the plugin with the tools a person trying it wants to see
 * (example/demo-tools.ts: `echo`, `sleep`, `stubborn`, `spin`, `confirm_action`, `render`), and, with
 * `MCP_CONFORMANCE=1`, every fixture of the MCP conformance suite (example/conformance-fixtures.ts),
 * which CI and .ci/conformance/run.sh set. `buildApp` is what `npm start` runs and what black-box tests
 * start on 127.0.0.1:0; each `MCP_*` variable it reads is described in `DemoEnv`, and a value it cannot
 * use stops it at startup with an error naming the variable.
 */
import fastifyJwt from '@fastify/jwt'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { collectDefaultMetrics, Registry } from 'prom-client'
import mcpCancellation, { type McpCancellationOptions, type ResumabilityOptions } from '../lib/index.js'
import { registerConformanceFixtures } from './conformance-fixtures.js'
import { registerDemoTools } from './demo-tools.js'
import { httpTimeouts } from './http-timeouts.js'
import { trustProxySetting } from './trust-proxy.js'
import { redisOption } from './redis-option.js'

// Tests build their own apps with the demo's sleep (test/helpers/tools.ts, test/protocol/fuzz.test.ts).
export { sleepInSteps, sleepTool } from './demo-tools.js'

export interface DemoEnv {
  LOG_LEVEL?: string | undefined
  MCP_ALLOWED_ORIGINS?: string | undefined
  MCP_SESSION_SECRET?: string | undefined
  /** The plugin's `secret` (≥ 32 bytes): signs 2026-07-28 `requestState`; every node of a cluster needs the same. */
  MCP_SECRET?: string | undefined
  MCP_JWT_SECRET?: string | undefined
  /** The authorization server's issuer URL: makes the demo an OAuth resource server (docs/authorization.md). */
  MCP_OAUTH_ISSUER?: string | undefined
  /** The canonical URI of the endpoint tokens must be issued for. Default `http://<HOST>:<PORT>/mcp`. */
  MCP_OAUTH_RESOURCE?: string | undefined
  /** Comma-separated scopes every request needs. Default none. */
  MCP_OAUTH_SCOPES?: string | undefined
  HOST?: string | undefined
  PORT?: string | undefined
  MCP_REDIS_URL?: string | undefined
  /** Sentinels (`host:port,…`) to ask for the primary MCP_REDIS_SENTINEL_NAME (instead of MCP_REDIS_URL). */
  MCP_REDIS_SENTINELS?: string | undefined
  MCP_REDIS_SENTINEL_NAME?: string | undefined
  /** The proxies in front of the server: a hop count (`1`) or their addresses and CIDRs (`10.0.0.1,10.0.0.0/8`). */
  MCP_TRUST_PROXY?: string | undefined
  MCP_MAX_ROWS?: string | undefined
  MCP_MAX_ROWS_PER_SCOPE?: string | undefined
  /** Requests one client (scope) may have running at once (default 32; `Infinity` for none). */
  MCP_MAX_IN_FLIGHT_PER_SCOPE?: string | undefined
  MCP_CANCEL_TIMEOUT_MS?: string | undefined
  MCP_MAX_STREAM_LIFETIME_MS?: string | undefined
  /** How long a client may take to send a whole request, headers and body (default 30 000 ms; example/http-timeouts.ts). */
  MCP_REQUEST_TIMEOUT_MS?: string | undefined
  /** How long a task survives the node running it (with Redis): after that it reads as failed. */
  MCP_TASK_LEASE_MS?: string | undefined
  /** The resume window of legacy (2025-11-25) streams: how long a dropped call waits for its client (default 30 000 ms). */
  MCP_RESUME_WINDOW_MS?: string | undefined
  /** `false` turns resumable legacy streams off (a dropped connection then cancels at once); unset or `true` keeps them on. */
  MCP_RESUMABLE?: string | undefined
  /** `1` also registers every conformance fixture (example/conformance-fixtures.ts); unset, empty or `0` does not. */
  MCP_CONFORMANCE?: string | undefined
}

/** `auth` from the environment: `@fastify/jwt` with MCP_JWT_SECRET, OAuth with MCP_OAUTH_ISSUER, else none. */
function demoAuth (env: DemoEnv): McpCancellationOptions['auth'] {
  const jwt = env.MCP_JWT_SECRET !== undefined ? { jwt: true, principalClaim: 'sub' } : undefined
  if (env.MCP_OAUTH_ISSUER === undefined || env.MCP_OAUTH_ISSUER === '') return jwt
  if (jwt !== undefined) throw new Error('MCP_JWT_SECRET and MCP_OAUTH_ISSUER: give one of them')
  const scopes = (env.MCP_OAUTH_SCOPES ?? '').split(',').map(scope => scope.trim()).filter(scope => scope !== '')
  return {
    oauth: {
      resource: env.MCP_OAUTH_RESOURCE ?? `http://${env.HOST ?? '127.0.0.1'}:${env.PORT ?? '3000'}/mcp`,
      authorizationServers: [env.MCP_OAUTH_ISSUER],
      requiredScopes: scopes,
      resourceName: 'fastify-mcp-cancellation demo'
    }
  }
}

/** A bound from the environment: a positive integer, `Infinity`, or unset. */
function bound (value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined
  return value === 'Infinity' ? Infinity : Number(value)
}

/** A duration from the environment: a positive integer of milliseconds, or `fallback` when unset. */
function milliseconds (name: string, value: string | undefined, fallback: number): number {
  if (value === undefined || value === '') return fallback
  const ms = Number(value)
  if (!Number.isSafeInteger(ms) || ms < 1) throw new Error(`${name}: ${JSON.stringify(value)} is not a positive integer of milliseconds`)
  return ms
}

/** MCP_RESUMABLE and MCP_RESUME_WINDOW_MS: `resumability` off, or on with that window (and a `retry` of a tenth of it, at most 1 s). */
function resumabilityOf (env: DemoEnv): ResumabilityOptions | false {
  const resumable = env.MCP_RESUMABLE
  if (resumable === 'false') return false
  if (resumable !== undefined && resumable !== '' && resumable !== 'true') {
    throw new Error(`MCP_RESUMABLE: ${JSON.stringify(resumable)} is not true or false`)
  }
  const windowMs = milliseconds('MCP_RESUME_WINDOW_MS', env.MCP_RESUME_WINDOW_MS, 30_000)
  return { windowMs, retryMs: Math.max(1, Math.min(1000, Math.floor(windowMs / 10))) }
}

/** MCP_CONFORMANCE: whether to register the conformance fixtures beside the demo's own tools. */
function conformanceFixtures (value: string | undefined): boolean {
  if (value === undefined || value === '' || value === '0') return false
  if (value === '1') return true
  throw new Error(`MCP_CONFORMANCE: ${JSON.stringify(value)} is not 1 (register the conformance fixtures) or 0 (do not)`)
}

/**
 * prom-client default metrics that `promtool check metrics` refuses: gauges named `*_total`
 * ("non-counter metrics should not have "_total" suffix"). Each is only the sum of a per-type gauge the
 * demo keeps (`nodejs_active_handles`, `nodejs_active_requests`, `nodejs_active_resources`, labelled by
 * `type`), so `sum(nodejs_active_handles)` gives the same number (no series when it is 0). Removing a
 * name prom-client did not register (it adds `nodejs_active_resources*` only where
 * `process.getActiveResourcesInfo` exists) is a no-op.
 */
export const LINT_FAILING_DEFAULT_METRICS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'] as const

export async function buildApp (env: DemoEnv = process.env, fastifyOptions: FastifyServerOptions = {}): Promise<FastifyInstance> {
  const trust = trustProxySetting(env.MCP_TRUST_PROXY)
  const cancelTimeoutMs = milliseconds('MCP_CANCEL_TIMEOUT_MS', env.MCP_CANCEL_TIMEOUT_MS, 5_000)
  const maxStreamLifetimeMs = milliseconds('MCP_MAX_STREAM_LIFETIME_MS', env.MCP_MAX_STREAM_LIFETIME_MS, 600_000)
  const requestTimeoutMs = milliseconds('MCP_REQUEST_TIMEOUT_MS', env.MCP_REQUEST_TIMEOUT_MS, 30_000)
  const conformance = conformanceFixtures(env.MCP_CONFORMANCE)
  const resumability = resumabilityOf(env)
  const app = Fastify({
    logger: env.LOG_LEVEL === undefined ? false : { level: env.LOG_LEVEL },
    trustProxy: trust.trustProxy,
    ...httpTimeouts({ requestTimeoutMs, maxStreamLifetimeMs, cancelTimeoutMs }),
    ...fastifyOptions
  })
  if (trust.warning !== undefined) app.log.warn(trust.warning)
  // Process metrics are the application's business, not the plugin's: the demo adds them to the same registry.
  const metricsRegistry = new Registry()
  collectDefaultMetrics({ register: metricsRegistry })
  for (const name of LINT_FAILING_DEFAULT_METRICS) metricsRegistry.removeSingleMetric(name)
  if (env.MCP_JWT_SECRET !== undefined) {
    await app.register(fastifyJwt, { secret: env.MCP_JWT_SECRET, verify: { algorithms: ['HS256'] } })
  }
  const auth = demoAuth(env)
  const redis = redisOption(env)
  app.addHook('onClose', async () => { redis.close() })
  await app.register(mcpCancellation, {
    serverInfo: { name: 'fastify-mcp-cancellation-demo', version: '1.0.0' },
    // With the fixtures, initialize answers as the conformance demo always has.
    instructions: conformance
      ? 'Demo server: echo, sleep, and the MCP conformance fixtures.'
      : 'Demo server: echo, sleep (progress), stubborn (ignores cancellation), spin (a worker thread), confirm_action (asks you), render (a task), touch_resource (tells subscribers that demo://touches changed).',
    allowedOrigins: env.MCP_ALLOWED_ORIGINS === undefined ? undefined : env.MCP_ALLOWED_ORIGINS.split(',').map(o => o.trim()),
    secret: env.MCP_SECRET,
    sessions: env.MCP_SESSION_SECRET === undefined ? undefined : { secret: env.MCP_SESSION_SECRET },
    auth,
    maxRows: bound(env.MCP_MAX_ROWS),
    maxRowsPerScope: bound(env.MCP_MAX_ROWS_PER_SCOPE),
    maxInFlightPerScope: bound(env.MCP_MAX_IN_FLIGHT_PER_SCOPE),
    cancelTimeoutMs,
    maxStreamLifetimeMs,
    taskLeaseMs: bound(env.MCP_TASK_LEASE_MS),
    metrics: { registry: metricsRegistry },
    resumability,
    redis: redis.redis
  })

  // Liveness: the node serves (with or without Redis). Readiness: Redis connected and revocations known.
  app.get('/health', async () => ({ status: 'ok' }))
  app.get('/ready', async (_request, reply) => {
    const readiness = app.mcpReadiness()
    return await reply.code(readiness.ready ? 200 : 503).send({ status: readiness.ready ? 'ready' : 'not ready', ...readiness })
  })

  registerDemoTools(app, { scoped: auth !== undefined })
  if (conformance) registerConformanceFixtures(app)
  return app
}
