import { InputRequired } from '../core/errors.js'
import { invalidParams, isJsonObject, type JsonObject } from '../core/jsonrpc.js'
import { digestOf, type RequestStateCodec, type RoundBinding, type RoundState } from '../protocol/request-state.js'
import type { RequestObserver } from '../observability/observer.js'
import type { InputKind } from '../protocol/input-requests.js'
import type { AnswerChecks } from './answer-checks.js'
import { kindOf, type InputRequest } from '../protocol/input-requests.js'

/** Answers by key, each with the digest of the question it answers. */
type SealedAnswers = Record<string, [question: string, answer: JsonObject]>

/** The methods the modern era lets answer `input_required`. */
export const INPUT_METHODS: readonly string[] = ['tools/call', 'prompts/get', 'resources/read']

/**
 * The input side of one modern request (tools/call, prompts/get, resources/read): the answers it
 * carries, from earlier rounds (sealed in its `requestState`) and from its `inputResponses`, and what its
 * handler asks. The handler runs again on every round (the replay model), so asks are matched by key.
 */
export class InputRound {
  readonly #binding: RoundBinding
  readonly #rounds: InputRounds
  /** Answers of earlier rounds by key, with the digest of the question each answers; checked then, sealed since. */
  readonly #earlier: SealedAnswers
  /** This request's `inputResponses`, checked when their key is asked. */
  readonly #responses: JsonObject
  /** The digests of the questions the previous round asked, by key (what `inputResponses` answer). */
  readonly #asked: Record<string, string> | undefined
  /** Rounds completed before this request. */
  readonly round: number
  /** `ctx.state`: carried, sealed, into the next round. */
  state: unknown
  /** The answers the handler used in this run, kept for the next round. */
  readonly #used: SealedAnswers = {}
  /** The kinds of the answers of `#used` that arrived with this request (not from earlier rounds). */
  readonly #arrived: InputKind[] = []
  /** The questions of this run that have no answer yet. */
  #missing: Record<string, string> = {}

  constructor (rounds: InputRounds, binding: RoundBinding, earlier: SealedAnswers, responses: JsonObject,
    asked: Record<string, string> | undefined, round: number, state: unknown) {
    this.#rounds = rounds
    this.#binding = binding
    this.#earlier = earlier
    this.#responses = responses
    this.#asked = asked
    this.round = round
    this.state = state
  }

