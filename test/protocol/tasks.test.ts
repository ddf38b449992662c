/**
 * The 2026-07-28 tasks extension (`io.modelcontextprotocol/tasks`): a tool registered with `task` whose
 * handler calls `ctx.startTask()` answers a CreateTaskResult at once for a client that declared the
 * extension and goes on as a task; `tasks/get`, `tasks/update` and `tasks/cancel` read and drive it, in
 * the caller's scope only; quotas, result size and expiry bound it.
 *
 * The tasks are driven over 127.0.0.1 (fetch), and the one-shot checks through `fastify.inject`: a task
 * created through `fastify.inject` is cancelled as "client disconnected" as soon as the injected response
 * ends (the first test reproduces it), so a task must be created over a real socket to live on.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { elicitation, RequestCancelledError, ToolError, type McpCancellationOptions } from '../../lib/index.js'
import { buildApp, json, postLegacy, postModern } from '../helpers/inject.js'
import { META } from '../helpers/jsonrpc.js'
import { listenOn } from '../helpers/listen.js'
import { fetchSender, Gate, injectSender, isIsoDate, TaskClient, TASKS_EXTENSION, WITH_TASKS, WITHOUT_TASKS, type RpcAnswer } from '../helpers/tasks.js'
import type { Teardown } from '../helpers/teardown.js'
import { registerEcho } from '../helpers/tools.js'
import { waitFor } from '../helpers/wait.js'

const SECRET = 'tasks-test-secret-0123456789abcdef-xyz'
const TTL_MS = 60_000
const POLL_MS = 250
const NAME_SCHEMA = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
const OK_SCHEMA = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] }
const REQUIRED_DATA = { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } }
const ALICE = { headers: { 'x-user': 'alice' } }
const BOB = { headers: { 'x-user': 'bob' } }

/** What one call of a recording tool did. */
interface Run {
  label: string
  /** The handler got past `ctx.startTask()`. */
  afterStart: boolean
  /** `ctx.signal`'s abort reason, when it aborted. */
  aborted: { source: string, reason: string | null } | undefined
}

interface TaskApp {
  app: FastifyInstance
  /** A client over 127.0.0.1 (the app listens on a port of its own). */
  client: TaskClient
  /** Gates the `compute` tool waits on, by its `gate` argument. */
  gates: Map<string, Gate>
  runs: Run[]
  /** How often each tool's handler was entered. */
  entered: Record<string, number>
}

/** The runs labelled `label`. */
function runOf (runs: readonly Run[], label: string): Run | undefined {
  return runs.find(run => run.label === label)
}

/** A modern result without its `_meta` (serverInfo), for exact comparisons. */
function withoutMeta (result: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (result === undefined) return undefined
  const { _meta, ...rest } = result
  return rest
}

/**
 * An app with task tools:
 * - `compute {label, gate?}` (optional): starts a task, waits for its gate (if any) or its cancellation, answers `computed <label>`;
 * - `tool-error` (optional) throws a ToolError, `is-error` (required) returns isError, `throws` (optional) throws a plain Error;
 * - `ask` (optional): starts a task, asks `name` and `confirm` at once, then `name` again, answers with all three;
 * - `mrtr-then-task` (required): asks `user_name` (a multi-round-trip request), then starts a task;
 * - `not-a-task`: no `task`, calls `ctx.startTask()`;
 * - `sized {bytes}` (optional): a result of about `bytes` bytes;
 * - `twice {concurrent}` (optional): calls `ctx.startTask()` twice, one after the other or at once;
 * - `steps {gate}` (optional): starts a task, reports progress 1/2 "Rendering", waits for `gate`, reports 2 without message or total.
 */
