/**
 * A flood of listens from one scope (issue 22, Bounds): 10 000 `subscriptions/listen` attempts from one
 * client address hold at most `events.maxListenersPerScope` streams open, every other attempt is a 429
 * with a JSON-RPC error, memory stays bounded (`mcp_listeners` and the heap are measured), and a client
 * of another scope still listens and calls tools meanwhile.
 */
import http from 'node:http'
import t from 'tap'
import { listenPlugin } from '../helpers/listen.js'
import { metricValue } from '../helpers/metrics.js'
import { modernHeaders, modernMeta } from '../helpers/jsonrpc.js'
import { waitFor } from '../helpers/wait.js'
import { collector, heapAfterGc } from '../helpers/process.js'

const ATTEMPTS = 10_000
const CONCURRENCY = 50
const PER_SCOPE = 16

interface Attempt {
  status: number
  /** The JSON-RPC error code of a refusal. */
  code: number | undefined
  retryAfter: string | undefined
  /** An accepted stream, left open until the test ends it. */
  response: http.IncomingMessage | undefined
}

/** POSTs a listen; a 200 stays open (its response is returned unread), anything else is read whole. */
async function listen (url: URL, agent: http.Agent, id: number, user?: string): Promise<Attempt> {
  const payload = JSON.stringify({ jsonrpc: '2.0', id, method: 'subscriptions/listen', params: { _meta: modernMeta(), notifications: { toolsListChanged: true } } })
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    ...modernHeaders('subscriptions/listen') as Record<string, string>,
    'content-length': String(Buffer.byteLength(payload))
  }
  if (user !== undefined) headers['x-user'] = user
  return await new Promise<Attempt>((resolve, reject) => {
    const request = http.request(url, { method: 'POST', agent, headers }, response => {
      if (response.statusCode === 200) {
        resolve({ status: 200, code: undefined, retryAfter: undefined, response })
        return
      }
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => { chunks.push(chunk) })
      response.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code: number } }
        resolve({ status: response.statusCode ?? 0, code: body.error?.code, retryAfter: response.headers['retry-after'] as string | undefined, response: undefined })
      })
    })
    request.on('error', reject)
    request.end(payload)
  })
}

t.test(`${ATTEMPTS} listens from one scope keep ${PER_SCOPE} open, refuse the rest, and leave other scopes served`, async t => {
  const gc = collector()
  const { app, url } = await listenPlugin(t, {
    events: { maxListenersPerScope: PER_SCOPE },
    auth: { required: false, principal: request => typeof request.headers['x-user'] === 'string' ? request.headers['x-user'] : null }
  })
  const metrics = new URL('/metrics', url)
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY + PER_SCOPE + 2 })
  const open: http.IncomingMessage[] = []
  t.teardown(() => {
    for (const response of open) response.destroy()
    agent.destroy()
  })

  // Warm every path once (an accepted listen, a refused one), so what is created lazily is in the baseline.
  const warm = await listen(url, agent, 0, 'warm')
  warm.response?.destroy()
  t.ok(await waitFor(async () => await metricValue(metrics, 'mcp_listeners', { era: 'modern' }) === 0, 5000), 'the warm-up listen ended')
  const heapBefore = await heapAfterGc(gc)
  const rssBefore = process.memoryUsage().rss

  const statuses = new Map<number, number>()
  const refusals = new Set<string>()
  let next = 1
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next <= ATTEMPTS) {
      const attempt = await listen(url, agent, next++)
      statuses.set(attempt.status, (statuses.get(attempt.status) ?? 0) + 1)
      if (attempt.response !== undefined) open.push(attempt.response)
      else refusals.add(`${attempt.status} ${String(attempt.code)} retry-after=${String(attempt.retryAfter)}`)
    }
  }))

  t.same(Object.fromEntries(statuses), { 200: PER_SCOPE, 429: ATTEMPTS - PER_SCOPE }, 'the scope\'s bound is held; every other attempt is a 429')
  t.same([...refusals], ['429 -32603 retry-after=1'], 'each refusal is a JSON-RPC error with Retry-After')
  t.equal(await metricValue(metrics, 'mcp_listeners', { era: 'modern' }), PER_SCOPE, 'mcp_listeners shows the bound')

  // Another scope is served meanwhile: it listens, and it calls a tool.
  const other = await listen(url, agent, 1, 'alice')
  t.equal(other.status, 200, 'another scope still listens')
  if (other.response !== undefined) open.push(other.response)
  const echo = await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { 'content-type': 'application/json', accept: 'application/json', 'x-user': 'bob', ...modernHeaders('tools/call', 'probe') as Record<string, string> },
    payload: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'probe', arguments: {}, _meta: modernMeta() } }
  })
  t.equal(echo.statusCode, 200, 'and calls a tool')

  const heapGrowth = await heapAfterGc(gc) - heapBefore
  const rssGrowth = process.memoryUsage().rss - rssBefore
  t.comment(`heap +${(heapGrowth / 1048576).toFixed(1)} MiB, rss +${(rssGrowth / 1048576).toFixed(1)} MiB after ${ATTEMPTS} attempts (${PER_SCOPE + 1} streams open)`)
  t.ok(heapGrowth < 8 * 1048576, `the heap grew by less than 8 MiB (${(heapGrowth / 1048576).toFixed(1)} MiB): nothing is kept per refused attempt`)

  for (const response of open.splice(0)) response.destroy()
  t.ok(await waitFor(async () => await metricValue(metrics, 'mcp_listeners', { era: 'modern' }) === 0, 5000), 'closing the streams frees every slot')
  const again = await listen(url, agent, 3)
  t.equal(again.status, 200, 'the flooded scope listens again once its streams are closed')
  again.response?.destroy()
})
