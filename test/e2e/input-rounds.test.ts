/**
 * End-to-end: 2026-07-28 multi-round-trip requests (SEP-2322) over real sockets.
 * - the demo's conformance fixtures driven by `@modelcontextprotocol/client` 2.x pinned to 2026-07-28,
 *   whose driver answers `input_required` through its registered elicitation / sampling / roots
 *   handlers and retries the original request (new id, `inputResponses`, `requestState` echoed);
 * - a bare plugin with one two-question tool: `ctx.state` carried across rounds, a tampered
 *   `requestState` refused before the handler runs (raw fetch: no client sends one), and several
 *   nodes sharing one `secret` continuing each other's rounds with nothing shared but the secret.
 */
import t, { type Test } from 'tap'
import Fastify from 'fastify'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import mcpCancellation, { elicitation } from '../../lib/index.js'
import { META, MODERN } from '../helpers/jsonrpc.js'
import { listenDemo, listenOn } from '../helpers/listen.js'
import { attempt, describeError, texts } from '../helpers/mcp-results.js'
import type { WireExchange } from '../helpers/recorders.js'
import { waitFor } from '../helpers/wait.js'

const SECRET = 'mrtr-e2e-secret-of-at-least-32-bytes!!'
const OTHER_SECRET = 'another-secret-of-at-least-32-bytes!!!'
const ALL_CAPABILITIES = { elicitation: {}, sampling: {}, roots: { listChanged: true } }
const ROOT = { uri: 'file:///work/project', name: 'project' }
/** What the client's elicitation handler answers, by the property a form asks. */
const FORM_ANSWERS: Record<string, string | boolean> = { name: 'Ada', color: 'blue', context: 'unit tests', ok: true }

// ---------------------------------------------------------------------------------------------------
// The official client

interface Asked { method: string, params: Record<string, unknown> }

/**
 * A 2026-07-28 client declaring elicitation, sampling and roots, with handlers that record what they are
 * asked. `fetch` replaces the transport's (to spread requests over several nodes).
 */
async function connectClient (t: Test, url: URL, fetchImpl?: typeof fetch): Promise<{ client: Client, asked: Asked[] }> {
  const client = new Client({ name: 'mrtr-e2e', version: '1.0.0' }, {
    capabilities: ALL_CAPABILITIES,
    versionNegotiation: { mode: { pin: '2026-07-28' } }
  })
  const asked: Asked[] = []
  client.setRequestHandler('elicitation/create', async request => {
    asked.push({ method: request.method, params: request.params as Record<string, unknown> })
    const properties = 'requestedSchema' in request.params ? Object.keys(request.params.requestedSchema.properties) : []
    const content = Object.fromEntries(properties.map(property => [property, FORM_ANSWERS[property] ?? 'unknown']))
    return { action: 'accept', content }
  })
  client.setRequestHandler('sampling/createMessage', async request => {
    asked.push({ method: request.method, params: request.params as Record<string, unknown> })
    return { role: 'assistant', content: { type: 'text', text: 'Paris' }, model: 'test-model', stopReason: 'endTurn' }
  })
  client.setRequestHandler('roots/list', async request => {
    asked.push({ method: request.method, params: (request.params ?? {}) as Record<string, unknown> })
    return { roots: [ROOT] }
  })
  const transport = new StreamableHTTPClientTransport(url, fetchImpl === undefined ? undefined : { fetch: fetchImpl })
  t.teardown(() => client.close())
  await client.connect(transport)
  return { client, asked }
}

interface RpcBody {
  id?: unknown
  method?: string
  params?: Record<string, unknown>
  result?: Record<string, unknown>
  error?: { code: number, message: string, data?: unknown }
}

const parsed = (body: string | undefined): RpcBody => {
  try {
    return JSON.parse(body ?? 'null') ?? {}
  } catch {
    return {}
  }
}

/** The tools/call (or prompts/get) exchanges of one tool (or prompt), in order, with their bodies parsed. */
function callsOf (wire: readonly WireExchange[], name: string): Array<{ request: RpcBody, response: RpcBody }> {
  return wire.filter(exchange => exchange.mcpName === name)
    .map(exchange => ({ request: parsed(exchange.requestBody), response: parsed(exchange.responseBody) }))
}

