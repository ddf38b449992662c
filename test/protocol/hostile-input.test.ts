/**
 * Hostile input at every entry point (DESIGN §5 Limits): deep nesting, huge arrays, prototype keys
 * (plain and escaped: `__proto__`, and `constructor` holding a `prototype`, as secure-json-parse
 * refuses them; `constructor` as ordinary data is served), invalid UTF-8, duplicate keys, control characters in header values, enormous
 * headers and method names. None reaches a handler, none is a 5xx, and none costs more than linear time.
 */
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { rawExchange, rawStatus } from '../helpers/http.js'
import { buildApp, post, SERVER_INFO } from '../helpers/inject.js'
import { bareError, hasStackTrace, jsonRpcResponseViolation, LEGACY, modernHeaders, modernMeta, type Headers } from '../helpers/jsonrpc.js'
import { listenOn, portOf } from '../helpers/listen.js'
import { registerCounter, registerEcho, registerSleep, type Counter } from '../helpers/tools.js'

interface HostileApp {
  app: FastifyInstance
  counter: Counter
  /** Requests Fastify routed to a handler at all (an application-level preHandler hook). */
  handled: { count: number }
}

/** The plugin with `count`, `echo` and `sleep`; an app-level preHandler hook counts requests that got past parsing. */
async function hostileApp (t: Test, options: McpCancellationOptions = {}, listen = false): Promise<HostileApp> {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  const handled = { count: 0 }
  app.addHook('preHandler', async () => { handled.count++ })
  await app.register(mcpCancellation, { serverInfo: SERVER_INFO, ...options })
  const counter = registerCounter(app)
  registerEcho(app)
  registerSleep(app)
  if (listen) await listenOn(t, app)
  else await app.ready()
  return { app, counter, handled }
}

interface EntryPoint {
  name: string
  /** The body with `value` (JSON text) placed where a client controls a value. */
  body: (value: string) => string
  headers: Headers
  /** Whether a benign body reaches the `count` tool. */
  counts: boolean
}

const MODERN_META = JSON.stringify(modernMeta())

const ENTRY_POINTS: EntryPoint[] = [
  {
    name: 'legacy tools/call arguments',
    body: v => `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{"x":${v}}}}`,
    headers: LEGACY,
    counts: true
  },
  {
    name: 'modern tools/call arguments',
    body: v => `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{"x":${v}},"_meta":${MODERN_META}}}`,
    headers: modernHeaders('tools/call', 'count'),
    counts: true
  },
  {
    name: 'notifications/cancelled reason',
    body: v => `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":${v}}}`,
    headers: LEGACY,
    counts: false
  },
  {
    name: 'initialize clientInfo',
    body: v => `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1","x":${v}}}}`,
    headers: {},
    counts: false
  },
  {
    name: 'batch member (2025-03-26)',
    body: v => `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{"x":${v}}}}]`,
    headers: {},
    counts: true
  }
]

/** Asserts a 400 JSON-RPC error without id, with `code` (or one of the request-level codes), and no stack trace. */
function assertRefused (t: Test, res: LightMyRequestResponse, what: string, code?: number): void {
  t.equal(res.statusCode, 400, `${what}: 400`)
  try {
    const error = bareError(res)
    if (code !== undefined) t.equal(error.code, code, `${what}: ${code}`)
    else t.ok(error.code === -32600 || error.code === -32700, `${what}: -32600 or -32700 (got ${error.code})`)
  } catch (e) {
    t.fail(`${what}: ${(e as Error).message}`)
  }
  t.notOk(hasStackTrace(res.payload), `${what}: no stack trace`)
}

/** Asserts that nothing hostile got anywhere: no tool call, no cancellation row, nothing in flight. */
function assertUntouched (t: Test, { app, counter }: HostileApp, what: string): void {
  t.equal(counter.calls, 0, `${what}: no tool ran`)
  t.equal(app.mcpCancellation.rows, 0, `${what}: no cancellation row`)
  t.equal(app.mcpCancellation.inFlightRows, 0, `${what}: nothing in flight`)
}

