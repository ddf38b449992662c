import type { IncomingHttpHeaders } from 'node:http'
import { isLoggingLevel, MetaKey, type EraBinding } from '../protocol/era.js'
import { invalidParams, isJsonObject, type JsonObject } from '../core/jsonrpc.js'
import type { Era, SupportedVersions } from '../protocol/versions.js'
import type { Implementation } from '../protocol/implementation.js'
import { CompletionCatalog, type CompletionDefinition } from './completions.js'
import type { Invocation } from './invocation.js'
import { PromptCatalog, type PromptArgument, type PromptDefinition } from './prompts.js'
import type { ExplicitOr, PromptArguments, ToolArguments, ToolSchema } from './argument-types.js'
import { ResourceCatalog, type ResourceDefinition, type ResourceTemplateDefinition } from './resources.js'
import { SchemaCompiler } from '../core/schema-compiler.js'
import { ToolCatalog, type ToolDefinition } from './tools.js'
import { WorkerPool } from './worker-pool.js'
import type { WorkerPoolOptions } from './worker-pool.js'
import { declaresTasks, Tasks, TASKS_EXTENSION, tasksRequired, type TaskSettings } from '../tasks/tasks.js'
import type { McpPrincipal } from '../identity/principal.js'
import type { ListFilter } from './definition-scopes.js'
import type { DefinitionHandle } from './definition-handle.js'
import { LIST_KINDS, type ListKind, type ServerEvents } from '../cluster/server-events.js'
import type { Deliverable, ListenRequest } from '../events/listen-streams.js'
import { subscribedUri, type SessionSubscriptions } from '../events/session-subscriptions.js'

/** `fastify.mcp`: what an application registers. */
export interface McpServerApi {
  /**
   * Registers a tool. Its handler's `args` are inferred from `inputSchema` (a JSON Schema known
   * literally, a TypeBox schema; `Record<string, unknown>` without one), or are `Args` when given:
   * `app.mcp.tool<{ ms: number }>({ ... })`.
   */
  tool: <Args = never, const Schema extends ToolSchema = ToolSchema>(
    definition: ToolDefinition<NoInfer<ExplicitOr<Args, ToolArguments<Schema>>>, Schema>
  ) => DefinitionHandle
  resource: (definition: ResourceDefinition) => DefinitionHandle
  resourceTemplate: (definition: ResourceTemplateDefinition) => DefinitionHandle
  /**
   * Registers a prompt. Its handler's `args` are inferred from `arguments` (`required: true` ones are
   * `string`, the others optional; `Record<string, string>` without them), or are `Args` when given.
   */
  prompt: <Args = never, const Arguments extends readonly PromptArgument[] = readonly PromptArgument[]>(
    definition: PromptDefinition<NoInfer<ExplicitOr<Args, PromptArguments<Arguments>>>, Arguments>
  ) => DefinitionHandle
  completion: (definition: CompletionDefinition) => void
  /**
   * Tells listening clients, on every node, of changes the plugin cannot see (docs/notifications.md).
   * Registering or removing a definition announces its list already.
   */
  notify: McpNotifier
}

/** `fastify.mcp.notify`: announces a change to the clients listening for it, on every node. */
export interface McpNotifier {
  /** What `tools/list` answers has changed (for some client: a permission, a feature flag). */
  toolsChanged: () => void
  promptsChanged: () => void
  resourcesChanged: () => void
  /** The content of the resource at `uri` (or of a resource under it) has changed. */
  resourceUpdated: (uri: string) => void
  /** The task's state has changed (the tasks extension does this itself for its own tasks). */
  taskChanged: (taskId: string) => void
}

interface MethodBase {
  eras: readonly Era[]
  /** Checks that must answer with an HTTP status before the handler runs; throws a `ProtocolError`. */
  preflight?: (params: JsonObject, binding: EraBinding, headers: IncomingHttpHeaders) => void
  /** The OAuth scopes this call needs (the definition's `scopes`), checked before the handler runs. */
  scopes?: (params: JsonObject) => readonly string[]
}

/** A method a handler answers with one result. */
export interface HandledMethod extends MethodBase {
  /** Cacheable results: modern answers carry these hints (`ttlMs`, `cacheScope`) unless the handler set its own. */
  cacheHints: CacheHints | undefined
  handler: (invocation: Invocation) => JsonObject | Promise<JsonObject>
}

/** A method answered with a stream that stays open (`subscriptions/listen`): opened, then fed by server events. */
export interface StreamedMethod extends MethodBase {
  /** Resolves once the stream is open (true), or when its client left first (false); rejects with what refused it. */
  stream: (request: ListenRequest) => Promise<boolean>
}

export type MethodSpec = HandledMethod | StreamedMethod

