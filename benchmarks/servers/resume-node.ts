/**
 * A node of resume.ts `replay`: servers/plugin.ts (`echo`) with `redis: BENCH_REDIS_URL`, the `secret`
 * every node shares (an event id minted on one verifies on the others), progress never coalesced
 * (`progressIntervalMs` 0), resumability with its defaults, legacy sessions when
 * `BENCH_RESUME_SESSIONS=1`, and the tool `hold {tag, count}`: progress 1..count, then it waits until
 * the benchmark releases it (or its signal aborts) and answers `held <tag>`. Started with an IPC
 * channel (support/child-server.ts `spawnServer`), over which it:
 *
 * - answers `clock` with its instant (`performance.timeOrigin + performance.now()`);
 * - answers `release {tag}` once it let the `hold` run tagged `tag` answer (now, or as soon as it waits);
 * - says `closed {tag}` once the response of a POST carrying `x-bench-tag: <tag>` closed, on the turn
 *   of the event loop after the `'close'` (this listener runs before the plugin's own, which pauses the
 *   stream in the same event): from then on a resume finds the stream paused, not connected (409).
 */
import { RESUME_SECRET, RESUME_SESSION_SECRET, HOLD_TOOL, TAG_HEADER } from '../support/resume-fixture.js'
import { servePlugin } from './plugin-app.js'

export type ResumeNodeCommand =
  | { type: 'clock', seq: number }
  | { type: 'release', seq: number, tag: string }

export type ResumeNodeMessage =
  | { type: 'clock', seq: number, at: number }
  | { type: 'release', seq: number, at: number }
  | { type: 'closed', tag: string, at: number }

const redis = process.env.BENCH_REDIS_URL
if (redis === undefined || redis === '') throw new Error('resume-node needs BENCH_REDIS_URL')
if (process.send === undefined) throw new Error('resume-node must be started with an IPC channel')

const now = (): number => performance.timeOrigin + performance.now()
const send = (message: ResumeNodeMessage): void => { process.send!(message) }

/** The `hold` runs waiting for their release, and the releases that came before their run waited. */
const waiting = new Map<string, () => void>()
const released = new Set<string>()

await servePlugin({
  redis,
  secret: RESUME_SECRET,
  progressIntervalMs: 0,
  ...process.env.BENCH_RESUME_SESSIONS === '1' ? { sessions: { secret: RESUME_SESSION_SECRET } } : {}
}, app => {
  app.addHook('onRequest', (request, reply, done) => {
    const tag = request.headers[TAG_HEADER]
    if (typeof tag === 'string') reply.raw.once('close', () => { setImmediate(() => { send({ type: 'closed', tag, at: now() }) }) })
    done()
  })
  app.mcp.tool<{ tag: string, count: number }>({
    name: HOLD_TOOL,
    description: 'Reports progress 1..count, then waits until the benchmark releases it',
    inputSchema: {
      type: 'object',
      properties: { tag: { type: 'string' }, count: { type: 'integer', minimum: 0 } },
      required: ['tag', 'count']
    },
    async handler ({ tag, count }, ctx) {
      for (let i = 1; i <= count; i++) await ctx.progress(i, count)
      await new Promise<void>((resolve, reject) => {
        if (released.delete(tag)) {
          resolve()
          return
        }
        waiting.set(tag, resolve)
        ctx.signal.addEventListener('abort', () => {
          waiting.delete(tag)
          reject(ctx.signal.reason)
        }, { once: true })
      })
      return { content: [{ type: 'text', text: `held ${tag}` }] }
    }
  })
  // The IPC channel would keep the process alive after the server closed (and --cpu-prof unwritten).
  app.addHook('onClose', async () => { process.disconnect() })
  process.on('message', (command: ResumeNodeCommand) => {
    switch (command.type) {
      case 'clock':
        send({ type: 'clock', seq: command.seq, at: now() })
        return
      case 'release': {
        const resolve = waiting.get(command.tag)
        waiting.delete(command.tag)
        if (resolve === undefined) released.add(command.tag)
        else resolve()
        send({ type: 'release', seq: command.seq, at: now() })
      }
    }
  })
})