t.test('control: a benign value at every entry point is served (so the refusals below mean something)', async t => {
  const { app, counter } = await hostileApp(t)
  let expected = 0
  for (const entry of ENTRY_POINTS) {
    const res = await post(app, entry.body('{"a":[1,2,{"b":"c"}]}'), entry.headers)
    t.ok(res.statusCode === 200 || res.statusCode === 202, `${entry.name}: ${res.statusCode}`)
    if (entry.counts) expected++
    t.equal(counter.calls, expected, `${entry.name}: reached its handler as expected`)
  }
})

t.test('nesting deeper than 64 is 400 -32600 at every entry point', async t => {
  const hostile = await hostileApp(t)
  const deep = '['.repeat(70) + ']'.repeat(70)
  const deepObject = '{"a":'.repeat(70) + '1' + '}'.repeat(70)
  for (const entry of ENTRY_POINTS) {
    assertRefused(t, await post(hostile.app, entry.body(deep), entry.headers), `${entry.name}, 70 arrays`, -32600)
    assertRefused(t, await post(hostile.app, entry.body(deepObject), entry.headers), `${entry.name}, 70 objects`, -32600)
  }
  assertRefused(t, await post(hostile.app, '['.repeat(65) + ']'.repeat(65), LEGACY), 'a bare 65-deep array', -32600)
  assertUntouched(t, hostile, 'deep nesting')
})

t.test('depth 64 is accepted, 65 is not; maxJsonDepth moves the bound', async t => {
  const { app, counter } = await hostileApp(t)
  // envelope, params and arguments are three levels: 61 arrays inside make 64.
  const body = (arrays: number): string => ENTRY_POINTS[0]!.body('['.repeat(arrays) + ']'.repeat(arrays))
  t.equal((await post(app, body(61), LEGACY)).statusCode, 200, 'depth 64')
  t.equal(counter.calls, 1)
  assertRefused(t, await post(app, body(62), LEGACY), 'depth 65', -32600)
  t.equal(counter.calls, 1)

  const shallow = await hostileApp(t, { maxJsonDepth: 10 })
  t.equal((await post(shallow.app, body(7), LEGACY)).statusCode, 200, 'maxJsonDepth 10: depth 10')
  assertRefused(t, await post(shallow.app, body(8), LEGACY), 'maxJsonDepth 10: depth 11', -32600)
})

t.test('more values than maxJsonValues is 400 at every entry point', async t => {
  const hostile = await hostileApp(t)
  const huge = `[${new Array(150_000).fill('0').join(',')}]`
  const manyArrays = `[${new Array(120_000).fill('[]').join(',')}]`
  for (const entry of ENTRY_POINTS) {
    assertRefused(t, await post(hostile.app, entry.body(huge), entry.headers), `${entry.name}, 150 000 numbers`)
    assertRefused(t, await post(hostile.app, entry.body(manyArrays), entry.headers), `${entry.name}, 120 000 empty arrays`)
  }
  assertUntouched(t, hostile, 'huge arrays')

  const fine = await post(hostile.app, ENTRY_POINTS[0]!.body(`[${new Array(50_000).fill('0').join(',')}]`), LEGACY)
  t.equal(fine.statusCode, 200, '50 000 numbers are within the default bound')

  const small = await hostileApp(t, { maxJsonValues: 1000 })
  assertRefused(t, await post(small.app, ENTRY_POINTS[0]!.body(`[${new Array(2000).fill('0').join(',')}]`), LEGACY), 'maxJsonValues 1000: 2000 numbers')
  t.equal(small.counter.calls, 0)
  t.equal((await post(small.app, ENTRY_POINTS[0]!.body(`[${new Array(500).fill('0').join(',')}]`), LEGACY)).statusCode, 200, 'maxJsonValues 1000: 500 numbers')
})

