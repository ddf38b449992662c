/**
 * CancellationRegistry, the `fastify.mcpCancellation` API (DESIGN §4): id validation, reason
 * sanitising, bounds, track/untrack, cleanup and the janitor, diagnostics_channel events,
 * `notifications/cancelled` outcomes and the exchange-keyed server-side cancel. Adapted from the
 * ConduitMCP cases (reference/conduit-cancellation.md §5, C5–C35 and H36–H43).
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import type { FastifyRequest } from 'fastify'
import { Exchange } from '../../lib/lifecycle/exchange.js'
import { RequestCancelledError } from '../../lib/core/errors.js'
import { CancellationRegistry, type RegistrySettings } from '../../lib/lifecycle/registry.js'
import type { EraBinding } from '../../lib/protocol/era.js'
import { ProtocolError, type RequestId } from '../../lib/core/jsonrpc.js'
import { BatchItemSink } from '../../lib/transport/batch-item-sink.js'
import { fakeClock } from '../helpers/clock.js'
import { silentLogger } from '../helpers/logs.js'

const SCOPE = 'ip:192.0.2.1'
const LEGACY: EraBinding = { era: 'legacy', version: '2025-11-25', logLevel: undefined, clientCapabilities: {} } as unknown as EraBinding

function registry (settings: Partial<RegistrySettings> = {}, scopeFn = (_request: FastifyRequest) => SCOPE): CancellationRegistry {
  return new CancellationRegistry({
    maxRows: 10_000, maxRowsPerScope: 256, maxInFlightPerScope: 32, janitorIntervalMs: 60_000, cancellationTtlMs: 300_000, disconnectCancels: true, maxStreamLifetimeMs: 600_000, cancelTimeoutMs: 5_000, ...settings
  }, scopeFn)
}

/** Stands in for a Fastify request: the registry keys exchanges by its identity and logs through it. */
// Each request has its own raw Node request: the registry matches exchanges by it.
const fakeRequest = (): FastifyRequest => ({ log: silentLogger, raw: {} }) as unknown as FastifyRequest

interface Running {
  exchange: Exchange
  sink: BatchItemSink
  request: FastifyRequest
}

/** An exchange as the dispatcher creates it, tracked by `begin`. */
function begin (r: CancellationRegistry, id: RequestId, options: { scope?: string, method?: string, request?: FastifyRequest } = {}): Running {
  const request = options.request ?? fakeRequest()
  const sink = new BatchItemSink()
  const exchange = new Exchange({
    request, id, method: options.method ?? 'tools/call', params: {}, binding: LEGACY, scope: options.scope ?? SCOPE, sink, tracker: r
  })
  r.begin(exchange)
  return { exchange, sink, request }
}

/** The dispatcher's `finally`. */
function end (r: CancellationRegistry, { exchange }: Running): void {
  exchange.finish()
  r.finish(exchange)
}

/** Collects the messages of a diagnostics channel until the end of the test. */
function listen<T> (tt: { teardown: (fn: () => unknown) => void }, name: string): T[] {
  const events: T[] = []
  const onMessage = (message: unknown): void => { events.push(message as T) }
  subscribe(name, onMessage)
  tt.teardown(() => { unsubscribe(name, onMessage) })
  return events
}

const graphemeCount = (text: string): number => [...new Intl.Segmenter('en', { granularity: 'grapheme' }).segment(text)].length

t.test('validRequestId: safe integers and strings of at most 256 UTF-8 bytes', async t => {
  const r = registry()
  const valid: unknown[] = [0, 1, -1, 42, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 1.0, '', '1', 'a'.repeat(256),
    'é'.repeat(128), '€'.repeat(85), '😀'.repeat(64)]
  const invalid: unknown[] = [1.5, 2 ** 53, -(2 ** 53), Number.MAX_SAFE_INTEGER + 2, NaN, Infinity, -Infinity, true, false, null, undefined,
    {}, { id: 1 }, [], [1, 2], 'a'.repeat(257), 'é'.repeat(129), '€'.repeat(86), '😀'.repeat(65), 1n]
  for (const value of valid) t.ok(r.validRequestId(value), `valid: ${describe(value)}`)
  for (const value of invalid) t.notOk(r.validRequestId(value), `invalid: ${describe(value)}`)
})