/** How the server treats OAuth scopes (with `auth`). */
export interface ServerAuthorization {
  /** Lists show only what the principal may use (`auth.oauth.listing: 'permitted'`); otherwise everything. */
  listsPermittedOnly: boolean
  /** Whether `principal` holds every scope of `scopes`. */
  permits: (principal: McpPrincipal | null, scopes: readonly string[]) => boolean
}

export interface ServerSettings {
  serverInfo: Implementation
  instructions: string | undefined
  versions: SupportedVersions
  listTtlMs: number
  workerPool: WorkerPoolOptions | undefined
  /** With `auth`; undefined without (definitions then cannot declare scopes). */
  authorization: ServerAuthorization | undefined
  /** Tasks' store and bounds (the server adds what it knows: each tool's task support, how results are finished). */
  tasks: Omit<TaskSettings, 'taskSupport' | 'finish' | 'changed'>
  /** The cluster's server events (what `notify` and changed definitions publish). */
  events: ServerEvents
  /** Whether each era delivers server events to listening clients (the `events` option; legacy also needs sessions). */
  delivers: Readonly<Record<Era, boolean>>
  /** Opens modern listen streams. */
  listen: (request: ListenRequest) => Promise<boolean>
  /** Legacy sessions' `resources/subscribe`; undefined without sessions (a subscribe is then acknowledged, nothing kept). */
  subscriptions: SessionSubscriptions | undefined
  maxUriBytes: number
  /** Most resources one listen may name. */
  maxSubscriptions: number
}

export interface CacheHints {
  ttlMs: number
  cacheScope: 'public' | 'private'
}

/**
 * A shallow copy to add keys to. Not a spread with the keys added: on Node 20 that makes a new hidden
 * class on every call (about 1.5 µs and garbage per modern answer). An own `__proto__` (JSON-parsed data)
 * would become the copy's prototype under `Object.assign`, so that rare object is spread instead.
 */
function copyOf (object: JsonObject): JsonObject {
  return Object.hasOwn(object, '__proto__') ? { ...object } : Object.assign({}, object)
}

const LEGACY: readonly Era[] = ['legacy']
const MODERN: readonly Era[] = ['modern']
const BOTH: readonly Era[] = ['legacy', 'modern']

/** The MCP server behind the transport: registrations, capabilities, and the method table. */
export class McpServer {
  readonly tools: ToolCatalog
  readonly resources: ResourceCatalog
  readonly prompts: PromptCatalog
  readonly completions: CompletionCatalog
  readonly tasks: Tasks
  readonly api: McpServerApi
  readonly #settings: ServerSettings
  readonly #workers: WorkerPool
  readonly #methods: Map<string, MethodSpec>

