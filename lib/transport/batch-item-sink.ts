import type { JsonRpcResponse } from '../core/jsonrpc.js'
import type { ResponseSink } from '../core/vocabulary.js'

/** The spec's own transports cap a batch at 100 messages; so do we. */
export const MAX_BATCH_SIZE = 100

/** One request's place in a batch response: holds its response, drops notifications (a batch answers as one JSON array). */
export class BatchItemSink implements ResponseSink {
  response: JsonRpcResponse | undefined
  /** The batch's HTTP request tells the registry when its client leaves; a slot never knows. */
  readonly clientGone = false
  readonly streams = false
  #ended = false

  get writable (): boolean {
    return !this.#ended
  }

  send (): boolean {
    return false
  }

  respond (message: JsonRpcResponse): void {
    if (this.#ended) return
    this.#ended = true
    this.response = message
  }

  abandon (): void {
    this.#ended = true
  }
}