t.test('prototype-pollution keys, plain or escaped, are 400 -32600 at every entry point', async t => {
  const hostile = await hostileApp(t)
  const values = [
    '{"__proto__":{"polluted":true}}', '{"\\u005f_proto__":{"polluted":true}}', '{"__proto\\u005f_":{"polluted":true}}',
    '{"\\u005F\\u005Fproto\\u005F\\u005F":{"polluted":true}}', '{"__proto__":"x"}',
    '{"constructor":{"prototype":{"polluted":true}}}', '{"\\u0063onstructor":{"prototype":{"polluted":true}}}',
    '{"constr\\u0075ctor":{"prot\\u006ftype":{}}}', '{"constructor":{"name":"x","prototype":null}}',
    '[{"a":{"constructor":{"prototype":1}}}]'
  ]
  for (const value of values) {
    for (const entry of ENTRY_POINTS) {
      assertRefused(t, await post(hostile.app, entry.body(value), entry.headers), `${entry.name}, ${value}`, -32600)
    }
  }
  const envelopes: Array<[string, string, Headers]> = [
    ['top-level __proto__', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count"},"__proto__":{"polluted":true}}', LEGACY],
    ['top-level escaped __proto__', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count"},"\\u005f_proto__":{"polluted":true}}', LEGACY],
    ['params __proto__', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","__proto__":{"arguments":{}}}}', LEGACY],
    ['params constructor', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","constructor":{"prototype":{"polluted":true}}}}', LEGACY],
    ['cancel params __proto__', '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"__proto__":{"requestId":1}}}', LEGACY],
    ['_meta __proto__', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","_meta":{"__proto__":{}}}}', LEGACY],
    ['batch member top level', '[{"jsonrpc":"2.0","id":1,"method":"ping","__proto__":{"polluted":true}}]', {}]
  ]
  for (const [what, body, headers] of envelopes) assertRefused(t, await post(hostile.app, body, headers), what, -32600)
  assertUntouched(t, hostile, 'prototype keys')
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype is untouched')
  t.equal(Object.getPrototypeOf({}), Object.prototype)

  const value = await post(hostile.app, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { text: '__proto__' } } }, LEGACY)
  t.equal(value.statusCode, 200, 'the same words as values are fine')
  t.match(value.payload, /"text":"__proto__"/)
  t.equal((await post(hostile.app, ENTRY_POINTS[0]!.body('{"__proto":1,"proto__":2,"Constructor":3}'), LEGACY)).statusCode, 200, 'and look-alike keys are fine')
})

t.test('constructor as ordinary data is served at every entry point', async t => {
  const { app, counter } = await hostileApp(t)
  const values = [
    '{"constructor":"Foo"}', '{"constructor":{"name":"x"}}', '{"constructor":[{"prototype":1}]}',
    '{"constructor":5,"x":{"prototype":1}}', '{"prototype":1}', '{"a":{"constructor":{"deep":{"prototype":1}}}}',
    '{"constr\\u0075ctor":"Foo"}', '{"prot\\u006ftype":{"constructor":null}}'
  ]
  let expected = 0
  for (const value of values) {
    for (const entry of ENTRY_POINTS) {
      const res = await post(app, entry.body(value), entry.headers)
      t.ok(res.statusCode === 200 || res.statusCode === 202, `${entry.name}, ${value}: ${res.statusCode} ${res.statusCode >= 400 ? res.payload : ''}`)
      if (entry.counts) expected++
      t.equal(counter.calls, expected, `${entry.name}, ${value}: reached its handler as expected`)
    }
  }
  t.equal(({} as Record<string, unknown>).prototype, undefined, 'Object.prototype is untouched')
})

t.test('a tool receives constructor data intact; a constructor holding a prototype never reaches it', async t => {
  let calls = 0
  const app = await buildApp(t, {}, app => {
    app.mcp.tool({
      name: 'args',
      description: 'Returns its arguments as JSON',
      inputSchema: { type: 'object' },
      handler: args => {
        calls++
        return { content: [{ type: 'text', text: JSON.stringify(args) }] }
      }
    })
  })
  const legacy = (args: string): string => `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"args","arguments":${args}}}`
  const modern = (args: string): string => `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"args","arguments":${args},"_meta":${MODERN_META}}}`
  const eras: Array<[string, (args: string) => string, Headers]> = [
    ['legacy', legacy, LEGACY],
    ['modern', modern, modernHeaders('tools/call', 'args')]
  ]
  const served = ['{"constructor":"Foo"}', '{"constructor":{"name":"x"}}', '{"constructor":[{"prototype":1}]}', '{"constructor":5,"x":{"prototype":1}}']
  for (const [era, body, headers] of eras) {
    for (const args of served) {
      const res = await post(app, body(args), headers)
      t.equal(res.statusCode, 200, `${era}, ${args}: 200`)
      const message = JSON.parse(res.payload) as { id?: unknown, result?: { content?: Array<{ text?: string }> } }
      t.equal(message.id, 7, `${era}, ${args}: answers the request`)
      t.equal(message.result?.content?.[0]?.text, args, `${era}, ${args}: the tool got exactly what was sent`)
    }
  }
  t.equal(calls, served.length * eras.length)

  const refused = ['{"constructor":{"prototype":{}}}', '{"constr\\u0075ctor":{"prot\\u006ftype":{}}}', '{"__proto__":{}}', '{"x":[{"__proto__":1}]}']
  for (const [era, body, headers] of eras) {
    for (const args of refused) {
      const res = await post(app, body(args), headers)
      assertRefused(t, res, `${era}, ${args}`, -32600)
      t.notOk('id' in (JSON.parse(res.payload) as object), `${era}, ${args}: no id`)
    }
  }
  t.equal(calls, served.length * eras.length, 'no refused body reached the tool')
  t.equal(app.mcpCancellation.inFlightRows, 0)
})

t.test('invalid UTF-8 is 400 -32700 at every entry point', async t => {
  const hostile = await hostileApp(t)
  const sequences: Array<[string, number[]]> = [
    ['0xFF', [0xff]],
    ['overlong "/"', [0xc0, 0xaf]],
    ['encoded surrogate', [0xed, 0xa0, 0x80]],
    ['above U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ['truncated sequence', [0xe2, 0x82]],
    ['lone continuation byte', [0x80]]
  ]
  for (const [what, bytes] of sequences) {
    for (const entry of ENTRY_POINTS) {
      const [before, after] = entry.body('"@@BAD@@"').split('@@BAD@@') as [string, string]
      const body = Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)])
      assertRefused(t, await post(hostile.app, body, entry.headers), `${entry.name}, ${what}`, -32700)
    }
    const inKey = Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping","'), Buffer.from(bytes), Buffer.from('":1}')])
    assertRefused(t, await post(hostile.app, inKey, LEGACY), `a key with ${what}`, -32700)
  }
  assertUntouched(t, hostile, 'invalid UTF-8')
})

t.test('duplicate JSON keys are 400 at every entry point', async t => {
  const hostile = await hostileApp(t)
  for (const entry of ENTRY_POINTS) {
    assertRefused(t, await post(hostile.app, entry.body('{"a":1,"a":2}'), entry.headers), `${entry.name}, {"a":1,"a":2}`)
    assertRefused(t, await post(hostile.app, entry.body('{"a":1,"\\u0061":2}'), entry.headers), `${entry.name}, "a" and "\\u0061"`)
  }
  const envelopes: Array<[string, string, Headers]> = [
    ['two ids', '{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"count"}}', LEGACY],
    ['two methods', '{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call","params":{"name":"count"}}', LEGACY],
    ['two tool names', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","name":"count"}}', LEGACY],
    ['an escaped second id', '{"jsonrpc":"2.0","id":1,"\\u0069d":2,"method":"tools/call","params":{"name":"count"}}', LEGACY],
    ['two requestIds in a cancel', '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}', LEGACY],
    ['two params', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"params":{"name":"count"}}', LEGACY],
    ['two ids in a batch member', '[{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"count"}}]', {}]
  ]
  for (const [what, body, headers] of envelopes) assertRefused(t, await post(hostile.app, body, headers), what)
  assertUntouched(t, hostile, 'duplicate keys')

  const siblings = ENTRY_POINTS[0]!.body('{"a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":2}]}')
  t.equal((await post(hostile.app, siblings, LEGACY)).statusCode, 200, 'one key in sibling objects is not a duplicate')
})

t.test('header values with control characters are refused by Node (400) before any handler', async t => {
  const hostile = await hostileApp(t, {}, true)
  const port = portOf(hostile.app)
  const body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count","arguments":{}}}'
  const request = (extra: string): string =>
    `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n${extra}` +
    `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`

  const control = await rawExchange(port, request('MCP-Protocol-Version: 2025-11-25\r\n'))
  t.equal(rawStatus(control), 200, 'control: the same request with clean headers runs')
  t.equal(hostile.counter.calls, 1)
  hostile.counter.calls = 0
  hostile.handled.count = 0

  const headers = ['MCP-Protocol-Version', 'Mcp-Method', 'Mcp-Name', 'Mcp-Session-Id', 'Authorization', 'Origin', 'X-Anything']
  const bad: Array<[string, string]> = [['NUL', '\x00'], ['SOH', '\x01'], ['ESC (ANSI)', '\x1b[31m'], ['DEL', '\x7f'], ['bare CR', '\r']]
  for (const name of headers) {
    for (const [what, chars] of bad) {
      const response = await rawExchange(port, request(`${name}: a${chars}b\r\n`))
      t.equal(rawStatus(response), 400, `${name} with ${what}: 400`)
    }
  }
  const oversized = await rawExchange(port, request(`MCP-Protocol-Version: ${'A'.repeat(32 * 1024)}\r\n`))
  t.equal(rawStatus(oversized), 431, 'a 32 KB header is refused by Node (431)')
  assertUntouched(t, hostile, 'control characters')
  t.equal(hostile.handled.count, 0, 'Fastify never routed any of them')
})

t.test('an 8 KB MCP-Protocol-Version is 400, echoed in at most 40 characters', async t => {
  const { app, counter } = await hostileApp(t)
  const huge = 'A'.repeat(8 * 1024)
  const legacy = await post(app, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'count' } }, { 'mcp-protocol-version': huge })
  t.equal(legacy.statusCode, 400, 'legacy era: 400')
  const message = (JSON.parse(legacy.payload) as { error: { message: string } }).error.message
  t.notOk(message.includes('A'.repeat(41)), 'the version is echoed in at most 40 characters')
  t.ok(message.includes('A'.repeat(10)), 'but it is echoed')
  t.ok(legacy.payload.length < 400, `the whole answer is small (${legacy.payload.length} bytes)`)

  const modern = await post(app, {
    jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: modernMeta({ 'io.modelcontextprotocol/protocolVersion': huge }) }
  }, { 'mcp-protocol-version': huge, 'mcp-method': 'tools/list' })
  t.equal(modern.statusCode, 400, 'modern era (claim and header agree): 400')
  const error = (JSON.parse(modern.payload) as { error: { code: number, data?: { requested?: string } } }).error
  t.equal(error.code, -32022)
  t.ok(typeof error.data?.requested === 'string' && error.data.requested.length <= 40, `requested is echoed in ${error.data?.requested?.length} characters`)
  t.ok(modern.payload.length < 600, `the whole answer is small (${modern.payload.length} bytes)`)

  const ansi = await post(app, {
    jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: modernMeta({ 'io.modelcontextprotocol/protocolVersion': '\u001b[2J\u0000\u202e2026' }) }
  }, { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' })
  t.equal(ansi.statusCode, 400)
  t.notOk(/[\u0000-\u001f\u007f-\u009f\u202e]/.test(JSON.parse(ansi.payload).error?.data?.requested ?? ''), 'control and bidi characters are never echoed')
  t.equal(counter.calls, 0)
})