t.test('the demo, driven by @modelcontextprotocol/client 2.x: input_required is answered by the client\'s handlers', async t => {
  const demo = await listenDemo(t, { MCP_CONFORMANCE: '1', MCP_SECRET: SECRET })
  const { client, asked } = await connectClient(t, demo.url)

  t.test('elicitation: one round trip, the answer reaches the tool', async t => {
    asked.length = 0
    const outcome = await attempt(client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} }))
    t.notOk(outcome.error, 'the call completes', { rejected: describeError(outcome.error) })
    t.same(texts(outcome.value?.content), ['Hello, Ada!'])
    t.same(asked.map(a => [a.method, a.params.message]), [['elicitation/create', 'What is your name?']], 'the client\'s handler was asked once')

    const calls = callsOf(demo.wire, 'test_input_required_result_elicitation')
    t.equal(calls.length, 2, 'two POSTs: the first round and the retry')
    const [first, retry] = calls
    t.equal(first?.response.result?.resultType, 'input_required')
    t.same(Object.keys(first?.response.result?.inputRequests as object), ['user_name'])
    t.equal(typeof first?.response.result?.requestState, 'string', 'the first round carries a requestState')
    t.not(retry?.request.id, first?.request.id, 'the retry has a new JSON-RPC id')
    t.same(retry?.request.params?.inputResponses, { user_name: { action: 'accept', content: { name: 'Ada' } } })
    t.equal(retry?.request.params?.requestState, first?.response.result?.requestState, 'the requestState is echoed')
    t.equal(retry?.response.result?.resultType, 'complete')
  })

  t.test('sampling, roots, and all three kinds in one round', async t => {
    asked.length = 0
    const sampled = await attempt(client.callTool({ name: 'test_input_required_result_sampling', arguments: {} }))
    t.notOk(sampled.error, 'sampling completes', { rejected: describeError(sampled.error) })
    t.match(texts(sampled.value?.content).join(''), /Paris/)
    const rooted = await attempt(client.callTool({ name: 'test_input_required_result_list_roots', arguments: {} }))
    t.notOk(rooted.error, 'roots complete', { rejected: describeError(rooted.error) })
    t.same(texts(rooted.value?.content), [`Roots: ${ROOT.uri}`])
    t.same(asked.map(a => a.method), ['sampling/createMessage', 'roots/list'])

    asked.length = 0
    const all = await attempt(client.callTool({ name: 'test_input_required_result_multiple_inputs', arguments: {} }))
    t.notOk(all.error, 'the three-kind round completes', { rejected: describeError(all.error) })
    t.same(texts(all.value?.content), ['Received user_name, greeting, client_roots'])
    t.same(asked.map(a => a.method).sort(), ['elicitation/create', 'roots/list', 'sampling/createMessage'])
    t.equal(callsOf(demo.wire, 'test_input_required_result_multiple_inputs').length, 2, 'one round, one retry')
  })

  t.test('multi-round: two rounds of input, a fresh requestState each', async t => {
    asked.length = 0
    const outcome = await attempt(client.callTool({ name: 'test_input_required_result_multi_round', arguments: {} }))
    t.notOk(outcome.error, 'the call completes', { rejected: describeError(outcome.error) })
    t.same(texts(outcome.value?.content), ['Ada likes blue'])
    t.same(asked.map(a => a.params.message), ['Step 1: What is your name?', 'Step 2: What is your favorite color?'])
    const calls = callsOf(demo.wire, 'test_input_required_result_multi_round')
    t.same(calls.map(c => c.response.result?.resultType), ['input_required', 'input_required', 'complete'])
    t.same(calls.map(c => Object.keys(c.request.params?.inputResponses ?? {})), [[], ['step1'], ['step2']],
      'each retry carries only the answers of the round before')
    const [r1, r2] = calls.map(c => c.response.result?.requestState)
    t.ok(typeof r1 === 'string' && typeof r2 === 'string' && r1 !== r2, 'the second round has a new requestState')
  })

  t.test('prompts/get can ask too', async t => {
    const outcome = await attempt(client.getPrompt({ name: 'test_input_required_result_prompt' }))
    t.notOk(outcome.error, 'the prompt completes', { rejected: describeError(outcome.error) })
    t.same(outcome.value?.messages, [{ role: 'user', content: { type: 'text', text: 'Answer using this context: unit tests' } }])
  })
})

// ---------------------------------------------------------------------------------------------------
// Bare nodes and raw requests