async function taskApp (t: Teardown, options: McpCancellationOptions = {}): Promise<TaskApp> {
  const gates = new Map<string, Gate>()
  const runs: Run[] = []
  const entered: Record<string, number> = {}
  const enter = (name: string): void => { entered[name] = (entered[name] ?? 0) + 1 }
  const app = await buildApp(t, { secret: SECRET, taskTtlMs: TTL_MS, taskPollIntervalMs: POLL_MS, ...options }, app => {
    app.mcp.tool<{ label: string, gate?: string }>({
      name: 'compute',
      task: 'optional',
      inputSchema: { type: 'object', properties: { label: { type: 'string' }, gate: { type: 'string' } }, required: ['label'] },
      handler: async ({ label, gate }, ctx) => {
        enter('compute')
        const run: Run = { label, afterStart: false, aborted: undefined }
        runs.push(run)
        await ctx.startTask()
        run.afterStart = true
        await new Promise<void>((resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            const reason: unknown = ctx.signal.reason
            run.aborted = reason instanceof RequestCancelledError ? { source: reason.source, reason: reason.reason } : { source: 'foreign', reason: null }
            reject(reason)
          }, { once: true })
          const waitFor = gate === undefined ? undefined : gates.get(gate)
          if (waitFor === undefined) resolve()
          else waitFor.promise.then(resolve, reject)
        })
        return { content: [{ type: 'text', text: `computed ${label}` }], structuredContent: { label } }
      }
    })
    app.mcp.tool({
      name: 'tool-error',
      task: 'optional',
      handler: async (_args, ctx) => {
        await ctx.startTask()
        throw new ToolError('the job failed: bad input')
      }
    })
    app.mcp.tool({
      name: 'is-error',
      task: 'required',
      handler: async (_args, ctx) => {
        await ctx.startTask()
        return { content: [{ type: 'text', text: 'could not process' }], isError: true }
      }
    })
    app.mcp.tool({
      name: 'throws',
      task: 'optional',
      handler: async (_args, ctx) => {
        await ctx.startTask()
        throw new Error('secret detail 7f3a: database password is hunter2')
      }
    })
    app.mcp.tool({
      name: 'ask',
      task: 'optional',
      handler: async (_args, ctx) => {
        enter('ask')
        await ctx.startTask()
        const { name, confirm } = await ctx.input({
          name: elicitation({ message: 'Your name?', requestedSchema: NAME_SCHEMA }),
          confirm: elicitation({ message: 'Go ahead?', requestedSchema: OK_SCHEMA })
        })
        const again = await ctx.input({ name: elicitation({ message: 'Your nickname?', requestedSchema: NAME_SCHEMA }) })
        return {
          content: [{ type: 'text', text: `${String(name.content?.name)} ${String(confirm.content?.ok)} ${String(again.name.content?.name)}` }]
        }
      }
    })
    app.mcp.tool({
      name: 'mrtr-then-task',
      task: 'required',
      handler: async (_args, ctx) => {
        enter('mrtr-then-task')
        const { user_name: answer } = await ctx.input({ user_name: elicitation({ message: 'Your name?', requestedSchema: NAME_SCHEMA }) })
        await ctx.startTask()
        return { content: [{ type: 'text', text: `Hello, ${String(answer.content?.name)}, from a task` }] }
      }
    })
    app.mcp.tool({
      name: 'not-a-task',
      handler: async (_args, ctx) => {
        enter('not-a-task')
        await ctx.startTask()
        enter('not-a-task:after')
        return { content: [{ type: 'text', text: 'should not get here' }] }
      }
    })
    app.mcp.tool<{ bytes: number }>({
      name: 'sized',
      task: 'optional',
      inputSchema: { type: 'object', properties: { bytes: { type: 'integer', minimum: 0 } }, required: ['bytes'] },
      handler: async ({ bytes }, ctx) => {
        await ctx.startTask()
        return { content: [{ type: 'text', text: 'x'.repeat(bytes) }] }
      }
    })
    app.mcp.tool<{ concurrent: boolean }>({
      name: 'twice',
      task: 'optional',
      inputSchema: { type: 'object', properties: { concurrent: { type: 'boolean' } }, required: ['concurrent'] },
      handler: async ({ concurrent }, ctx) => {
        if (concurrent) {
          await Promise.all([ctx.startTask(), ctx.startTask()])
        } else {
          await ctx.startTask()
          await ctx.startTask()
        }
        return { content: [{ type: 'text', text: 'done' }] }
      }
    })
    app.mcp.tool<{ gate: string }>({
      name: 'steps',
      task: 'optional',
      inputSchema: { type: 'object', properties: { gate: { type: 'string' } }, required: ['gate'] },
      handler: async ({ gate }, ctx) => {
        await ctx.startTask()
        await ctx.progress(1, 2, 'Rendering')
        await gates.get(gate)!.promise
        await ctx.progress(2)
        await gates.get(`${gate}:end`)!.promise
        return { content: [{ type: 'text', text: 'rendered' }] }
      }
    })
  })
  return { app, client: new TaskClient(fetchSender(await listenOn(t, app))), gates, runs, entered }
}

/** A gate registered under `name`. */
function gate (gates: Map<string, Gate>, name: string): Gate {
  const made = new Gate()
  gates.set(name, made)
  return made
}

