/**
 * End-to-end: legacy-era asks (2025-03-26 … 2025-11-25) over real sockets. A handler's `ctx.elicit()`,
 * `ctx.sample()`, `ctx.roots()` or `ctx.input()` turns its POST's response into an SSE stream carrying a
 * JSON-RPC request to the client; the client answers with a new POST (202), the handler resumes, and
 * its result arrives on the original stream.
 * - the demo's fixtures and a bare plugin app driven by `@modelcontextprotocol/sdk` 1.x, with and without
 *   sessions (which carry `initialize`'s capabilities);
 * - cancellation, disconnect and `inputTimeoutMs` while an ask waits, as the handler, the metrics and the
 *   cancellation table see them;
 * - responses that cannot carry a request (responseMode 'json', Accept: application/json, a batch);
 * - two nodes on one real redis-server: an answer POSTed to node B reaches the handler waiting on node A;
 * - raw HTTP answers that must be refused (bad ids, other scopes, wrong shapes) without touching the ask;
 * - fresh processes without Redis, until one drew a node name with '_': each accepts answers to its asks.
 *
 * The Redis test is skipped without redis-server, except under CI where that is a failure (as in
 * test/redis/multi-node.test.ts).
 */
import t, { type Test } from 'tap'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema, McpError,
  type ClientCapabilities, type CreateMessageResult, type ElicitResult, type ListRootsResult
} from '@modelcontextprotocol/sdk/types.js'
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify'
import mcpCancellation, {
  ClientInputError, elicitation, RequestCancelledError, rootsList, sampling, type McpCancellationOptions
} from '../../lib/index.js'
import { untilCrossNodeWorks } from '../helpers/cluster.js'
import { legacyCall, rawPost, type RawCall, type RawResponse } from '../helpers/http.js'
import { LEGACY, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenDemo, listenPlugin, type Listening } from '../helpers/listen.js'
import { attempt, describeError, texts } from '../helpers/mcp-results.js'
import { metricValue, parseExposition } from '../helpers/metrics.js'
import { RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import { waitFor, within } from '../helpers/wait.js'

const SECRET = 'legacy-asks-e2e-secret-of-32-bytes-or-more!'
const OTHER_SECRET = 'another-legacy-asks-secret-of-32-bytes!!!'
const SESSION_SECRET = 'legacy-asks-e2e-session-secret-0123456789'
const ALL_CAPABILITIES: ClientCapabilities = { elicitation: {}, sampling: {}, roots: { listChanged: true } }
const ROOT = { uri: 'file:///work/project', name: 'project' }
/** What the default elicitation handler answers, by the property a form asks (a property's `default` wins). */
const FORM_ANSWERS: Record<string, string> = { username: 'ada', email: 'ada@example.com', name: 'Ada', topic: 'tides' }
/** The id the server gives its requests to the client: version, kind, node, random, MAC. */
const SERVER_REQUEST_ID = /^a1\.[esr]\.[0-9A-Za-z_-]+\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/
/** A legacy session id that carries the client's capabilities. */
const CAPABILITY_SESSION = /^s3[0-9a-v]\./
/** Every SDK request gives up after this long: an ask that is never answered fails its test fast, not at tap's timeout. */
const CALL = { timeout: 5000 }
const PENDING = 'mcp_pending_input_requests'
const ASKS = 'mcp_input_requests_total'

// ---------------------------------------------------------------------------------------------------
// The SDK 1.x client

interface Asked {
  method: string
  id: string | number
  params: Record<string, any>
}

interface Posted {
  /** What the POST carried: a request or notification (its method), or a response to the server. */
  kind: 'request' | 'notification' | 'response' | 'other'
  method: string | undefined
  id: unknown
  host: string
  status: number
  contentType: string | null
}

type Handler<T> = (params: Record<string, any>) => T | Promise<T>

interface SdkOptions {
  capabilities?: ClientCapabilities
  /** `null`: no handler registered for that kind (the SDK answers -32601). Default: the standard answers. */
  elicitation?: Handler<ElicitResult> | null
  sampling?: Handler<CreateMessageResult> | null
  roots?: Handler<ListRootsResult> | null
  /** Where POSTs carrying a JSON-RPC response (the client's answers) go; default: where the transport sends them. */
  answersTo?: URL
}

interface Sdk {
  client: Client
  transport: StreamableHTTPClientTransport
  /** Every request of the server that reached one of the client's handlers. */
  asked: Asked[]
  /** Every POST the transport made, with its HTTP answer. */
  posts: Posted[]
}

/** The standard elicitation answer: accept, each property its `default` or the value FORM_ANSWERS gives it. */
function formAnswer (params: Record<string, any>): ElicitResult {
  const properties = (params.requestedSchema?.properties ?? {}) as Record<string, { default?: unknown }>
  const content = Object.fromEntries(Object.entries(properties).map(([key, schema]) =>
    [key, 'default' in schema ? schema.default : FORM_ANSWERS[key] ?? 'unknown'])) as ElicitResult['content']
  return { action: 'accept', content }
}

/** The standard sampling answer: the text of the first message, prefixed. */
function sampleAnswer (params: Record<string, any>): CreateMessageResult {
  const prompt = String(params.messages?.[0]?.content?.text)
  return { role: 'assistant', content: { type: 'text', text: `sampled: ${prompt}` }, model: 'test-model', stopReason: 'endTurn' }
}

function classify (body: unknown): { kind: Posted['kind'], method: string | undefined, id: unknown } {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return { kind: 'other', method: undefined, id: undefined }
  const message = body as { method?: unknown, id?: unknown }
  if (typeof message.method === 'string') return { kind: 'id' in message ? 'request' : 'notification', method: message.method, id: message.id }
  return { kind: 'result' in message || 'error' in message ? 'response' : 'other', method: undefined, id: message.id }
}

/** An SDK 1.x client (2025-11-25, initialize handshake) with recording handlers and a recording fetch. */
async function connectSdk (t: Test, url: URL, options: SdkOptions = {}): Promise<Sdk> {
  const client = new Client({ name: 'legacy-asks-e2e', version: '1.0.0' }, { capabilities: options.capabilities ?? ALL_CAPABILITIES })
  const asked: Asked[] = []
  const posts: Posted[] = []
  const { elicitation: elicit = formAnswer, sampling: sample = sampleAnswer, roots = () => ({ roots: [ROOT] }) } = options
  if (elicit !== null) {
    client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
      asked.push({ method: request.method, id: extra.requestId, params: request.params as Record<string, any> })
      return await elicit(request.params as Record<string, any>)
    })
  }
  if (sample !== null) {
    client.setRequestHandler(CreateMessageRequestSchema, async (request, extra) => {
      asked.push({ method: request.method, id: extra.requestId, params: request.params as Record<string, any> })
      return await sample(request.params as Record<string, any>)
    })
  }
  if (roots !== null) {
    client.setRequestHandler(ListRootsRequestSchema, async (request, extra) => {
      asked.push({ method: request.method, id: extra.requestId, params: (request.params ?? {}) as Record<string, any> })
      return await roots({})
    })
  }
  const recordingFetch = async (input: string | URL, init?: RequestInit): Promise<Response> => {
    let body: unknown
    try { body = JSON.parse(String(init?.body)) } catch {}
    const { kind, method, id } = classify(body)
    const target = init?.method === 'POST' && kind === 'response' && options.answersTo !== undefined ? options.answersTo : input
    const response = await fetch(target, init)
    if (init?.method === 'POST') {
      posts.push({ kind, method, id, host: new URL(target).host, status: response.status, contentType: response.headers.get('content-type') })
    }
    return response
  }
  const transport = new StreamableHTTPClientTransport(url, { fetch: recordingFetch })
  t.teardown(() => client.close())
  await client.connect(transport)
  return { client, transport, asked, posts }
}

