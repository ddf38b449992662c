import { ERA_POLICIES } from '../protocol/era-policy.js'
import { DuplicateDefinitionError, InvalidDefinitionError } from '../core/errors.js'
import { invalidParams, isJsonObject, ProtocolError, type JsonObject } from '../core/jsonrpc.js'
import { sanitizeText } from '../core/sanitize.js'
import type { HandlerContext } from './context.js'

export interface ReadResourceResult {
  contents: JsonObject[]
  _meta?: JsonObject
  [key: string]: unknown
}

interface ResourceMetadata {
  name: string
  title?: string
  description?: string
  mimeType?: string
  annotations?: JsonObject
  _meta?: JsonObject
}

export interface ResourceDefinition extends ResourceMetadata {
  uri: string
  size?: number
  handler: (uri: string, ctx: HandlerContext) => ReadResourceResult | Promise<ReadResourceResult>
}

export interface ResourceTemplateDefinition extends ResourceMetadata {
  /** RFC 6570 template; `{var}` matches one path segment, `{+var}` matches the rest of the URI. */
  uriTemplate: string
  handler: (uri: string, variables: Record<string, string>, ctx: HandlerContext) => ReadResourceResult | Promise<ReadResourceResult>
}

interface RegisteredTemplate {
  definition: ResourceTemplateDefinition
  listing: JsonObject
  pattern: RegExp
  variables: string[]
}

const METADATA_KEYS = ['title', 'description', 'mimeType', 'annotations', '_meta'] as const

function listingOf (definition: ResourceMetadata, fields: JsonObject): JsonObject {
  const listing: JsonObject = { ...fields, name: definition.name }
  for (const key of METADATA_KEYS) {
    if (definition[key] !== undefined) listing[key] = definition[key]
  }
  return listing
}

export class ResourceCatalog {
  readonly #resources = new Map<string, { definition: ResourceDefinition, listing: JsonObject }>()
  readonly #templates = new Map<string, RegisteredTemplate>()

  get size (): number {
    return this.#resources.size + this.#templates.size
  }

  hasTemplate (uriTemplate: string): boolean {
    return this.#templates.has(uriTemplate)
  }

  add (definition: ResourceDefinition): void {
    const uri = definition?.uri
    if (typeof uri !== 'string' || !URL.canParse(uri)) throw new InvalidDefinitionError('resource', String(uri), 'uri must be an absolute URI')
    this.#checkCommon('resource', uri, definition)
    if (this.#resources.has(uri)) throw new DuplicateDefinitionError('Resource', uri)
    const listing = listingOf(definition, { uri })
    if (definition.size !== undefined) listing.size = definition.size
    this.#resources.set(uri, { definition, listing })
  }

  addTemplate (definition: ResourceTemplateDefinition): void {
    const uriTemplate = definition?.uriTemplate
    if (typeof uriTemplate !== 'string') throw new InvalidDefinitionError('resource template', String(uriTemplate), 'uriTemplate must be a string')
    this.#checkCommon('resource template', uriTemplate, definition)
    if (this.#templates.has(uriTemplate)) throw new DuplicateDefinitionError('Resource template', uriTemplate)
    const { pattern, variables } = compileTemplate(uriTemplate)
    this.#templates.set(uriTemplate, { definition, listing: listingOf(definition, { uriTemplate }), pattern, variables })
  }

  list (): JsonObject[] {
    return Array.from(this.#resources.values(), r => r.listing)
  }

  listTemplates (): JsonObject[] {
    return Array.from(this.#templates.values(), t => t.listing)
  }

  async read (params: JsonObject, ctx: HandlerContext): Promise<ReadResourceResult> {
    const uri = params.uri
    if (typeof uri !== 'string') throw invalidParams('uri must be a string')
    const resource = this.#resources.get(uri)
    const result = resource !== undefined
      ? await resource.definition.handler(uri, ctx)
      : await this.#readFromTemplate(uri, ctx)
    if (!isJsonObject(result) || !Array.isArray(result.contents)) {
      throw new TypeError(`Resource handler for "${uri}" returned a result without a contents array`)
    }
    return result
  }

  async #readFromTemplate (uri: string, ctx: HandlerContext): Promise<ReadResourceResult> {
    for (const template of this.#templates.values()) {
      const match = template.pattern.exec(uri)
      if (match === null) continue
      const variables: Record<string, string> = {}
      template.variables.forEach((name, i) => { variables[name] = decode(match[i + 1] ?? '') })
      return await template.definition.handler(uri, variables, ctx)
    }
    throw new ProtocolError(ERA_POLICIES[ctx.era].resourceNotFoundCode, 'Resource not found', { data: { uri: sanitizeText(uri) } })
  }

  #checkCommon (kind: string, key: string, definition: ResourceMetadata & { handler: unknown }): void {
    if (typeof definition.name !== 'string' || definition.name === '') throw new InvalidDefinitionError(kind, key, 'name must be a non-empty string')
    if (typeof definition.handler !== 'function') throw new InvalidDefinitionError(kind, key, 'handler must be a function')
  }
}

/** Level-1 and reserved (`+`) expressions of RFC 6570, anchored, as a RegExp with one group per variable. */
function compileTemplate (template: string): { pattern: RegExp, variables: string[] } {
  const variables: string[] = []
  let source = '^'
  let last = 0
  for (const match of template.matchAll(/\{([^}]*)\}/g)) {
    source += escapeRegExp(template.slice(last, match.index))
    const expression = match[1]!
    const reserved = expression.startsWith('+')
    const name = reserved ? expression.slice(1) : expression
    if (!/^[A-Za-z0-9_]+$/.test(name)) {
      throw new InvalidDefinitionError('resource template', template, `unsupported expression {${expression}}`)
    }
    variables.push(name)
    source += reserved ? '(.+)' : '([^/?#]+)'
    last = match.index + match[0].length
  }
  source += `${escapeRegExp(template.slice(last))}$`
  return { pattern: new RegExp(source), variables }
}

function escapeRegExp (text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

function decode (value: string): string {
  try {
    return decodeURIComponent(value)
  } catch {
    return value
  }
}
