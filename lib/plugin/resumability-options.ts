import { InvalidOptionError } from '../core/errors.js'
import { positiveInteger } from './option-values.js'

/** `resumability`: resumable legacy (2025-11-25) response streams, on any node (docs/resumability.md). */
export interface ResumabilityOptions {
  /**
   * How long a stream whose client left waits for a resume before its request is cancelled as a
   * disconnect (with `disconnectCancels`). Default 30 000 ms.
   */
  windowMs?: number | undefined
  /** The `retry` the priming event sends: how long a client waits before it reconnects. At most a third of `windowMs`. Default 1 000 ms (or a third of the window, when smaller). */
  retryMs?: number | undefined
  /** Events a stream keeps for a resume; beyond it a superseded progress, then the oldest progress or log, is given up (counted). Default 256. */
  maxBufferedEvents?: number | undefined
  /** Bytes a stream keeps for a resume, likewise. Default 256 KiB. */
  maxBufferedBytes?: number | undefined
  /** Streams without a client one scope may hold on a node; beyond it its oldest one is given up (its request cancelled). Default 16. */
  maxPausedPerScope?: number | undefined
  /** Streams without a client a node holds in all, likewise. Default 10 000. */
  maxPaused?: number | undefined
  /**
   * SSE polling for every resumable stream: a connection open this long is closed (after the priming
   * event, never losing an event), and the client resumes after `retry`; for proxies that cut idle or
   * long connections. Default: off.
   */
  pollIntervalMs?: number | undefined
}

export type ResumabilitySettings = Required<{ [K in keyof ResumabilityOptions]: NonNullable<ResumabilityOptions[K]> }> & {
  /** False with `resumability: false`: legacy streams carry no ids, and a disconnect cancels at once. */
  enabled: boolean
}

/** `true` or omitted: on with the defaults; `false`: off. `pollIntervalMs` 0 is off as well. */
export function resolveResumability (resumability: unknown): ResumabilitySettings {
  if (resumability !== undefined && typeof resumability !== 'boolean' && (typeof resumability !== 'object' || resumability === null)) {
    throw new InvalidOptionError('resumability', 'must be a boolean or an object')
  }
  const options: ResumabilityOptions = typeof resumability === 'object' && resumability !== null ? resumability : {}
  const windowMs = positiveInteger('resumability.windowMs', options.windowMs, 30_000, 3)
  const retryMs = positiveInteger('resumability.retryMs', options.retryMs, Math.min(1000, Math.floor(windowMs / 3)))
  // A client that waits `retry` before reconnecting is then always in time, with two retries to spare.
  if (retryMs > Math.floor(windowMs / 3)) throw new InvalidOptionError('resumability.retryMs', `must be at most a third of resumability.windowMs (${Math.floor(windowMs / 3)})`)
  return {
    enabled: resumability !== false,
    windowMs,
    retryMs,
    maxBufferedEvents: positiveInteger('resumability.maxBufferedEvents', options.maxBufferedEvents, 256),
    maxBufferedBytes: positiveInteger('resumability.maxBufferedBytes', options.maxBufferedBytes, 262_144),
    maxPausedPerScope: positiveInteger('resumability.maxPausedPerScope', options.maxPausedPerScope, 16),
    maxPaused: positiveInteger('resumability.maxPaused', options.maxPaused, 10_000),
    pollIntervalMs: positiveInteger('resumability.pollIntervalMs', options.pollIntervalMs, 0, 0)
  }
}