/** The POSTs that carried the client's answers. */
const answers = (sdk: Sdk): Posted[] => sdk.posts.filter(post => post.kind === 'response')
/**
 * The answer POSTs once `count` of them are recorded: the SDK's fetch of an answer may resolve after the
 * result it unblocked has already arrived on the call's stream.
 */
async function answersRecorded (sdk: Sdk, count: number): Promise<Posted[]> {
  await waitFor(() => answers(sdk).length >= count, 3000)
  return answers(sdk)
}

/** Diagnostics for a failed call: each answer POST's id and HTTP status, and why the call was rejected. */
const diagnose = (sdk: Sdk, outcome: { error: unknown }): Record<string, unknown> =>
  ({ rejected: describeError(outcome.error), answers: answers(sdk).map(post => `${String(post.id)} → ${post.status}`) })

/** A promise and its resolver: what a holding client handler waits on. */
function deferred<T> (): { promise: Promise<T>, resolve: (value: T) => void } {
  let resolve!: (value: T) => void
  const promise = new Promise<T>(_resolve => { resolve = _resolve })
  return { promise, resolve }
}

// ---------------------------------------------------------------------------------------------------
// Metrics

interface AskMetrics {
  pending: number | undefined
  /** `mcp_input_requests_total` by `kind=…,outcome=…`. */
  outcomes: Record<string, number>
}

async function askMetrics (app: FastifyInstance): Promise<AskMetrics> {
  const registry = app.mcpMetrics
  if (registry === null) throw new Error('metrics are off')
  const exposition = parseExposition(await registry.metrics())
  return { pending: exposition.value(PENDING), outcomes: exposition.series(ASKS) }
}

/** How much each `kind=…,outcome=…` series grew from `before` to `after` (series that did not grow left out). */
function grown (before: AskMetrics, after: AskMetrics): Record<string, number> {
  const growth: Record<string, number> = {}
  for (const [key, value] of Object.entries(after.outcomes)) {
    const delta = value - (before.outcomes[key] ?? 0)
    if (delta !== 0) growth[key] = delta
  }
  return growth
}

/** Polls the pending gauge until it is `expected`; returns the last value seen. */
async function pendingBecomes (app: FastifyInstance, expected: number, timeoutMs = 2000): Promise<number | undefined> {
  const deadline = Date.now() + timeoutMs
  let pending = (await askMetrics(app)).pending
  while (pending !== expected && Date.now() < deadline) {
    await new Promise(resolve => setTimeout(resolve, 10))
    pending = (await askMetrics(app)).pending
  }
  return pending
}

// ---------------------------------------------------------------------------------------------------
// A bare plugin app whose handlers ask

interface AskRecord {
  tag: string
  /** What the ask rejected with, if it did. */
  error: unknown
  /** `ctx.signal.reason` once the signal aborted. */
  signalReason: unknown
  answer: unknown
}

interface AskApp extends Listening {
  records: AskRecord[]
}

const text = (value: string): { content: Array<{ type: 'text', text: string }> } => ({ content: [{ type: 'text', text: value }] })
const oneString = (property: string) => ({ type: 'object', properties: { [property]: { type: 'string' } }, required: [property] })

/**
 * The plugin with `options` and handlers that ask:
 * - `ask_name {tag}`: elicits a name, recording how the ask ended and whether its signal aborted;
 * - `where_am_i`: `ctx.roots()`; `sample_it {prompt}`: `ctx.sample()`;
 * - `all_three`: `ctx.input()` of the three kinds at once;
 * - `caps`: what `ctx.clientCapabilities` and `ctx.supports()` say;
 * - the prompt `ask_topic` (elicits) and the resource `project://roots` (asks roots).
 */
async function listenAskApp (t: Test, options: McpCancellationOptions = {}): Promise<AskApp> {
  const records: AskRecord[] = []
  const listening = await listenPlugin(t, { secret: SECRET, ...options }, {}, app => {
    app.mcp.tool<{ tag: string }>({
      name: 'ask_name',
      inputSchema: { type: 'object', properties: { tag: { type: 'string' } }, required: ['tag'] },
      handler: async ({ tag }, ctx) => {
        const record: AskRecord = { tag, error: undefined, signalReason: undefined, answer: undefined }
        records.push(record)
        ctx.signal.addEventListener('abort', () => { record.signalReason = ctx.signal.reason }, { once: true })
        try {
          const answer = await ctx.elicit({ message: `Your name (${tag})?`, requestedSchema: oneString('name') })
          record.answer = answer
          return text(`${answer.action}: ${String(answer.content?.name)}`)
        } catch (error) {
          record.error = error
          throw error
        }
      }
    })
    app.mcp.tool({
      name: 'where_am_i',
      handler: async (_args, ctx) => text(`roots: ${(await ctx.roots()).map(root => `${root.name ?? '?'}=${root.uri}`).join(', ')}`)
    })
    app.mcp.tool<{ prompt: string }>({
      name: 'sample_it',
      inputSchema: { type: 'object', properties: { prompt: { type: 'string' } }, required: ['prompt'] },
      handler: async ({ prompt }, ctx) => {
        const answer = await ctx.sample({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 20 })
        return text(`model ${answer.model} said ${JSON.stringify(answer.content)}`)
      }
    })
    app.mcp.tool({
      name: 'all_three',
      handler: async (_args, ctx) => {
        const { who, poem, dirs } = await ctx.input({
          who: elicitation({ message: 'Who are you?', requestedSchema: oneString('name') }),
          poem: sampling({ messages: [{ role: 'user', content: { type: 'text', text: 'a haiku' } }], maxTokens: 30 }),
          dirs: rootsList()
        })
        const sampled = (poem.content as { text?: string }).text
        return text(`who=${String(who.content?.name)} poem=${String(sampled)} dirs=${dirs.roots.map(root => root.uri).join(',')}`)
      }
    })
    app.mcp.tool({
      name: 'caps',
      handler: (_args, ctx) => text(JSON.stringify({
        capabilities: ctx.clientCapabilities ?? null,
        supports: { elicitation: ctx.supports('elicitation'), sampling: ctx.supports('sampling'), roots: ctx.supports('roots') }
      }))
    })
    app.mcp.prompt({
      name: 'ask_topic',
      description: 'Asks the user a topic, then writes a prompt about it',
      handler: async (_args, ctx) => {
        const answer = await ctx.elicit({ message: 'Which topic?', requestedSchema: oneString('topic') })
        return { messages: [{ role: 'user', content: { type: 'text', text: `Write about ${String(answer.content?.topic)}` } }] }
      }
    })
    app.mcp.resource({
      name: 'Client roots',
      uri: 'project://roots',
      mimeType: 'application/json',
      handler: async (uri, ctx) => ({ contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(await ctx.roots()) }] })
    })
  })
  return { ...listening, records }
}

