/**
 * The legacy era's standalone GET stream (2025-11-25 transports, "Listening for Messages from the
 * Server"), on a real socket: with sessions, the official SDK 1.x client opens it by itself after
 * `notifications/initialized` and hears list changes and the updates of the resources it subscribed
 * to; without sessions GET is a 405 and nothing claims to deliver. Bad input (no, forged, expired or
 * revoked session, wrong Accept or version, a second stream, bad subscriptions, too many of them) gets
 * a precise 4xx or JSON-RPC error, and DELETE ends the session's stream.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  PromptListChangedNotificationSchema, ResourceListChangedNotificationSchema, ResourceUpdatedNotificationSchema, ToolListChangedNotificationSchema
} from '@modelcontextprotocol/sdk/types.js'
import type { FastifyInstance } from 'fastify'
import type { McpCancellationOptions } from '../../lib/index.js'
import { TOUCHES_URI } from '../../example/demo-tools.js'
import { EventStream, newSession, sessionStreamHeaders } from '../helpers/event-stream.js'
import { rawPost } from '../helpers/http.js'
import { SESSION_SECRET } from '../helpers/identity.js'
import { DEFAULT_HEADERS, hasStackTrace, LEGACY, modernHeaders, modernMeta, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenDemo, listenPlugin } from '../helpers/listen.js'
import { metricValue } from '../helpers/metrics.js'
import type { Teardown } from '../helpers/teardown.js'
import { waitFor } from '../helpers/wait.js'

/** Identical events closer than the default `events.coalesceMs` (50 ms) leave once: waiting this long lets one pending leave. */
const PAST_COALESCING_MS = 200
const OTHER_URI = 'demo://other'

/** A resource of the bare plugin's servers, so that they offer `resources.subscribe`. */
function registerResource (app: FastifyInstance): void {
  app.mcp.resource({ uri: TOUCHES_URI, name: 'touches', handler: uri => ({ contents: [{ uri, text: 'touched' }] }) })
}

/** The bare plugin with sessions, `options` merged in, and a resource. */
async function sessionServer (t: Teardown, options: McpCancellationOptions = {}): Promise<{ app: FastifyInstance, url: URL }> {
  const { sessions, ...rest } = options
  return await listenPlugin(t, { sessions: { secret: SESSION_SECRET, ...(typeof sessions === 'object' ? sessions : {}) }, ...rest }, {}, registerResource)
}

/** A GET over fetch that is answered at once (an error): its status, headers and JSON body. */
async function refusedGet (url: URL, headers: Record<string, string>): Promise<{ status: number, headers: Headers, body: JsonRpcMessage, text: string }> {
  const response = await fetch(url, { headers })
  const text = await response.text()
  return { status: response.status, headers: response.headers, body: JSON.parse(text) as JsonRpcMessage, text }
}

/** The session's stream, once its response head says 200 (throws otherwise, with what came instead). */
async function openStream (t: Teardown, url: URL, session: string): Promise<EventStream> {
  const stream = EventStream.get(url, sessionStreamHeaders(session))
  t.teardown(() => { stream.close() })
  const head = await stream.head
  if (head?.status !== 200) {
    await stream.ended
    throw new Error(`GET gave HTTP ${String(head?.status)}: ${stream.text()}`)
  }
  return stream
}

/** A legacy JSON-RPC request of `session`: the HTTP status and the JSON-RPC message. */
async function sessionRequest (url: URL, session: string, method: string, params: Record<string, unknown>, id: string | number = method): Promise<{ status: number, body: JsonRpcMessage, text: string }> {
  const response = await rawPost(url, { jsonrpc: '2.0', id, method, params }, { 'mcp-session-id': session })
  return { status: response.status, body: JSON.parse(response.text) as JsonRpcMessage, text: response.text }
}

/** Resolves true once the node holds `count` listening streams of `era` (the `mcp_listeners` gauge). */
async function listening (url: URL, era: 'legacy' | 'modern', count: number): Promise<boolean> {
  return await waitFor(async () => await metricValue(url, 'mcp_listeners', { era }) === count, 5000, 20)
}

