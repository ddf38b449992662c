/**
 * A throwaway project that installs the packed tarball the way a user would, for test/e2e/package.test.ts:
 * a strict TypeScript consumer (compiled, not run) and an ESM and a CommonJS script (run) that serve
 * one `tools/call` through `app.inject`.
 */
import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface Run {
  code: number | null
  signal: NodeJS.Signals | null
  stdout: string
  stderr: string
  ms: number
}

/**
 * The environment of the parent without what `npm test` and tap put in it: npm's lifecycle and
 * project variables (`npm_config_local_prefix` would point a nested npm at this repository),
 * tap's loaders in NODE_OPTIONS and its coverage hooks. The user's npm settings (cache, registry,
 * config files, proxies) are kept, so installs use the same cache and registry.
 */
export function cleanEnv (): NodeJS.ProcessEnv {
  const keep = /^npm_config_(cache|registry|userconfig|globalconfig|cafile|strict_ssl|.*proxy)$|^npm_config_@/i
  const drop = /^(npm_|_TAPJS_|TAP_|TAP$|TS_NODE_|NODE_OPTIONS$|NODE_V8_COVERAGE$|INIT_CWD$)/i
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => keep.test(key) || !drop.test(key)))
}

/** Runs a program without standard input; never rejects (the outcome is in the result). */
export async function run (file: string, args: string[], cwd: string, timeoutMs: number): Promise<Run> {
  const started = performance.now()
  return await new Promise(resolve => {
    const child = execFile(file, args, { cwd, env: cleanEnv(), timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const failure = error as (Error & { code?: number | string, signal?: NodeJS.Signals }) | null
        resolve({
          code: failure === null ? 0 : typeof failure.code === 'number' ? failure.code : null,
          signal: failure?.signal ?? null,
          stdout,
          stderr: typeof failure?.code === 'string' ? `${stderr}\n${failure.message}` : stderr,
          ms: Math.round(performance.now() - started)
        })
      })
    child.stdin?.end()
  })
}

/** The compiler options a strict user has: nothing of this repository's tsconfig. */
export const CONSUMER_TSCONFIG = {
  compilerOptions: {
    strict: true,
    module: 'NodeNext',
    moduleResolution: 'NodeNext',
    target: 'ES2022',
    skipLibCheck: false,
    noEmit: true
  },
  files: ['consumer.ts', 'readme-getting-started.ts', 'readme-production.ts']
}

/** The README's examples a user copies first, compiled as they are by the consumer project. */
const README_EXAMPLES = { 'readme-getting-started.ts': '## Getting started', 'readme-production.ts': '### Running in production' }

/** The first TypeScript block under `heading` in the README. */
export function readmeExample (readme: string, heading: string): string {
  const start = readme.indexOf(`\n${heading}\n`)
  if (start === -1) throw new Error(`README.md has no heading ${heading}`)
  const block = /```ts\n([\s\S]*?)```/.exec(readme.slice(start))
  if (block === null) throw new Error(`README.md has no ts block under ${heading}`)
  return block[1]!
}

/**
 * Uses the public surface so that a declaration that went missing or became `any` fails to compile:
 * typed assignments catch a missing one (TS2339, TS2305), `@ts-expect-error` catches one that
 * degraded to `any` (TS2578, unused directive).
 */
export const CONSUMER_TS = `import Fastify, { type FastifyInstance } from 'fastify'
import mcpCancellation, {
  mcpCancellation as named,
  RequestCancelledError,
  ToolError,
  type HandlerContext,
  type McpCancellationApi,
  type McpPrincipal,
  type OAuthOptions
} from 'fastify-mcp-cancellation'

const app = Fastify()
await app.register(mcpCancellation, { path: '/mcp', responseMode: 'auto' })
await app.register(named, { path: '/other' })
// @ts-expect-error responseMode is 'auto' | 'json' | 'sse'
await app.register(mcpCancellation, { responseMode: 'stream' })

app.mcp.tool({
  name: 'echo',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
  handler: (_args, ctx) => {
    const context: HandlerContext = ctx
    const signal: AbortSignal = context.signal
    const cancelled: boolean = ctx.cancelled()
    const principal: McpPrincipal | null = ctx.principal
    const scopes: readonly string[] = principal?.scopes ?? []
    if (cancelled || signal.aborted) throw new ToolError(String(principal?.id) + scopes.join(' '))
    return { content: [{ type: 'text', text: 'hi' }] }
  }
})
const oauth: OAuthOptions = { resource: 'https://mcp.example.com/mcp', authorizationServers: ['https://auth.example.com'], listing: 'permitted' }
await app.register(mcpCancellation, { path: '/oauth', auth: { oauth } })
// @ts-expect-error listing is 'all' | 'permitted'
await app.register(mcpCancellation, { path: '/bad', auth: { oauth: { ...oauth, listing: 'some' } } })
// @ts-expect-error a handler returns a tool result, not a string
app.mcp.tool({ name: 'bad', handler: () => 'text' })

async function routes (fastify: FastifyInstance): Promise<void> {
  const api: McpCancellationApi = fastify.mcpCancellation
  fastify.get('/whoami', async request => {
    const principal: string | null = request.mcpPrincipal?.id ?? null
    const issuer: string | null | undefined = request.mcpPrincipal?.issuer
    const scope: string | null = request.mcpScope
    const sessionId: string | null = request.mcpSessionId
    // @ts-expect-error the principal is an object or null, never a string
    const wrong: string = request.mcpPrincipal
    const stopped: boolean = fastify.mcpCancellation.cancelRequest(request, 'why')
    const own: string = api.scope(request)
    return { principal, issuer, scope, sessionId, wrong, stopped, own }
  })
}
await app.register(routes)

const error = new RequestCancelledError('why', 'client')
const source: 'client' | 'disconnect' | 'lifetime' | 'server' | 'task' = error.source
export { source }
`