// ---------------------------------------------------------------------------------------------------
// Raw HTTP

/** A raw `initialize` declaring `capabilities`; resolves to the session id the server minted. */
async function openSession (url: URL, capabilities: Record<string, unknown>, headers: Record<string, string> = {}): Promise<string> {
  const response = await rawPost(url, {
    jsonrpc: '2.0',
    id: 'init',
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'raw-fetch', version: '1.0.0' } }
  }, headers)
  const session = response.headers.get('mcp-session-id')
  if (response.status !== 200 || session === null) throw new Error(`initialize failed: ${response.status} ${response.text}`)
  return session
}

/** The first request of `method` the server sent on `call`'s stream, once it arrived. */
async function serverRequest (call: RawCall, method: string, timeoutMs = 3000): Promise<JsonRpcMessage | undefined> {
  const find = (): JsonRpcMessage | undefined => call.messages().find(message => message.method === method && 'id' in message)
  await waitFor(() => find() !== undefined, timeoutMs)
  return find()
}

/** The JSON-RPC response that ended `call`'s stream (its last message with a result or an error). */
async function finalMessage (call: RawCall, timeoutMs = 3000): Promise<JsonRpcMessage | undefined> {
  await within(call.done, timeoutMs, undefined)
  return call.messages().findLast(message => 'result' in message || 'error' in message)
}

const errorCode = (response: RawResponse): unknown => {
  try {
    return (JSON.parse(response.text) as JsonRpcMessage).error?.code
  } catch {
    return undefined
  }
}

// ---------------------------------------------------------------------------------------------------

t.test('the demo\'s legacy fixtures through SDK 1.x', async t => {
  for (const sessions of [false, true]) {
    t.test(sessions ? 'with sessions (capabilities in the session id)' : 'without sessions (capabilities unknown)', async t => {
      const demo = await listenDemo(t, sessions ? { MCP_CONFORMANCE: '1', MCP_SESSION_SECRET: SESSION_SECRET } : { MCP_CONFORMANCE: '1' })
      const before = await askMetrics(demo.app)
      /** When set, what the client's elicitation handler answers instead of the standard form answer. */
      let form: ElicitResult | undefined
      const sdk = await connectSdk(t, demo.url, { elicitation: params => form ?? formAnswer(params) })
      if (sessions) t.match(sdk.transport.sessionId, CAPABILITY_SESSION, 'initialize minted a session that carries the capabilities')
      else t.equal(sdk.transport.sessionId, undefined, 'no session without the option')

      const elicited = await attempt(sdk.client.callTool({ name: 'test_elicitation', arguments: { message: 'Please provide your details' } }, undefined, CALL))
      t.notOk(elicited.error, 'test_elicitation completes', diagnose(sdk, elicited))
      t.same(texts(elicited.value?.content), ['User response: action=accept, content={"username":"ada","email":"ada@example.com"}'],
        'the tool result carries what the client\'s handler answered')
      const [asked] = sdk.asked
      t.equal(asked?.method, 'elicitation/create', 'the client\'s elicitation handler was asked')
      t.equal(asked?.params.message, 'Please provide your details')
      t.same(Object.keys(asked?.params.requestedSchema?.properties ?? {}), ['username', 'email'], 'for a username and an email')
      t.same(asked?.params.requestedSchema?.required, ['username', 'email'])
      t.match(asked?.id, SERVER_REQUEST_ID, 'under a server-minted, MAC\'d id')

      sdk.asked.length = 0
      const sampled = await attempt(sdk.client.callTool({ name: 'test_sampling', arguments: { prompt: 'What is the capital of France?' } }, undefined, CALL))
      t.notOk(sampled.error, 'test_sampling completes', diagnose(sdk, sampled))
      t.same(texts(sampled.value?.content), ['LLM response: sampled: What is the capital of France?'], 'the sampled text reaches the result')
      t.same(sdk.asked.map(a => [a.method, a.params.messages?.[0]?.content?.text]), [['sampling/createMessage', 'What is the capital of France?']],
        'the client\'s sampling handler received the prompt')

      sdk.asked.length = 0
      const defaults = await attempt(sdk.client.callTool({ name: 'test_elicitation_sep1034_defaults', arguments: {} }, undefined, CALL))
      t.notOk(defaults.error, 'test_elicitation_sep1034_defaults completes', diagnose(sdk, defaults))
      const properties = (sdk.asked[0]?.params.requestedSchema?.properties ?? {}) as Record<string, { default?: unknown }>
      t.same(Object.fromEntries(Object.entries(properties).map(([key, schema]) => [key, schema.default])),
        { name: 'John Doe', age: 30, score: 95.5, status: 'active', verified: true }, 'the requested schema carries every default (SEP-1034)')
      t.same(texts(defaults.value?.content),
        ['Elicitation completed: action=accept, content={"name":"John Doe","age":30,"score":95.5,"status":"active","verified":true}'])

      const enums = { untitledSingle: 'option2', titledSingle: 'value3', legacyEnum: 'opt1', untitledMulti: ['option1', 'option3'], titledMulti: ['value2'] }
      sdk.asked.length = 0
      form = { action: 'accept', content: enums }
      const enumCall = await attempt(sdk.client.callTool({ name: 'test_elicitation_sep1330_enums', arguments: {} }, undefined, CALL))
      form = undefined
      t.notOk(enumCall.error, 'test_elicitation_sep1330_enums completes', diagnose(sdk, enumCall))
      t.same(Object.keys(sdk.asked[0]?.params.requestedSchema?.properties ?? {}), Object.keys(enums), 'the five enum shapes are asked (SEP-1330)')
      t.same(texts(enumCall.value?.content), [`Elicitation completed: action=accept, content=${JSON.stringify(enums)}`], 'single and multi selections come back')

      const calls = sdk.posts.filter(post => post.method === 'tools/call')
      t.equal(calls.length, 4, 'four tools/call POSTs')
      t.ok(calls.every(post => post.status === 200 && post.contentType?.startsWith('text/event-stream') === true),
        'each tools/call was answered with an SSE stream (the ask went out on it)', { calls })
      t.same((await answersRecorded(sdk, 4)).map(post => post.status), [202, 202, 202, 202], 'each answer POST was accepted with 202')
      t.same(answers(sdk).map(post => typeof post.id === 'string' && SERVER_REQUEST_ID.test(post.id)), [true, true, true, true],
        'and answered the server\'s id')

      const after = await askMetrics(demo.app)
      t.equal(after.pending, 0, `${PENDING} is back to 0`)
      t.same(grown(before, after), { 'kind=elicitation,outcome=answered': 3, 'kind=sampling,outcome=answered': 1 }, `${ASKS} counted each answer once`)
    })
  }
})

