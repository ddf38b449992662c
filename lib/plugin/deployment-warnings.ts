import type { FastifyInstance } from 'fastify'
import type { Settings } from './options.js'

/**
 * A forwarded chain longer than any real one, of addresses nobody's proxies have (the RFC 5737
 * documentation range): the socket peer and 31 X-Forwarded-For entries. A trust setting under which
 * `request.ip` is the leftmost entry trusts every hop.
 */
const PROBE_CHAIN = Array.from({ length: 32 }, (_, i) => `203.0.113.${i + 1}`)

/**
 * What `request.ip` is, on this instance, for a request that came through PROBE_CHAIN. Fastify keeps
 * `trustProxy` out of `initialConfig`; the request class it built from it is on the instance under its
 * symbol `fastify.Request` (node_modules/fastify/lib/symbols.js), so the class's own `ip` getter answers,
 * whatever form the setting took (true, a CIDR list, a function). Undefined when that cannot be read.
 */
function probedIp (fastify: FastifyInstance): unknown {
  for (let holder: object | null = fastify; holder !== null; holder = Object.getPrototypeOf(holder) as object | null) {
    const key = Object.getOwnPropertySymbols(holder).find(symbol => symbol.description === 'fastify.Request')
    if (key === undefined) continue
    const prototype = ((holder as Record<symbol, unknown>)[key] as { prototype?: unknown } | undefined)?.prototype
    if (typeof prototype !== 'object' || prototype === null) return undefined
    const request = Object.create(prototype) as { raw: unknown, ip: unknown }
    const [peer, ...forwarded] = PROBE_CHAIN
    request.raw = { headers: { 'x-forwarded-for': forwarded.reverse().join(', ') }, socket: { remoteAddress: peer } }
    try {
      return request.ip
    } catch {
      return undefined // the application's trust function threw on an address it never expected
    }
  }
  return undefined
}

/**
 * Anonymous requests are scoped by `request.ip`; when every hop is trusted it is the leftmost
 * X-Forwarded-For entry, which the client writes, so the client chooses its scope.
 */
function warnIfClientsChooseTheirScope (fastify: FastifyInstance, settings: Settings): void {
  if (settings.auth !== undefined && settings.auth.required) return
  if (probedIp(fastify) !== PROBE_CHAIN[PROBE_CHAIN.length - 1]) return
  fastify.log.warn('fastify-mcp-cancellation: trustProxy trusts every X-Forwarded-For hop and anonymous requests are allowed, so an ' +
    'anonymous client chooses its own address scope (the leftmost entry, which it writes itself): it can enter another address\'s ' +
    'scope and cancel its requests, or rotate scopes to multiply its quotas. Set trustProxy to your proxies\' addresses or CIDRs ' +
    '(or a function that checks them), or require authentication')
}

/**
 * Fastify's `requestTimeout` defaults to 0, and then a client that sends its body a byte at a time
 * holds a connection (and a socket, a parser, a slot in every bound) for ever The
 * server's own property is read, not `initialConfig`: a `serverFactory` server keeps Node's default,
 * and HTTP/2 servers have none (their sessions time out instead).
 */
function warnIfNoRequestTimeout (fastify: FastifyInstance): void {
  if ((fastify.server as { requestTimeout?: unknown }).requestTimeout !== 0) return
  fastify.log.warn('fastify-mcp-cancellation: the server has no request timeout, so a client that sends its body slowly keeps its ' +
    'connection for ever. Set Fastify\'s requestTimeout (say 30000), with http: { headersTimeout } no longer than it (Node applies ' +
    'the longer of the two) and http: { connectionsCheckingInterval } a fraction of it (Node checks only that often; 30 s by default)')
}

/** What the server's configuration leaves open, said once when the plugin registers. */
export function warnAboutDeployment (fastify: FastifyInstance, settings: Settings): void {
  warnIfClientsChooseTheirScope(fastify, settings)
  warnIfNoRequestTimeout(fastify)
}
