/**
 * DNS-rebinding protection (DESIGN §5): a present Origin that is not allowed is a 403 (a JSON-RPC
 * error without id) before the body is read, before authentication, on every entry point; allowedOrigins
 * and allowedHosts take exact strings and RegExps.
 */
import t, { type Test } from 'tap'
import Fastify, { type FastifyInstance } from 'fastify'
import mcpCancellation, { type McpCancellationOptions } from '../../lib/index.js'
import { rawBody, rawExchange, rawStatus } from '../helpers/http.js'
import { bearer, jwtApp } from '../helpers/identity.js'
import { post, SERVER_INFO } from '../helpers/inject.js'
import { bareError, initializeBody, LEGACY, toolCall } from '../helpers/jsonrpc.js'
import { listenOn, portOf } from '../helpers/listen.js'
import { registerCounter, registerSleep, type Counter } from '../helpers/tools.js'

const EVIL = 'http://evil.example'

interface GuardedApp {
  app: FastifyInstance
  counter: Counter
  /** Requests whose body Fastify started to read (an application-level preParsing hook). */
  parsed: { count: number }
}

/** The plugin with `options` and `count`, plus an app-level preParsing hook that counts body reads. */
async function guardedApp (t: Test, options: McpCancellationOptions = {}, listen = false): Promise<GuardedApp> {
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  const parsed = { count: 0 }
  app.addHook('preParsing', async () => { parsed.count++ })
  await app.register(mcpCancellation, { serverInfo: SERVER_INFO, ...options })
  const counter = registerCounter(app)
  registerSleep(app)
  if (listen) await listenOn(t, app)
  else await app.ready()
  return { app, counter, parsed }
}

/** Asserts a 403 with a JSON-RPC error without id. */
function assertForbidden (t: Test, res: { statusCode: number, payload: string }, what: string): void {
  t.equal(res.statusCode, 403, `${what}: 403`)
  try {
    t.ok(Number.isInteger(bareError(res).code), `${what}: a JSON-RPC error without id`)
  } catch (e) {
    t.fail(`${what}: ${(e as Error).message}`)
  }
}

t.test('a disallowed Origin is 403 before the body is read: no parser, hook or handler runs', async t => {
  const { app, counter, parsed } = await guardedApp(t)
  assertForbidden(t, await post(app, toolCall(1, 'count'), { ...LEGACY, origin: EVIL }), 'tools/call from evil.example')
  t.equal(parsed.count, 0, 'the body was never read')
  t.equal(counter.calls, 0, 'the tool never ran')

  const local = await post(app, toolCall(1, 'count'), { ...LEGACY, origin: 'http://localhost:5173' })
  t.equal(local.statusCode, 200, 'the same request from an allowed origin runs')
  t.equal(parsed.count, 1, 'and its body is read')
  t.equal(counter.calls, 1)
})

t.test('a body over the limit from a disallowed Origin is 403, not 413', async t => {
  const { app, parsed } = await guardedApp(t)
  const huge = JSON.stringify(toolCall(1, 'count', { text: 'x'.repeat(2 * 1024 * 1024) }))
  assertForbidden(t, await post(app, huge, { ...LEGACY, origin: EVIL }), '2 MiB body from evil.example')
  t.equal(parsed.count, 0)
  t.equal((await post(app, huge, { ...LEGACY, origin: 'http://localhost' })).statusCode, 413, 'the same body from an allowed origin is 413')
})

t.test('the 403 is sent without waiting for the body', async t => {
  const { app, counter } = await guardedApp(t, {}, true)
  const port = portOf(app)
  const head = (origin: string): string =>
    `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: ${origin}\r\nContent-Type: application/json\r\n` +
    'Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: 900000\r\n\r\n{"jsonrpc":'
  const started = Date.now()
  const refused = await rawExchange(port, head(EVIL), 2000)
  t.equal(rawStatus(refused), 403, 'a 403 arrives though the 900 kB announced body never came')
  t.ok(Date.now() - started < 1500, 'promptly')
  t.match(rawBody(refused), /"jsonrpc":"2\.0"/, 'a JSON-RPC error body')
  const waiting = await rawExchange(port, head('http://localhost:3000'), 400)
  t.equal(waiting, '', 'control: from an allowed origin the server waits for the body')
  t.equal(counter.calls, 0)
})

t.test('Origin is checked before authentication', async t => {
  const { app, counter } = await jwtApp(t)
  assertForbidden(t, await post(app, toolCall(1, 'count'), { ...LEGACY, origin: EVIL }), 'no token')
  const token = app.jwt.sign({ sub: 'alice' })
  assertForbidden(t, await post(app, toolCall(1, 'count'), { ...LEGACY, origin: EVIL, ...bearer(token) }), 'a valid token does not lift the Origin check')
  t.equal(counter.calls, 0)
  t.equal((await post(app, toolCall(1, 'count'), { ...LEGACY, origin: 'http://127.0.0.1:8080', ...bearer(token) })).statusCode, 200, 'control')
})