/** The part of `message` that echoes `name`: from where `name`'s first characters appear to the end. */
function echoedPart (message: string, name: string): string {
  const at = message.indexOf(name.slice(0, 4))
  return at === -1 ? '' : message.slice(at)
}

/** The error message of a JSON-RPC error response body. */
function errorMessage (payload: string): string {
  return String((JSON.parse(payload) as { error?: { message?: unknown } }).error?.message)
}

const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2066-\u2069]/

t.test('long or control-laden names are echoed sanitised and short wherever they are echoed', async t => {
  const { app, counter } = await hostileApp(t)
  const long = 'm'.repeat(10_000)
  const nasty = `evil\u0000\u001b[31mred\u001b[0m\u202egnp.exe\r\nInjected: yes${'x'.repeat(300)}`

  for (const [what, method] of [['10 000 characters', long], ['NUL, ANSI, bidi, CRLF', nasty]] as const) {
    const batch = await post(app, [{ jsonrpc: '2.0', id: 1, method }, { jsonrpc: '2.0', id: 2, method: 'ping' }])
    t.equal(batch.statusCode, 200, `batch member, ${what}`)
    const [first] = JSON.parse(batch.payload) as Array<{ error?: { code: number, message: string } }>
    t.equal(first?.error?.code, -32601)
    const echoed = echoedPart(first?.error?.message ?? '', method)
    t.ok(echoed.length > 0 && echoed.length <= 200, `batch member, ${what}: echoed in ${echoed.length} characters`)
    t.notOk(UNSAFE.test(echoed), `batch member, ${what}: no control or bidi character`)

    for (const [kind, params] of [
      ['method of a legacy request', { method }],
      ['tool name', { method: 'tools/call', params: { name: method, arguments: {} } }],
      ['prompt name', { method: 'prompts/get', params: { name: method } }]
    ] as const) {
      const res = await post(app, { jsonrpc: '2.0', id: 3, ...params }, LEGACY)
      t.equal(res.statusCode, 200, `${kind}, ${what}`)
      const message = errorMessage(res.payload)
      const echoed = echoedPart(message, method)
      t.ok(echoed.length > 0 && echoed.length <= 200, `${kind}, ${what}: echoed in ${echoed.length} characters`)
      t.notOk(UNSAFE.test(message), `${kind}, ${what}: no control or bidi character`)
    }

    const notification = await post(app, { jsonrpc: '2.0', method }, LEGACY)
    t.equal(notification.statusCode, 202, `a notification named ${what}: 202`)
    t.equal(notification.payload, '', 'with nothing echoed')
  }

  const modern = await post(app, { jsonrpc: '2.0', id: 4, method: long, params: { _meta: modernMeta() } }, modernHeaders(long))
  t.equal(modern.statusCode, 404, 'modern era, a 10 000-character method: 404')
  const modernEcho = echoedPart(errorMessage(modern.payload), long)
  t.ok(modernEcho.length > 0 && modernEcho.length <= 200, `echoed in ${modernEcho.length} characters`)
  const modernNasty = await post(app, { jsonrpc: '2.0', id: 5, method: nasty, params: { _meta: modernMeta() } }, modernHeaders('tools/list'))
  t.equal(modernNasty.statusCode, 400, 'modern era, a control-laden method cannot match its Mcp-Method header')
  t.notOk(UNSAFE.test(errorMessage(modernNasty.payload)), 'and nothing unsafe is echoed')
  t.equal(counter.calls, 0)
})

