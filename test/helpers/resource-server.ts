/**
 * A node of the plugin as an OAuth 2.1 resource server (`auth.oauth`) for the token tests, on a port
 * chosen before it listens (the resource URI names it): `whoami` answers the principal its handler saw
 * and counts its calls, so a test sees both who a token made the caller and that a refused request ran
 * nothing; the probe (test/helpers/tools.ts) runs long calls to cancel; the log goes into memory.
 */
import type { Server } from 'node:http'
import Fastify, { type FastifyHttpOptions, type FastifyInstance } from 'fastify'
import mcpCancellation, { type McpCancellationOptions, type OAuthOptions } from '../../lib/index.js'
import type { AuthorizationServer } from './authorization-server.js'
import { rawPost, type RawResponse } from './http.js'
import { toolCall } from './jsonrpc.js'
import { captureLogs } from './logs.js'
import { scrapeMetrics } from './metrics.js'
import { freePort } from './redis-server.js'
import type { Teardown } from './teardown.js'
import { Probe } from './tools.js'

export interface ResourceServerOptions {
  /** Default a free port. */
  port?: number
  /** The canonical resource URI (default this node's own `http://127.0.0.1:<port>/mcp`; nodes behind one name share one). */
  resource?: string
  oauth?: Partial<OAuthOptions>
  /** The rest of the plugin's options (`redis`, …). */
  plugin?: Omit<McpCancellationOptions, 'auth'>
  /** The level logged into memory (default `warn`). */
  logLevel?: string
  /** Fastify's options (`http: { maxHeaderSize }`, …). */
  fastify?: FastifyHttpOptions<Server>
}

/** What `whoami` answers: the principal as the handler saw it (no claims: they differ per token). */
export interface SeenPrincipal {
  id: string
  subject: string
  issuer: string | null
  scopes: string[]
  clientId: string | null
}

export interface ResourceServer {
  app: FastifyInstance
  url: URL
  port: number
  resource: string
  /** Where the challenges send clients: the path-based Protected Resource Metadata URL. */
  metadataUrl: string
  probe: Probe
  /** How many times the `whoami` handler ran. */
  readonly calls: number
  logs: () => Array<Record<string, unknown>>
  /** `mcp_auth_failures_total` by reason, from GET /metrics. */
  failures: () => Promise<Record<string, number>>
  /** A legacy `tools/call whoami` with `headers` (an Authorization header, say), to `target` (default the endpoint). */
  whoami: (headers?: Record<string, string>, target?: URL | string) => Promise<RawResponse>
}

/** Starts a resource server trusting `as` (closed at the end of the test). */
export async function startResourceServer (t: Teardown, as: AuthorizationServer, options: ResourceServerOptions = {}): Promise<ResourceServer> {
  const port = options.port ?? await freePort()
  const url = new URL(`http://127.0.0.1:${port}/mcp`)
  const resource = options.resource ?? url.href
  const logs = captureLogs(options.logLevel ?? 'warn')
  const app = Fastify({ ...logs.options, ...options.fastify })
  t.teardown(() => app.close())
  await app.register(mcpCancellation, {
    serverInfo: { name: 'oauth-resource-server', version: '1.0.0' },
    ...options.plugin,
    auth: { oauth: { resource, authorizationServers: [as.issuer], ...options.oauth } }
  })
  let calls = 0
  app.mcp.tool({
    name: 'whoami',
    inputSchema: { type: 'object', properties: {} },
    handler: (_args, ctx) => {
      calls++
      const { id, subject, issuer, scopes, clientId } = ctx.principal ?? {}
      return { content: [{ type: 'text', text: JSON.stringify({ id, subject, issuer, scopes, clientId }) }] }
    }
  })
  const probe = new Probe()
  probe.register(app)
  await app.listen({ host: '127.0.0.1', port })
  const resourcePath = new URL(resource).pathname
  return {
    app,
    url,
    port,
    resource,
    metadataUrl: `${new URL(resource).origin}/.well-known/oauth-protected-resource${resourcePath === '/' ? '' : resourcePath}`,
    probe,
    get calls () { return calls },
    logs: logs.lines,
    failures: async () => Object.fromEntries(Object.entries((await scrapeMetrics(url)).series('mcp_auth_failures_total')).map(([key, value]) => [key.replace(/^reason=/, ''), value])),
    whoami: async (headers = {}, target = url) => await rawPost(new URL(target), toolCall('whoami-1', 'whoami'), headers)
  }
}

/** The principal in a `whoami` answer (a JSON-RPC response), or undefined when it is not one. */
export function seenPrincipal (response: RawResponse): SeenPrincipal | undefined {
  try {
    const text = (JSON.parse(response.text) as { result?: { content?: Array<{ text?: string }> } }).result?.content?.[0]?.text
    return text === undefined ? undefined : JSON.parse(text) as SeenPrincipal
  } catch {
    return undefined
  }
}

/** `Authorization: Bearer <token>`. */
export function bearer (token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` }
}
