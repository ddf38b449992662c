/**
 * What a client answers is checked beyond its shape (issue 19): an accepted form elicitation against the
 * `requestedSchema` the handler sent and the value kinds `ElicitResult` allows, a sampling result and
 * roots against what the specification's result types require. Through `fastify.inject`:
 * - 2026-07-28 rounds: such an answer fails the ask with `ClientInputError` (`invalid`), which the tool
 *   can catch (else an `isError` result); a wrong shape stays -32602;
 * - tasks: `tasks/update` with such an answer is acknowledged and answers nothing (the ask stays
 *   outstanding, as for a wrong shape);
 * - a `requestedSchema` that does not compile is the handler's bug, at ask time;
 * - the compiled schemas are bounded and still check answers once evicted.
 * Legacy asks over real sockets are in test/e2e/legacy-asks.test.ts, the 2.x client in test/e2e/input-rounds.test.ts.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { ClientInputError, elicitation, type McpCancellationOptions } from '../../lib/index.js'
import { AnswerChecks } from '../../lib/input/answer-checks.js'
import type { InputOutcome, RequestObserver } from '../../lib/observability/observer.js'
import type { InputKind } from '../../lib/protocol/input-requests.js'
import { noopObserver } from '../../lib/observability/observer.js'
import { buildApp, json, postModern } from '../helpers/inject.js'
import { META } from '../helpers/jsonrpc.js'
import { parseExposition } from '../helpers/metrics.js'
import { injectSender, TaskClient, TASKS_EXTENSION } from '../helpers/tasks.js'
import type { Teardown } from '../helpers/teardown.js'

const SECRET = 'answer-checks-test-secret-0123456789abcdef'
const ALL = { elicitation: {}, sampling: {}, roots: {} }
const SIGNUP_SCHEMA = {
  type: 'object',
  properties: {
    username: { type: 'string', minLength: 1 },
    email: { type: 'string', format: 'email' },
    age: { type: 'integer', minimum: 0 }
  },
  required: ['username', 'email']
}
const VALID_SIGNUP = { username: 'ada', email: 'ada@example.com' }
const SAMPLED = { role: 'assistant', content: { type: 'text', text: 'a summary' }, model: 'test-model' }

/** Accepted forms that break SIGNUP_SCHEMA or the value kinds ElicitResult allows. */
const BAD_SIGNUPS: Array<[string, unknown]> = [
  ['an email that is a number', { username: 'ada', email: 42 }],
  ['a username that is an operator object', { username: { $gt: '' }, email: 'ada@example.com' }],
  ['a required property missing', { username: 'ada' }],
  ['an email that is not one', { username: 'ada', email: 'not-an-email' }],
  ['an integer below its minimum', { ...VALID_SIGNUP, age: -1 }],
  ['a number where an integer is asked', { ...VALID_SIGNUP, age: 1.5 }],
  ['an extra property holding an object', { ...VALID_SIGNUP, extra: { nested: true } }],
  ['no content at all', undefined]
]

const BAD_SAMPLES: Array<[string, Record<string, unknown>]> = [
  ['no model', { role: 'assistant', content: { type: 'text', text: 'x' } }],
  ['a model that is a number', { ...SAMPLED, model: 5 }],
  ['a role the specification does not have', { ...SAMPLED, role: 'system' }],
  ['a text block without text', { ...SAMPLED, content: { type: 'text' } }],
  ['an image block without data', { ...SAMPLED, content: { type: 'image', mimeType: 'image/png' } }],
  ['content that is a string', { ...SAMPLED, content: 'a summary' }],
  ['an empty array of blocks', { ...SAMPLED, content: [] }],
  ['a block of an unknown type', { ...SAMPLED, content: { type: 'video', data: 'x' } }],
  ['a stopReason that is not a string', { ...SAMPLED, stopReason: 1 }]
]

const BAD_ROOTS: Array<[string, Record<string, unknown>]> = [
  ['a root that is not a file:// URI', { roots: [{ uri: 'https://example.com/repo' }] }],
  ['a root name that is a number', { roots: [{ uri: 'file:///a', name: 5 }] }]
]

const text = (value: string): { content: Array<{ type: 'text', text: string }> } => ({ content: [{ type: 'text', text: value }] })

/**
 * Tools that ask one thing each: `signup` (lets a failed ask through), `careful_signup` (catches a
 * ClientInputError and says so), `summarize` (sampling), `where` (roots), `broken` (a requestedSchema that
 * does not compile), the prompt `signup_prompt`, and the task tool `task_signup`.
 */