interface McpNode {
  url: URL
  /** One entry per run of `two_questions`' handler on this node: the `ctx.state` it found. */
  runs: unknown[]
}

/**
 * A node: the plugin with `secret` (none: a random key of its own) and the tool `two_questions`, which counts its runs in `ctx.state`
 * (set before it asks) and asks a name, then a colour.
 */
async function listenNode (t: Test, secret: string | undefined): Promise<McpNode> {
  const app = Fastify({ logger: false })
  await app.register(mcpCancellation, { serverInfo: { name: 'mrtr-node', version: '1.0.0' }, secret })
  const runs: unknown[] = []
  const ask = (message: string, property: string) =>
    elicitation({ message, requestedSchema: { type: 'object', properties: { [property]: { type: 'string' } }, required: [property] } })
  app.mcp.tool({
    name: 'two_questions',
    inputSchema: { type: 'object', properties: { topic: { type: 'string' } } },
    handler: async (_args, ctx) => {
      runs.push(ctx.state)
      const run = (typeof ctx.state === 'number' ? ctx.state : 0) + 1
      ctx.state = run
      const { name } = await ctx.input({ name: ask('Your name?', 'name') })
      const { color } = await ctx.input({ color: ask('Your favourite colour?', 'color') })
      return { content: [{ type: 'text', text: `${String(name.content?.name)} likes ${String(color.content?.color)} (run ${run})` }] }
    }
  })
  return { url: await listenOn(t, app), runs }
}

let nextId = 1

/** A 2026-07-28 tools/call POSTed by hand: headers and `_meta` as a client sends them. */
async function postToolCall (url: URL, params: Record<string, unknown>): Promise<{ status: number, body: RpcBody }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': 'tools/call',
      'mcp-name': String(params.name)
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: nextId++,
      method: 'tools/call',
      params: {
        ...params,
        _meta: {
          [META.protocolVersion]: MODERN,
          [META.clientInfo]: { name: 'raw-fetch', version: '1.0.0' },
          [META.clientCapabilities]: ALL_CAPABILITIES
        }
      }
    })
  })
  return { status: response.status, body: parsed(await response.text()) }
}

const accept = (content: Record<string, unknown>) => ({ action: 'accept', content })
const ROUND_1 = { name: 'two_questions', arguments: { topic: 'colours' } }

/** Round 1 of `two_questions` on `node`: its requestState. */
async function firstRound (t: Test, node: McpNode): Promise<string> {
  const { body } = await postToolCall(node.url, ROUND_1)
  t.equal(body.result?.resultType, 'input_required', 'round 1 asks')
  t.same(Object.keys(body.result?.inputRequests as object), ['name'])
  const state = body.result?.requestState
  t.equal(typeof state, 'string', 'round 1 carries a requestState')
  return String(state)
}

/** Asserts a JSON-RPC -32602 error and that no handler ran for it. */
function assertRefused (t: Test, reply: { status: number, body: RpcBody }, node: McpNode, runsBefore: number, what: string): void {
  t.equal(reply.body.error?.code, -32602, `${what}: -32602`, { status: reply.status, body: reply.body })
  t.notOk(reply.body.result, `${what}: no result`)
  t.equal(node.runs.length, runsBefore, `${what}: the handler never ran`)
}

t.test('ctx.state is carried from round to round (the official client answering)', async t => {
  const node = await listenNode(t, SECRET)
  const { client, asked } = await connectClient(t, node.url)
  const outcome = await attempt(client.callTool(ROUND_1))
  t.notOk(outcome.error, 'the call completes', { rejected: describeError(outcome.error) })
  t.same(texts(outcome.value?.content), ['Ada likes blue (run 3)'], 'three runs, the count kept in ctx.state')
  t.same(node.runs, [undefined, 1, 2], 'each run found the state the run before set (undefined in round 1)')
  t.same(asked.map(a => a.params.message), ['Your name?', 'Your favourite colour?'], 'each question asked once')
})

