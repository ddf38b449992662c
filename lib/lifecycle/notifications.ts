import type { JsonObject } from '../core/jsonrpc.js'
import { LOGGING_LEVELS, type LoggingLevel } from '../protocol/era.js'
import type { Exchange } from './exchange.js'

export type ProgressToken = string | number

/**
 * What a request sends its client before its response: `notifications/progress`, coalesced to at most
 * one per `progressIntervalMs` (the latest value wins), and `notifications/message`, filtered by the
 * level the request asked for. Both go to the exchange's sink of the moment (the HTTP response, or
 * the task it became) and stop with the exchange: nothing is sent once it is cancelled or has ended.
 * Made when a handler first reports (most never do).
 */
export class Notifications {
  readonly #exchange: Exchange
  readonly #intervalMs: number
  readonly #token: ProgressToken | undefined
  /** Index in LOGGING_LEVELS below which log notifications are dropped. */
  readonly #logThreshold: number
  #last = -Infinity
  #sentAt = -Infinity
  #pending: JsonObject | undefined
  #timer: NodeJS.Timeout | undefined

  constructor (exchange: Exchange, progressIntervalMs: number) {
    this.#exchange = exchange
    this.#intervalMs = progressIntervalMs
    const meta = exchange.params._meta
    const token = typeof meta === 'object' && meta !== null ? (meta as JsonObject).progressToken : undefined
    this.#token = typeof token === 'string' || (typeof token === 'number' && Number.isFinite(token)) ? token : undefined
    // Stateless legacy requests cannot carry a level set by logging/setLevel, so every level goes out;
    // modern requests get messages only when they asked, at or above the level they asked for.
    const { binding } = exchange
    this.#logThreshold = binding.era === 'legacy'
      ? 0
      : binding.logLevel === undefined ? Infinity : LOGGING_LEVELS.indexOf(binding.logLevel)
    const stop = (): void => { this.#stop() }
    exchange.onCancel(stop)
    exchange.onFinish(stop)
  }

  /**
   * Queues `notifications/progress` when the request asked for it (a task always does: it shows
   * progress in its status message) and `progress` grows. A faster reporter has its intermediate values
   * coalesced into the latest. False when the value is dropped.
   */
  progress (progress: number, total?: number, message?: string): boolean {
    const exchange = this.#exchange
    if ((this.#token === undefined && !exchange.detached) || !this.#open || !Number.isFinite(progress) || progress <= this.#last) return false
    this.#last = progress
    const params: JsonObject = { progressToken: this.#token ?? null, progress }
    if (total !== undefined) params.total = total
    if (message !== undefined) params.message = message
    this.#pending = params
    const wait = this.#sentAt + this.#intervalMs - Date.now()
    if (wait <= 0) this.flushProgress()
    else this.#timer ??= setTimeout(() => { this.flushProgress() }, wait)
    return true
  }

  /** Sends the coalesced progress now; the dispatcher calls it before the final response. */
  flushProgress (): void {
    // A coalescing timer that fell behind a busy event loop must not send the next value early.
    clearTimeout(this.#timer)
    this.#timer = undefined
    const params = this.#pending
    if (params === undefined) return
    this.#pending = undefined
    this.#sentAt = Date.now()
    this.#exchange.sink.send({ jsonrpc: '2.0', method: 'notifications/progress', params })
  }

  /** Sends `notifications/message` at `level` when the request's era and level allow it; false when dropped. */
  log (level: LoggingLevel, data: unknown, logger?: string): boolean {
    if (!this.#open || LOGGING_LEVELS.indexOf(level) < this.#logThreshold) return false
    const params: JsonObject = { level, data }
    if (logger !== undefined) params.logger = logger
    return this.#exchange.sink.send({ jsonrpc: '2.0', method: 'notifications/message', params })
  }

  get #open (): boolean {
    return !this.#exchange.cancelled && this.#exchange.alive
  }

  #stop (): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#pending = undefined
  }
}
