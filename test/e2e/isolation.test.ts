/**
 * Scope isolation over real HTTP (DESIGN §4–§5): a `notifications/cancelled` only ever touches a
 * request in flight in the caller's own scope — principal, address bucket (/64 for IPv6, IPv4-mapped
 * folded into IPv4, `trustProxy` honoured) or signed session — and two requests reusing an id in one
 * scope are tracked apart.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { keepAliveClient, rawPost, type RawResponse } from '../helpers/http.js'
import { cancelNotification, toolCall, type JsonRpcMessage } from '../helpers/jsonrpc.js'
import { listenPlugin } from '../helpers/listen.js'
import { texts } from '../helpers/mcp-results.js'
import { waitFor, within } from '../helpers/wait.js'

const LOOPBACK = 'ip:127.0.0.1'

function resultText (response: RawResponse | undefined): string[] {
  if (response === undefined || response.status !== 200) return []
  return texts((JSON.parse(response.text) as JsonRpcMessage).result?.content)
}

/** Asserts a call ended as a cancelled JSON-mode call does: 202, no body, no result. */
function assertCancelled (t: Tap, response: RawResponse | undefined, who: string): void {
  t.equal(response?.status, 202, `${who}: the call ends with 202`)
  t.equal(response?.text, '', `${who}: and no JSON-RPC result`)
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

async function waitInFlight (app: FastifyInstance, pairs: Array<[string | number, string]>): Promise<boolean> {
  return await waitFor(() => pairs.every(([id, scope]) => app.mcpCancellation.inFlight(id, scope)))
}

const xff = (address: string): Record<string, string> => ({ 'x-forwarded-for': address })

t.test('(a) principals: alice cancelling id 1 stops only her own request', async t => {
  const server = await listenPlugin(t, { auth: { principal: request => request.headers['x-user'] } })
  const alice = rawPost(server.url, toolCall(1, 'sleep', { ms: 5000 }), { 'x-user': 'alice' })
  const bob = rawPost(server.url, toolCall(1, 'sleep', { ms: 1200 }), { 'x-user': 'bob' })
  t.ok(await waitInFlight(server.app, [[1, 'principal:alice'], [1, 'principal:bob']]), 'both run under id 1, each in its principal\'s scope')

  const cancel = await rawPost(server.url, cancelNotification(1, 'alice stops'), { 'x-user': 'alice' })
  t.equal(cancel.status, 202)
  assertCancelled(t, await within(alice, 1000, undefined), 'alice')
  t.ok(server.app.mcpCancellation.inFlight(1, 'principal:bob'), 'bob\'s request is still running')
  const bobResponse = await within(bob, 3000, undefined)
  t.equal(bobResponse?.status, 200)
  t.same(resultText(bobResponse), ['slept 1200'], 'bob\'s sleep ran to the end')

  const anonymous = await rawPost(server.url, cancelNotification(1))
  t.equal(anonymous.status, 401, 'an anonymous cancel is refused when auth is required')
  t.equal(server.app.mcpCancellation.rows, 0)
})

t.test('(b) IPv6: scopes are /64s, so one /64 cannot cancel another\'s id 1', async t => {
  const server = await listenPlugin(t, {}, { trustProxy: true })
  const a = rawPost(server.url, toolCall(1, 'sleep', { ms: 5000 }), xff('2001:db8:aaaa:1::10'))
  const b = rawPost(server.url, toolCall(1, 'sleep', { ms: 1200 }), xff('2001:db8:aaaa:2::10'))
  t.ok(await waitInFlight(server.app, [[1, 'ip:2001:db8:aaaa:1::/64'], [1, 'ip:2001:db8:aaaa:2::/64']]), 'each /64 is its own scope')

  const stranger = await rawPost(server.url, cancelNotification(1), xff('2001:db8:aaaa:3::10'))
  t.equal(stranger.status, 202, 'a third /64 is answered 202')
  t.equal(server.app.mcpCancellation.rows, 0, 'and cancels nothing')

  // Another address of A's /64 (a host usually owns the whole /64).
  const cancel = await rawPost(server.url, cancelNotification(1), xff('2001:db8:aaaa:1:ffff:ffff:ffff:ffff'))
  t.equal(cancel.status, 202)
  assertCancelled(t, await within(a, 1000, undefined), 'A')
  t.ok(server.app.mcpCancellation.inFlight(1, 'ip:2001:db8:aaaa:2::/64'), 'B is still running')
  t.same(resultText(await within(b, 3000, undefined)), ['slept 1200'], 'B\'s sleep ran to the end')
})

t.test('(c) IPv4 and IPv4-mapped IPv6 of one address are one scope', async t => {
  const server = await listenPlugin(t, {}, { trustProxy: true })
  for (const [runFrom, cancelFrom] of [['203.0.113.5', '::ffff:203.0.113.5'], ['::ffff:203.0.113.5', '203.0.113.5']]) {
    const call = rawPost(server.url, toolCall(1, 'sleep', { ms: 5000 }), xff(runFrom!))
    t.ok(await waitInFlight(server.app, [[1, 'ip:203.0.113.5']]), `a request from ${runFrom} is in scope ip:203.0.113.5`)
    const cancel = await rawPost(server.url, cancelNotification(1), xff(cancelFrom!))
    t.equal(cancel.status, 202)
    assertCancelled(t, await within(call, 1000, undefined), `cancelled from ${cancelFrom}`)
  }
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0), 'nothing left in flight')
})

