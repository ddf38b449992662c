/**
 * The per-request work of the SDK 1.x stateless pattern (@modelcontextprotocol/sdk's
 * examples/server/simpleStatelessStreamableHttp), shared by sdk-stateless.ts (Express, as in the
 * example) and sdk-stateless-fastify.ts. Not a server itself.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import * as z from 'zod/v4'

/** The same tool as the plugin's `echo`. */
export function getServer (): McpServer {
  const server = new McpServer({ name: 'bench', version: '1.0.0' })
  server.registerTool('echo', {
    description: 'Returns its text',
    inputSchema: { text: z.string() }
  }, async ({ text }) => ({ content: [{ type: 'text', text }] }))
  return server
}

/** The per-request body of the example's POST /mcp handler. */
export async function handle (req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void> {
  const server = getServer()
  try {
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
    await server.connect(transport)
    await transport.handleRequest(req, res, body)
    res.on('close', () => {
      void transport.close()
      void server.close()
    })
  } catch (error) {
    console.error('Error handling MCP request:', error)
    if (!res.headersSent) {
      res.writeHead(500, { 'content-type': 'application/json' })
        .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null }))
    }
  }
}
