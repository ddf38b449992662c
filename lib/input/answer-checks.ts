/**
 * The checks of what a client answers to an ask, in every era (modern rounds, legacy requests on
 * the stream, tasks/update): its shape first, then what the specification's result types require and,
 * for a form elicitation, the `requestedSchema` the handler sent.
 */
import type { ValidateFunction } from 'ajv'
import type { RequestObserver } from '../observability/observer.js'
import { invalidParams, isJsonObject, type JsonObject } from '../core/jsonrpc.js'
import { digestOf } from '../protocol/request-state.js'
import { ClientInputError, HandlerMisuseError } from '../core/errors.js'
import { kindOf, requireCapabilities, type ElicitRequestParams, type InputRequest } from '../protocol/input-requests.js'
import { describeErrors, SchemaCompiler } from '../core/schema-compiler.js'

const ELICIT_ACTIONS: readonly unknown[] = ['accept', 'decline', 'cancel']

/**
 * Whether `answer` has the shape of an answer to `method`: what tells an answer of that kind at all
 * (any node can check it: a legacy answer's id names the method, not the question).
 */
export function fitsAnswer (method: InputRequest['method'], answer: unknown): answer is JsonObject {
  return isJsonObject(answer) && (
    method === 'elicitation/create'
      ? ELICIT_ACTIONS.includes(answer.action) && (answer.content === undefined || isJsonObject(answer.content))
      : method === 'sampling/createMessage'
        ? typeof answer.role === 'string' && answer.content !== undefined && answer.content !== null
        : Array.isArray(answer.roots) && answer.roots.every(root => isJsonObject(root) && typeof root.uri === 'string'))
}

/** Distinct `requestedSchema`s kept compiled per plugin instance; the least recently asked is dropped beyond it. */
const MAX_COMPILED_SCHEMAS = 256

/**
 * One per plugin instance: the asks' requested schemas compiled once (bounded, least recently used
 * first out), and the answers checked against them as they arrive, each counted once.
 */
export class AnswerChecks {
  readonly #observer: RequestObserver
  readonly #compiler = new SchemaCompiler()
  /** Compiled requested schemas by digest of their canonical JSON, least recently used first. */
  readonly #schemas = new Map<string, ValidateFunction>()

  constructor (observer: RequestObserver) {
    this.#observer = observer
  }

  /** Requested schemas compiled now. */
  get compiledSchemas (): number {
    return this.#schemas.size
  }

  /**
   * Checks what a handler asks before anything is sent: a kind the client did not declare is -32021
   * (HTTP 400 in the modern era), and a `requestedSchema` that does not compile is the handler's bug (an
   * Error, whatever the client would answer).
   */
  asked (requests: Record<string, InputRequest>, capabilities: JsonObject | undefined): void {
    requireCapabilities(requests, capabilities)
    for (const [key, request] of Object.entries(requests)) {
      if (request.method !== 'elicitation/create' || !isFormRequest(request.params)) continue
      try {
        this.#validator(request.params.requestedSchema)
      } catch (error) {
        throw new HandlerMisuseError(`The requestedSchema of ask "${key}" is not a JSON Schema that compiles: ${(error as Error).message}`, { cause: error })
      }
    }
  }

  /**
   * A client's answer to `request` as it arrives, counted once: answered, declined (an elicitation not
   * accepted) or invalid. An answer of the wrong shape is -32602 naming `label`; one of the right shape
   * that breaks its result type or the requested schema fails the ask with a `ClientInputError`
   * (`invalid`) the handler can catch.
   */
  received (request: InputRequest, label: string, answer: unknown): JsonObject {
    const kind = kindOf(request)
    if (!fitsAnswer(request.method, answer)) {
      this.#observer.inputAnswered(kind, 'invalid')
      throw invalidParams(`${label} is not a valid answer to ${request.method}`)
    }
    const problem = this.#problemOf(request, answer)
    if (problem !== undefined) {
      this.#observer.inputAnswered(kind, 'invalid')
      throw new ClientInputError('invalid', `${label} is not a valid answer to ${request.method}: ${problem}`)
    }
    this.#observer.inputAnswered(kind, kind === 'elicitation' && answer.action !== 'accept' ? 'declined' : 'answered')
    return answer
  }

