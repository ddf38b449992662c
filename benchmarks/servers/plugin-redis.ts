/**
 * servers/plugin.ts plus the Redis of `benchRedis()` (one Redis or a Cluster): compared with `plugin` it
 * shows what the Redis store costs a request that is never cancelled (nothing should go to Redis on that path).
 */
import { benchRedis } from './bench-redis.js'
import { servePlugin } from './plugin-app.js'

const { redis } = benchRedis()
if (redis === undefined) throw new Error('plugin-redis needs BENCH_REDIS_URL or BENCH_REDIS_SENTINELS')
await servePlugin({ redis })
