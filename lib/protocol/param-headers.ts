import type { IncomingHttpHeaders } from 'node:http'
import { isJsonObject, type JsonObject } from '../core/jsonrpc.js'
import { decodeMirroredValue, headerValue } from './header-values.js'

/** One tool argument that modern clients mirror into an `Mcp-Param-{Name}` header (https://github.com/modelcontextprotocol/modelcontextprotocol/blob/main/seps/2243-http-standardization.md). */
export interface ParamHeader {
  /** Lowercased header name, as Node exposes it. */
  header: string
  /** The chain of `properties` keys from the schema root to the argument. */
  path: string[]
  type: 'string' | 'integer' | 'boolean'
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
// The HTTP standardization's "Value Encoding" (see the link above): an integer is its decimal string (`42`, `-7`); no sign, zero or point more.
const CANONICAL_INTEGER = /^(?:0|-?[1-9]\d*)$/
const ANNOTATION = 'x-mcp-header'

/**
 * Reads the `x-mcp-header` annotations of a tool's input schema. Throws (with the reason) when one
 * breaks the constraints of the HTTP standardization: token syntax, case-insensitive uniqueness, a primitive type other
 * than number, and reachable from the root through `properties` keys only.
 */
export function paramHeadersOf (inputSchema: JsonObject): ParamHeader[] {
  const found: ParamHeader[] = []
  collect(inputSchema, [], found)
  if (found.length !== countAnnotations(inputSchema)) {
    throw new Error(`${ANNOTATION} may only annotate properties reachable through "properties" keys`)
  }
  const names = new Set<string>()
  for (const { header } of found) {
    if (names.has(header)) throw new Error(`${ANNOTATION} values must be unique (case-insensitively): ${header}`)
    names.add(header)
  }
  return found
}

function collect (schema: JsonObject, path: string[], found: ParamHeader[]): void {
  if (!isJsonObject(schema.properties)) return
  for (const [key, property] of Object.entries(schema.properties)) {
    if (!isJsonObject(property)) continue
    const name = property[ANNOTATION]
    if (name !== undefined) {
      if (typeof name !== 'string' || !TOKEN.test(name)) throw new Error(`${ANNOTATION} of "${key}" must be an HTTP token`)
      const type = property.type
      if (type !== 'string' && type !== 'integer' && type !== 'boolean') {
        throw new Error(`${ANNOTATION} of "${key}" requires type string, integer or boolean`)
      }
      found.push({ header: `mcp-param-${name.toLowerCase()}`, path: [...path, key], type })
    }
    collect(property, [...path, key], found)
  }
}

function countAnnotations (value: unknown): number {
  if (Array.isArray(value)) return value.reduce((n: number, item) => n + countAnnotations(item), 0)
  if (!isJsonObject(value)) return 0
  let count = ANNOTATION in value ? 1 : 0
  for (const child of Object.values(value)) count += countAnnotations(child)
  return count
}

/** Why the `Mcp-Param-*` headers disagree with the arguments, or undefined when they agree. */
export function paramHeaderMismatch (params: readonly ParamHeader[], args: unknown, headers: IncomingHttpHeaders): string | undefined {
  for (const param of params) {
    const value = valueAt(args, param.path)
    const raw = headerValue(headers, param.header)
    if (value === undefined || value === null) {
      // A header without a body value would let a proxy route on something the server never sees.
      if (raw !== undefined) return `${param.header} is present but the argument is absent`
      continue
    }
    if (raw === undefined) return `${param.header} is required when the argument is present`
    const decoded = decodeMirroredValue(raw)
    if (decoded === undefined) return `${param.header} is malformed`
    if (!matches(param.type, decoded, value)) return `${param.header} does not match the argument`
  }
  return undefined
}

function valueAt (args: unknown, path: readonly string[]): unknown {
  let value = args
  for (const key of path) {
    if (!isJsonObject(value) || !Object.hasOwn(value, key)) return undefined
    value = value[key]
  }
  return value
}

/**
 * Whether the header is the one spelling the specification gives the argument's value
 * (https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http#value-encoding):
 * a proxy that routes on the header's text and this server then read the same value. Integers must
 * be safe (the HTTP standardization allows no others): beyond 2^53 the body's value was already rounded by
 * JSON.parse, so no header could be compared with what the client wrote.
 */
function matches (type: ParamHeader['type'], header: string, value: unknown): boolean {
  switch (type) {
    case 'string': return header === value
    case 'boolean': return typeof value === 'boolean' && header === String(value)
    case 'integer': return Number.isSafeInteger(value) && CANONICAL_INTEGER.test(header) && Number(header) === value
  }
}
