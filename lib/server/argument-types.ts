/**
 * Types only: the `args` a tool or prompt handler receives, inferred from the definition's schema.
 * Nothing here imports TypeBox: a TypeBox 1.x schema is plain JSON Schema to `json-schema-to-ts`, and a
 * TypeBox 0.34 schema is recognised by the `static` and `params` members every one of its types carries.
 */
import type { FromSchema, JSONSchema } from 'json-schema-to-ts'
import type { PromptArgument } from './prompts.js'

/** What a tool's `inputSchema` and `outputSchema` may be typed as: any object (that each is a JSON Schema of `type: "object"` is checked at registration). */
export type ToolSchema = object

/**
 * Arguments are validated but never rewritten (no defaults are filled in), so a property with a
 * `default` stays optional. The rest is `json-schema-to-ts`'s default: `$ref`s within the schema
 * (`#/$defs/...`) are followed; `if`/`then`/`else` and `not` are ignored (they could only narrow).
 */
interface FromSchemaOptions {
  keepDefaultedPropertiesOptional: true
  parseIfThenElseKeywords: false
  parseNotKeyword: false
  references: false
  deserialize: false
}

/** True for `any`. */
type IsAny<T> = 0 extends 1 & T ? true : false

/** A TypeBox 0.34 schema (`@sinclair/typebox`): its `Static<S>` is exactly `(S & { params: [] })['static']`. */
interface TypeBox034Schema {
  params: unknown[]
  static: unknown
}

/**
 * `T` without the `[key: string]: unknown` that `json-schema-to-ts` gives every object whose schema
 * does not close it (`additionalProperties` unset or `true`), at every depth, so that a misspelt
 * `args.nmae` fails to compile instead of being `unknown`. Sound: a TypeScript object type is open
 * anyway. Kept: the index signature of an object that declares no property (`Record<string, unknown>`)
 * and a typed one (`additionalProperties: { type: "number" }`). Distributes over unions (`oneOf`).
 */
type Declared<T> =
  T extends readonly unknown[]
    ? { [K in keyof T]: Declared<T[K]> }
    : T extends object
      ? WithoutOpenIndex<T> extends infer Closed
        ? { [K in keyof Closed]: Declared<Closed[K]> }
        : never
      : T

type WithoutOpenIndex<T> =
  string extends keyof T
    ? T extends { [key: string]: infer Value }
      ? unknown extends Value
        ? { [K in keyof T as string extends K ? never : number extends K ? never : K]: T[K] } extends infer Properties
            ? keyof Properties extends never ? T : Properties
            : never
        : T
      : T
    : T

/** What a schema typed as a `json-schema-to-ts` JSON Schema gives; `Record<string, unknown>` when that says nothing. */
type FromJsonSchema<Schema extends JSONSchema> =
  FromSchema<Schema, FromSchemaOptions> extends infer Args
    ? IsAny<Args> extends true
      ? Record<string, unknown>
      : unknown extends Args
        ? Record<string, unknown>
        : Declared<Args>
    : never

/**
 * The `args` of a tool whose `inputSchema` has the type `Schema`:
 * - a TypeBox 0.34 schema: its `Static` type;
 * - a JSON Schema known literally (written `as const`, or inline in `app.mcp.tool({ ... })`), including
 *   a TypeBox 1.x schema: `json-schema-to-ts`'s `FromSchema`, with properties the schema does not
 *   declare left out of the type;
 * - no schema, or one typed widely (`Record<string, unknown>`, `object`, `any`): `Record<string, unknown>`.
 */
export type ToolArguments<Schema> =
  unknown extends Schema // any (an `IsAny` would be resolved too early for a `Schema extends object`)
    ? Record<string, unknown>
    : Schema extends TypeBox034Schema
      ? (Schema & { params: [] })['static']
      : Record<string, unknown> extends Schema
        ? Record<string, unknown>
        : Schema extends JSONSchema
          ? FromJsonSchema<Schema>
          : Record<string, unknown>

/**
 * The `args` of a prompt whose `arguments` have the type `Arguments`: a `string` property for each
 * argument with `required: true`, an optional one for each other; `Record<string, string>` when the
 * names are not known literally (no `arguments`, or a `PromptArgument[]` variable).
 */
export type PromptArguments<Arguments> =
  unknown extends Arguments // any
    ? Record<string, string>
    : Arguments extends ReadonlyArray<infer Argument extends PromptArgument>
      ? string extends Argument['name']
        ? Record<string, string>
        : (
          { [A in Argument as A['required'] extends true ? A['name'] : never]: string } &
          { [A in Argument as A['required'] extends true ? never : A['name']]?: string }
          ) extends infer Args
            ? { [K in keyof Args]: Args[K] } // one object type, as error messages show it
            : never
      : Record<string, string>

/** `Explicit` when the caller gave it (`app.mcp.tool<{ ms: number }>(...)`), else `Inferred`. */
export type ExplicitOr<Explicit, Inferred> = [Explicit] extends [never] ? Inferred : Explicit