  constructor (settings: ServerSettings) {
    this.#settings = settings
    this.#workers = new WorkerPool(settings.workerPool)
    const authorization = settings.authorization !== undefined
    this.tools = new ToolCatalog(new SchemaCompiler(), this.#workers, authorization)
    this.resources = new ResourceCatalog(authorization)
    this.prompts = new PromptCatalog(authorization)
    this.completions = new CompletionCatalog(ref => ref.type === 'ref/prompt'
      ? this.prompts.has(ref.name)
      : this.resources.hasTemplate(ref.uri))
    const { events } = settings
    const changed = (list: ListKind): void => { events.publish({ kind: 'list_changed', list }) }
    // Each registration announces its list, and so does its removal.
    const handle = (list: ListKind, remove: () => boolean): DefinitionHandle => {
      changed(list)
      return {
        remove: () => {
          if (!remove()) return false
          changed(list)
          return true
        }
      }
    }
    this.api = {
      tool: definition => handle('tools', this.tools.add(definition)),
      resource: definition => handle('resources', this.resources.add(definition)),
      resourceTemplate: definition => handle('resources', this.resources.addTemplate(definition)),
      prompt: definition => handle('prompts', this.prompts.add(definition)),
      completion: definition => { this.completions.add(definition) },
      notify: {
        toolsChanged: () => { changed('tools') },
        promptsChanged: () => { changed('prompts') },
        resourcesChanged: () => { changed('resources') },
        resourceUpdated: uri => {
          if (typeof uri !== 'string' || uri === '' || Buffer.byteLength(uri) > settings.maxUriBytes) {
            throw new TypeError(`resourceUpdated takes a URI of 1 to ${settings.maxUriBytes} bytes`)
          }
          events.publish({ kind: 'resource_updated', uri })
        },
        taskChanged: taskId => {
          if (typeof taskId !== 'string') throw new TypeError('taskChanged takes a task id (a string)')
          events.publish({ kind: 'task_changed', taskId })
        }
      }
    }
    // Lists are the same for every client; a resource's content may be per-user and change at any time.
    // Lists that depend on the principal's scopes are private to it.
    const list: CacheHints = { ttlMs: settings.listTtlMs, cacheScope: settings.authorization?.listsPermittedOnly === true ? 'private' : 'public' }
    const content: CacheHints = { ttlMs: 0, cacheScope: 'private' }
    const spec = (eras: readonly Era[], handler: HandledMethod['handler'], cacheHints?: CacheHints): HandledMethod => ({ eras, cacheHints, handler })
    const toolsCall: HandledMethod = {
      ...spec(BOTH, i => this.tools.call(i.exchange.params, i)),
      preflight: (params, binding, headers) => { this.tools.preflight(params, binding, headers) },
      scopes: params => this.tools.scopesOf(params.name)
    }
    this.tasks = new Tasks({
      ...settings.tasks,
      taskSupport: name => this.tools.taskSupport(name),
      finish: result => this.finishResult(result, toolsCall, 'modern'),
      changed: taskId => { this.api.notify.taskChanged(taskId) }
    })
    // tasks/*: only for clients that declared the extension, checked before the task is looked up.
    const task = (handler: HandledMethod['handler']): HandledMethod => ({
      ...spec(MODERN, handler),
      preflight: (_params, binding) => { if (!declaresTasks(binding.clientCapabilities)) throw tasksRequired() }
    })
    const { subscriptions } = settings
    this.#methods = new Map<string, MethodSpec>([
      ['initialize', spec(LEGACY, i => this.#initialize(i.exchange.params))],
      ['ping', spec(LEGACY, () => ({}))],
      ['logging/setLevel', spec(LEGACY, i => this.#setLevel(i.exchange.params))],
      ['resources/subscribe', {
        ...spec(LEGACY, async ({ exchange }) => subscriptions === undefined
          ? this.#subscribe(exchange.params)
          : await subscriptions.subscribe(exchange.request.mcpSessionId, exchange.params)),
        scopes: params => this.resources.scopesOf(params.uri)
      }],
      ['resources/unsubscribe', spec(LEGACY, async ({ exchange }) => subscriptions === undefined
        ? this.#subscribe(exchange.params)
        : await subscriptions.unsubscribe(exchange.request.mcpSessionId, exchange.params))],
      ['server/discover', spec(MODERN, () => this.#discover(), list)],
      ['tools/list', spec(BOTH, i => this.#page(i, { tools: this.tools.list(this.#listFilter(i)) }), list)],
      ['tools/call', toolsCall],
      ['tasks/get', task(async ({ exchange }) => await this.tasks.get(exchange.params, exchange.scope))],
      ['tasks/update', task(async ({ exchange }) => await this.tasks.update(exchange.params, exchange.scope))],
      ['tasks/cancel', task(async ({ exchange }) => await this.tasks.cancel(exchange.params, exchange.scope))],
      ['resources/list', spec(BOTH, i => this.#page(i, { resources: this.resources.list(this.#listFilter(i)) }), list)],
      ['resources/templates/list', spec(BOTH, i => this.#page(i, { resourceTemplates: this.resources.listTemplates(this.#listFilter(i)) }), list)],
      ['resources/read', { ...spec(BOTH, i => this.resources.read(i.exchange.params, i.context), content), scopes: params => this.resources.scopesOf(params.uri) }],
      ['prompts/list', spec(BOTH, i => this.#page(i, { prompts: this.prompts.list(this.#listFilter(i)) }), list)],
      ['prompts/get', { ...spec(BOTH, i => this.prompts.get(i.exchange.params, i.context)), scopes: params => this.prompts.scopesOf(params.name) }],
      ['completion/complete', { ...spec(BOTH, i => this.completions.complete(i.exchange.params, i.context)), scopes: params => this.#completionScopes(params.ref) }]
    ])
    if (settings.delivers.modern) {
      this.#methods.set('subscriptions/listen', { eras: MODERN, stream: settings.listen, scopes: params => this.#subscriptionScopes(params.notifications) })
    }
  }

  /** True for a method served in some era (safe as a metric label). */
  served (name: string): boolean {
    return this.#methods.has(name)
  }

  /** What listening clients of `era` can be sent: what the capabilities advertise. */
  deliverable (era: Era): Deliverable {
    const delivers = this.#settings.delivers[era]
    const catalogs: Record<ListKind, { size: number }> = { tools: this.tools, prompts: this.prompts, resources: this.resources }
    return {
      lists: delivers ? LIST_KINDS.filter(list => catalogs[list].size > 0) : [],
      resources: delivers && this.resources.size > 0,
      tasks: delivers && era === 'modern' && this.tools.hasTasks
    }
  }

  /** The method as served in `era`, or undefined (method not found). */
  method (name: string, era: Era): MethodSpec | undefined {
    const method = this.#methods.get(name)
    return method?.eras.includes(era) === true ? method : undefined
  }

  /** A result as the request's era expects it: modern results carry resultType, serverInfo and cache hints. */
  finishResult (result: JsonObject, method: HandledMethod, era: Era): JsonObject {
    if (era === 'legacy') return result
    const meta = result._meta
    const finished = copyOf(result)
    // An input_required round comes with its resultType; a handler's result is complete.
    finished.resultType ??= 'complete'
    const finishedMeta = typeof meta === 'object' && meta !== null ? copyOf(meta as JsonObject) : {}
    finishedMeta[MetaKey.serverInfo] = this.#settings.serverInfo
    finished._meta = finishedMeta
    if (method.cacheHints !== undefined && finished.resultType === 'complete') {
      finished.ttlMs ??= method.cacheHints.ttlMs
      finished.cacheScope ??= method.cacheHints.cacheScope
    }
    return finished
  }

  /** Terminates the worker threads (after shutdown has given handlers their chance to stop). */
  async close (): Promise<void> {
    await this.#workers.destroy()
  }

  /** What the server offers in `era`: `listChanged` and `subscribe` exactly where it delivers them. */
  capabilities (era: Era): JsonObject {
    const capabilities: JsonObject = { logging: {}, completions: {} }
    const { lists, resources } = this.deliverable(era)
    const listChanged = (list: ListKind): JsonObject => lists.includes(list) ? { listChanged: true } : {}
    if (this.tools.size > 0) capabilities.tools = listChanged('tools')
    if (this.resources.size > 0) capabilities.resources = resources ? { subscribe: true, listChanged: true } : {}
    if (this.prompts.size > 0) capabilities.prompts = listChanged('prompts')
    if (era === 'modern' && this.tools.hasTasks) capabilities.extensions = { [TASKS_EXTENSION]: {} }
    return capabilities
  }

  #initialize (params: JsonObject): JsonObject {
    const requested = params.protocolVersion
    if (typeof requested !== 'string') throw invalidParams('protocolVersion must be a string')
    const { versions, serverInfo, instructions } = this.#settings
    const result: JsonObject = {
      protocolVersion: versions.hasLegacy(requested) ? requested : versions.legacy[0],
      capabilities: this.capabilities('legacy'),
      serverInfo
    }
    if (instructions !== undefined) result.instructions = instructions
    return result
  }

  #discover (): JsonObject {
    const { versions, instructions } = this.#settings
    const result: JsonObject = { supportedVersions: versions.all, capabilities: this.capabilities('modern') }
    if (instructions !== undefined) result.instructions = instructions
    return result
  }

  #setLevel (params: JsonObject): JsonObject {
    if (!isLoggingLevel(params.level)) throw invalidParams('level must be a logging level')
    return {}
  }

  #subscribe (params: JsonObject): JsonObject {
    subscribedUri(params, this.#settings.maxUriBytes)
    return {}
  }

  /** Every OAuth scope a definition declares now: what the resource metadata advertises. */
  declaredScopes (): Set<string> {
    return new Set([...this.tools.declaredScopes(), ...this.prompts.declaredScopes(), ...this.resources.declaredScopes()])
  }

  /**
   * Hearing of a resource's changes tells what it holds as reading it does: a listen needs the scopes
   * of every resource it names. (A filter too large to be honoured is refused later, unread here.)
   */
  #subscriptionScopes (filter: unknown): readonly string[] {
    const uris = isJsonObject(filter) ? filter.resourceSubscriptions : undefined
    if (!Array.isArray(uris) || uris.length > this.#settings.maxSubscriptions) return []
    return [...new Set(uris.flatMap(uri => this.resources.scopesOf(uri)))]
  }

  /** Completing a prompt's or a template's arguments can reveal what it holds: it needs their scopes. */
  #completionScopes (ref: unknown): readonly string[] {
    if (!isJsonObject(ref)) return []
    if (ref.type === 'ref/prompt') return this.prompts.scopesOf(ref.name)
    return ref.type === 'ref/resource' ? this.resources.templateScopesOf(ref.uri) : []
  }

  #listFilter ({ exchange }: Invocation): ListFilter {
    const authorization = this.#settings.authorization
    if (authorization?.listsPermittedOnly !== true) return undefined
    return scopes => scopes.length === 0 || authorization.permits(exchange.principal, scopes)
  }

  /** Lists are returned whole, so no cursor this server issued can exist. */
  #page ({ exchange }: Invocation, result: JsonObject): JsonObject {
    if (exchange.params.cursor !== undefined) throw invalidParams('unknown cursor')
    return result
  }
}
