/**
 * The ceiling: a bare Fastify route at POST /mcp that parses the JSON-RPC body with Fastify's own
 * parser and returns the same JSON-RPC result the plugin's `echo` returns, byte for byte, for either
 * era's request: a legacy (2025-11-25) call gets the plain result; a call whose `_meta` claims
 * 2026-07-28 gets the modern one, which adds `resultType` and the server's `serverInfo` in `_meta`
 * (the plugin servers' `serverInfo`, see plugin-app.ts). No MCP semantics at all: no header checks, no
 * validation, no dispatcher, no cancellation bookkeeping.
 */
import Fastify from 'fastify'
import { announce, HOST, loggerOption } from './listen.js'

interface EchoCall {
  id: string | number
  params: { arguments: { text: string }, _meta?: Record<string, unknown> }
}

const SERVER_INFO = { name: 'bench', version: '1.0.0' }

const app = Fastify({ logger: loggerOption() })

app.post<{ Body: EchoCall }>('/mcp', async request => {
  const { id, params } = request.body
  const content = [{ type: 'text', text: params.arguments.text }]
  return params._meta?.['io.modelcontextprotocol/protocolVersion'] === '2026-07-28'
    ? { jsonrpc: '2.0', id, result: { content, resultType: 'complete', _meta: { 'io.modelcontextprotocol/serverInfo': SERVER_INFO } } }
    : { jsonrpc: '2.0', id, result: { content } }
})

await app.listen({ host: HOST, port: 0 })
announce(app.server, () => app.close())