async function app (t: Teardown, options: McpCancellationOptions = {}): Promise<FastifyInstance> {
  return await buildApp(t, { secret: SECRET, ...options }, app => {
    app.mcp.tool({
      name: 'signup',
      handler: async (_args, ctx) => text(JSON.stringify((await ctx.elicit({ message: 'Sign up', requestedSchema: SIGNUP_SCHEMA })).content ?? null))
    })
    app.mcp.tool({
      name: 'careful_signup',
      handler: async (_args, ctx) => {
        try {
          return text(JSON.stringify((await ctx.elicit({ message: 'Sign up', requestedSchema: SIGNUP_SCHEMA })).content))
        } catch (error) {
          if (error instanceof ClientInputError) return text(`caught ${error.failure}`)
          throw error
        }
      }
    })
    app.mcp.tool({
      name: 'summarize',
      handler: async (_args, ctx) => text((await ctx.sample({ messages: [{ role: 'user', content: { type: 'text', text: 'Summarize' } }], maxTokens: 10 })).model)
    })
    app.mcp.tool({
      name: 'where',
      handler: async (_args, ctx) => text((await ctx.roots()).map(root => root.uri).join(','))
    })
    app.mcp.tool({
      name: 'broken',
      handler: async (_args, ctx) => text(String((await ctx.elicit({ message: 'Name?', requestedSchema: { type: 'object', properties: { name: { type: 'strnig' } } } })).action))
    })
    app.mcp.prompt({
      name: 'signup_prompt',
      handler: async (_args, ctx) => {
        const form = await ctx.elicit({ message: 'Sign up', requestedSchema: SIGNUP_SCHEMA })
        return { messages: [{ role: 'user', content: { type: 'text', text: `Welcome ${String(form.content?.username)}` } }] }
      }
    })
    app.mcp.tool({
      name: 'task_signup',
      task: 'optional',
      handler: async (_args, ctx) => {
        await ctx.startTask()
        const { form } = await ctx.input({ form: elicitation({ message: 'Sign up', requestedSchema: SIGNUP_SCHEMA }) })
        return text(JSON.stringify(form.content))
      }
    })
  })
}

/** A modern tools/call of `name` carrying `inputResponses` (no requestState: answers by key count without one). */
async function answer (fastify: FastifyInstance, name: string, inputResponses?: Record<string, unknown>) {
  const response = await postModern(fastify, 'tools/call', { name, ...(inputResponses === undefined ? {} : { inputResponses }) },
    { meta: { [META.clientCapabilities]: ALL } })
  return { status: response.statusCode, ...json(response) }
}

async function invalidCount (fastify: FastifyInstance, kind: InputKind): Promise<number> {
  return parseExposition(await fastify.mcpMetrics!.metrics()).series('mcp_input_requests_total')[`kind=${kind},outcome=invalid`] ?? 0
}

t.test('2026-07-28: an accepted form that breaks the requested schema never reaches the tool as valid', async t => {
  const fastify = await app(t)
  for (const [why, content] of BAD_SIGNUPS) {
    const form = { action: 'accept', ...(content === undefined ? {} : { content }) }
    const through = await answer(fastify, 'signup', { 'elicitation-1': form })
    t.equal(through.status, 200, `${why}: an ordinary answer`)
    t.equal(through.result?.isError, true, `${why}: the tool that lets the ClientInputError through returns isError`)
    t.match(through.result?.content?.[0]?.text, /inputResponses\.elicitation-1 is not a valid answer to elicitation\/create: /, `${why}: its message says why`)
    t.notMatch(through.result?.content?.[0]?.text, /\$gt|nested|not-an-email/, `${why}: without echoing the answer`)
    const caught = await answer(fastify, 'careful_signup', { 'elicitation-1': form })
    t.same(caught.result?.content, [{ type: 'text', text: 'caught invalid' }], `${why}: a tool can catch it (failure 'invalid')`)
  }
  t.equal(await invalidCount(fastify, 'elicitation'), BAD_SIGNUPS.length * 2, 'each counted invalid')

  const valid = await answer(fastify, 'signup', { 'elicitation-1': { action: 'accept', content: { ...VALID_SIGNUP, age: 36 } } })
  t.same(valid.result?.content, [{ type: 'text', text: JSON.stringify({ ...VALID_SIGNUP, age: 36 }) }], 'a valid form reaches the tool')
  const declined = await answer(fastify, 'signup', { 'elicitation-1': { action: 'decline' } })
  t.same(declined.result?.content, [{ type: 'text', text: 'null' }], 'a declined form has nothing to check')
  // A wrong shape is still the request's error, as before.
  t.equal((await answer(fastify, 'signup', { 'elicitation-1': { action: 'maybe' } })).error?.code, -32602, 'a wrong shape: -32602')
})

t.test('2026-07-28: a prompt whose answer breaks the requested schema is the client\'s error, -32602', async t => {
  const fastify = await app(t)
  const prompt = async (inputResponses: Record<string, unknown>) =>
    json(await postModern(fastify, 'prompts/get', { name: 'signup_prompt', inputResponses }, { meta: { [META.clientCapabilities]: ALL } }))
  const refused = await prompt({ 'elicitation-1': { action: 'accept', content: { username: 'ada', email: 42 } } })
  t.equal(refused.error?.code, -32602, 'Invalid params, not an internal error')
  t.match(refused.error?.message, /inputResponses\.elicitation-1 is not a valid answer to elicitation\/create: the content does not match the requested schema: \/email must be string/)
  t.equal(refused.result, undefined)
  const valid = await prompt({ 'elicitation-1': { action: 'accept', content: VALID_SIGNUP } })
  t.same(valid.result?.messages, [{ role: 'user', content: { type: 'text', text: 'Welcome ada' } }])
})

