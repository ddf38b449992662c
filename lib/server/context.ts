import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import type { RequestCancelledError } from '../cancellation/cancellation-errors.js'
import type { Exchange } from '../cancellation/exchange.js'
import { LOGGING_LEVELS, type LoggingLevel } from '../protocol/era.js'
import {
  elicitation, rootsList, sampling, supports,
  type ClientCapability, type CreateMessageRequestParams, type CreateMessageResult, type ElicitRequestParams, type ElicitResult,
  type InputAnswer, type InputRequest, type Root
} from './input-requests.js'
import { INPUT_METHODS, type InputRound } from './input-round.js'
import type { JsonObject, RequestId } from '../protocol/jsonrpc.js'
import type { Era } from '../protocol/versions.js'

/**
 * What a handler gets as its last argument wherever it runs: in this process or in a worker thread
 * (a worker tool gets exactly this).
 */
export interface WorkerContext {
  readonly requestId: RequestId
  readonly method: string
  readonly era: Era
  readonly protocolVersion: string
  /** The authenticated principal id, or null (see the `auth` option). */
  readonly principal: string | null
  /** Aborts with a `RequestCancelledError` when the request is cancelled; hand it to fetch, timers, streams, child processes. */
  readonly signal: AbortSignal
  /** Polling style: true once the request is cancelled (in a worker, even inside a loop that never yields). */
  readonly cancelled: () => boolean
  /** Throws the `RequestCancelledError` once cancelled; the dispatcher treats it as cancellation, not as an error. */
  readonly throwIfCancelled: () => void
  /** `notifications/progress`, sent only when the request carried a progressToken and `progress` grows. */
  readonly progress: (progress: number, total?: number, message?: string) => Promise<void>
  /** `notifications/message` to the client, filtered by the request's log level. */
  readonly notify: (level: LoggingLevel, data: unknown, logger?: string) => Promise<void>
}

/**
 * What every tool, resource, prompt and completion handler running in this process gets: the worker
 * context and the Fastify request with its logger, which cannot cross into a worker thread, and the
 * means to ask the client for input.
 */
export interface HandlerContext extends WorkerContext {
  readonly request: FastifyRequest
  readonly log: FastifyBaseLogger
  /** The client capabilities the request declares (2026-07-28 `_meta`); `{}` when unknown. */
  readonly clientCapabilities: JsonObject
  /** Whether the client declared a capability (`'elicitation'` is form mode; `'elicitation.url'`, `'sampling.tools'` the features). */
  readonly supports: (capability: ClientCapability) => boolean
  /**
   * Asks the client several things at once; resolves to the answers by your keys. In the 2026-07-28 era
   * a request that does not carry the answers yet ends its round with `input_required`, and the handler
   * runs again when the client retries with them (code before the ask runs once per round). Available
   * in `tools/call`, `prompts/get` and `resources/read`; a kind the client did not declare is -32021.
   */
  readonly input: <Requests extends Record<string, InputRequest>>(requests: Requests) => Promise<{ [K in keyof Requests]: InputAnswer<Requests[K]> }>
  /** Asks the user (elicitation); `input` with an automatic key. */
  readonly elicit: (params: ElicitRequestParams) => Promise<ElicitResult>
  /** Asks the client's model for a completion (sampling); `input` with an automatic key. */
  readonly sample: (params: CreateMessageRequestParams) => Promise<CreateMessageResult>
  /** Asks the client's roots; `input` with an automatic key. */
  readonly roots: () => Promise<Root[]>
  /** A JSON value of the handler's, carried (sealed) from one input round to the next; undefined in the first. */
  state: unknown
}

/** The request a context speaks for: an exchange in this process, or its mirror in a worker thread. */
export interface ContextSource {
  readonly id: RequestId
  readonly method: string
  readonly era: Era
  readonly protocolVersion: string
  readonly principal: string | null
  readonly signal: AbortSignal
  /** The abort reason once cancelled. */
  readonly cancellation: RequestCancelledError | undefined
  progress: (progress: number, total?: number, message?: string) => unknown
  log: (level: LoggingLevel, data: unknown, logger?: string) => unknown
}

/**
 * The one implementation of the handler context. Everything is read from the source on access and each
 * function is made (bound) on first use: most handlers touch one or two members, and a context built
 * eagerly would cost every request an AbortController and four closures. Bound, so that
 * `const { cancelled } = ctx` works as well as `ctx.cancelled()`.
 */
