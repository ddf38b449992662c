/**
 * `maxInFlightPerScope`: what counts as running, and when a slot is given back. A request is counted
 * from before its handler runs until it ends, however it ends (answered, failed, cancelled); one more in
 * a full scope is refused with 429, `Retry-After` and a JSON-RPC error carrying its id, in both eras and
 * inside a 2025-03-26 batch; other scopes never see it. (The official clients under load:
 * test/e2e/fairness.test.ts.)
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp, json, post, postLegacy, postModern } from '../helpers/inject.js'
import { cancelNotification } from '../helpers/jsonrpc.js'
import { waitFor } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

/** A tool that runs until the test lets it go (or its request is cancelled), and one that fails. */
interface Gate { release: () => void, started: number }

async function boundedApp (t: Tap, maxInFlightPerScope: number): Promise<{ app: FastifyInstance, gate: Gate }> {
  const gate: Gate = { release: () => {}, started: 0 }
  let released: Promise<void> = new Promise(resolve => { gate.release = resolve })
  const app = await buildApp(t, { maxInFlightPerScope, auth: { principal: request => request.headers['x-tenant'], required: false } }, app => {
    app.mcp.tool({
      name: 'held',
      handler: async (_args, ctx) => {
        gate.started++
        await Promise.race([released, new Promise(resolve => { ctx.signal.addEventListener('abort', resolve) })])
        return { content: [{ type: 'text', text: 'released' }] }
      }
    })
    app.mcp.tool({ name: 'fails', handler: async () => { throw new Error('handler bug') } })
    app.mcp.tool({ name: 'quick', handler: () => ({ content: [{ type: 'text', text: 'quick' }] }) })
  })
  // A second gate for the next test step.
  const release = gate.release
  gate.release = () => {
    release()
    released = new Promise(resolve => { gate.release = resolve })
  }
  return { app, gate }
}

const as = (tenant: string): { headers: Record<string, string> } => ({ headers: { 'x-tenant': tenant } })

function call (app: FastifyInstance, tenant: string, name: string, id: number | string = 1): ReturnType<typeof postLegacy> {
  return postLegacy(app, 'tools/call', { name, arguments: {} }, { id, ...as(tenant) })
}

t.test('a full scope is refused before the handler runs; other scopes are served; the slot comes back when the call ends', async t => {
  const { app, gate } = await boundedApp(t, 2)
  const running = [call(app, 'a', 'held', 1), call(app, 'a', 'held', 2)]
  t.ok(await waitFor(() => gate.started === 2), 'two calls of A run')

  const refused = await call(app, 'a', 'held', 'third')
  t.equal(refused.statusCode, 429)
  t.equal(refused.headers['retry-after'], '1')
  t.match(json(refused), { id: 'third', error: { code: -32000, message: /2 running \(maxInFlightPerScope\)/ } })
  t.equal(gate.started, 2, 'the refused call never reached its handler')

  const modern = await postModern(app, 'tools/call', { name: 'held', arguments: {} }, { id: 'modern', ...as('a') })
  t.equal(modern.statusCode, 429, 'the same scope in the 2026-07-28 era is refused too')
  t.match(json(modern), { id: 'modern', error: { code: -32000 } })

  const other = await call(app, 'b', 'quick')
  t.equal(other.statusCode, 200, 'another scope is served')

  gate.release()
  for (const response of await Promise.all(running)) t.equal(response.statusCode, 200)
  t.equal((await call(app, 'a', 'quick')).statusCode, 200, 'A is served again once its calls ended')
})

t.test('synchronous, failing and cancelled calls give their slot back', async t => {
  const { app, gate } = await boundedApp(t, 1)
  for (let i = 0; i < 20; i++) t.equal((await call(app, 'a', 'quick', i)).statusCode, 200)
  t.equal((await postLegacy(app, 'ping', undefined, as('a'))).statusCode, 200, 'ping counts and is released in one turn')
  t.match(json(await call(app, 'a', 'fails')), { error: { code: -32603 } }, 'a handler that throws')
  t.equal((await call(app, 'a', 'quick')).statusCode, 200, 'left its slot')

  const held = call(app, 'a', 'held', 'to-cancel')
  t.ok(await waitFor(() => gate.started === 1))
  t.equal((await call(app, 'a', 'quick')).statusCode, 429, 'the slot is taken')
  const cancel = await post(app, cancelNotification('to-cancel'), { 'mcp-protocol-version': '2025-11-25', ...as('a').headers })
  t.equal(cancel.statusCode, 202, 'a cancellation is not a request: it is never refused')
  await held
  t.equal((await call(app, 'a', 'quick')).statusCode, 200, 'the cancelled call left its slot')
})

t.test('2025-03-26 batch: items beyond the bound get their own error in the array', async t => {
  const { app, gate } = await boundedApp(t, 1)
  const batch = post(app, [
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'held', arguments: {} } },
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'quick', arguments: {} } }
  ], { 'mcp-protocol-version': '2025-03-26', ...as('a').headers })
  t.ok(await waitFor(() => gate.started === 1))
  gate.release()
  const answers = JSON.parse((await batch).payload) as Array<{ id: number, error?: { code: number }, result?: unknown }>
  t.match(answers.find(answer => answer.id === 2), { error: { code: -32000 } }, 'the second item was refused while the first ran')
  t.ok(answers.find(answer => answer.id === 1)?.result, 'the first was answered')
})

t.test('Infinity disables the bound', async t => {
  const { app, gate } = await boundedApp(t, Infinity)
  const running = Array.from({ length: 50 }, async (_, i) => await call(app, 'a', 'held', i))
  t.ok(await waitFor(() => gate.started === 50), 'fifty calls of one scope run at once')
  gate.release()
  t.ok((await Promise.all(running)).every(response => response.statusCode === 200))
})