t.test('a bare plugin app: roots, three kinds at once, a prompt and a resource that ask', async t => {
  const node = await listenAskApp(t)
  const sdk = await connectSdk(t, node.url)

  t.test('ctx.roots()', async t => {
    sdk.asked.length = 0
    const outcome = await attempt(sdk.client.callTool({ name: 'where_am_i', arguments: {} }, undefined, CALL))
    t.notOk(outcome.error, 'the call completes', diagnose(sdk, outcome))
    t.same(texts(outcome.value?.content), [`roots: ${ROOT.name}=${ROOT.uri}`])
    t.same(sdk.asked.map(a => a.method), ['roots/list'])
  })

  t.test('ctx.input() with all three kinds: sent at once, answered by key', async t => {
    sdk.asked.length = 0
    const outcome = await attempt(sdk.client.callTool({ name: 'all_three', arguments: {} }, undefined, CALL))
    t.notOk(outcome.error, 'the call completes', diagnose(sdk, outcome))
    t.same(texts(outcome.value?.content), [`who=Ada poem=sampled: a haiku dirs=${ROOT.uri}`], 'each answer reached its key')
    t.same(sdk.asked.map(a => a.method).sort(), ['elicitation/create', 'roots/list', 'sampling/createMessage'], 'one request of each kind')
    t.equal(new Set(sdk.asked.map(a => a.id)).size, 3, 'under three distinct ids')
    t.same(sdk.asked.map(a => String(a.id)[3]).sort(), ['e', 'r', 's'], 'each id names its kind')
  })

  t.test('prompts/get can elicit', async t => {
    sdk.asked.length = 0
    const outcome = await attempt(sdk.client.getPrompt({ name: 'ask_topic' }, CALL))
    t.notOk(outcome.error, 'the prompt completes', diagnose(sdk, outcome))
    t.same(outcome.value?.messages, [{ role: 'user', content: { type: 'text', text: 'Write about tides' } }])
    t.same(sdk.asked.map(a => [a.method, a.params.message]), [['elicitation/create', 'Which topic?']])
  })

  t.test('resources/read can ask roots', async t => {
    sdk.asked.length = 0
    const outcome = await attempt(sdk.client.readResource({ uri: 'project://roots' }, CALL))
    t.notOk(outcome.error, 'the read completes', diagnose(sdk, outcome))
    const [item] = outcome.value?.contents ?? []
    t.same(JSON.parse(item !== undefined && 'text' in item ? item.text : 'null'), [ROOT])
    t.same(sdk.asked.map(a => a.method), ['roots/list'])
  })

  t.test('afterwards nothing waits', async t => {
    t.same((await answersRecorded(sdk, 6)).map(post => post.status), [202, 202, 202, 202, 202, 202], 'six answers, each 202', diagnose(sdk, { error: undefined }))
    t.equal((await askMetrics(node.app)).pending, 0, `${PENDING} is 0`)
    t.equal(node.app.mcpCancellation.inFlightRows, 0, 'nothing in flight')
  })
})

t.test('an SDK 1.x client whose form answer breaks the requested schema: the tool gets a ClientInputError, not the answer', async t => {
  // The SDK checks an elicitation result's shape (ElicitResultSchema), not the requestedSchema: `name: 42` goes out.
  const node = await listenAskApp(t)
  const sdk = await connectSdk(t, node.url, { elicitation: () => ({ action: 'accept', content: { name: 42 } }) })
  const before = await askMetrics(node.app)
  const outcome = await attempt(sdk.client.callTool({ name: 'ask_name', arguments: { tag: 'schema' } }, undefined, CALL))
  t.notOk(outcome.error, 'the call has an answer', diagnose(sdk, outcome))
  t.equal(outcome.value?.isError, true, 'an isError result')
  t.match(texts(outcome.value?.content).join(''), /^result is not a valid answer to elicitation\/create: the content does not match the requested schema: \/name must be string$/)
  const record = node.records.find(r => r.tag === 'schema')
  t.ok(record?.error instanceof ClientInputError, 'the ask rejected with a ClientInputError')
  t.equal((record?.error as ClientInputError | undefined)?.failure, 'invalid')
  t.equal(record?.answer, undefined, 'the tool never saw the answer')
  t.same((await answersRecorded(sdk, 1)).map(post => post.status), [202], 'the answer POST is accepted: the node that asked judges it')
  t.same(grown(before, await askMetrics(node.app)), { 'kind=elicitation,outcome=invalid': 1 }, 'counted invalid')
  t.equal(await pendingBecomes(node.app, 0), 0, 'nothing pending')
})