export class SourceContext implements WorkerContext {
  readonly #source: ContextSource
  #cancelled: (() => boolean) | undefined
  #throwIfCancelled: (() => void) | undefined
  #progress: WorkerContext['progress'] | undefined
  #notify: WorkerContext['notify'] | undefined

  constructor (source: ContextSource) {
    this.#source = source
  }

  get requestId (): RequestId { return this.#source.id }
  get method (): string { return this.#source.method }
  get era (): Era { return this.#source.era }
  get protocolVersion (): string { return this.#source.protocolVersion }
  get principal (): string | null { return this.#source.principal }
  get signal (): AbortSignal { return this.#source.signal }

  get cancelled (): () => boolean {
    const source = this.#source
    return (this.#cancelled ??= () => source.cancellation !== undefined)
  }

  get throwIfCancelled (): () => void {
    const source = this.#source
    return (this.#throwIfCancelled ??= () => {
      const cancellation = source.cancellation
      if (cancellation !== undefined) throw cancellation
    })
  }

  get progress (): WorkerContext['progress'] {
    const source = this.#source
    return (this.#progress ??= async (progress, total, message) => {
      source.progress(progress, total, message)
    })
  }

  get notify (): WorkerContext['notify'] {
    const source = this.#source
    return (this.#notify ??= async (level, data, logger) => {
      if (!LOGGING_LEVELS.includes(level)) throw new TypeError(`Unknown logging level: ${String(level)}`)
      source.log(level, data, logger)
    })
  }
}

/** The context of an in-process handler: the shared one, the Fastify request it runs for, and its asks. */
export class ExchangeContext extends SourceContext implements HandlerContext {
  readonly #exchange: Exchange
  #supports: HandlerContext['supports'] | undefined
  #input: HandlerContext['input'] | undefined
  #elicit: HandlerContext['elicit'] | undefined
  #sample: HandlerContext['sample'] | undefined
  #roots: HandlerContext['roots'] | undefined

  constructor (exchange: Exchange) {
    super(exchange)
    this.#exchange = exchange
  }

  get request (): FastifyRequest { return this.#exchange.request }
  get log (): FastifyBaseLogger { return this.#exchange.request.log }
  get clientCapabilities (): JsonObject { return this.#exchange.binding.clientCapabilities }

  get supports (): HandlerContext['supports'] {
    const { binding } = this.#exchange
    return (this.#supports ??= capability => supports(binding.clientCapabilities, capability))
  }

  get input (): HandlerContext['input'] {
    const exchange = this.#exchange
    return (this.#input ??= async requests => askClient(exchange, requests) as never)
  }

  get elicit (): HandlerContext['elicit'] {
    const exchange = this.#exchange
    return (this.#elicit ??= async params => await askOne(exchange, 'elicitation', elicitation(params)))
  }

  get sample (): HandlerContext['sample'] {
    const exchange = this.#exchange
    return (this.#sample ??= async params => await askOne(exchange, 'sampling', sampling(params)))
  }

  get roots (): HandlerContext['roots'] {
    const exchange = this.#exchange
    return (this.#roots ??= async () => (await askOne(exchange, 'roots', rootsList())).roots)
  }

  get state (): unknown { return this.#exchange.startedRound?.state }
  set state (value: unknown) { this.#exchange.round.state = value }
}

/** The request's input round, when its era and method let it ask the client. */
function roundOf (exchange: Exchange): InputRound {
  if (exchange.era !== 'modern') {
    throw new Error('Asking the client for input is implemented for 2026-07-28 requests only, not yet in the legacy era')
  }
  if (!INPUT_METHODS.includes(exchange.method)) throw new Error(`${exchange.method} cannot ask the client for input`)
  return exchange.round
}

/** The answers to `requests`, or the end of the round (`InputRequired`) when the request lacks some. */
function askClient (exchange: Exchange, requests: Record<string, InputRequest>): JsonObject {
  return roundOf(exchange).ask(requests, exchange.binding.clientCapabilities)
}

async function askOne<Request extends InputRequest> (exchange: Exchange, kind: string, request: Request): Promise<InputAnswer<Request>> {
  const round = roundOf(exchange)
  const key = round.nextKey(kind)
  return round.ask({ [key]: request }, exchange.binding.clientCapabilities)[key] as InputAnswer<Request>
}
