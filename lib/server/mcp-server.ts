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

/** `fastify.mcp`: what an application registers. */
export interface McpServerApi {
  /**
   * Registers a tool. Its handler's `args` are inferred from `inputSchema` (a JSON Schema known
   * literally, a TypeBox schema; `Record<string, unknown>` without one), or are `Args` when given:
   * `app.mcp.tool<{ ms: number }>({ ... })`.
   */
  tool: <Args = never, const Schema extends ToolSchema = ToolSchema>(
    definition: ToolDefinition<NoInfer<ExplicitOr<Args, ToolArguments<Schema>>>, Schema>
  ) => void
  resource: (definition: ResourceDefinition) => void
  resourceTemplate: (definition: ResourceTemplateDefinition) => void
  /**
   * Registers a prompt. Its handler's `args` are inferred from `arguments` (`required: true` ones are
   * `string`, the others optional; `Record<string, string>` without them), or are `Args` when given.
   */
  prompt: <Args = never, const Arguments extends readonly PromptArgument[] = readonly PromptArgument[]>(
    definition: PromptDefinition<NoInfer<ExplicitOr<Args, PromptArguments<Arguments>>>, Arguments>
  ) => void
  completion: (definition: CompletionDefinition) => void
}

export interface MethodSpec {
  eras: readonly Era[]
  /** Cacheable results: modern answers carry these hints (`ttlMs`, `cacheScope`) unless the handler set its own. */
  cacheHints: CacheHints | undefined
  handler: (invocation: Invocation) => JsonObject | Promise<JsonObject>
  /** Checks that must answer with an HTTP status before the handler runs; throws a `ProtocolError`. */
  preflight?: (params: JsonObject, binding: EraBinding, headers: IncomingHttpHeaders) => void
  /** The OAuth scopes this call needs (the definition's `scopes`), checked before the handler runs. */
  scopes?: (params: JsonObject) => readonly string[]
}

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
  tasks: Omit<TaskSettings, 'taskSupport' | 'finish'>
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
    this.api = {
      tool: definition => { this.tools.add(definition) },
      resource: definition => { this.resources.add(definition) },
      resourceTemplate: definition => { this.resources.addTemplate(definition) },
      prompt: definition => { this.prompts.add(definition) },
      completion: definition => { this.completions.add(definition) }
    }
    // Lists are the same for every client; a resource's content may be per-user and change at any time.
    // Lists that depend on the principal's scopes are private to it.
    const list: CacheHints = { ttlMs: settings.listTtlMs, cacheScope: settings.authorization?.listsPermittedOnly === true ? 'private' : 'public' }
    const content: CacheHints = { ttlMs: 0, cacheScope: 'private' }
    const spec = (eras: readonly Era[], handler: MethodSpec['handler'], cacheHints?: CacheHints): MethodSpec => ({ eras, cacheHints, handler })
    const toolsCall: MethodSpec = {
      ...spec(BOTH, i => this.tools.call(i.exchange.params, i)),
      preflight: (params, binding, headers) => { this.tools.preflight(params, binding, headers) },
      scopes: params => this.tools.scopesOf(params.name)
    }
    this.tasks = new Tasks({
      ...settings.tasks,
      taskSupport: name => this.tools.taskSupport(name),
      finish: result => this.finishResult(result, toolsCall, 'modern')
    })
    // tasks/*: only for clients that declared the extension, checked before the task is looked up.
    const task = (handler: MethodSpec['handler']): MethodSpec => ({
      ...spec(MODERN, handler),
      preflight: (_params, binding) => { if (!declaresTasks(binding.clientCapabilities)) throw tasksRequired() }
    })
    this.#methods = new Map([
      ['initialize', spec(LEGACY, i => this.#initialize(i.exchange.params))],
      ['ping', spec(LEGACY, () => ({}))],
      ['logging/setLevel', spec(LEGACY, i => this.#setLevel(i.exchange.params))],
      ['resources/subscribe', spec(LEGACY, i => this.#subscribe(i.exchange.params))],
      ['resources/unsubscribe', spec(LEGACY, i => this.#subscribe(i.exchange.params))],
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
  }

  /** True for a method served in some era (safe as a metric label). */
  served (name: string): boolean {
    return this.#methods.has(name)
  }

  /** The method as served in `era`, or undefined (method not found). */
  method (name: string, era: Era): MethodSpec | undefined {
    const method = this.#methods.get(name)
    return method?.eras.includes(era) === true ? method : undefined
  }

  /** A result as the request's era expects it: modern results carry resultType, serverInfo and cache hints. */
  finishResult (result: JsonObject, method: MethodSpec, era: Era): JsonObject {
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

  capabilities (era: Era): JsonObject {
    const capabilities: JsonObject = { logging: {}, completions: {} }
    if (this.tools.size > 0) capabilities.tools = {}
    // Legacy clients check `subscribe` before resources/subscribe; a stateless server acknowledges it
    // but has no channel to deliver updates on, so the modern era (subscriptions/listen) does not claim it.
    if (this.resources.size > 0) capabilities.resources = era === 'legacy' ? { subscribe: true } : {}
    if (this.prompts.size > 0) capabilities.prompts = {}
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
    if (typeof params.uri !== 'string') throw invalidParams('uri must be a string')
    return {}
  }

  /** Lists are returned whole, so no cursor this server issued can exist. */
  /** Every OAuth scope a definition declares now: what the resource metadata advertises. */
  declaredScopes (): Set<string> {
    return new Set([...this.tools.declaredScopes(), ...this.prompts.declaredScopes(), ...this.resources.declaredScopes()])
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

  #page ({ exchange }: Invocation, result: JsonObject): JsonObject {
    if (exchange.params.cursor !== undefined) throw invalidParams('unknown cursor')
    return result
  }
}