t.test('(d) an attacker looping requestId 1..1000 from its own scope cancels nothing', async t => {
  const server = await listenPlugin(t, {}, { trustProxy: true })
  const victim = xff('198.51.100.7')
  const attacker = xff('203.0.113.66')
  const victimScope = 'ip:198.51.100.7'
  const ids = [1, 2, 3, 'job-1']
  const calls = ids.map(id => rawPost(server.url, toolCall(id, 'probe', { ms: 20_000, tag: `victim-${id}` }), victim))
  t.ok(await waitInFlight(server.app, ids.map(id => [id, victimScope])), 'the victim\'s requests run')

  const statuses = new Map<number, number>()
  const attack = keepAliveClient(t, server.url)
  for (const id of [...Array.from({ length: 1000 }, (_, i) => i + 1), 'job-1']) {
    const response = await attack(cancelNotification(id, 'gotcha'), attacker)
    statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
  }
  t.same(Object.fromEntries(statuses), { 202: 1001 }, 'every attempt is answered 202 (no 429: nothing was recorded)')
  t.equal(server.app.mcpCancellation.rows, 0, 'no cancellation row was written')
  for (const id of ids) {
    t.ok(server.app.mcpCancellation.inFlight(id, victimScope), `the victim's ${JSON.stringify(id)} is still running`)
    t.equal(server.probe.tagged(`victim-${id}`)[0]?.abortedAt, undefined, `and its signal never fired (${JSON.stringify(id)})`)
  }

  // The victim can still cancel its own work.
  for (const id of ids) t.equal((await rawPost(server.url, cancelNotification(id, 'mine'), victim)).status, 202)
  const responses = await within(Promise.all(calls), 2000, undefined)
  t.same(responses?.map(r => r.status), [202, 202, 202, 202], 'the victim\'s own cancels stop its requests')
  t.same(server.probe.calls.map(call => [call.source, call.reason]), ids.map(() => ['client', 'mine']))
})

/** `initialize` over raw HTTP; returns the minted `Mcp-Session-Id`. */
async function openSession (t: Tap, url: URL): Promise<string> {
  const response = await rawPost(url, {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'isolation', version: '1.0.0' } }
  })
  t.equal(response.status, 200, 'initialize succeeds')
  const id = response.headers.get('mcp-session-id')
  t.ok(id, 'and mints a session')
  return id ?? ''
}

/** The session id with one character changed to another valid one. */
function forge (session: string): string {
  const index = session.length - 10
  const c = session[index]
  return session.slice(0, index) + (c === 'A' ? 'B' : 'A') + session.slice(index + 1)
}

