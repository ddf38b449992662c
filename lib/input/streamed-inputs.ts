import type { Exchange } from '../lifecycle/exchange.js'
import type { RequestObserver } from '../observability/observer.js'
import { ErrorCode, invalidParams, isJsonObject, ProtocolError, type JsonObject, type RequestId } from '../core/jsonrpc.js'
import { sanitizeText } from '../core/sanitize.js'
import type { ServerRequestIds } from '../protocol/server-request-id.js'
import { fitsAnswer, type AnswerChecks } from './answer-checks.js'
import { kindOf, type InputRequest } from '../protocol/input-requests.js'
import { ClientInputError } from '../core/errors.js'
import type { NodeMessages } from '../cluster/node-messages.js'
import { endWork, type Operation } from '../observability/tracing.js'
import type { Span } from '@opentelemetry/api'

/** The topic of answers forwarded between nodes. */
const ANSWERS = 'answers'

/** A client's answer on its way to the node that asked: a result or a JSON-RPC error. */
export interface RelayedAnswer {
  id: string
  result?: unknown
  error?: unknown
}

interface PendingAsk {
  readonly request: InputRequest
  readonly resolve: (answer: JsonObject) => void
  readonly reject: (error: unknown) => void
  readonly timer: NodeJS.Timeout
  /** Its CLIENT span, when an SDK records the asking request. */
  readonly span: Span | undefined
}

export interface StreamedInputSettings {
  ids: ServerRequestIds
  /** How an answer that landed on another node reaches the one that waits; absent without Redis (the answer is dropped there). */
  messages: NodeMessages | undefined
  observer: RequestObserver
  /** The checks of what is asked and answered, shared with the plugin instance's other eras. */
  answers: AnswerChecks
  /** How long one ask waits for its answer. */
  timeoutMs: number
}

const NO_STREAM = 'Cannot ask the client: this response cannot carry a request to it ' +
  "(responseMode 'json', an Accept header without text/event-stream, or a 2025-03-26 batch)"

/**
 * Legacy-era requests to the client (2025-03-26 … 2025-11-25): each ask goes out on the stream of the
 * POST it serves, and the handler waits for the client's answer, which comes back in a new POST to any
 * node. The waits live here, on the node that asked, and nowhere else; the ids carry what the receiving
 * node needs to check an answer and to address it to this node (see `ServerRequestIds`).
 */
export class StreamedInputs {
  readonly #settings: StreamedInputSettings
  readonly #pending = new Map<string, PendingAsk>()

  constructor (settings: StreamedInputSettings) {
    this.#settings = settings
    settings.messages?.receive(ANSWERS, ({ id, result, error }) => {
      if (typeof id === 'string') this.deliver({ id, result, error })
    })
  }

