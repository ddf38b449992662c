import { Counter, Gauge, Histogram, Registry, type Metric } from 'prom-client'
import type { CancellationSource } from '../core/vocabulary.js'
import { MethodHistogram } from './method-histogram.js'
import type { InputKind } from '../protocol/input-requests.js'
import type { CancellationResult, InputOutcome, ListenerDropReason, LiveTaskStatus, NotificationKind, RefusalReason, RequestObserver, RequestOutcome, StreamResumeOutcome, TaskBound, TaskOutcome, ToolOutcome } from './observer.js'
import type { Era } from '../protocol/versions.js'
import type { AuthFailureReason } from '../core/errors.js'

// Request durations run from sub-millisecond answers to calls of minutes.
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600]
// Cancel-to-stop: a cooperative handler stops within a tick; a killed one at cancelTimeoutMs (5 s default).
const STOP_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** Tallies by their first and second label value (both bounded sets). */
type Tallies = Map<string, Map<string, Tally>>

/**
 * A count of one label set, kept as a plain number between scrapes and added to its prom-client child
 * when scraped: prom-client hashes the label values and allocates on every `inc`, which the request
 * path should not pay for.
 */
interface Tally {
  pending: number
  readonly child: { inc: (value: number) => void }
}

/** The observers counting into each registry: scraping any of their counters brings all of them up to date. */
const observersOf = new WeakMap<Registry, Set<PrometheusObserver>>()

function flushAll (registry: Registry): void {
  for (const observer of observersOf.get(registry) ?? []) observer.flush()
}

function tallyOf (tallies: Tallies, counter: Counter<string>, first: string, second: string): Tally {
  let inner = tallies.get(first)
  if (inner === undefined) tallies.set(first, inner = new Map())
  let tally = inner.get(second)
  if (tally === undefined) inner.set(second, tally = { pending: 0, child: counter.labels(first, second) })
  return tally
}

/**
 * The plugin's metrics (README, Metrics) on a prom-client Registry: the plugin's own, or the caller's (metrics
 * already there are reused, so two plugin instances on one registry count together instead of
 * throwing). Labels are bounded: method and tool only take served methods and registered tools.
 * Gauges move by deltas, so instances sharing a registry add up.
 */
export class PrometheusObserver implements RequestObserver {
  readonly registry: Registry
  readonly #requests: Counter<'method' | 'outcome'>
  readonly #duration: MethodHistogram
  readonly #tools: Counter<'tool' | 'outcome'>
  readonly #inFlight: Gauge
  readonly #cancellations: Counter<'source' | 'result'>
  readonly #rows: Gauge
  readonly #evictions: Counter
  readonly #cancelToStop: Histogram<'source'>
  readonly #streams: Gauge
  readonly #busErrors: Counter
  /** Made on the first report, so that a node without Redis does not export it. */
  #busConnected: Gauge | undefined
  readonly #refusals: Counter<'reason'>
  readonly #inputRequests: Counter<'kind' | 'outcome'>
  readonly #pendingInputs: Gauge
  readonly #liveTasks: Gauge<'status'>
  readonly #tasks: Counter<'outcome'>
  readonly #taskEvictions: Counter<'bound'>
  readonly #authFailures: Counter<'reason'>
  readonly #listeners: Gauge<'era'>
  readonly #notifications: Counter<'kind'>
  /** One child per kind, resolved once: a notification to each of a thousand listeners must not hash labels a thousand times. */
  readonly #notificationsOfKind = new Map<NotificationKind, { inc: () => void }>()
  readonly #listenersDropped: Counter<'reason'>
  readonly #streamResumes: Counter<'outcome'>
  readonly #streamsPaused: Gauge
  readonly #streamEventsDropped: Counter
  readonly #eventsDropped: Counter
  readonly #requestTallies: Tallies = new Map()
  readonly #toolTallies: Tallies = new Map()
  #inFlightDelta = 0

