/**
 * 2026-07-28 multi-round-trip requests (SEP-2322) through `fastify.inject`: a handler's asks end the
 * round with `input_required`; the retry carries the answers and a sealed `requestState` that binds
 * the request, its arguments and scope, expires, and is checked before the handler may run again.
 */
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import mcpCancellation, { elicitation, rootsList, sampling, type McpCancellationOptions } from '../../lib/index.js'
import { buildApp, json, postLegacy, postModern, SERVER_INFO } from '../helpers/inject.js'
import { hasStackTrace, META } from '../helpers/jsonrpc.js'
import { captureLogs } from '../helpers/logs.js'
import { parseExposition } from '../helpers/metrics.js'
import type { Teardown } from '../helpers/teardown.js'

const SECRET = 'input-rounds-test-secret-0123456789abcdef'
const ALL = { elicitation: {}, sampling: {}, roots: {} }
const NAME_SCHEMA = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }
const ACCEPT = { action: 'accept', content: { name: 'Ada' } }
const SAMPLED = { role: 'assistant', content: { type: 'text', text: 'a summary' }, model: 'test-model' }

interface Runs { greet: number, trip: number }

/** An app with `greet` (one elicitation), `trip` (two rounds, ctx.state across them), `gather` (three kinds at once), `briefing` (a prompt). */
async function app (t: Teardown, options: McpCancellationOptions = {}): Promise<{ app: FastifyInstance, runs: Runs }> {
  const runs: Runs = { greet: 0, trip: 0 }
  const fastify = await buildApp(t, { secret: SECRET, ...options }, app => {
    app.mcp.tool({
      name: 'greet',
      inputSchema: { type: 'object', properties: { greeting: { type: 'string' } } },
      handler: async ({ greeting = 'Hello' }, ctx) => {
        runs.greet++
        const answer = await ctx.elicit({ message: 'Your name?', requestedSchema: NAME_SCHEMA })
        return { content: [{ type: 'text', text: answer.action === 'accept' ? `${greeting}, ${String(answer.content?.name)}` : answer.action }] }
      }
    })
    app.mcp.tool({
      name: 'trip',
      handler: async (_args, ctx) => {
        runs.trip++
        ctx.state ??= { started: runs.trip }
        const { where } = await ctx.input({ where: elicitation({ message: 'Where to?', requestedSchema: { type: 'object' } }) })
        const { when } = await ctx.input({ when: elicitation({ message: 'When?', requestedSchema: { type: 'object' } }) })
        return { content: [{ type: 'text', text: JSON.stringify({ where: where.content, when: when.content, state: ctx.state }) }] }
      }
    })
    app.mcp.tool({
      name: 'gather',
      handler: async (_args, ctx) => {
        const answers = await ctx.input({ name: elicitation({ message: 'Name?', requestedSchema: NAME_SCHEMA }), summary: sampling({ messages: [], maxTokens: 10 }), where: rootsList() })
        return { content: [{ type: 'text', text: `${String(answers.name.content?.name)} ${answers.summary.model} ${answers.where.roots.length}` }] }
      }
    })
    app.mcp.prompt({
      name: 'briefing',
      handler: async (_args, ctx) => {
        const roots = await ctx.roots()
        return { messages: [{ role: 'user', content: { type: 'text', text: `roots: ${roots.map(r => r.uri).join(', ')}` } }] }
      }
    })
  })
  return { app: fastify, runs }
}

async function call (fastify: FastifyInstance, name: string, extra: Record<string, unknown> = {}, capabilities: Record<string, unknown> = ALL, headers: Record<string, string> = {}) {
  const response = await postModern(fastify, 'tools/call', { name, ...extra }, { meta: { [META.clientCapabilities]: capabilities }, headers })
  return { status: response.statusCode, ...json(response) }
}

