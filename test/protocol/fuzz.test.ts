/**
 * Property-based fuzzing (fast-check) of what a client controls: the JSON-RPC envelope (ids, methods,
 * params, batches, raw text), the headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name, Accept,
 * Content-Type…) and the params of notifications/cancelled racing a running `sleep`. Properties: never a
 * 5xx, never an internal error, never an uncaught exception or error log; every non-202 answer is
 * well-formed JSON-RPC; afterwards nothing is in flight and no cancellation row is left.
 *
 * Runs: ≥ 5 000 in all when `CI` is set, 600 otherwise.
 */
import { Writable } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import fc from 'fast-check'
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import { sleepInSteps } from '../../example/app.js'
import mcpCancellation from '../../lib/index.js'
import { SERVER_INFO } from '../helpers/inject.js'
import { hasStackTrace, jsonRpcResponseViolation, LEGACY_HEADERS, modernMeta, sseFrames } from '../helpers/jsonrpc.js'
import { registerCounter, registerEcho } from '../helpers/tools.js'

const CI = process.env.CI !== undefined && process.env.CI !== '' && process.env.CI !== 'false' && process.env.CI !== '0'
const RUNS = CI ? { envelope: 2600, headers: 1400, cancel: 1200 } : { envelope: 240, headers: 180, cancel: 180 }
const MIN_TOTAL = CI ? 5000 : 500
let totalRuns = 0

const VERSIONS = ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']
const METHODS = [
  'initialize', 'ping', 'tools/list', 'tools/call', 'resources/list', 'resources/read', 'resources/templates/list',
  'resources/subscribe', 'resources/unsubscribe', 'prompts/list', 'prompts/get', 'completion/complete',
  'logging/setLevel', 'server/discover', 'notifications/cancelled', 'notifications/initialized', 'notifications/progress'
]
const TOOLS = ['sleep', 'echo', 'count', 'nope']

interface Fuzzed {
  app: FastifyInstance
  /** Error-level log lines and uncaught exceptions/rejections seen while the app ran. */
  incidents: string[]
}

/** The plugin (sessions and auth off) with a fast `sleep`, `echo` and `count`; error logs and uncaught errors are recorded. */
async function fuzzApp (t: Test): Promise<Fuzzed> {
  const incidents: string[] = []
  const stream = new Writable({
    write (chunk: Buffer, _encoding, done) {
      incidents.push(`log: ${chunk.toString().slice(0, 500)}`)
      done()
    }
  })
  const app = Fastify({ logger: { level: 'error', stream } })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, { serverInfo: SERVER_INFO, progressIntervalMs: 0 })
  app.mcp.tool<{ ms: number, stepMs?: number }>({
    name: 'sleep',
    description: 'Waits ms (at most 8) in steps, reporting progress; stops when cancelled',
    inputSchema: {
      type: 'object',
      properties: { ms: { type: 'integer', minimum: 0, maximum: 8 }, stepMs: { type: 'integer', minimum: 1, maximum: 8 } },
      required: ['ms']
    },
    handler: async ({ ms, stepMs = 2 }, ctx) => await sleepInSteps(ms, stepMs, ctx)
  })
  registerEcho(app)
  registerCounter(app)
  await app.ready()
  const onUncaught = (error: unknown): void => { incidents.push(`uncaught: ${String((error as Error)?.stack ?? error)}`) }
  process.on('uncaughtException', onUncaught)
  process.on('unhandledRejection', onUncaught)
  t.teardown(() => {
    process.off('uncaughtException', onUncaught)
    process.off('unhandledRejection', onUncaught)
  })
  return { app, incidents }
}

// ---- arbitraries -------------------------------------------------------------------------------

/** Header values Node lets through: visible ASCII, space, tab and latin-1 (obs-text). */
const headerText = fc.string({
  unit: fc.oneof(
    { weight: 8, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map(c => String.fromCharCode(c)) },
    { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map(c => String.fromCharCode(c)) },
    { weight: 1, arbitrary: fc.constant('\t') }
  ),
  maxLength: 60
})