  constructor (registry: Registry = new Registry()) {
    this.registry = registry
    const registers = [registry]
    let observers = observersOf.get(registry)
    if (observers === undefined) observersOf.set(registry, observers = new Set())
    observers.add(this)
    // On the metrics that are tallied. A metric reused from another instance has the same hook.
    const collect = (): void => { flushAll(registry) }
    const reuse = <T extends Metric>(name: string, create: () => T): T => (registry.getSingleMetric(name) as T | undefined) ?? create()
    this.#requests = reuse('mcp_requests_total', () => new Counter({
      name: 'mcp_requests_total', help: 'JSON-RPC requests by method and outcome', labelNames: ['method', 'outcome'], registers, collect
    }))
    this.#duration = MethodHistogram.in(registry, 'mcp_request_duration_seconds', 'Time from dispatch to the end of a JSON-RPC request', DURATION_BUCKETS)
    this.#tools = reuse('mcp_tool_calls_total', () => new Counter({
      name: 'mcp_tool_calls_total', help: 'Calls of registered tools by outcome', labelNames: ['tool', 'outcome'], registers, collect
    }))
    this.#inFlight = reuse('mcp_in_flight_requests', () => new Gauge({
      name: 'mcp_in_flight_requests', help: 'JSON-RPC requests whose handler is running', registers, collect
    }))
    this.#cancellations = reuse('mcp_cancellations_total', () => new Counter({
      name: 'mcp_cancellations_total', help: 'Cancellations by source and result', labelNames: ['source', 'result'], registers
    }))
    this.#rows = reuse('mcp_cancellation_rows', () => new Gauge({
      name: 'mcp_cancellation_rows', help: 'Rows in the cancellation table', registers
    }))
    this.#evictions = reuse('mcp_cancellation_evictions_total', () => new Counter({
      name: 'mcp_cancellation_evictions_total', help: 'Cancellation rows evicted at the global cap', registers
    }))
    this.#cancelToStop = reuse('mcp_cancel_to_stop_seconds', () => new Histogram({
      name: 'mcp_cancel_to_stop_seconds', help: 'Time from a cancellation to its handler stopping (or being killed)', labelNames: ['source'], buckets: STOP_BUCKETS, registers
    }))
    this.#streams = reuse('mcp_sse_streams', () => new Gauge({
      name: 'mcp_sse_streams', help: 'Open SSE response streams', registers
    }))
    this.#busErrors = reuse('mcp_bus_errors_total', () => new Counter({
      name: 'mcp_bus_errors_total', help: 'Failures of the cross-node cancellation bus', registers
    }))
    this.#refusals = reuse('mcp_requests_refused_total', () => new Counter({
      name: 'mcp_requests_refused_total', help: 'JSON-RPC requests refused by a bound before their handler ran, by reason', labelNames: ['reason'], registers
    }))
    this.#inputRequests = reuse('mcp_input_requests_total', () => new Counter({
      name: 'mcp_input_requests_total', help: 'Answers of clients to input requests (elicitation, sampling, roots) by outcome', labelNames: ['kind', 'outcome'], registers
    }))
    this.#pendingInputs = reuse('mcp_pending_input_requests', () => new Gauge({
      name: 'mcp_pending_input_requests', help: 'Requests to the client (legacy era) waiting for their answer on this node', registers
    }))
    this.#liveTasks = reuse('mcp_tasks', () => new Gauge({
      name: 'mcp_tasks', help: 'Tasks running on this node by status', labelNames: ['status'], registers
    }))
    this.#tasks = reuse('mcp_tasks_total', () => new Counter({
      name: 'mcp_tasks_total', help: 'Tasks that ended, by outcome', labelNames: ['outcome'], registers
    }))
    this.#taskEvictions = reuse('mcp_task_evictions_total', () => new Counter({
      name: 'mcp_task_evictions_total', help: 'Ended tasks dropped before their ttl, by the bound that dropped them', labelNames: ['bound'], registers
    }))
    this.#authFailures = reuse('mcp_auth_failures_total', () => new Counter({
      name: 'mcp_auth_failures_total', help: 'Requests refused for their credentials, by reason', labelNames: ['reason'], registers
    }))
    this.#listeners = reuse('mcp_listeners', () => new Gauge({
      name: 'mcp_listeners', help: 'Streams listening for server events on this node, by era', labelNames: ['era'], registers
    }))
    this.#notifications = reuse('mcp_notifications_sent_total', () => new Counter({
      name: 'mcp_notifications_sent_total', help: 'Notifications sent on listening streams, by kind', labelNames: ['kind'], registers
    }))
    this.#listenersDropped = reuse('mcp_listeners_dropped_total', () => new Counter({
      name: 'mcp_listeners_dropped_total', help: 'Listening streams cut off, by reason', labelNames: ['reason'], registers
    }))
    this.#eventsDropped = reuse('mcp_events_dropped_total', () => new Counter({
      name: 'mcp_events_dropped_total', help: 'Server events dropped before leaving this node (over the per-second budget)', registers
    }))
    this.#streamResumes = reuse('mcp_stream_resumes_total', () => new Counter({
      name: 'mcp_stream_resumes_total', help: 'Resumable legacy streams: resumes served, resumes refused, streams nobody resumed in time', labelNames: ['outcome'], registers
    }))
    this.#streamsPaused = reuse('mcp_streams_paused', () => new Gauge({
      name: 'mcp_streams_paused', help: 'Resumable legacy streams on this node waiting for their client to resume them', registers
    }))
    this.#streamEventsDropped = reuse('mcp_stream_events_dropped_total', () => new Counter({
      name: 'mcp_stream_events_dropped_total', help: 'Events a resumable stream gave up to stay within its buffer (a resume no longer replays them)', registers
    }))
  }

  requestFinished (method: string, outcome: RequestOutcome, seconds: number): void {
    tallyOf(this.#requestTallies, this.#requests, method, outcome).pending++
    this.#duration.observe(method, seconds)
  }

  toolFinished (tool: string, outcome: ToolOutcome): void {
    tallyOf(this.#toolTallies, this.#tools, tool, outcome).pending++
  }

  /** Adds what was tallied since the last scrape to the prom-client metrics. */
  flush (): void {
    for (const tallies of [this.#requestTallies, this.#toolTallies]) {
      for (const inner of tallies.values()) {
        for (const tally of inner.values()) {
          if (tally.pending === 0) continue
          tally.child.inc(tally.pending)
          tally.pending = 0
        }
      }
    }
    if (this.#inFlightDelta !== 0) this.#inFlight.inc(this.#inFlightDelta)
    this.#inFlightDelta = 0
  }

  /** The plugin closed: what it counted stays in the registry, and the registry lets go of it. */
  close (): void {
    this.flush()
    observersOf.get(this.registry)?.delete(this)
  }

  cancelStopped (source: CancellationSource, seconds: number): void {
    this.#cancelToStop.labels(source).observe(seconds)
  }

  cancellation (source: CancellationSource, result: CancellationResult): void {
    this.#cancellations.labels(source, result).inc()
  }

  inFlight (delta: number): void {
    this.#inFlightDelta += delta
  }

  streams (delta: number): void {
    this.#streams.inc(delta)
  }

  rows (delta: number): void {
    this.#rows.inc(delta)
  }

  evicted (count: number): void {
    this.#evictions.inc(count)
  }

  requestRefused (reason: RefusalReason): void {
    this.#refusals.labels(reason).inc()
  }

  busConnected (connected: boolean): void {
    const registry = this.registry
    this.#busConnected ??= (registry.getSingleMetric('mcp_bus_connected') as Gauge | undefined) ?? new Gauge({
      name: 'mcp_bus_connected', help: 'Whether both Redis connections of this node are ready (1) or not (0); absent without Redis', registers: [registry]
    })
    this.#busConnected.set(connected ? 1 : 0)
  }

  busError (): void {
    this.#busErrors.inc()
  }

  inputAnswered (kind: InputKind, outcome: InputOutcome): void {
    this.#inputRequests.labels(kind, outcome).inc()
  }

  inputsPending (delta: number): void {
    this.#pendingInputs.inc(delta)
  }

  tasksLive (status: LiveTaskStatus, delta: number): void {
    this.#liveTasks.labels(status).inc(delta)
  }

  taskEnded (outcome: TaskOutcome): void {
    this.#tasks.labels(outcome).inc()
  }

  tasksEvicted (bound: TaskBound, count: number): void {
    this.#taskEvictions.labels(bound).inc(count)
  }

  authFailed (reason: AuthFailureReason): void {
    this.#authFailures.labels(reason).inc()
  }

  listeners (era: Era, delta: number): void {
    this.#listeners.labels(era).inc(delta)
  }

  notificationSent (kind: NotificationKind): void {
    let child = this.#notificationsOfKind.get(kind)
    if (child === undefined) this.#notificationsOfKind.set(kind, child = this.#notifications.labels(kind))
    child.inc()
  }

  listenerDropped (reason: ListenerDropReason): void {
    this.#listenersDropped.labels(reason).inc()
  }

  eventDropped (): void {
    this.#eventsDropped.inc()
  }

  streamResumed (outcome: StreamResumeOutcome): void {
    this.#streamResumes.labels(outcome).inc()
  }

  streamsPaused (delta: number): void {
    this.#streamsPaused.inc(delta)
  }

  streamEventsDropped (count: number): void {
    this.#streamEventsDropped.inc(count)
  }
}