t.test('cancelling while an ask waits', async t => {
  t.test('the SDK aborts recordedCall while its elicitation handler holds', async t => {
    const node = await listenAskApp(t)
    const release = deferred<void>()
    const sdk = await connectSdk(t, node.url, {
      elicitation: async () => {
        await release.promise
        return { action: 'accept', content: { name: 'too late' } }
      }
    })
    t.teardown(() => { release.resolve() })
    const before = await askMetrics(node.app)

    const controller = new AbortController()
    const call = attempt(sdk.client.callTool({ name: 'ask_name', arguments: { tag: 'sdk-abort' } }, undefined, { ...CALL, signal: controller.signal }))
    t.ok(await waitFor(() => sdk.asked.length === 1, 3000), 'the client\'s handler got the elicitation and holds')
    t.equal(await pendingBecomes(node.app, 1), 1, `${PENDING} is 1 while it waits`)
    t.equal(node.app.mcpCancellation.inFlightRows, 1, 'the call is in flight')

    controller.abort('user pressed stop')
    const outcome = await call
    t.ok(outcome.error, 'the SDK rejects the aborted call')
    const [record] = node.records
    t.ok(await waitFor(() => record?.error !== undefined, 2000), 'the pending ask ended')
    t.type(record?.error, RequestCancelledError, 'rejected with RequestCancelledError')
    t.equal((record?.error as RequestCancelledError | undefined)?.source, 'client', 'from the client\'s notifications/cancelled')
    t.equal((record?.error as RequestCancelledError | undefined)?.reason, 'user pressed stop', 'carrying its reason')
    t.type(record?.signalReason, RequestCancelledError, 'ctx.signal aborted too')
    t.equal(await pendingBecomes(node.app, 0), 0, `${PENDING} is back to 0`)
    const afterCancel = await askMetrics(node.app)
    t.same(grown(before, afterCancel), { 'kind=elicitation,outcome=cancelled': 1 }, `${ASKS}{outcome="cancelled"} counted it`)
    t.ok(await waitFor(() => node.app.mcpCancellation.inFlightRows === 0 && node.app.mcpCancellation.rows === 0, 2000),
      'fastify.mcpCancellation: nothing in flight, no row left')
    // Recorded when the SDK's fetch resolves, which may come after the server has already acted on it.
    const cancelPosts = (): number[] => sdk.posts.filter(post => post.method === 'notifications/cancelled').map(post => post.status)
    t.ok(await waitFor(() => cancelPosts().length > 0, 2000), 'the SDK sent notifications/cancelled')
    t.same(cancelPosts(), [202], 'the cancel POST was accepted')

    release.resolve()
    t.ok(await waitFor(() => answers(sdk).length === 1, 3000), 'the client answered late')
    t.equal(answers(sdk)[0]?.status, 202, 'the late answer is 202', diagnose(sdk, outcome))
    t.same(await askMetrics(node.app), afterCancel, 'and changes nothing: no answer counted, nothing pending')
    t.equal(record?.answer, undefined, 'the handler never resumed with it')
    t.equal(node.records.length, 1, 'nor ran again')
  })

  // A resumable stream pauses instead, its ask still waiting (test/e2e/resumability.test.ts).
  t.test('the client disconnects from the POST stream while the ask waits (resumability off)', async t => {
    const node = await listenAskApp(t, { resumability: false })
    const before = await askMetrics(node.app)
    const call = legacyCall(node.url, 'raw-disconnect', 'ask_name', { tag: 'disconnect' })
    const asked = await serverRequest(call, 'elicitation/create')
    t.ok(asked, 'the elicitation request arrived on the stream')
    t.equal(await pendingBecomes(node.app, 1), 1, `${PENDING} is 1`)

    call.destroy()
    const [record] = node.records
    t.ok(await waitFor(() => record?.error !== undefined, 2000), 'the pending ask ended')
    t.type(record?.error, RequestCancelledError, 'with RequestCancelledError')
    t.equal((record?.error as RequestCancelledError | undefined)?.source, 'disconnect', 'source disconnect')
    t.type(record?.signalReason, RequestCancelledError, 'ctx.signal aborted')
    t.equal(await pendingBecomes(node.app, 0), 0, `${PENDING} is back to 0`)
    t.same(grown(before, await askMetrics(node.app)), { 'kind=elicitation,outcome=cancelled': 1 }, 'counted as cancelled')
    t.ok(await waitFor(() => node.app.mcpCancellation.inFlightRows === 0, 2000), 'nothing in flight')

    const late = await rawPost(node.url, { jsonrpc: '2.0', id: asked?.id, result: { action: 'accept', content: { name: 'late' } } })
    t.equal(late.status, 202, 'an answer after the disconnect is 202', { id: asked?.id })
    t.equal(record?.answer, undefined, 'and reaches no handler')
  })
})

t.test('inputTimeoutMs: a client that never answers', async t => {
  const node = await listenAskApp(t, { inputTimeoutMs: 300 })
  const never = deferred<void>()
  t.teardown(() => { never.resolve() })
  const sdk = await connectSdk(t, node.url, {
    elicitation: async () => {
      await never.promise
      return { action: 'decline' }
    }
  })
  const before = await askMetrics(node.app)
  const startedAt = Date.now()
  const outcome = await attempt(sdk.client.callTool({ name: 'ask_name', arguments: { tag: 'timeout' } }, undefined, CALL))
  const elapsed = Date.now() - startedAt
  t.notOk(outcome.error, 'the call is answered', diagnose(sdk, outcome))
  t.equal(outcome.value?.isError, true, 'with an isError result')
  t.same(texts(outcome.value?.content), ['The client did not answer elicitation/create within 300 ms'], 'naming the timeout')
  t.ok(elapsed >= 290 && elapsed < 3000, `after about 300 ms (${elapsed} ms)`)
  t.type(node.records[0]?.error, ClientInputError)
  t.equal((node.records[0]?.error as ClientInputError | undefined)?.failure, 'timeout', 'the ask failed with ClientInputError(timeout)')
  const after = await askMetrics(node.app)
  t.equal(after.pending, 0, `${PENDING} is back to 0`)
  t.same(grown(before, after), { 'kind=elicitation,outcome=timeout': 1 }, `${ASKS}{outcome="timeout"} counted it`)

  never.resolve()
  t.ok(await waitFor(() => answers(sdk).length === 1, 3000), 'the client answers at last')
  t.equal(answers(sdk)[0]?.status, 202, 'too late: 202', diagnose(sdk, outcome))
  t.same(await askMetrics(node.app), after, 'and nothing changes')
})

