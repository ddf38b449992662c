import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, json, post, postLegacy, SERVER_INFO } from '../helpers/inject.js'
import { registerEcho } from '../helpers/tools.js'

function initialize (protocolVersion: unknown) {
  return {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion, capabilities: {}, clientInfo: { name: 'tap', version: '1.0.0' } }
  }
}

/** A tool that reports the protocol version its request was served under. */
function versionTool (app: FastifyInstance): void {
  app.mcp.tool({ name: 'version', handler: (_args, ctx) => ({ content: [{ type: 'text', text: `${ctx.era} ${ctx.protocolVersion}` }] }) })
}

t.test('initialize without MCP-Protocol-Version returns the requested supported version', async t => {
  const app = await buildApp(t, { instructions: 'be nice' }, registerEcho)
  for (const version of ['2025-11-25', '2025-06-18', '2025-03-26']) {
    const res = await post(app, initialize(version))
    t.equal(res.statusCode, 200, version)
    t.match(res.headers['content-type'], /^application\/json/)
    t.notOk('mcp-session-id' in res.headers, 'no Mcp-Session-Id header')
    const body = json(res)
    t.equal(body.id, 1)
    t.equal(body.result.protocolVersion, version)
    t.same(body.result.serverInfo, SERVER_INFO)
    t.type(body.result.capabilities, 'object')
    t.ok(body.result.capabilities.tools, 'tools capability advertised when a tool is registered')
    t.equal(body.result.instructions, 'be nice')
  }
})

t.test('initialize with an unsupported version gets the newest legacy version', async t => {
  const app = await buildApp(t)
  for (const version of ['2024-11-05', '1999-01-01', '2026-07-28']) {
    const res = await post(app, initialize(version))
    t.equal(res.statusCode, 200)
    t.equal(json(res).result.protocolVersion, '2025-11-25', `requested ${version}`)
  }
})

t.test('the newest legacy version follows the protocolVersions option', async t => {
  const app = await buildApp(t, { protocolVersions: ['2026-07-28', '2025-06-18', '2025-03-26'] })
  t.equal(json(await post(app, initialize('2025-11-25'))).result.protocolVersion, '2025-06-18')
  t.equal(json(await post(app, initialize('2025-03-26'))).result.protocolVersion, '2025-03-26')
})

t.test('initialize ignores a present MCP-Protocol-Version header', async t => {
  const app = await buildApp(t)
  const res = await post(app, initialize('2025-06-18'), { 'mcp-protocol-version': '2025-11-25' })
  t.equal(res.statusCode, 200)
  t.equal(json(res).result.protocolVersion, '2025-06-18')
})

t.test('notifications/initialized is answered 202 with an empty body', async t => {
  const app = await buildApp(t)
  const res = await post(app, { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-protocol-version': '2025-11-25' })
  t.equal(res.statusCode, 202)
  t.equal(res.payload, '')
})

t.test('ping returns exactly {}', async t => {
  const app = await buildApp(t)
  const res = await postLegacy(app, 'ping', undefined, { id: 7 })
  t.equal(res.statusCode, 200)
  t.strictSame(json(res), { jsonrpc: '2.0', id: 7, result: {} })
})

t.test('logging/setLevel returns exactly {}', async t => {
  const app = await buildApp(t)
  const res = await postLegacy(app, 'logging/setLevel', { level: 'warning' })
  t.equal(res.statusCode, 200)
  t.strictSame(json(res).result, {})
  const bad = await postLegacy(app, 'logging/setLevel', { level: 'loud' })
  t.equal(json(bad).error?.code, -32602, 'an unknown level is invalid params')
})

t.test('an unsupported MCP-Protocol-Version header is a 400', async t => {
  const app = await buildApp(t, {}, registerEcho)
  for (const version of ['1999-01-01', '2024-11-05', 'garbage']) {
    const res = await postLegacy(app, 'tools/list', undefined, { headers: { 'mcp-protocol-version': version } })
    t.equal(res.statusCode, 400, version)
    const body = json(res)
    t.type(body.error?.code, 'number')
    t.equal(body.id, 1, 'the id is echoed')
  }
})

t.test('a legacy version not enabled by protocolVersions is a 400', async t => {
  const app = await buildApp(t, { protocolVersions: ['2025-11-25', '2025-03-26'] })
  const res = await postLegacy(app, 'ping', undefined, { headers: { 'mcp-protocol-version': '2025-06-18' } })
  t.equal(res.statusCode, 400)
})

t.test('an absent MCP-Protocol-Version is treated as 2025-03-26', async t => {
  const app = await buildApp(t, {}, versionTool)
  const res = await postLegacy(app, 'tools/call', { name: 'version' }, { headers: { 'mcp-protocol-version': undefined } })
  t.equal(res.statusCode, 200)
  t.equal(json(res).result.content[0].text, 'legacy 2025-03-26')
  const explicit = await postLegacy(app, 'tools/call', { name: 'version' }, { headers: { 'mcp-protocol-version': '2025-06-18' } })
  t.equal(json(explicit).result.content[0].text, 'legacy 2025-06-18')
})

t.test('an absent MCP-Protocol-Version is a 400 when 2025-03-26 is not enabled', async t => {
  const app = await buildApp(t, { protocolVersions: ['2025-11-25'] })
  const res = await postLegacy(app, 'ping', undefined, { headers: { 'mcp-protocol-version': undefined } })
  t.equal(res.statusCode, 400)
})

t.test('an unknown method is HTTP 200 with -32601', async t => {
  const app = await buildApp(t)
  const res = await postLegacy(app, 'tools/frobnicate', undefined, { id: 'abc' })
  t.equal(res.statusCode, 200)
  const body = json(res)
  t.equal(body.id, 'abc')
  t.equal(body.error?.code, -32601)
  t.match(body.error?.message, /tools\/frobnicate/)
})

t.test('a modern-only method is unknown in the legacy era', async t => {
  const app = await buildApp(t)
  const res = await postLegacy(app, 'server/discover')
  t.equal(res.statusCode, 200)
  t.equal(json(res).error?.code, -32601)
})

t.test('a 10 000-character method name is echoed in at most 200 characters', async t => {
  const app = await buildApp(t)
  const method = 'x'.repeat(10_000)
  const res = await postLegacy(app, method)
  t.equal(res.statusCode, 200)
  const { error } = json(res)
  t.equal(error?.code, -32601)
  const echoed = /x+/.exec(error?.message ?? '')?.[0] ?? ''
  t.ok(echoed.length > 0, 'the name is echoed')
  t.ok(echoed.length <= 200, `echoed name is ${echoed.length} characters`)
  t.ok((error?.message.length ?? 0) < 300, 'the message stays short')
})

t.test('NUL and ANSI escape bytes in a method name are stripped from the echo', async t => {
  const app = await buildApp(t)
  const method = 'evil\u0000\u001b[31mred\u001b[0m\r\nINJECTED'
  const res = await postLegacy(app, method)
  t.equal(res.statusCode, 200)
  const message = json(res).error?.message ?? ''
  t.match(message, /evil/)
  t.notMatch(message, /[\u0000-\u001f\u007f-\u009f]/, 'no control characters in the message')
  t.notMatch(res.payload, /\\u0000|\\u001b|\\r|\\n/i, 'no escaped control characters on the wire')
})
