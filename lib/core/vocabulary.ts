/**
 * The words every layer shares. This module imports nothing of the project but the JSON-RPC shapes, so
 * a layer that needs one of these types never imports another layer for it.
 */
import type { JsonRpcNotification, JsonRpcRequest, JsonRpcResponse } from './jsonrpc.js'

/** What cancelled a request: the client's notification, its disconnect, the lifetime bound, the server, or `tasks/cancel`. */
export type CancellationSource = 'client' | 'disconnect' | 'lifetime' | 'server' | 'task'

/** A resumable stream lost its connection (its request runs on), or a client resumed it. */
export type StreamState = 'paused' | 'resumed'

/** Where an exchange's notifications and final response go: an HTTP response, or a slot of a batch. */
export interface ResponseSink {
  readonly writable: boolean
  /** The client went away (before anything was written, if asked at the start). */
  readonly clientGone: boolean
  /** Messages can go out before the response (it is, or may become, an SSE stream). */
  readonly streams: boolean
  /** A notification, or a request to the client, before the response; dropped (false) when it cannot go out. */
  send: (message: JsonRpcNotification | JsonRpcRequest) => boolean
  /** The final response; `status` is the HTTP status when it is the whole body (not a stream's last event). */
  respond: (message: JsonRpcResponse, status?: number) => void
  abandon: () => void
  /** A resumable stream: its client's leaving pauses it (for a resume) instead of cancelling the request. */
  readonly resumable?: boolean
  /** SSE polling: ends the connection, not the stream (the client resumes it); nothing where the response cannot resume. */
  closeStream?: () => void
  /** Calls `handler` each time its resumable stream pauses or resumes. */
  onStreamState?: (handler: (state: StreamState) => void) => void
}