function describe (value: unknown): string {
  if (typeof value === 'string') return value.length > 12 ? `string of ${value.length} chars / ${Buffer.byteLength(value)} bytes` : JSON.stringify(value)
  if (typeof value === 'bigint') return `${value}n`
  return value === undefined ? 'undefined' : Number.isNaN(value) ? 'NaN' : String(JSON.stringify(value) ?? value)
}

t.test('cancel / cancelled / reason / clear (C5, C6, C26)', async t => {
  const r = registry()
  t.equal(r.cancel({ requestId: 42, reason: 'user pressed stop', scope: 's' }), 'recorded')
  t.ok(r.cancelled(42, 's'))
  t.notOk(r.cancelled('42', 's'), 'keys are type-exact: "42" is not 42')
  t.equal(r.reason(42, 's'), 'user pressed stop')
  t.equal(r.reason('42', 's'), null)
  t.notOk(r.cancelled(42, 'other'), 'another scope')

  t.equal(r.cancel({ requestId: 'req-1', reason: 'timeout', scope: 's' }), 'recorded')
  t.equal(r.reason('req-1', 's'), 'timeout')
  t.equal(r.cancel({ requestId: '1', reason: undefined, scope: 's' }), 'recorded')
  t.equal(r.reason('1', 's'), null, 'no reason is null')
  t.notOk(r.cancelled(1, 's'), '1 is not "1"')

  t.equal(r.rows, 3)
  r.clear(42, 's')
  t.notOk(r.cancelled(42, 's'))
  r.clear(42, 's')
  r.clear('never', 's')
  t.equal(r.rows, 2)
  t.ok(r.cancelled('req-1', 's'))
})

t.test('invalid ids are refused and write nothing (C7, C8, C29)', async t => {
  const r = registry()
  for (const id of [null, undefined, 1.5, 2 ** 53, true, {}, [1, 2], 'a'.repeat(257)]) {
    t.equal(r.cancel({ requestId: id as RequestId, reason: 'x', scope: 's' }), 'invalid', `cancel(${describe(id)})`)
    t.notOk(r.cancelled(id, 's'), `cancelled(${describe(id)})`)
    t.equal(r.reason(id, 's'), null, `reason(${describe(id)})`)
    t.doesNotThrow(() => { r.clear(id, 's') }, `clear(${describe(id)})`)
    const owner = r.track(id, 's')
    t.notOk(r.inFlight(id, 's'), `track(${describe(id)}) tracks nothing`)
    t.doesNotThrow(() => { r.untrack(id, 's', owner) }, `untrack(${describe(id)})`)
  }
  t.equal(r.rows, 0)
  t.equal(r.inFlightRows, 0)
})

t.test('256 bytes is the limit, in bytes not characters (C9)', async t => {
  const r = registry()
  t.equal(r.cancel({ requestId: 'a'.repeat(256), reason: null, scope: 's' }), 'recorded')
  t.equal(r.cancel({ requestId: 'a'.repeat(257), reason: null, scope: 's' }), 'invalid')
  t.equal(r.cancel({ requestId: 'é'.repeat(128), reason: null, scope: 's' }), 'recorded', '128 × é = 256 bytes')
  t.equal(r.cancel({ requestId: 'é'.repeat(129), reason: null, scope: 's' }), 'invalid', '129 × é = 258 bytes, 129 characters')
  t.equal(r.rows, 2)
  t.ok(r.cancelled('a'.repeat(256), 's'))
  t.notOk(r.cancelled('a'.repeat(257), 's'))
})

