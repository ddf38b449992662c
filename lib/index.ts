import { createRequire } from 'node:module'
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { cancellationApi } from './lifecycle/cancellation-api.js'
import { CancellationRegistry } from './lifecycle/registry.js'
import { createStores } from './plugin/stores.js'
import { Identity } from './identity/identity.js'
import { SessionCodec } from './identity/session-codec.js'
import { Sessions } from './identity/sessions.js'
import { createAuthenticator } from './plugin/authentication.js'
import { resolveSettings, type Implementation, type McpCancellationOptions, type Settings } from './plugin/options.js'
import { deriveKey } from './core/signed-token.js'
import { RequestStateCodec } from './protocol/request-state.js'
import { InputRounds } from './input/input-round.js'
import { StreamedInputs } from './input/streamed-inputs.js'
import { AnswerChecks } from './input/answer-checks.js'
import { ServerRequestIds } from './protocol/server-request-id.js'
import { EventIds } from './protocol/event-id.js'
import { ResumableStreams } from './transport/resumable-streams.js'
import { StreamRelay } from './transport/stream-relay.js'
import { Dispatcher } from './dispatch/dispatcher.js'
import { SupportedVersions } from './protocol/versions.js'
import { McpServer } from './server/mcp-server.js'
// The bare import is what keeps the Fastify type augmentations in dist/index.d.ts (the named one is elided there).
import './plugin/decorators.js'
import { REQUEST_DECORATORS } from './plugin/decorators.js'
import { checkRegistration } from './plugin/registration.js'
import { warnAboutDeployment } from './plugin/deployment-warnings.js'
import { registerEndpoint } from './transport/endpoint.js'
import { registerResourceMetadata } from './transport/resource-metadata-route.js'
import { noopObserver, type RequestObserver } from './observability/observer.js'
import { PrometheusObserver } from './observability/prometheus.js'
import { registerMetricsRoute } from './observability/metrics-route.js'
import { Tracing } from './observability/tracing.js'
import { createListening } from './plugin/listening.js'

const packageJson = createRequire(import.meta.url)('../package.json') as Implementation

