/**
 * An OpenTelemetry SDK in memory for the tracing tests: spans finished into an InMemorySpanExporter,
 * metrics collected on demand, the W3C propagator and AsyncLocalStorage context registered globally,
 * and everything unregistered again at the end of the test (the API's globals outlive a test).
 */
import { context, metrics, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core'
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader, type ResourceMetrics } from '@opentelemetry/sdk-metrics'
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import type { Teardown } from './teardown.js'

export interface InMemoryOtel {
  /** The spans finished so far. */
  spans: () => ReadableSpan[]
  /** Collects the metrics recorded so far. */
  collect: () => Promise<ResourceMetrics[]>
  reset: () => void
}

/** Registers an in-memory SDK (traces and, unless `metrics` is false, metrics) until the end of `t`. */
export function installOtel (t: Teardown, options: { traces?: boolean, metrics?: boolean } = {}): InMemoryOtel {
  const exporter = new InMemorySpanExporter()
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE)
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 })
  const meterProvider = new MeterProvider({ readers: [reader] })
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }))
  if (options.traces !== false) trace.setGlobalTracerProvider(tracerProvider)
  if (options.metrics !== false) metrics.setGlobalMeterProvider(meterProvider)
  t.teardown(async () => {
    trace.disable()
    metrics.disable()
    propagation.disable()
    context.disable()
    await tracerProvider.shutdown()
    await meterProvider.shutdown()
  })
  return {
    spans: () => exporter.getFinishedSpans(),
    collect: async () => {
      await reader.forceFlush()
      return metricExporter.getMetrics()
    },
    reset: () => {
      exporter.reset()
      metricExporter.reset()
    }
  }
}
