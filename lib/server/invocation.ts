import type { FastifyBaseLogger, FastifyRequest } from 'fastify'
import type { JsonObject } from '../core/jsonrpc.js'
import type { LoggingLevel } from '../protocol/era.js'
import type { InputRequest } from '../protocol/input-requests.js'
import type { Operation } from '../observability/tracing.js'
import { sessionCapabilities } from '../identity/session-codec.js'
import type { Exchange } from '../lifecycle/exchange.js'
import { Notifications } from '../lifecycle/notifications.js'
import type { StreamedInputs } from '../input/streamed-inputs.js'
import { HandlerMisuseError, type InputRequired } from '../core/errors.js'
import { INPUT_METHODS, type InputRound, type InputRounds } from '../input/input-round.js'
import type { Tasks } from '../tasks/tasks.js'
import { SourceContext, type HandlerContext, type InputSource, type NotificationTarget } from './context.js'

/** What every invocation of a plugin instance shares: made once, one reference per request. */
export interface InvocationServices {
  progressIntervalMs: number
  /** modern input rounds: where a handler's asks start one, when the request did not continue one. */
  rounds: InputRounds
  /** Legacy-era requests to the client, sent on the request's stream. */
  asks: StreamedInputs
  /** What a tool call becomes when its handler starts a task. */
  tasks: Tasks
}

/**
 * One request being served in this process: its exchange, and what its handler may use, chosen for
 * this request by the dispatcher: where its asks go (the task it became, its modern input round,
 * or its legacy stream), where its progress and logs go, and its trace. The handler sees it through
 * its context (`context`), which is made on first use: most methods need none.
 */
export class Invocation implements InputSource, NotificationTarget {
  readonly exchange: Exchange
  /** The request as OpenTelemetry sees it, when an SDK listens. */
  readonly operation: Operation | undefined
  readonly #services: InvocationServices
  #round: InputRound | undefined
  #notifications: Notifications | undefined
  #context: InProcessContext | undefined

  /** `round`: the modern input round the request continues (it carried `inputResponses` or `requestState`). */
  constructor (exchange: Exchange, services: InvocationServices, round: InputRound | undefined, operation: Operation | undefined) {
    this.exchange = exchange
    this.#services = services
    this.#round = round
    this.operation = operation
  }

  /** The handler context of an in-process handler. */
  get context (): InProcessContext {
    return (this.#context ??= new InProcessContext(this))
  }

  /** What the client declared: per request in the modern era, in the session id in the legacy era (unknown without one). */
  get clientCapabilities (): JsonObject | undefined {
    const { exchange } = this
    if (exchange.era === 'modern') return exchange.binding.clientCapabilities
    const session = exchange.request.mcpSessionId
    return session === null ? undefined : sessionCapabilities(session)
  }

  get state (): unknown { return this.#round?.state }
  set state (value: unknown) { this.#inputRound.state = value }

  ask (requests: Record<string, InputRequest>): JsonObject | Promise<JsonObject> {
    const { exchange } = this
    const { tasks, asks } = this.#services
    if (!INPUT_METHODS.includes(exchange.method)) throw new HandlerMisuseError(`${exchange.method} cannot ask the client for input (only tools/call, prompts/get and resources/read can)`)
    if (tasks.isTask(exchange)) return tasks.ask(exchange, requests, exchange.binding.clientCapabilities)
    if (exchange.era === 'modern') return this.#inputRound.ask(requests, exchange.binding.clientCapabilities)
    return asks.ask(exchange, requests, this.clientCapabilities, this.operation)
  }

  async startTask (): Promise<void> {
    await this.#services.tasks.start(this.exchange)
  }

  /** The result that ends the request's input round with `input_required` (its handler asked for what the request did not carry). */
  inputRequired (signal: InputRequired): JsonObject {
    return this.#inputRound.inputRequired(signal)
  }

  progress (progress: number, total?: number, message?: string): boolean {
    return this.#notificationsOf().progress(progress, total, message)
  }

  log (level: LoggingLevel, data: unknown, logger?: string): boolean {
    return this.#notificationsOf().log(level, data, logger)
  }

  /** SSE polling: the response's connection ends, its stream goes on (nothing where it cannot resume). */
  closeStream (): void {
    this.flushProgress()
    this.exchange.sink.closeStream?.()
  }

  /** Sends the coalesced progress now; the dispatcher calls it before the final response. */
  flushProgress (): void {
    this.#notifications?.flushProgress()
  }

  /** The request's input round, started on the first ask when the request continues none. */
  get #inputRound (): InputRound {
    const { method, params, scope } = this.exchange
    return (this.#round ??= this.#services.rounds.start(method, params, scope))
  }

  #notificationsOf (): Notifications {
    return (this.#notifications ??= new Notifications(this.exchange, this.#services.progressIntervalMs))
  }
}

/** The context of an in-process handler: the shared one, and the Fastify request it runs for. */
export class InProcessContext extends SourceContext implements HandlerContext {
  readonly #request: FastifyRequest

  constructor (invocation: Invocation) {
    super(invocation.exchange, invocation, invocation)
    this.#request = invocation.exchange.request
  }

  get request (): FastifyRequest { return this.#request }
  get log (): FastifyBaseLogger { return this.#request.log }
}
