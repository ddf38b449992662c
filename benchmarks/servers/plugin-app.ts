/**
 * What every plugin benchmark server runs: `fastify-mcp-cancellation` with the given options and the
 * demo's `echo` tool (as in example/app.ts), and nothing else but what a server's `setup` adds.
 *
 * BENCH_PLUGIN_ENTRY=/path/to/other/checkout/lib/index.ts (or a built dist/index.js) benchmarks another
 * copy of the plugin instead of this checkout's lib/, e.g. to compare two commits.
 */
import { pathToFileURL } from 'node:url'
import Fastify, { type FastifyInstance } from 'fastify'
import type { McpCancellationOptions } from '../../lib/index.js'
import { announce, HOST, loggerOption } from './listen.js'

type PluginModule = typeof import('../../lib/index.js')

/** `setup` registers what a server adds to `echo` (e.g. servers/plugin-ask.ts's `ask` tool). */
export async function servePlugin (options: McpCancellationOptions = {}, setup?: (app: FastifyInstance) => void): Promise<void> {
  const entry = process.env.BENCH_PLUGIN_ENTRY
  const { default: mcpCancellation } = (entry === undefined || entry === ''
    ? await import('../../lib/index.js')
    : await import(pathToFileURL(entry).href)) as PluginModule

  const app = Fastify({ logger: loggerOption() })
  await app.register(mcpCancellation, { serverInfo: { name: 'bench', version: '1.0.0' }, ...options })
  app.mcp.tool<{ text: string }>({
    name: 'echo',
    description: 'Returns its text',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    handler: ({ text }) => ({ content: [{ type: 'text', text }] })
  })
  setup?.(app)
  await app.listen({ host: HOST, port: 0 })
  announce(app.server, () => app.close())
}
