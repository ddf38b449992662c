import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, json, post, postLegacy } from '../helpers/inject.js'
import { hasStackTrace, LEGACY } from '../helpers/jsonrpc.js'
import { registerEcho } from '../helpers/tools.js'

const ping = (id: unknown = 1) => ({ jsonrpc: '2.0', id, method: 'ping' })

/** A JSON-RPC error body without an id, as sent for transport-level rejections. */
function assertBareError (t: Test, payload: string, code?: number): void {
  const body = JSON.parse(payload) as { jsonrpc: string, id?: unknown, error?: { code: number, message: string } }
  t.equal(body.jsonrpc, '2.0')
  t.type(body.error?.code, 'number')
  t.type(body.error?.message, 'string')
  if (code !== undefined) t.equal(body.error?.code, code)
  t.notOk('result' in body)
}

for (const method of ['GET', 'DELETE', 'PUT', 'PATCH'] as const) {
  t.test(`${method} on the MCP path is 405 with Allow: POST`, async t => {
    const app = await buildApp(t)
    const res = await app.inject({ method, url: '/mcp', headers: { accept: 'application/json, text/event-stream' } })
    t.equal(res.statusCode, 405)
    t.match(String(res.headers.allow), /\bPOST\b/)
    t.match(res.headers['content-type'], /^application\/json/)
    assertBareError(t, res.payload)
  })
}

t.test('Content-Type must be application/json', async t => {
  const app = await buildApp(t)
  for (const type of ['text/plain', 'application/jsonx', 'application/json-patch+json', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
    const res = await post(app, ping(), { ...LEGACY, 'content-type': type })
    t.equal(res.statusCode, 415, type)
    assertBareError(t, res.payload)
  }
  const missing = await post(app, ping(), { ...LEGACY, 'content-type': undefined })
  t.equal(missing.statusCode, 415, 'absent Content-Type')
  for (const type of ['application/json; charset=utf-8', 'Application/JSON', 'application/json ; charset="utf-8"']) {
    const res = await post(app, ping(), { ...LEGACY, 'content-type': type })
    t.equal(res.statusCode, 200, type)
    t.same(json(res).result, {})
  }
})

t.test('Accept must allow JSON or SSE', async t => {
  const app = await buildApp(t)
  for (const accept of ['text/html', 'image/png, text/plain', 'application/json;q=0, text/event-stream;q=0']) {
    const res = await post(app, ping(), { ...LEGACY, accept })
    t.equal(res.statusCode, 406, accept)
    assertBareError(t, res.payload)
  }
  for (const accept of [undefined, 'application/json', 'text/event-stream', '*/*', 'text/html, application/json']) {
    const res = await post(app, ping(), { ...LEGACY, accept })
    t.equal(res.statusCode, 200, `Accept ${String(accept)}`)
  }
})

t.test('a body over bodyLimit is 413 with a JSON-RPC error', async t => {
  const app = await buildApp(t, { bodyLimit: 1024 }, registerEcho)
  const big = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x'.repeat(2000) } } }
  const res = await post(app, big, LEGACY)
  t.equal(res.statusCode, 413)
  t.match(res.headers['content-type'], /^application\/json/)
  assertBareError(t, res.payload)
  const small = await post(app, { ...big, params: { name: 'echo', arguments: { text: 'x'.repeat(100) } } }, LEGACY)
  t.equal(small.statusCode, 200, 'a body under the limit is served')
})

t.test('the default body limit is 1 MiB', async t => {
  const app = await buildApp(t, {}, registerEcho)
  const body = (size: number) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x'.repeat(size) } } })
  t.equal((await post(app, body(1024 * 1024), LEGACY)).statusCode, 413)
  t.equal((await post(app, body(1000 * 1000), LEGACY)).statusCode, 200)
})

t.test('malformed JSON is 400 -32700', async t => {
  const app = await buildApp(t)
  for (const payload of ['{', '{"jsonrpc":"2.0","id":1,', 'not json', '', '{"a":1}}']) {
    const res = await post(app, payload, LEGACY)
    t.equal(res.statusCode, 400, JSON.stringify(payload))
    assertBareError(t, res.payload, -32700)
    t.notOk('id' in json(res), 'no id')
  }
})

t.test('invalid UTF-8 is 400 -32700', async t => {
  const app = await buildApp(t)
  const bytes = Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}}')])
  const res = await post(app, bytes, LEGACY)
  t.equal(res.statusCode, 400)
  assertBareError(t, res.payload, -32700)
})

