/**
 * The official SDK 1.x stateless pattern, as in @modelcontextprotocol/sdk's
 * examples/server/simpleStatelessStreamableHttp: `createMcpExpressApp()` (Express 5, Host-header
 * DNS-rebinding guard, `express.json()`), and for every POST a new `McpServer` with its tools and a new
 * `StreamableHTTPServerTransport({ sessionIdGenerator: undefined })`, both closed when the response closes.
 * Differences from the example: `enableJsonResponse: true` (a JSON answer, as the plugin gives for `echo`),
 * only the `echo` tool is registered, and the per-request console.log is gone.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js'
import { announce, HOST } from './listen.js'
import { handle } from './sdk-handler.js'

const app = createMcpExpressApp()
app.post('/mcp', (req: IncomingMessage & { body?: unknown }, res: ServerResponse) => handle(req, res, req.body))

const server = app.listen(0, HOST, () => {
  announce(server, () => new Promise<void>((resolve, reject) => {
    server.close((error?: Error) => { if (error === undefined) resolve(); else reject(error) })
    server.closeAllConnections()
  }))
})