const plugin: FastifyPluginAsync<McpCancellationOptions> = async (fastify, options) => {
  const settings = resolveSettings(options, { name: packageJson.name, version: packageJson.version })
  checkRegistration(fastify, settings)
  warnAboutDeployment(fastify, settings)
  const versions = new SupportedVersions(settings.protocolVersions)
  const metrics = settings.metrics === undefined ? undefined : new PrometheusObserver(settings.metrics.registry)
  const observer = metrics ?? noopObserver
  // What clients answer is checked the same way in every era (one cache of compiled requested schemas).
  const answers = new AnswerChecks(observer)
  // Asked per operation (never before a request), so the server it describes exists by then.
  const tracing = settings.tracing
    ? new Tracing({
      name: packageJson.name,
      version: packageJson.version,
      served: method => server.served(method),
      tool: name => server.tools.registeredName(name),
      prompt: name => server.prompts.registeredName(name)
    })
    : undefined
  const stores = await createStores(settings, observer, fastify.log, tracing)
  const authenticator = createAuthenticator(fastify, settings.auth, observer, tracing)
  const sessions = settings.sessions === undefined
    ? undefined
    : new Sessions(new SessionCodec(settings.sessions.secret, settings.sessions.ttlMs), stores.revocations!, settings.sessions.required)
  const identity = new Identity(sessions)
  const listening = createListening(settings, stores, observer, sessions, () => server)
  const server: McpServer = new McpServer({
    serverInfo: settings.serverInfo,
    instructions: settings.instructions,
    versions,
    listTtlMs: settings.listTtlMs,
    workerPool: settings.workerPool,
    authorization: authenticator === undefined
      ? undefined
      : { listsPermittedOnly: settings.auth?.oauth?.listing === 'permitted', permits: (principal, scopes) => authenticator.permits(principal, scopes) },
    tasks: {
      store: stores.tasks,
      node: stores.node,
      messages: stores.messages,
      renewIntervalMs: Math.max(10, Math.floor(settings.taskLeaseMs / 3)),
      observer,
      answers,
      log: fastify.log,
      ttlMs: settings.taskTtlMs,
      pollIntervalMs: settings.taskPollIntervalMs,
      maxResultBytes: settings.maxTaskResultBytes,
      janitorIntervalMs: settings.janitorIntervalMs
    },
    events: listening.events,
    delivers: listening.delivers,
    listen: async request => await listening.streams.listen(request),
    subscriptions: listening.subscriptions,
    maxUriBytes: settings.events.maxUriBytes,
    maxSubscriptions: settings.events.maxSubscriptionsPerSession
  })
  const registry = new CancellationRegistry({
    maxRows: settings.maxRows,
    maxRowsPerScope: settings.maxRowsPerScope,
    maxInFlightPerScope: settings.maxInFlightPerScope,
    janitorIntervalMs: settings.janitorIntervalMs,
    cancellationTtlMs: settings.cancellationTtlMs,
    disconnectCancels: settings.disconnectCancels,
    maxStreamLifetimeMs: settings.maxStreamLifetimeMs,
    cancelTimeoutMs: settings.cancelTimeoutMs
  }, request => identity.scope(request), observer, stores.store)

  // Request decorators belong to the whole server: a second instance in a sibling context finds them.
  for (const name of REQUEST_DECORATORS) {
    if (!fastify.hasRequestDecorator(name)) fastify.decorateRequest(name, null)
  }
  fastify.decorate('mcp', server.api)
  fastify.decorate('mcpCancellation', cancellationApi(registry))
  fastify.decorate('mcpMetrics', metrics?.registry ?? null)
  fastify.decorate('mcpReadiness', stores.readiness)

  if (!settings.secretGiven && settings.redis !== undefined) {
    fastify.log.warn('fastify-mcp-cancellation: no "secret" option, so a modern input round continues, a legacy answer is accepted, and a legacy stream resumes, only on the node that began it; give every node the same secret')
  }
  const asks = new StreamedInputs({
    ids: new ServerRequestIds(deriveKey(settings.secret, 'serverRequestId/v1'), stores.node),
    messages: stores.messages,
    observer,
    answers,
    timeoutMs: settings.inputTimeoutMs
  })

  const resumableStreams = settings.resumability.enabled
    ? new ResumableStreams(settings.resumability, new EventIds(deriveKey(settings.secret, 'eventId/v1'), stores.node), observer, raw => { registry.givenUp(raw) })
    : undefined
  const streamRelay = resumableStreams === undefined || stores.messages === undefined
    ? undefined
    : new StreamRelay(resumableStreams, stores.messages, stores.node, settings.keepAliveMs)

  registerEndpoint(fastify, {
    settings,
    versions,
    identity,
    registry,
    observer,
    dispatcher: new Dispatcher({ server, versions, identity, registry, progressIntervalMs: settings.progressIntervalMs, observer, inputs: inputRoundsOf(settings, observer, answers), asks, tracing, authenticator }),
    authenticator,
    // A legacy GET stream needs a session to belong to.
    sessionStreams: listening.delivers.legacy ? listening.streams : undefined,
    subscriptions: listening.subscriptions,
    resumableStreams,
    streamRelay
  })

  if (settings.auth?.oauth !== undefined) registerResourceMetadata(fastify, settings.auth.oauth.metadata, () => server.declaredScopes())
  if (metrics !== undefined && settings.metrics?.path !== undefined && settings.metrics.path !== false) {
    registerMetricsRoute(fastify, metrics.registry, settings.metrics.path, settings.metrics.onRequest)
  }

  // A node should know the cluster's session revocations before it serves.
  fastify.addHook('onReady', stores.synced)
  // From now on a change concerns clients: registrations made while setting up announce nothing.
  fastify.addHook('onReady', async () => { listening.events.start() })

  registry.startTimers()
  server.tasks.startTimers()
  listening.listeners.startTimers()
  resumableStreams?.startTimers()
  streamRelay?.startTimers()
  // preClose, not onClose: the server waits for open connections before onClose runs, and a
  // long-running stream is one; cancelling first lets it end.
  // Listening streams end first, with their completion result: nothing they wait for is a request to cancel.
  fastify.addHook('preClose', async () => {
    listening.listeners.close()
    await registry.shutdown(settings.cancelTimeoutMs)
    streamRelay?.close()
    resumableStreams?.close()
  })
  fastify.addHook('onClose', async () => {
    // Tasks first: shutdown has ended the running ones, and their ends must reach the store before its
    // connection closes; then the events those ends announced.
    await server.tasks.close()
    await listening.events.close()
    await Promise.all([registry.close(), server.close(), stores.subscriptions?.close?.()])
    metrics?.close()
  })
}