const ECHO_CALL = {
  method: 'POST',
  url: '/mcp',
  headers: {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-11-25'
  },
  payload: '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}'
}

// Shared by both scripts: register, add `echo`, answer one legacy-era tools/call, print one JSON line.
const serveOneCall = (fastifyName: string, pluginName: string): string => `
  const app = ${fastifyName}()
  await app.register(${pluginName})
  app.mcp.tool({
    name: 'echo',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    handler: ({ text }) => ({ content: [{ type: 'text', text }] })
  })
  const response = await app.inject(${JSON.stringify(ECHO_CALL)})
  await app.close()
  const served = { statusCode: response.statusCode, contentType: response.headers['content-type'], body: response.body }`

/** After a plain import: which of the lazily loaded CommonJS packages are in the require cache. */
export const ESM_SCRIPT = `import { createRequire } from 'node:module'
import Fastify from 'fastify'
import mcpCancellation from 'fastify-mcp-cancellation'

const require = createRequire(import.meta.url)
const loaded = () => {
  const keys = Object.keys(require.cache)
  return {
    piscina: keys.some(key => /[\\\\/]node_modules[\\\\/]piscina[\\\\/]/.test(key)),
    ioredis: keys.some(key => /[\\\\/]node_modules[\\\\/]ioredis[\\\\/]/.test(key))
  }
}
const afterImport = loaded()
let ioredisInstalled = true
try { require.resolve('ioredis') } catch { ioredisInstalled = false }
// A redis URL needs the optional peer ioredis: without it, registration fails with a coded error.
const withoutIoredis = await (async () => {
  const app = Fastify()
  try {
    await app.register(mcpCancellation, { redis: 'redis://127.0.0.1:6379' })
    return { registered: true }
  } catch (error) {
    return { code: error.code, message: error.message }
  } finally {
    await app.close().catch(() => {})
  }
})()
await (async () => {${serveOneCall('Fastify', 'mcpCancellation')}
  console.log(JSON.stringify({ afterImport, afterCall: loaded(), ioredisInstalled, withoutIoredis, typeofPlugin: typeof mcpCancellation, ...served }))
})()
`

/** require(esm): Node >= 20.19 loads the ES module synchronously and returns its namespace. */
export const CJS_SCRIPT = `'use strict'
const Fastify = require('fastify')
const mcp = require('fastify-mcp-cancellation')

;(async () => {${serveOneCall('Fastify', 'mcp.default')}
  console.log(JSON.stringify({ exports: Object.keys(mcp).sort(), sameNamed: mcp.default === mcp.mcpCancellation, ...served }))
})().catch(error => { console.error(error); process.exitCode = 1 })
`

/**
 * Writes package.json (`"type": "module"`), tsconfig.json, consumer.ts, the README's first examples
 * (from `readme`, the repository's README.md), esm.js and cjs.cjs into `dir`.
 */
export function writeConsumerProject (dir: string, readme: string): void {
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }, null, 2))
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(CONSUMER_TSCONFIG, null, 2))
  writeFileSync(join(dir, 'consumer.ts'), CONSUMER_TS)
  for (const [file, heading] of Object.entries(README_EXAMPLES)) writeFileSync(join(dir, file), readmeExample(readme, heading))
  writeFileSync(join(dir, 'esm.js'), ESM_SCRIPT)
  writeFileSync(join(dir, 'cjs.cjs'), CJS_SCRIPT)
}

/** The JSON-RPC response (the message with an `id`) of a JSON or SSE answer. */
export function responseMessage (contentType: string | undefined, body: string): unknown {
  if (contentType?.includes('text/event-stream') === true) {
    const messages = body.split('\n').filter(line => line.startsWith('data:')).map(line => JSON.parse(line.slice(5)) as unknown)
    return messages.find(message => typeof message === 'object' && message !== null && 'id' in message)
  }
  return JSON.parse(body)
}