t.test('round 1 ends with input_required; the retry with the answer and the state completes', async t => {
  const { app: fastify, runs } = await app(t)
  const first = await call(fastify, 'greet', { arguments: { greeting: 'Hi' } })
  t.equal(first.status, 200)
  t.equal(first.result.resultType, 'input_required')
  t.same(first.result.inputRequests, { 'elicitation-1': { method: 'elicitation/create', params: { message: 'Your name?', requestedSchema: NAME_SCHEMA } } })
  t.type(first.result.requestState, 'string')
  t.ok(first.result._meta[META.serverInfo] !== undefined, 'a modern result like any other')

  const second = await call(fastify, 'greet', { arguments: { greeting: 'Hi' }, inputResponses: { 'elicitation-1': ACCEPT }, requestState: first.result.requestState })
  t.equal(second.result.resultType, 'complete')
  t.same(second.result.content, [{ type: 'text', text: 'Hi, Ada' }])
  t.equal(runs.greet, 2, 'the handler ran once per round')
})

t.test('answers without a state complete too; missing ones ask again; extra keys are ignored', async t => {
  const { app: fastify } = await app(t)
  const wrongKey = await call(fastify, 'greet', { inputResponses: { wrong_key: ACCEPT } })
  t.equal(wrongKey.result.resultType, 'input_required', 'a missing answer is another round, not an error')
  const extra = await call(fastify, 'greet', { inputResponses: { 'elicitation-1': ACCEPT, other: { any: 1 }, more: null } })
  t.same(extra.result.content, [{ type: 'text', text: 'Hello, Ada' }])
})

t.test('several rounds: the state changes every round, carries earlier answers and ctx.state', async t => {
  const { app: fastify, runs } = await app(t)
  const first = await call(fastify, 'trip')
  t.same(Object.keys(first.result.inputRequests), ['where'])
  const second = await call(fastify, 'trip', { inputResponses: { where: { action: 'accept', content: { city: 'Oslo' } } }, requestState: first.result.requestState })
  t.equal(second.result.resultType, 'input_required')
  t.same(Object.keys(second.result.inputRequests), ['when'])
  t.not(second.result.requestState, first.result.requestState, 'a fresh state')
  const third = await call(fastify, 'trip', { inputResponses: { when: { action: 'accept', content: { day: 'Monday' } } }, requestState: second.result.requestState })
  t.same(JSON.parse(third.result.content[0].text), { where: { city: 'Oslo' }, when: { day: 'Monday' }, state: { started: 1 } },
    'the first answer came through the state, ctx.state from round 1')
  t.equal(runs.trip, 3)
})

t.test('an answer counts only for the question it answered: a handler that asks in another order is asked again', async t => {
  const fastify = await buildApp(t, { secret: SECRET }, app => {
    app.mcp.tool({
      name: 'profile',
      handler: async (_args, ctx) => {
        // Asks the name only until it is kept in ctx.state: the colour question then takes the first automatic key.
        if (ctx.state === undefined) ctx.state = (await ctx.elicit({ message: 'Name?', requestedSchema: NAME_SCHEMA })).content
        const color = await ctx.elicit({ message: 'Colour?', requestedSchema: { type: 'object' } })
        return { content: [{ type: 'text', text: JSON.stringify({ state: ctx.state, color: color.content }) }] }
      }
    })
  })
  const first = await call(fastify, 'profile')
  t.same(Object.keys(first.result.inputRequests), ['elicitation-1'])
  const second = await call(fastify, 'profile', { inputResponses: { 'elicitation-1': ACCEPT }, requestState: first.result.requestState })
  t.same(Object.keys(second.result.inputRequests), ['elicitation-2'], 'round 2 asks the colour')
  const third = await call(fastify, 'profile', { inputResponses: { 'elicitation-2': { action: 'accept', content: { color: 'blue' } } }, requestState: second.result.requestState })
  t.equal(third.result.resultType, 'input_required', 'round 3 asks the colour as elicitation-1: the name answered that key, so it is asked again, not answered with the name')
  t.equal(third.result.inputRequests['elicitation-1'].params.message, 'Colour?')
  const fourth = await call(fastify, 'profile', { inputResponses: { 'elicitation-1': { action: 'accept', content: { color: 'blue' } } }, requestState: third.result.requestState })
  t.same(JSON.parse(fourth.result.content[0].text), { state: { name: 'Ada' }, color: { color: 'blue' } })
})

