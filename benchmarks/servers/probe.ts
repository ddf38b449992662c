/**
 * The demo server (example/app.ts `buildApp`: the plugin with its demo options and tools `echo`, `sleep`,
 * `stubborn`, `spin`…) instrumented for the latency benchmarks (cancel-latency.ts, disconnect-latency.ts).
 * It talks to the benchmark over an IPC channel; every instant below is `performance.now()` of this
 * process, so the intervals it reports need no clock alignment.
 *
 * - An `onRequest` hook notes when each HTTP request arrives, and adds a `'close'` listener to its
 *   response (registered before the plugin's own, which the plugin adds in its route handler, so it
 *   runs first within the same `'close'` event).
 * - A `preHandler` hook keeps the bodies of the POSTs that carry `notifications/cancelled` with their
 *   arrival instant and its own (body read, about to enter the plugin's handler): a byte search only;
 *   they are parsed after the measurement.
 * - `probe-sleep`: the demo's `sleep` tool (same loop: `throwIfCancelled`, `progress`, a timer on
 *   `ctx.signal`) plus a `tag` argument; it reports `started`, and on the `abort` event of `ctx.signal`
 *   reports the intervals from the cancel POST's arrival and from its own response's `'close'`.
 * - Worker kills (the demo's `spin` tool): the `'worker'` process event hands over each Piscina thread
 *   (its `terminate()` is wrapped to note when the kill reaches it, its `'exit'` event noted); the
 *   plugin's `mcp:request:cancelled` diagnostics channel gives the cancel instant (published right
 *   after the kill timer is armed); after the terminate, the in-flight row is polled on every
 *   event-loop turn until it is gone.
 *
 * Env: BENCH_CANCEL_TIMEOUT_MS sets the demo's MCP_CANCEL_TIMEOUT_MS (cancelTimeoutMs).
 */
import { subscribe } from 'node:diagnostics_channel'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Worker } from 'node:worker_threads'
import type { FastifyRequest } from 'fastify'
import { buildApp } from '../../example/app.js'
import { announce, HOST, loggerOption } from './listen.js'

export type ProbeCommand =
  | { type: 'clock', seq: number }
  /** Resolve with `spinning` once `id` is in flight and a worker thread has been busy for `busyMs`. */
  | { type: 'await-spin', id: string, busyMs: number }
  /** Report `killed` for `id` once it is cancelled, its thread terminated and gone, and its row gone. */
  | { type: 'watch-kill', id: string }

export type ProbeMessage =
  | { type: 'clock', seq: number, at: number }
  | { type: 'started', tag: string }
  | {
    type: 'aborted'
    tag: string
    /** Cancellation source from the abort reason (`client`, `disconnect`…). */
    source: string | undefined
    /** Epoch ms (`performance.timeOrigin + performance.now()`) of the abort event, for cross-process comparison. */
    abortedAt: number
    /** Abort event minus the arrival (onRequest) of the POST cancelling this request, if there was one. */
    fromCancelArrivalMs: number | undefined
    /** Abort event minus the `preHandler` hook of that POST (its body read): the plugin's own share. */
    fromCancelPreHandlerMs: number | undefined
    /** Abort event minus the `'close'` of this request's own response, if it closed before. */
    fromCloseMs: number | undefined
  }
  | { type: 'spinning', id: string, waitedMs: number, utilization: number }
  | {
    type: 'killed'
    id: string
    cancelTimeoutMs: number
    /** Kill timer lateness: terminate() call minus (cancel + cancelTimeoutMs). */
    timerLateMs: number | undefined
    /** Thread `'exit'` event minus the terminate() call. */
    exitAfterTerminateMs: number | undefined
    /** First event-loop turn that saw the in-flight row gone, minus the terminate() call. */
    rowGoneAfterTerminateMs: number | undefined
    /** Thread exit minus the cancel. */
    exitAfterCancelMs: number | undefined
    exitCode: number | undefined
    error?: string
  }
  | { type: 'error', message: string }

if (process.send === undefined) throw new Error('probe must be started with an IPC channel')
const send = (message: ProbeMessage): void => { process.send!(message) }
const epoch = (at: number): number => performance.timeOrigin + at

