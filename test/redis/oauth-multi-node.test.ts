/**
 * OAuth principals across nodes (issue 21): two resource server nodes on one real Redis (standalone, a
 * Cluster or Sentinel-managed, as MCP_TEST_REDIS says: test/helpers/redis-topology.ts) and one real
 * authorization server (test/helpers/authorization-server.ts), nothing else shared. The principal a
 * token makes is the cancellation scope on every node: a `notifications/cancelled` sent to node B with
 * the same token reaches the call running on node A; a cancel from another client, or from the same
 * client id at another issuer, touches nothing.
 *
 * Without redis-server these tests are skipped, except under CI where that is a failure.
 */
import t from 'tap'
import { startAuthorizationServer } from '../helpers/authorization-server.js'
import { sendCancel, startProbe, untilCrossNodeWorks } from '../helpers/cluster.js'
import { startRedisTopology, topologySkipReason } from '../helpers/redis-topology.js'
import { bearer, startResourceServer } from '../helpers/resource-server.js'
import { waitFor, within } from '../helpers/wait.js'

const skip = topologySkipReason(t)
/** How long a freshly started pair of nodes may take to reach Redis and subscribe. */
const WARM_UP_MS = 5000

t.test('a cancel POSTed to node B with the token of the call on node A reaches it; another principal\'s does not', { skip }, async t => {
  const resource = 'https://mcp.cluster.test/mcp'
  const redis = await startRedisTopology(t)
  const [as, other] = await Promise.all([
    startAuthorizationServer(t, { resources: [resource], scopes: ['demo:read'] }),
    startAuthorizationServer(t, { resources: [resource], scopes: ['demo:read'] })
  ])
  const options = { resource, oauth: { authorizationServers: [as.issuer, other.issuer] } }
  const a = await startResourceServer(t, as, { ...options, plugin: { redis: redis.option() } })
  const b = await startResourceServer(t, as, { ...options, plugin: { redis: redis.option() } })
  const owner = bearer(await as.token({ resource, scope: 'demo:read' }))
  const anotherClient = bearer(await as.token({ resource, scope: 'demo:read', client: as.clients[1] }))
  const sameIdElsewhere = bearer(await other.token({ resource, scope: 'demo:read' }))
  const since = Date.now()
  t.ok(await untilCrossNodeWorks(a, b, since, WARM_UP_MS, { headers: owner }) !== undefined, 'with the owner\'s token, a cancel sent to node B reaches node A')

  const target = await startProbe(a, 30_000, { id: 1, headers: owner })
  const sentinel = await startProbe(a, 30_000, { id: 2, headers: owner })
  t.equal(await sendCancel(b, 1, 'another client', anotherClient), 202, 'node B answers another client 202, as for any unknown id')
  t.equal(await sendCancel(b, 1, 'same client id, other issuer', sameIdElsewhere), 202, 'and the same client id from the other issuer')
  // Redis delivers one publisher's messages in order: once the owner's later cancel of id 2 arrived, so had the others.
  t.equal(await sendCancel(b, 2, 'sentinel', owner), 202)
  t.ok(await waitFor(() => sentinel.call()?.abortedAt !== undefined, 2000), 'the owner\'s cancel of id 2, sent to node B, reached node A')
  t.equal(target.call()?.abortedAt, undefined, 'id 1 was touched by neither foreign cancel')

  t.equal(await sendCancel(b, 1, 'the owner stops it', owner), 202)
  t.ok(await waitFor(() => target.call()?.abortedAt !== undefined, 2000), 'the owner\'s cancel of id 1, sent to node B, reached the call on node A')
  t.equal(target.call()?.source, 'client', 'as a client cancellation')
  t.equal(target.call()?.reason, 'the owner stops it', 'with the owner\'s reason')
  for (const probe of [target, sentinel]) {
    // DESIGN §4: a legacy JSON-mode POST cancelled by notification is answered 202 with an empty body.
    const done = await within(probe.http.done, 3000, undefined)
    t.same({ status: done?.status, text: done?.text }, { status: 202, text: '' }, `the cancelled call ${String(probe.id)} ends at once, as a cancelled call does`)
  }
  t.same({ a: await a.failures(), b: await b.failures() }, { a: {}, b: {} }, 'no request was refused for its credentials')
})
