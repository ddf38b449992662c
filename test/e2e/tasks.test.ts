/**
 * Tasks (2026-07-28 tasks extension) end to end over a real socket, raw HTTP (the 2.x client speaks the
 * 2025-11-25 tasks, not the extension): a task outlives the POST that created it; `tasks/cancel` reaches
 * the handler's signal with source `task`; the kill timeout abandons a stubborn in-process handler and
 * terminates a worker thread that never yields; the metrics count it all; and once every task has ended
 * and `taskTtlMs` has passed, nothing is left: no task, no in-flight request, no row.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { RequestCancelledError } from '../../lib/index.js'
import { NetCall } from '../helpers/http.js'
import { DEFAULT_HEADERS, META, modernHeaders, modernMeta, sseMessages, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenPlugin } from '../helpers/listen.js'
import { captureLogs } from '../helpers/logs.js'
import { scrapeMetrics, type Exposition } from '../helpers/metrics.js'
import { failOnUnhandledRejection } from '../helpers/process.js'
import { cancellationEvents } from '../helpers/recorders.js'
import { fetchSender, TaskClient, WITH_TASKS } from '../helpers/tasks.js'
import { waitFor } from '../helpers/wait.js'

const TTL_MS = 2000
const KILL_MS = 500
const SLACK_MS = 400
const WORKER = new URL('../workers/task-tools.ts', import.meta.url)
const KILL_WARNING = `The handler did not stop within ${KILL_MS} ms of its cancellation and was killed`

/** What an in-process task handler saw. */
interface Seen {
  startedAt: number
  /** `ctx.signal`'s abort, when it fired. */
  aborted: { source: string, reason: string | null, isRequestCancelledError: boolean } | undefined
  endedAt: number | undefined
}

/** The body of a raw response once it is all there: a JSON body (content-length) or an SSE stream (chunked, ended). */
function bodyOf (call: NetCall): string | undefined {
  const raw = call.raw()
  const end = raw.indexOf('\r\n\r\n')
  if (end === -1) return undefined
  const length = /\r\ncontent-length: *(\d+)/i.exec(raw.slice(0, end))
  if (length !== null) {
    const body = Buffer.from(raw.slice(end + 4), 'utf8')
    return body.length >= Number(length[1]) ? body.subarray(0, Number(length[1])).toString('utf8') : undefined
  }
  return call.completedAt === undefined ? undefined : call.body()
}

/** A modern `tools/call` declaring the extension, written on a keep-alive socket of its own. */
function netCall (url: URL, id: string, name: string, args: Record<string, unknown>, progressToken?: string): NetCall {
  const meta = modernMeta({ [META.clientCapabilities]: WITH_TASKS, ...(progressToken === undefined ? {} : { progressToken }) })
  const headers: Record<string, string> = { ...DEFAULT_HEADERS }
  for (const [key, value] of Object.entries(modernHeaders('tools/call', name))) if (value !== undefined) headers[key] = value
  return new NetCall(url, { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, _meta: meta } }, headers)
}

/** The count the worker's busy loop last wrote (0 before its first write). */
function countIn (file: string): number {
  return existsSync(file) ? Number(readFileSync(file, 'utf8')) || 0 : 0
}