function inputRoundsOf (settings: Settings, observer: RequestObserver, answers: AnswerChecks): InputRounds {
  return new InputRounds({
    observer,
    answers,
    codec: new RequestStateCodec(deriveKey(settings.secret, 'requestState/v1'), settings.maxRequestStateBytes),
    ttlMs: settings.inputRoundTtlMs,
    maxRounds: settings.maxInputRounds
  })
}

export const mcpCancellation = fp(plugin, { fastify: '5.x', name: 'fastify-mcp-cancellation' })
export default mcpCancellation

export {
  InvalidOptionError, InvalidDefinitionError, DuplicateDefinitionError, MissingDependencyError, AlreadyRegisteredError, RouteConflictError,
  HandlerMisuseError, ClientInputError, type ClientInputFailure, RequestCancelledError
} from './core/errors.js'
export { ToolError, type ToolDefinition, type ToolHandler, type WorkerToolHandler, type CallToolResult } from './server/tools.js'
export type { ResourceDefinition, ResourceTemplateDefinition, ReadResourceResult } from './server/resources.js'
export type { PromptDefinition, PromptArgument, GetPromptResult } from './server/prompts.js'
export type { ToolArguments, PromptArguments, ToolSchema } from './server/argument-types.js'
export type { CompletionDefinition, CompletionReference, CompletionValues } from './server/completions.js'
export type { HandlerContext, HandlerContext as ToolContext, WorkerContext } from './server/context.js'
export {
  elicitation, sampling, rootsList,
  type InputRequest, type InputAnswer, type ClientCapability, type ElicitRequestParams, type ElicitResult,
  type CreateMessageRequestParams, type CreateMessageResult, type Root, type ListRootsResult
} from './protocol/input-requests.js'
export type { WorkerToolLocation, WorkerPoolOptions } from './server/worker-pool.js'
export type { McpServerApi, McpNotifier } from './server/mcp-server.js'
export type { DefinitionHandle } from './server/definition-handle.js'
export type { EventsOptions } from './plugin/events-options.js'
export type { ResumabilityOptions } from './plugin/resumability-options.js'
export type { McpCancellationOptions, Implementation, OriginMatcher, SessionOptions, AuthOptions, MetricsOptions, RedisClient } from './plugin/options.js'
export type { OAuthOptions, IntrospectionOptions } from './plugin/oauth-options.js'
export type { McpPrincipal } from './identity/principal.js'
export type { ScopeSatisfies } from './identity/oauth-scopes.js'
export type { CancellationSource } from './core/vocabulary.js'
export type { ResponseMode } from './transport/http-response-sink.js'
export type { TaskSupport } from './tasks/tasks.js'
export type { McpCancellationApi, CancelOptions } from './lifecycle/cancellation-api.js'
export type { McpReadiness } from './plugin/decorators.js'
export type { CancelOutcome, InFlightOwner } from './lifecycle/cancellation-store.js'
export type { RequestCancelledEvent, CleanupEvent, TaskEndedEvent } from './core/events.js'
export type { LoggingLevel } from './protocol/era.js'
export type { RequestId } from './core/jsonrpc.js'
