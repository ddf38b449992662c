import { DuplicateDefinitionError, InvalidDefinitionError } from '../core/errors.js'
import { invalidParams, isJsonObject, type JsonObject } from '../core/jsonrpc.js'
import { sanitizeText } from '../core/sanitize.js'
import type { HandlerContext } from './context.js'
import { removerOf } from './definition-handle.js'
import { definitionScopes, listingsOf, scopesDeclaredBy, type ListFilter } from './definition-scopes.js'

export interface PromptArgument {
  name: string
  title?: string
  description?: string
  required?: boolean
}

export interface GetPromptResult {
  description?: string
  messages: JsonObject[]
  _meta?: JsonObject
  [key: string]: unknown
}

/**
 * A prompt. `Args` is what the handler receives; `app.mcp.prompt` infers it from `arguments` (see
 * `PromptArguments`) unless given explicitly. `Arguments` is the type of `arguments`.
 */
export interface PromptDefinition<
  Args = Record<string, string>,
  Arguments extends readonly PromptArgument[] = readonly PromptArgument[]
> {
  name: string
  title?: string
  description?: string
  arguments?: Arguments
  _meta?: JsonObject
  /** OAuth scopes a caller's token must grant (with `auth`): checked before the handler runs, in both eras (docs/authorization.md). */
  scopes?: readonly string[]
  /** A method, so that a definition typed `PromptDefinition<{ topic: string }>` can be registered whatever the type of its `arguments`. */
  handler(args: Args, ctx: HandlerContext): GetPromptResult | Promise<GetPromptResult>
}

export class PromptCatalog {
  readonly #prompts = new Map<string, { definition: PromptDefinition, listing: JsonObject, scopes: readonly string[] }>()
  readonly #authorization: boolean

  constructor (authorization: boolean) {
    this.#authorization = authorization
  }

  get size (): number {
    return this.#prompts.size
  }

  has (name: string): boolean {
    return this.#prompts.has(name)
  }

  /** `name` when it names a registered prompt (safe as a metric attribute), else undefined. */
  registeredName (name: unknown): string | undefined {
    return typeof name === 'string' && this.#prompts.has(name) ? name : undefined
  }

  /** Any definition (`never`: its handler being a method, every `PromptDefinition<Args>` is one); the handler gets the arguments object of strings. Returns what removes it. */
  add (definition: PromptDefinition<never>): () => boolean {
    const name = definition?.name
    if (typeof name !== 'string' || name === '') throw new InvalidDefinitionError('prompt', String(name), 'name must be a non-empty string')
    if (this.#prompts.has(name)) throw new DuplicateDefinitionError('Prompt', name)
    if (typeof definition.handler !== 'function') throw new InvalidDefinitionError('prompt', name, 'handler must be a function')
    const args = definition.arguments ?? []
    if (!Array.isArray(args) || !args.every(a => typeof a?.name === 'string' && a.name !== '')) {
      throw new InvalidDefinitionError('prompt', name, 'arguments must be an array of { name: string }')
    }
    const scopes = definitionScopes('prompt', name, definition.scopes, this.#authorization)
    const listing: JsonObject = { name }
    for (const key of ['title', 'description', 'arguments', '_meta'] as const) {
      if (definition[key] !== undefined) listing[key] = definition[key]
    }
    const prompt = { definition, listing, scopes }
    this.#prompts.set(name, prompt)
    return removerOf(this.#prompts, name, prompt)
  }

  list (permitted: ListFilter): JsonObject[] {
    return listingsOf(this.#prompts.values(), permitted)
  }

  /** The OAuth scopes getting the prompt named `name` needs. */
  scopesOf (name: unknown): readonly string[] {
    return typeof name === 'string' ? this.#prompts.get(name)?.scopes ?? [] : []
  }

  declaredScopes (): Iterable<string> {
    return scopesDeclaredBy(this.#prompts.values())
  }

  async get (params: JsonObject, ctx: HandlerContext): Promise<GetPromptResult> {
    const name = params.name
    if (typeof name !== 'string') throw invalidParams('name must be a string')
    const prompt = this.#prompts.get(name)
    if (prompt === undefined) throw invalidParams(`unknown prompt ${sanitizeText(name)}`)
    const args = params.arguments ?? {}
    if (!isJsonObject(args) || !Object.values(args).every(v => typeof v === 'string')) {
      throw invalidParams('arguments must be an object of strings')
    }
    for (const argument of prompt.definition.arguments ?? []) {
      if (argument.required === true && args[argument.name] === undefined) throw invalidParams(`missing required argument ${argument.name}`)
    }
    const result = await prompt.definition.handler(args as Record<string, string>, ctx)
    if (!isJsonObject(result) || !Array.isArray(result.messages)) {
      throw new TypeError(`Prompt "${name}" returned a result without a messages array`)
    }
    return result
  }
}
