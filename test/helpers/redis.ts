/** Reading what the plugin keeps in Redis: keys (SCAN, never KEYS), Pub/Sub channels and their subscribers. */
import type { Redis } from 'ioredis'

/** Every key matching `pattern`, sorted. */
export async function scanKeys (redis: Redis, pattern: string): Promise<string[]> {
  const keys = new Set<string>()
  let cursor = '0'
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000)
    for (const key of batch) keys.add(key)
    cursor = next
  } while (cursor !== '0')
  return [...keys].sort()
}

/** The Pub/Sub channels matching `pattern` that have a subscriber. */
export async function channels (redis: Redis, pattern: string): Promise<string[]> {
  return (await redis.pubsub('CHANNELS', pattern) as string[]).sort()
}

/** How many subscribers `channel` has. */
export async function subscribers (redis: Redis, channel: string): Promise<number> {
  const [, count] = await redis.pubsub('NUMSUB', channel) as [string, number | string]
  return Number(count)
}
