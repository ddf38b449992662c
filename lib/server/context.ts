import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import { HandlerMisuseError, type RequestCancelledError } from '../core/errors.js'
import { isLoggingLevel, type LoggingLevel } from '../protocol/era.js'
import {
  elicitation, rootsList, sampling, supports,
  type ClientCapability, type CreateMessageRequestParams, type CreateMessageResult, type ElicitRequestParams, type ElicitResult,
  type InputAnswer, type InputRequest, type Root
} from '../protocol/input-requests.js'
import type { JsonObject, RequestId } from '../core/jsonrpc.js'
import type { Era } from '../protocol/versions.js'
import type { McpPrincipal } from '../identity/principal.js'

/**
 * What a handler gets as its last argument wherever it runs: in this process or in a worker thread
 * (a worker tool gets exactly this).
 */
export interface WorkerContext {
  readonly requestId: RequestId
  readonly method: string
  readonly era: Era
  readonly protocolVersion: string
  /** Who the request speaks for (see the `auth` option), or null; never its token. */
  readonly principal: McpPrincipal | null
  /** Aborts with a `RequestCancelledError` when the request is cancelled; hand it to fetch, timers, streams, child processes. */
  readonly signal: AbortSignal
  /** Polling style: true once the request is cancelled (in a worker, even inside a loop that never yields). */
  readonly cancelled: () => boolean
  /** Throws the `RequestCancelledError` once cancelled; the dispatcher treats it as cancellation, not as an error. */
  readonly throwIfCancelled: () => void
  /** `notifications/progress`, sent only when the request carried a progressToken and `progress` grows; in a task, its `statusMessage`. */
  readonly progress: (progress: number, total?: number, message?: string) => Promise<void>
  /** `notifications/message` to the client, filtered by the request's log level. */
  readonly notify: (level: LoggingLevel, data: unknown, logger?: string) => Promise<void>
  /**
   * SSE polling (legacy era, 2025-11-25 clients, `resumability` on): ends the response's connection now
   * (after its priming event) but not its stream; the client reconnects after `retry` and gets what the
   * handler sent meanwhile, then the result. Does nothing where the response cannot resume (JSON only,
   * an older revision, the modern era, a task).
   */
  readonly closeStream: () => void
  /**
   * The client capabilities the request declares (modern `_meta`), or those its legacy session
   * carries (what `initialize` declared, as far as asking goes); undefined when unknown (a legacy
   * request without a session).
   */
  readonly clientCapabilities: JsonObject | undefined
  /**
   * Whether the client declared a capability (`'elicitation'` is form mode; `'elicitation.url'`,
   * `'sampling.tools'` the features); true when its capabilities are unknown (the server asks anyway).
   */
  readonly supports: (capability: ClientCapability) => boolean
  /**
   * Asks the client several things at once; resolves to the answers by your keys. In the modern era
   * a request that does not carry the answers yet ends its round with `input_required`, and the handler
   * runs again when the client retries with them (code before the ask runs once per round). In the
   * legacy era the requests go out on the response's SSE stream and the handler waits for the answers
   * (rejected at once on cancellation, with a `ClientInputError` after `inputTimeoutMs`). Available
   * in `tools/call`, `prompts/get` and `resources/read`; a kind the client did not declare is -32021.
   */
  readonly input: <Requests extends Record<string, InputRequest>>(requests: Requests) => Promise<{ [K in keyof Requests]: InputAnswer<Requests[K]> }>
  /** Asks the user (elicitation); `input` with an automatic key. */
  readonly elicit: (params: ElicitRequestParams) => Promise<ElicitResult>
  /** Asks the client's model for a completion (sampling); `input` with an automatic key. */
  readonly sample: (params: CreateMessageRequestParams) => Promise<CreateMessageResult>
  /** Asks the client's roots; `input` with an automatic key. */
  readonly roots: () => Promise<Root[]>
  /** A JSON value of the handler's, carried (sealed) from one modern input round to the next; undefined in the first. */
  state: unknown
  /**
   * Makes a `tools/call` of a tool registered with `task` a task (tasks extension (modern era)), when the
   * client declared the extension: the client gets a `CreateTaskResult` now, and the handler goes on,
   * its result kept for `tasks/get`; asks from then on are the task's (`input_required` until
   * `tasks/update` answers them). Otherwise it does nothing and the call goes on as it was. Asks made
   * before it are ordinary multi-round-trip requests.
   */
  readonly startTask: () => Promise<void>
}

/**
 * What every tool, resource, prompt and completion handler running in this process gets: the worker
 * context and the Fastify request with its logger, which cannot cross into a worker thread.
 */
export interface HandlerContext extends WorkerContext {
  readonly request: FastifyRequest
  readonly log: FastifyBaseLogger
}

