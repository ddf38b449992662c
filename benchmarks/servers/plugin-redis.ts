/**
 * servers/plugin.ts plus `redis: BENCH_REDIS_URL`: compared with `plugin` it shows what the Redis store
 * costs a request that is never cancelled (nothing should go to Redis on that path).
 */
import { servePlugin } from './plugin-app.js'

const redis = process.env.BENCH_REDIS_URL
if (redis === undefined || redis === '') throw new Error('plugin-redis needs BENCH_REDIS_URL')
await servePlugin({ redis })