t.test('a tampered, foreign or misplaced requestState is -32602 and the handler never runs', async t => {
  const node = await listenNode(t, SECRET)
  const state = await firstRound(t, node)
  const runs = node.runs.length
  const answer = { name: accept({ name: 'Ada' }) }
  const [payload = '', mac = ''] = state.split('.')
  const flipped = (text: string, at: number) => text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1)

  assertRefused(t, await postToolCall(node.url, { ...ROUND_1, inputResponses: answer, requestState: `${state}-TAMPERED` }), node, runs, 'a suffix (the conformance tamper)')
  assertRefused(t, await postToolCall(node.url, { ...ROUND_1, inputResponses: answer, requestState: `${flipped(payload, 5)}.${mac}` }), node, runs, 'one payload character changed')
  assertRefused(t, await postToolCall(node.url, { ...ROUND_1, inputResponses: answer, requestState: `${payload}.${flipped(mac, 0)}` }), node, runs, 'one MAC character changed')
  assertRefused(t, await postToolCall(node.url, { ...ROUND_1, inputResponses: answer, requestState: 'not a state' }), node, runs, 'garbage')
  assertRefused(t, await postToolCall(node.url, { ...ROUND_1, arguments: { topic: 'shapes' }, inputResponses: answer, requestState: state }), node, runs,
    'a genuine state with other arguments')
  assertRefused(t, await postToolCall(node.url, { ...ROUND_1, requestState: state, inputResponses: 'yes' }), node, runs, 'inputResponses not an object')

  const genuine = await postToolCall(node.url, { ...ROUND_1, inputResponses: answer, requestState: state })
  t.equal(genuine.body.result?.resultType, 'input_required', 'control: the genuine state continues (round 2 asks the colour)')
  t.same(Object.keys(genuine.body.result?.inputRequests as object), ['color'])
  t.same(node.runs.slice(runs), [1], 'and the handler ran once, with the state of round 1')
})

t.test('several nodes: any node holding the secret continues a round another started', async t => {
  const [a, b, other] = await Promise.all([listenNode(t, SECRET), listenNode(t, SECRET), listenNode(t, OTHER_SECRET)])

  t.test('round 1 on A, round 2 on B, round 3 on A', async t => {
    const state1 = await firstRound(t, a)
    const round2 = await postToolCall(b.url, { ...ROUND_1, inputResponses: { name: accept({ name: 'Ada' }) }, requestState: state1 })
    t.equal(round2.body.result?.resultType, 'input_required', 'B continues: round 2 asks the colour', { body: round2.body })
    t.same(Object.keys(round2.body.result?.inputRequests as object ?? {}), ['color'])
    t.same(b.runs, [1], 'B ran the handler with the ctx.state A sealed')
    const round3 = await postToolCall(a.url, { ...ROUND_1, inputResponses: { color: accept({ color: 'blue' }) }, requestState: round2.body.result?.requestState })
    t.equal(round3.body.result?.resultType, 'complete', { body: round3.body })
    t.same(texts(round3.body.result?.content), ['Ada likes blue (run 3)'], 'the name answered on B reached A')
  })

  t.test('a node with another secret refuses the state, without running the handler', async t => {
    const state1 = await firstRound(t, a)
    assertRefused(t, await postToolCall(other.url, { ...ROUND_1, inputResponses: { name: accept({ name: 'Ada' }) }, requestState: state1 }), other, 0,
      'another secret')
  })

  t.test('without the secret option each node has a random key: a round continues only where it started', async t => {
    const [lone, stranger] = await Promise.all([listenNode(t, undefined), listenNode(t, undefined)])
    const state1 = await firstRound(t, lone)
    const answer = { name: accept({ name: 'Ada' }) }
    assertRefused(t, await postToolCall(stranger.url, { ...ROUND_1, inputResponses: answer, requestState: state1 }), stranger, 0, 'another node')
    const same = await postToolCall(lone.url, { ...ROUND_1, inputResponses: answer, requestState: state1 })
    t.equal(same.body.result?.resultType, 'input_required', 'the node that started it continues (round 2 asks the colour)', { body: same.body })
  })

  t.test('the official client behind a round-robin balancer: each POST goes to the next node', async t => {
    const nodes = [a, b]
    const runsBefore = nodes.map(node => node.runs.length)
    let turn = 0
    const served: string[] = []
    const balancer: typeof fetch = async (input, init) => {
      const node = nodes[turn++ % nodes.length]!
      served.push(node === a ? 'A' : 'B')
      return await fetch(node.url, init)
    }
    const { client } = await connectClient(t, a.url, balancer)
    const outcome = await attempt(client.callTool(ROUND_1))
    t.notOk(outcome.error, 'the call completes', { rejected: describeError(outcome.error) })
    t.same(texts(outcome.value?.content), ['Ada likes blue (run 3)'])
    t.same(nodes.map((node, i) => node.runs.length - runsBefore[i]!).sort(), [1, 2], 'the three rounds ran on both nodes')
    t.ok(served.includes('A') && served.includes('B'), `both nodes served (${served.join(' ')})`)
  })
})

