// OpenTelemetry first (only when asked for): it instruments Fastify as each instance is created.
const telemetry = process.env.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined && process.env.OTEL_EXPORTER_OTLP_ENDPOINT !== ''
  ? await (await import('./telemetry.js')).startTelemetry()
  : undefined
const { buildApp } = await import('./app.js')

const app = await buildApp(process.env, { logger: { level: process.env.LOG_LEVEL ?? 'info' } })
await app.listen({ host: process.env.HOST ?? '127.0.0.1', port: Number(process.env.PORT ?? 3000) })

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void app.close().then(async () => await telemetry?.shutdown())
  })
}
