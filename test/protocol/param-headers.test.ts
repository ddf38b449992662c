/**
 * SEP-2243 custom headers: tool arguments annotated with `x-mcp-header` must be mirrored into
 * `Mcp-Param-{Name}` headers by 2026-07-28 clients, and the server must refuse requests whose headers
 * disagree with the body (400, -32020) before the tool runs.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, json, post, postLegacy, postModern } from '../helpers/inject.js'
import { modernHeaders, modernMeta, type Headers } from '../helpers/jsonrpc.js'
import type { Teardown } from '../helpers/teardown.js'

const REGION_TOOL = {
  name: 'query',
  description: 'Runs a query in a region',
  inputSchema: {
    type: 'object',
    properties: {
      region: { type: 'string', 'x-mcp-header': 'Region' },
      priority: { type: 'integer', 'x-mcp-header': 'Priority' },
      verbose: { type: 'boolean', 'x-mcp-header': 'Verbose' },
      target: { type: 'object', properties: { zone: { type: 'string', 'x-mcp-header': 'Zone' } } },
      query: { type: 'string' }
    },
    required: ['query']
  }
}

async function appWithTool (t: Teardown): Promise<{ app: FastifyInstance, runs: () => number }> {
  let runs = 0
  const app = await buildApp(t, {}, app => {
    app.mcp.tool({ ...REGION_TOOL, handler: () => { runs++; return { content: [{ type: 'text', text: 'ran' }] } } })
  })
  return { app, runs: () => runs }
}

async function call (app: FastifyInstance, args: Record<string, unknown>, headers: Headers) {
  return await postModern(app, 'tools/call', { name: 'query', arguments: args }, { headers })
}

t.test('headers that mirror the arguments are accepted, base64 sentinel decoded', async t => {
  const { app, runs } = await appWithTool(t)
  const cases: Array<[Record<string, unknown>, Headers]> = [
    [{ query: 'q', region: 'us-west1' }, { 'mcp-param-region': 'us-west1' }],
    [{ query: 'q', region: 'Hello, 世界' }, { 'mcp-param-region': `=?base64?${Buffer.from('Hello, 世界').toString('base64')}?=` }],
    [{ query: 'q', priority: 42 }, { 'mcp-param-priority': '42' }],
    [{ query: 'q', priority: -7 }, { 'mcp-param-priority': '-7' }],
    [{ query: 'q', priority: 0 }, { 'mcp-param-priority': '0' }],
    [{ query: 'q', priority: Number.MAX_SAFE_INTEGER }, { 'mcp-param-priority': String(Number.MAX_SAFE_INTEGER) }],
    [{ query: 'q', priority: 7 }, { 'mcp-param-priority': `=?base64?${Buffer.from('7').toString('base64')}?=` }],
    [{ query: 'q', verbose: false }, { 'mcp-param-verbose': 'false' }],
    [{ query: 'q', target: { zone: 'b' } }, { 'mcp-param-zone': 'b' }],
    [{ query: 'q' }, {}]
  ]
  for (const [args, headers] of cases) {
    const response = await call(app, args, headers)
    t.equal(response.statusCode, 200, `accepted: ${JSON.stringify(args)}`)
    t.same(json(response).result?.content, [{ type: 'text', text: 'ran' }])
  }
  t.equal(runs(), cases.length)
  // A null argument needs no header (it is then the schema that refuses it, as an isError result).
  const nullRegion = await call(app, { query: 'q', region: null }, {})
  t.equal(nullRegion.statusCode, 200, 'a null argument is not a header mismatch')
  t.equal(json(nullRegion).result?.isError, true)
})

t.test('headers that disagree with the body are 400 / -32020 and the tool never runs', async t => {
  const { app, runs } = await appWithTool(t)
  const cases: Array<[string, Record<string, unknown>, Headers]> = [
    ['missing header for a present argument', { query: 'q', region: 'eu' }, {}],
    ['different value', { query: 'q', region: 'eu' }, { 'mcp-param-region': 'us' }],
    ['header without the argument', { query: 'q' }, { 'mcp-param-region': 'us' }],
    ['integer that is not the number', { query: 'q', priority: 42 }, { 'mcp-param-priority': '42.5' }],
    ['boolean spelled differently', { query: 'q', verbose: true }, { 'mcp-param-verbose': 'True' }],
    ['bad base64 padding', { query: 'q', region: 'Hello' }, { 'mcp-param-region': '=?base64?SGVsbG8?=' }],
    ['non-alphabet base64', { query: 'q', region: 'Hello' }, { 'mcp-param-region': '=?base64?SGVs!!!bG8=?=' }],
    ['nested argument without its header', { query: 'q', target: { zone: 'b' } }, {}]
  ]
  for (const [name, args, headers] of cases) {
    const response = await call(app, args, headers)
    t.equal(response.statusCode, 400, `${name}: 400`)
    t.equal(json(response).error?.code, -32020, `${name}: HeaderMismatch`)
    t.equal(json(response).id, 1, `${name}: the request id is echoed`)
  }
  t.equal(runs(), 0)
})

t.test('only the canonical spelling of a value matches: a proxy routing on the header text and the server agree', async t => {
  const { app, runs } = await appWithTool(t)
  // SEP-2243 "Value Encoding": an integer is its decimal string (`42`, `-7`), a boolean `true` or `false`.
  const cases: Array<[string, Record<string, unknown>, Headers]> = [
    ['a plus sign', { query: 'q', priority: 1 }, { 'mcp-param-priority': '+1' }],
    ['leading zeros', { query: 'q', priority: 1 }, { 'mcp-param-priority': '01' }],
    ['a plus sign and leading zeros', { query: 'q', priority: 1 }, { 'mcp-param-priority': '+001' }],
    ['a trailing point', { query: 'q', priority: 1 }, { 'mcp-param-priority': '1.' }],
    ['a fraction of zeros', { query: 'q', priority: 1 }, { 'mcp-param-priority': '1.000' }],
    ['an exponent', { query: 'q', priority: 100 }, { 'mcp-param-priority': '1e2' }],
    ['hexadecimal', { query: 'q', priority: 16 }, { 'mcp-param-priority': '0x10' }],
    ['negative zero', { query: 'q', priority: 0 }, { 'mcp-param-priority': '-0' }],
    ['an integer beyond 2^53 the body rounded to', { query: 'q', priority: 9007199254740992 }, { 'mcp-param-priority': '9007199254740993' }],
    ['2^53 itself, not a safe integer', { query: 'q', priority: 9007199254740992 }, { 'mcp-param-priority': '9007199254740992' }],
    ['a string argument for an integer header', { query: 'q', priority: '1' }, { 'mcp-param-priority': '1' }],
    ['a non-canonical integer inside the sentinel', { query: 'q', priority: 1 }, { 'mcp-param-priority': `=?base64?${Buffer.from('01').toString('base64')}?=` }],
    ['a boolean in capitals', { query: 'q', verbose: true }, { 'mcp-param-verbose': 'TRUE' }],
    ['a boolean as a number', { query: 'q', verbose: true }, { 'mcp-param-verbose': '1' }],
    ['a string argument for a boolean header', { query: 'q', verbose: 'true' }, { 'mcp-param-verbose': 'true' }],
    ['a string in another case', { query: 'q', region: 'eu-west' }, { 'mcp-param-region': 'EU-WEST' }],
    // Base64 whose last character carries bits the decoder drops: `SGVsbG9=` decodes to `Hello` like `SGVsbG8=`.
    ['non-canonical base64', { query: 'q', region: 'Hello' }, { 'mcp-param-region': '=?base64?SGVsbG9=?=' }]
  ]
  for (const [name, args, headers] of cases) {
    const response = await call(app, args, headers)
    t.equal(response.statusCode, 400, `${name}: 400`)
    t.equal(json(response).error?.code, -32020, `${name}: HeaderMismatch`)
  }
  t.equal(runs(), 0, 'the tool never ran')
})

t.test('the raw body of an integer beyond 2^53 cannot be matched by any header', async t => {
  const { app, runs } = await appWithTool(t)
  // JSON.parse rounds 9007199254740993 to 9007199254740992: whatever the header says, the request is refused.
  for (const header of ['9007199254740993', '9007199254740992']) {
    const body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"query","arguments":{"query":"q","priority":9007199254740993},' +
      `"_meta":${JSON.stringify(modernMeta())}}}`
    const response = await post(app, body, { ...modernHeaders('tools/call', 'query'), 'mcp-param-priority': header })
    t.equal(response.statusCode, 400, `header ${header}: 400`)
    t.equal(json(response).error?.code, -32020)
  }
  t.equal(runs(), 0)
})

t.test('a literal value that only looks like the sentinel is compared literally', async t => {
  const { app } = await appWithTool(t)
  const response = await call(app, { query: 'q', region: '=?base64?SGVsbG8=' }, { 'mcp-param-region': '=?base64?SGVsbG8=' })
  t.equal(response.statusCode, 200)
})

t.test('legacy requests are not held to 2026-07-28 header binding', async t => {
  const { app, runs } = await appWithTool(t)
  const response = await postLegacy(app, 'tools/call', { name: 'query', arguments: { query: 'q', region: 'eu' } })
  t.equal(response.statusCode, 200)
  t.equal(runs(), 1)
})

t.test('tool definitions breaking the x-mcp-header constraints are refused at registration', async t => {
  const invalid: Array<[string, Record<string, unknown>]> = [
    ['a number parameter', { type: 'object', properties: { n: { type: 'number', 'x-mcp-header': 'N' } } }],
    ['an array item', { type: 'object', properties: { list: { type: 'array', items: { type: 'string', 'x-mcp-header': 'Item' } } } }],
    ['inside a composition', { type: 'object', anyOf: [{ properties: { a: { type: 'string', 'x-mcp-header': 'A' } } }] }],
    ['a duplicate name (case-insensitive)', { type: 'object', properties: { a: { type: 'string', 'x-mcp-header': 'Name' }, b: { type: 'string', 'x-mcp-header': 'name' } } }],
    ['a name that is not an HTTP token', { type: 'object', properties: { a: { type: 'string', 'x-mcp-header': 'Bad Name' } } }]
  ]
  const app = await buildApp(t)
  for (const [name, inputSchema] of invalid) {
    t.throws(() => { app.mcp.tool({ name: 'bad', inputSchema, handler: () => ({ content: [] }) }) },
      { code: 'FST_MCP_INVALID_DEFINITION' }, name)
  }
})
