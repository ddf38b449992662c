import { Redis } from 'ioredis'
import type { McpCancellationOptions } from '../lib/index.js'

export interface RedisEnv {
  MCP_REDIS_URL?: string | undefined
  MCP_REDIS_SENTINELS?: string | undefined
  MCP_REDIS_SENTINEL_NAME?: string | undefined
}

/**
 * The client options the plugin uses for a URL (lib/cluster/redis-bus.ts, PUBLISHER_OPTIONS), for the
 * Sentinel client the demo makes itself: nothing queued while Redis is away, nothing resent after a
 * reconnect, reconnecting every second at most.
 */
const SENTINEL_CLIENT = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  retryStrategy: (attempt: number) => Math.min(attempt * 100, 1000)
} as const

/**
 * The `redis` option from the environment: MCP_REDIS_URL, one URL (standalone) or a comma list of seed
 * URLs (a Redis Cluster); or MCP_REDIS_SENTINELS (`host:port,…`) with MCP_REDIS_SENTINEL_NAME, a primary
 * that Sentinel manages (a client the demo makes and closes with the app).
 */
export function redisOption (env: RedisEnv): { redis: McpCancellationOptions['redis'], close: () => void } {
  const sentinels = env.MCP_REDIS_SENTINELS
  if (sentinels === undefined || sentinels === '') {
    const urls = (env.MCP_REDIS_URL ?? '').split(',').map(url => url.trim()).filter(url => url !== '')
    return { redis: urls.length === 0 ? undefined : urls.length === 1 ? urls[0] : urls, close: () => {} }
  }
  if (env.MCP_REDIS_URL !== undefined && env.MCP_REDIS_URL !== '') throw new Error('MCP_REDIS_URL and MCP_REDIS_SENTINELS: give one of them')
  const name = env.MCP_REDIS_SENTINEL_NAME
  if (name === undefined || name === '') throw new Error('MCP_REDIS_SENTINELS needs MCP_REDIS_SENTINEL_NAME, the name of the primary the sentinels monitor')
  const addresses = sentinels.split(',').map(entry => {
    const match = /^\s*([^\s:]+|\[[0-9a-fA-F:]+\]):(\d{1,5})\s*$/.exec(entry)
    const port = Number(match?.[2])
    if (match === null || port < 1 || port > 65535) throw new Error(`MCP_REDIS_SENTINELS: ${JSON.stringify(entry.trim())} is not host:port`)
    return { host: match[1]!.replace(/^\[|\]$/g, ''), port }
  })
  const client = new Redis({ sentinels: addresses, name, ...SENTINEL_CLIENT })
  // Logged by the plugin's bus; without a listener ioredis would print each reconnect attempt.
  client.on('error', () => {})
  return { redis: client, close: () => { client.disconnect() } }
}