t.test('reasons are sanitised (C10, C11; DESIGN §4 Reason)', async t => {
  const r = registry()

  const hostile = ('ab\u0000\u001b[31m\u202e\u200b\u2066\r\n\t\u007f\u0085\u061c\u2028\u2060\ufeffcd').repeat(500)
  t.ok(hostile.length >= 10_000, 'a reason of 10 000+ characters')
  r.cancel({ requestId: 'hostile', reason: hostile, scope: 's' })
  const stored = r.reason('hostile', 's') ?? ''
  t.ok(stored.length > 0, 'something is kept')
  t.ok(graphemeCount(stored) <= 200, `at most 200 graphemes (got ${graphemeCount(stored)})`)
  t.notMatch(stored, /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff]/, 'no control, bidi or zero-width character')
  t.match(stored, /^ab\[31mcd/, 'visible text survives, only the ESC of the ANSI sequence is dropped')

  r.cancel({ requestId: 'ansi', reason: 'abort\u0000\u001b[31m' + 'x'.repeat(500), scope: 's' })
  const ansi = r.reason('ansi', 's') ?? ''
  t.equal(graphemeCount(ansi), 200, 'exactly 200 graphemes')
  t.equal(ansi, 'abort[31m' + 'x'.repeat(191))

  r.cancel({ requestId: 'long', reason: 'a'.repeat(10_000), scope: 's' })
  t.equal(r.reason('long', 's'), 'a'.repeat(200))

  r.cancel({ requestId: 'combining', reason: 'e\u0301'.repeat(300), scope: 's' })
  t.equal(r.reason('combining', 's'), 'e\u0301'.repeat(200), 'cut at 200 graphemes, never inside one')

  r.cancel({ requestId: 'euro', reason: '€'.repeat(300), scope: 's' })
  const euro = r.reason('euro', 's') ?? ''
  t.equal(euro, '€'.repeat(200), 'multi-byte characters are counted as characters')

  r.cancel({ requestId: 'lines', reason: 'ok\r\n2026-01-01 [error] forged', scope: 's' })
  t.equal(r.reason('lines', 's'), 'ok2026-01-01 [error] forged', 'no forged log line')

  const stringified: Array<[unknown, string]> = [
    [{ why: 'because' }, '{"why":"because"}'],
    [[1, 2], '[1,2]'],
    [[1.5], '[1.5]'],
    [[], '[]'],
    [42, '42'],
    [-1.5, '-1.5'],
    [true, 'true'],
    ['', '']
  ]
  for (const [i, [reason, expected]] of stringified.entries()) {
    t.equal(r.cancel({ requestId: `s-${i}`, reason, scope: 's' }), 'recorded')
    t.equal(r.reason(`s-${i}`, 's'), expected, `${JSON.stringify(reason)} is stored as ${JSON.stringify(expected)}`)
  }

  const wide = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`key${i}`, i]))
  r.cancel({ requestId: 'wide', reason: wide, scope: 's' })
  t.ok((r.reason('wide', 's') ?? '').length <= 200, 'a 5 000-key object is cut to 200 characters')

  r.cancel({ requestId: 'null', reason: null, scope: 's' })
  t.equal(r.reason('null', 's'), null, 'null stays null')
  t.ok(r.cancelled('null', 's'))
})

t.test('per-scope quota rejects while another scope is served (C18)', async t => {
  const r = registry({ maxRowsPerScope: 3 })
  t.same([1, 2, 3].map(i => r.cancel({ requestId: `flood-${i}`, reason: null, scope: 'attacker' })), ['recorded', 'recorded', 'recorded'])
  t.equal(r.cancel({ requestId: 'flood-4', reason: null, scope: 'attacker' }), 'rejected')
  t.notOk(r.cancelled('flood-4', 'attacker'))
  t.equal(r.cancel({ requestId: 'mine', reason: null, scope: 'victim' }), 'recorded')
  t.equal(r.cancel({ requestId: 'flood-1', reason: 'again', scope: 'attacker' }), 'recorded', 'repeating an existing row is not rejected')
  t.equal(r.reason('flood-1', 'attacker'), null, 'and keeps the first reason')
})

t.test('Infinity disables both bounds', async t => {
  const r = registry({ maxRows: Infinity, maxRowsPerScope: Infinity })
  let recorded = 0
  for (let i = 0; i < 2000; i++) if (r.cancel({ requestId: i, reason: null, scope: 'one-scope' }) === 'recorded') recorded++
  t.equal(recorded, 2000)
  t.equal(r.rows, 2000)
  t.ok(r.cancelled(0, 'one-scope'), 'nothing was evicted')
})

t.test('the global cap evicts a batch, never rejects', async t => {
  const clock = fakeClock(t)
  const r = registry({ maxRows: 100, maxRowsPerScope: Infinity })
  for (let i = 1; i <= 98; i++) { clock.advance(1); r.cancel({ requestId: `hog-${i}`, reason: null, scope: 'hog' }) }
  for (let i = 1; i <= 2; i++) { clock.advance(1); r.cancel({ requestId: `b-${i}`, reason: null, scope: 'bystander' }) }
  clock.advance(1)
  t.equal(r.cancel({ requestId: 'small-1', reason: null, scope: 'small' }), 'recorded')
  t.equal(r.rows, 96)
  t.ok(r.cancelled('b-1', 'bystander') && r.cancelled('b-2', 'bystander'), 'the small scope keeps its rows')
  t.notOk(r.cancelled('hog-5', 'hog'))
  t.ok(r.cancelled('hog-6', 'hog'))
})

