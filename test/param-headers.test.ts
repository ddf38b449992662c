/**
 * SEP-2243 custom headers: tool arguments annotated with `x-mcp-header` must be mirrored into
 * `Mcp-Param-{Name}` headers by 2026-07-28 clients, and the server must refuse requests whose headers
 * disagree with the body (400, -32020) before the tool runs.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, json, postLegacy, postModern, type Headers, type Teardown } from './helpers/mcp.js'

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

t.test('headers that mirror the arguments are accepted, base64 sentinel decoded, integers compared as numbers', async t => {
  const { app, runs } = await appWithTool(t)
  const cases: Array<[Record<string, unknown>, Headers]> = [
    [{ query: 'q', region: 'us-west1' }, { 'mcp-param-region': 'us-west1' }],
    [{ query: 'q', region: 'Hello, 世界' }, { 'mcp-param-region': `=?base64?${Buffer.from('Hello, 世界').toString('base64')}?=` }],
    [{ query: 'q', priority: 42 }, { 'mcp-param-priority': '42.0' }],
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