/** The scope of an unauthenticated legacy request from loopback (identity: `ip:` + address). */
const SCOPE = 'ip:127.0.0.1'
const CANCEL_TIMEOUT_MS = Number(process.env.BENCH_CANCEL_TIMEOUT_MS ?? 5000)

const app = await buildApp({ MCP_CANCEL_TIMEOUT_MS: String(CANCEL_TIMEOUT_MS) }, { logger: loggerOption() })

// --- HTTP instants -------------------------------------------------------------------------------

const arrivals = new WeakMap<FastifyRequest, number>()
const closes = new WeakMap<FastifyRequest, number>()
const cancelPosts: Array<{ arrivedAt: number, handledAt: number, body: Buffer }> = []
const CANCELLED = Buffer.from('notifications/cancelled')

app.addHook('onRequest', (request, reply, done) => {
  arrivals.set(request, performance.now())
  reply.raw.once('close', () => { closes.set(request, performance.now()) })
  done()
})

app.addHook('preHandler', (request, _reply, done) => {
  const body = request.body
  if (Buffer.isBuffer(body) && body.includes(CANCELLED)) {
    cancelPosts.push({ arrivedAt: arrivals.get(request)!, handledAt: performance.now(), body })
    if (cancelPosts.length > 64) cancelPosts.shift()
  }
  done()
})

/** The latest POST whose notifications/cancelled names `requestId` (type-exact). */
function cancelPost (requestId: string | number): { arrivedAt: number, handledAt: number } | undefined {
  for (let i = cancelPosts.length - 1; i >= 0; i--) {
    try {
      const message = JSON.parse(cancelPosts[i]!.body.toString('utf8')) as { method?: unknown, params?: { requestId?: unknown } }
      if (message.method === 'notifications/cancelled' && message.params?.requestId === requestId) return cancelPosts[i]!
    } catch {}
  }
  return undefined
}

app.mcp.tool<{ ms: number, stepMs?: number, tag: string }>({
  name: 'probe-sleep',
  description: 'The demo sleep tool, reporting when its ctx.signal aborts',
  inputSchema: {
    type: 'object',
    properties: { ms: { type: 'integer', minimum: 0, maximum: 600_000 }, stepMs: { type: 'integer', minimum: 1 }, tag: { type: 'string' } },
    required: ['ms', 'tag']
  },
  async handler ({ ms, stepMs = 50, tag }, ctx) {
    const { signal } = ctx
    signal.addEventListener('abort', () => {
      const abortedAt = performance.now()
      // Everything but the instant itself is done after the measurement.
      setImmediate(() => {
        const cancel = cancelPost(ctx.requestId)
        const closed = closes.get(ctx.request)
        const reason: unknown = signal.reason
        send({
          type: 'aborted',
          tag,
          source: typeof reason === 'object' && reason !== null && 'source' in reason ? String(reason.source) : undefined,
          abortedAt: epoch(abortedAt),
          fromCancelArrivalMs: cancel === undefined ? undefined : abortedAt - cancel.arrivedAt,
          fromCancelPreHandlerMs: cancel === undefined ? undefined : abortedAt - cancel.handledAt,
          fromCloseMs: closed === undefined ? undefined : abortedAt - closed
        })
      })
    }, { once: true })
    send({ type: 'started', tag })
    for (let elapsed = 0; elapsed < ms; elapsed += stepMs) {
      ctx.throwIfCancelled()
      await ctx.progress(elapsed, ms)
      await sleep(Math.min(stepMs, ms - elapsed), undefined, { signal })
    }
    return { content: [{ type: 'text', text: `slept ${ms}` }] }
  }
})

// --- worker kills --------------------------------------------------------------------------------

interface ThreadRecord { worker: Worker, terminatedAt: number | undefined, exitedAt: number | undefined, exitCode: number | undefined }
const threads: ThreadRecord[] = []

process.on('worker', (worker: Worker) => {
  const record: ThreadRecord = { worker, terminatedAt: undefined, exitedAt: undefined, exitCode: undefined }
  threads.push(record)
  const terminate = worker.terminate.bind(worker)
  worker.terminate = async () => {
    record.terminatedAt ??= performance.now()
    onTerminate(record)
    return await terminate()
  }
  worker.once('exit', code => {
    record.exitedAt = performance.now()
    record.exitCode = code
    checkKill()
  })
})

