/**
 * A plugin node for tasks.ts: servers/plugin.ts (`echo`, logger off) plus two task tools, the task
 * limits raised out of the way (a million live or kept tasks per scope, ten million in all, and bytes to
 * match: every request of the benchmark comes from one scope, 127.0.0.1, so no task is dropped), a fixed `secret`, and `redis: BENCH_REDIS_URL` when
 * that is set (the Redis task store and bus), else the in-memory task store. Started with an IPC
 * channel (support/child-server.ts `spawnServer`), over which it reports and answers:
 *
 * - `hold {tag}` (task: 'optional'): an `abort` listener on `ctx.signal` (added before the task starts),
 *   then `ctx.startTask()`, then waits for the abort; the listener sends `aborted` with the instant
 *   (`performance.timeOrigin + performance.now()`, aligned with the benchmark's clock by `clock` pings)
 *   and the cancellation's source. A task of a client that cancels: the smallest a live task can be.
 * - `quick {n}` (task: 'optional'): `ctx.startTask()`, then answers `done <n>` at once.
 * - `memory`: the live `hold` handlers (past `startTask`, not aborted) and `process.memoryUsage()`
 *   after `global.gc()` (run with --expose-gc; `gc: false` without it).
 */
import type { FastifyInstance } from 'fastify'
import { servePlugin } from './plugin-app.js'

/** Known to every node of a benchmark run (at least 32 bytes). */
export const TASK_NODE_SECRET = 'bench-task-node-secret-0123456789abcdef'

export type TaskNodeCommand = { type: 'clock', seq: number } | { type: 'memory', seq: number }

export type TaskNodeMessage =
  | { type: 'clock', seq: number, at: number }
  | { type: 'aborted', tag: string, at: number, source: string }
  | { type: 'memory', seq: number, live: number, gc: boolean, usage: NodeJS.MemoryUsage }

if (process.send === undefined) throw new Error('task-node must be started with an IPC channel')

const now = (): number => performance.timeOrigin + performance.now()
const send = (message: TaskNodeMessage): void => { process.send!(message) }
const gc = (globalThis as { gc?: () => void }).gc

let live = 0

/** The cancellation's source (a RequestCancelledError's; read by shape, since BENCH_PLUGIN_ENTRY may load another copy of its class). */
function sourceOf (reason: unknown): string {
  const source = typeof reason === 'object' && reason !== null ? (reason as { source?: unknown }).source : undefined
  return typeof source === 'string' ? source : `foreign: ${String(reason)}`
}

process.on('message', (command: TaskNodeCommand) => {
  if (command.type === 'clock') send({ type: 'clock', seq: command.seq, at: now() })
  else if (command.type === 'memory') {
    void (async () => {
      // A few full collections, each after a turn of the event loop (finalizers, weak references).
      if (gc !== undefined) {
        for (let i = 0; i < 4; i++) {
          gc()
          await new Promise(resolve => setImmediate(resolve))
        }
      }
      send({ type: 'memory', seq: command.seq, live, gc: gc !== undefined, usage: process.memoryUsage() })
    })()
  }
})

const TAG_SCHEMA = { type: 'object', properties: { tag: { type: 'string' } }, required: ['tag'] }
const N_SCHEMA = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }

const redis = process.env.BENCH_REDIS_URL
await servePlugin({
  secret: TASK_NODE_SECRET,
  maxTasksPerScope: 1_000_000,
  maxKeptTasksPerScope: 1_000_000,
  maxTaskBytesPerScope: 2 ** 40,
  maxTasks: 10_000_000,
  maxTaskBytes: 2 ** 42,
  ...(redis === undefined || redis === '' ? {} : { redis })
}, (app: FastifyInstance) => {
  app.mcp.tool<{ tag: string }>({
    name: 'hold',
    description: 'A task that runs until it is cancelled',
    task: 'optional',
    inputSchema: TAG_SCHEMA,
    handler: async ({ tag }, ctx) => {
      let started = false
      const aborted = new Promise<void>(resolve => {
        ctx.signal.addEventListener('abort', () => {
          const at = now()
          const reason: unknown = ctx.signal.reason
          if (started) live--
          send({ type: 'aborted', tag, at, source: sourceOf(reason) })
          resolve()
        }, { once: true })
      })
      await ctx.startTask()
      if (!ctx.signal.aborted) {
        started = true
        live++
      }
      await aborted
      return { content: [{ type: 'text', text: `held ${tag}` }] }
    }
  })
  app.mcp.tool<{ n: number }>({
    name: 'quick',
    description: 'A task that ends as soon as it has started',
    task: 'optional',
    inputSchema: N_SCHEMA,
    handler: async ({ n }, ctx) => {
      await ctx.startTask()
      return { content: [{ type: 'text', text: `done ${n}` }] }
    }
  })
})