/** Asserts the answer is the JSON-RPC error `code` (and its HTTP status), never a result. */
function isError (t: Tap, answer: RpcAnswer, code: number, status: number, what: string): void {
  t.equal(answer.status, status, `${what}: HTTP ${status}`)
  t.equal(answer.body.error?.code, code, `${what}: ${code}`)
  t.equal(answer.body.result, undefined, `${what}: no result`)
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

t.test('a task created through fastify.inject keeps running once the injected response has ended', async t => {
  const { app, gates, runs } = await taskApp(t)
  gate(gates, 'injected')
  const injected = new TaskClient(injectSender(app))
  const taskId = await injected.create('compute', { label: 'injected', gate: 'injected' })
  await new Promise(resolve => setTimeout(resolve, 50))
  t.equal((await injected.get(taskId)).body.result?.status, 'working', 'tasks/get: still working')
  t.equal(runOf(runs, 'injected')?.aborted, undefined, 'its handler was not cancelled (the POST answered; nobody left)')
})

t.test('a task tool answers a CreateTaskResult at once; tasks/get shows it working, then completed with the result inlined', async t => {
  const { client, gates, runs } = await taskApp(t)
  const release = gate(gates, 'g1')
  const before = Date.now()
  const created = await client.call('compute', { label: 'one', gate: 'g1' })
  t.equal(created.status, 200)
  const task = created.body.result as Record<string, any>
  t.equal(task.resultType, 'task')
  t.match(task.taskId, /^[A-Za-z0-9_-]{22,}$/, 'an unguessable id (128 random bits, base64url)')
  t.equal(task.status, 'working')
  t.ok(isIsoDate(task.createdAt), `createdAt is ISO 8601 (${String(task.createdAt)})`)
  t.ok(isIsoDate(task.lastUpdatedAt), `lastUpdatedAt is ISO 8601 (${String(task.lastUpdatedAt)})`)
  const createdAt = Date.parse(task.createdAt)
  t.ok(createdAt >= before - 1 && createdAt <= Date.now() + 1, 'createdAt is now')
  t.equal(task.ttlMs, TTL_MS, 'ttlMs is taskTtlMs')
  t.equal(task.pollIntervalMs, POLL_MS, 'pollIntervalMs is taskPollIntervalMs')
  t.ok(Number.isSafeInteger(task.ttlMs) && task.ttlMs > 0 && Number.isSafeInteger(task.pollIntervalMs) && task.pollIntervalMs > 0, 'positive integers')
  t.same(task._meta, { [META.serverInfo]: { name: 'test-server', version: '9.9.9' } }, 'a modern result with serverInfo')
  for (const key of ['requestState', 'inputRequests', 'content', 'result', 'error', 'isError']) t.notOk(key in task, `no ${key}`)
  t.equal(runOf(runs, 'one')?.afterStart, true, 'the handler goes on after startTask')

  const working = await client.get(task.taskId)
  t.equal(working.status, 200)
  t.same(withoutMeta(working.body.result), {
    resultType: 'complete', taskId: task.taskId, status: 'working', createdAt: task.createdAt, lastUpdatedAt: task.lastUpdatedAt, ttlMs: TTL_MS, pollIntervalMs: POLL_MS
  }, 'tasks/get while it runs: working, nothing else')

  // Another task of the same tool gets another id.
  const other = await client.create('compute', { label: 'two' })
  t.not(other, task.taskId, 'each task has its own id')

  release.open()
  const done = await client.waitFor(task.taskId, ['completed', 'failed', 'cancelled'])
  t.equal(done?.status, 'completed')
  t.same(done?.result?.content, [{ type: 'text', text: 'computed one' }], 'the result is inlined')
  t.same(done?.result?.structuredContent, { label: 'one' })
  t.notOk('error' in (done ?? {}), 'no error')
  t.notOk('inputRequests' in (done ?? {}), 'no inputRequests')
  t.equal(done?.createdAt, task.createdAt, 'createdAt does not change')
  t.ok(isIsoDate(done?.lastUpdatedAt) && Date.parse(done?.lastUpdatedAt) >= createdAt, 'lastUpdatedAt moved on (or stayed) with the end')
  t.equal((await client.waitFor(other, ['completed']))?.result?.content?.[0]?.text, 'computed two')
})

t.test('a tool error completes the task with an isError result; a thrown error fails it with -32603 and no detail', async t => {
  const { client } = await taskApp(t)
  const toolError = await client.waitFor(await client.create('tool-error'), ['completed', 'failed'])
  t.equal(toolError?.status, 'completed', 'a ToolError: completed')
  t.same(toolError?.result?.content, [{ type: 'text', text: 'the job failed: bad input' }])
  t.equal(toolError?.result?.isError, true)

  const isErrorResult = await client.waitFor(await client.create('is-error'), ['completed', 'failed'])
  t.equal(isErrorResult?.status, 'completed', 'an isError result: completed')
  t.equal(isErrorResult?.result?.isError, true)
  t.same(isErrorResult?.result?.content, [{ type: 'text', text: 'could not process' }])

  const thrown = await client.waitFor(await client.create('throws'), ['completed', 'failed'])
  t.equal(thrown?.status, 'failed', 'a thrown Error: failed')
  t.equal(thrown?.error?.code, -32603)
  t.type(thrown?.error?.message, 'string')
  t.equal(thrown?.result, undefined, 'no result')
  t.notMatch(JSON.stringify(thrown), /secret detail|hunter2|at .*:\d+:\d+/, 'neither the message nor a stack trace leaks')
})

t.test('asks after startTask: input_required with inputRequests; tasks/update answers part, then the rest; keys are never reused', async t => {
  const { client } = await taskApp(t)
  const taskId = await client.create('ask')
  const asking = await client.waitFor(taskId, ['input_required'])
  t.equal(asking?.status, 'input_required')
  t.same(asking?.inputRequests, {
    name: { method: 'elicitation/create', params: { message: 'Your name?', requestedSchema: NAME_SCHEMA } },
    confirm: { method: 'elicitation/create', params: { message: 'Go ahead?', requestedSchema: OK_SCHEMA } }
  }, 'both questions, by key')

  const partial = await client.update(taskId, { name: { action: 'accept', content: { name: 'Ada' } }, unknown: { action: 'accept', content: {} } })
  t.equal(partial.status, 200)
  t.same(withoutMeta(partial.body.result), { resultType: 'complete' }, 'acknowledged with an empty result')
  const afterPartial = (await client.get(taskId)).body.result
  t.equal(afterPartial?.status, 'input_required', 'still waiting for the rest')
  t.same(Object.keys(afterPartial?.inputRequests ?? {}), ['confirm'], 'the answered key is gone at once; the unknown key changed nothing')

  const malformed = await client.update(taskId, { confirm: { action: 'maybe' } })
  t.same(withoutMeta(malformed.body.result), { resultType: 'complete' }, 'a malformed answer is acknowledged too')
  t.same(Object.keys((await client.get(taskId)).body.result?.inputRequests ?? {}), ['confirm'], 'but answers nothing')

  await client.update(taskId, { confirm: { action: 'accept', content: { ok: true } } })
  const again = await client.waitFor(taskId, ['input_required', 'completed', 'failed'])
  t.equal(again?.status, 'input_required', 'the handler asks again')
  t.same(Object.keys(again?.inputRequests ?? {}), ['name-2'], 'under a fresh key: "name" was used already')
  t.equal(again?.inputRequests?.['name-2']?.params?.message, 'Your nickname?')

  const stale = await client.update(taskId, { name: { action: 'accept', content: { name: 'Eve' } } })
  t.same(withoutMeta(stale.body.result), { resultType: 'complete' }, 'an answer to a key already answered is acknowledged')
  t.equal((await client.get(taskId)).body.result?.status, 'input_required', 'and ignored')

  await client.update(taskId, { 'name-2': { action: 'accept', content: { name: 'Ace' } } })
  const done = await client.waitFor(taskId, ['completed', 'failed'])
  t.equal(done?.status, 'completed')
  t.same(done?.result?.content, [{ type: 'text', text: 'Ada true Ace' }], 'the handler got each answer under its own key')
  t.notOk('inputRequests' in (done ?? {}), 'no inputRequests once ended')

  const late = await client.update(taskId, { 'name-2': { action: 'accept', content: { name: 'Late' } } })
  t.same(withoutMeta(late.body.result), { resultType: 'complete' }, 'tasks/update of an ended task is acknowledged')
  t.same((await client.get(taskId)).body.result?.result?.content, done?.result?.content, 'and changes nothing')
})

t.test('asks before startTask are ordinary multi-round-trip rounds; the retry becomes the task', async t => {
  const { client, entered } = await taskApp(t)
  const first = await client.call('mrtr-then-task')
  t.equal(first.status, 200)
  t.equal(first.body.result?.resultType, 'input_required', 'round 1 asks as any request does')
  t.same(Object.keys(first.body.result?.inputRequests ?? {}), ['user_name'])
  t.type(first.body.result?.requestState, 'string')
  t.notOk('taskId' in (first.body.result ?? {}), 'no task yet')

  const retry = await client.send('tools/call', {
    name: 'mrtr-then-task', arguments: {}, inputResponses: { user_name: { action: 'accept', content: { name: 'Ada' } } }, requestState: first.body.result?.requestState
  })
  t.equal(retry.body.result?.resultType, 'task', 'the retry is answered with a CreateTaskResult')
  t.notOk('requestState' in (retry.body.result ?? {}), 'without a requestState')
  const done = await client.waitFor(String(retry.body.result?.taskId), ['completed', 'failed'])
  t.same(done?.result?.content, [{ type: 'text', text: 'Hello, Ada, from a task' }], 'the task has the answer of the round before it')
  t.equal(entered['mrtr-then-task'], 2, 'the handler ran once per round')
})

t.test('ctx.startTask() in a tool registered without task is a programming error: the call fails -32603', async t => {
  const { client, entered } = await taskApp(t)
  for (const [capabilities, what] of [[WITH_TASKS, 'with the extension'], [WITHOUT_TASKS, 'without it']] as const) {
    const answer = await client.call('not-a-task', {}, { capabilities })
    isError(t, answer, -32603, 200, what)
    t.notMatch(answer.body.error?.message ?? '', /startTask|option/, `${what}: the detail is logged, not sent`)
  }
  t.equal(entered['not-a-task'], 2)
  t.equal(entered['not-a-task:after'], undefined, 'the handler never got past startTask')
})

t.test('an optional task tool runs as an ordinary call for a client without the extension, in either era', async t => {
  const { app, client, runs } = await taskApp(t)
  const cases: Array<[string, Record<string, unknown>]> = [
    ['no extensions', WITHOUT_TASKS],
    ['other extensions', { extensions: { 'example.com/other': {} } }],
    ['the extension not an object', { extensions: { [TASKS_EXTENSION]: true } }]
  ]
  for (const [what, capabilities] of cases) {
    const answer = await client.call('compute', { label: what }, { capabilities })
    t.equal(answer.status, 200, what)
    t.equal(answer.body.result?.resultType, 'complete', `${what}: an ordinary result`)
    t.same(answer.body.result?.content, [{ type: 'text', text: `computed ${what}` }], `${what}: the tool's own`)
    t.notOk('taskId' in (answer.body.result ?? {}), `${what}: no task`)
    t.equal(runOf(runs, what)?.afterStart, true, `${what}: startTask resolved and the handler went on`)
  }
  const legacy = json(await postLegacy(app, 'tools/call', { name: 'compute', arguments: { label: 'legacy' } }))
  t.same(legacy.result, { content: [{ type: 'text', text: 'computed legacy' }], structuredContent: { label: 'legacy' } }, 'legacy era: the plain CallToolResult')
})

t.test('a required task tool without the extension is -32021 before its handler runs', async t => {
  const { app, client, entered } = await taskApp(t)
  for (const [what, capabilities] of [['no extensions', WITHOUT_TASKS], ['the extension not an object', { extensions: { [TASKS_EXTENSION]: 'yes' } }]] as const) {
    const answer = await client.call('mrtr-then-task', {}, { capabilities })
    isError(t, answer, -32021, 400, what)
    t.same(answer.body.error?.data, REQUIRED_DATA, `${what}: names the extension`)
  }
  t.equal(entered['mrtr-then-task'], undefined, 'the handler never ran')

  // README "Decisions": JSON-RPC errors of well-formed legacy requests travel as HTTP 200 (as -32021 of a
  // legacy ask does, test/e2e/legacy-asks.test.ts); a 400 makes the SDK 1.x client throw a transport error.
  const legacy = await postLegacy(app, 'tools/call', { name: 'is-error' })
  t.equal(json(legacy).error?.code, -32021, 'legacy era: -32021 too')
  t.same(json(legacy).error?.data, REQUIRED_DATA, 'legacy era: naming the extension')
  t.equal(legacy.statusCode, 200, 'legacy era: HTTP 200, the error in the body (as for every legacy JSON-RPC error)')
})

t.test('tasks/* of a client without the extension are -32021 before the task is looked up; legacy has no tasks/*', async t => {
  const { app, client, gates } = await taskApp(t)
  gate(gates, 'held')
  const taskId = await client.create('compute', { label: 'held', gate: 'held' })
  for (const id of [taskId, 'no-such-task']) {
    for (const [method, params] of [['tasks/get', {}], ['tasks/update', { inputResponses: {} }], ['tasks/cancel', {}]] as const) {
      const answer = await client.send(method, { taskId: id, ...params }, { capabilities: WITHOUT_TASKS })
      isError(t, answer, -32021, 400, `${method} ${id === taskId ? 'of a live task' : 'of an unknown id'}`)
      t.same(answer.body.error?.data, REQUIRED_DATA)
    }
  }
  t.equal((await client.get(taskId)).body.result?.status, 'working', 'the task was not touched')
  const legacy = await postLegacy(app, 'tasks/get', { taskId })
  t.equal(json(legacy).error?.code, -32601, 'legacy era: tasks/get is not a method')
})

t.test('an unknown task id is -32602 "Task not found" for get, update and cancel', async t => {
  const { client } = await taskApp(t)
  for (const answer of [
    await client.get('AAAAAAAAAAAAAAAAAAAAAA'),
    await client.update('AAAAAAAAAAAAAAAAAAAAAA', {}),
    await client.cancel('AAAAAAAAAAAAAAAAAAAAAA')
  ]) {
    isError(t, answer, -32602, 200, 'unknown')
    t.match(answer.body.error?.message, /Task not found/)
  }
})

t.test('another principal\'s task is "Task not found" for get, update and cancel, and stays untouched', async t => {
  const { client, entered } = await taskApp(t, { auth: { principal: request => request.headers['x-user'], required: false } })
  const taskId = await client.create('ask', {}, ALICE)
  const asking = await client.waitFor(taskId, ['input_required'], 3000, ALICE)
  t.equal(asking?.status, 'input_required', 'alice sees her task')
  const unknown = (await client.get('AAAAAAAAAAAAAAAAAAAAAA', BOB)).body.error

  for (const [who, options] of [['bob', BOB], ['an anonymous client', {}]] as const) {
    const answers = [
      await client.get(taskId, options),
      await client.update(taskId, { name: { action: 'accept', content: { name: 'Mallory' } }, confirm: { action: 'decline' } }, options),
      await client.cancel(taskId, options)
    ]
    for (const [i, answer] of answers.entries()) {
      isError(t, answer, -32602, 200, `${who}: ${['get', 'update', 'cancel'][i]!}`)
      t.same(answer.body.error, unknown, `${who}: exactly what an unknown id answers`)
    }
  }
  const after = await client.get(taskId, ALICE)
  t.equal(after.body.result?.status, 'input_required', 'alice\'s task is neither answered nor cancelled')
  t.same(after.body.result?.inputRequests, asking?.inputRequests, 'its questions are all still open')
  t.equal(entered.ask, 1)
  await client.update(taskId, { name: { action: 'accept', content: { name: 'Ada' } }, confirm: { action: 'accept', content: { ok: false } } }, ALICE)
  t.equal((await client.waitFor(taskId, ['input_required'], 3000, ALICE))?.inputRequests?.['name-2']?.method, 'elicitation/create')
  await client.update(taskId, { 'name-2': { action: 'accept', content: { name: 'A' } } }, ALICE)
  t.same((await client.waitFor(taskId, ['completed'], 3000, ALICE))?.result?.content, [{ type: 'text', text: 'Ada false A' }], 'alice finishes it')
})

t.test('tasks/cancel ends a running task (signal source "task"), and is an idempotent ack once it has ended', async t => {
  const { client, gates, runs } = await taskApp(t)
  gate(gates, 'stop-me')
  const taskId = await client.create('compute', { label: 'stop-me', gate: 'stop-me' })
  const cancel = await client.cancel(taskId)
  t.equal(cancel.status, 200)
  t.same(withoutMeta(cancel.body.result), { resultType: 'complete' }, 'acknowledged with an empty result')
  t.same(runOf(runs, 'stop-me')?.aborted, { source: 'task', reason: 'tasks/cancel' }, 'the handler\'s signal aborted with a RequestCancelledError of source task')
  const cancelled = (await client.get(taskId)).body.result
  t.equal(cancelled?.status, 'cancelled')
  t.equal(cancelled?.result, undefined, 'no result')
  t.equal(cancelled?.error, undefined, 'no error')
  t.same(withoutMeta((await client.cancel(taskId)).body.result), { resultType: 'complete' }, 'cancelling again: an ack')
  t.equal((await client.get(taskId)).body.result?.status, 'cancelled')

  const finished = await client.create('compute', { label: 'finished' })
  t.equal((await client.waitFor(finished, ['completed']))?.status, 'completed')
  t.same(withoutMeta((await client.cancel(finished)).body.result), { resultType: 'complete' }, 'cancelling a completed task: an ack')
  const still = (await client.get(finished)).body.result
  t.equal(still?.status, 'completed', 'that stays completed')
  t.same(still?.result?.content, [{ type: 'text', text: 'computed finished' }], 'with its result')
  t.equal(runOf(runs, 'finished')?.aborted, undefined, 'and its handler was never aborted')

  gate(gates, 'no-asks')
  const working = await client.create('compute', { label: 'no-asks', gate: 'no-asks' })
  t.same(withoutMeta((await client.update(working, { anything: { action: 'accept', content: {} } })).body.result), { resultType: 'complete' },
    'tasks/update of a task that asks nothing: an ack')
  t.equal((await client.get(working)).body.result?.status, 'working', 'that changes nothing')
})

t.test('tasks/result and tasks/list do not exist: -32601, HTTP 404', async t => {
  const { client } = await taskApp(t)
  const taskId = await client.create('compute', { label: 'r' })
  await client.waitFor(taskId, ['completed'])
  isError(t, await client.send('tasks/result', { taskId }, { headers: { 'mcp-name': taskId } }), -32601, 404, 'tasks/result')
  isError(t, await client.send('tasks/list', {}), -32601, 404, 'tasks/list')
})

t.test('Mcp-Name must equal params.taskId: otherwise 400 -32020, and the task is not touched', async t => {
  const { client, gates, runs } = await taskApp(t)
  gate(gates, 'named')
  const taskId = await client.create('compute', { label: 'named', gate: 'named' })
  const other = await client.create('compute', { label: 'other' })
  for (const [what, name] of [['missing', undefined], ['another task\'s id', other], ['a prefix', taskId.slice(0, 10)], ['case changed', taskId.toUpperCase() === taskId ? taskId.toLowerCase() : taskId.toUpperCase()]] as const) {
    for (const method of ['tasks/get', 'tasks/cancel'] as const) {
      isError(t, await client.send(method, { taskId }, { headers: { 'mcp-name': name } }), -32020, 400, `${method}, Mcp-Name ${what}`)
    }
  }
  t.equal(runOf(runs, 'named')?.aborted, undefined, 'no cancel went through')
  t.equal((await client.get(taskId)).body.result?.status, 'working')
})

t.test('maxTasksPerScope: a scope\'s third live task is 429 -32000; other scopes are not affected; an ended task frees its place', async t => {
  const { client, gates, runs } = await taskApp(t, { maxTasksPerScope: 2, auth: { principal: request => request.headers['x-user'], required: false } })
  const first = gate(gates, 'a1')
  gate(gates, 'a2')
  const a1 = await client.create('compute', { label: 'a1', gate: 'a1' }, ALICE)
  await client.create('compute', { label: 'a2', gate: 'a2' }, ALICE)
  const refused = await client.call('compute', { label: 'a3' }, ALICE)
  isError(t, refused, -32000, 429, 'a third live task')
  t.match(refused.body.error?.message, /Too many tasks/)
  t.equal(runOf(runs, 'a3')?.afterStart, false, 'its handler did not get past startTask')
  const bobs = await client.create('compute', { label: 'b1' }, BOB)
  t.equal((await client.waitFor(bobs, ['completed'], 3000, BOB))?.status, 'completed', 'bob has his own quota')
  t.equal((await client.call('compute', { label: 'a3-again' }, ALICE)).status, 429, 'alice is still at her quota')

  first.open()
  t.equal((await client.waitFor(a1, ['completed'], 3000, ALICE))?.status, 'completed')
  const again = await client.call('compute', { label: 'a4' }, ALICE)
  t.equal(again.body.result?.resultType, 'task', 'once one has ended, alice may start another')
})

t.test('maxTasks: at the cap an ended task is dropped to make room, a live one never; nobody under its own quota is refused', async t => {
  const { client, gates } = await taskApp(t, { maxTasks: 2, auth: { principal: request => request.headers['x-user'], required: false } })
  const ended = await client.create('compute', { label: 'a' }, ALICE)
  t.equal((await client.waitFor(ended, ['completed'], 3000, ALICE))?.status, 'completed')
  gate(gates, 'b')
  const live = await client.create('compute', { label: 'b', gate: 'b' }, BOB)
  const carol = { headers: { 'x-user': 'carol' } }
  gate(gates, 'c')
  t.equal((await client.call('compute', { label: 'c', gate: 'c' }, carol)).body.result?.resultType, 'task', 'a third task while two are kept is accepted')
  isError(t, await client.get(ended, ALICE), -32602, 200, 'the ended task made room for it')
  t.equal((await client.get(live, BOB)).body.result?.status, 'working', 'the live one stays')
  const dave = { headers: { 'x-user': 'dave' } }
  t.equal((await client.call('compute', { label: 'd' }, dave)).body.result?.resultType, 'task', 'with only live tasks kept, one more is accepted too')
})

t.test('maxTaskResultBytes: a larger result fails the task; a smaller one completes', async t => {
  const { client } = await taskApp(t, { maxTaskResultBytes: 2000 })
  const small = await client.waitFor(await client.create('sized', { bytes: 100 }), ['completed', 'failed'])
  t.equal(small?.status, 'completed')
  t.equal(small?.result?.content?.[0]?.text?.length, 100)
  const large = await client.waitFor(await client.create('sized', { bytes: 5000 }), ['completed', 'failed'])
  t.equal(large?.status, 'failed', 'a result over maxTaskResultBytes fails the task')
  t.equal(large?.error?.code, -32603)
  t.match(large?.error?.message, /maxTaskResultBytes/)
  t.equal(large?.result, undefined, 'and is not kept')
  t.ok(JSON.stringify(large).length < 2000, 'the answer to tasks/get stays small')
})

t.test('taskTtlMs: a task is kept while it runs and taskTtlMs after it ends, then it is gone', async t => {
  const { client, gates } = await taskApp(t, { taskTtlMs: 200 })
  const release = gate(gates, 'long')
  const taskId = await client.create('compute', { label: 'long', gate: 'long' })
  await new Promise(resolve => setTimeout(resolve, 400))
  const running = (await client.get(taskId)).body.result
  t.equal(running?.status, 'working', 'a task running longer than its ttl is still there')
  t.equal(running?.ttlMs, 200)
  release.open()
  t.equal((await client.waitFor(taskId, ['completed']))?.status, 'completed', 'just after it ended: completed')
  await new Promise(resolve => setTimeout(resolve, 300))
  for (const answer of [await client.get(taskId), await client.update(taskId, {}), await client.cancel(taskId)]) {
    isError(t, answer, -32602, 200, 'expired')
    t.match(answer.body.error?.message, /Task not found/)
  }
})

t.test('malformed tasks/* params are 4xx JSON-RPC errors, never a 5xx, and touch nothing', async t => {
  const { client } = await taskApp(t)
  const taskId = await client.create('ask')
  const asking = await client.waitFor(taskId, ['input_required'])
  const methods = [['tasks/get', {}], ['tasks/update', { inputResponses: {} }], ['tasks/cancel', {}]] as const

  // A taskId that is not a string cannot be mirrored in Mcp-Name: the header check (SEP-2243) answers first.
  const notStrings: Array<[string, Record<string, unknown>, string | undefined]> = [
    ['missing', {}, undefined], ['missing, with a header', {}, taskId], ['a number', { taskId: 5 }, '5'], ['an object', { taskId: { id: taskId } }, taskId], ['null', { taskId: null }, 'null']
  ]
  for (const [method, extra] of methods) {
    for (const [what, params, name] of notStrings) {
      isError(t, await client.send(method, { ...extra, ...params }, { headers: { 'mcp-name': name } }), -32020, 400, `${method}, taskId ${what}`)
    }
    const long = 'A'.repeat(10_000)
    const answer = await client.send(method, { ...extra, taskId: long })
    isError(t, answer, -32602, 200, `${method}, a 10 kB taskId`)
    t.ok(answer.body.error!.message.length < 200, 'the error does not echo it')
  }
  for (const inputResponses of [null, [], 'x', 7, true]) {
    const answer = await client.send('tasks/update', { taskId, inputResponses })
    isError(t, answer, -32602, 200, `inputResponses ${JSON.stringify(inputResponses)}`)
  }
  isError(t, await client.send('tasks/update', { taskId }), -32602, 200, 'inputResponses missing')
  isError(t, await client.send('tasks/update', { taskId, inputResponses: [{ action: 'accept', content: { name: 'x' } }] }), -32602, 200, 'inputResponses an array of answers')
  const after = (await client.get(taskId)).body.result
  t.equal(after?.status, 'input_required', 'the task still waits')
  t.same(after?.inputRequests, asking?.inputRequests, 'for all of its questions')
})

t.test('server/discover advertises the tasks extension only when a tool declares task support', async t => {
  const plain = await buildApp(t, {}, registerEcho)
  const withoutTasks = json(await postModern(plain, 'server/discover'))
  t.equal(withoutTasks.result?.capabilities?.extensions, undefined, 'no task tool: no extension')
  const { app } = await taskApp(t)
  const discovered = json(await postModern(app, 'server/discover'))
  t.same(discovered.result?.capabilities?.extensions, { [TASKS_EXTENSION]: {} }, 'a task tool: the extension')
  t.same(discovered.result?.capabilities?.tools, { listChanged: true }, 'alongside tools')
  const initialized = json(await postLegacy(app, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } }))
  t.equal(initialized.result?.capabilities?.extensions, undefined, 'the legacy era has no extension to advertise')
})

