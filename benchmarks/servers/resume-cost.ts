/**
 * The server of resume.ts `event-cost`: two plugin servers in one process, alike but for
 * `resumability` (its defaults on the first, `false` on the second), so that ids and buffering are all
 * that differs between them (fresh processes differ from each other by more than that on this host).
 * Both have progress never coalesced (`progressIntervalMs` 0) and the tool `burst {count}`: progress
 * 1..count as fast as it can, then `burst <count>`. Prints the first server's port (the contract of
 * servers/listen.ts) and answers over its IPC channel `ports` (both ports) and `clock`. Loads the plugin
 * from BENCH_PLUGIN_ENTRY when set, as servers/plugin-app.ts does.
 */
import { pathToFileURL } from 'node:url'
import Fastify, { type FastifyInstance } from 'fastify'
import { BURST_TOOL } from '../support/resume-fixture.js'
import { announce, HOST, loggerOption } from './listen.js'

type PluginModule = typeof import('../../lib/index.js')

export type ResumeCostCommand = { type: 'ports', seq: number } | { type: 'clock', seq: number }
export type ResumeCostMessage = { type: 'ports', seq: number, on: number, off: number } | { type: 'clock', seq: number, at: number }

if (process.send === undefined) throw new Error('resume-cost must be started with an IPC channel')

const entry = process.env.BENCH_PLUGIN_ENTRY
const { default: mcpCancellation } = (entry === undefined || entry === ''
  ? await import('../../lib/index.js')
  : await import(pathToFileURL(entry).href)) as PluginModule

async function serve (resumability: boolean): Promise<FastifyInstance> {
  const app = Fastify({ logger: loggerOption() })
  await app.register(mcpCancellation, { serverInfo: { name: 'bench', version: '1.0.0' }, progressIntervalMs: 0, resumability })
  app.mcp.tool<{ count: number }>({
    name: BURST_TOOL,
    description: 'Reports progress 1..count at once, then answers',
    inputSchema: { type: 'object', properties: { count: { type: 'integer', minimum: 0 } }, required: ['count'] },
    async handler ({ count }, ctx) {
      for (let i = 1; i <= count; i++) await ctx.progress(i, count)
      return { content: [{ type: 'text', text: `${BURST_TOOL} ${count}` }] }
    }
  })
  await app.listen({ host: HOST, port: 0 })
  return app
}

const portOf = (app: FastifyInstance): number => {
  const address = app.server.address()
  if (address === null || typeof address === 'string') throw new Error('expected a TCP server')
  return address.port
}

const on = await serve(true)
const off = await serve(false)
process.on('message', (command: ResumeCostCommand) => {
  const send = (message: ResumeCostMessage): void => { process.send!(message) }
  if (command.type === 'ports') send({ type: 'ports', seq: command.seq, on: portOf(on), off: portOf(off) })
  else send({ type: 'clock', seq: command.seq, at: performance.timeOrigin + performance.now() })
})
announce(on.server, async () => {
  await Promise.all([on.close(), off.close()])
  process.disconnect()
})
