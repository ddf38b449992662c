/**
 * Leak check (DESIGN §4: rows removed in `finally`, timers cleared, nothing kept per request): 1000
 * concurrent streamed `sleep` calls on a real socket, half of them cut off after their first progress
 * event. Afterwards nothing is in flight, no row is left, the process holds no more handles or timers
 * than before, and the heap has not grown.
 */
import http from 'node:http'
import t from 'tap'
import { legacyCall, type RawCall } from '../helpers/http.js'
import { listenOn } from '../helpers/listen.js'
import { activeResources, collector, heapAfterGc, resourceGrowth, resourcesSettle } from '../helpers/process.js'
import { cancellationEvents } from '../helpers/recorders.js'
import { waitFor } from '../helpers/wait.js'
import { buildApp as buildDemo } from '../../example/app.js'

const CALLS = 1000

/** The resume window of the cut calls' streams: each is cancelled once it passed, or at once beyond its scope's bound of paused streams. */
const WINDOW_MS = 500
/** Each call sleeps this long: past the window, so that every cut call is cancelled rather than finished into its paused stream. */
const SLEEP_MS = 3 * WINDOW_MS

t.test(`${CALLS} concurrent streamed calls, half cut off mid-stream, leave nothing behind once their resume window passed`, async t => {
  const gc = collector()
  // One client address sends the whole burst: the per-scope in-flight bound is lifted for it.
  const app = await buildDemo({ MCP_RESUME_WINDOW_MS: String(WINDOW_MS), MCP_MAX_IN_FLIGHT_PER_SCOPE: 'Infinity' })
  // A listen backlog above the burst of connections: with the default 511, SYNs beyond it are retried a second later.
  const server = { app, url: await listenOn(t, app, CALLS * 2) }
  const events = cancellationEvents(t)
  const agent = new http.Agent({ keepAlive: false, maxSockets: CALLS * 2 })
  t.teardown(() => { agent.destroy() })

  // Warm up every path once (both kinds of call), so lazily created state is in the baseline.
  const warmComplete = legacyCall(server.url, 'warm-1', 'sleep', { ms: 60, stepMs: 20 }, { progressToken: 'w1', agent })
  const warmCut = legacyCall(server.url, 'warm-2', 'sleep', { ms: SLEEP_MS, stepMs: 20 }, { progressToken: 'w2', agent })
  await warmCut.waitForText('notifications/progress')
  warmCut.destroy()
  await Promise.all([warmComplete.done, warmCut.done])
  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0, 2000 + WINDOW_MS), 'the warm-up calls are done')
  server.app.mcpCancellation.cleanup(0)
  events.length = 0
  await resourcesSettle({}, 300)
  const resourcesBefore = activeResources()
  const heapBefore = await heapAfterGc(gc)

  const startedAt = Date.now()
  const calls: RawCall[] = []
  for (let i = 0; i < CALLS; i++) {
    calls.push(legacyCall(server.url, `leak-${i}`, 'sleep', { ms: SLEEP_MS, stepMs: 50 }, { progressToken: `p-${i}`, agent }))
  }
  const cut = calls.filter((_call, i) => i % 2 === 1)
  for (const call of cut) call.cutOn('notifications/progress')
  const ends = await Promise.all(calls.map(async call => await call.done))
  const tookMs = Date.now() - startedAt

  const completed = ends.filter((_end, i) => i % 2 === 0)
  const answered = completed.filter(end => end.complete && end.text.includes(`"slept ${SLEEP_MS}"`))
  t.equal(answered.length, CALLS / 2, `every call left alone got its result (${answered.length}; all ${CALLS} took ${tookMs} ms)`)
  t.equal(cut.filter(call => call.destroyedAt !== undefined && call.text().includes('notifications/progress') && !call.text().includes('"result"')).length,
    CALLS / 2, 'every cut call was cut after its first progress event, before its result')

  t.ok(await waitFor(() => server.app.mcpCancellation.inFlightRows === 0, 5000),
    `inFlightRows is 0 afterwards (${server.app.mcpCancellation.inFlightRows})`)
  const cancelled = new Set(events.filter(event => event.source === 'disconnect').map(event => event.requestId))
  const cutIds = new Set(calls.flatMap((_call, i) => i % 2 === 1 ? [`leak-${i}`] : []))
  t.equal(cancelled.size, CALLS / 2, `each cut call was cancelled by its disconnect (${cancelled.size}; ${events.length} events in all)`)
  t.same([...cancelled].filter(id => !cutIds.has(id as string)), [], 'and no call that was left alone')
  server.app.mcpCancellation.cleanup(0)
  t.equal(server.app.mcpCancellation.rows, 0, 'no row is left after cleanup(0)')

  const grown = await resourcesSettle(resourcesBefore, 3000, 2)
  t.same(grown, {}, `active handles and timers back to the baseline (before ${JSON.stringify(resourcesBefore)}, after ${JSON.stringify(activeResources())})`)
  t.same(resourceGrowth(resourcesBefore, activeResources(), 2), {}, 'and they stay there')

  calls.length = 0
  cut.length = 0
  const heapGrowth = (await heapAfterGc(gc)) - heapBefore
  t.ok(heapGrowth < 10 * 1024 * 1024, `heap growth after GC under 10 MB (${(heapGrowth / 1024 / 1024).toFixed(2)} MB)`)
})
