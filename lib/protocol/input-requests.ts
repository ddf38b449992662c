/**
 * What a handler may ask the client (elicitation, sampling, roots), as the 2026-07-28 `InputRequest`
 * shapes, with the builders handlers use and what the client must have declared for each (the checks
 * of what comes back are `AnswerChecks`).
 */
import { missingCapability } from './era-policy.js'
import { isJsonObject, type JsonObject } from '../core/jsonrpc.js'

export interface ElicitRequestParams {
  message: string
  /** Form mode (the default): the JSON Schema of the answer's `content`. */
  requestedSchema?: JsonObject
  /** `'url'` sends the user to `url`; needs the client's `elicitation.url` capability. */
  mode?: 'form' | 'url'
  url?: string
  [key: string]: unknown
}

export interface ElicitResult {
  action: 'accept' | 'decline' | 'cancel'
  content?: Record<string, unknown>
  [key: string]: unknown
}

export interface CreateMessageRequestParams {
  messages: JsonObject[]
  maxTokens: number
  systemPrompt?: string
  [key: string]: unknown
}

export interface CreateMessageResult {
  role: string
  content: unknown
  model: string
  [key: string]: unknown
}

export interface Root {
  uri: string
  name?: string
  [key: string]: unknown
}

export interface ListRootsResult {
  roots: Root[]
  [key: string]: unknown
}

/** One thing to ask: a bare `{ method, params }`, as `inputRequests` carries it. */
export type InputRequest =
  | { method: 'elicitation/create', params: ElicitRequestParams }
  | { method: 'sampling/createMessage', params: CreateMessageRequestParams }
  | { method: 'roots/list', params?: JsonObject }

/** The answer to an input request of that kind. */
export type InputAnswer<Request extends InputRequest> =
  Request extends { method: 'elicitation/create' } ? ElicitResult
    : Request extends { method: 'sampling/createMessage' } ? CreateMessageResult
      : ListRootsResult

/** What an input request asks, as the metrics label it. */
export type InputKind = 'elicitation' | 'sampling' | 'roots'

/** The capabilities a handler can test with `ctx.supports()`. */
export type ClientCapability = 'elicitation' | 'elicitation.url' | 'sampling' | 'sampling.tools' | 'roots'

export function elicitation (params: ElicitRequestParams): InputRequest & { method: 'elicitation/create' } {
  return { method: 'elicitation/create', params }
}

export function sampling (params: CreateMessageRequestParams): InputRequest & { method: 'sampling/createMessage' } {
  return { method: 'sampling/createMessage', params }
}

export function rootsList (): InputRequest & { method: 'roots/list' } {
  return { method: 'roots/list' }
}

/**
 * Whether the client declared `capability` (a bare `elicitation: {}` means form mode). Capabilities that
 * are unknown (a legacy request without a session) rule nothing out: the server asks, and a client that
 * lacks the feature answers with an error.
 */
export function supports (capabilities: JsonObject | undefined, capability: ClientCapability): boolean {
  if (capabilities === undefined) return true
  const [name, feature] = capability.split('.') as [string, string | undefined]
  const declared = capabilities[name]
  if (!isJsonObject(declared)) return false
  return feature === undefined || declared[feature] !== undefined
}

/** -32021 (HTTP 400 in the modern era) when the client did not declare what one of `requests` needs. */
export function requireCapabilities (requests: Record<string, InputRequest>, capabilities: JsonObject | undefined): void {
  for (const request of Object.values(requests)) {
    const capability = capabilityFor(request)
    if (supports(capabilities, capability)) continue
    const [name, feature] = capability.split('.') as [string, string | undefined]
    throw missingCapability({ [name]: feature === undefined ? {} : { [feature]: {} } })
  }
}

const KINDS: Record<InputRequest['method'], InputKind> = {
  'elicitation/create': 'elicitation', 'sampling/createMessage': 'sampling', 'roots/list': 'roots'
}

/** The metric label of what `request` asks. */
export function kindOf (request: InputRequest): InputKind {
  return KINDS[request.method]
}

/** The capability an input request needs. */
export function capabilityFor (request: InputRequest): ClientCapability {
  switch (request.method) {
    case 'elicitation/create': return request.params.mode === 'url' ? 'elicitation.url' : 'elicitation'
    case 'sampling/createMessage': return request.params.tools === undefined ? 'sampling' : 'sampling.tools'
    case 'roots/list': return 'roots'
  }
}