t.test('track / untrack / inFlight, two owners on one key (C27, C28)', async t => {
  const r = registry()
  const first = r.track(7, 'a')
  t.ok(r.inFlight(7, 'a'))
  t.notOk(r.inFlight('7', 'a'), 'type-exact')
  t.notOk(r.inFlight(7, 'b'))
  t.notOk(r.inFlight(70, 'a'))
  const second = r.track(7, 'a')
  t.not(first, second, 'each track without an owner gets its own token')
  t.equal(r.inFlightRows, 2)
  r.untrack(7, 'a', first)
  t.ok(r.inFlight(7, 'a'), 'the other owner is still in flight')
  r.untrack(7, 'a', second)
  t.notOk(r.inFlight(7, 'a'))
  t.equal(r.inFlightRows, 0)

  const mine = { cancelled: [] as unknown[], cancel (reason: string | null) { this.cancelled.push(reason) } }
  t.equal(r.track('job', 's', mine), mine, 'track returns the owner it was given')
  r.cancel({ requestId: 'job', reason: 'stop it', scope: 's' })
  t.same(mine.cancelled, ['stop it'], 'a library cancel reaches the owner')
})

t.test('cleanup: old rows and rows of ended owners, with a cleanup event (C30, C31, C35)', async t => {
  const clock = fakeClock(t)
  const events = listen<{ removed: number, inFlightRemoved: number, registry: unknown }>(t, 'mcp:cancellation:cleanup')
  const r = registry()
  r.cancel({ requestId: 'stale', reason: null, scope: 's' })
  clock.advance(60_000)
  r.cancel({ requestId: 'fresh', reason: null, scope: 's' })
  const leaked = { alive: false }
  const live = { alive: true }
  r.track('leaked', 's', leaked)
  r.track('live', 's', live)
  r.track('shared', 's', leaked)
  r.track('shared', 's', live)

  t.equal(r.cleanup(30_000), 1, 'returns the cancellation rows removed')
  t.notOk(r.cancelled('stale', 's'))
  t.ok(r.cancelled('fresh', 's'))
  t.notOk(r.inFlight('leaked', 's'))
  t.ok(r.inFlight('live', 's'))
  t.ok(r.inFlight('shared', 's'), 'the live owner of "shared" stays')
  t.equal(r.inFlightRows, 2)
  t.equal(events.length, 1)
  t.equal(events[0]?.removed, 1)
  t.equal(events[0]?.inFlightRemoved, 2)

  t.equal(r.cleanup(30_000), 0)
  t.same(events.map(e => [e.removed, e.inFlightRemoved]), [[1, 2], [0, 0]], 'every cleanup publishes, even an empty one')
})

t.test('the janitor sweeps on its interval and stops on close', async t => {
  const events = listen<{ removed: number, registry: unknown }>(t, 'mcp:cancellation:cleanup')
  const r = registry({ janitorIntervalMs: 20, cancellationTtlMs: 1 })
  t.teardown(() => r.close())
  r.cancel({ requestId: 'old', reason: null, scope: 's' })
  r.startTimers()
  const deadline = Date.now() + 2000
  while (r.rows > 0 && Date.now() < deadline) await sleep(10)
  t.equal(r.rows, 0, 'the janitor removed the row')
  const mine = events.filter(e => e.registry === r)
  t.ok(mine.some(e => e.removed === 1), 'and published the cleanup')
  await r.close()
  const count = events.filter(e => e.registry === r).length
  r.cancel({ requestId: 'after-close', reason: null, scope: 's' })
  await sleep(100)
  t.equal(events.filter(e => e.registry === r).length, count, 'no sweep after close')
  t.ok(r.cancelled('after-close', 's'))
})