t.test('with sessions: the SDK 1.x client hears list changes and its subscribed resource on its GET stream', async t => {
  // A prompt from the start, so that prompts (and their listChanged) are offered.
  const demo = await listenDemo(t, { MCP_SESSION_SECRET: SESSION_SECRET }, {}, app => {
    app.mcp.prompt({ name: 'greeting', handler: () => ({ messages: [{ role: 'user', content: { type: 'text', text: 'hello' } }] }) })
  })
  const client = new LegacyClient({ name: 'session-streams', version: '1.0.0' })
  const heard: Record<string, unknown[]> = { tools: [], prompts: [], resources: [], updated: [] }
  client.setNotificationHandler(ToolListChangedNotificationSchema, notification => { heard.tools!.push(notification.params) })
  client.setNotificationHandler(PromptListChangedNotificationSchema, notification => { heard.prompts!.push(notification.params) })
  client.setNotificationHandler(ResourceListChangedNotificationSchema, notification => { heard.resources!.push(notification.params) })
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, notification => { heard.updated!.push(notification.params.uri) })
  t.teardown(() => client.close())
  await client.connect(new LegacyTransport(demo.url))
  t.ok(await listening(demo.url, 'legacy', 1), 'the client opened its GET stream after initialize')

  t.test('initialize advertises listChanged and subscribe', async t => {
    const capabilities = client.getServerCapabilities()
    t.same(capabilities?.tools, { listChanged: true }, 'tools.listChanged')
    t.same(capabilities?.prompts, { listChanged: true }, 'prompts.listChanged')
    t.same(capabilities?.resources, { subscribe: true, listChanged: true }, 'resources.subscribe and resources.listChanged')
  })

  t.test('a tool added on the running server: notifications/tools/list_changed', async t => {
    const handle = demo.app.mcp.tool({ name: 'added_later', description: 'Registered after the server started', handler: () => ({ content: [] }) })
    t.ok(await waitFor(() => heard.tools!.length === 1, 5000), 'tools/list_changed arrived')
    t.ok((await client.listTools()).tools.some(tool => tool.name === 'added_later'), 're-listing shows the new tool')
    t.equal(handle.remove(), true, 'the handle removes it')
    t.ok(await waitFor(() => heard.tools!.length === 2, 5000), 'and its removal is announced as well')
    t.notOk((await client.listTools()).tools.some(tool => tool.name === 'added_later'), 'gone from tools/list')
  })

  t.test('a prompt added: notifications/prompts/list_changed', async t => {
    demo.app.mcp.prompt({ name: 'added_later', handler: () => ({ messages: [] }) })
    t.ok(await waitFor(() => heard.prompts!.length === 1, 5000), 'prompts/list_changed arrived')
  })

  t.test('a resource added: notifications/resources/list_changed', async t => {
    demo.app.mcp.resource({ uri: 'demo://added-later', name: 'added later', handler: uri => ({ contents: [{ uri, text: 'later' }] }) })
    t.ok(await waitFor(() => heard.resources!.length === 1, 5000), 'resources/list_changed arrived')
  })

  t.test('resources/subscribe, then touch_resource: notifications/resources/updated; none after resources/unsubscribe', async t => {
    t.same(await client.subscribeResource({ uri: TOUCHES_URI }), {}, 'subscribe answers {}')
    t.same(await client.subscribeResource({ uri: OTHER_URI }), {}, 'a second subscription')
    await client.callTool({ name: 'touch_resource', arguments: { uri: TOUCHES_URI } })
    t.ok(await waitFor(() => heard.updated!.includes(TOUCHES_URI), 5000), `resources/updated ${TOUCHES_URI} arrived`, { heard: heard.updated })

    t.same(await client.unsubscribeResource({ uri: TOUCHES_URI }), {}, 'unsubscribe answers {}')
    const before = heard.updated!.length
    await client.callTool({ name: 'touch_resource', arguments: { uri: TOUCHES_URI } })
    await sleep(PAST_COALESCING_MS)
    // The stream delivers in order: once the later update of the other resource is here, the first one never will be.
    await client.callTool({ name: 'touch_resource', arguments: { uri: OTHER_URI } })
    t.ok(await waitFor(() => heard.updated!.includes(OTHER_URI), 5000), 'the still subscribed resource\'s update arrived')
    t.same(heard.updated!.slice(before), [OTHER_URI], `nothing for ${TOUCHES_URI} after unsubscribing`)
  })
})