  /** What makes an answer of the right shape unusable, or undefined. Never echoes what the client sent. */
  #problemOf (request: InputRequest, answer: JsonObject): string | undefined {
    switch (request.method) {
      case 'elicitation/create': return this.#elicitationProblem(request.params, answer)
      case 'sampling/createMessage': return samplingProblem(answer)
      case 'roots/list': return rootsProblem(answer.roots as unknown[])
    }
  }

  /** An accepted form's content: values of the kinds ElicitResult allows, matching the requested schema. */
  #elicitationProblem (params: ElicitRequestParams, answer: JsonObject): string | undefined {
    if (answer.action !== 'accept' || !isFormRequest(params)) return undefined
    const content = (answer.content ?? {}) as JsonObject
    if (!Object.values(content).every(isElicitedValue)) return 'every content value must be a string, a number, a boolean or an array of strings'
    const validate = this.#validator(params.requestedSchema)
    return validate(content) ? undefined : `the content does not match the requested schema: ${describeErrors(validate.errors)}`
  }

  /** The compiled `schema`, compiled now when it is not kept (ajv is left holding only what is kept). */
  #validator (schema: JsonObject): ValidateFunction {
    const key = digestOf(schema)
    const kept = this.#schemas.get(key)
    if (kept !== undefined) {
      this.#schemas.delete(key)
      this.#schemas.set(key, kept)
      return kept
    }
    // A copy: the handler may change its object after asking, and ajv caches by object.
    const validate = this.#compiler.compile(structuredClone(schema))
    this.#schemas.set(key, validate)
    if (this.#schemas.size > MAX_COMPILED_SCHEMAS) {
      const [oldestKey, oldest] = this.#schemas.entries().next().value!
      this.#schemas.delete(oldestKey)
      this.#compiler.release(oldest)
    }
    return validate
  }
}

/** A form elicitation (the default mode) with a schema to check its content against. */
function isFormRequest (params: ElicitRequestParams): params is ElicitRequestParams & { requestedSchema: JsonObject } {
  return params.mode !== 'url' && params.requestedSchema !== undefined
}

/** What 2026-07-28 `ElicitResult.content` may hold: `string | number | boolean | string[]`. */
function isElicitedValue (value: unknown): boolean {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ||
    (Array.isArray(value) && value.every(item => typeof item === 'string'))
}

/** The fields each `SamplingMessageContentBlock` requires (schema/2026-07-28/schema.ts), by `type`. */
const BLOCK_FIELDS: Record<string, Record<string, 'string' | 'object' | 'array'>> = {
  text: { text: 'string' },
  image: { data: 'string', mimeType: 'string' },
  audio: { data: 'string', mimeType: 'string' },
  tool_use: { id: 'string', name: 'string', input: 'object' },
  tool_result: { toolUseId: 'string', content: 'array' }
}

function isSamplingBlock (block: unknown): boolean {
  if (!isJsonObject(block) || typeof block.type !== 'string' || !Object.hasOwn(BLOCK_FIELDS, block.type)) return false
  return Object.entries(BLOCK_FIELDS[block.type]!).every(([field, kind]) => {
    const value = block[field]
    return kind === 'array' ? Array.isArray(value) : kind === 'object' ? isJsonObject(value) : typeof value === 'string'
  })
}

/** `CreateMessageResult`: role, model, and content blocks with their required fields. */
function samplingProblem (answer: JsonObject): string | undefined {
  if (answer.role !== 'user' && answer.role !== 'assistant') return 'role must be "user" or "assistant"'
  if (typeof answer.model !== 'string') return 'model must be a string'
  if (answer.stopReason !== undefined && typeof answer.stopReason !== 'string') return 'stopReason must be a string'
  const blocks = Array.isArray(answer.content) ? answer.content : [answer.content]
  if (blocks.length === 0 || !blocks.every(isSamplingBlock)) {
    return 'content must be a text, image, audio, tool_use or tool_result block with its required fields, or a non-empty array of them'
  }
  return undefined
}

/** `Root`: a `file://` URI ("must start with file:// for now") and, if any, a string name. */
function rootsProblem (roots: unknown[]): string | undefined {
  for (const root of roots as JsonObject[]) {
    if (!(root.uri as string).startsWith('file://')) return 'every root uri must start with file://'
    if (root.name !== undefined && typeof root.name !== 'string') return 'a root name must be a string'
  }
  return undefined
}