t.test('cancelFromNotification: ignored, invalid, recorded, rejected (H36–H43)', async t => {
  const r = registry({ maxRowsPerScope: 2 })

  t.equal(await r.cancelFromNotification(undefined, SCOPE), 'ignored', 'no params')
  t.equal(await r.cancelFromNotification({}, SCOPE), 'ignored', 'no requestId')
  t.equal(await r.cancelFromNotification({ requestId: null }, SCOPE), 'ignored', 'null requestId')

  for (const requestId of [{}, [], 1.5, 2 ** 53, true, 'x'.repeat(257), 'é'.repeat(129)]) {
    const error = await r.cancelFromNotification({ requestId }, SCOPE).then(() => undefined, (e: unknown) => e)
    t.ok(error instanceof ProtocolError, `${describe(requestId)} is a ProtocolError`)
    t.equal((error as ProtocolError).httpStatus, 400)
    t.equal((error as ProtocolError).code, -32602)
    t.equal((error as ProtocolError).id, undefined, 'no id: a notification has none')
  }

  const running = begin(r, 'x'.repeat(256))
  t.equal(await r.cancelFromNotification({ requestId: 'nothing' }, SCOPE), 'ignored', 'not in flight')
  t.equal(await r.cancelFromNotification({ requestId: 'x'.repeat(256) }, 'ip:other'), 'ignored', 'in flight in another scope')
  t.equal(r.rows, 0, 'nothing written for ignored cancels')
  t.notOk(running.exchange.cancelled)

  t.equal(await r.cancelFromNotification({ requestId: 'x'.repeat(256), reason: 'user abort' }, SCOPE), 'recorded')
  t.ok(running.exchange.cancelled, 'the exchange is aborted')
  t.equal(r.reason('x'.repeat(256), SCOPE), 'user abort')
  t.equal(running.sink.response, undefined, 'the client that cancelled gets no response')
  t.notOk(running.sink.writable, 'and the exchange is closed')

  // Fill the quota (2 rows), then a third in-flight request is refused.
  begin(r, 2)
  t.equal(await r.cancelFromNotification({ requestId: 2 }, SCOPE), 'recorded')
  const third = begin(r, 3)
  const error = await r.cancelFromNotification({ requestId: 3 }, SCOPE).then(() => undefined, (e: unknown) => e)
  t.ok(error instanceof ProtocolError, 'a full quota is a ProtocolError')
  t.equal((error as ProtocolError).httpStatus, 429)
  t.equal((error as ProtocolError).code, -32000)
  t.match((error as ProtocolError).message, /Too many outstanding cancellations/)
  t.ok(Number((error as ProtocolError).headers?.['retry-after']) >= 1, 'with Retry-After')
  t.notOk(third.exchange.cancelled, 'the refused cancel aborts nothing')
})

t.test('a completed request cannot be cancelled and leaves no row (H37, H39)', async t => {
  const r = registry()
  const running = begin(r, 'block-1')
  t.ok(r.inFlight('block-1', SCOPE))
  t.equal(await r.cancelFromNotification({ requestId: 'block-1' }, SCOPE), 'recorded')
  t.ok(running.exchange.signal.aborted)
  end(r, running)
  t.notOk(r.inFlight('block-1', SCOPE), 'no longer in flight')
  t.notOk(r.cancelled('block-1', SCOPE), 'the row was cleared')
  t.equal(await r.cancelFromNotification({ requestId: 'block-1' }, SCOPE), 'ignored', 'a late cancel is ignored')
  t.equal(r.rows, 0)
  t.equal(r.inFlightRows, 0)
})

t.test('two requests reusing an id in one scope: each is tracked apart (H40)', async t => {
  const r = registry()
  const first = begin(r, 'dup-1')
  const second = begin(r, 'dup-1')
  t.equal(r.inFlightRows, 2)
  end(r, first)
  t.ok(r.inFlight('dup-1', SCOPE), 'completing one leaves the other in flight')
  t.equal(await r.cancelFromNotification({ requestId: 'dup-1' }, SCOPE), 'recorded')
  t.ok(second.exchange.cancelled, 'the remaining one is cancelled')
  t.notOk(first.exchange.cancelled)
  end(r, second)
  t.equal(r.inFlightRows, 0)
  t.equal(r.rows, 0, 'no row once both ended')
})

t.test('a row stays while another request with that id is still running', async t => {
  const r = registry()
  const first = begin(r, 5)
  const second = begin(r, 5)
  await r.cancelFromNotification({ requestId: 5 }, SCOPE)
  t.ok(first.exchange.cancelled && second.exchange.cancelled, 'a cancel of {scope, id} reaches both')
  end(r, first)
  t.ok(r.cancelled(5, SCOPE), 'the row survives while the second still runs')
  end(r, second)
  t.notOk(r.cancelled(5, SCOPE))
})

