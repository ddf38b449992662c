/**
 * Worker tools ask the client as in-process tools do: in 2026-07-28 the ask ends the round
 * (`input_required`) and the retry answers it, with `ctx.state` carried; in the legacy era the ask
 * travels from the thread to the main thread, out on the response's stream, and the answer back.
 */
import t from 'tap'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema, ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import type { FastifyInstance } from 'fastify'
import type { McpCancellationOptions } from '../../lib/index.js'
import { buildApp, json, postModern } from '../helpers/inject.js'
import { META } from '../helpers/jsonrpc.js'
import { listenPlugin, type Listening } from '../helpers/listen.js'

const WORKER = new URL('../workers/asking.ts', import.meta.url)
const SECRET = 'worker-asks-test-secret-0123456789abcdef'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

function registerTools (app: FastifyInstance): void {
  for (const name of ['greet', 'patient', 'refuse']) app.mcp.tool({ name, worker: { filename: WORKER, name } })
}

async function server (t: Tap, options: McpCancellationOptions = {}): Promise<Listening> {
  return await listenPlugin(t, { secret: SECRET, ...options }, {}, registerTools)
}

async function legacyClient (t: Tap, url: URL, answerRoots = true): Promise<Client> {
  const client = new Client({ name: 'worker-asks', version: '1.0.0' }, { capabilities: { elicitation: {}, roots: {} } })
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Ada' } }))
  if (answerRoots) client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///work' }] }))
  else client.setRequestHandler(ListRootsRequestSchema, async () => await new Promise(() => {}))
  await client.connect(new StreamableHTTPClientTransport(url))
  t.teardown(async () => { await client.close() })
  return client
}

const textOf = (result: unknown): string | undefined => (result as { content?: Array<{ text?: string }> }).content?.[0]?.text

t.test('2026-07-28: a worker tool\'s ask ends the round; the retry answers it and carries ctx.state', async t => {
  const app = await buildApp(t, { secret: SECRET }, registerTools)
  const meta = { meta: { [META.clientCapabilities]: { elicitation: {} } } }
  const first = json(await postModern(app, 'tools/call', { name: 'greet' }, meta))
  t.equal(first.result?.resultType, 'input_required')
  t.same(Object.keys(first.result?.inputRequests ?? {}), ['elicitation-1'], 'the automatic key of the first elicitation')
  const second = json(await postModern(app, 'tools/call', {
    name: 'greet', inputResponses: { 'elicitation-1': { action: 'accept', content: { name: 'Ada' } } }, requestState: first.result?.requestState
  }, meta))
  t.equal(textOf(second.result), 'Hello, Ada (round 2, supports elicitation: true)', 'answered, with the state set in round 1')
})

t.test('legacy: a worker tool asks over the response stream and gets the SDK client\'s answer', async t => {
  const { url } = await server(t)
  const client = await legacyClient(t, url)
  const result = await client.callTool({ name: 'greet', arguments: {} })
  t.equal(textOf(result), 'Hello, Ada (round 1, supports elicitation: true)')
  t.equal(textOf(await client.callTool({ name: 'patient', arguments: {} })), 'roots: file:///work')
})

t.test('legacy: an unanswered ask times out in the worker as a ClientInputError', async t => {
  const { url } = await server(t, { inputTimeoutMs: 300 })
  const client = await legacyClient(t, url, false)
  t.equal(textOf(await client.callTool({ name: 'patient', arguments: {} })), 'no roots: timeout')
})

t.test('a ToolError thrown in a worker thread is an isError result', async t => {
  const { url } = await server(t)
  const client = await legacyClient(t, url)
  const result = await client.callTool({ name: 'refuse', arguments: {} })
  t.equal(result.isError, true)
  t.equal(textOf(result), 'refused in a worker')
})