t.test('tasks over a real socket: detached from their POST, cancelled, killed, counted, expired', async t => {
  failOnUnhandledRejection(t)
  const logs = captureLogs('warn')
  const events = cancellationEvents(t)
  const seen = new Map<string, Seen>()
  const server = await listenPlugin(t, { taskTtlMs: TTL_MS, cancelTimeoutMs: KILL_MS }, { ...logs.options, requestTimeout: 30_000 }, app => {
    app.mcp.tool<{ tag: string, progress?: boolean }>({
      name: 'wait-signal',
      task: 'optional',
      inputSchema: { type: 'object', properties: { tag: { type: 'string' }, progress: { type: 'boolean' } }, required: ['tag'] },
      handler: async ({ tag, progress }, ctx) => {
        const record: Seen = { startedAt: Date.now(), aborted: undefined, endedAt: undefined }
        seen.set(tag, record)
        // A progress notification first turns the POST's answer into an SSE stream.
        if (progress === true) await ctx.progress(0, 1, 'starting')
        await ctx.startTask()
        try {
          return await new Promise<never>((_resolve, reject) => {
            ctx.signal.addEventListener('abort', () => {
              const reason: unknown = ctx.signal.reason
              record.aborted = reason instanceof RequestCancelledError
                ? { source: reason.source, reason: reason.reason, isRequestCancelledError: true }
                : { source: String(reason), reason: null, isRequestCancelledError: false }
              reject(reason)
            }, { once: true })
          })
        } finally {
          record.endedAt = Date.now()
        }
      }
    })
    app.mcp.tool<{ tag: string, ms: number }>({
      name: 'stubborn',
      task: 'optional',
      inputSchema: { type: 'object', properties: { tag: { type: 'string' }, ms: { type: 'integer' } }, required: ['tag', 'ms'] },
      handler: async ({ tag, ms }, ctx) => {
        const record: Seen = { startedAt: Date.now(), aborted: undefined, endedAt: undefined }
        seen.set(tag, record)
        await ctx.startTask()
        await sleep(ms) // never looks at ctx.signal
        record.endedAt = Date.now()
        return { content: [{ type: 'text', text: 'stubborn finished anyway' }] }
      }
    })
    app.mcp.tool({
      name: 'quick',
      task: 'optional',
      handler: async (_args, ctx) => {
        await ctx.startTask()
        return { content: [{ type: 'text', text: 'quick' }] }
      }
    })
    app.mcp.tool({ name: 'ping', worker: { filename: WORKER, name: 'ping' } })
    app.mcp.tool({ name: 'spin', task: 'optional', inputSchema: { type: 'object', properties: { file: { type: 'string' } }, required: ['file'] }, worker: { filename: WORKER, name: 'spin' } })
  })
  const client = new TaskClient(fetchSender(server.url))
  const metrics = async (): Promise<Exposition> => await scrapeMetrics(server.url)
  /** Requests whose handler runs (a task's too: its JSON-RPC id has left the cancellation table, not the server). */
  const running = async (): Promise<number> => (await metrics()).value('mcp_in_flight_requests') ?? 0
  /** Every task made here, for the final check. */
  const taskIds: string[] = []
  /** Tasks cancelled while running (each one cancellation with source task). */
  let cancelledRunning = 0

  await t.test('a completed task over the wire', async t => {
    const taskId = await client.create('quick')
    taskIds.push(taskId)
    const done = await client.waitFor(taskId, ['completed', 'failed', 'cancelled'])
    t.equal(done?.status, 'completed')
    t.same(done?.result?.content, [{ type: 'text', text: 'quick' }])
  })

  const detached: string[] = []
  for (const sse of [false, true]) {
    const what = sse ? 'an SSE answer (progress sent before startTask)' : 'a JSON answer'
    await t.test(`closing the creating POST's connection after the CreateTaskResult (${what}) does not cancel the task`, async t => {
      const tag = sse ? 'detached-sse' : 'detached-json'
      const call = netCall(server.url, tag, 'wait-signal', { tag, progress: sse }, sse ? 'progress-1' : undefined)
      t.teardown(() => { call.close() })
      t.ok(await waitFor(() => bodyOf(call) !== undefined, 3000), 'the POST is answered')
      const body = bodyOf(call) ?? ''
      const messages: JsonRpcMessage[] = sse ? sseMessages(body) : [JSON.parse(body) as JsonRpcMessage]
      if (sse) t.equal(messages[0]?.method, 'notifications/progress', 'the progress came first, on the stream')
      const created = messages.at(-1)?.result as Record<string, any> | undefined
      t.equal(created?.resultType, 'task', 'then the CreateTaskResult')
      const taskId = String(created?.taskId)
      taskIds.push(taskId)
      detached.push(taskId)

      call.close() // the client goes away, on purpose, right after the answer
      await sleep(200)
      t.equal(seen.get(tag)?.aborted, undefined, 'the handler\'s signal did not fire')
      t.equal((await client.get(taskId)).body.result?.status, 'working', 'tasks/get: still working')
      t.same(events.filter(event => event.requestId === tag), [], 'no cancellation of the creating request')
    })
  }

  await t.test('tasks/cancel reaches the handler\'s signal with source "task" and ends the task cancelled', async t => {
    for (const taskId of detached) {
      const cancel = await client.cancel(taskId)
      t.equal(cancel.status, 200)
      t.equal(cancel.body.result?.resultType, 'complete', 'acknowledged')
      cancelledRunning++
      t.equal((await client.get(taskId)).body.result?.status, 'cancelled', 'tasks/get: cancelled')
    }
    for (const tag of ['detached-json', 'detached-sse']) {
      t.same(seen.get(tag)?.aborted, { source: 'task', reason: 'tasks/cancel', isRequestCancelledError: true }, `${tag}: a RequestCancelledError of source task`)
      t.ok(await waitFor(() => seen.get(tag)?.endedAt !== undefined), `${tag}: the handler stopped`)
    }
    t.same(events.filter(event => event.source === 'task').map(event => [event.requestId, event.reason]),
      [['detached-json', 'tasks/cancel'], ['detached-sse', 'tasks/cancel']], 'one cancellation event each, for the request that made the task')
    t.ok(await waitFor(async () => await running() === 0, 2000), 'nothing in flight any more')
    for (const taskId of detached) {
      t.equal((await client.cancel(taskId)).body.result?.resultType, 'complete', 'cancelling again: an ack')
    }
  })

  await t.test('a stubborn in-process handler is abandoned after cancelTimeoutMs; its late result changes nothing', async t => {
    const taskId = await client.create('stubborn', { tag: 'stubborn', ms: 1500 })
    taskIds.push(taskId)
    const before = (await metrics()).value('mcp_tool_calls_total', { tool: 'stubborn', outcome: 'killed' }) ?? 0
    t.ok(await waitFor(async () => await running() === 1, 2000), 'the task runs')
    t.equal(server.app.mcpCancellation.inFlightRows, 0, 'its JSON-RPC id is not in the cancellation table')
    const cancelledAt = Date.now()
    t.equal((await client.cancel(taskId)).body.result?.resultType, 'complete')
    cancelledRunning++
    t.equal((await client.get(taskId)).body.result?.status, 'cancelled', 'cancelled at once, for the client')
    t.equal(seen.get('stubborn')?.endedAt, undefined, 'while the handler still runs')
    await sleep(KILL_MS / 5)
    t.equal(await running(), 1, 'it counts as running while it may still stop by itself')
    t.ok(await waitFor(async () => await running() === 0, KILL_MS + SLACK_MS), 'given up on after the kill timeout')
    t.ok(Date.now() - cancelledAt >= KILL_MS - 5, 'not before it')
    t.equal((await metrics()).value('mcp_tool_calls_total', { tool: 'stubborn', outcome: 'killed' }), before + 1, 'mcp_tool_calls_total{outcome="killed"} counts it')
    t.ok(logs.lines().some(line => line.msg === KILL_WARNING), 'a warning says it was killed')

    t.ok(await waitFor(() => seen.get('stubborn')?.endedAt !== undefined, 3000), 'the abandoned handler finishes by itself later')
    await sleep(50)
    const after = (await client.get(taskId)).body.result
    t.equal(after?.status, 'cancelled', 'the task stays cancelled')
    t.equal(after?.result, undefined, 'without the late result')
  })

  await t.test('a worker task that never yields has its thread terminated after cancelTimeoutMs', async t => {
    const ping = await client.call('ping')
    t.same(ping.body.result?.content, [{ type: 'text', text: 'pong' }], 'the worker module is loaded')
    const file = join(t.testdir(), 'count')
    const taskId = await client.create('spin', { file })
    taskIds.push(taskId)
    t.ok(await waitFor(() => countIn(file) >= 3, 3000), 'the worker counts')
    const first = countIn(file)
    await sleep(100)
    t.ok(countIn(file) > first, 'and keeps counting while it runs')

    const before = (await metrics()).value('mcp_tool_calls_total', { tool: 'spin', outcome: 'killed' }) ?? 0
    t.equal((await client.cancel(taskId)).body.result?.resultType, 'complete')
    cancelledRunning++
    const atCancel = countIn(file)
    t.equal((await client.get(taskId)).body.result?.status, 'cancelled', 'cancelled at once, for the client')
    await sleep(KILL_MS / 5)
    t.ok(countIn(file) > atCancel, 'the loop ignores the cancellation until the kill timeout')
    t.ok(await waitFor(async () => await running() === 0, KILL_MS + SLACK_MS), 'given up on after the kill timeout')
    await sleep(100)
    const stopped = countIn(file)
    await sleep(400)
    t.equal(countIn(file), stopped, `the count stays at ${stopped}: the thread is gone`)
    t.equal((await metrics()).value('mcp_tool_calls_total', { tool: 'spin', outcome: 'killed' }), before + 1, 'mcp_tool_calls_total{outcome="killed"} counts it')
    t.equal((await client.get(taskId)).body.result?.status, 'cancelled', 'and the task stays cancelled')
    const again = await client.call('ping')
    t.same(again.body.result?.content, [{ type: 'text', text: 'pong' }], 'the pool serves the next worker call')
  })

  await t.test('mcp_cancellations_total counts each task cancelled while it ran, and no disconnect', async t => {
    const exposition = await metrics()
    t.equal(exposition.value('mcp_cancellations_total', { source: 'task', result: 'recorded' }), cancelledRunning,
      `source="task",result="recorded" is ${cancelledRunning}`)
    t.equal(exposition.value('mcp_cancellations_total', { source: 'disconnect', result: 'recorded' }) ?? 0, 0, 'closing the creating POSTs cancelled nothing')
    await client.cancel(detached[0]!)
    t.equal((await metrics()).value('mcp_cancellations_total', { source: 'task', result: 'recorded' }), cancelledRunning,
      'cancelling an ended task counts nothing')
  })

  await t.test('once every task has ended and taskTtlMs has passed, nothing is left', async t => {
    for (const taskId of taskIds) {
      // The first ones ended more than taskTtlMs ago already.
      const answer = (await client.get(taskId)).body
      const state = answer.result === undefined ? `gone (${String(answer.error?.code)})` : String(answer.result.status)
      t.ok(['completed', 'cancelled', 'failed', 'gone (-32602)'].includes(state), `${taskId}: ended (${state})`)
    }
    await sleep(TTL_MS + 100)
    for (const taskId of taskIds) {
      const gone = await client.get(taskId)
      t.equal(gone.body.error?.code, -32602, `${taskId}: tasks/get is -32602`)
      t.match(gone.body.error?.message, /Task not found/)
    }
    t.equal(server.app.mcpCancellation.inFlightRows, 0, 'no request in flight')
    t.equal(server.app.mcpCancellation.rows, 0, 'no cancellation row')
    const exposition = await metrics()
    t.equal(exposition.value('mcp_in_flight_requests'), 0, 'mcp_in_flight_requests is 0')
    t.equal(exposition.value('mcp_sse_streams'), 0, 'mcp_sse_streams is 0')
    t.same(logs.lines().filter(line => line.level !== 40 || line.msg !== KILL_WARNING).map(line => line.msg), [], 'no other warning or error was logged')
  })
})