t.test('an invalid envelope is 400 -32600', async t => {
  const app = await buildApp(t)
  const cases: Array<[string, unknown]> = [
    ['no jsonrpc', { id: 1, method: 'ping' }],
    ['jsonrpc 1.0', { jsonrpc: '1.0', id: 1, method: 'ping' }],
    ['method a number', { jsonrpc: '2.0', id: 1, method: 42 }],
    ['method null', { jsonrpc: '2.0', id: 1, method: null }],
    ['id null', { jsonrpc: '2.0', id: null, method: 'ping' }],
    ['id an object', { jsonrpc: '2.0', id: { a: 1 }, method: 'ping' }],
    ['id an array', { jsonrpc: '2.0', id: [1], method: 'ping' }],
    ['id a boolean', { jsonrpc: '2.0', id: true, method: 'ping' }],
    ['id a float', { jsonrpc: '2.0', id: 1.5, method: 'ping' }],
    ['id 2**53', { jsonrpc: '2.0', id: 2 ** 53, method: 'ping' }],
    ['id -(2**53)', { jsonrpc: '2.0', id: -(2 ** 53), method: 'ping' }],
    ['id a 257-byte string', { jsonrpc: '2.0', id: 'i'.repeat(257), method: 'ping' }],
    ['a JSON string', 'ping'],
    ['a JSON number', 42],
    ['JSON null', null],
    ['an empty object', {}]
  ]
  for (const [what, body] of cases) {
    const res = await post(app, JSON.stringify(body), LEGACY)
    t.equal(res.statusCode, 400, what)
    t.equal(json(res).error?.code, -32600, what)
  }
})

t.test('response ids keep their JSON type; 0 and "" are valid ids', async t => {
  const app = await buildApp(t)
  const cases: Array<[unknown, string]> = [
    [1, '"id":1,'],
    ['1', '"id":"1",'],
    [0, '"id":0,'],
    ['', '"id":"",'],
    [-7, '"id":-7,'],
    [2 ** 53 - 1, `"id":${2 ** 53 - 1},`],
    ['i'.repeat(256), `"id":"${'i'.repeat(256)}",`]
  ]
  for (const [id, raw] of cases) {
    const res = await post(app, ping(id), LEGACY)
    t.equal(res.statusCode, 200, `id ${JSON.stringify(id)}`)
    const body = json(res)
    t.equal(body.id, id)
    t.equal(typeof body.id, typeof id)
    t.ok(res.payload.includes(raw), `raw payload has ${raw.slice(0, 20)}`)
  }
})

t.test('Origin: absent is fine, the default allows only local origins', async t => {
  const app = await buildApp(t)
  t.equal((await post(app, ping(), LEGACY)).statusCode, 200, 'no Origin')
  for (const origin of ['http://localhost:3000', 'http://127.0.0.1:8080', 'http://[::1]:1234', 'http://localhost']) {
    t.equal((await post(app, ping(), { ...LEGACY, origin })).statusCode, 200, origin)
  }
  for (const origin of ['http://evil.example.com', 'http://localhost.evil.com', 'http://127.0.0.1.nip.io', 'null', 'http://192.168.1.10:3000']) {
    const res = await post(app, ping(), { ...LEGACY, origin })
    t.equal(res.statusCode, 403, origin)
    assertBareError(t, res.payload)
    t.notOk('id' in json(res), 'the 403 carries no id')
  }
})

t.test('a bad Origin is rejected before the body is parsed', async t => {
  const app = await buildApp(t, { bodyLimit: 1024 })
  const origin = 'http://evil.example.com'
  t.equal((await post(app, '{not json', { ...LEGACY, origin })).statusCode, 403, 'malformed body')
  t.equal((await post(app, 'x'.repeat(5000), { ...LEGACY, origin })).statusCode, 403, 'oversized body')
  t.equal((await post(app, ping(), { ...LEGACY, origin, 'content-type': 'text/plain' })).statusCode, 403, 'wrong content type')
  const get = await app.inject({ method: 'GET', url: '/mcp', headers: { origin } })
  t.equal(get.statusCode, 403, 'other verbs too')
})

