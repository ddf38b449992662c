import { DuplicateDefinitionError, InvalidDefinitionError } from '../core/errors.js'
import { isJsonObject, invalidParams, type JsonObject } from '../core/jsonrpc.js'
import type { HandlerContext } from './context.js'

export type CompletionReference =
  | { type: 'ref/prompt', name: string }
  | { type: 'ref/resource', uri: string }

export interface CompletionValues {
  values: string[]
  total?: number
  hasMore?: boolean
}

export interface CompletionDefinition {
  /** The prompt, or the resource template (by its `uriTemplate`), whose arguments this completes. */
  ref: CompletionReference
  handler: (argument: { name: string, value: string }, ctx: HandlerContext, context: { arguments: Record<string, string> }) =>
  string[] | CompletionValues | Promise<string[] | CompletionValues>
}

/** The spec caps one completion response at 100 values. */
const MAX_VALUES = 100

export class CompletionCatalog {
  readonly #completions = new Map<string, CompletionDefinition>()
  readonly #refExists: (ref: CompletionReference) => boolean

  /** `refExists` tells whether a reference names a registered prompt or resource template. */
  constructor (refExists: (ref: CompletionReference) => boolean) {
    this.#refExists = refExists
  }

  add (definition: CompletionDefinition): void {
    const key = keyOf(definition?.ref)
    if (key === undefined) throw new InvalidDefinitionError('completion', String(definition?.ref), 'ref must be { type: "ref/prompt", name } or { type: "ref/resource", uri }')
    if (typeof definition.handler !== 'function') throw new InvalidDefinitionError('completion', key, 'handler must be a function')
    if (this.#completions.has(key)) throw new DuplicateDefinitionError('Completion', key)
    this.#completions.set(key, definition)
  }

  async complete (params: JsonObject, ctx: HandlerContext): Promise<{ completion: CompletionValues }> {
    const ref = params.ref as CompletionReference
    const key = keyOf(ref)
    const argument = params.argument
    if (key === undefined) throw invalidParams('ref must be a prompt or resource reference')
    if (!isJsonObject(argument) || typeof argument.name !== 'string' || typeof argument.value !== 'string') {
      throw invalidParams('argument must be { name: string, value: string }')
    }
    if (!this.#refExists(ref)) throw invalidParams('ref names no registered prompt or resource template')
    const context = isJsonObject(params.context) && isJsonObject(params.context.arguments) ? params.context.arguments : {}
    const definition = this.#completions.get(key)
    if (definition === undefined) return { completion: { values: [] } }
    const answer = await definition.handler({ name: argument.name, value: argument.value }, ctx,
      { arguments: context as Record<string, string> })
    return { completion: bounded(Array.isArray(answer) ? { values: answer } : answer) }
  }
}

function keyOf (ref: unknown): string | undefined {
  if (!isJsonObject(ref)) return undefined
  if (ref.type === 'ref/prompt' && typeof ref.name === 'string') return `prompt:${ref.name}`
  if (ref.type === 'ref/resource' && typeof ref.uri === 'string') return `resource:${ref.uri}`
  return undefined
}

function bounded (completion: CompletionValues): CompletionValues {
  if (completion.values.length <= MAX_VALUES) return completion
  return { values: completion.values.slice(0, MAX_VALUES), total: completion.total ?? completion.values.length, hasMore: true }
}
