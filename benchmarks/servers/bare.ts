/**
 * The ceiling: a bare Fastify route at POST /mcp that parses the JSON-RPC body with Fastify's own
 * parser and returns the same JSON-RPC result the plugin's `echo` returns. No MCP semantics at all:
 * no header checks, no validation, no dispatcher, no cancellation bookkeeping.
 */
import Fastify from 'fastify'
import { announce, HOST, loggerOption } from './listen.js'

interface EchoCall {
  id: string | number
  params: { arguments: { text: string } }
}

const app = Fastify({ logger: loggerOption() })

app.post<{ Body: EchoCall }>('/mcp', async request => {
  const { id, params } = request.body
  return { jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: params.arguments.text }] } }
})

await app.listen({ host: HOST, port: 0 })
announce(app.server, () => app.close())
