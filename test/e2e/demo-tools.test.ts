/**
 * What `npm start` shows (DESIGN §8): the people's tools (example/demo-tools.ts) and nothing else; the
 * conformance fixtures (example/conformance-fixtures.ts) only with MCP_CONFORMANCE=1, unchanged; and the
 * two tools a newcomer copies to ask the user (`confirm_action`) and to run as a task (`render`), end to
 * end over a real socket: `@modelcontextprotocol/sdk` 1.x (legacy), `@modelcontextprotocol/client` 2.x
 * pinned to 2026-07-28, and a raw 2026-07-28 task flow (the 2.x client does not speak the extension).
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema, type ElicitResult } from '@modelcontextprotocol/sdk/types.js'
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client'
import type { FastifyInstance } from 'fastify'
import { buildApp, type DemoEnv } from '../../example/app.js'
import { registerConformanceFixtures } from '../../example/conformance-fixtures.js'
import { buildApp as buildPlugin, json, postLegacy } from '../helpers/inject.js'
import { listenDemo } from '../helpers/listen.js'
import { attempt, describeError, strictlyIncreasing, texts } from '../helpers/mcp-results.js'
import { fetchSender, TaskClient, WITHOUT_TASKS } from '../helpers/tasks.js'

const PEOPLES_TOOLS = ['echo', 'sleep', 'stubborn', 'spin', 'confirm_action', 'render', 'touch_resource']
/** The demo's own resource, which touch_resource changes. */
const PEOPLES_RESOURCES = [{ uri: 'demo://touches', name: 'touches', description: 'How many times touch_resource has run on this node', mimeType: 'text/plain' }]
const INITIALIZE = { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'demo-tools', version: '1.0.0' } }
const LISTS = [['tools/list', 'tools'], ['prompts/list', 'prompts'], ['resources/list', 'resources'], ['resources/templates/list', 'resourceTemplates']] as const

/** The demo built from `env`, ready, closed at the end of the test. */
async function demo (t: Test, env: DemoEnv): Promise<FastifyInstance> {
  const app = await buildApp(env)
  t.teardown(() => app.close())
  await app.ready()
  return app
}

/** Every entry a list method returns (the demo lists everything on one page). */
async function listed (app: FastifyInstance, method: string, key: string): Promise<Array<Record<string, unknown>>> {
  const body = json(await postLegacy(app, method))
  return (body.result?.[key] ?? []) as Array<Record<string, unknown>>
}

const names = (entries: ReadonlyArray<Record<string, unknown>>): string[] => entries.map(entry => String(entry.name))

t.test('npm start (no MCP_CONFORMANCE) lists exactly the people\'s tools, and no fixture', async t => {
  for (const value of [undefined, '', '0']) {
    const app = await demo(t, { MCP_CONFORMANCE: value })
    t.same(names(await listed(app, 'tools/list', 'tools')).sort(), [...PEOPLES_TOOLS].sort(), `MCP_CONFORMANCE=${JSON.stringify(value)}: the people's tools`)
    t.same(await listed(app, 'resources/list', 'resources'), PEOPLES_RESOURCES, 'resources/list: the people\'s resource')
    for (const [method, key] of LISTS.slice(1).filter(([method]) => method !== 'resources/list')) t.same(await listed(app, method, key), [], `${method}: nothing`)
  }
  const instructions = String(json(await postLegacy(await demo(t, {}), 'initialize', INITIALIZE)).result?.instructions)
  t.ok(PEOPLES_TOOLS.every(name => instructions.includes(name)), `the instructions name each tool: ${instructions}`)
})

