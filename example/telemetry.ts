/**
 * OpenTelemetry for the demo, loaded only when `OTEL_EXPORTER_OTLP_ENDPOINT` is set: the Node SDK with
 * an OTLP/HTTP trace exporter and metric exporter (`OTEL_EXPORTER_OTLP_PROTOCOL` `http/protobuf`, the
 * default, or `http/json`; the exporters read the endpoint and headers from the environment themselves),
 * `service.name` from `OTEL_SERVICE_NAME`, and `@fastify/otel` for the HTTP spans. The plugin needs
 * none of this: it records through `@opentelemetry/api` whatever SDK the application starts.
 *
 * It must start before Fastify is created: `@fastify/otel` instruments each Fastify instance as it is
 * initialised.
 */
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { NodeSDK } from '@opentelemetry/sdk-node'
import { PeriodicExportingMetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics'
import type { SpanExporter } from '@opentelemetry/sdk-trace-base'

export interface TelemetryEnv {
  OTEL_EXPORTER_OTLP_PROTOCOL?: string | undefined
  /** Milliseconds between metric exports (default 60 000). */
  OTEL_METRIC_EXPORT_INTERVAL?: string | undefined
}

export interface Telemetry {
  /** Flushes what is buffered and stops the SDK. */
  shutdown: () => Promise<void>
}

async function exporters (protocol: string): Promise<{ traces: SpanExporter, metrics: PushMetricExporter }> {
  switch (protocol) {
    case 'http/protobuf': {
      const [{ OTLPTraceExporter }, { OTLPMetricExporter }] = await Promise.all([
        import('@opentelemetry/exporter-trace-otlp-proto'), import('@opentelemetry/exporter-metrics-otlp-proto')
      ])
      return { traces: new OTLPTraceExporter(), metrics: new OTLPMetricExporter() }
    }
    case 'http/json': {
      const [{ OTLPTraceExporter }, { OTLPMetricExporter }] = await Promise.all([
        import('@opentelemetry/exporter-trace-otlp-http'), import('@opentelemetry/exporter-metrics-otlp-http')
      ])
      return { traces: new OTLPTraceExporter(), metrics: new OTLPMetricExporter() }
    }
    default:
      throw new Error(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported by the demo: use http/protobuf or http/json`)
  }
}

export async function startTelemetry (env: TelemetryEnv = process.env): Promise<Telemetry> {
  const { traces, metrics } = await exporters(env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf')
  const sdk = new NodeSDK({
    traceExporter: traces,
    metricReaders: [new PeriodicExportingMetricReader({
      exporter: metrics,
      exportIntervalMillis: Number(env.OTEL_METRIC_EXPORT_INTERVAL ?? 60_000)
    })],
    // Logs go to stdout (pino), not to the collector.
    logRecordProcessors: [],
    instrumentations: [new FastifyOtelInstrumentation({ registerOnInitialization: true })]
  })
  sdk.start()
  return { shutdown: async () => { await sdk.shutdown() } }
}
