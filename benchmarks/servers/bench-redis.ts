/**
 * The Redis a benchmark server uses, from the benchmark's environment, as the demo reads its own
 * (example/redis-option.ts): BENCH_REDIS_URL (one URL, or a Cluster's comma-separated seeds), or
 * BENCH_REDIS_SENTINELS with BENCH_REDIS_SENTINEL_NAME.
 */
import { redisOption } from '../../example/redis-option.js'

export function benchRedis (): ReturnType<typeof redisOption> {
  return redisOption({
    MCP_REDIS_URL: process.env.BENCH_REDIS_URL,
    MCP_REDIS_SENTINELS: process.env.BENCH_REDIS_SENTINELS,
    MCP_REDIS_SENTINEL_NAME: process.env.BENCH_REDIS_SENTINEL_NAME
  })
}
