import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { missingCapability } from '../protocol/era-policy.js'
import type { ValidateFunction } from 'ajv'
import { DuplicateDefinitionError, InvalidDefinitionError } from '../core/errors.js'
import type { IncomingHttpHeaders } from 'node:http'
import { headerMismatch, type EraBinding } from '../protocol/era.js'
import { isPromiseLike } from '../core/maybe-async.js'
import { invalidParams, isJsonObject, type JsonObject } from '../core/jsonrpc.js'
import { paramHeaderMismatch, paramHeadersOf, type ParamHeader } from '../protocol/param-headers.js'
import { sanitizeText } from '../core/sanitize.js'
import type { HandlerContext, WorkerContext } from './context.js'
import type { Invocation } from './invocation.js'
import { WorkerPool, type WorkerToolLocation } from './worker-pool.js'
import { describeErrors, type JsonSchema, type SchemaCompiler } from '../core/schema-compiler.js'
import { ToolError } from '../core/errors.js'
import { declaresTasks, tasksRequired, type TaskSupport } from '../tasks/tasks.js'
import type { ToolSchema } from './argument-types.js'
import { definitionScopes, listingsOf, scopesDeclaredBy, type ListFilter } from './definition-scopes.js'
import { removerOf } from './definition-handle.js'

export { ToolError } from '../core/errors.js'

export interface CallToolResult {
  content: JsonObject[]
  structuredContent?: JsonObject
  isError?: boolean
  _meta?: JsonObject
  [key: string]: unknown
}

/** A tool's in-process handler: `args` are the validated `arguments` of the call. */
export type ToolHandler<Args = Record<string, unknown>> = (args: Args, ctx: HandlerContext) => CallToolResult | Promise<CallToolResult>

/**
 * What a worker tool's module exports (`worker: { filename, name }`): called in a pool thread with the
 * validated arguments and a `WorkerContext`, the handler context without the Fastify request and
 * logger, which cannot cross into a thread.
 */
export type WorkerToolHandler<Args = Record<string, unknown>> = (args: Args, ctx: WorkerContext) => CallToolResult | Promise<CallToolResult>

/**
 * A tool. `Args` is what the handler receives; `app.mcp.tool` infers it from `inputSchema` (see
 * `ToolArguments`) unless given explicitly. `Schema` is the type of `inputSchema`.
 */
export interface ToolDefinition<Args = Record<string, unknown>, Schema extends ToolSchema = ToolSchema> {
  name: string
  title?: string
  description?: string
  /** JSON Schema of `arguments`; its `type` must be `"object"`. Default: any object. */
  inputSchema?: Schema
  /** JSON Schema of `structuredContent`; when set, every successful result must carry a matching one. */
  outputSchema?: ToolSchema
  annotations?: JsonObject
  _meta?: JsonObject
  /**
   * Client capabilities the tool relies on, e.g. `{ sampling: {} }`. A modern request whose `_meta`
   * does not declare them is rejected with -32021 before the tool runs. (Legacy requests carry no
   * capabilities on a stateless transport, so they are not checked.)
   */
  requiredClientCapabilities?: JsonObject
  /** OAuth scopes a caller's token must grant (with `auth`): checked before the handler runs, in both eras (docs/authorization.md). */
  scopes?: readonly string[]
  /**
   * Calls may become tasks of the tasks extension (modern era): where the handler calls
   * `ctx.startTask()`, a client that declared the extension gets a `CreateTaskResult` and the handler
   * goes on as a task. `'required'`: a client without the extension gets -32021 before the tool runs.
   */
  task?: TaskSupport
  /**
   * Runs in this process. Exactly one of `handler` and `worker` is given. (A method, so that a
   * definition typed `ToolDefinition<{ ms: number }>` can be registered whatever its schema's type.)
   */
  handler?(args: Args, ctx: HandlerContext): CallToolResult | Promise<CallToolResult>
  /**
   * Runs in a worker thread: the module's export (a `WorkerToolHandler`) is called as `(args, ctx)`
   * with the same context but `request` and `log` (`ctx.cancelled()` works even in a busy loop). A
   * cancelled worker tool still running after `cancelTimeoutMs` has its thread terminated.
   */
  worker?: WorkerToolLocation
}

interface RegisteredTool {
  definition: ToolDefinition
  listing: JsonObject
  validateInput: ValidateFunction
  validateOutput: ValidateFunction | undefined
  paramHeaders: ParamHeader[]
  scopes: readonly string[]
}

// Tool names: 1–128 characters of ASCII letters, digits, '_', '-' and '.' (the specification's rule since 2025-11-25).
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/