t.test('custom allowedOrigins with strings and RegExps replace the default', async t => {
  const app = await buildApp(t, { allowedOrigins: ['https://app.example', /^https:\/\/[a-z]+\.trusted\.dev$/] })
  for (const origin of ['https://app.example', 'https://alpha.trusted.dev']) {
    t.equal((await post(app, ping(), { ...LEGACY, origin })).statusCode, 200, origin)
  }
  for (const origin of ['https://app.example.evil', 'http://app.example', 'https://x.trusted.dev.evil', 'http://localhost:3000']) {
    t.equal((await post(app, ping(), { ...LEGACY, origin })).statusCode, 403, origin)
  }
  t.equal((await post(app, ping(), LEGACY)).statusCode, 200, 'no Origin')
})

t.test('a stateful (/g) RegExp in allowedOrigins matches every time', async t => {
  const app = await buildApp(t, { allowedOrigins: [/^https:\/\/app\.example$/g] })
  for (let i = 0; i < 3; i++) {
    t.equal((await post(app, ping(), { ...LEGACY, origin: 'https://app.example' })).statusCode, 200, `request ${i}`)
  }
})

t.test('allowedHosts rejects a bad Host with 403', async t => {
  const app = await buildApp(t, { allowedHosts: ['mcp.example:8443', /^localhost(?::\d+)?$/] })
  t.equal((await post(app, ping(), { ...LEGACY, host: 'mcp.example:8443' })).statusCode, 200, 'listed string')
  t.equal((await post(app, ping(), { ...LEGACY, host: 'localhost:3000' })).statusCode, 200, 'listed RegExp')
  for (const host of ['evil.example.com', 'mcp.example:8444', 'localhost.evil.com']) {
    const res = await post(app, ping(), { ...LEGACY, host })
    t.equal(res.statusCode, 403, host)
    assertBareError(t, res.payload)
  }
})

t.test('without allowedHosts any Host is accepted', async t => {
  const app = await buildApp(t)
  t.equal((await post(app, ping(), { ...LEGACY, host: 'evil.example.com' })).statusCode, 200)
})

async function batchApp (t: Test): Promise<FastifyInstance> {
  return await buildApp(t, {}, registerEcho)
}

t.test('batches are rejected unless the protocol version is absent or 2025-03-26', async t => {
  const app = await batchApp(t)
  const batch = [ping(1), ping(2)]
  for (const version of ['2025-11-25', '2025-06-18', '2026-07-28']) {
    const res = await post(app, batch, { 'mcp-protocol-version': version })
    t.equal(res.statusCode, 400, version)
    assertBareError(t, res.payload, -32600)
  }
})

t.test('a batch without MCP-Protocol-Version is answered as a JSON array', async t => {
  const app = await batchApp(t)
  const res = await post(app, [
    ping(1),
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 'two', method: 'tools/call', params: { name: 'echo', arguments: { text: 'hi' } } },
    { jsonrpc: '2.0', id: 3, method: 'nope' }
  ])
  t.equal(res.statusCode, 200)
  t.match(res.headers['content-type'], /^application\/json/)
  const body = JSON.parse(res.payload) as Array<{ id: unknown, result?: any, error?: any }>
  t.ok(Array.isArray(body))
  t.equal(body.length, 3, 'the notification gets no entry')
  const byId = new Map(body.map(entry => [entry.id, entry]))
  t.same(byId.get(1)?.result, {})
  t.equal(byId.get('two')?.result.content[0].text, 'hi')
  t.equal(byId.get(3)?.error?.code, -32601)
})

t.test('a batch under MCP-Protocol-Version 2025-03-26 is processed', async t => {
  const app = await batchApp(t)
  const res = await post(app, [ping(1), ping(2)], { 'mcp-protocol-version': '2025-03-26' })
  t.equal(res.statusCode, 200)
  const body = JSON.parse(res.payload) as Array<{ id: unknown }>
  t.same(body.map(entry => entry.id).sort(), [1, 2])
})

t.test('a notification-only batch is 202 with an empty body', async t => {
  const app = await batchApp(t)
  const res = await post(app, [
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 99 } }
  ])
  t.equal(res.statusCode, 202)
  t.equal(res.payload, '')
})

t.test('a batch holds at most 100 messages', async t => {
  const app = await batchApp(t)
  const hundred = Array.from({ length: 100 }, (_, i) => ping(i))
  const ok = await post(app, hundred)
  t.equal(ok.statusCode, 200)
  t.equal((JSON.parse(ok.payload) as unknown[]).length, 100)
  const over = await post(app, [...hundred, ping(100)])
  t.equal(over.statusCode, 400)
  assertBareError(t, over.payload, -32600)
  const empty = await post(app, [])
  t.equal(empty.statusCode, 400, 'an empty batch is invalid')
  assertBareError(t, empty.payload, -32600)
})