t.test('three kinds at once, and a prompt that asks', async t => {
  const { app: fastify } = await app(t)
  const first = await call(fastify, 'gather')
  t.same(Object.values(first.result.inputRequests).map(r => (r as { method: string }).method), ['elicitation/create', 'sampling/createMessage', 'roots/list'])
  const done = await call(fastify, 'gather', { inputResponses: { name: ACCEPT, summary: SAMPLED, where: { roots: [{ uri: 'file:///a' }] } }, requestState: first.result.requestState })
  t.same(done.result.content, [{ type: 'text', text: 'Ada test-model 1' }])

  const prompt = json(await postModern(fastify, 'prompts/get', { name: 'briefing' }, { meta: { [META.clientCapabilities]: ALL } }))
  t.equal(prompt.result.resultType, 'input_required')
  const answered = json(await postModern(fastify, 'prompts/get', { name: 'briefing', inputResponses: { 'roots-1': { roots: [{ uri: 'file:///r' }] } }, requestState: prompt.result.requestState },
    { meta: { [META.clientCapabilities]: ALL } }))
  t.same(answered.result.messages, [{ role: 'user', content: { type: 'text', text: 'roots: file:///r' } }])
})

t.test('a state that is tampered, for other arguments, another scope, expired or too large is -32602 and the handler never runs', async t => {
  const { app: fastify, runs } = await app(t, { auth: { principal: request => request.headers['x-user'], required: false }, inputRoundTtlMs: 300 })
  const first = await call(fastify, 'greet', { arguments: { greeting: 'Hi' } }, ALL, { 'x-user': 'alice' })
  const state = first.result.requestState as string
  const answers = { 'elicitation-1': ACCEPT }
  const refused = async (why: string, extra: Record<string, unknown>, headers: Record<string, string> = { 'x-user': 'alice' }) => {
    const before = runs.greet
    const response = await call(fastify, 'greet', { inputResponses: answers, ...extra }, ALL, headers)
    t.equal(response.error?.code, -32602, `${why}: -32602`)
    t.equal(response.result, undefined, `${why}: no result`)
    t.equal(runs.greet, before, `${why}: the handler did not run`)
  }
  await refused('tampered', { arguments: { greeting: 'Hi' }, requestState: `${state}-TAMPERED` })
  await refused('a flipped payload character', { arguments: { greeting: 'Hi' }, requestState: (state[0] === 'e' ? 'f' : 'e') + state.slice(1) })
  await refused('other arguments', { arguments: { greeting: 'Bye' }, requestState: state })
  await refused('another principal', { arguments: { greeting: 'Hi' }, requestState: state }, { 'x-user': 'mallory' })
  await refused('anonymous', { arguments: { greeting: 'Hi' }, requestState: state }, {})
  await refused('not a string', { arguments: { greeting: 'Hi' }, requestState: 42 })
  await refused('empty', { arguments: { greeting: 'Hi' }, requestState: '' })
  await refused('not base64url', { arguments: { greeting: 'Hi' }, requestState: `${state.replace(/^./, '!')}` })
  await refused('over maxRequestStateBytes', { arguments: { greeting: 'Hi' }, requestState: 'a'.repeat(100_000) })
  await new Promise(resolve => setTimeout(resolve, 350))
  await refused('expired', { arguments: { greeting: 'Hi' }, requestState: state })
})

t.test('another node with the same secret continues the round; another secret does not', async t => {
  const { app: a } = await app(t)
  const { app: b } = await app(t)
  const { app: c } = await app(t, { secret: 'another-secret-of-at-least-32-bytes!!' })
  const first = await call(a, 'greet')
  const onB = await call(b, 'greet', { inputResponses: { 'elicitation-1': ACCEPT }, requestState: first.result.requestState })
  t.same(onB.result.content, [{ type: 'text', text: 'Hello, Ada' }], 'node B completes what node A started')
  const onC = await call(c, 'greet', { inputResponses: { 'elicitation-1': ACCEPT }, requestState: first.result.requestState })
  t.equal(onC.error?.code, -32602, 'a node with another secret refuses the state')
})

