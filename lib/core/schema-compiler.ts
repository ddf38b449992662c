import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import type { JsonObject } from './jsonrpc.js'

// ajv-formats is CommonJS with `export default`: under NodeNext the callable is the module itself.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv

export type JsonSchema = JsonObject

/**
 * One compiler per use in a plugin registration, so two registrations never share compiled state.
 * Tools' schemas are compiled once, at registration; asks' requested schemas when first asked. Options never rewrite the caller's arguments (no coercion, defaults
 * or removal, unlike Fastify's route validator), and `allErrors` stays off: it is a DoS lever.
 * JSON Schema 2020-12 is the default dialect, as MCP specifies; a schema that names draft-07 gets draft-07.
 */
export class SchemaCompiler {
  #draft2020: Ajv | undefined
  #draft07: Ajv | undefined

  compile (schema: JsonSchema): ValidateFunction {
    return this.#ajvFor(schema).compile(schema)
  }

  /** Forgets a schema `compile` compiled (ajv keeps every schema it compiled, by object, until removed). */
  release (validate: ValidateFunction): void {
    const schema = validate.schema as JsonSchema
    this.#ajvFor(schema).removeSchema(schema)
  }

  #ajvFor (schema: JsonSchema): Ajv {
    const options: Options = {
      strict: false, // tools carry annotations such as x-mcp-header that strict mode rejects
      allErrors: false,
      coerceTypes: false,
      useDefaults: false,
      removeAdditional: false,
      validateSchema: true
    }
    if (typeof schema.$schema === 'string' && schema.$schema.includes('draft-07')) {
      return (this.#draft07 ??= addFormats(new Ajv(options)))
    }
    return (this.#draft2020 ??= addFormats(new Ajv2020(options) as unknown as Ajv))
  }
}

/** A short, bounded description of why validation failed; never echoes the rejected input. */
export function describeErrors (errors: ErrorObject[] | null | undefined): string {
  const first = errors?.[0]
  if (first === undefined) return 'does not match the schema'
  return `${first.instancePath === '' ? '(root)' : first.instancePath} ${first.message ?? 'is invalid'}`
}
