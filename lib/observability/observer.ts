import type { AuthFailureReason } from '../core/errors.js'
import type { CancellationSource } from '../core/vocabulary.js'
import type { InputKind } from '../protocol/input-requests.js'
import type { Era } from '../protocol/versions.js'

export type RequestOutcome = 'ok' | 'error' | 'cancelled'
export type ToolOutcome = 'ok' | 'error' | 'cancelled' | 'killed'
/**
 * What became of a cancellation: `recorded`, `ignored` (nothing in flight here), `rejected` (quota full),
 * `invalid` (malformed), `forwarded` (nothing in flight here; sent to the other nodes).
 */
export type CancellationResult = 'recorded' | 'ignored' | 'rejected' | 'invalid' | 'forwarded'

export type InputOutcome = 'answered' | 'declined' | 'cancelled' | 'timeout' | 'invalid'
/** How a task ended: `expired` when it outran its lifetime, `lost` when its node died. */
export type TaskOutcome = 'completed' | 'failed' | 'cancelled' | 'expired' | 'lost'
export type LiveTaskStatus = 'working' | 'input_required'
/** Which bound dropped an ended task: its scope's own quota, or a cap of the whole store. */
export type TaskBound = 'scope' | 'global'
/** What a notification on a listening stream announced (`mcp_notifications_sent_total{kind}`). */
export type NotificationKind = 'tools_list_changed' | 'prompts_list_changed' | 'resources_list_changed' | 'resource_updated' | 'task_status'
/** Why a listening stream was cut off: its client stopped reading, its session ended, another node holds its session's stream. */
export type ListenerDropReason = 'slow' | 'revoked' | 'superseded'
/** What became of a resumable stream: a client resumed it, a resume was refused, or nobody resumed it within its window. */
export type StreamResumeOutcome = 'resumed' | 'refused' | 'expired'
/** Which bound refused a request before its handler ran (`mcp_requests_refused_total{reason}`). */
export type RefusalReason = 'scope_in_flight'

/**
 * What the request path reports as it happens. The Prometheus exporter implements it; with metrics
 * off the no-op one does, so the path never asks whether anyone is listening.
 */
export interface RequestObserver {
  /** A JSON-RPC request ended (answered, failed, or cancelled). `method` is a served method or 'other'. */
  requestFinished: (method: string, outcome: RequestOutcome, seconds: number) => void
  /** A request was refused by a bound before its handler ran (it also ends as an error). */
  requestRefused: (reason: RefusalReason) => void
  /** A call of a registered tool ended. */
  toolFinished: (tool: string, outcome: ToolOutcome) => void
  /** A cancelled handler settled (or was killed) this long after its cancellation. */
  cancelStopped: (source: CancellationSource, seconds: number) => void
  cancellation: (source: CancellationSource, result: CancellationResult) => void
  inFlight: (delta: number) => void
  streams: (delta: number) => void
  rows: (delta: number) => void
  evicted: (count: number) => void
  busError: () => void
  /** This node's Redis connections became ready (true) or one of them was lost (false). */
  busConnected: (connected: boolean) => void
  /** An input request ended: its answer arrived (counted once), or (legacy era) its wait was cancelled or timed out. */
  inputAnswered: (kind: InputKind, outcome: InputOutcome) => void
  /** Legacy-era requests to the client waiting for their answer on this node. */
  inputsPending: (delta: number) => void
  /** Tasks running on this node, by status. */
  tasksLive: (status: LiveTaskStatus, delta: number) => void
  taskEnded: (outcome: TaskOutcome) => void
  /** Ended tasks dropped before their ttl to keep a bound. */
  tasksEvicted: (bound: TaskBound, count: number) => void
  /** A request was refused for its credentials (none, a token that does not verify, missing scopes, …). */
  authFailed: (reason: AuthFailureReason) => void
  /** Streams listening for server events on this node, by era. */
  listeners: (era: Era, delta: number) => void
  /** A notification went out on a listening stream. */
  notificationSent: (kind: NotificationKind) => void
  listenerDropped: (reason: ListenerDropReason) => void
  /** A server event was dropped before leaving this node: more distinct events than a second's budget waited. */
  eventDropped: () => void
  /** A `Last-Event-ID` resume was served or refused, or a paused stream's window passed. */
  streamResumed: (outcome: StreamResumeOutcome) => void
  /** Resumable streams on this node without a client (waiting for a resume). */
  streamsPaused: (delta: number) => void
  /** Events a resumable stream's full buffer gave up (a resume no longer replays them). */
  streamEventsDropped: (count: number) => void
}

const ignore = (): void => {}

export const noopObserver: RequestObserver = {
  requestFinished: ignore,
  requestRefused: ignore,
  toolFinished: ignore,
  cancelStopped: ignore,
  cancellation: ignore,
  inFlight: ignore,
  streams: ignore,
  rows: ignore,
  evicted: ignore,
  busError: ignore,
  busConnected: ignore,
  inputAnswered: ignore,
  inputsPending: ignore,
  tasksLive: ignore,
  taskEnded: ignore,
  tasksEvicted: ignore,
  authFailed: ignore,
  listeners: ignore,
  notificationSent: ignore,
  listenerDropped: ignore,
  eventDropped: ignore,
  streamResumed: ignore,
  streamsPaused: ignore,
  streamEventsDropped: ignore
}