const requestId = fc.oneof(
  { weight: 4, arbitrary: fc.integer() },
  { weight: 2, arbitrary: fc.constantFrom(0, -1, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER + 1, -Number.MAX_SAFE_INTEGER - 2, 1e21, -0, 2 ** 53) },
  { weight: 2, arbitrary: fc.double() },
  { weight: 4, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 80 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.integer({ min: 240, max: 300 }).map(n => 'é'.repeat(Math.ceil(n / 2)).slice(0, n)) },
  { weight: 1, arbitrary: fc.integer({ min: 250, max: 270 }).map(n => 'i'.repeat(n)) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, {}, [], [1]) }
)

const method = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...METHODS) },
  { weight: 2, arbitrary: fc.string({ maxLength: 30 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
  { weight: 1, arbitrary: fc.constantFrom(1, null, {}, ['tools/call']) }
)

const json = fc.jsonValue({ maxDepth: 4 })

const meta = fc.oneof(
  fc.constant(undefined),
  fc.constant(modernMeta()),
  fc.record({ progressToken: requestId }),
  fc.record({ 'io.modelcontextprotocol/protocolVersion': fc.oneof(fc.constantFrom(...VERSIONS), fc.string({ maxLength: 20 }), json) }),
  fc.tuple(fc.constantFrom('debug', 'info', 'error', 'loud', 7), requestId).map(([level, token]) =>
    modernMeta({ 'io.modelcontextprotocol/logLevel': level, progressToken: token })),
  json
)

const toolArguments = fc.oneof(
  fc.record({ ms: fc.integer({ min: -2, max: 10 }), stepMs: fc.option(fc.integer({ min: 0, max: 9 }), { nil: undefined }) }, { requiredKeys: ['ms'] }),
  fc.record({ text: fc.oneof(fc.string(), json) }),
  json
)

const params = fc.oneof(
  { weight: 2, arbitrary: fc.constant(undefined) },
  { weight: 3, arbitrary: json },
  {
    weight: 5,
    arbitrary: fc.record({
      name: fc.oneof(fc.constantFrom(...TOOLS), fc.string({ maxLength: 20 }), json),
      arguments: fc.option(toolArguments, { nil: undefined }),
      uri: fc.option(fc.oneof(fc.constantFrom('test://static', 'file:///x'), fc.string()), { nil: undefined }),
      _meta: meta
    }, { requiredKeys: [] })
  },
  { weight: 2, arbitrary: fc.dictionary(fc.string({ maxLength: 12 }), json, { maxKeys: 6 }) }
)

/** A JSON-RPC-ish object: each member present or not, mostly plausible, sometimes wrong. */
const envelope = fc.record({
  jsonrpc: fc.oneof({ weight: 9, arbitrary: fc.constant('2.0') }, { weight: 1, arbitrary: json }),
  id: requestId,
  method,
  params,
  result: json,
  error: json
}, { requiredKeys: [] }).map(e => {
  // Most messages are requests or notifications: drop result/error most of the time.
  const message: Record<string, unknown> = { ...e }
  if (typeof message.method === 'string' && Object.keys(message).length % 3 !== 0) {
    delete message.result
    delete message.error
  }
  return message
})

const body = fc.oneof(
  { weight: 12, arbitrary: envelope.map(e => JSON.stringify(e)) },
  { weight: 2, arbitrary: fc.array(envelope, { minLength: 0, maxLength: 4 }).map(b => JSON.stringify(b)) },
  { weight: 1, arbitrary: fc.json({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 80 }) },
  { weight: 1, arbitrary: fc.constantFrom('', '{', '[]', '{}', 'null', '"x"', '{"jsonrpc":"2.0","id":1,"method":"ping"', '\ufeff{}') }
)

type HeaderSet = Record<string, string | undefined>

/** A header that is usually `good`, sometimes absent, sometimes random text. */
function usually (good: fc.Arbitrary<string>, others: fc.Arbitrary<string | undefined> = fc.constant(undefined)): fc.Arbitrary<string | undefined> {
  return fc.oneof({ weight: 6, arbitrary: good }, { weight: 1, arbitrary: others }, { weight: 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: headerText })
}

/** Random request headers, mostly those of a well-behaved client, each sometimes missing or garbage. */
const headers = fc.record({
  'mcp-protocol-version': usually(fc.constantFrom(...VERSIONS)),
  'mcp-method': fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: fc.constantFrom(...METHODS) }, { weight: 1, arbitrary: headerText }),
  'mcp-name': fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 2, arbitrary: fc.constantFrom(...TOOLS, '=?base64?c2xlZXA=?=', '=?base64?!!?=') }, { weight: 1, arbitrary: headerText }),
  accept: usually(fc.constant('application/json, text/event-stream'),
    fc.constantFrom('application/json', 'text/event-stream', '*/*', 'text/html', 'application/json;q=0', 'application/*, text/*', '')),
  'content-type': usually(fc.constant('application/json'),
    fc.constantFrom('application/json; charset=utf-8', 'APPLICATION/JSON', 'text/plain', 'application/jsonx', '')),
  'mcp-session-id': fc.oneof({ weight: 6, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: headerText }),
  origin: fc.oneof({ weight: 12, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom('http://localhost:3000', 'http://evil.example', 'null') })
})