t.test('initialize is never tracked, so never cancelled', async t => {
  const r = registry()
  const init = begin(r, 1, { method: 'initialize' })
  t.notOk(r.inFlight(1, SCOPE))
  t.equal(r.inFlightRows, 0)
  t.equal(await r.cancelFromNotification({ requestId: 1 }, SCOPE), 'ignored')
  t.notOk(init.exchange.cancelled)
  t.equal(r.rows, 0)
  end(r, init)
})

t.test('events: mcp:request:cancelled from an exchange cancel (C34)', async t => {
  const events = listen<{ requestId: RequestId, scope: string, reason: string | null, source: string, registry: unknown }>(t, 'mcp:request:cancelled')
  const r = registry()
  const running = begin(r, 'evt-1')
  await r.cancelFromNotification({ requestId: 'evt-1', reason: 'client\u0000 abort' }, SCOPE)
  const mine = events.filter(e => e.registry === r)
  t.equal(mine.length, 1)
  t.match(mine[0], { requestId: 'evt-1', scope: SCOPE, reason: 'client abort', source: 'client' })
  const reason: unknown = running.exchange.signal.reason
  t.ok(reason instanceof RequestCancelledError, 'ctx.signal.reason is a RequestCancelledError')
  t.equal((reason as RequestCancelledError).reason, 'client abort')
  t.equal((reason as RequestCancelledError).source, 'client')

  await r.cancelFromNotification({ requestId: 'evt-1', reason: 'again' }, SCOPE)
  t.equal(events.filter(e => e.registry === r).length, 1, 'a repeated cancel publishes nothing more')

  r.cancel({ requestId: 'not-running', reason: null, scope: SCOPE })
  t.equal(events.filter(e => e.registry === r).length, 1, 'a row without a running request is no cancelled request')

  const numeric = begin(r, 9, { scope: 'session:s1' })
  r.cancel({ requestId: 9, reason: null, scope: 'session:s1' })
  t.match(events.filter(e => e.registry === r)[1], { requestId: 9, scope: 'session:s1', reason: null, source: 'server' })
  t.ok(numeric.exchange.cancelled)
})

t.test('cancelRequest is keyed to the exchange, never to {scope, id}', async t => {
  const events = listen<{ requestId: RequestId, source: string, reason: string | null, registry: unknown }>(t, 'mcp:request:cancelled')
  const r = registry()
  // Two clients behind one NAT, both numbering from 1: same scope, same id, different HTTP requests.
  const mine = begin(r, 1)
  const theirs = begin(r, 1)
  t.equal(r.cancelRequest(mine.request, 'shutting down'), true)
  t.ok(mine.exchange.cancelled, 'this request\'s exchange is cancelled')
  t.notOk(theirs.exchange.cancelled, 'the other request with the same {scope, id} is untouched')
  t.equal(r.rows, 0, 'no cancellation row is written for the scope')
  t.same(mine.sink.response, { jsonrpc: '2.0', id: 1, error: { code: -32800, message: 'Request cancelled', data: { reason: 'shutting down' } } },
    'a still-connected client is told why with -32800')
  t.equal(theirs.sink.response, undefined)
  t.match(events.filter(e => e.registry === r), [{ requestId: 1, source: 'server', reason: 'shutting down' }])

  t.equal(r.cancelRequest(fakeRequest()), false, 'a request with nothing running')
  end(r, mine)
  t.equal(r.cancelRequest(mine.request), false, 'a finished request')
  t.notOk(theirs.exchange.cancelled)
  t.ok(r.inFlight(1, SCOPE), 'the other is still in flight')

  const initialize = begin(r, 2, { method: 'initialize' })
  t.equal(r.cancelRequest(initialize.request, { why: 'x' }), true, 'the server may end its own untracked initialize')
  t.equal((initialize.sink.response?.error?.data as { reason?: unknown } | undefined)?.reason, '{"why":"x"}', 'the reason is sanitised')
})

t.test('scope(request) is the scope function of the plugin', async t => {
  const request = fakeRequest()
  const r = registry({}, req => req === request ? 'principal:alice' : 'ip:unknown')
  t.equal(r.scope(request), 'principal:alice')
  t.equal(r.scope(fakeRequest()), 'ip:unknown')
})
