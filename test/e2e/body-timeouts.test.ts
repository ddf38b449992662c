/**
 * Slow request bodies and headers (issue 19, item 11). Fastify's requestTimeout defaults to 0, so a
 * client trickling its body holds a connection for ever; Node enforces a request timeout only at each
 * connectionsCheckingInterval and never below headersTimeout. The demo bounds bodies and headers
 * (MCP_REQUEST_TIMEOUT_MS, made small here) without bounding how long a tool call may take to answer,
 * and the plugin warns at registration when the server has no request timeout.
 */
import { connect, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import Fastify, { type FastifyServerOptions } from 'fastify'
import mcpCancellation from '../../lib/index.js'
import { buildApp } from '../../example/app.js'
import { rawPost } from '../helpers/http.js'
import { sseMessages, toolCall } from '../helpers/jsonrpc.js'
import { listenDemo, listenPlugin } from '../helpers/listen.js'
import { captureLogs } from '../helpers/logs.js'
import { waitFor, within } from '../helpers/wait.js'

const SHORT = { MCP_REQUEST_TIMEOUT_MS: '1000' }
const TRICKLE_MS = 200

interface Trickle {
  /** Resolves with what the server wrote once it closes the connection. */
  closed: Promise<string>
  socket: Socket
}

/** A client that sends `head` (request line and headers, as far as it is given) then one byte every TRICKLE_MS. */
function trickle (t: Test, url: URL, head: string, body: string): Trickle {
  const socket = connect(Number(url.port), url.hostname)
  let received = ''
  const closed = new Promise<string>(resolve => { socket.on('close', () => { resolve(received) }) })
  socket.on('data', (chunk: Buffer) => { received += chunk.toString('latin1') })
  socket.on('error', () => {})
  socket.write(head)
  let sent = 0
  const timer = setInterval(() => {
    if (sent < body.length && !socket.destroyed) socket.write(body[sent++]!)
  }, TRICKLE_MS)
  socket.on('close', () => { clearInterval(timer) })
  t.teardown(() => {
    clearInterval(timer)
    socket.destroy()
  })
  return { closed, socket }
}

const BODY = JSON.stringify(toolCall(1, 'echo', { text: 'x'.repeat(60) }))
const HEAD = 'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n' +
  `MCP-Protocol-Version: 2025-11-25\r\nContent-Length: ${BODY.length}\r\n\r\n`

t.test('the demo closes a connection whose body trickles in, and one whose headers do', async t => {
  const server = await listenDemo(t, SHORT)
  // The whole body would take BODY.length × 200 ms (over 20 s); the test waits 5 s at most.
  const slowBodies = [0, 1, 2].map(() => trickle(t, server.url, HEAD, BODY))
  const slowHeaders = trickle(t, server.url, 'POST /mcp HTTP/1.1\r\n', 'Host: 127.0.0.1\r\nContent-Type: application/json\r\n')
  const bodies = await within(Promise.all(slowBodies.map(async client => await client.closed)), 5000, undefined)
  t.ok(bodies !== undefined, 'every slow body\'s connection is closed by the server')
  for (const received of bodies ?? []) t.match(received, /^HTTP\/1\.1 408 Request Timeout/, 'with 408 Request Timeout')
  t.ok(await within(slowHeaders.closed, 5000, undefined) !== undefined, 'and so is the slow headers\' connection')
  t.equal(server.probe.calls.length, 0, 'no handler ran')
})

t.test('control: a requestTimeout alone is applied no sooner than headersTimeout (60 s by default)', async t => {
  const server = await listenPlugin(t, {}, { requestTimeout: 1000 })
  const client = trickle(t, server.url, HEAD, BODY)
  t.equal(await within(client.closed, 3000, 'still open'), 'still open', 'three times the request timeout later, the slow body\'s connection is still open')
})

t.test('a tool call answering later than the body timeout still completes, as JSON and as a stream', async t => {
  const server = await listenDemo(t, SHORT)
  // JSON mode writes nothing on the socket until the result: 3 s of silence, three times the body timeout.
  const json = await within(rawPost(server.url, toolCall(1, 'sleep', { ms: 3000 })), 8000, undefined)
  t.equal(json?.status, 200, 'the silent JSON call is answered')
  t.match(json?.text, /slept 3000/, 'with its result')
  const sse = await within(rawPost(server.url, toolCall(2, 'sleep', { ms: 3000, stepMs: 500 }, 'p')), 8000, undefined)
  t.equal(sse?.status, 200, 'the streamed call is answered')
  t.match(JSON.stringify(sseMessages(sse?.text ?? '').at(-1)), /slept 3000/, 'its stream ends with the result')
})

t.test('control: a socket inactivity timeout as short as the body timeout would cut the silent call', async t => {
  const server = await listenDemo(t, SHORT, { connectionTimeout: 1000 })
  const json = await within(rawPost(server.url, toolCall(1, 'probe', { ms: 3000, tag: 'silent' })).then(() => 'answered', () => 'cut'), 8000, 'hung')
  t.equal(json, 'cut', 'the connection is destroyed while the tool works')
  t.ok(await waitFor(() => server.probe.tagged('silent')[0]?.source === 'disconnect'), 'which the plugin takes for a disconnect: the call is cancelled')
})

const WARNING = /^fastify-mcp-cancellation: the server has no request timeout/

async function timeoutWarnings (t: Test, fastifyOptions: FastifyServerOptions): Promise<string[]> {
  const logs = captureLogs('warn')
  const app = Fastify({ ...fastifyOptions, ...logs.options })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, { serverInfo: { name: 'body-timeouts', version: '1.0.0' } })
  await app.ready()
  return logs.lines().filter(line => line.level === 40 && WARNING.test(String(line.msg))).map(line => String(line.msg))
}

t.test('the plugin warns once at registration when the server has no request timeout', async t => {
  const warned = await timeoutWarnings(t, {})
  t.equal(warned.length, 1, 'Fastify\'s default (requestTimeout 0): one warning')
  t.match(warned[0], /requestTimeout/, 'naming what to set')
  t.match(warned[0], /headersTimeout/, 'and what Node needs with it')
  t.same(await timeoutWarnings(t, { requestTimeout: 30_000 }), [], 'requestTimeout set: nothing')

  const logs = captureLogs('warn')
  const demo = await buildApp({}, logs.options)
  t.teardown(() => demo.close())
  await demo.ready()
  t.same(logs.lines().filter(line => WARNING.test(String(line.msg))), [], 'the demo sets one: nothing')
})
