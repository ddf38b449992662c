import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { Registry } from 'prom-client'

/**
 * The metrics route's `onRequest` hook, as a route's options take one: Fastify's callback form, or an
 * async function (see RouteShorthandOptions in node_modules/fastify/types/route.d.ts).
 */
export type MetricsGuard = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void | Promise<unknown>

/** `GET /metrics`: the Prometheus text exposition of the plugin's registry, optionally behind a guard. */
export function registerMetricsRoute (fastify: FastifyInstance, registry: Registry, path: string, guard: MetricsGuard | undefined): void {
  fastify.get(path, { onRequest: guard === undefined ? [] : [guard] }, async (_request, reply) => {
    const body = await registry.metrics()
    return await reply.type(registry.contentType).send(body)
  })
}
