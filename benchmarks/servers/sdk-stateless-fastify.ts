/**
 * Supplementary: the same SDK 1.x stateless handler as sdk-stateless.ts (a new `McpServer` and
 * `StreamableHTTPServerTransport` per request, `enableJsonResponse: true`), hosted in a bare Fastify
 * route instead of Express. It separates the cost of the SDK from the cost of Express.
 */
import Fastify from 'fastify'
import { announce, HOST } from './listen.js'
import { handle } from './sdk-handler.js'

const app = Fastify({ logger: false })

app.post('/mcp', async (request, reply) => {
  reply.hijack()
  await handle(request.raw, reply.raw, request.body)
})

await app.listen({ host: HOST, port: 0 })
announce(app.server, () => app.close())