t.test('MCP_CONFORMANCE=1 adds every conformance fixture, as the fixtures define them', async t => {
  const fixtures = await buildPlugin(t, {}, registerConformanceFixtures)
  const app = await demo(t, { MCP_CONFORMANCE: '1' })
  const fixtureTools = await listed(fixtures, 'tools/list', 'tools')
  t.equal(fixtureTools.length, 35, 'the 35 fixture tools')
  t.same(names(fixtureTools).filter(name => PEOPLES_TOOLS.includes(name)), [], 'no fixture has a people\'s tool\'s name')
  const demoTools = await listed(app, 'tools/list', 'tools')
  t.same(names(demoTools).sort(), [...PEOPLES_TOOLS, ...names(fixtureTools)].sort(), 'the people\'s tools plus every fixture')
  t.same(demoTools.filter(tool => !PEOPLES_TOOLS.includes(String(tool.name))), fixtureTools, 'each fixture listed as it is defined')
  for (const [method, key] of LISTS.slice(1)) {
    const expected = await listed(fixtures, method, key)
    t.ok(expected.length > 0, `${method}: the fixtures have some`)
    const people = method === 'resources/list' ? PEOPLES_RESOURCES : []
    t.same(await listed(app, method, key), [...people, ...expected], `${method}: exactly the people's and the fixtures'`)
  }
  t.equal(json(await postLegacy(app, 'initialize', INITIALIZE)).result?.instructions, 'Demo server: echo, sleep, and the MCP conformance fixtures.', 'the instructions of today\'s conformance demo')
})

t.test('MCP_CONFORMANCE other than 1, 0 or unset stops the demo at startup, naming the variable', async t => {
  for (const value of ['true', 'yes', '2', ' 1']) {
    await t.rejects(buildApp({ MCP_CONFORMANCE: value }), new RegExp(`^MCP_CONFORMANCE: ${JSON.stringify(value)} is not 1 `), JSON.stringify(value))
  }
})

// ---------------------------------------------------------------------------------------------------
// confirm_action: asks the user, in both eras

/** What a user answers to confirm_action's question, by test case. */
const ANSWERS: Array<[string, ElicitResult, string]> = [
  ['yes', { action: 'accept', content: { confirm: true } }, 'Done: water the plants'],
  ['no', { action: 'accept', content: { confirm: false } }, 'Not done: you answered no to "water the plants"'],
  ['decline', { action: 'decline' }, 'Not done: you declined to answer about "water the plants"'],
  ['cancel', { action: 'cancel' }, 'Not done: you dismissed the question about "water the plants"']
]

t.test('confirm_action, legacy era (@modelcontextprotocol/sdk 1.x): the user\'s answer decides the result', async t => {
  const { url } = await listenDemo(t)
  let answer: ElicitResult = { action: 'cancel' }
  const asked: Array<Record<string, any>> = []
  const client = new LegacyClient({ name: 'demo-tools', version: '1.0.0' }, { capabilities: { elicitation: {} } })
  client.setRequestHandler(ElicitRequestSchema, request => {
    asked.push(request.params)
    return answer
  })
  t.teardown(() => client.close())
  await client.connect(new LegacyTransport(url))

  for (const [what, given, expected] of ANSWERS) {
    answer = given
    asked.length = 0
    const outcome = await attempt(client.callTool({ name: 'confirm_action', arguments: { action: 'water the plants' } }, undefined, { timeout: 5000 }))
    t.notOk(outcome.error, `${what}: the call completes`, { rejected: describeError(outcome.error) })
    t.same(texts(outcome.value?.content), [expected], `${what}: ${expected}`)
    t.equal(asked.length, 1, `${what}: the user was asked once`)
    t.equal(asked[0]?.message, 'Do you want to water the plants?')
    t.same(asked[0]?.requestedSchema?.required, ['confirm'], 'a yes/no form')
  }
})

t.test('confirm_action, 2026-07-28 (@modelcontextprotocol/client 2.x): the same question through input_required', async t => {
  const { url } = await listenDemo(t)
  let answer: ElicitResult = { action: 'cancel' }
  const asked: unknown[] = []
  const client = new ModernClient({ name: 'demo-tools', version: '1.0.0' }, {
    capabilities: { elicitation: {} },
    versionNegotiation: { mode: { pin: '2026-07-28' } }
  })
  client.setRequestHandler('elicitation/create', async request => {
    asked.push(request.params.message)
    return answer as { action: 'accept' | 'decline' | 'cancel', content?: Record<string, boolean> }
  })
  t.teardown(() => client.close())
  await client.connect(new ModernTransport(url))

  for (const [what, given, expected] of ANSWERS) {
    answer = given
    asked.length = 0
    const outcome = await attempt(client.callTool({ name: 'confirm_action', arguments: { action: 'water the plants' } }))
    t.notOk(outcome.error, `${what}: the call completes`, { rejected: describeError(outcome.error) })
    t.same(texts(outcome.value?.content), [expected], `${what}: ${expected}`)
    t.same(asked, ['Do you want to water the plants?'], `${what}: the user was asked once`)
  }

  const refused = await attempt(new TaskClient(fetchSender(url)).call('confirm_action', { action: 'water the plants' }, { capabilities: {} }))
  t.equal(refused.value?.body.error?.code, -32021, 'a client that cannot ask its user: -32021 before the tool runs')
})