t.test('client capabilities', async t => {
  t.test('with sessions: a kind the client did not declare is -32021, and nothing is sent', async t => {
    const node = await listenAskApp(t, { sessions: { secret: SESSION_SECRET } })
    const sdk = await connectSdk(t, node.url, { capabilities: { elicitation: {}, roots: {} }, sampling: null })
    t.match(sdk.transport.sessionId, CAPABILITY_SESSION, 'the session carries the capabilities')

    const caps = await attempt(sdk.client.callTool({ name: 'caps', arguments: {} }, undefined, CALL))
    t.same(JSON.parse(texts(caps.value?.content)[0] ?? 'null'), {
      capabilities: { elicitation: {}, roots: {} },
      supports: { elicitation: true, sampling: false, roots: true }
    }, 'the handler sees what initialize declared')

    const before = await askMetrics(node.app)
    const outcome = await attempt(sdk.client.callTool({ name: 'sample_it', arguments: { prompt: 'hi' } }, undefined, CALL))
    t.type(outcome.error, McpError, 'the call fails with a JSON-RPC error')
    t.equal((outcome.error as McpError | undefined)?.code, -32021, 'Missing required client capability (-32021)')
    t.same((outcome.error as McpError | undefined)?.data, { requiredCapabilities: { sampling: {} } }, 'naming sampling')
    t.same(sdk.asked, [], 'the client was asked nothing')
    t.same(answers(sdk), [], 'and sent no answer')
    const call = sdk.posts.findLast(post => post.method === 'tools/call')
    t.equal(call?.status, 200, 'legacy era: HTTP 200, the error in the body')
    t.same(grown(before, await askMetrics(node.app)), {}, 'no ask counted')

    const declared = await attempt(sdk.client.callTool({ name: 'ask_name', arguments: { tag: 'declared' } }, undefined, CALL))
    t.same(texts(declared.value?.content), ['accept: Ada'], 'a declared kind (elicitation) is asked as usual', diagnose(sdk, declared))
  })

  t.test('without sessions: capabilities are unknown, the server asks, the SDK answers an error', async t => {
    const node = await listenAskApp(t)
    const sdk = await connectSdk(t, node.url, { capabilities: { elicitation: {} }, sampling: null, roots: null })
    t.equal(sdk.transport.sessionId, undefined, 'no session')
    const caps = await attempt(sdk.client.callTool({ name: 'caps', arguments: {} }, undefined, CALL))
    t.same(JSON.parse(texts(caps.value?.content)[0] ?? 'null'), {
      capabilities: null,
      supports: { elicitation: true, sampling: true, roots: true }
    }, 'ctx.clientCapabilities undefined, ctx.supports() true')

    const before = await askMetrics(node.app)
    const outcome = await attempt(sdk.client.callTool({ name: 'sample_it', arguments: { prompt: 'hi' } }, undefined, CALL))
    t.notOk(outcome.error, 'the call is answered', diagnose(sdk, outcome))
    t.equal(outcome.value?.isError, true, 'with an isError result')
    t.match(texts(outcome.value?.content).join(''), /^The client answered sampling\/createMessage with error -32601: /,
      'saying the client answered with an error')
    t.same((await answersRecorded(sdk, 1)).map(post => post.status), [202], 'the client\'s error answer was accepted (202)')
    const after = await askMetrics(node.app)
    t.equal(after.pending, 0, `${PENDING} is 0`)
    t.same(grown(before, after), { 'kind=sampling,outcome=declined': 1 }, 'counted as declined')
  })
})

t.test('a response that cannot stream cannot ask', async t => {
  t.test('responseMode \'json\' (SDK 1.x)', async t => {
    const node = await listenAskApp(t, { responseMode: 'json' })
    const sdk = await connectSdk(t, node.url)
    const outcome = await attempt(sdk.client.callTool({ name: 'ask_name', arguments: { tag: 'json' } }, undefined, CALL))
    t.notOk(outcome.error, 'the call is answered', diagnose(sdk, outcome))
    t.equal(outcome.value?.isError, true, 'with an isError result')
    t.match(texts(outcome.value?.content).join(''), /cannot carry a request/)
    t.same(sdk.asked, [], 'the client was asked nothing')
    t.match(sdk.posts.findLast(post => post.method === 'tools/call')?.contentType, /^application\/json/, 'a JSON response')
    t.equal((await askMetrics(node.app)).pending, 0, 'nothing pending')
  })

  t.test('Accept: application/json only, and an item of a 2025-03-26 batch (raw HTTP)', async t => {
    const node = await listenAskApp(t)
    const call = { jsonrpc: '2.0', id: 'json-only', method: 'tools/call', params: { name: 'ask_name', arguments: { tag: 'accept-json' } } }
    const jsonOnly = await rawPost(node.url, call, { accept: 'application/json' })
    t.equal(jsonOnly.status, 200)
    const body = JSON.parse(jsonOnly.text) as JsonRpcMessage
    t.equal(body.result?.isError, true, 'an isError result')
    t.match(texts(body.result?.content).join(''), /cannot carry a request/)

    const batch = await rawPost(node.url, [{ ...call, id: 'in-batch' }], { 'mcp-protocol-version': '2025-03-26' })
    t.equal(batch.status, 200)
    const [item] = JSON.parse(batch.text) as JsonRpcMessage[]
    t.equal(item?.id, 'in-batch')
    t.equal(item?.result?.isError, true, 'an isError result')
    t.match(texts(item?.result?.content).join(''), /cannot carry a request/)
    t.equal((await askMetrics(node.app)).pending, 0, 'nothing pending')
  })
})

const skip = redisSkipReason(t)

