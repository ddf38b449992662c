/**
 * servers/plugin.ts under an OpenTelemetry SDK, set up as a production service would be: every span
 * recorded (AlwaysOn sampling) and exported in batches by the OTLP/HTTP protobuf exporter, metrics
 * exported every second, both to a sink in this process that reads and drops what it is sent (so the
 * export's encoding and sending count against the server). The batch queue is large enough that no
 * span is dropped at the throughput measured. `GET /otel-exports` flushes and answers how many export
 * requests the sink has received.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { context, metrics, propagation, trace } from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics'
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { HOST } from './listen.js'
import { servePlugin } from './plugin-app.js'

let exports = 0
const sink = createServer((request, response) => {
  request.resume()
  request.on('end', () => {
    exports++
    response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
  })
})
await new Promise<void>(resolve => sink.listen(0, HOST, resolve))
sink.unref()
const collector = `http://${HOST}:${(sink.address() as AddressInfo).port}`

const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: `${collector}/v1/traces` }), {
    maxQueueSize: 65_536, maxExportBatchSize: 4096, scheduledDelayMillis: 200
  })]
})
const meterProvider = new MeterProvider({
  readers: [new PeriodicExportingMetricReader({ exporter: new OTLPMetricExporter({ url: `${collector}/v1/metrics` }), exportIntervalMillis: 1000 })]
})
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
propagation.setGlobalPropagator(new W3CTraceContextPropagator())
trace.setGlobalTracerProvider(tracerProvider)
metrics.setGlobalMeterProvider(meterProvider)

await servePlugin({}, app => {
  app.get('/otel-exports', async () => {
    await tracerProvider.forceFlush()
    await meterProvider.forceFlush()
    return { exports }
  })
  app.addHook('onClose', async () => {
    await tracerProvider.shutdown()
    await meterProvider.shutdown()
  })
})