// ---- the properties ----------------------------------------------------------------------------

/** Why `response` breaks the contract, or undefined. `sent` is the body when it was one JSON object. */
function violation (response: LightMyRequestResponse, sent: unknown, allowNoResponse = false): string | undefined {
  if (response.statusCode >= 500) return `status ${response.statusCode}: ${response.payload.slice(0, 300)}`
  if (hasStackTrace(response.payload)) return `a stack trace: ${response.payload.slice(0, 300)}`
  if (response.statusCode === 202) return response.payload === '' ? undefined : `202 with a body: ${response.payload.slice(0, 200)}`
  const type = String(response.headers['content-type'] ?? '')
  let messages: unknown[]
  try {
    if (type.startsWith('text/event-stream')) {
      const all = sseFrames(response.payload).filter(f => f.data !== '').map(f => JSON.parse(f.data) as Record<string, unknown>)
      const notifications = all.filter(m => typeof m.method === 'string')
      if (notifications.some(n => n.jsonrpc !== '2.0')) return 'an SSE notification without jsonrpc 2.0'
      messages = all.filter(m => typeof m.method !== 'string')
      if (messages.length > 1 || (messages.length === 0 && !allowNoResponse)) return `${messages.length} responses in one SSE stream`
      if (messages.length === 1 && all.at(-1) !== messages[0]) return 'a notification after the response'
    } else if (type.startsWith('application/json')) {
      const parsed = JSON.parse(response.payload) as unknown
      messages = Array.isArray(parsed) ? parsed : [parsed]
      if (Array.isArray(parsed) && parsed.length === 0) return 'an empty JSON array'
    } else {
      return `status ${response.statusCode} with content-type "${type}": ${response.payload.slice(0, 200)}`
    }
  } catch (error) {
    return `unparseable body (${(error as Error).message}): ${response.payload.slice(0, 200)}`
  }
  for (const message of messages) {
    const wrong = jsonRpcResponseViolation(message)
    if (wrong !== undefined) return `${wrong}: ${JSON.stringify(message).slice(0, 300)}`
    const { error, id } = message as { error?: { code: number }, id?: unknown }
    if (error?.code === -32603) return `an internal error for client input: ${JSON.stringify(message).slice(0, 300)}`
    if (id !== undefined && sent !== undefined && typeof sent === 'object' && sent !== null && !Array.isArray(sent) &&
      !Object.is((sent as { id?: unknown }).id, id)) return `answered id ${JSON.stringify(id)} to a request with id ${JSON.stringify((sent as { id?: unknown }).id)}`
  }
  return undefined
}