/** The request a context speaks for: an exchange in this process, or its mirror in a worker thread. */
export interface RequestFacts {
  readonly id: RequestId
  readonly method: string
  readonly era: Era
  readonly protocolVersion: string
  readonly principal: McpPrincipal | null
  readonly signal: AbortSignal
  /** The abort reason once cancelled. */
  readonly cancellation: RequestCancelledError | undefined
}

/** Where a context's progress and log messages go: the request's `Notifications` in this process, the main thread from a worker. */
export interface NotificationTarget {
  progress: (progress: number, total?: number, message?: string) => unknown
  log: (level: LoggingLevel, data: unknown, logger?: string) => unknown
  closeStream: () => unknown
}

/** Where a context's asks go: the exchange's input round or stream in this process, the main thread from a worker. */
export interface InputSource {
  readonly clientCapabilities: JsonObject | undefined
  /** The answers by key; in the modern era, throws `InputRequired` when the request does not carry them all yet. */
  ask: (requests: Record<string, InputRequest>) => JsonObject | Promise<JsonObject>
  state: unknown
  startTask: () => Promise<void>
}

/**
 * The one implementation of the handler context. Everything is read from the request on access and each
 * function is made (bound) on first use: most handlers touch one or two members, and a context built
 * eagerly would cost every request an AbortController and a handful of closures. Bound, so that
 * `const { cancelled } = ctx` works as well as `ctx.cancelled()`.
 */
export class SourceContext implements WorkerContext {
  readonly #source: RequestFacts
  readonly #notifications: NotificationTarget
  readonly #inputs: InputSource
  /** How many automatic keys of each kind this run used: the same sequence on every round. */
  #keys: Map<string, number> | undefined
  #cancelled: (() => boolean) | undefined
  #throwIfCancelled: (() => void) | undefined
  #progress: WorkerContext['progress'] | undefined
  #notify: WorkerContext['notify'] | undefined
  #closeStream: WorkerContext['closeStream'] | undefined
  #supports: WorkerContext['supports'] | undefined
  #input: WorkerContext['input'] | undefined
  #elicit: WorkerContext['elicit'] | undefined
  #sample: WorkerContext['sample'] | undefined
  #roots: WorkerContext['roots'] | undefined
  #startTask: WorkerContext['startTask'] | undefined

  constructor (source: RequestFacts, notifications: NotificationTarget, inputs: InputSource) {
    this.#source = source
    this.#notifications = notifications
    this.#inputs = inputs
  }

  get requestId (): RequestId { return this.#source.id }
  get method (): string { return this.#source.method }
  get era (): Era { return this.#source.era }
  get protocolVersion (): string { return this.#source.protocolVersion }
  get principal (): McpPrincipal | null { return this.#source.principal }
  get signal (): AbortSignal { return this.#source.signal }
  get clientCapabilities (): JsonObject | undefined { return this.#inputs.clientCapabilities }
  get state (): unknown { return this.#inputs.state }
  set state (value: unknown) { this.#inputs.state = value }

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
    const notifications = this.#notifications
    return (this.#progress ??= async (progress, total, message) => {
      notifications.progress(progress, total, message)
    })
  }

  get notify (): WorkerContext['notify'] {
    const notifications = this.#notifications
    return (this.#notify ??= async (level, data, logger) => {
      if (!isLoggingLevel(level)) throw new HandlerMisuseError(`Unknown logging level: ${String(level)}`)
      notifications.log(level, data, logger)
    })
  }

  get closeStream (): WorkerContext['closeStream'] {
    const notifications = this.#notifications
    return (this.#closeStream ??= () => { notifications.closeStream() })
  }

  get supports (): WorkerContext['supports'] {
    const inputs = this.#inputs
    return (this.#supports ??= capability => supports(inputs.clientCapabilities, capability))
  }

  get input (): WorkerContext['input'] {
    const inputs = this.#inputs
    return (this.#input ??= async requests => await inputs.ask(requests) as never)
  }

  get elicit (): WorkerContext['elicit'] {
    return (this.#elicit ??= async params => await this.#askOne('elicitation', elicitation(params)))
  }

  get sample (): WorkerContext['sample'] {
    return (this.#sample ??= async params => await this.#askOne('sampling', sampling(params)))
  }

  get roots (): WorkerContext['roots'] {
    return (this.#roots ??= async () => (await this.#askOne('roots', rootsList())).roots)
  }

  get startTask (): WorkerContext['startTask'] {
    const inputs = this.#inputs
    return (this.#startTask ??= async () => { await inputs.startTask() })
  }

  /** One ask under the next automatic key of its kind (deterministic, so each round asks under the same keys). */
  async #askOne<Request extends InputRequest> (kind: string, request: Request): Promise<InputAnswer<Request>> {
    const keys = this.#keys ??= new Map()
    const count = (keys.get(kind) ?? 0) + 1
    keys.set(kind, count)
    const key = `${kind}-${count}`
    return (await this.#inputs.ask({ [key]: request }))[key] as InputAnswer<Request>
  }
}
