/**
 * One node of the cross-node latency benchmark: the plugin with the Redis of `benchRedis()` and a `wait`
 * tool that runs until its `ctx.signal` aborts. Over the IPC channel it tells the benchmark when a call
 * started and the instant its signal aborted (`performance.timeOrigin + performance.now()`, a clock
 * the parent can compare with its own after the `clock` exchange), and answers `clock` pings.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify from 'fastify'
import mcpCancellation from '../../lib/index.js'
import { announce, HOST, loggerOption } from './listen.js'
import { benchRedis } from './bench-redis.js'

export type NodeMessage =
  | { type: 'started', id: string | number }
  | { type: 'aborted', id: string | number, at: number }
  | { type: 'clock', seq: number, at: number }

const { redis } = benchRedis()
if (redis === undefined) throw new Error('cluster-node needs BENCH_REDIS_URL (a URL or a Cluster\'s comma-separated seeds) or BENCH_REDIS_SENTINELS')
if (process.send === undefined) throw new Error('cluster-node must be started with an IPC channel')

const now = (): number => performance.timeOrigin + performance.now()
const send = (message: NodeMessage): void => { process.send!(message) }

process.on('message', (message: { type?: string, seq?: number }) => {
  if (message.type === 'clock') send({ type: 'clock', seq: message.seq ?? 0, at: now() })
})

const app = Fastify({ logger: loggerOption() })
await app.register(mcpCancellation, { serverInfo: { name: 'bench-node', version: '1.0.0' }, redis })

app.mcp.tool<{ ms: number }>({
  name: 'wait',
  description: 'Waits ms milliseconds or until cancelled',
  inputSchema: { type: 'object', properties: { ms: { type: 'integer', minimum: 0 } }, required: ['ms'] },
  async handler ({ ms }, ctx) {
    ctx.signal.addEventListener('abort', () => { send({ type: 'aborted', id: ctx.requestId, at: now() }) }, { once: true })
    send({ type: 'started', id: ctx.requestId })
    await sleep(ms, undefined, { signal: ctx.signal }).catch(() => {})
    return { content: [{ type: 'text', text: 'waited' }] }
  }
})

await app.listen({ host: HOST, port: 0 })
announce(app.server, async () => {
  await app.close()
  process.disconnect?.()
})