t.test('malformed inputResponses or answers are -32602, never a result', async t => {
  const { app: fastify } = await app(t)
  for (const inputResponses of [null, [], 'x', 7]) {
    const response = await call(fastify, 'greet', { inputResponses })
    t.equal(response.error?.code, -32602, `inputResponses ${JSON.stringify(inputResponses)}`)
  }
  // The last two answer other kinds (sampling, roots) than the elicitation asked.
  for (const answer of [12345, 'Ada', { action: 'maybe' }, { action: 'accept', content: 'x' }, null, SAMPLED, { roots: [] }]) {
    const response = await call(fastify, 'greet', { inputResponses: { 'elicitation-1': answer } })
    t.equal(response.error?.code, -32602, `answer ${JSON.stringify(answer)}`)
    t.equal(response.result, undefined)
  }
})

t.test('asking for a capability the client did not declare is -32021 with HTTP 400', async t => {
  const { app: fastify } = await app(t)
  const response = await call(fastify, 'greet', {}, { sampling: {} })
  t.equal(response.status, 400)
  t.equal(response.error?.code, -32021)
  t.same(response.error?.data, { requiredCapabilities: { elicitation: {} } })
})

t.test('a legacy response that cannot stream cannot ask: the tool gets an isError result, never a round', async t => {
  const { app: fastify } = await app(t)
  const response = json(await postLegacy(fastify, 'tools/call', { name: 'greet' }, { headers: { accept: 'application/json' } }))
  t.equal(response.result?.isError, true)
  t.match(response.result?.content?.[0]?.text, /cannot carry a request/)
  t.equal(response.result?.resultType, undefined, 'no input_required in the legacy era')
})

t.test('mcp_input_requests_total counts each answer once, when it arrives, by kind and outcome', async t => {
  const { app: fastify } = await app(t)
  const first = await call(fastify, 'gather')
  await call(fastify, 'gather', { inputResponses: { name: ACCEPT, summary: SAMPLED, where: { roots: [] } }, requestState: first.result.requestState })
  const trip = await call(fastify, 'trip')
  const trip2 = await call(fastify, 'trip', { inputResponses: { where: { action: 'decline' } }, requestState: trip.result.requestState })
  // Round 3 replays the declined answer from the state: it is not counted again.
  await call(fastify, 'trip', { inputResponses: { when: { action: 'accept', content: {} } }, requestState: trip2.result.requestState })
  await call(fastify, 'greet', { inputResponses: { 'elicitation-1': 12345 } })
  const exposition = parseExposition(await fastify.mcpMetrics!.metrics())
  t.strictSame(exposition.series('mcp_input_requests_total'), {
    'kind=elicitation,outcome=answered': 2,
    'kind=elicitation,outcome=declined': 1,
    'kind=elicitation,outcome=invalid': 1,
    'kind=roots,outcome=answered': 1,
    'kind=sampling,outcome=answered': 1
  })
})

/** An app whose requests' log lines (at debug and above) are kept, with `trip` (two rounds) and `remember` (an answer copied into ctx.state). */
async function loggedApp (t: Teardown, options: McpCancellationOptions = {}): Promise<{ app: FastifyInstance, lines: () => Array<Record<string, unknown>> }> {
  const logs = captureLogs('debug')
  const fastify = Fastify(logs.options)
  t.teardown(() => fastify.close())
  await fastify.register(mcpCancellation, { serverInfo: SERVER_INFO, secret: SECRET, ...options })
  fastify.mcp.tool({
    name: 'trip',
    handler: async (_args, ctx) => {
      const { where } = await ctx.input({ where: elicitation({ message: 'Where to?', requestedSchema: { type: 'object' } }) })
      const { when } = await ctx.input({ when: elicitation({ message: 'When?', requestedSchema: { type: 'object' } }) })
      return { content: [{ type: 'text', text: JSON.stringify({ where: where.content, when: when.content }) }] }
    }
  })
  fastify.mcp.tool({
    name: 'remember',
    handler: async (_args, ctx) => {
      // What the README suggests: carry what the handler needs in ctx.state (here, a client's answer).
      ctx.state ??= (await ctx.elicit({ message: 'Note?', requestedSchema: { type: 'object' } })).content
      const more = await ctx.elicit({ message: 'More?', requestedSchema: { type: 'object' } })
      return { content: [{ type: 'text', text: JSON.stringify({ state: ctx.state, more: more.content }) }] }
    }
  })
  await fastify.ready()
  // Only what the requests log: registration may warn about the deployment.
  const registration = logs.lines().length
  return { app: fastify, lines: () => logs.lines().slice(registration) }
}

