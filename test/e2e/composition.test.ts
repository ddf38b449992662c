/**
 * The plugin among the Fastify plugins an operator adds for load: `@fastify/rate-limit` keyed by the
 * plugin's scope, and `@fastify/under-pressure`. Each refuses before any MCP work is done (no handler
 * runs, nothing is counted as an MCP request) with its own status and `Retry-After`, and the client still
 * reads a JSON-RPC error, as from every other refusal of the endpoint. docs/fairness.md has the set-up.
 */
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import fastifyRateLimit from '@fastify/rate-limit'
import fastifyUnderPressure from '@fastify/under-pressure'
import { rawPost } from '../helpers/http.js'
import { toolCall } from '../helpers/jsonrpc.js'
import { listenPlugin } from '../helpers/listen.js'
import { metricSum } from '../helpers/metrics.js'
import { registerCounter } from '../helpers/tools.js'
import { waitFor } from '../helpers/wait.js'

const tenant = (name: string): Record<string, string> => ({ 'x-tenant': name })
const auth = { principal: (request: { headers: Record<string, unknown> }) => request.headers['x-tenant'] as string | undefined, required: false }

t.test('@fastify/rate-limit keyed by the MCP scope: one tenant\'s limit never touches another; the refusal is a JSON-RPC error', async t => {
  let counter = { calls: 0 }
  const server = await listenPlugin(t, { auth }, {}, app => { counter = registerCounter(app) }, async app => {
    // Registered before the plugin, so its hook reaches the MCP routes; `preHandler`, so that the
    // plugin's authentication (a route onRequest hook) has set the principal the key is made of.
    await app.register(fastifyRateLimit, {
      max: 3,
      timeWindow: 60_000,
      hook: 'preHandler',
      keyGenerator: request => (request.server as FastifyInstance).mcpCancellation.scope(request)
    })
  })
  for (let i = 1; i <= 3; i++) t.equal((await rawPost(server.url, toolCall(i, 'count'), tenant('a'))).status, 200, `A's call ${i} is served`)
  const refused = await rawPost(server.url, toolCall(4, 'count'), tenant('a'))
  t.equal(refused.status, 429, 'A\'s fourth call is refused by the rate limit')
  t.ok(Number(refused.headers.get('retry-after')) > 0, 'with Retry-After')
  t.match(JSON.parse(refused.text), { jsonrpc: '2.0', error: { code: -32000, message: /^Too Many Requests: Rate limit exceeded/ } }, 'as a JSON-RPC error')
  t.equal(counter.calls, 3, 'the refused call never reached the tool')

  for (let i = 1; i <= 3; i++) t.equal((await rawPost(server.url, toolCall(i, 'count'), tenant('b'))).status, 200, `B (same address, another principal) is served: call ${i}`)
  t.equal((await rawPost(server.url, toolCall(9, 'count'))).status, 200, 'an anonymous client is its address, a third key')
  t.equal(await metricSum(server.url, 'mcp_requests_total', { method: 'tools/call' }), 7, 'the refusal is not an MCP request in the metrics')
})

t.test('@fastify/under-pressure: a node under pressure answers 503 + Retry-After before any MCP work, as a JSON-RPC error', async t => {
  let healthy = true
  let counter = { calls: 0 }
  const server = await listenPlugin(t, {}, {}, app => { counter = registerCounter(app) }, async app => {
    await app.register(fastifyUnderPressure, { healthCheck: async () => healthy, healthCheckInterval: 20, retryAfter: 7 })
  })
  t.equal((await rawPost(server.url, toolCall(1, 'count'))).status, 200, 'served while healthy')

  healthy = false
  t.ok(await waitFor(async () => (await rawPost(server.url, { jsonrpc: '2.0', id: 'probe', method: 'ping' })).status === 503, 2000), 'under pressure once the check fails')
  const refused = await rawPost(server.url, toolCall(2, 'count'))
  t.equal(refused.status, 503, 'a tool call is a 503')
  t.equal(refused.headers.get('retry-after'), '7', 'with under-pressure\'s Retry-After')
  t.match(JSON.parse(refused.text), { jsonrpc: '2.0', error: { code: -32000, message: /^Service Unavailable/ } }, 'as a JSON-RPC error')
  t.notMatch(refused.text, /Internal error/, 'not the 500 of a failure')
  t.equal(counter.calls, 1, 'no handler ran')

  healthy = true
  t.ok(await waitFor(async () => (await rawPost(server.url, toolCall(3, 'count'))).status === 200, 2000), 'served again once the pressure is gone')
  // (GET /metrics is refused under pressure as well: read once it is over.)
  t.equal(await metricSum(server.url, 'mcp_requests_total', { method: 'tools/call' }), 2, 'no MCP work was counted for the refused calls')
})
