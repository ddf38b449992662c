/**
 * The `plugin` server (servers/plugin.ts) with `metrics: false`: no registry, no /metrics route, the
 * no-op observer on the request path. Compared with `plugin` (metrics on, its own registry) by
 * benchmarks/metrics-cost.ts. Honours BENCH_PLUGIN_ENTRY like servers/plugin.ts.
 */
import { pathToFileURL } from 'node:url'
import Fastify from 'fastify'
import { announce, HOST, loggerOption } from './listen.js'

type PluginModule = typeof import('../../lib/index.js')

const entry = process.env.BENCH_PLUGIN_ENTRY
const { default: mcpCancellation } = (entry === undefined || entry === ''
  ? await import('../../lib/index.js')
  : await import(pathToFileURL(entry).href)) as PluginModule

const app = Fastify({ logger: loggerOption() })
await app.register(mcpCancellation, { serverInfo: { name: 'bench', version: '1.0.0' }, metrics: false })

app.mcp.tool<{ text: string }>({
  name: 'echo',
  description: 'Returns its text',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  handler: ({ text }) => ({ content: [{ type: 'text', text }] })
})

await app.listen({ host: HOST, port: 0 })
announce(app.server, () => app.close())