interface KillWatch { id: string, cancelledAt: number | undefined, thread: ThreadRecord | undefined, rowGoneAt: number | undefined, timer: NodeJS.Timeout }
let watch: KillWatch | undefined

subscribe('mcp:request:cancelled', message => {
  const { requestId } = message as { requestId: unknown }
  if (watch !== undefined && requestId === watch.id && watch.cancelledAt === undefined) watch.cancelledAt = performance.now()
})

function onTerminate (record: ThreadRecord): void {
  const current = watch
  if (current === undefined || current.cancelledAt === undefined || current.thread !== undefined) return
  current.thread = record
  const poll = (): void => {
    if (watch !== current) return
    if (!app.mcpCancellation.inFlight(current.id, SCOPE)) {
      current.rowGoneAt = performance.now()
      checkKill()
    } else {
      setImmediate(poll)
    }
  }
  setImmediate(poll)
}

function checkKill (error?: string): void {
  const current = watch
  if (current === undefined) return
  const thread = current.thread
  if (error === undefined && (thread?.exitedAt === undefined || current.rowGoneAt === undefined)) return
  clearTimeout(current.timer)
  watch = undefined
  const terminated = thread?.terminatedAt
  const since = (at: number | undefined, from: number | undefined): number | undefined => at === undefined || from === undefined ? undefined : at - from
  send({
    type: 'killed',
    id: current.id,
    cancelTimeoutMs: CANCEL_TIMEOUT_MS,
    timerLateMs: current.cancelledAt === undefined ? undefined : since(terminated, current.cancelledAt + CANCEL_TIMEOUT_MS),
    exitAfterTerminateMs: since(thread?.exitedAt, terminated),
    rowGoneAfterTerminateMs: since(current.rowGoneAt, terminated),
    exitAfterCancelMs: since(thread?.exitedAt, current.cancelledAt),
    exitCode: thread?.exitCode,
    ...(error === undefined ? {} : { error })
  })
}

/**
 * Waits until `id` is in flight and a live worker thread's event loop has been busy (utilisation ≥ 0.9,
 * read every 5 ms from this thread) for `busyMs`: the tool is spinning, not starting.
 */
async function awaitSpin (id: string, busyMs: number): Promise<void> {
  const started = performance.now()
  const POLL_MS = 5
  const last = new Map<Worker, ReturnType<Worker['performance']['eventLoopUtilization']>>()
  let busySince: number | undefined
  let utilization = 0
  while (performance.now() - started < 10_000) {
    await sleep(POLL_MS)
    const live = threads.filter(t => t.exitedAt === undefined && t.terminatedAt === undefined)
    utilization = 0
    for (const { worker } of live) {
      const now = worker.performance.eventLoopUtilization()
      const before = last.get(worker)
      last.set(worker, now)
      if (before !== undefined) utilization = Math.max(utilization, worker.performance.eventLoopUtilization(now, before).utilization)
    }
    if (app.mcpCancellation.inFlight(id, SCOPE) && utilization >= 0.9) {
      busySince ??= performance.now()
      if (performance.now() - busySince >= busyMs) {
        send({ type: 'spinning', id, waitedMs: performance.now() - started, utilization })
        return
      }
    } else {
      busySince = undefined
    }
  }
  send({ type: 'error', message: `${id}: no worker thread busy for ${busyMs} ms within 10 s (in flight in ${SCOPE}: ${app.mcpCancellation.inFlight(id, SCOPE)}, utilisation ${utilization.toFixed(2)})` })
}

process.on('message', (command: ProbeCommand) => {
  switch (command.type) {
    case 'clock':
      send({ type: 'clock', seq: command.seq, at: performance.timeOrigin + performance.now() })
      break
    case 'await-spin':
      void awaitSpin(command.id, command.busyMs)
      break
    case 'watch-kill':
      if (watch !== undefined) clearTimeout(watch.timer)
      watch = {
        id: command.id,
        cancelledAt: undefined,
        thread: undefined,
        rowGoneAt: undefined,
        timer: setTimeout(() => { checkKill(`no kill observed within ${CANCEL_TIMEOUT_MS + 10_000} ms`) }, CANCEL_TIMEOUT_MS + 10_000)
      }
      break
  }
})

await app.listen({ host: HOST, port: 0 })
announce(app.server, async () => {
  await app.close()
  process.disconnect?.()
})