t.test('the official client\'s answers refused: a form that breaks the schema fails the ask, an oversized round is -32602', async t => {
  const node = await listenNode(t, SECRET)
  const client = new Client({ name: 'mrtr-refused', version: '1.0.0' }, { capabilities: ALL_CAPABILITIES, versionNegotiation: { mode: { pin: '2026-07-28' } } })
  let name: unknown = 'Ada'
  client.setRequestHandler('elicitation/create', async request => {
    const property = 'requestedSchema' in request.params ? Object.keys(request.params.requestedSchema.properties)[0] : undefined
    return { action: 'accept', content: property === 'name' ? { name } : { color: 'blue' } } as never
  })
  await client.connect(new StreamableHTTPClientTransport(node.url))
  t.teardown(() => client.close())

  t.test('a name that is a number: the tool\'s ask fails with the reason, as an isError result', async t => {
    name = 42
    const outcome = await attempt(client.callTool(ROUND_1))
    t.notOk(outcome.error, 'the call has an answer', { rejected: describeError(outcome.error) })
    t.equal(outcome.value?.isError, true)
    t.same(texts(outcome.value?.content), ['inputResponses.name is not a valid answer to elicitation/create: the content does not match the requested schema: /name must be string'])
  })

  t.test('a 70 kB name: the round that would carry it to the next one is -32602, saying what is too large', async t => {
    name = 'x'.repeat(70_000)
    const outcome = await attempt(client.callTool(ROUND_1))
    t.ok(outcome.error, 'the call is rejected')
    t.equal((outcome.error as { code?: unknown } | undefined)?.code, -32602, 'with -32602, not -32603')
    t.match(describeError(outcome.error), /the answers in inputResponses would make the requestState larger than maxRequestStateBytes \(65536 bytes\)/)
  })
})

t.test('the official client cancels while its elicitation handler is still answering: nothing runs on, nothing is left', async t => {
  // In 2026-07-28 a round ends before the client is asked: while the user answers, no handler runs
  // and nothing waits on the server, so a cancel leaves nothing behind and the next round never comes.
  const app = Fastify({ logger: false })
  await app.register(mcpCancellation, { serverInfo: { name: 'mrtr-cancel', version: '1.0.0' }, secret: SECRET })
  let runs = 0
  app.mcp.tool({
    name: 'ask_once',
    handler: async (_args, ctx) => {
      runs++
      const answer = await ctx.elicit({ message: 'Your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } } } })
      return { content: [{ type: 'text', text: String(answer.content?.name) }] }
    }
  })
  const url = await listenOn(t, app)
  const client = new Client({ name: 'mrtr-cancel', version: '1.0.0' }, { capabilities: ALL_CAPABILITIES, versionNegotiation: { mode: { pin: '2026-07-28' } } })
  let release: () => void = () => {}
  let asked = false
  client.setRequestHandler('elicitation/create', async () => {
    asked = true
    await new Promise<void>(resolve => { release = resolve })
    return { action: 'accept', content: { name: 'Ada' } }
  })
  await client.connect(new StreamableHTTPClientTransport(url))
  t.teardown(() => client.close())

  const controller = new AbortController()
  const call = attempt(client.callTool({ name: 'ask_once', arguments: {} }, { signal: controller.signal }))
  t.ok(await waitFor(() => asked, 2000), 'the client\'s handler was asked and holds')
  t.equal(runs, 1, 'round 1 ran')
  t.equal(app.mcpCancellation.inFlightRows, 0, 'nothing is in flight on the server while the client holds')
  controller.abort('user closed the dialog')
  // The client's driver notices the abort once its handler returns.
  release()
  const outcome = await Promise.race([call, new Promise<undefined>(resolve => setTimeout(() => { resolve(undefined) }, 3000))])
  t.ok(outcome?.error, 'the call is rejected on the client')
  await new Promise(resolve => setTimeout(resolve, 200))
  t.equal(runs, 1, 'no further round reached the handler')
  t.equal(app.mcpCancellation.inFlightRows, 0, 'nothing in flight')
  t.equal(app.mcpCancellation.rows, 0, 'no cancellation row')
})