t.test('a disallowed Origin can neither end a session nor cancel a request', async t => {
  const { app } = await guardedApp(t, { sessions: { secret: 'o'.repeat(32) } })
  const init = await post(app, initializeBody())
  const session = String(init.headers['mcp-session-id'])
  const withSession = { ...LEGACY, 'mcp-session-id': session }

  assertForbidden(t, await app.inject({ method: 'DELETE', url: '/mcp', headers: { ...withSession, origin: EVIL } }), 'DELETE')
  t.equal((await post(app, toolCall(1, 'count'), withSession)).statusCode, 200, 'the session survived the refused DELETE')

  const running = post(app, toolCall(7, 'sleep', { ms: 600 }), withSession)
  const scope = `session:${session}`
  for (let i = 0; i < 400 && !app.mcpCancellation.inFlight(7, scope); i++) await new Promise(resolve => setTimeout(resolve, 5))
  t.ok(app.mcpCancellation.inFlight(7, scope), 'sleep is in flight')
  const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7, reason: 'rebinding' } }
  assertForbidden(t, await post(app, cancel, { ...withSession, origin: EVIL }), 'notifications/cancelled')
  t.equal(app.mcpCancellation.rows, 0, 'nothing was recorded')
  const result = await running
  t.equal(result.statusCode, 200)
  t.match(result.payload, /slept 600/, 'the request ran to its end')
})

t.test('allowedOrigins: strings match exactly', async t => {
  const { app, counter } = await guardedApp(t, { allowedOrigins: ['https://app.example', 'http://localhost:5173'] })
  for (const origin of ['https://app.example', 'http://localhost:5173']) {
    t.equal((await post(app, toolCall(1, 'count'), { ...LEGACY, origin })).statusCode, 200, origin)
  }
  for (const origin of [
    'https://app.example/', 'https://app.example:443', 'HTTPS://APP.EXAMPLE', 'https://sub.app.example',
    'https://app.example.evil', 'https://app.exampl', 'http://localhost:5174', 'http://localhost', 'null'
  ]) {
    assertForbidden(t, await post(app, toolCall(1, 'count'), { ...LEGACY, origin }), origin)
  }
  t.equal(counter.calls, 2, 'only the two listed origins reached the tool')
})

t.test('allowedOrigins: RegExps are tested against the whole header value', async t => {
  const { app, counter } = await guardedApp(t, {
    allowedOrigins: [/^https:\/\/(?:[a-z0-9-]+\.)?example\.com$/, /^http:\/\/localhost:\d{4}$/i, 'https://exact.example']
  })
  for (const origin of ['https://example.com', 'https://a-b.example.com', 'http://localhost:8080', 'http://LOCALHOST:1234', 'https://exact.example']) {
    t.equal((await post(app, toolCall(1, 'count'), { ...LEGACY, origin })).statusCode, 200, origin)
  }
  for (const origin of ['https://example.com.evil.net', 'https://evilexample.com', 'http://example.com', 'https://a.b.example.com', 'http://localhost:80', 'http://localhost:80800']) {
    assertForbidden(t, await post(app, toolCall(1, 'count'), { ...LEGACY, origin }), origin)
  }
  t.equal(counter.calls, 5)
})

t.test('allowedHosts checks Host likewise, before the body', async t => {
  const { app, counter, parsed } = await guardedApp(t, { allowedHosts: ['mcp.example:8443', /^127\.0\.0\.1(?::\d+)?$/] }, true)
  for (const host of ['mcp.example:8443', '127.0.0.1', '127.0.0.1:3000']) {
    t.equal((await post(app, toolCall(1, 'count'), { ...LEGACY, host })).statusCode, 200, host)
  }
  for (const host of ['mcp.example', 'mcp.example:8443.evil', 'MCP.example:8443', '127.0.0.1.nip.io', 'evil.example']) {
    assertForbidden(t, await post(app, toolCall(1, 'count'), { ...LEGACY, host }), `Host ${host}`)
  }
  const reads = parsed.count
  const huge = JSON.stringify(toolCall(1, 'count', { text: 'x'.repeat(2 * 1024 * 1024) }))
  assertForbidden(t, await post(app, huge, { ...LEGACY, host: 'evil.example' }), 'a 2 MiB body to a bad Host')
  assertForbidden(t, await post(app, toolCall(1, 'count'), { ...LEGACY, host: 'evil.example', origin: 'http://localhost' }), 'an allowed Origin does not excuse a bad Host')
  assertForbidden(t, await post(app, toolCall(1, 'count'), { ...LEGACY, host: 'mcp.example:8443', origin: EVIL }), 'an allowed Host does not excuse a bad Origin')
  t.equal(parsed.count, reads, 'no refused request had its body read')

  const noHost = await rawExchange(portOf(app), 'POST /mcp HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}', 1000)
  t.equal(rawStatus(noHost), 403, 'an HTTP/1.0 request without Host is refused')
  t.equal(counter.calls, 3)
})
