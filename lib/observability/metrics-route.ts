import type { FastifyInstance, onRequestHookHandler } from 'fastify'
import type { Registry } from 'prom-client'

/** `GET /metrics`: the Prometheus text exposition of the plugin's registry, optionally behind a guard. */
export function registerMetricsRoute (fastify: FastifyInstance, registry: Registry, path: string, guard: onRequestHookHandler | undefined): void {
  fastify.get(path, { onRequest: guard === undefined ? [] : [guard] }, async (_request, reply) => {
    const body = await registry.metrics()
    return await reply.type(registry.contentType).send(body)
  })
}
