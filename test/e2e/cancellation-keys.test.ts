/**
 * Keys of the cancellation table (issue 19, item 6): a scope and a request id are arbitrary strings
 * (a principal id is whatever `auth.principal` returns, NUL included), so no two distinct (scope, id)
 * pairs may share a key. Shown through the store's public behaviour, then end to end over HTTP. And a
 * principal id is written as UTF-8 wherever it is bound (session MACs, server-request ids, Redis keys),
 * which folds every lone surrogate into U+FFFD: such an id is refused.
 */
import t from 'tap'
import type { FastifyRequest } from 'fastify'
import fc from 'fast-check'
import { MemoryCancellationStore } from '../../lib/lifecycle/memory-cancellation-store.js'
import type { InFlightOwner } from '../../lib/lifecycle/cancellation-store.js'
import type { RequestId } from '../../lib/core/jsonrpc.js'
import { rawPost } from '../helpers/http.js'
import { cancelNotification, toolCall } from '../helpers/jsonrpc.js'
import { listenPlugin } from '../helpers/listen.js'
import { waitFor, within } from '../helpers/wait.js'

class RecordingOwner implements InFlightOwner {
  cancelled = 0
  cancel (): void { this.cancelled++ }
}

/** Any string: every UTF-16 unit (NUL and lone surrogates included), the separators a key might use often. */
const text = fc.string({
  unit: fc.oneof(fc.integer({ min: 0, max: 0xffff }).map(unit => String.fromCharCode(unit)), fc.constantFrom('\u0000', ':', '|', 'n', 's')),
  maxLength: 12
})
const requestId: fc.Arbitrary<RequestId> = fc.oneof(fc.integer(), text, fc.constantFrom(0, -1, Number.MAX_SAFE_INTEGER))
const scope = fc.oneof(text, text.map(s => `principal:${s}`), text.map(s => `session:${s}`), text.map(s => `ip:${s}`))
const tagOf = (id: RequestId): string => typeof id === 'number' ? 'n' : 's'

/**
 * Pairs whose naive concatenations meet: B's scope is A's scope, a separator, a type tag and a piece
 * of A's id, and B's id is the rest. Random strings alone almost never line up like this.
 */
const spliced = fc.tuple(scope, fc.constantFrom('\u0000', ':', '|', ''), text, requestId).map(([scopeA, separator, piece, idB]) => {
  const idA = `${piece}${separator}${tagOf(idB)}${idB}`
  return { a: { scope: scopeA, id: idA as RequestId }, b: { scope: `${scopeA}${separator}s${piece}`, id: idB } }
})
const independent = fc.record({ a: fc.record({ scope, id: requestId }), b: fc.record({ scope, id: requestId }) })
const distinctPairs = fc.oneof(spliced, independent)
  .filter(({ a, b }) => a.scope !== b.scope || a.id !== b.id)

/** A principal id may hold any character; HTTP headers cannot carry NUL, so the test scheme sends it as JSON. */
function principalFromHeader (request: FastifyRequest): unknown {
  return JSON.parse(String(request.headers['x-principal']))
}

/** The header naming `principal`: JSON, ASCII only (every other unit escaped). */
const as = (principal: string): Record<string, string> => ({
  'x-principal': JSON.stringify(principal).replace(/[^\x20-\x7e]/g, unit => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`)
})

t.test('distinct (scope, id) pairs never share a key: cancelling one never touches the other', async t => {
  fc.assert(fc.property(distinctPairs, ({ a, b }) => {
    const store = new MemoryCancellationStore({ maxRows: Infinity, maxRowsPerScope: Infinity })
    const ownerA = new RecordingOwner()
    const ownerB = new RecordingOwner()
    store.track(a.id, a.scope, ownerA)
    store.track(b.id, b.scope, ownerB)
    if (store.cancelInFlight(a.id, null, a.scope) !== 'recorded' || ownerA.cancelled !== 1) return false
    const untouched = ownerB.cancelled === 0 && store.row(b.id, b.scope) === undefined
    store.untrack(a.id, a.scope, ownerA)
    store.clear(a.id, a.scope)
    return untouched && store.inFlight(b.id, b.scope) && !store.inFlight(a.id, a.scope) && store.rows === 0
  }), { numRuns: 2000 })
  t.pass('2000 pairs, none sharing a key')
})

t.test('principal "v" cannot cancel the in-flight request of principal "v\\u0000sX" (real server)', async t => {
  const server = await listenPlugin(t, { auth: { principal: principalFromHeader } })
  const victim = rawPost(server.url, toolCall(1, 'probe', { ms: 1500, tag: 'victim' }), as('v\u0000sX'))
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlight(1, 'principal:v\u0000sX')), 'the victim\'s call is in flight')

  // Under `scope NUL type id` keys, this is the victim's key: principal:v NUL sX NUL n1.
  const cancel = await rawPost(server.url, cancelNotification('X\u0000n1', 'not yours'), as('v'))
  t.equal(cancel.status, 202, 'the cancel is answered as any unknown id is')
  t.equal(server.app.mcpCancellation.rows, 0, 'and records nothing')

  const response = await within(victim, 5000, undefined)
  t.equal(response?.status, 200, 'the victim\'s call is answered')
  t.match(response?.text, /probe 1500/, 'with its result: it ran to the end')
  t.equal(server.probe.tagged('victim')[0]?.abortedAt, undefined, 'its signal never aborted')
})

t.test('a principal id with a lone surrogate is refused (401): as UTF-8 it is another principal\'s id', async t => {
  const server = await listenPlugin(t, { sessions: { secret: 'x'.repeat(32) }, auth: { principal: principalFromHeader } })
  const initialize = {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'keys', version: '1.0.0' } }
  }
  // U+FFFD is an ordinary character; the lone surrogate U+D800 becomes U+FFFD when encoded as UTF-8.
  const owner = await rawPost(server.url, initialize, as('x\uFFFD'))
  t.equal(owner.status, 200, 'principal "x\\uFFFD" opens a session')
  const session = owner.headers.get('mcp-session-id') ?? ''

  const other = await rawPost(server.url, toolCall(1, 'sleep', { ms: 0 }), { ...as('x\uD800'), 'mcp-session-id': session })
  t.equal(other.status, 401, 'principal "x\\uD800" is refused before it can use that session')
  t.match(JSON.parse(other.text), { error: { message: /invalid credentials/ } }, 'as invalid credentials')
  t.equal((await rawPost(server.url, initialize, as('x\uD800'))).status, 401, 'and cannot open one of its own')
  t.equal((await rawPost(server.url, toolCall(1, 'sleep', { ms: 0 }), { ...as('x\uFFFD'), 'mcp-session-id': session })).status, 200,
    'the session still serves its own principal')
})
