/**
 * The Lua that keeps the Redis task store within its bounds (`TaskBounds` in ./task-store.ts),
 * prepended to each script that writes a task, so every bound is checked and kept atomically.
 *
 * Besides each task's hash and lease, the store keeps, all under the prefix:
 * - `task-live:<scope>`: a set of the scope's live tasks;
 * - `task-ended:<scope>`: a sorted set of the scope's ended tasks by expiry (oldest first);
 * - `task-index`: a hash: for each task kept, its state, size, `:` and scope (state `l` live, `x` live
 *   but its lease lapsed: its node died, it no longer counts for its scope, or `e` ended); and for each
 *   scope with live tasks, `#<scope>`: their size;
 * - `task-expiry`: a sorted set of every task kept by when its hash expires (its size is the count kept);
 * - `task-ranking:count` and `task-ranking:bytes`: sorted sets of the scopes by how many ended tasks,
 *   and how many bytes of them, they keep: the largest scopes, found at once;
 * - `task-bytes`: the size of all the tasks kept.
 * A task's size is its hash's fields and values, in bytes. Redis expires the hashes; the indexes drop
 * what expired on the next write, and each key expires when the last task it knows of does, so nothing
 * is left once the tasks have expired.
 *
 * Scripts pass KEYS: the task, its lease, its scope's live set and ended set, then `task-index`,
 * `task-expiry`, `task-ranking:count`, `task-ranking:bytes`, `task-bytes`; ARGV: the key prefix, now,
 * the task id and its scope, then their own arguments. Other scopes' keys are named from the prefix,
 * which on a Redis Cluster carries the store's hash tag: every key of the store is in one slot.
 */
