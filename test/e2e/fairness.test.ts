/**
 * One tenant cannot starve the rest. Scope A (a principal) sends ten times `maxInFlightPerScope`
 * concurrent slow worker calls through an official client: only `maxInFlightPerScope` are admitted,
 * the rest are refused at once with 429, a JSON-RPC error and `Retry-After`, before any handler runs,
 * and counted. Scope B, calling meanwhile, is never refused, and its calls wait for the pool by at
 * most one task's time: worker tools queue per scope, round robin, not first come first served.
 */
import t from 'tap'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client'
import { rawPost } from '../helpers/http.js'
import { DEFAULT_HEADERS, LEGACY_HEADERS, modernMeta, toolCall } from '../helpers/jsonrpc.js'
import { listenPlugin, type Listening } from '../helpers/listen.js'
import { attempt, describeError, texts } from '../helpers/mcp-results.js'
import { findPromtool, promtoolCheck, scrape, scrapeMetrics } from '../helpers/metrics.js'
import { waitFor } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const WORKER = new URL('../workers/occupy.ts', import.meta.url)
const MAX_IN_FLIGHT = 8
const THREADS = 2
/** How long one slow call holds its thread: long enough that queueing order shows above a busy machine's jitter. */
const TASK_MS = 500

async function fairServer (t: Tap): Promise<Listening> {
  return await listenPlugin(t, {
    auth: { principal: request => request.headers['x-tenant'], required: false },
    maxInFlightPerScope: MAX_IN_FLIGHT,
    workerPool: { maxThreads: THREADS, minThreads: THREADS }
  }, {}, app => {
    app.mcp.tool({
      name: 'occupy',
      inputSchema: { type: 'object', properties: { ms: { type: 'number' } }, required: ['ms'] },
      worker: { filename: WORKER, name: 'occupy' }
    })
  })
}

const tenant = (name: string): { headers: Record<string, string> } => ({ headers: { 'x-tenant': name } })

async function legacyClient (t: Tap, url: URL, name: string): Promise<LegacyClient> {
  const client = new LegacyClient({ name: `tenant-${name}`, version: '1.0.0' })
  t.teardown(() => client.close())
  await client.connect(new LegacyTransport(url, { requestInit: tenant(name) }))
  return client
}

