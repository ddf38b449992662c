/**
 * End-to-end: the demo server on a real socket, driven by the official MCP clients.
 * - legacy era: `@modelcontextprotocol/sdk` 1.x (initialize handshake, 2025-11-25);
 * - modern era: `@modelcontextprotocol/client` 2.x pinned to 2026-07-28 (server/discover, per-request _meta).
 */
import t from 'tap'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { LoggingMessageNotificationSchema, McpError } from '@modelcontextprotocol/sdk/types.js'
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client'
import { listenDemo } from '../helpers/listen.js'
import { attempt, describeError, strictlyIncreasing, texts } from '../helpers/mcp-results.js'
import { lastExchange } from '../helpers/recorders.js'

const DEMO_SERVER = { name: 'fastify-mcp-cancellation-demo', version: '1.0.0' }
const ECHO_SCHEMA = { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }
const SLEEP_SCHEMA = {
  type: 'object',
  properties: { ms: { type: 'integer', minimum: 0, maximum: 600_000 }, stepMs: { type: 'integer', minimum: 1 } },
  required: ['ms']
}
const STATIC_TEXT = 'This is the content of the static text resource.'
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

t.test('legacy era: @modelcontextprotocol/sdk 1.x over Streamable HTTP', async t => {
  const demo = await listenDemo(t, { MCP_CONFORMANCE: '1' })
  const client = new LegacyClient({ name: 'e2e-legacy', version: '1.0.0' })
  const logMessages: Array<{ level: string, data: unknown }> = []
  client.setNotificationHandler(LoggingMessageNotificationSchema, notification => {
    logMessages.push({ level: notification.params.level, data: notification.params.data })
  })
  const transport = new LegacyTransport(demo.url)
  t.teardown(() => client.close())

  await client.connect(transport)

  t.test('initialize negotiates 2025-11-25 and reports the server', async t => {
    t.same(client.getServerVersion(), DEMO_SERVER)
    t.equal(transport.protocolVersion, '2025-11-25')
    t.equal(client.getInstructions(), 'Demo server: echo, sleep, and the MCP conformance fixtures.')
    const capabilities = client.getServerCapabilities()
    t.ok(capabilities?.tools, 'tools capability')
    t.ok(capabilities?.resources, 'resources capability')
    t.ok(capabilities?.prompts, 'prompts capability')
    t.ok(capabilities?.logging, 'logging capability')
    t.ok(capabilities?.completions, 'completions capability')
  })

  t.test('tools/list includes echo and sleep with their input schemas', async t => {
    const { tools } = await client.listTools()
    const echo = tools.find(tool => tool.name === 'echo')
    const sleep = tools.find(tool => tool.name === 'sleep')
    t.same(echo?.inputSchema, ECHO_SCHEMA)
    t.equal(echo?.description, 'Returns its text')
    t.same(sleep?.inputSchema, SLEEP_SCHEMA)
    t.ok(tools.some(tool => tool.name === 'test_tool_with_logging'), 'conformance fixtures are listed too')
  })

  t.test('tools/call echo returns the text', async t => {
    const result = await client.callTool({ name: 'echo', arguments: { text: 'hello, legacy' } })
    t.same(texts(result.content), ['hello, legacy'])
    t.notOk(result.isError, 'not an error result')
  })

  t.test('tools/call sleep reports strictly increasing progress before the result', async t => {
    const progress: Array<{ progress: number, total?: number }> = []
    const result = await client.callTool({ name: 'sleep', arguments: { ms: 250, stepMs: 50 } }, undefined, {
      onprogress: update => { progress.push({ progress: update.progress, total: update.total }) }
    })
    t.same(texts(result.content), ['slept 250'])
    t.ok(progress.length >= 3, `several progress notifications arrived before the result (got ${progress.length})`)
    t.ok(strictlyIncreasing(progress.map(p => p.progress)), `progress strictly increases: ${progress.map(p => p.progress).join(', ')}`)
    t.ok(progress.every(p => p.total === 250 && p.progress < 250), 'each progress is below its total of 250')
  })

  t.test('resources/list and resources/read (text, binary, template)', async t => {
    const { resources } = await client.listResources()
    t.same(resources.find(r => r.uri === 'test://static-text'),
      { uri: 'test://static-text', name: 'Static text resource', mimeType: 'text/plain' })
    t.ok(resources.some(r => r.uri === 'test://static-binary'), 'the binary resource is listed')

    const text = await client.readResource({ uri: 'test://static-text' })
    t.same(text.contents, [{ uri: 'test://static-text', mimeType: 'text/plain', text: STATIC_TEXT }])

    const binary = await client.readResource({ uri: 'test://static-binary' })
    const [blobItem] = binary.contents
    t.equal(blobItem?.mimeType, 'image/png')
    const blob = blobItem !== undefined && 'blob' in blobItem ? Buffer.from(blobItem.blob, 'base64') : Buffer.alloc(0)
    t.ok(blob.subarray(0, 8).equals(PNG_SIGNATURE), 'the blob decodes to a PNG')

    const templated = await client.readResource({ uri: 'test://template/42/data' })
    const [item] = templated.contents
    t.equal(item?.uri, 'test://template/42/data')
    t.same(JSON.parse(item !== undefined && 'text' in item ? item.text : 'null'), { id: '42', templateTest: true, data: 'Data for ID: 42' })
  })

  t.test('resources/templates/list', async t => {
    const { resourceTemplates } = await client.listResourceTemplates()
    t.same(resourceTemplates, [{ uriTemplate: 'test://template/{id}/data', name: 'Template resource', mimeType: 'application/json' }])
  })

  t.test('prompts/list and prompts/get with arguments', async t => {
    const { prompts } = await client.listPrompts()
    const withArguments = prompts.find(p => p.name === 'test_prompt_with_arguments')
    t.same(withArguments?.arguments?.map(a => [a.name, a.required]), [['arg1', true], ['arg2', true]])
    t.ok(prompts.some(p => p.name === 'test_simple_prompt'), 'the simple prompt is listed')

    const prompt = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'alpha', arg2: 'beta' } })
    t.same(prompt.messages, [{ role: 'user', content: { type: 'text', text: "Prompt with arguments: arg1='alpha', arg2='beta'" } }])
  })

  t.test('completion/complete filters by the typed prefix', async t => {
    const ref = { type: 'ref/prompt' as const, name: 'test_prompt_with_arguments' }
    const broad = await client.complete({ ref, argument: { name: 'arg1', value: 'te' } })
    t.same(broad.completion.values, ['test', 'testing', 'tested'])
    const narrow = await client.complete({ ref, argument: { name: 'arg1', value: 'testi' } })
    t.same(narrow.completion.values, ['testing'])
  })

  t.test('ping and logging/setLevel answer {}', async t => {
    t.same(await client.ping(), {})
    t.same(await client.setLoggingLevel('info'), {})
  })

  t.test('invalid arguments are a tool-level error the model can read', async t => {
    const result = await client.callTool({ name: 'echo', arguments: { text: 42 } })
    t.equal(result.isError, true)
    t.match(texts(result.content).join('\n'), /Invalid arguments.*text/)
  })

  t.test('an unknown tool is a protocol error -32602', async t => {
    const { error } = await attempt(client.callTool({ name: 'no_such_tool', arguments: {} }))
    t.ok(error instanceof McpError, `the client throws an McpError (got ${describeError(error)})`)
    t.equal((error as McpError | undefined)?.code, -32602)
    t.match((error as Error | undefined)?.message, /no_such_tool/)
  })

  t.test('log notifications of a running tool reach the notification handler', async t => {
    logMessages.length = 0
    const result = await client.callTool({ name: 'test_tool_with_logging', arguments: {} })
    t.same(texts(result.content), ['Tool with logging executed successfully'])
    t.same(logMessages, [
      { level: 'info', data: 'Tool execution started' },
      { level: 'info', data: 'Tool processing data' },
      { level: 'info', data: 'Tool execution completed' }
    ])
  })

  t.test('on the wire: initialize, then MCP-Protocol-Version 2025-11-25 on every POST', async t => {
    const posts = demo.wire.filter(exchange => exchange.method === 'POST')
    t.equal(posts[0]?.rpcMethod, 'initialize', 'the first request is initialize')
    t.notOk(posts.some(exchange => exchange.rpcMethod === 'server/discover'), 'no server/discover')
    const afterInitialize = posts.slice(1)
    t.ok(afterInitialize.length > 10, 'the exchanges above were recorded')
    t.same(afterInitialize.filter(exchange => exchange.protocolVersion !== '2025-11-25').map(e => [e.rpcMethod, e.protocolVersion]), [],
      'every request after initialize carries MCP-Protocol-Version: 2025-11-25')
  })
})

