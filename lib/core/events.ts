import { channel } from 'node:diagnostics_channel'
import type { RequestId } from './jsonrpc.js'
import type { CancellationSource } from './vocabulary.js'

/** Published once per cancellation: a client's notification, a disconnect, a lifetime or server cancel. */
export interface RequestCancelledEvent {
  requestId: RequestId
  scope: string
  reason: string | null
  source: CancellationSource
}

/** Published by every cleanup pass (the janitor's and explicit `cleanup` calls). */
export interface CleanupEvent {
  removed: number
  inFlightRemoved: number
}

/** Published once per task that ends, on the node that ran it. */
export interface TaskEndedEvent {
  taskId: string
  scope: string
  status: 'completed' | 'failed' | 'cancelled'
}

export const requestCancelledChannel = channel('mcp:request:cancelled')
export const taskEndedChannel = channel('mcp:task:ended')
export const cleanupChannel = channel('mcp:cancellation:cleanup')
