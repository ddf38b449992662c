/**
 * What a newcomer tripped on (issue 20, item 10), each now told where it happens: a worker tool whose
 * module does not exist is refused when it is registered, naming the path; and a cancellation that a
 * node forwards to the others counts as `forwarded`, not `ignored`.
 */
import { fileURLToPath } from 'node:url'
import t from 'tap'
import Fastify from 'fastify'
import mcpCancellation from '../lib/index.js'
import { startNode } from './helpers/cluster.js'
import { openPost, rawPost } from './helpers/http.js'
import { cancelNotification, toolCall } from './helpers/jsonrpc.js'
import { listenOn } from './helpers/listen.js'
import { scrapeMetrics } from './helpers/metrics.js'
import { RedisServer, redisSkipReason } from './helpers/redis-server.js'
import { waitFor } from './helpers/wait.js'

const skip = redisSkipReason(t)
const EXISTING_WORKER = new URL('./workers/context-report.ts', import.meta.url)

async function appWithTool (t: Tap, worker: { filename: string | URL, name?: string }): Promise<unknown> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(mcpCancellation)
  try {
    app.mcp.tool({ name: 'w', worker })
    return undefined
  } catch (error) {
    return error
  }
}
type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

t.test('a worker tool whose module does not exist is refused at registration, naming the path', async t => {
  const missing = new URL('./workers/no-such-tool.js', import.meta.url)
  for (const filename of [missing, fileURLToPath(missing), missing.href]) {
    const error = await appWithTool(t, { filename }) as { code?: string, message?: string } | undefined
    t.equal(error?.code, 'FST_MCP_INVALID_DEFINITION', `${String(filename)}: FST_MCP_INVALID_DEFINITION`)
    t.match(error?.message, fileURLToPath(missing), 'the message names the path')
    t.match(error?.message, /does not exist/)
  }
  const relative = await appWithTool(t, { filename: './workers/spin.js' }) as { code?: string, message?: string } | undefined
  t.equal(relative?.code, 'FST_MCP_INVALID_DEFINITION', 'a relative path is refused too (it would resolve against the worker entry)')
  t.match(relative?.message, /absolute path or a file URL/)
  t.equal(await appWithTool(t, { filename: EXISTING_WORKER, name: 'report' }), undefined, 'an existing module registers')
  t.equal(await appWithTool(t, { filename: fileURLToPath(EXISTING_WORKER), name: 'report' }), undefined, 'as an absolute path too')
})

t.test('a cancellation a node forwards to the others counts as forwarded, and as recorded where it lands', { skip }, async t => {
  const redis = await RedisServer.start(t)
  const secret = 'newcomer-trips-secret-0123456789abcdef'
  const a = await startNode(t, 'a', { redis: redis.url, secret })
  const b = await startNode(t, 'b', { redis: redis.url, secret })
  const cancels = async (node: typeof a): Promise<Record<string, number>> =>
    (await scrapeMetrics(node.url)).series('mcp_cancellations_total')

  // Both nodes subscribed: a cancel published by B reaches A.
  let delivered = false
  for (let attempt = 0; attempt < 50 && !delivered; attempt++) {
    const call = openPost(a.url, toolCall(`probe-${attempt}`, 'probe', { ms: 10_000 }))
    await waitFor(() => a.probe.calls.some(c => c.requestId === `probe-${attempt}`), 2000)
    t.equal((await rawPost(b.url, cancelNotification(`probe-${attempt}`, 'from b'))).status, 202, 'the cancel on B is accepted')
    delivered = await waitFor(() => a.probe.calls.find(c => c.requestId === `probe-${attempt}`)?.source === 'client', 1000)
    call.destroy()
    await call.done.catch(() => {})
  }
  t.ok(delivered, 'the call on A was cancelled by the notification sent to B')
  const onB = await cancels(b)
  t.ok((onB['result=forwarded,source=client'] ?? 0) >= 1, `B counts result="forwarded" (${JSON.stringify(onB)})`)
  t.equal(onB['result=ignored,source=client'] ?? 0, 0, 'and nothing ignored')
  t.ok(((await cancels(a))['result=recorded,source=client'] ?? 0) >= 1, 'A, where the request ran, counts it recorded')
})

t.test('without redis, a cancellation of nothing in flight stays ignored', async t => {
  const app = Fastify()
  await app.register(mcpCancellation)
  const url = await listenOn(t, app)
  t.equal((await rawPost(url, cancelNotification('nobody-home'))).status, 202)
  const series = (await scrapeMetrics(url)).series('mcp_cancellations_total')
  t.same(series, { 'result=ignored,source=client': 1 })
})