t.test('2026-07-28: sampling results and roots are checked against their result types', async t => {
  const fastify = await app(t)
  for (const [why, result] of BAD_SAMPLES) {
    const response = await answer(fastify, 'summarize', { 'sampling-1': result })
    t.equal(response.result?.isError, true, `${why}: isError`)
    t.match(response.result?.content?.[0]?.text, /is not a valid answer to sampling\/createMessage: /, why)
  }
  t.same((await answer(fastify, 'summarize', { 'sampling-1': SAMPLED })).result?.content, [{ type: 'text', text: 'test-model' }], 'a valid result')
  t.same((await answer(fastify, 'summarize', { 'sampling-1': { ...SAMPLED, content: [{ type: 'text', text: 'a' }, { type: 'tool_use', id: 'u1', name: 'n', input: {} }] } })).result?.content,
    [{ type: 'text', text: 'test-model' }], 'an array of blocks')
  for (const [why, result] of BAD_ROOTS) {
    const response = await answer(fastify, 'where', { 'roots-1': result })
    t.equal(response.result?.isError, true, `${why}: isError`)
    t.match(response.result?.content?.[0]?.text, /is not a valid answer to roots\/list: /, why)
  }
  t.same((await answer(fastify, 'where', { 'roots-1': { roots: [{ uri: 'file:///a', name: 'a' }] } })).result?.content, [{ type: 'text', text: 'file:///a' }])
  t.equal(await invalidCount(fastify, 'sampling'), BAD_SAMPLES.length)
  t.equal(await invalidCount(fastify, 'roots'), BAD_ROOTS.length)
})

t.test('a requestedSchema that does not compile is the handler\'s bug, found when it asks', async t => {
  const fastify = await app(t)
  const first = await answer(fastify, 'broken')
  t.equal(first.error?.code, -32603, 'round 1 fails: nothing is asked')
  t.equal(first.error?.message, 'Internal error', 'without detail')
  t.equal(first.result, undefined, 'no input_required')
})

t.test('tasks/update: an answer that breaks the requested schema is acknowledged and answers nothing', async t => {
  const fastify = await app(t)
  const client = new TaskClient(injectSender(fastify))
  const capabilities = { options: { capabilities: { elicitation: {}, extensions: { [TASKS_EXTENSION]: {} } } } }
  const taskId = await client.create('task_signup', {}, capabilities.options)
  const asking = await client.waitFor(taskId, ['input_required'], 3000, capabilities.options)
  t.same(Object.keys(asking?.inputRequests ?? {}), ['form'])
  for (const [why, content] of BAD_SIGNUPS) {
    const update = await client.update(taskId, { form: { action: 'accept', content } }, capabilities.options)
    t.equal(update.status, 200, `${why}: acknowledged`)
    t.equal(update.body.error, undefined, `${why}: no error`)
    const task = (await client.get(taskId, capabilities.options)).body.result
    t.equal(task?.status, 'input_required', `${why}: the task still asks`)
    t.same(Object.keys(task?.inputRequests ?? {}), ['form'], `${why}: the same question`)
  }
  t.equal(await invalidCount(fastify, 'elicitation'), BAD_SIGNUPS.length, 'each counted invalid')
  await client.update(taskId, { form: { action: 'accept', content: VALID_SIGNUP } }, capabilities.options)
  const done = await client.waitFor(taskId, ['completed', 'failed'], 3000, capabilities.options)
  t.equal(done?.status, 'completed')
  t.same(done?.result?.content, [{ type: 'text', text: JSON.stringify(VALID_SIGNUP) }], 'the valid answer reached the tool')
})

t.test('compiled requested schemas are bounded; an evicted one is compiled again when an answer needs it', async t => {
  const counted: Array<[InputKind, InputOutcome]> = []
  const observer: RequestObserver = { ...noopObserver, inputAnswered: (kind, outcome) => { counted.push([kind, outcome]) } }
  const checks = new AnswerChecks(observer)
  const ask = (n: number) => elicitation({ message: 'n?', requestedSchema: { type: 'object', properties: { n: { type: 'integer', const: n } }, required: ['n'] } })
  for (let n = 0; n < 300; n++) checks.asked({ form: ask(n) }, ALL)
  t.equal(checks.compiledSchemas, 256, 'at most 256 kept')
  checks.asked({ form: ask(299) }, ALL)
  t.equal(checks.compiledSchemas, 256, 'asking a kept one again compiles nothing')
  t.same(checks.received(ask(0), 'result', { action: 'accept', content: { n: 0 } }), { action: 'accept', content: { n: 0 } }, 'the first, evicted, still checks')
  t.throws(() => checks.received(ask(0), 'result', { action: 'accept', content: { n: 1 } }), { name: 'ClientInputError', failure: 'invalid' })
  t.same(counted, [['elicitation', 'answered'], ['elicitation', 'invalid']])
})
