/**
 * servers/plugin.ts plus `redis: BENCH_REDIS_URL`: the plugin with the Redis store, default options
 * otherwise, and the same `echo` tool. Compared with `plugin` it shows what the Redis store costs a
 * request that is never cancelled (nothing should go to Redis on that path).
 */
import { pathToFileURL } from 'node:url'
import Fastify from 'fastify'
import { announce, HOST, loggerOption } from './listen.js'

type PluginModule = typeof import('../../lib/index.js')

const redis = process.env.BENCH_REDIS_URL
if (redis === undefined || redis === '') throw new Error('plugin-redis needs BENCH_REDIS_URL')

const entry = process.env.BENCH_PLUGIN_ENTRY
const { default: mcpCancellation } = (entry === undefined || entry === ''
  ? await import('../../lib/index.js')
  : await import(pathToFileURL(entry).href)) as PluginModule

const app = Fastify({ logger: loggerOption() })
await app.register(mcpCancellation, { serverInfo: { name: 'bench', version: '1.0.0' }, redis })

app.mcp.tool<{ text: string }>({
  name: 'echo',
  description: 'Returns its text',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  handler: ({ text }) => ({ content: [{ type: 'text', text }] })
})

await app.listen({ host: HOST, port: 0 })
announce(app.server, () => app.close())