t.test('without sessions: GET is a 405, nothing claims to deliver, resources/subscribe is acknowledged', async t => {
  const demo = await listenDemo(t, {})
  const get = await refusedGet(demo.url, { accept: 'text/event-stream', ...LEGACY })
  t.equal(get.status, 405, 'GET /mcp is 405')
  t.equal(get.headers.get('allow'), 'POST', 'Allow: POST')
  t.equal(typeof get.body.error?.code, 'number', 'with a JSON-RPC error')

  const client = new LegacyClient({ name: 'session-streams', version: '1.0.0' })
  t.teardown(() => client.close())
  await client.connect(new LegacyTransport(demo.url))
  const capabilities = client.getServerCapabilities()
  t.same(capabilities?.tools, {}, 'tools without listChanged')
  t.same(capabilities?.resources, {}, 'resources without subscribe or listChanged')
  t.same(await client.subscribeResource({ uri: TOUCHES_URI }), {}, 'resources/subscribe is still acknowledged {} (there is no stream to deliver on)')
  t.same(await client.unsubscribeResource({ uri: TOUCHES_URI }), {}, 'and so is resources/unsubscribe')
})

t.test('the GET stream\'s response head comes before any event (not with the first keep-alive comment)', async t => {
  const { url } = await listenPlugin(t, { sessions: { secret: SESSION_SECRET }, keepAliveMs: 60_000 }, {}, registerResource)
  const stream = EventStream.get(url, sessionStreamHeaders(await newSession(url)))
  t.teardown(() => { stream.close() })
  const head = await Promise.race([stream.head, sleep(5000, 'no head' as const)])
  t.not(head, 'no head', 'the status and headers arrived while no event was sent')
  t.equal(head === 'no head' ? undefined : head?.status, 200, '200')
})

t.test('GET with bad input: a precise 4xx and a JSON-RPC error', async t => {
  const server = await sessionServer(t)
  const { url } = server
  const refusals: Array<[string, Record<string, string>, number]> = [
    ['no Mcp-Session-Id', { accept: 'text/event-stream', ...LEGACY }, 400],
    ['a forged session', sessionStreamHeaders('v1.forged.session.id'), 404],
    ['Accept: application/json', { ...sessionStreamHeaders(await newSession(url)), accept: 'application/json' }, 406],
    ['an unsupported MCP-Protocol-Version', { ...sessionStreamHeaders(await newSession(url)), 'mcp-protocol-version': '1999-01-01' }, 400],
    ['MCP-Protocol-Version: 2026-07-28 (the modern era has no GET)', { ...sessionStreamHeaders(await newSession(url)), 'mcp-protocol-version': '2026-07-28' }, 405]
  ]
  for (const [what, headers, status] of refusals) {
    const answer = await refusedGet(url, headers)
    t.equal(answer.status, status, `${what}: ${status}`)
    t.equal(typeof answer.body.error?.code, 'number', `${what}: a JSON-RPC error (${answer.text})`)
    t.notOk(hasStackTrace(answer.text), `${what}: no stack trace`)
  }

  t.test('a revoked session (DELETE first): 404', async t => {
    const session = await newSession(url)
    t.equal((await fetch(url, { method: 'DELETE', headers: { ...LEGACY, 'mcp-session-id': session } })).status, 204, 'DELETE ends the session')
    const answer = await refusedGet(url, sessionStreamHeaders(session))
    t.equal(answer.status, 404, '404')
    t.equal(answer.body.error?.message, 'Session not found')
  })

  t.test('an expired session (sessions.ttlMs): its open stream ends, a new GET is 404', async t => {
    const short = await sessionServer(t, { sessions: { secret: SESSION_SECRET, ttlMs: 300 } })
    const session = await newSession(short.url)
    const stream = await openStream(t, short.url, session)
    t.not(await Promise.race([stream.ended, sleep(5000, 'still open' as const)]), 'still open', 'the stream ended with its session')
    const answer = await refusedGet(short.url, sessionStreamHeaders(session))
    t.equal(answer.status, 404, 'a GET after the expiry: 404')
    t.equal(answer.body.error?.message, 'Session not found')
  })

  t.test('maxStreamLifetimeMs ends a session\'s stream (the server finishes it), and the session opens another', async t => {
    const short = await sessionServer(t, { sessions: { secret: SESSION_SECRET }, maxStreamLifetimeMs: 300 })
    const session = await newSession(short.url)
    const stream = await openStream(t, short.url, session)
    const ended = await Promise.race([stream.ended, sleep(5000, 'still open' as const)])
    t.same(ended, { complete: true }, 'the server finished the response at the lifetime (not a cut connection)')
    t.ok(await listening(short.url, 'legacy', 0), 'mcp_listeners{era="legacy"} back to 0')
    const again = await openStream(t, short.url, session)
    t.equal((await again.head)?.status, 200, 'the session is still valid: a new GET is served')
    again.close()
  })

  t.test('a second GET while the session\'s stream is open: 409; once it closed, a new GET is served', async t => {
    const session = await newSession(url)
    const first = await openStream(t, url, session)
    t.match(String((await first.head)?.headers['content-type']), /^text\/event-stream/, 'the first GET is an event stream')
    const second = await refusedGet(url, sessionStreamHeaders(session))
    t.equal(second.status, 409, 'the second GET is 409')
    t.match(second.body.error, { code: -32000, message: /Only one SSE stream is allowed per session/ }, 'with a JSON-RPC error')
    first.close()
    let third: EventStream | undefined
    const served = await waitFor(async () => {
      const attempt = EventStream.get(url, sessionStreamHeaders(session))
      if ((await attempt.head)?.status === 200) third = attempt
      else attempt.close()
      return third !== undefined
    }, 5000, 50)
    t.teardown(() => { third?.close() })
    t.ok(served, 'after the first stream closed, a new GET opens the stream')
  })
})