// ---------------------------------------------------------------------------------------------------
// render: a task for a client that declared the extension, an ordinary call otherwise

t.test('render, 2026-07-28 tasks extension (raw): a task whose progress is its status message, cancellable', async t => {
  const { url } = await listenDemo(t)
  const client = new TaskClient(fetchSender(url))

  const taskId = await client.create('render', { frames: 3 })
  const done = await client.waitFor(taskId, ['completed', 'failed', 'cancelled'], 10_000)
  t.equal(done?.status, 'completed', 'the task completes')
  t.same(done?.result?.content, [{ type: 'text', text: 'Rendered 3 frames' }], 'tasks/get carries the result')

  const long = await client.create('render', { frames: 100 })
  let status: Record<string, any> | undefined
  for (let polls = 0; polls < 500 && !/^Rendering \(\d+\/100\)$/.test(String(status?.statusMessage)); polls++) {
    status = (await client.get(long)).body.result as Record<string, any> | undefined
    await sleep(20)
  }
  t.match(status, { status: 'working', statusMessage: /^Rendering \(\d+\/100\)$/ }, 'tasks/get shows the progress as the status message')
  const cancel = await client.cancel(long)
  t.equal(cancel.body.result?.resultType, 'complete', 'tasks/cancel is accepted', { error: cancel.body.error })
  t.equal((await client.waitFor(long, ['cancelled', 'completed', 'failed']))?.status, 'cancelled', 'the task ends cancelled')

  const plain = await client.call('render', { frames: 1 }, { capabilities: WITHOUT_TASKS })
  t.same(plain.body.result?.content, [{ type: 'text', text: 'Rendered 1 frame' }], 'without the extension: an ordinary result')
})

t.test('render, legacy era (@modelcontextprotocol/sdk 1.x): an ordinary call with progress notifications', async t => {
  const { url } = await listenDemo(t)
  const client = new LegacyClient({ name: 'demo-tools', version: '1.0.0' })
  t.teardown(() => client.close())
  await client.connect(new LegacyTransport(url))
  const progress: number[] = []
  const outcome = await attempt(client.callTool({ name: 'render', arguments: { frames: 3 } }, undefined, {
    onprogress: update => { progress.push(update.progress) }
  }))
  t.notOk(outcome.error, 'the call completes', { rejected: describeError(outcome.error) })
  t.same(texts(outcome.value?.content), ['Rendered 3 frames'])
  t.ok(progress.length >= 1 && strictlyIncreasing(progress), `progress notifications arrived before the result: ${progress.join(', ')}`)
})

t.test('touch_resource announces a change to the resource it names, counted by demo://touches; a URI it cannot announce is an isError result', async t => {
  const app = await demo(t, {})
  const call = async (uri: string): Promise<Record<string, unknown>> =>
    json(await postLegacy(app, 'tools/call', { name: 'touch_resource', arguments: { uri } })).result as Record<string, unknown>
  t.same((await call('demo://touches')).content, [{ type: 'text', text: 'touched demo://touches' }])
  const read = json(await postLegacy(app, 'resources/read', { uri: 'demo://touches' })).result as { contents: Array<{ text: string }> }
  t.equal(read.contents[0]?.text, '1', 'the resource counts the touches')
  const refused = await call(`demo://${'x'.repeat(5000)}`)
  t.equal(refused.isError, true)
  t.match(refused.content, [{ type: 'text', text: /1 to 4096 bytes/ }], 'naming the bound')
})
