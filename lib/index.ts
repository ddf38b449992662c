import { createRequire } from 'node:module'
import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { CancellationRegistry, type McpCancellationApi } from './cancellation/registry.js'
import { createStorage } from './cancellation/storage.js'
import { Identity } from './identity/identity.js'
import { Authenticator, customCredentials, jwtCredentials } from './identity/principal.js'
import { MissingDependencyError } from './errors.js'
import { SessionCodec } from './identity/session-codec.js'
import { Sessions } from './identity/sessions.js'
import { resolveSettings, type AuthSettings, type Implementation, type McpCancellationOptions } from './options.js'
import { Dispatcher } from './protocol/dispatcher.js'
import { SupportedVersions } from './protocol/versions.js'
import { McpServer, type McpServerApi } from './server/mcp-server.js'
import { registerEndpoint } from './transport/endpoint.js'
import { noopObserver } from './metrics/observer.js'
import { PrometheusObserver } from './metrics/prometheus.js'
import { registerMetricsRoute } from './metrics/route.js'
import type { Registry } from 'prom-client'

declare module 'fastify' {
  interface FastifyInstance {
    /** Register MCP tools, resources, resource templates, prompts and completions; `metricsRegistry` is the Prometheus registry (unless metrics are off). */
    mcp: McpServerApi & { metricsRegistry: Registry | undefined }
    /** The cancellation table: scoped, bounded, shared by every request of this plugin instance. */
    mcpCancellation: McpCancellationApi
  }
}

const packageJson = createRequire(import.meta.url)('../package.json') as Implementation

const plugin: FastifyPluginAsync<McpCancellationOptions> = async (fastify, options) => {
  const settings = resolveSettings(options, { name: packageJson.name, version: packageJson.version })
  const versions = new SupportedVersions(settings.protocolVersions)
  const server = new McpServer({
    serverInfo: settings.serverInfo,
    instructions: settings.instructions,
    versions,
    listTtlMs: settings.listTtlMs,
    workerPool: settings.workerPool
  })
  const metrics = settings.metrics === undefined ? undefined : new PrometheusObserver(settings.metrics.registry)
  const observer = metrics ?? noopObserver
  const storage = createStorage(settings, observer, fastify.log)
  const identity = new Identity(settings.sessions === undefined
    ? undefined
    : new Sessions(new SessionCodec(settings.sessions.secret, settings.sessions.ttlMs),
      storage.revocations!, settings.sessions.required))
  const registry = new CancellationRegistry({
    maxRows: settings.maxRows,
    maxRowsPerScope: settings.maxRowsPerScope,
    janitorIntervalMs: settings.janitorIntervalMs,
    rowTtlMs: settings.cancellationTtlMs,
    disconnectCancels: settings.disconnectCancels,
    maxStreamLifetimeMs: settings.maxStreamLifetimeMs
  }, request => identity.scope(request), observer, storage.store)

  for (const name of ['mcpPrincipal', 'mcpSessionId', 'mcpScope'] as const) {
    if (!fastify.hasRequestDecorator(name)) fastify.decorateRequest(name, null)
  }
  fastify.decorate('mcp', { ...server.api, metricsRegistry: metrics?.registry })
  fastify.decorate('mcpCancellation', registry)

  registerEndpoint(fastify, {
    settings,
    versions,
    identity,
    registry,
    observer,
    dispatcher: new Dispatcher({ server, versions, identity, registry, timings: settings, observer }),
    authenticator: authenticatorFor(fastify, settings.auth)
  })

  if (metrics !== undefined && settings.metrics?.path !== undefined && settings.metrics.path !== false) {
    registerMetricsRoute(fastify, metrics.registry, settings.metrics.path, settings.metrics.onRequest)
  }

  // A node should know the cluster's session revocations before it serves.
  fastify.addHook('onReady', storage.synced)

  registry.startTimers()
  // preClose, not onClose: the server waits for open connections before onClose runs, and a
  // long-running stream is one; cancelling first lets it end.
  fastify.addHook('preClose', async () => { await registry.shutdown(settings.cancelTimeoutMs) })
  fastify.addHook('onClose', async () => {
    await Promise.all([registry.close(), server.close()])
    metrics?.close()
  })
}

function authenticatorFor (fastify: FastifyInstance, auth: AuthSettings | undefined): Authenticator | undefined {
  if (auth === undefined) return undefined
  if (auth.kind === 'custom') return new Authenticator(customCredentials(auth.principal), auth.required)
  if (!fastify.hasRequestDecorator(auth.verifyMethod)) throw new MissingDependencyError('auth.jwt', '@fastify/jwt')
  return new Authenticator(jwtCredentials(auth.verifyMethod, auth.claim), auth.required)
}

export const mcpCancellation = fp(plugin, { fastify: '5.x', name: 'fastify-mcp-cancellation' })
export default mcpCancellation

export { InvalidOptionError, InvalidDefinitionError, DuplicateDefinitionError, MissingDependencyError } from './errors.js'
export { ToolError, type ToolDefinition, type ToolHandler, type CallToolResult } from './server/tools.js'
export type { ResourceDefinition, ResourceTemplateDefinition, ReadResourceResult } from './server/resources.js'
export type { PromptDefinition, PromptArgument, GetPromptResult } from './server/prompts.js'
export type { CompletionDefinition, CompletionReference, CompletionValues } from './server/completions.js'
export type { HandlerContext, HandlerContext as ToolContext } from './server/context.js'
export type { WorkerToolLocation, WorkerPoolOptions } from './server/worker-pool.js'
export type { McpServerApi } from './server/mcp-server.js'
export type { McpCancellationOptions, Implementation, ResponseMode, OriginMatcher, SessionOptions, AuthOptions, MetricsOptions } from './options.js'
export { RequestCancelledError, type CancellationSource } from './cancellation/exchange.js'
export type { McpCancellationApi } from './cancellation/registry.js'
export type { CancelOutcome, InFlightOwner, CancellationStore, CancellationRow } from './cancellation/store.js'
export type { RequestCancelledEvent, CleanupEvent } from './cancellation/events.js'
export type { LoggingLevel } from './protocol/era.js'
export type { RequestId } from './protocol/jsonrpc.js'