function parsedOrUndefined (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** Answers seen, by status and JSON-RPC outcome: printed as a comment, so a run shows what it reached. */
const outcomes = new Map<string, number>()

async function send (app: FastifyInstance, payload: string, headerSet: HeaderSet): Promise<LightMyRequestResponse> {
  const present: Record<string, string> = {}
  for (const [name, value] of Object.entries(headerSet)) if (value !== undefined) present[name] = value
  const response = await app.inject({ method: 'POST', url: '/mcp', headers: present, payload })
  const code = /"error":\{"code":(-?\d+)/.exec(response.payload)?.[1]
  const key = `${response.statusCode} ${code ?? (response.payload.includes('"result"') ? 'result' : '-')}`
  outcomes.set(key, (outcomes.get(key) ?? 0) + 1)
  return response
}

/** Runs `property` `numRuns` times; a counterexample (or incident) fails the test with fast-check's report. */
async function check<T> (t: Test, fuzzed: Fuzzed, arbitrary: fc.Arbitrary<T>, numRuns: number,
  property: (value: T) => Promise<string | undefined>): Promise<void> {
  let runs = 0
  try {
    await fc.assert(fc.asyncProperty(arbitrary, async value => {
      runs++
      const before = fuzzed.incidents.length
      const wrong = await property(value)
      if (wrong !== undefined) throw new Error(wrong)
      const { inFlightRows, rows } = fuzzed.app.mcpCancellation
      if (inFlightRows !== 0 || rows !== 0) throw new Error(`left ${inFlightRows} in-flight and ${rows} cancellation rows`)
      if (fuzzed.incidents.length > before) throw new Error(fuzzed.incidents.slice(before).join('\n'))
    }), { numRuns, endOnFailure: false, interruptAfterTimeLimit: 60_000 })
  } catch (error) {
    t.fail(String((error as Error).message).slice(0, 4000))
  }
  totalRuns += runs
  t.comment(`outcomes: ${[...outcomes].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k}×${n}`).join(', ')}`)
  outcomes.clear()
  t.ok(runs >= numRuns, `${runs} runs`)
  t.same(fuzzed.incidents, [], 'no uncaught exception, no error log')
  t.equal(fuzzed.app.mcpCancellation.inFlightRows, 0, 'nothing in flight afterwards')
  t.equal(fuzzed.app.mcpCancellation.rows, 0, 'no cancellation row afterwards')
}

t.test('random envelopes with random headers', async t => {
  const fuzzed = await fuzzApp(t)
  const arbitrary = fc.tuple(body, headers, fc.boolean())
  await check(t, fuzzed, arbitrary, RUNS.envelope, async ([payload, headerSet, coherent]) => {
    const sent = parsedOrUndefined(payload)
    const h: HeaderSet = { ...headerSet }
    if (coherent && typeof sent === 'object' && sent !== null && !Array.isArray(sent)) {
      // A client that mirrors its body in the headers, so modern requests get past the header checks.
      const { method: m, params: p } = sent as { method?: unknown, params?: { name?: unknown, _meta?: Record<string, unknown> } }
      if (typeof m === 'string' && /^[\x20-\x7e]*$/.test(m)) h['mcp-method'] = m
      if (typeof p?.name === 'string' && /^[\x20-\x7e]*$/.test(p.name)) h['mcp-name'] = p.name
      const claim = p?._meta?.['io.modelcontextprotocol/protocolVersion']
      if (typeof claim === 'string' && /^[\x20-\x7e]*$/.test(claim)) h['mcp-protocol-version'] = claim
    }
    return violation(await send(fuzzed.app, payload, h), sent)
  })
})

const VALID_BODIES = [
  { jsonrpc: '2.0', id: 1, method: 'ping' },
  { jsonrpc: '2.0', id: 'a', method: 'tools/call', params: { name: 'sleep', arguments: { ms: 2 }, _meta: { progressToken: 't' } } },
  { jsonrpc: '2.0', id: 2, method: 'tools/list', params: { _meta: modernMeta() } },
  { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' }, _meta: modernMeta() } },
  { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } },
  initializeLike()
]

function initializeLike (): Record<string, unknown> {
  return { jsonrpc: '2.0', id: 4, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'f', version: '1' } } }
}

t.test('valid bodies with random headers', async t => {
  const fuzzed = await fuzzApp(t)
  const arbitrary = fc.tuple(fc.constantFrom(...VALID_BODIES), headers, fc.oneof(fc.constant({}), fc.dictionary(
    fc.constantFrom('mcp-protocol-version', 'mcp-method', 'mcp-name', 'accept', 'content-type', 'x-extra', 'mcp-param-name'),
    headerText, { maxKeys: 2 })))
  await check(t, fuzzed, arbitrary, RUNS.headers, async ([message, headerSet, overrides]) => {
    const h: HeaderSet = { ...headerSet, ...overrides }
    return violation(await send(fuzzed.app, JSON.stringify(message), h), message)
  })
})

const cancelParams = fc.record({
  requestId: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(1, '1', 2, 'a', 'b') }, { weight: 2, arbitrary: requestId }, { weight: 1, arbitrary: json }),
  reason: fc.oneof(fc.string({ maxLength: 300 }), fc.string({ unit: 'binary', maxLength: 100 }), json, fc.constant(null)),
  extra: json,
  _meta: meta
}, { requiredKeys: [] })

t.test('notifications/cancelled with random params racing a running sleep', async t => {
  const fuzzed = await fuzzApp(t)
  const arbitrary = fc.record({
    callId: fc.constantFrom(1, '1', 2, 'a'),
    ms: fc.integer({ min: 0, max: 4 }),
    stream: fc.boolean(),
    params: fc.oneof({ weight: 8, arbitrary: cancelParams }, { weight: 1, arbitrary: json }),
    version: fc.oneof({ weight: 6, arbitrary: fc.constant('2025-11-25') }, { weight: 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom(...VERSIONS) }, { weight: 1, arbitrary: headerText }),
    delay: fc.integer({ min: 0, max: 2 })
  })
  await check(t, fuzzed, arbitrary, RUNS.cancel, async ({ callId, ms, stream, params: p, version, delay }) => {
    const base = LEGACY_HEADERS
    const callBody = {
      jsonrpc: '2.0',
      id: callId,
      method: 'tools/call',
      params: { name: 'sleep', arguments: { ms, stepMs: 2 }, ...(stream ? { _meta: { progressToken: callId } } : {}) }
    }
    const call = send(fuzzed.app, JSON.stringify(callBody), base)
    if (delay > 0) await sleep(delay)
    const cancelBody = { jsonrpc: '2.0', method: 'notifications/cancelled', params: p }
    const cancelHeaders: HeaderSet = { ...base, 'mcp-protocol-version': version }
    const cancelled = await send(fuzzed.app, JSON.stringify(cancelBody), cancelHeaders)
    const callResponse = await call
    const wrongCancel = violation(cancelled, cancelBody)
    if (wrongCancel !== undefined) return `the cancel: ${wrongCancel}`
    if (![202, 400, 429].includes(cancelled.statusCode)) return `the cancel got ${cancelled.statusCode}: ${cancelled.payload.slice(0, 200)}`
    const wrongCall = violation(callResponse, callBody, true)
    if (wrongCall !== undefined) return `the call: ${wrongCall}`
    if (callResponse.statusCode !== 200 && callResponse.statusCode !== 202) return `the call got ${callResponse.statusCode}`
    if (callResponse.statusCode === 200 && !callResponse.payload.includes(`slept ${ms}`) && !callResponse.headers['content-type']?.toString().startsWith('text/event-stream')) {
      return `a completed call without its result: ${callResponse.payload.slice(0, 200)}`
    }
    return undefined
  })
})

t.test(`at least ${MIN_TOTAL} cases ran${CI ? ' (CI)' : ''}`, async t => {
  t.ok(totalRuns >= MIN_TOTAL, `${totalRuns} cases`)
})