t.test('two nodes on one Redis: the answer POSTed to node B reaches the ask waiting on node A', { skip }, async t => {
  const redis = await RedisServer.start(t)

  t.test('same secret and session secret: the SDK\'s answers go to B, the tool completes on A', async t => {
    const env = { MCP_CONFORMANCE: '1', MCP_REDIS_URL: redis.url, MCP_SECRET: SECRET, MCP_SESSION_SECRET: SESSION_SECRET }
    const a = await listenDemo(t, env)
    const b = await listenDemo(t, env)
    // Both buses subscribed: cross-node cancellation works both ways (as test/redis/multi-node.test.ts waits for it).
    const since = Date.now()
    const warm = await untilCrossNodeWorks(a, b, since, 5000) !== undefined && await untilCrossNodeWorks(b, a, since, 5000) !== undefined
    t.ok(warm, 'the nodes reach each other over Redis')

    const sdk = await connectSdk(t, a.url, { answersTo: b.url })
    t.match(sdk.transport.sessionId, CAPABILITY_SESSION, 'a session minted on A')
    const outcome = await attempt(sdk.client.callTool({ name: 'test_elicitation', arguments: { message: 'Across nodes' } }, undefined, CALL))
    t.notOk(outcome.error, 'the call completes', diagnose(sdk, outcome))
    t.same(texts(outcome.value?.content), ['User response: action=accept, content={"username":"ada","email":"ada@example.com"}'],
      'A\'s stream delivered the result with the answer B received')
    t.same(sdk.posts.filter(post => post.method === 'tools/call').map(post => post.host), [a.url.host], 'the call went to A')
    t.same((await answersRecorded(sdk, 1)).map(post => [post.host, post.status]), [[b.url.host, 202]], 'the answer went to B, which accepted it')
    t.equal(await metricValue(a.url, PENDING), 0, `A's ${PENDING} is back to 0`)
    t.equal(await metricValue(b.url, PENDING), 0, `B's ${PENDING} shows nothing pending`)
    const answered = async (node: Listening): Promise<number> =>
      (await askMetrics(node.app)).outcomes['kind=elicitation,outcome=answered'] ?? 0
    t.equal(await answered(a) + await answered(b), 1, 'the answer was counted once in the cluster')
  })

  t.test('an answer POSTed to B that breaks A\'s requested schema: B accepts it (202), A fails the ask', async t => {
    const env = { MCP_CONFORMANCE: '1', MCP_REDIS_URL: redis.url, MCP_SECRET: SECRET }
    const a = await listenDemo(t, env)
    const b = await listenDemo(t, env)
    const since = Date.now()
    t.ok(await untilCrossNodeWorks(a, b, since, 5000) !== undefined && await untilCrossNodeWorks(b, a, since, 5000) !== undefined, 'the nodes reach each other over Redis')
    const call = legacyCall(a.url, 'cross-schema', 'test_elicitation', { message: 'Your details?' })
    t.teardown(() => { call.destroy() })
    const asked = await serverRequest(call, 'elicitation/create')
    const forged = { jsonrpc: '2.0', id: asked?.id, result: { action: 'accept', content: { username: 'ada', email: 42 } } }
    t.equal((await rawPost(b.url, forged)).status, 202, 'B cannot know the question: 202, forwarded')
    const final = await finalMessage(call)
    t.equal(final?.result?.isError, true, 'A\'s tool did not get the answer as valid')
    t.match(texts(final?.result?.content).join(''), /the content does not match the requested schema: \/email must be string/)
    t.equal((await askMetrics(a.app)).outcomes['kind=elicitation,outcome=invalid'], 1, 'counted invalid on A')
  })

  t.test('different secrets: B refuses A\'s id with 400, the ask on A keeps waiting', async t => {
    const a = await listenDemo(t, { MCP_CONFORMANCE: '1', MCP_REDIS_URL: redis.url, MCP_SECRET: SECRET })
    const b = await listenDemo(t, { MCP_CONFORMANCE: '1', MCP_REDIS_URL: redis.url, MCP_SECRET: OTHER_SECRET })
    const call = legacyCall(a.url, 'cross-secret', 'test_elicitation', { message: 'Which secret?' })
    t.teardown(() => { call.destroy() })
    const asked = await serverRequest(call, 'elicitation/create')
    t.match(asked?.id, SERVER_REQUEST_ID, 'A asked')
    const answer = { jsonrpc: '2.0', id: asked?.id, result: { action: 'accept', content: { username: 'bob', email: 'bob@example.com' } } }

    const refused = await rawPost(b.url, answer)
    t.equal(refused.status, 400, 'B refuses it: 400')
    t.equal(errorCode(refused), -32600, 'Invalid Request')
    await new Promise(resolve => setTimeout(resolve, 100))
    t.equal(await metricValue(a.url, PENDING), 1, 'A still waits')
    t.equal(call.messages().some(message => 'result' in message || 'error' in message), false, 'the call has no answer yet')

    t.equal((await rawPost(a.url, answer)).status, 202, 'answered on A itself: 202')
    const final = await finalMessage(call)
    t.same(texts(final?.result?.content), ['User response: action=accept, content={"username":"bob","email":"bob@example.com"}'], 'and the tool completes')
  })
})