t.test('a legacy params.task on tools/call is ignored: no 2025-11-25 task is made', async t => {
  const { app, client } = await taskApp(t)
  const modern = await client.send('tools/call', { name: 'compute', arguments: { label: 'm' }, task: { ttl: 60_000 } }, { capabilities: WITHOUT_TASKS })
  t.equal(modern.body.result?.resultType, 'complete', '2026-07-28 without the extension: an ordinary result')
  t.same(modern.body.result?.content, [{ type: 'text', text: 'computed m' }])
  const legacy = json(await postLegacy(app, 'tools/call', { name: 'compute', arguments: { label: 'l' }, task: { ttl: 60_000 } }))
  t.same(legacy.result, { content: [{ type: 'text', text: 'computed l' }], structuredContent: { label: 'l' } }, 'legacy era: the plain result, no task')
  const withExtension = await client.send('tools/call', { name: 'compute', arguments: { label: 'e' }, task: { ttl: 5 } })
  t.equal(withExtension.body.result?.resultType, 'task', 'with the extension: a task as always')
  t.equal(withExtension.body.result?.ttlMs, TTL_MS, 'whose ttl is the server\'s, not the requested one')
})

t.test('ctx.startTask() called twice makes one task, which ends with the handler\'s result', async t => {
  const { client } = await taskApp(t)
  for (const concurrent of [false, true]) {
    const what = concurrent ? 'at once (Promise.all)' : 'one after the other'
    const taskId = await client.create('twice', { concurrent })
    const done = await client.waitFor(taskId, ['completed', 'failed', 'cancelled'])
    t.equal(done?.status, 'completed', `${what}: completed`)
    t.same(done?.result?.content, [{ type: 'text', text: 'done' }], `${what}: with the handler's result (not another CreateTaskResult)`)
  }
})