export const TASK_BOUNDS = `
local P, NOW, ID, SCOPE = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local INDEX, EXPIRY, RANK_COUNT, RANK_BYTES, BYTES = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local evicted = { scope = 0, global = 0 }

local function indexed (id)
  local entry = redis.call('HGET', INDEX, id)
  if not entry then return nil end
  local colon = string.find(entry, ':', 1, true)
  return string.sub(entry, 1, 1), tonumber(string.sub(entry, 2, colon - 1)), string.sub(entry, colon + 1)
end

local function addLiveBytes (scope, bytes)
  if bytes ~= 0 and tonumber(redis.call('HINCRBY', INDEX, '#' .. scope, bytes)) <= 0 then redis.call('HDEL', INDEX, '#' .. scope) end
end

local function addEnded (scope, count, bytes)
  if tonumber(redis.call('ZINCRBY', RANK_COUNT, count, scope)) > 0 then
    redis.call('ZINCRBY', RANK_BYTES, bytes, scope)
  else
    redis.call('ZREM', RANK_COUNT, scope)
    redis.call('ZREM', RANK_BYTES, scope)
  end
end

-- Moves a task the index has in state was with size before (nil, 0: not indexed) to state l, x or e
-- with size (no state: forgets it), and every count with it. A new state takes its hash's expiry.
local function setIndex (id, scope, was, before, state, size)
  local ended = P .. 'task-ended:' .. scope
  addLiveBytes(scope, (state == 'l' and size or 0) - (was == 'l' and before or 0))
  if was == 'e' then
    addEnded(scope, -1, -before)
    redis.call('ZREM', ended, id)
  end
  if size ~= before then redis.call('INCRBY', BYTES, size - before) end
  if not state then
    redis.call('HDEL', INDEX, id)
    redis.call('ZREM', EXPIRY, id)
    return
  end
  if state ~= was or size ~= before then redis.call('HSET', INDEX, id, state .. size .. ':' .. scope) end
  if state == was then return end
  local expiresAt = NOW + math.max(0, redis.call('PTTL', P .. 'task:' .. id))
  redis.call('ZADD', EXPIRY, expiresAt, id)
  if state == 'e' then
    addEnded(scope, 1, size)
    redis.call('ZADD', ended, expiresAt, id)
    if NOW + redis.call('PTTL', ended) < expiresAt then redis.call('PEXPIRE', ended, math.ceil(expiresAt - NOW)) end
  end
end

-- Forgets a task: its hash and lease, and what the indexes know of it; its size.
local function drop (id)
  redis.call('DEL', P .. 'task:' .. id, P .. 'task-lease:' .. id)
  local state, size, scope = indexed(id)
  if not state then return 0 end
  if state == 'l' then redis.call('SREM', P .. 'task-live:' .. scope, id) end
  setIndex(id, scope, state, size, nil, 0)
  return size
end

-- Forgets up to limit tasks that have expired; how many.
local function dropExpired (limit)
  local expired = redis.call('ZRANGEBYSCORE', EXPIRY, '-inf', NOW, 'LIMIT', 0, limit)
  for _, id in ipairs(expired) do drop(id) end
  return #expired
end

-- Drops the oldest ended task of a scope: its size, or nil when it has none.
local function dropOldestOf (scope)
  local oldest = redis.call('ZRANGE', P .. 'task-ended:' .. scope, 0, 0)[1]
  if oldest then return drop(oldest) end
end

-- What the scope keeps, with live tasks.
local function usageOf (scope, live)
  return {
    live = live,
    liveBytes = tonumber(redis.call('HGET', INDEX, '#' .. scope) or '0'),
    ended = tonumber(redis.call('ZSCORE', RANK_COUNT, scope) or '0'),
    endedBytes = tonumber(redis.call('ZSCORE', RANK_BYTES, scope) or '0')
  }
end

-- Drops the scope's own oldest ended tasks until it keeps, with count more tasks of size more bytes, no more than its quotas.
local function fitScope (scope, usage, maxKept, maxBytes, count, size)
  while usage.ended > 0 and (usage.live + usage.ended + count > maxKept or usage.liveBytes + usage.endedBytes + size > maxBytes) do
    local dropped = dropOldestOf(scope)
    if not dropped then return end
    usage.ended = usage.ended - 1
    usage.endedBytes = usage.endedBytes - dropped
    evicted.scope = evicted.scope + 1
  end
end

-- Over maxTasks or maxTaskBytes: drops what expired, then ended tasks of the scopes keeping the most,
-- oldest first. Nothing ended left: what is over the cap is live, and stays.
local function keepCaps (maxTasks, maxBytes)
  while true do
    local byCount = redis.call('ZCARD', EXPIRY) > maxTasks
    if not byCount and tonumber(redis.call('GET', BYTES) or '0') <= maxBytes then return end
    if dropExpired(1) == 0 then
      local largest = redis.call('ZREVRANGE', byCount and RANK_COUNT or RANK_BYTES, 0, 0)[1]
      if not largest or not dropOldestOf(largest) then return end
      evicted.global = evicted.global + 1
    end
  end
end

local function sizeOfHash (key)
  local size = 0
  for _, part in ipairs(redis.call('HGETALL', key)) do size = size + #part end
  return size
end

-- What a script that wrote a task answers, once the indexes expire with the last task they know of
-- (within a second after it, so that they are not written again on every write): 1, then how many
-- tasks its scope's quotas and the caps dropped. The rankings may have been made anew meanwhile.
local function written ()
  local last = redis.call('ZRANGE', EXPIRY, -1, -1, 'WITHSCORES')[2]
  if not last then
    redis.call('DEL', INDEX, BYTES, RANK_COUNT, RANK_BYTES)
  else
    local needed = math.max(1, math.ceil(tonumber(last) - NOW))
    local kept, ranked = redis.call('PTTL', EXPIRY), redis.call('PTTL', RANK_COUNT)
    if kept < needed or kept > needed + 1000 or ranked == -1 or (ranked >= 0 and ranked < needed) then
      local ms = kept < needed and needed + 1000 or needed
      for _, key in ipairs({ INDEX, EXPIRY, RANK_COUNT, RANK_BYTES, BYTES }) do redis.call('PEXPIRE', key, ms) end
    end
  end
  return { 1, evicted.scope, evicted.global }
end

dropExpired(16)
`