t.test('raw HTTP answers that must be refused', async t => {
  const statuses: number[] = []
  const answer = async (url: URL, body: unknown, headers: Record<string, string> = {}): Promise<RawResponse> => {
    const response = await rawPost(url, body, headers)
    statuses.push(response.status)
    return response
  }
  /** A legacy tools/call whose HTTP status is recorded too. */
  const recordedCall = (url: URL, id: string, name: string, args: Record<string, unknown>, headers: Record<string, string> = {}): RawCall => {
    const call = legacyCall(url, id, name, args, { headers })
    void call.headers.then(head => { statuses.push(head?.status ?? 0) })
    return call
  }

  t.test('with sessions: bad ids and another session\'s answer are 400 and leave the ask pending', async t => {
    const node = await listenAskApp(t, { sessions: { secret: SESSION_SECRET } })
    const [mine, theirs] = await Promise.all([openSession(node.url, { elicitation: {} }), openSession(node.url, { elicitation: {} })])
    const as = (session: string): Record<string, string> => ({ ...LEGACY, 'mcp-session-id': session })
    const before = await askMetrics(node.app)
    const call = recordedCall(node.url, 'raw-1', 'ask_name', { tag: 'raw' }, as(mine))
    t.teardown(() => { call.destroy() })
    const asked = await serverRequest(call, 'elicitation/create')
    const id = String(asked?.id)
    t.match(id, SERVER_REQUEST_ID, 'the server asked on the stream')
    const reply = (idValue: unknown): Record<string, unknown> => ({ jsonrpc: '2.0', id: idValue, result: { action: 'accept', content: { name: 'Ada' } } })
    const flipped = id.slice(0, -2) + (id.at(-2) === 'A' ? 'B' : 'A') + id.slice(-1)

    const refusals: Array<[string, unknown, Record<string, string>]> = [
      ['a number id', 7, as(mine)],
      ['a 300-character string id', 'a'.repeat(300), as(mine)],
      ['a forged MAC', flipped, as(mine)],
      ['the genuine id from another session', id, as(theirs)],
      ['the genuine id without a session', id, LEGACY]
    ]
    for (const [what, idValue, headers] of refusals) {
      const response = await answer(node.url, reply(idValue), headers)
      t.equal(response.status, 400, `${what}: 400`)
      t.equal(errorCode(response), -32600, `${what}: -32600`)
    }
    t.equal(await pendingBecomes(node.app, 1), 1, 'the ask is still pending')
    t.equal(node.records[0]?.error, undefined, 'untouched')
    t.equal(call.messages().some(message => 'result' in message || 'error' in message), false, 'the call has no answer yet')
    t.same(grown(before, await askMetrics(node.app)), {}, 'no answer counted')

    t.equal((await answer(node.url, reply(id), as(mine))).status, 202, 'the genuine answer in its session: 202', { id })
    const final = await finalMessage(call)
    t.same(texts(final?.result?.content), ['accept: Ada'], 'the tool completes with it')
    t.equal(await pendingBecomes(node.app, 0), 0, 'nothing pending')
    t.same(grown(before, await askMetrics(node.app)), { 'kind=elicitation,outcome=answered': 1 }, 'one answer counted')
    t.equal((await answer(node.url, reply(id), as(mine))).status, 202, 'answering again: 202, ignored')
    t.same(grown(before, await askMetrics(node.app)), { 'kind=elicitation,outcome=answered': 1 }, 'not counted again')
  })

  t.test('an answer of the wrong shape is 400 -32602, and the call fails with -32602', async t => {
    const node = await listenAskApp(t)
    const before = await askMetrics(node.app)
    const call = recordedCall(node.url, 'raw-shape', 'ask_name', { tag: 'shape' })
    t.teardown(() => { call.destroy() })
    const asked = await serverRequest(call, 'elicitation/create')
    const refused = await answer(node.url, { jsonrpc: '2.0', id: asked?.id, result: { foo: 1 } })
    t.equal(refused.status, 400, '400')
    t.equal(errorCode(refused), -32602, 'Invalid params')
    const final = await finalMessage(call)
    t.equal(final?.id, 'raw-shape')
    t.equal(final?.error?.code, -32602, 'the tool call\'s final message is a -32602 error')
    t.equal(final?.result, undefined, 'not a result')
    t.equal(await pendingBecomes(node.app, 0), 0, 'nothing pending')
    t.same(grown(before, await askMetrics(node.app)), { 'kind=elicitation,outcome=invalid': 1 }, 'counted as invalid')
    t.equal((await answer(node.url, { jsonrpc: '2.0', id: asked?.id, result: { action: 'accept', content: { name: 'Ada' } } })).status, 202,
      'a proper answer afterwards is late: 202')
  })

  t.test('an answer of the right shape that breaks the requested schema or its result type is 202, and the ask fails with ClientInputError', async t => {
    const node = await listenAskApp(t)
    const before = await askMetrics(node.app)
    const shapes: Array<[string, string, Record<string, unknown>, RegExp]> = [
      ['an operator object for a string', 'ask_name', { action: 'accept', content: { name: { $gt: '' } } }, /elicitation\/create: every content value must be/],
      ['a sampling result without model', 'sample_it', { role: 'assistant', content: { type: 'text', text: 'hi' } }, /sampling\/createMessage: model must be a string/]
    ]
    for (const [what, tool, result, message] of shapes) {
      const call = recordedCall(node.url, `raw-${tool}`, tool, tool === 'ask_name' ? { tag: 'raw-schema' } : { prompt: 'p' })
      t.teardown(() => { call.destroy() })
      const asked = await serverRequest(call, tool === 'ask_name' ? 'elicitation/create' : 'sampling/createMessage')
      const accepted = await answer(node.url, { jsonrpc: '2.0', id: asked?.id, result })
      t.equal(accepted.status, 202, `${what}: 202`)
      const final = await finalMessage(call)
      t.equal(final?.result?.isError, true, `${what}: the tool's result is isError`)
      t.match(texts(final?.result?.content).join(''), message, `${what}: saying why`)
      t.notMatch(JSON.stringify(final), /\$gt/, `${what}: without echoing the answer`)
    }
    t.equal((node.records.find(r => r.tag === 'raw-schema')?.error as ClientInputError | undefined)?.failure, 'invalid', 'the ask failed with failure invalid')
    t.same(grown(before, await askMetrics(node.app)), { 'kind=elicitation,outcome=invalid': 1, 'kind=sampling,outcome=invalid': 1 }, 'each counted invalid')
    t.equal(await pendingBecomes(node.app, 0), 0, 'nothing pending')
  })

  t.test('with a principal: another principal\'s or an anonymous answer is 400', async t => {
    const node = await listenAskApp(t, { auth: { principal: (request: FastifyRequest) => request.headers['x-user'], required: false } })
    const call = recordedCall(node.url, 'raw-principal', 'ask_name', { tag: 'principal' }, { 'x-user': 'alice' })
    t.teardown(() => { call.destroy() })
    const asked = await serverRequest(call, 'elicitation/create')
    const body = { jsonrpc: '2.0', id: asked?.id, result: { action: 'accept', content: { name: 'Alice' } } }
    t.equal((await answer(node.url, body, { 'x-user': 'bob' })).status, 400, 'bob: 400')
    t.equal((await answer(node.url, body)).status, 400, 'anonymous (same address): 400')
    t.equal(await pendingBecomes(node.app, 1), 1, 'still pending')
    t.equal((await answer(node.url, body, { 'x-user': 'alice' })).status, 202, 'alice: 202')
    t.same(texts((await finalMessage(call))?.result?.content), ['accept: Alice'], 'the tool completes with alice\'s answer')
  })

  t.test('no POST was ever answered with a 5xx', async t => {
    t.ok(statuses.length >= 15, `${statuses.length} POSTs were answered (the calls and every answer)`)
    t.same(statuses.filter(status => status >= 500 || status === 0), [], 'none with a 5xx (nor without a status)')
  })
})

/** The node part of a server-request id (`a1.<kind>.<node>.<random>.<mac>`). */
const nodeOf = (id: unknown): string => typeof id === 'string' ? id.split('.')[2] ?? '' : ''

t.test('whatever node name a process draws without Redis, its asks can be answered', async t => {
  // Without Redis each process names itself with random base64url characters, so some names hold a
  // '_' (about 12% of processes). Fresh apps are started, one at a time, until one such name has been
  // seen (at most 64): every one must accept the genuine answer to its own ask.
  const attempts: Array<{ node: string, status: number, completed: boolean }> = []
  while (attempts.length < 64 && !attempts.some(attempt => attempt.node.includes('_'))) {
    const app = Fastify({ logger: false })
    await app.register(mcpCancellation, { serverInfo: { name: 'node-names', version: '1.0.0' }, inputTimeoutMs: 5000 })
    app.mcp.tool({
      name: 'ask',
      handler: async (_args, ctx) => text(`got ${String((await ctx.elicit({ message: 'Name?', requestedSchema: oneString('name') })).content?.name)}`)
    })
    await app.listen({ host: '127.0.0.1', port: 0 })
    const url = new URL(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/mcp`)
    const call = legacyCall(url, 'names', 'ask', {})
    try {
      const asked = await serverRequest(call, 'elicitation/create')
      const response = await rawPost(url, { jsonrpc: '2.0', id: asked?.id, result: { action: 'accept', content: { name: 'Ada' } } })
      const final = response.status === 202 ? await finalMessage(call) : undefined
      attempts.push({ node: nodeOf(asked?.id), status: response.status, completed: texts(final?.result?.content)[0] === 'got Ada' })
    } finally {
      call.destroy()
      await app.close()
    }
  }
  const refused = attempts.filter(attempt => attempt.status !== 202 || !attempt.completed)
  t.same(refused, [], `each of ${attempts.length} processes accepted the answer to its ask and completed the call`, {
    nodes: attempts.map(attempt => attempt.node)
  })
})
