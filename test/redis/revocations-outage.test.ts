/**
 * Session revocations are security state (DESIGN §13): they survive a Redis outage and an empty Redis
 * restart. Real listening nodes on a real `redis-server` (test/helpers/redis-server.ts, no persistence:
 * a restart is empty). A DELETE made while Redis is down is refused at once by its node and, once Redis
 * is back, by every other node, including nodes started afterwards; a revocation Redis forgot in a
 * restart is written back by the nodes that know it; what a node writes back is bounded by its
 * `sessions.maxRevocations`; a write Redis refuses is counted.
 *
 * Without redis-server these tests are skipped, except under CI where that is a failure.
 */
import t from 'tap'
import { Redis } from 'ioredis'
import { MemoryRevocationStore } from '../../lib/identity/revocation-store.js'
import { echo, startNode, type Node } from '../helpers/cluster.js'
import { rawPost } from '../helpers/http.js'
import { initializeBody } from '../helpers/jsonrpc.js'
import { errorLines } from '../helpers/logs.js'
import { metricValue } from '../helpers/metrics.js'
import { scanKeys } from '../helpers/redis.js'
import { RedisServer, redisSkipReason } from '../helpers/redis-server.js'
import { waitFor } from '../helpers/wait.js'

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

const skip = redisSkipReason(t)
const SECRET = 'x'.repeat(32)
/** Redis back ⇒ every node knows the revocations within this long (reconnecting takes up to a second). */
const RECOVERY_MS = 5000
const REVOKED_KEYS = 'mcp:revoked:*'

async function sessionNode (t: Tap, name: string, redis: RedisServer, maxRevocations?: number): Promise<Node> {
  return await startNode(t, name, { redis: redis.url, sessions: { secret: SECRET, maxRevocations } })
}

/** Initializes on `node`; the minted session's headers. */
async function openSession (t: Tap, node: Node): Promise<Record<string, string>> {
  const initialize = await rawPost(node.url, initializeBody())
  const session = initialize.headers.get('mcp-session-id')
  t.equal(initialize.status, 200, `initialize on ${node.name}`)
  return { 'mcp-session-id': session ?? '' }
}

/** DELETE of the session on `node`: its status. */
async function terminate (node: Node, session: Record<string, string>): Promise<number> {
  return (await fetch(node.url, { method: 'DELETE', headers: { ...session, 'mcp-protocol-version': '2025-11-25' } })).status
}

async function refuses (node: Node, session: Record<string, string>): Promise<boolean> {
  return (await echo(node, 'with session', session)).status === 404
}

/** A client of the test's own, closed at the end of the test. */
function inspector (t: Tap, redis: RedisServer): Redis {
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1 })
  t.teardown(() => { client.disconnect() })
  return client
}

t.test('a DELETE during an outage: refused at once on its node, and on every node once Redis is back empty, nodes started afterwards included', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await sessionNode(t, 'node-a', redis)
  const b = await sessionNode(t, 'node-b', redis)
  const session = await openSession(t, a)
  t.same(await echo(b, 'before', session), { status: 200, text: 'before' }, 'the session works on node B')

  await redis.stop()
  t.ok(await waitFor(() => errorLines(a).length > 0, 3000), 'node A noticed the outage')
  t.equal(await terminate(a, session), 204, 'DELETE on node A during the outage ⇒ 204')
  t.ok(await refuses(a, session), 'node A refuses the session at once')

  await redis.start()
  t.ok(await waitFor(async () => await refuses(b, session), RECOVERY_MS), 'node B, up all along, refuses it once Redis is back')
  t.ok(await refuses(a, session), 'node A still refuses it')

  const c = await sessionNode(t, 'node-c', redis)
  t.ok(await refuses(c, session), 'node C, started after Redis came back empty, refuses it from its first request')
  t.same(await echo(c, 'sessionless', {}), { status: 200, text: 'sessionless' }, 'while node C serves requests without that session')
})

t.test('a revocation made while Redis was up survives an empty Redis restart for a node started afterwards', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await sessionNode(t, 'node-a', redis)
  const session = await openSession(t, a)
  t.equal(await terminate(a, session), 204, 'DELETE on node A while Redis is up ⇒ 204')

  await redis.restart()
  // Started at once: it may scan Redis before node A has reconnected and written the revocation back.
  const c = await sessionNode(t, 'node-c', redis)
  t.ok(await waitFor(async () => await refuses(c, session), RECOVERY_MS), 'node C, started after the restart, refuses the session')
  t.ok(await refuses(a, session), 'and so does node A')
})

t.test('what a node writes back is bounded by sessions.maxRevocations: its newest revocations', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await sessionNode(t, 'node-a', redis, 4)
  const ids: string[] = []
  for (let i = 0; i < 6; i++) {
    const session = await openSession(t, a)
    t.equal(await terminate(a, session), 204, `DELETE ${i} ⇒ 204`)
    ids.push(`mcp:revoked:${session['mcp-session-id']}`)
  }
  const client = inspector(t, redis)
  t.same(await scanKeys(client, REVOKED_KEYS), [...ids].sort(), 'Redis holds all six revocations')

  await redis.restart()
  const newest = ids.slice(2).sort()
  t.ok(await waitFor(async () => (await scanKeys(client, REVOKED_KEYS).catch(() => [])).join() === newest.join(), RECOVERY_MS),
    'after an empty restart, node A writes back the four it remembers, the newest')
})

t.test('a revocation Redis refuses to store is counted in mcp_bus_errors_total, and still reaches the running nodes', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const a = await sessionNode(t, 'node-a', redis)
  const b = await sessionNode(t, 'node-b', redis)
  const session = await openSession(t, a)
  const client = inspector(t, redis)
  const before = await metricValue(a.url, 'mcp_bus_errors_total')

  await client.config('SET', 'maxmemory', '1')
  t.teardown(async () => { await client.config('SET', 'maxmemory', '0').catch(() => {}) })
  t.equal(await terminate(a, session), 204, 'DELETE on node A while Redis refuses writes (OOM) ⇒ 204')
  const after = await metricValue(a.url, 'mcp_bus_errors_total')
  t.ok((after ?? 0) > (before ?? 0), `the refused write is counted (${String(before)} → ${String(after)})`)
  t.ok(await waitFor(async () => await refuses(b, session), RECOVERY_MS), 'node B refuses the session (the publish went through)')
})

t.test('a full memory store taking a revocation it already holds forgets none of the others', async t => {
  const store = new MemoryRevocationStore(4)
  const expiresAt = Date.now() + 60_000
  for (const id of ['a', 'b', 'c', 'd']) store.revoke(id, expiresAt)
  store.revoke('c', expiresAt) // the same revocation again: a re-publish, or a scan after a write-back
  t.same(['a', 'b', 'c', 'd'].filter(id => store.isRevoked(id)), ['a', 'b', 'c', 'd'], 'all four are still revoked')
})