t.test('resources/subscribe with bad input, and the per-session bound', async t => {
  // A stream a subtest closed pauses for its resume window (a listener still): a short one, so that the
  // listeners a subtest counts are its own.
  const server = await sessionServer(t, { events: { maxSubscriptionsPerSession: 3 }, resumability: { windowMs: 300 } })
  const { app, url } = server
  const session = await newSession(url)

  t.test('a uri that is no string, empty or over 4096 bytes: -32602', async t => {
    for (const [what, uri] of [['a number', 42], ['an object', { href: TOUCHES_URI }], ['empty', ''], ['4097 bytes', `demo://${'x'.repeat(4090)}`]] as const) {
      const answer = await sessionRequest(url, session, 'resources/subscribe', { uri })
      t.ok(answer.status < 500, `${what}: no 5xx (${answer.status})`)
      t.equal(answer.body.error?.code, -32602, `${what}: -32602`, { body: answer.text })
    }
    const sessionless = await rawPost(url, { jsonrpc: '2.0', id: 1, method: 'resources/subscribe', params: { uri: TOUCHES_URI } })
    t.same(JSON.parse(sessionless.text).result, {}, 'without a session header (sessions not required): acknowledged {}, nothing kept')
    const missing = await sessionRequest(url, session, 'resources/subscribe', {})
    t.equal(missing.body.error?.code, -32602, 'no uri: -32602')
    const atTheBound = await sessionRequest(url, session, 'resources/subscribe', { uri: `demo://${'x'.repeat(4089)}` })
    t.same(atTheBound.body.result, {}, 'a uri of exactly 4096 bytes is accepted')
    await sessionRequest(url, session, 'resources/unsubscribe', { uri: `demo://${'x'.repeat(4089)}` })
  })

  t.test('a 4th subscription over maxSubscriptionsPerSession 3: a JSON-RPC error; the first 3 are still delivered', async t => {
    const stream = await openStream(t, url, session)
    const uris = ['demo://one', 'demo://two', 'demo://three']
    for (const uri of uris) t.same((await sessionRequest(url, session, 'resources/subscribe', { uri })).body.result, {}, `${uri} subscribed`)
    const fourth = await sessionRequest(url, session, 'resources/subscribe', { uri: 'demo://four' })
    t.ok(fourth.status < 500, `no 5xx (${fourth.status})`)
    t.match(fourth.body.error, { code: -32603, message: /maxSubscriptionsPerSession/ }, 'the 4th is refused, naming the bound')
    t.same((await sessionRequest(url, session, 'resources/subscribe', { uri: 'demo://one' })).body.result, {}, 'subscribing again to one it has is still {}')
    for (const uri of [...uris, 'demo://four']) app.mcp.notify.resourceUpdated(uri)
    t.ok(await stream.received('notifications/resources/updated', 3), 'three updates arrived')
    // The fourth was published last: had it been kept, it would have arrived by now too.
    app.mcp.notify.resourceUpdated('demo://three')
    await sleep(PAST_COALESCING_MS)
    app.mcp.notify.resourceUpdated('demo://one')
    t.ok(await stream.received('notifications/resources/updated', 4), 'a later update arrived')
    const updated = stream.notifications('notifications/resources/updated').map(message => message.params?.uri as string)
    t.same(updated.slice(0, 3).sort(), [...uris].sort(), 'the three subscribed resources, each once')
    t.notOk(updated.includes('demo://four'), 'nothing for the refused 4th')
  })

  t.test('DELETE of the session ends its open stream, and its subscriptions go with it', async t => {
    const other = await newSession(url)
    const stream = await openStream(t, url, other)
    t.same((await sessionRequest(url, other, 'resources/subscribe', { uri: 'demo://deleted' })).body.result, {}, 'subscribed')
    t.ok(await listening(url, 'legacy', 1), 'the node holds the session\'s stream')
    t.equal((await fetch(url, { method: 'DELETE', headers: { ...LEGACY, 'mcp-session-id': other } })).status, 204, 'DELETE answers 204')
    const ended = await Promise.race([stream.ended, sleep(5000, 'still open' as const)])
    t.not(ended, 'still open', 'the stream closed')
    app.mcp.notify.resourceUpdated('demo://deleted')
    await sleep(PAST_COALESCING_MS)
    t.same(stream.notifications('notifications/resources/updated'), [], 'nothing was delivered on it')
    t.ok(await listening(url, 'legacy', 0), 'and holds it no more')
    t.equal((await sessionRequest(url, other, 'resources/subscribe', { uri: 'demo://deleted' })).status, 404, 'the session cannot subscribe again')
  })
})

