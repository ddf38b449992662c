import { fileURLToPath } from 'node:url'
import t from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import mcpCancellation, { DuplicateDefinitionError, InvalidDefinitionError } from '../../lib/index.js'
import { buildApp, json, post, postLegacy, registerPlugin } from '../helpers/inject.js'
import type { Teardown } from '../helpers/teardown.js'
import { registerEcho } from '../helpers/tools.js'

const invalidOptions: Array<[string, Record<string, unknown>]> = [
  ['path', { path: 'mcp' }],
  ['path', { path: 42 }],
  ['serverInfo', { serverInfo: { name: 'x' } }],
  ['serverInfo', { serverInfo: 'acme' }],
  ['protocolVersions', { protocolVersions: [] }],
  ['protocolVersions', { protocolVersions: ['2024-11-05'] }],
  ['protocolVersions', { protocolVersions: '2025-11-25' }],
  ['responseMode', { responseMode: 'stream' }],
  ['bodyLimit', { bodyLimit: 0 }],
  ['bodyLimit', { bodyLimit: 1.5 }],
  ['bodyLimit', { bodyLimit: '1mb' }],
  ['allowedOrigins', { allowedOrigins: 'http://localhost' }],
  ['allowedOrigins', { allowedOrigins: [42] }],
  ['allowedHosts', { allowedHosts: 'localhost' }],
  ['allowedHosts', { allowedHosts: [{}] }],
  ['maxInFlightPerScope', { maxInFlightPerScope: 0 }],
  ['maxInFlightPerScope', { maxInFlightPerScope: 1.5 }],
  ['maxInFlightPerScope', { maxInFlightPerScope: '32' }],
  ['resumability', { resumability: 'on' }],
  ['resumability', { resumability: null }],
  ['resumability.windowMs', { resumability: { windowMs: 2 } }],
  ['resumability.retryMs', { resumability: { windowMs: 3000, retryMs: 1001 } }],
  ['resumability.retryMs', { resumability: { retryMs: 0 } }],
  ['resumability.maxBufferedEvents', { resumability: { maxBufferedEvents: 0 } }],
  ['resumability.maxBufferedBytes', { resumability: { maxBufferedBytes: '1mb' } }],
  ['resumability.maxPausedPerScope', { resumability: { maxPausedPerScope: 1.5 } }],
  ['resumability.maxPaused', { resumability: { maxPaused: 0 } }],
  ['resumability.pollIntervalMs', { resumability: { pollIntervalMs: -1 } }]
]

for (const [name, options] of invalidOptions) {
  t.test(`invalid ${name} ${JSON.stringify(options[name])} fails at register time`, async t => {
    await t.rejects(async () => { await registerPlugin(t, options) }, {
      code: 'FST_MCP_INVALID_OPTION',
      message: new RegExp(`"${name}"`)
    })
  })
}