/** Times one POST and asserts it was refused or served with `status` in under a second. */
async function timed (t: Test, app: FastifyInstance, what: string, body: string | Buffer, headers: Headers, status: number): Promise<LightMyRequestResponse> {
  t.ok(body.length > 300_000 && body.length <= 1024 * 1024, `${what}: a ${Math.round(body.length / 1024)} KiB body`)
  const started = performance.now()
  const res = await post(app, body, headers)
  const ms = performance.now() - started
  t.equal(res.statusCode, status, `${what}: ${status}`)
  t.ok(ms < 1000, `${what}: answered in ${ms.toFixed(0)} ms (< 1 s: no quadratic blow-up)`)
  if (res.statusCode !== 202) t.equal(jsonRpcResponseViolation(JSON.parse(res.payload)), undefined, `${what}: a JSON-RPC response`)
  return res
}

t.test('hostile 1 MB bodies cost linear time', async t => {
  const { app, counter } = await hostileApp(t)
  const call = ENTRY_POINTS[0]!.body
  const echo = (text: string): string => `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"${text}"}}}`

  await timed(t, app, '1 000 000 ×[', '['.repeat(1_000_000), LEGACY, 400)
  await timed(t, app, '500 000 ×[ then ×]', '['.repeat(500_000) + ']'.repeat(500_000), LEGACY, 400)
  await timed(t, app, '150 000 nested objects', '{"a":'.repeat(150_000) + '1' + '}'.repeat(150_000), LEGACY, 400)
  await timed(t, app, '500 000 zeros in an array', call(`[${new Array(500_000).fill('0').join(',')}]`), LEGACY, 400)
  await timed(t, app, 'a 1 MB string id', `{"jsonrpc":"2.0","id":"${'i'.repeat(1_000_000)}","method":"ping"}`, LEGACY, 400)
  await timed(t, app, 'invalid UTF-8 after 1 MB', Buffer.concat([Buffer.from(echo('a'.repeat(1_000_000)).slice(0, -4)), Buffer.from([0xff]), Buffer.from('"}}}')]), LEGACY, 400)
  await timed(t, app, '__proto__ after 60 000 keys', call(`{${Array.from({ length: 60_000 }, (_, i) => `"k${i}":0`).join(',')},"__proto__":{}}`), LEGACY, 400)
  await timed(t, app, 'a constructor holding a prototype after 60 000 keys', call(`{"constructor":{${Array.from({ length: 60_000 }, (_, i) => `"k${i}":0`).join(',')},"prototype":{}}}`), LEGACY, 400)
  await timed(t, app, 'a duplicate after 60 000 keys', call(`{${Array.from({ length: 60_000 }, (_, i) => `"k${i}":0`).join(',')},"k0":1}`), LEGACY, 400)
  t.equal(counter.calls, 0, 'none of the refused bodies ran a tool')

  const quotes = await timed(t, app, '200 000 escaped quotes', echo('\\"'.repeat(200_000)), LEGACY, 200)
  t.equal((JSON.parse(quotes.payload) as { result: { content: Array<{ text: string }> } }).result.content[0]?.text.length, 200_000, 'parsed and echoed whole')
  await timed(t, app, '400 000 escaped quotes in a key', call(`{"${'\\"'.repeat(400_000)}":1}`), LEGACY, 200)
  await timed(t, app, '250 000 escaped backslashes', echo('\\\\'.repeat(250_000)), LEGACY, 200)
  await timed(t, app, 'runs of backslashes before every quote', echo('\\\\\\\\\\\\\\"'.repeat(60_000)), LEGACY, 200)
  await timed(t, app, '150 000 \\u0000 escapes', echo('\\u0000'.repeat(150_000)), LEGACY, 200)
  await timed(t, app, '30 000 constructor keys holding strings', call(`[${Array.from({ length: 30_000 }, () => '{"constructor":"Foo"}').join(',')}]`), LEGACY, 200)
  await timed(t, app, '60 000 distinct keys', call(`{${Array.from({ length: 60_000 }, (_, i) => `"k${i}":0`).join(',')}}`), LEGACY, 200)
  await timed(t, app, 'a 1 MB method name', `{"jsonrpc":"2.0","id":1,"method":"${'m'.repeat(1_000_000)}"}`, LEGACY, 200)
  await timed(t, app, 'a 1 MB cancellation reason', `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"${'\\u001b'.repeat(170_000)}"}}`, LEGACY, 202)
  t.equal(app.mcpCancellation.rows, 0)
})