/** A `ToolError` becomes an `isError` result (unless the call was cancelled); anything else propagates. */
function toolFailure (error: unknown, invocation: Invocation): CallToolResult {
  if (error instanceof ToolError && !invocation.exchange.cancelled) return ToolError.result(error.message)
  throw error
}

/** What a tool returned, checked: a content array, and `structuredContent` matching its output schema. */
function checkedResult (tool: RegisteredTool, result: CallToolResult): CallToolResult {
  const { name } = tool.definition
  if (!isJsonObject(result) || !Array.isArray(result.content)) {
    throw new TypeError(`Tool "${name}" returned a result without a content array`)
  }
  if (tool.validateOutput !== undefined && result.isError !== true && !tool.validateOutput(result.structuredContent)) {
    throw new TypeError(`Tool "${name}" returned structuredContent that ${describeErrors(tool.validateOutput.errors)}`)
  }
  return result
}

export class ToolCatalog {
  readonly #tools = new Map<string, RegisteredTool>()
  readonly #compiler: SchemaCompiler
  readonly #workers: WorkerPool

  readonly #authorization: boolean

  constructor (compiler: SchemaCompiler, workers: WorkerPool, authorization: boolean) {
    this.#compiler = compiler
    this.#workers = workers
    this.#authorization = authorization
  }

  get size (): number {
    return this.#tools.size
  }

  /** `name` when it names a registered tool (safe as a metric label), else undefined. */
  registeredName (name: unknown): string | undefined {
    return typeof name === 'string' && this.#tools.has(name) ? name : undefined
  }