t.test('events.maxListenersPerScope 1: a session is its own scope; a modern scope gets 429 on its second listen', async t => {
  const server = await sessionServer(t, { events: { maxListenersPerScope: 1 } })
  const { url } = server
  const first = await newSession(url)
  await openStream(t, url, first)
  await openStream(t, url, await newSession(url))
  t.pass('two sessions from one address each hold their stream (the session is the scope)')
  t.equal((await refusedGet(url, sessionStreamHeaders(first))).status, 409, 'a second stream of one session is the 409 of the session, not a 429')

  const listen = (id: string, accept = DEFAULT_HEADERS.accept!): EventStream => {
    const headers: Record<string, string> = { ...DEFAULT_HEADERS, accept }
    for (const [key, value] of Object.entries(modernHeaders('subscriptions/listen'))) if (value !== undefined) headers[key] = value
    const stream = EventStream.post(url, { jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { _meta: modernMeta(), notifications: { resourcesListChanged: true } } }, headers)
    t.teardown(() => { stream.close() })
    return stream
  }
  const held = listen('listen-1')
  t.ok(await held.received('notifications/subscriptions/acknowledged'), 'the address\'s first listen is acknowledged')
  const refused = listen('listen-2')
  const head = await refused.head
  await refused.ended
  t.equal(head?.status, 429, 'its second listen is 429')
  t.equal(head?.headers['retry-after'], '1', 'with Retry-After')
  const body = JSON.parse(refused.text()) as JsonRpcMessage
  t.match(body, { id: 'listen-2', error: { code: -32603, message: /maxListenersPerScope/ } }, 'and a JSON-RPC error naming the bound')
  const streamOnly = listen('listen-sse', 'text/event-stream')
  const streamOnlyHead = await streamOnly.head
  await streamOnly.ended
  t.equal(streamOnlyHead?.status, 429, 'a client accepting only text/event-stream is refused with the 429 as well', {
    contentType: streamOnlyHead?.headers['content-type'], body: streamOnly.text()
  })
  t.equal(streamOnlyHead?.headers['retry-after'], '1', 'with Retry-After')
  held.close()
  let again: EventStream | undefined
  t.ok(await waitFor(async () => {
    const attempt = listen('listen-3')
    if ((await attempt.head)?.status === 200) again = attempt
    else attempt.close()
    return again !== undefined
  }, 5000, 50), 'once the first closed, the address listens again')
})