t.test('modern era: @modelcontextprotocol/client 2.x pinned to 2026-07-28', async t => {
  const demo = await listenDemo(t, { MCP_CONFORMANCE: '1' })
  const client = new ModernClient({ name: 'e2e-modern', version: '2.0.0' }, {
    versionNegotiation: { mode: { pin: '2026-07-28' } }
  })
  const transport = new ModernTransport(demo.url)
  t.teardown(() => client.close())

  const connected = await attempt(client.connect(transport))
  t.notOk(connected.error, 'connect (server/discover) succeeds', {
    rejected: describeError(connected.error),
    responseBody: lastExchange(demo.wire, 'server/discover')?.responseBody
  })
  if (connected.error !== undefined) return

  t.test('server/discover selects the modern era at 2026-07-28', async t => {
    t.equal(client.getProtocolEra(), 'modern')
    t.equal(client.getNegotiatedProtocolVersion(), '2026-07-28')
    t.same(client.getServerVersion(), DEMO_SERVER, 'serverInfo from the discover result _meta')
    t.ok(client.getServerCapabilities()?.tools, 'tools capability')
  })

  t.test('tools/list includes echo and sleep with their input schemas', async t => {
    const outcome = await attempt(client.listTools())
    t.notOk(outcome.error, 'the client accepts the tools/list result', {
      rejected: describeError(outcome.error), responseBody: lastExchange(demo.wire, 'tools/list')?.responseBody
    })
    const tools = outcome.value?.tools ?? []
    t.same(tools.find(tool => tool.name === 'echo')?.inputSchema, ECHO_SCHEMA)
    t.same(tools.find(tool => tool.name === 'sleep')?.inputSchema, SLEEP_SCHEMA)
  })

  t.test('tools/call echo returns the text', async t => {
    const outcome = await attempt(client.callTool({ name: 'echo', arguments: { text: 'hello, modern' } }))
    t.notOk(outcome.error, 'the client accepts the tools/call result', {
      rejected: describeError(outcome.error), responseBody: lastExchange(demo.wire, 'tools/call')?.responseBody
    })
    t.same(texts(outcome.value?.content), ['hello, modern'])
    t.notOk(outcome.value?.isError, 'not an error result')
  })

  t.test('tools/call sleep reports strictly increasing progress before the result', async t => {
    const progress: Array<{ progress: number, total?: number }> = []
    const outcome = await attempt(client.callTool({ name: 'sleep', arguments: { ms: 250, stepMs: 50 } }, {
      onprogress: update => { progress.push({ progress: update.progress, total: update.total }) }
    }))
    t.notOk(outcome.error, 'the client accepts the tools/call result', { rejected: describeError(outcome.error) })
    t.same(texts(outcome.value?.content), ['slept 250'])
    t.ok(progress.length >= 3, `several progress notifications arrived before the result (got ${progress.length})`)
    t.ok(strictlyIncreasing(progress.map(p => p.progress)), `progress strictly increases: ${progress.map(p => p.progress).join(', ')}`)
    t.ok(progress.every(p => p.total === 250 && p.progress < 250), 'each progress is below its total of 250')
  })

  t.test('resources/read returns text and binary contents', async t => {
    const text = await attempt(client.readResource({ uri: 'test://static-text' }))
    t.notOk(text.error, 'the client accepts the resources/read result', {
      rejected: describeError(text.error), responseBody: lastExchange(demo.wire, 'resources/read')?.responseBody
    })
    t.same(text.value?.contents, [{ uri: 'test://static-text', mimeType: 'text/plain', text: STATIC_TEXT }])

    const binary = await attempt(client.readResource({ uri: 'test://static-binary' }))
    t.notOk(binary.error, 'the client accepts the binary resources/read result', {
      rejected: describeError(binary.error), responseBody: lastExchange(demo.wire, 'resources/read')?.responseBody
    })
    const [blobItem] = binary.value?.contents ?? []
    const blob = blobItem !== undefined && 'blob' in blobItem ? Buffer.from(blobItem.blob, 'base64') : Buffer.alloc(0)
    t.ok(blob.subarray(0, 8).equals(PNG_SIGNATURE), 'the blob decodes to a PNG')
  })

  t.test('prompts/get with arguments', async t => {
    const outcome = await attempt(client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'alpha', arg2: 'beta' } }))
    t.notOk(outcome.error, 'the client accepts the prompts/get result', {
      rejected: describeError(outcome.error), responseBody: lastExchange(demo.wire, 'prompts/get')?.responseBody
    })
    t.same(outcome.value?.messages, [{ role: 'user', content: { type: 'text', text: "Prompt with arguments: arg1='alpha', arg2='beta'" } }])
  })

  t.test('completion/complete filters by the typed prefix', async t => {
    const ref = { type: 'ref/prompt' as const, name: 'test_prompt_with_arguments' }
    const broad = await attempt(client.complete({ ref, argument: { name: 'arg1', value: 'te' } }))
    t.notOk(broad.error, 'the client accepts the completion/complete result', {
      rejected: describeError(broad.error), responseBody: lastExchange(demo.wire, 'completion/complete')?.responseBody
    })
    t.same(broad.value?.completion.values, ['test', 'testing', 'tested'])
    const narrow = await attempt(client.complete({ ref, argument: { name: 'arg1', value: 'testi' } }))
    t.same(narrow.value?.completion.values, ['testing'])
  })

  t.test('on the wire: server/discover, no initialize, 2026-07-28 headers mirroring the body', async t => {
    const posts = demo.wire.filter(exchange => exchange.method === 'POST')
    t.equal(posts[0]?.rpcMethod, 'server/discover', 'the first request is server/discover')
    t.notOk(demo.wire.some(exchange => exchange.rpcMethod === 'initialize'), 'no initialize was sent')
    t.notOk(demo.wire.some(exchange => exchange.method !== 'POST'), 'no GET stream was opened')
    t.ok(posts.length >= 8, 'the exchanges above were recorded')
    t.same(posts.filter(exchange => exchange.protocolVersion !== '2026-07-28').map(e => [e.rpcMethod, e.protocolVersion]), [],
      'every request carries MCP-Protocol-Version: 2026-07-28')
    t.same(posts.filter(exchange => exchange.rpcMethod !== undefined && exchange.mcpMethod !== exchange.rpcMethod)
      .map(e => [e.rpcMethod, e.mcpMethod]), [], 'Mcp-Method equals the body method on every request')
    const echoCall = posts.find(exchange => exchange.rpcMethod === 'tools/call' && exchange.requestBody.includes('"echo"'))
    t.equal(echoCall?.mcpName, 'echo', 'Mcp-Name names the called tool')
    t.ok(posts.every(exchange => (exchange.statusCode ?? 0) < 400), 'no request was rejected with an HTTP error')
  })
})
