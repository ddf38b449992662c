import { ERA_POLICIES } from '../protocol/era-policy.js'
import { DuplicateDefinitionError, InvalidDefinitionError } from '../core/errors.js'
import { invalidParams, isJsonObject, ProtocolError, type JsonObject } from '../core/jsonrpc.js'
import { sanitizeText } from '../core/sanitize.js'
import type { HandlerContext } from './context.js'
import { removerOf } from './definition-handle.js'
import { definitionScopes, listingsOf, scopesDeclaredBy, type ListFilter } from './definition-scopes.js'

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
  /** OAuth scopes a caller's token must grant (with `auth`): checked before the handler runs, in both eras (docs/authorization.md). */
  scopes?: readonly string[]
  handler: (uri: string, ctx: HandlerContext) => ReadResourceResult | Promise<ReadResourceResult>
}

export interface ResourceTemplateDefinition extends ResourceMetadata {
  /** RFC 6570 template; `{var}` matches one path segment, `{+var}` matches the rest of the URI. */
  uriTemplate: string
  /** OAuth scopes a caller's token must grant (with `auth`): checked before the handler runs, in both eras (docs/authorization.md). */
  scopes?: readonly string[]
  handler: (uri: string, variables: Record<string, string>, ctx: HandlerContext) => ReadResourceResult | Promise<ReadResourceResult>
}

interface RegisteredTemplate {
  definition: ResourceTemplateDefinition
  listing: JsonObject
  pattern: RegExp
  variables: string[]
  scopes: readonly string[]
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
  readonly #resources = new Map<string, { definition: ResourceDefinition, listing: JsonObject, scopes: readonly string[] }>()
  readonly #templates = new Map<string, RegisteredTemplate>()
  readonly #authorization: boolean

  constructor (authorization: boolean) {
    this.#authorization = authorization
  }

  get size (): number {
    return this.#resources.size + this.#templates.size
  }

  hasTemplate (uriTemplate: string): boolean {
    return this.#templates.has(uriTemplate)
  }

  /** Returns what removes it. */
  add (definition: ResourceDefinition): () => boolean {
    const uri = definition?.uri
    if (typeof uri !== 'string' || !URL.canParse(uri)) throw new InvalidDefinitionError('resource', String(uri), 'uri must be an absolute URI')
    this.#checkCommon('resource', uri, definition)
    if (this.#resources.has(uri)) throw new DuplicateDefinitionError('Resource', uri)
    const scopes = definitionScopes('resource', uri, definition.scopes, this.#authorization)
    const listing = listingOf(definition, { uri })
    if (definition.size !== undefined) listing.size = definition.size
    const resource = { definition, listing, scopes }
    this.#resources.set(uri, resource)
    return removerOf(this.#resources, uri, resource)
  }

  /** Returns what removes it. */
  addTemplate (definition: ResourceTemplateDefinition): () => boolean {
    const uriTemplate = definition?.uriTemplate
    if (typeof uriTemplate !== 'string') throw new InvalidDefinitionError('resource template', String(uriTemplate), 'uriTemplate must be a string')
    this.#checkCommon('resource template', uriTemplate, definition)
    if (this.#templates.has(uriTemplate)) throw new DuplicateDefinitionError('Resource template', uriTemplate)
    const scopes = definitionScopes('resource template', uriTemplate, definition.scopes, this.#authorization)
    const { pattern, variables } = compileTemplate(uriTemplate)
    const template = { definition, listing: listingOf(definition, { uriTemplate }), pattern, variables, scopes }
    this.#templates.set(uriTemplate, template)
    return removerOf(this.#templates, uriTemplate, template)
  }

  list (permitted: ListFilter): JsonObject[] {
    return listingsOf(this.#resources.values(), permitted)
  }

  listTemplates (permitted: ListFilter): JsonObject[] {
    return listingsOf(this.#templates.values(), permitted)
  }

  /** The OAuth scopes reading `uri` needs: the resource's, or those of the template that would read it. */
  scopesOf (uri: unknown): readonly string[] {
    if (typeof uri !== 'string') return []
    const resource = this.#resources.get(uri)
    if (resource !== undefined) return resource.scopes
    for (const template of this.#templates.values()) if (template.pattern.test(uri)) return template.scopes
    return []
  }

  /** The OAuth scopes of the template `uriTemplate` itself (what completing its arguments needs). */
  templateScopesOf (uriTemplate: unknown): readonly string[] {
    return typeof uriTemplate === 'string' ? this.#templates.get(uriTemplate)?.scopes ?? [] : []
  }

  declaredScopes (): Iterable<string> {
    return [...scopesDeclaredBy(this.#resources.values()), ...scopesDeclaredBy(this.#templates.values())]
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