t.test('progress inside a task shows in tasks/get as its statusMessage (the extension delivers no progress notifications)', async t => {
  const { client, gates } = await taskApp(t)
  const next = gate(gates, 'render')
  const end = gate(gates, 'render:end')
  const taskId = await client.create('steps', { gate: 'render' })
  t.ok(await waitFor(async () => (await client.get(taskId)).body.result?.statusMessage === 'Rendering (1/2)', 2000), 'progress 1 of 2 with its message')
  t.equal((await client.get(taskId)).body.result?.status, 'working')
  next.open()
  t.ok(await waitFor(async () => (await client.get(taskId)).body.result?.statusMessage === 'Progress: 2', 2000), 'progress without message or total')
  end.open()
  const done = await client.waitFor(taskId, ['completed'])
  t.same(done?.result?.content, [{ type: 'text', text: 'rendered' }], 'the task completes with its result')
})

t.test('tasks/cancel sent 1000 times: every one acknowledged, the handler cancelled once, the task cancelled; an unknown id stays unknown', async t => {
  const { app, client, gates, runs } = await taskApp(t, { metrics: {} })
  gate(gates, 'many-cancels')
  const taskId = await client.create('compute', { label: 'many-cancels', gate: 'many-cancels' })
  const answers: RpcAnswer[] = []
  for (let batch = 0; batch < 10; batch++) {
    answers.push(...await Promise.all(Array.from({ length: 100 }, async () => await client.cancel(taskId))))
  }
  t.equal(answers.filter(answer => answer.status === 200 && answer.body.result?.resultType === 'complete').length, 1000, 'all 1000 acknowledged')
  t.same(runOf(runs, 'many-cancels')?.aborted, { source: 'task', reason: 'tasks/cancel' })
  t.equal((await client.get(taskId)).body.result?.status, 'cancelled')
  const exposition = (await app.inject({ method: 'GET', url: '/metrics' })).body
  t.match(exposition, /mcp_cancellations_total\{source="task",result="recorded"\} 1\n/, 'counted as one cancellation')
  t.match(exposition, /mcp_tasks_total\{outcome="cancelled"\} 1\n/, 'and one cancelled task')
  const unknown = await Promise.all(Array.from({ length: 100 }, async () => await client.cancel('AAAAAAAAAAAAAAAAAAAAAA')))
  t.equal(unknown.filter(answer => answer.status === 200 && answer.body.error?.code === -32602).length, 100, 'an unknown id: -32602 each time')
  t.equal((await client.get('AAAAAAAAAAAAAAAAAAAAAA')).body.error?.code, -32602, 'and it is still unknown')
})