t.test('valid options register and serve', async t => {
  const app = await buildApp(t, {
    path: '/rpc',
    protocolVersions: ['2025-11-25'],
    responseMode: 'json',
    bodyLimit: 2048,
    allowedOrigins: ['https://app.example', /^https:\/\/.*\.example$/],
    allowedHosts: ['localhost:80', /^127\.0\.0\.1/]
  })
  const res = await post(app, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-protocol-version': '2025-11-25' }, '/rpc')
  t.equal(res.statusCode, 200)
  t.same(json(res).result, {})
  const old = await post(app, { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-protocol-version': '2025-11-25' }, '/mcp')
  t.equal(old.statusCode, 404, 'the default path is not served when path is set')
})

/** Registers the plugin, then runs `define` against `app.mcp`; resolves to what `define` threw. */
async function defineOn (t: Teardown, define: (app: FastifyInstance) => void): Promise<void> {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  await app.register(mcpCancellation)
  define(app)
}

const handler = () => ({ content: [] })

const invalidDefinitions: Array<[string, (app: FastifyInstance) => void]> = [
  ['tool with a bad name (space)', app => { app.mcp.tool({ name: 'bad name', handler }) }],
  ['tool with an empty name', app => { app.mcp.tool({ name: '', handler }) }],
  ['tool with a 129-character name', app => { app.mcp.tool({ name: 'a'.repeat(129), handler }) }],
  ['tool without a handler', app => { app.mcp.tool({ name: 'x' } as never) }],
  ['tool whose inputSchema has no type', app => { app.mcp.tool({ name: 'x', inputSchema: { properties: {} }, handler }) }],
  ['tool whose inputSchema has type array', app => { app.mcp.tool({ name: 'x', inputSchema: { type: 'array' }, handler }) }],
  ['tool whose inputSchema does not compile', app => {
    app.mcp.tool({ name: 'x', inputSchema: { type: 'object', properties: { a: { type: 'nope' } } }, handler })
  }],
  ['tool whose outputSchema does not compile', app => {
    app.mcp.tool({ name: 'x', outputSchema: { type: 'object', properties: { a: { type: 'nope' } } }, handler })
  }],
  ['resource with a relative uri', app => { app.mcp.resource({ uri: 'not a uri', name: 'r', handler: () => ({ contents: [] }) }) }],
  ['resource without a name', app => { app.mcp.resource({ uri: 'test://r', name: '', handler: () => ({ contents: [] }) }) }],
  ['resource template with an unsupported expression', app => {
    app.mcp.resourceTemplate({ uriTemplate: 'test://{?query}', name: 't', handler: () => ({ contents: [] }) })
  }],
  ['prompt with an empty name', app => { app.mcp.prompt({ name: '', handler: () => ({ messages: [] }) }) }],
  ['prompt with an argument without a name', app => {
    app.mcp.prompt({ name: 'p', arguments: [{ name: '' }], handler: () => ({ messages: [] }) })
  }]
]

for (const [what, define] of invalidDefinitions) {
  t.test(`${what} throws FST_MCP_INVALID_DEFINITION`, async t => {
    await t.rejects(defineOn(t, define), { code: 'FST_MCP_INVALID_DEFINITION' })
  })
}

t.test('the exported InvalidDefinitionError is what is thrown', async t => {
  await t.rejects(defineOn(t, app => { app.mcp.tool({ name: 'bad name', handler }) }), InvalidDefinitionError)
})

const EXISTING_WORKER = new URL('../workers/context-report.ts', import.meta.url)

/** Registers the worker tool `w` with `worker` on a fresh app: the error it throws, or undefined. */
async function appWithTool (t: Teardown, worker: { filename: string | URL, name?: string }): Promise<unknown> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(mcpCancellation)
  try {
    app.mcp.tool({ name: 'w', worker })
    return undefined
  } catch (error) {
    return error
  }
}

t.test('a worker tool whose module does not exist is refused at registration, naming the path', async t => {
  const missing = new URL('../workers/no-such-tool.js', import.meta.url)
  for (const filename of [missing, fileURLToPath(missing), missing.href]) {
    const error = await appWithTool(t, { filename }) as { code?: string, message?: string } | undefined
    t.equal(error?.code, 'FST_MCP_INVALID_DEFINITION', `${String(filename)}: FST_MCP_INVALID_DEFINITION`)
    t.match(error?.message, fileURLToPath(missing), 'the message names the path')
    t.match(error?.message, /does not exist/)
  }
  const relative = await appWithTool(t, { filename: './workers/spin.js' }) as { code?: string, message?: string } | undefined
  t.equal(relative?.code, 'FST_MCP_INVALID_DEFINITION', 'a relative path is refused too (it would resolve against the worker entry)')
  t.match(relative?.message, /absolute path or a file URL/)
  t.equal(await appWithTool(t, { filename: EXISTING_WORKER, name: 'report' }), undefined, 'an existing module registers')
  t.equal(await appWithTool(t, { filename: fileURLToPath(EXISTING_WORKER), name: 'report' }), undefined, 'as an absolute path too')
})

const duplicates: Array<[string, (app: FastifyInstance) => void]> = [
  ['tool', app => {
    app.mcp.tool({ name: 'dup', handler })
    app.mcp.tool({ name: 'dup', handler })
  }],
  ['resource', app => {
    app.mcp.resource({ uri: 'test://dup', name: 'a', handler: () => ({ contents: [] }) })
    app.mcp.resource({ uri: 'test://dup', name: 'b', handler: () => ({ contents: [] }) })
  }],
  ['resource template', app => {
    app.mcp.resourceTemplate({ uriTemplate: 'test://dup/{id}', name: 'a', handler: () => ({ contents: [] }) })
    app.mcp.resourceTemplate({ uriTemplate: 'test://dup/{id}', name: 'b', handler: () => ({ contents: [] }) })
  }],
  ['prompt', app => {
    app.mcp.prompt({ name: 'dup', handler: () => ({ messages: [] }) })
    app.mcp.prompt({ name: 'dup', handler: () => ({ messages: [] }) })
  }]
]

for (const [what, define] of duplicates) {
  t.test(`a duplicate ${what} throws FST_MCP_DUPLICATE_DEFINITION naming it`, async t => {
    await t.rejects(defineOn(t, define), { code: 'FST_MCP_DUPLICATE_DEFINITION', message: /dup/ })
  })
}

t.test('the exported DuplicateDefinitionError is what is thrown', async t => {
  await t.rejects(defineOn(t, app => {
    app.mcp.tool({ name: 'dup', handler })
    app.mcp.tool({ name: 'dup', handler })
  }), DuplicateDefinitionError)
})

t.test('a rejected definition leaves the first registration working', async t => {
  const app = await buildApp(t, {}, app => {
    registerEcho(app)
    t.throws(() => { app.mcp.tool({ name: 'echo', handler }) }, { code: 'FST_MCP_DUPLICATE_DEFINITION' })
  })
  const res = await postLegacy(app, 'tools/call', { name: 'echo', arguments: { text: 'still here' } })
  t.equal(json(res).result.content[0].text, 'still here')
})
