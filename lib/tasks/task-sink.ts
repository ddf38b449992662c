import type { JsonObject, JsonRpcNotification, JsonRpcRequest, JsonRpcResponse } from '../core/jsonrpc.js'
import type { ResponseSink } from '../core/vocabulary.js'

/**
 * Where a request that became a task answers: its record, not an HTTP response. The extension delivers
 * no notifications for tasks: progress becomes the task's status message, the rest is dropped. The
 * response ends the task (completed or failed), abandoning it cancels it.
 */
export class TaskSink implements ResponseSink {
  readonly clientGone = false
  readonly streams = false
  readonly #end: (response: JsonRpcResponse | undefined) => void
  readonly #progress: (params: JsonObject) => void
  #ended = false

  constructor (end: (response: JsonRpcResponse | undefined) => void, progress: (params: JsonObject) => void) {
    this.#end = end
    this.#progress = progress
  }

  get writable (): boolean {
    return !this.#ended
  }

  send (message: JsonRpcNotification | JsonRpcRequest): boolean {
    if (this.#ended || message.method !== 'notifications/progress') return false
    this.#progress(message.params as JsonObject)
    return true
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