  /**
   * Any definition (`never`: its handler being a method, every `ToolDefinition<Args>` is one); the
   * handler gets the validated arguments object. Returns what removes it.
   */
  add (definition: ToolDefinition<never>): () => boolean {
    const name = definition?.name
    if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
      throw new InvalidDefinitionError('tool', String(name), 'name must be 1-128 characters of A-Z a-z 0-9 _ - .')
    }
    if (this.#tools.has(name)) throw new DuplicateDefinitionError('Tool', name)
    const { handler, worker } = definition
    if ((handler === undefined) === (worker === undefined)) throw new InvalidDefinitionError('tool', name, 'give exactly one of handler and worker')
    if (handler !== undefined && typeof handler !== 'function') throw new InvalidDefinitionError('tool', name, 'handler must be a function')
    if (worker !== undefined) this.#checkWorker(name, worker)
    const inputSchema = definition.inputSchema ?? { type: 'object' }
    if (!isJsonObject(inputSchema) || inputSchema.type !== 'object') {
      throw new InvalidDefinitionError('tool', name, 'inputSchema must be a JSON Schema with type "object"')
    }
    if (definition.requiredClientCapabilities !== undefined && !isJsonObject(definition.requiredClientCapabilities)) {
      throw new InvalidDefinitionError('tool', name, 'requiredClientCapabilities must be an object')
    }
    if (definition.task !== undefined && definition.task !== 'optional' && definition.task !== 'required') {
      throw new InvalidDefinitionError('tool', name, 'task must be \'optional\' or \'required\'')
    }
    const outputSchema = definition.outputSchema
    if (outputSchema !== undefined && (!isJsonObject(outputSchema) || outputSchema.type !== 'object')) {
      throw new InvalidDefinitionError('tool', name, 'outputSchema must be a JSON Schema with type "object"')
    }
    const scopes = definitionScopes('tool', name, definition.scopes, this.#authorization)
    const listing: JsonObject = { name, inputSchema }
    for (const key of ['title', 'description', 'outputSchema', 'annotations', '_meta'] as const) {
      if (definition[key] !== undefined) listing[key] = definition[key]
    }
    const tool: RegisteredTool = {
      definition,
      listing,
      validateInput: this.#compile(name, 'inputSchema', inputSchema),
      validateOutput: outputSchema === undefined ? undefined : this.#compile(name, 'outputSchema', outputSchema),
      paramHeaders: this.#paramHeaders(name, inputSchema),
      scopes
    }
    if (worker !== undefined) this.#workers.prepare()
    this.#tools.set(name, tool)
    return removerOf(this.#tools, name, tool)
  }

  list (permitted: ListFilter): JsonObject[] {
    return listingsOf(this.#tools.values(), permitted)
  }

  /** The OAuth scopes calling the tool named `name` needs (none for an unknown name: that call fails anyway). */
  scopesOf (name: unknown): readonly string[] {
    return typeof name === 'string' ? this.#tools.get(name)?.scopes ?? [] : []
  }

  /** Every scope a tool declares. */
  declaredScopes (): Iterable<string> {
    return scopesDeclaredBy(this.#tools.values())
  }

  /** The task support of the tool named `name`, if it declared any. */
  taskSupport (name: unknown): TaskSupport | undefined {
    return typeof name === 'string' ? this.#tools.get(name)?.definition.task : undefined
  }

  /** Whether any tool declared task support (the server then advertises the extension). */
  get hasTasks (): boolean {
    for (const tool of this.#tools.values()) if (tool.definition.task !== undefined) return true
    return false
  }

  /**
   * The modern era's checks of a `tools/call` that answer 400 before the tool runs: client capabilities
   * the tool declared it needs (-32021), and `Mcp-Param-*` headers that must mirror arguments (-32020).
   * Legacy requests carry neither on a stateless transport. Unknown tools are left to `call` (-32602).
   */
  preflight (params: JsonObject, binding: EraBinding, headers: IncomingHttpHeaders): void {
    const tool = typeof params.name === 'string' ? this.#tools.get(params.name) : undefined
    if (tool === undefined) return
    // A tool that must run as a task cannot serve a client without the extension (legacy ones never have it).
    if (tool.definition.task === 'required' && !(binding.era === 'modern' && declaresTasks(binding.clientCapabilities))) throw tasksRequired()
    if (binding.era !== 'modern') return
    const required = tool.definition.requiredClientCapabilities
    if (required !== undefined && Object.keys(required).some(key => binding.clientCapabilities[key] === undefined)) {
      throw missingCapability(required)
    }
    const mismatch = paramHeaderMismatch(tool.paramHeaders, params.arguments, headers)
    if (mismatch !== undefined) throw headerMismatch(undefined, mismatch)
  }

  /**
   * Runs `tools/call`. Unknown tools are a protocol error (-32602); invalid arguments and `ToolError`s
   * are `isError` results the model can read; anything else thrown propagates to the dispatcher. A
   * handler that returns its result synchronously is answered synchronously: no promise is made.
   */
  call (params: JsonObject, invocation: Invocation): CallToolResult | Promise<CallToolResult> {
    const name = params.name
    if (typeof name !== 'string') throw invalidParams('name must be a string')
    const tool = this.#tools.get(name)
    if (tool === undefined) throw invalidParams(`unknown tool ${sanitizeText(name)}`)
    const args = params.arguments ?? {}
    if (!isJsonObject(args)) return ToolError.result('Invalid arguments: arguments must be an object')
    if (!tool.validateInput(args)) {
      return ToolError.result(`Invalid arguments: ${sanitizeText(describeErrors(tool.validateInput.errors))}`)
    }
    const { handler, worker } = tool.definition
    let outcome: CallToolResult | Promise<CallToolResult>
    try {
      outcome = handler !== undefined
        ? handler(args, invocation.context)
        : this.#workers.run(worker!, args, invocation) as Promise<CallToolResult>
    } catch (error) {
      return toolFailure(error, invocation)
    }
    return isPromiseLike(outcome)
      ? Promise.resolve(outcome).then(result => checkedResult(tool, result), (error: unknown) => toolFailure(error, invocation))
      : checkedResult(tool, outcome)
  }

  /**
   * A worker tool's module must exist when it is registered: a missing one would otherwise fail at the
   * tool's first call, as an anonymous -32603. A relative path would be resolved against the worker
   * thread's entry, not the caller's module, so it is refused too.
   */
  #checkWorker (name: string, { filename }: WorkerToolLocation): void {
    const href = typeof filename === 'string' || filename instanceof URL ? WorkerPool.moduleUrl(filename) : undefined
    if (href === undefined || !href.startsWith('file:')) {
      throw new InvalidDefinitionError('tool', name, 'worker.filename must be an absolute path or a file URL (new URL(\'./tool.js\', import.meta.url))')
    }
    const path = fileURLToPath(href)
    if (!existsSync(path)) {
      throw new InvalidDefinitionError('tool', name, `worker.filename ${path} does not exist (under a TypeScript loader such as tsx, name the .ts file; once built, the .js file)`)
    }
  }

  #paramHeaders (name: string, inputSchema: JsonSchema): ParamHeader[] {
    try {
      return paramHeadersOf(inputSchema)
    } catch (error) {
      throw new InvalidDefinitionError('tool', name, (error as Error).message)
    }
  }

  #compile (name: string, field: string, schema: JsonSchema): ValidateFunction {
    try {
      return this.#compiler.compile(schema)
    } catch (error) {
      throw new InvalidDefinitionError('tool', name, `${field} does not compile: ${(error as Error).message}`)
    }
  }
}
