/**
 * The words the layers share. This module imports nothing of the project but the JSON-RPC shapes, so a
 * layer that needs one of these types never imports another layer for it (transport, cancellation
 * and server would otherwise import each other in a cycle).
 */
import type { JsonRpcNotification, JsonRpcRequest, JsonRpcResponse } from './jsonrpc.js'

/** What cancelled a request: the client's notification, its disconnect, the lifetime bound, the server, or `tasks/cancel`. */
export type CancellationSource = 'client' | 'disconnect' | 'lifetime' | 'server' | 'task'

/** `'auto'` answers JSON until a handler emits a notification, then SSE; `'json'` never streams; `'sse'` always does. */
export type ResponseMode = 'auto' | 'json' | 'sse'

/** The Piscina pool that runs tools registered with `worker`. */
export interface WorkerPoolOptions {
  /** Default: Piscina's (about 1.5 × the cores). */
  maxThreads?: number | undefined
  /** Default 0: no thread runs until a worker tool is called. */
  minThreads?: number | undefined
  /** A thread idle this long exits. Default 30 000 ms. */
  idleTimeoutMs?: number | undefined
}

/** Messages addressed to one node of the cluster (over the Redis bus), by topic: never broadcast. */
export interface NodeMessages {
  /**
   * Publishes `message` to `node` only. Resolves true once that node's subscription has it, false when
   * nobody received it (the node is not listening, or the bus is down: counted); never rejects.
   */
  send: (node: string, topic: string, message: Record<string, unknown>) => Promise<boolean>
  /** Hands this node's messages of `topic` to `handler`. */
  receive: (topic: string, handler: (message: Record<string, unknown>) => void) => void
}

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
}