async function modernClient (t: Tap, url: URL, name: string): Promise<ModernClient> {
  const client = new ModernClient({ name: `tenant-${name}`, version: '2.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
  t.teardown(() => client.close())
  await client.connect(new ModernTransport(url, { requestInit: tenant(name) }))
  return client
}

interface Timed { ms: number, text: string | undefined, error: string | undefined, status: number | undefined }

/** The HTTP status an official client's error carries: `code` in SDK 1.x, `data.status` in 2.x. */
function httpStatusOf (error: unknown): number | undefined {
  const { code, data } = (error ?? {}) as { code?: unknown, data?: { status?: unknown } }
  if (typeof code === 'number' && code >= 400) return code
  return typeof data?.status === 'number' ? data.status : undefined
}

async function timed (call: () => Promise<unknown>): Promise<Timed> {
  const started = performance.now()
  const outcome = await attempt(call())
  const content = (outcome.value as { content?: unknown } | undefined)?.content
  return { ms: performance.now() - started, text: texts(content)[0], error: describeError(outcome.error), status: httpStatusOf(outcome.error) }
}

async function warmUp (server: Listening): Promise<void> {
  // Both threads load the module before anything is timed.
  await Promise.all([1, 2].map(async id => await rawPost(server.url, toolCall(`warm-${id}`, 'occupy', { ms: 50 }), tenant('warm-up').headers)))
}

/** One more call of A, written by hand: a client library does not show the refusal's headers. */
async function oneMoreCall (server: Listening, era: 'legacy' | 'modern'): Promise<Awaited<ReturnType<typeof rawPost>>> {
  const call = toolCall('one-more', 'occupy', { ms: 1 })
  if (era === 'legacy') return await rawPost(server.url, call, { ...LEGACY_HEADERS, ...tenant('a').headers })
  const headers = { ...DEFAULT_HEADERS, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'occupy', ...tenant('a').headers }
  return await rawPost(server.url, { ...call, params: { ...(call.params as object), _meta: modernMeta() } }, headers)
}

for (const era of ['legacy', 'modern'] as const) {
  t.test(`${era} era: a scope's calls beyond maxInFlightPerScope are refused at once; another scope is served within one task's time`, async t => {
    const server = await fairServer(t)
    await warmUp(server)
    const call = era === 'legacy'
      ? async (name: string) => { const client = await legacyClient(t, server.url, name); return async (ms: number) => await client.callTool({ name: 'occupy', arguments: { ms } }) }
      : async (name: string) => { const client = await modernClient(t, server.url, name); return async (ms: number) => await client.callTool({ name: 'occupy', arguments: { ms } }) }
    const [callA, callB] = await Promise.all([call('a'), call('b')])
    const before = await scrapeMetrics(new URL('/metrics', server.url))

    const flood = Array.from({ length: 10 * MAX_IN_FLIGHT }, async () => await timed(async () => await callA(TASK_MS)))
    // A holds every thread and a queue behind them before B asks.
    t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows >= MAX_IN_FLIGHT, 5000), 'A has its calls in flight')
    const refusedRaw = await oneMoreCall(server, era)
    // One after another, as a client does that waits for each answer: each may wait for one slot.
    const served = [await timed(async () => await callB(TASK_MS)), await timed(async () => await callB(TASK_MS))]
    const flooded = await Promise.all(flood)

    t.equal(refusedRaw.status, 429, 'one more call of A is a 429')
    t.equal(refusedRaw.headers.get('retry-after'), '1', 'with Retry-After')
    t.match(JSON.parse(refusedRaw.text), { jsonrpc: '2.0', id: 'one-more', error: { code: -32000, message: /maxInFlightPerScope/ } }, 'and a JSON-RPC error naming the bound')

    const admitted = flooded.filter(outcome => outcome.error === undefined)
    const refused = flooded.filter(outcome => outcome.error !== undefined)
    t.equal(admitted.length, MAX_IN_FLIGHT, `A: ${MAX_IN_FLIGHT} calls admitted`)
    t.ok(admitted.every(outcome => outcome.text === `held a thread ${TASK_MS} ms`), 'and answered')
    t.equal(refused.length, 9 * MAX_IN_FLIGHT, 'the rest refused')
    t.ok(refused.every(outcome => outcome.status === 429 && /Too many requests in flight/.test(outcome.error ?? '')), 'each with 429 and the JSON-RPC error',
      { errors: [...new Set(refused.map(outcome => `${outcome.status} ${outcome.error}`))].join(' | ') })
    const slowestRefusal = Math.max(...refused.map(outcome => outcome.ms))
    t.ok(slowestRefusal < Math.min(...admitted.map(outcome => outcome.ms)), 'at once: every refusal came before the first admitted call ended', { slowestRefusal })

    t.same(served.map(outcome => outcome.error), [undefined, undefined], 'B is never refused')
    t.same(served.map(outcome => outcome.text), [`held a thread ${TASK_MS} ms`, `held a thread ${TASK_MS} ms`], 'and answered')
    // B waits for one of A's running calls to end (at most one task), then runs one task: first come
    // first served would have it wait for A's whole queue as well.
    const bound = 2 * TASK_MS + 300
    t.comment(`B's latencies: ${served.map(outcome => Math.round(outcome.ms)).join(', ')} ms; A's admitted: ${admitted.map(outcome => Math.round(outcome.ms)).join(', ')} ms`)
    t.ok(served.every(outcome => outcome.ms < bound), `B's calls end within 2 tasks' time (${bound} ms)`, { latencies: served.map(outcome => Math.round(outcome.ms)) })

    const after = await scrapeMetrics(new URL('/metrics', server.url))
    const refusals = (exposition: typeof after): number => exposition.value('mcp_requests_refused_total', { reason: 'scope_in_flight' }) ?? 0
    t.equal(refusals(after) - refusals(before), 9 * MAX_IN_FLIGHT + 1, 'every refusal counted in mcp_requests_refused_total{reason="scope_in_flight"}')
    const promtool = findPromtool()
    if (promtool !== undefined) t.equal(promtoolCheck(promtool, (await scrape(new URL('/metrics', server.url))).text).status, 0, 'promtool check metrics is clean')
  })
}