  /**
   * The answers to `requests` by key, when the request carries them all; otherwise throws
   * `InputRequired` with the missing ones. A kind the client did not declare is -32021 (HTTP 400); a
   * malformed answer -32602, one that breaks its result type or requested schema a `ClientInputError`.
   */
  ask (requests: Record<string, InputRequest>, capabilities: JsonObject): JsonObject {
    this.#rounds.asked(requests, capabilities)
    const answers: JsonObject = {}
    const missing: Record<string, InputRequest> = {}
    for (const [key, request] of Object.entries(requests)) {
      // An answer counts for the very question it answered: a key that now names another question (the
      // handler asked in another order) is asked again rather than answered with something else.
      const question = digestOf(request)
      const earlier = Object.hasOwn(this.#earlier, key) ? this.#earlier[key] : undefined
      let answer: JsonObject | undefined
      if (earlier?.[0] === question) {
        answer = earlier[1]
      } else if (Object.hasOwn(this.#responses, key) && (this.#asked === undefined || this.#asked[key] === question)) {
        answer = this.#rounds.arrived(request, key, this.#responses[key])
        this.#arrived.push(kindOf(request))
      }
      if (answer === undefined) {
        missing[key] = request
        this.#missing[key] = question
      } else {
        answers[key] = answer
        this.#used[key] = [question, answer]
      }
    }
    if (Object.keys(missing).length > 0) throw new InputRequired(missing)
    return answers
  }

  /** The `input_required` result ending this round: the missing asks and a fresh, sealed state. */
  inputRequired (signal: InputRequired): JsonObject {
    return { resultType: 'input_required', inputRequests: signal.requests, requestState: this.#rounds.seal(this) }
  }

  /** What the next round's state carries, and the kinds of the answers that arrived with this request. */
  get sealable (): { binding: RoundBinding, answers: SealedAnswers, asked: Record<string, string>, arrived: readonly InputKind[] } {
    return { binding: this.#binding, answers: { ...this.#earlier, ...this.#used }, asked: this.#missing, arrived: this.#arrived }
  }
}

export interface InputRoundSettings {
  codec: RequestStateCodec
  observer: RequestObserver
  /** The checks of what is asked and answered, shared with the plugin instance's other eras. */
  answers: AnswerChecks
  /** How long a sealed state stays valid. */
  ttlMs: number
  /** Most `input_required` rounds one request may go through. */
  maxRounds: number
}

/** Opens the rounds of arriving requests and seals the states of ending ones (one per plugin instance). */
export class InputRounds {
  readonly #settings: InputRoundSettings

  constructor (settings: InputRoundSettings) {
    this.#settings = settings
  }

  /**
   * The round a retried request continues, checked before its handler runs: `inputResponses` must be an
   * object, and a `requestState` must be one this server sealed for this very request and scope, and
   * unexpired; anything else is -32602. Undefined when the request carries neither (the common case:
   * a round is started only if the handler asks).
   */
  open (method: string, params: JsonObject, scope: string): InputRound | undefined {
    const { inputResponses, requestState } = params
    if (inputResponses === undefined && requestState === undefined) return undefined
    if (inputResponses !== undefined && !isJsonObject(inputResponses)) throw invalidParams('inputResponses must be an object')
    const binding = bindingOf(method, params, scope)
    if (requestState === undefined) return new InputRound(this, binding, {}, inputResponses ?? {}, undefined, 0, undefined)
    const state = this.#settings.codec.open(requestState, binding)
    if (state === undefined) throw invalidParams('requestState is invalid, expired, or was issued for another request')
    return new InputRound(this, binding, state.answers as SealedAnswers, inputResponses ?? {}, state.asked, state.round, state.state)
  }

  /** A first round, for a handler that asks. */
  start (method: string, params: JsonObject, scope: string): InputRound {
    return new InputRound(this, bindingOf(method, params, scope), {}, {}, undefined, 0, undefined)
  }

  /** Checks what a handler asks, before any answer is looked at (see `AnswerChecks.asked`). */
  asked (requests: Record<string, InputRequest>, capabilities: JsonObject): void {
    this.#settings.answers.asked(requests, capabilities)
  }

  /** A client's answer as it arrives (counted once: later rounds take it from the state), checked. */
  arrived (request: InputRequest, key: string, answer: unknown): JsonObject {
    return this.#settings.answers.received(request, `inputResponses.${key}`, answer)
  }

  /**
   * The state of the next round. A round that would pass `maxInputRounds` or `maxRequestStateBytes` is
   * -32602: both grow with what the client sends (its retries, its answers, and ctx.state, which
   * handlers fill with what the client answered), so the server cannot tell a handler's excess from a
   * client's, and a client must never be able to make a node log errors. The message says which part
   * is too large; the answers that arrived with the request count as `invalid`.
   */
  seal (round: InputRound): string {
    const { codec, maxRounds, observer, ttlMs } = this.#settings
    if (round.round + 1 > maxRounds) throw invalidParams(`the request would need more than maxInputRounds (${maxRounds}) input rounds`)
    const { binding, answers, asked, arrived } = round.sealable
    const next: RoundState = { ...binding, round: round.round + 1, expiresAt: Date.now() + ttlMs, answers, asked, state: round.state }
    const sealed = codec.seal(next)
    if (sealed !== undefined) return sealed
    for (const kind of arrived) observer.inputAnswered(kind, 'invalid')
    const tooLarge = codec.seal({ ...next, answers: {} }) !== undefined
      ? 'the answers in inputResponses'
      : codec.seal({ ...next, answers: {}, state: undefined }) !== undefined ? "the handler's ctx.state" : 'the request (its name or URI)'
    throw invalidParams(`${tooLarge} would make the requestState larger than maxRequestStateBytes (${codec.maxBytes} bytes)`)
  }
}

/** What a state binds a round to: the method, the tool/prompt name or resource URI, the arguments, the scope. */
function bindingOf (method: string, params: JsonObject, scope: string): RoundBinding {
  const name = method === 'resources/read' ? params.uri : params.name
  return { method, name: typeof name === 'string' ? name : '', digest: digestOf(params.arguments), scope }
}
