-- Store::admission_round. ARGV 12: the caller's fencing token, 13: a seed in [1, 2^31 - 2] for
-- random picks; KEYS 14..: the heartbeat shards to sweep (see due_beats.lua). Answers {epoch, 0}
-- when the token is stale, else {epoch, 1, called, expired, abandoned, no_shows}.
local fence, seed = tonumber(ARGV[12]), tonumber(ARGV[13])
local l = limits()

if not leads(fence) then
  return {epoch, 0}
end

-- Heal capacity first: expired passes, no-shows, waiters who stopped polling.
-- Each visitor that goes leaves the visitors index too: work in proportion to what expired.
local expired_ids = redis.call('ZRANGEBYSCORE', K_PASSES, '-inf', int(now))
local expired = redis.call('ZREMRANGEBYSCORE', K_PASSES, '-inf', int(now))
for _, id in ipairs(expired_ids) do
  forget_if_gone(id)
end
local no_shows = redis.call('ZRANGEBYSCORE', K_CALLED, '-inf', int(now))
redis.call('ZREMRANGEBYSCORE', K_CALLED, '-inf', int(now))
for _, id in ipairs(no_shows) do
  redis.call('HDEL', K_PLACES, id)
  forget_if_gone(id)
end
-- A lapsed heartbeat in line is an abandoned visitor; a called visitor's (kept until the claim)
-- just goes. Each swept shard's score becomes its earliest deadline left.
local abandoned = 0
for k = 14, #KEYS do
  local shard = KEYS[k]
  local beats = redis.call('HGETALL', shard)
  local earliest
  for i = 1, #beats, 2 do
    local id, deadline = beats[i], tonumber(beats[i + 1])
    if not deadline then
      corrupt('heartbeat of ' .. id)
    end
    if deadline <= now then
      redis.call('HDEL', shard, id)
      abandoned = abandoned + redis.call('ZREM', K_QUEUE, id)
      forget_if_gone(id)
    elseif not earliest or deadline < earliest then
      earliest = deadline
    end
  end
  if earliest then
    redis.call('ZADD', K_BEATS, int(earliest), shard)
  else
    redis.call('ZREM', K_BEATS, shard)
  end
end
redis.call('ZREMRANGEBYSCORE', K_REVOKED, '-inf', int(now))

-- Park-Miller: exact in doubles, uniform enough to pick among fewer than 2^31.
local function random_below(n)
  seed = (seed * 16807) % 2147483647
  return math.floor(seed / 2147483647 * n)
end

local free = math.max(l.capacity - occupancy(), 0)
local tokens, at = refill(l)
local n = 0
if l.admitting and not recovering(l.session_ms) then
  n = math.min(free, whole(tokens), redis.call('ZCARD', K_QUEUE))
end
local called = 0
for _ = 1, n do
  local k = 0
  if l.random then
    k = random_below(redis.call('ZCARD', K_QUEUE))
  end
  local picked = redis.call('ZRANGE', K_QUEUE, k, k)
  local id = picked[1]
  if not id then
    break
  end
  -- The place stays recorded until the claim, to measure the wait.
  redis.call('HSET', K_PLACES, id, int(place_of(id)))
  redis.call('ZREM', K_QUEUE, id)
  redis.call('ZADD', K_CALLED, int(now + l.claim_window_ms), id)
  called = called + 1
end
save_bucket(tokens - called, at)
record_admissions(called)
redis.call('HINCRBY', K_COUNTERS, 'expired_total', expired)
redis.call('HINCRBY', K_COUNTERS, 'abandoned_total', abandoned)
redis.call('HINCRBY', K_COUNTERS, 'no_show_total', #no_shows)
return {epoch, 1, called, expired, abandoned, #no_shows}