t.test('(e) two sessions behind one address: each cancels only its own id 1', async t => {
  const server = await listenPlugin(t, { sessions: { secret: 'x'.repeat(32) } })
  const a = await openSession(t, server.url)
  const b = await openSession(t, server.url)
  t.not(a, b, 'two distinct sessions')
  const callA = rawPost(server.url, toolCall(1, 'probe', { ms: 5000, tag: 'a' }), { 'mcp-session-id': a })
  const callB = rawPost(server.url, toolCall(1, 'probe', { ms: 5000, tag: 'b' }), { 'mcp-session-id': b })
  t.ok(await waitInFlight(server.app, [[1, `session:${a}`], [1, `session:${b}`]]), 'both run under id 1, each in its session\'s scope')

  const forged = forge(a)
  t.not(forged, a)
  const forgedCancel = await rawPost(server.url, cancelNotification(1), { 'mcp-session-id': forged })
  t.equal(forgedCancel.status, 404, 'a forged session (one character flipped) gets 404')
  const forgedCall = await rawPost(server.url, toolCall(2, 'sleep', { ms: 0 }), { 'mcp-session-id': forged })
  t.equal(forgedCall.status, 404, 'on requests too')
  const anonymous = await rawPost(server.url, cancelNotification(1))
  t.equal(anonymous.status, 202, 'a cancel without a session is accepted')
  t.equal(server.app.mcpCancellation.rows, 0, 'but belongs to the address scope and cancels nothing')
  t.ok(server.app.mcpCancellation.inFlight(1, `session:${a}`) && server.app.mcpCancellation.inFlight(1, `session:${b}`), 'both still run')

  t.equal((await rawPost(server.url, cancelNotification(1, 'a stops'), { 'mcp-session-id': a })).status, 202)
  assertCancelled(t, await within(callA, 1000, undefined), 'session a')
  t.equal(server.probe.tagged('a')[0]?.reason, 'a stops')
  t.ok(server.app.mcpCancellation.inFlight(1, `session:${b}`), 'session b\'s id 1 is still running')
  t.equal(server.probe.tagged('b')[0]?.abortedAt, undefined, 'and was never signalled')

  t.equal((await rawPost(server.url, cancelNotification(1, 'b stops'), { 'mcp-session-id': b })).status, 202)
  assertCancelled(t, await within(callB, 1000, undefined), 'session b')
  t.equal(server.probe.tagged('b')[0]?.reason, 'b stops')
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0 && server.app.mcpCancellation.rows === 0), 'nothing left')
})

t.test('(f) two requests with one id in one scope are tracked apart', async t => {
  const server = await listenPlugin(t)
  const short = rawPost(server.url, toolCall(1, 'sleep', { ms: 300 }))
  const long = rawPost(server.url, toolCall(1, 'probe', { ms: 5000, tag: 'long' }))
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 2), 'both are in flight')
  const shortResponse = await within(short, 2000, undefined)
  t.same(resultText(shortResponse), ['slept 300'], 'the first completes normally')
  t.ok(server.app.mcpCancellation.inFlight(1, LOOPBACK), 'completing one leaves the other in flight')
  t.equal(server.app.mcpCancellation.inFlightRows, 1)
  t.equal(server.probe.tagged('long')[0]?.abortedAt, undefined)

  t.equal((await rawPost(server.url, cancelNotification(1, 'stop the other'))).status, 202)
  assertCancelled(t, await within(long, 1000, undefined), 'the remaining one')
  t.equal(server.probe.tagged('long')[0]?.reason, 'stop the other')
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0 && server.app.mcpCancellation.rows === 0), 'nothing left')
})

t.test('(f) a cancel racing completion leaves no row', async t => {
  const server = await listenPlugin(t)
  const outcomes = { completed: 0, cancelled: 0 }
  for (let i = 0; i < 24; i++) {
    const call = rawPost(server.url, toolCall(1, 'sleep', { ms: 100, stepMs: 10 }))
    await new Promise(resolve => setTimeout(resolve, 70 + i * 3))
    const [response, cancel] = await Promise.all([call, rawPost(server.url, cancelNotification(1, 'late'))])
    t.equal(cancel.status, 202, `round ${i}: the cancel is accepted`)
    if (response.status === 202) {
      outcomes.cancelled++
      t.equal(response.text, '', `round ${i}: cancelled, no result`)
    } else {
      outcomes.completed++
      t.same(resultText(response), ['slept 100'], `round ${i}: completed with its result`)
    }
    t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0, 1000), `round ${i}: nothing in flight`)
    t.equal(server.app.mcpCancellation.rows, 0, `round ${i}: no row left`)
  }
  t.comment(`outcomes: ${JSON.stringify(outcomes)}`)
})
