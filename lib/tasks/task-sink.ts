import type { JsonRpcResponse } from '../protocol/jsonrpc.js'
import type { ResponseSink } from '../vocabulary.js'

/**
 * Where a request that became a task answers: its record, not an HTTP response. Notifications have
 * nowhere to go (the extension delivers none for tasks); the response ends the task (completed or
 * failed), abandoning it cancels it.
 */
export class TaskSink implements ResponseSink {
  readonly clientGone = false
  readonly streams = false
  readonly #end: (response: JsonRpcResponse | undefined) => void
  #ended = false

  constructor (end: (response: JsonRpcResponse | undefined) => void) {
    this.#end = end
  }

  get writable (): boolean {
    return !this.#ended
  }

  send (): boolean {
    return false
  }

  respond (message: JsonRpcResponse): void {
    this.#finish(message)
  }

  abandon (): void {
    this.#finish(undefined)
  }

  #finish (response: JsonRpcResponse | undefined): void {
    if (this.#ended) return
    this.#ended = true
    this.#end(response)
  }
}