/** What an operator and a client would notice of a refused round: none of it may look like a server fault. */
function refusedAsClientInput (t: Test, response: Awaited<ReturnType<typeof call>>, raw: string, lines: Array<Record<string, unknown>>, why: string): void {
  t.equal(response.status, 200, `${why}: no 5xx, an ordinary JSON-RPC error`)
  t.equal(response.error?.code, -32602, `${why}: -32602`)
  t.equal(response.result, undefined, `${why}: no result`)
  t.notOk(hasStackTrace(raw), `${why}: no stack trace in the response`)
  t.same(lines.filter(line => (line.level as number) >= 40), [], `${why}: nothing logged at warn or error`)
  t.same(lines.filter(line => (line.level as number) > 20 && /requestState|maxRequestStateBytes|maxInputRounds/.test(JSON.stringify(line))), [],
    `${why}: the refusal is logged at most at debug`)
}

t.test('answers that would make the next requestState larger than maxRequestStateBytes are the client\'s input: -32602, counted, not logged', async t => {
  const { app: fastify, lines } = await loggedApp(t)
  const first = await call(fastify, 'trip')
  const huge = { action: 'accept', content: { city: 'x'.repeat(70_000) } }
  const response = await postModern(fastify, 'tools/call', { name: 'trip', inputResponses: { where: huge }, requestState: first.result.requestState },
    { meta: { [META.clientCapabilities]: ALL } })
  const answer = { status: response.statusCode, ...json(response) }
  refusedAsClientInput(t, answer, response.payload, lines(), 'a 70 kB answer')
  t.match(answer.error?.message, /answers .*larger than maxRequestStateBytes \(65536 bytes\)/, 'the message says what is too large')
  const exposition = parseExposition(await fastify.mcpMetrics!.metrics())
  t.equal(exposition.series('mcp_input_requests_total')['kind=elicitation,outcome=invalid'], 1, 'counted as an invalid answer')

  // The same answer in a round that needs no further state completes: the bound is on what a state carries.
  const small = await call(fastify, 'trip', { inputResponses: { where: { action: 'accept', content: { city: 'Oslo' } } }, requestState: first.result.requestState })
  const done = await call(fastify, 'trip', { inputResponses: { when: huge }, requestState: small.result.requestState })
  t.equal(done.result?.resultType, 'complete', 'a large answer in the last round is fine')
})

t.test('a ctx.state that a client\'s answer made too large is refused the same way', async t => {
  const { app: fastify, lines } = await loggedApp(t)
  const first = await call(fastify, 'remember')
  const response = await postModern(fastify, 'tools/call', {
    name: 'remember', inputResponses: { 'elicitation-1': { action: 'accept', content: { note: 'n'.repeat(60_000) } } }, requestState: first.result.requestState
  }, { meta: { [META.clientCapabilities]: ALL } })
  const answer = { status: response.statusCode, ...json(response) }
  refusedAsClientInput(t, answer, response.payload, lines(), 'an answer copied into ctx.state')
  t.match(answer.error?.message, /ctx\.state.*maxRequestStateBytes \(65536 bytes\)/)
})

t.test('a request that would need more rounds than maxInputRounds is refused as the client\'s: -32602, not logged', async t => {
  const { app: fastify, lines } = await loggedApp(t, { maxInputRounds: 1 })
  const first = await call(fastify, 'trip')
  t.equal(first.result.resultType, 'input_required')
  const response = await postModern(fastify, 'tools/call', { name: 'trip', inputResponses: { where: { action: 'accept', content: {} } }, requestState: first.result.requestState },
    { meta: { [META.clientCapabilities]: ALL } })
  const answer = { status: response.statusCode, ...json(response) }
  refusedAsClientInput(t, answer, response.payload, lines(), 'a second round with maxInputRounds 1')
  t.match(answer.error?.message, /maxInputRounds \(1\)/)
})