  /**
   * Sends every request of `requests` on the exchange's stream at once and resolves to the answers by
   * key once all have come back. Rejects at once when the exchange is cancelled (its
   * `RequestCancelledError`), when the client answers one with an error, after the timeout, or with an
   * answer that breaks its result type or requested schema (`ClientInputError`), or with -32602 for an
   * answer of the wrong shape. `capabilities` undefined means unknown: the client is asked anyway.
   * `operation` is the asking request's trace: each ask gets a CLIENT span under it.
   */
  async ask (exchange: Exchange, requests: Record<string, InputRequest>, capabilities: JsonObject | undefined,
    operation?: Operation): Promise<JsonObject> {
    this.#settings.answers.asked(requests, capabilities)
    if (exchange.cancellation !== undefined) throw exchange.cancellation
    if (!exchange.sink.streams) throw new ClientInputError('unavailable', NO_STREAM)
    const keys = Object.keys(requests)
    const ids: string[] = []
    const answers = Promise.all(keys.map(key => new Promise<JsonObject>((resolve, reject) => {
      ids.push(this.#send(exchange, requests[key]!, resolve, reject, operation))
    })))
    // Cancellation, disconnect, lifetime and shutdown all abort the signal: the wait ends with them.
    const cancelled = (): void => { this.#endAll(ids, exchange.cancellation) }
    const { signal } = exchange
    signal.addEventListener('abort', cancelled, { once: true })
    // A handler that stopped waiting (it returned first) leaves nothing behind when its exchange ends.
    exchange.onFinish(() => { this.#endAll(ids, undefined) })
    try {
      const values = await answers
      return Object.fromEntries(keys.map((key, i) => [key, values[i]]))
    } finally {
      signal.removeEventListener('abort', cancelled)
      // One ask failed: its siblings are not waited for any more.
      this.#endAll(ids, undefined)
    }
  }

  /**
   * A legacy client's answer POST, in the scope it was sent in. The id is verified before anything
   * else (a forged, foreign or malformed one is a 400 and touches nothing); a genuine answer is delivered
   * here or forwarded to the node that asked, and a late one is ignored there. An answer of the wrong
   * shape is delivered (its ask fails with -32602) and refused with a 400. What only the question tells
   * (the requested schema) is checked where the ask waits: such an answer is a 202 that fails its ask.
   */
  receive (id: RequestId, result: unknown, error: unknown, scope: string): void {
    const parts = this.#settings.ids.verify(id, scope)
    if (parts === undefined) {
      throw new ProtocolError(ErrorCode.InvalidRequest, 'Invalid Request: the response answers no request this server made in this scope', { httpStatus: 400 })
    }
    const answer: RelayedAnswer = error === undefined ? { id: id as string, result } : { id: id as string, error }
    if (parts.node === this.#settings.ids.node) this.deliver(answer)
    else void this.#settings.messages?.send(parts.node, ANSWERS, { ...answer })
    if (error === undefined ? !fitsAnswer(parts.method, result) : !isErrorObject(error)) {
      throw new ProtocolError(ErrorCode.InvalidParams, `Invalid params: the response is not a valid answer to ${parts.method}`, { httpStatus: 400 })
    }
  }

  /** An answer for an ask of this node (received here, or forwarded by another node); ignored when the ask has ended. */
  deliver (answer: RelayedAnswer): void {
    const pending = this.#pending.get(answer.id)
    if (pending === undefined) return
    this.#remove(answer.id, pending)
    const { request, span } = pending
    if (answer.error === undefined) {
      try {
        pending.resolve(this.#settings.answers.received(request, 'result', answer.result))
        endWork(span, undefined, undefined, true)
      } catch (invalid) {
        endWork(span, String(ErrorCode.InvalidParams), 'The answer is not a valid result', true)
        pending.reject(invalid)
      }
    } else if (isErrorObject(answer.error)) {
      this.#settings.observer.inputAnswered(kindOf(request), 'declined')
      const { code, message } = answer.error
      const error = new ClientInputError('refused', `The client answered ${request.method} with error ${code}: ${sanitizeText(message, 200)}`)
      endWork(span, String(code), error.message, true)
      pending.reject(error)
    } else {
      this.#settings.observer.inputAnswered(kindOf(request), 'invalid')
      endWork(span, String(ErrorCode.InvalidParams), 'The answer is not a JSON-RPC error object', true)
      pending.reject(invalidParams(`error is not a JSON-RPC error object (answer to ${request.method})`))
    }
  }

  /** Registers one ask, sends it, and returns its id. */
  #send (exchange: Exchange, request: InputRequest, resolve: (answer: JsonObject) => void, reject: (error: unknown) => void,
    operation: Operation | undefined): string {
    const { ids, timeoutMs } = this.#settings
    const id = ids.mint(request.method, exchange.scope)
    const timer = setTimeout(() => {
      this.#end(id, new ClientInputError('timeout', `The client did not answer ${request.method} within ${timeoutMs} ms`))
    }, timeoutMs)
    timer.unref()
    const span = operation?.clientRequest(request.method)
    this.#pending.set(id, { request, resolve, reject, timer, span })
    this.#settings.observer.inputsPending(1)
    exchange.sink.send({ jsonrpc: '2.0', id, method: request.method, params: request.params ?? {} })
    return id
  }

  #endAll (ids: string[], reason: Error | undefined): void {
    for (const id of ids) this.#end(id, reason)
  }

  /** Ends a wait that got no answer: rejected with `reason` (counted as a timeout or a cancellation), or dropped. */
  #end (id: string, reason: Error | undefined): void {
    const pending = this.#pending.get(id)
    if (pending === undefined) return
    this.#remove(id, pending)
    const timedOut = reason instanceof ClientInputError && reason.failure === 'timeout'
    this.#settings.observer.inputAnswered(kindOf(pending.request), timedOut ? 'timeout' : 'cancelled')
    if (!timedOut) pending.span?.addEvent('mcp.request.cancelled')
    endWork(pending.span, timedOut ? 'timeout' : undefined, reason?.message)
    if (reason !== undefined) pending.reject(reason)
  }

  #remove (id: string, pending: PendingAsk): void {
    clearTimeout(pending.timer)
    this.#pending.delete(id)
    this.#settings.observer.inputsPending(-1)
  }
}

function isErrorObject (error: unknown): error is { code: number, message: string } {
  return isJsonObject(error) && Number.isInteger(error.code) && typeof error.message === 'string'
}
