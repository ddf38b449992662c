/**
 * What the plugin adds to Fastify's types. The entry re-exports from this module, so these
 * augmentations reach every application that imports the package.
 */
import type { Registry } from 'prom-client'
import type { McpCancellationApi } from '../lifecycle/cancellation-api.js'
import type { McpServerApi } from '../server/mcp-server.js'
import type { McpPrincipal } from '../identity/principal.js'

/**
 * Whether this node is ready for traffic, for a readiness route (docs/deployment.md). Without `redis`
 * it always is; with it, once both Redis connections are ready and, with sessions, the cluster's
 * revocations are known (after a start or a reconnect).
 */
export interface McpReadiness {
  ready: boolean
  /** `none` without the `redis` option. */
  redis: 'none' | 'connected' | 'disconnected'
  /** `none` without `redis` or without sessions. */
  revocations: 'none' | 'synced' | 'syncing'
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Registers MCP tools, resources, resource templates, prompts and completions. */
    mcp: McpServerApi
    /** The cancellation table: scoped, bounded, shared by every request of this plugin instance. */
    mcpCancellation: McpCancellationApi
    /** The prom-client registry holding the plugin's metrics (the `metrics.registry` option, or the plugin's own); null with `metrics: false`. */
    mcpMetrics: Registry | null
    /** Whether this node is ready for traffic: Redis connected and revocations known (always, without `redis`). */
    mcpReadiness: () => McpReadiness
  }

  interface FastifyRequest {
    /** Who the request speaks for once authenticated (see the `auth` option), or null. */
    mcpPrincipal: McpPrincipal | null
    /** The verified legacy-era session id, or null. */
    mcpSessionId: string | null
    /** The cancellation scope, fixed once the message's era is known; null before. */
    mcpScope: string | null
  }
}

/** The names the plugin decorates a Fastify instance with. */
export const INSTANCE_DECORATORS = ['mcp', 'mcpCancellation', 'mcpMetrics', 'mcpReadiness'] as const
/** The names the plugin decorates requests with (shared by every instance in one server). */
export const REQUEST_DECORATORS = ['mcpPrincipal', 'mcpSessionId', 'mcpScope'] as const