t.test('initialize inside a batch gets an error entry', async t => {
  const app = await batchApp(t)
  const res = await post(app, [
    { jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'c', version: '1' } } },
    ping(2)
  ])
  t.equal(res.statusCode, 200)
  const body = JSON.parse(res.payload) as Array<{ id: unknown, result?: unknown, error?: { code: number } }>
  const init = body.find(entry => entry.id === 'init')
  t.ok(init?.error, 'initialize is answered with an error')
  t.notOk(init?.result)
  t.same(body.find(entry => entry.id === 2)?.result, {}, 'the rest of the batch is served')
})

t.test('invalid members of a batch get their own error entries', async t => {
  const app = await batchApp(t)
  const res = await post(app, [ping(1), 42, { jsonrpc: '2.0', id: null, method: 'ping' }])
  t.equal(res.statusCode, 200)
  const body = JSON.parse(res.payload) as Array<{ id?: unknown, result?: unknown, error?: { code: number } }>
  t.equal(body.length, 3)
  t.equal(body.filter(entry => entry.error?.code === -32600).length, 2)
})

t.test('a batch is rejected when 2025-03-26 is not enabled', async t => {
  const app = await buildApp(t, { protocolVersions: ['2026-07-28', '2025-11-25'] })
  const res = await post(app, [ping(1)])
  t.equal(res.statusCode, 400)
  assertBareError(t, res.payload, -32600)
})

t.test('a legacy JSON-RPC response that answers no request of this server is 400 -32600', async t => {
  const app = await buildApp(t)
  for (const message of [{ jsonrpc: '2.0', id: 5, result: {} }, { jsonrpc: '2.0', id: 'x', error: { code: -1, message: 'no' } }]) {
    const res = await post(app, message, LEGACY)
    t.equal(res.statusCode, 400)
    assertBareError(t, res.payload, -32600)
  }
})

t.test('a JSON-RPC response POSTed with a modern version is 400', async t => {
  const app = await buildApp(t)
  const res = await post(app, { jsonrpc: '2.0', id: 5, result: {} }, { 'mcp-protocol-version': '2026-07-28' })
  t.equal(res.statusCode, 400)
  assertBareError(t, res.payload)
})

t.test('an unexpected Mcp-Session-Id on a legacy request is ignored', async t => {
  const app = await buildApp(t)
  const res = await postLegacy(app, 'ping', undefined, { headers: { 'mcp-session-id': 'never-issued' } })
  t.equal(res.statusCode, 200)
  t.notOk('mcp-session-id' in res.headers)
})

t.test('client input never yields a 500 or a stack trace', async t => {
  const app = await buildApp(t, { bodyLimit: 4096 }, registerEcho)
  const payloads: Array<[string, unknown, Record<string, string | undefined>?]> = [
    ['params an array', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: [] }],
    ['params a string', { jsonrpc: '2.0', id: 1, method: 'tools/list', params: 'x' }],
    ['arguments a string', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: 'x' } }],
    ['tool name a number', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 7 } }],
    ['__proto__ arguments', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"__proto__":{"text":1}}}}'],
    ['_meta a string', { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: 'x' } }],
    ['_meta claim a number', { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': 5 } } }],
    ['progressToken an object', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'a' }, _meta: { progressToken: {} } } }],
    ['initialize without params', { jsonrpc: '2.0', id: 1, method: 'initialize' }],
    ['cursor on a list', { jsonrpc: '2.0', id: 1, method: 'tools/list', params: { cursor: 'abc' } }],
    ['resources/read without uri', { jsonrpc: '2.0', id: 1, method: 'resources/read', params: {} }],
    ['completion/complete without ref', { jsonrpc: '2.0', id: 1, method: 'completion/complete', params: {} }],
    ['prompts/get of nothing', { jsonrpc: '2.0', id: 1, method: 'prompts/get', params: { name: 'none' } }],
    ['deep nesting', '['.repeat(1000) + ']'.repeat(1000)],
    ['cancel with object requestId', { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: {} } }],
    ['bad protocol header', { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-protocol-version': '\u00ff\u00fe' }],
    ['bad batch member', [[], {}, 'x', null]]
  ]
  for (const [what, body, headers] of payloads) {
    const res = await post(app, body, { ...LEGACY, ...headers })
    t.ok(res.statusCode < 500, `${what}: status ${res.statusCode}`)
    t.notOk(hasStackTrace(res.payload), `${what}: no stack trace`)
  }
})
