-- Store::end_pass. ARGV 12: id, 13: the channel that tells every instance about revocations.
-- Answers {epoch, had (0 or 1), until}.
local id, channel = ARGV[12], ARGV[13]
local l = limits()
local had = tonumber(redis.call('ZSCORE', K_PASSES, id))
if had then
  redis.call('ZREM', K_PASSES, id)
else
  -- An unclaimed admission's place was kept to measure the wait; a place in line stays.
  had = tonumber(redis.call('ZSCORE', K_CALLED, id))
  if had then
    redis.call('ZREM', K_CALLED, id)
    redis.call('HDEL', K_PLACES, id)
  end
end
local until_ = math.max(had or now, now + l.session_ms)
redis.call('ZADD', K_REVOKED, int(until_), id)
redis.call('PUBLISH', channel, int(until_) .. ' ' .. id)
if had then
  redis.call('HINCRBY', K_COUNTERS, 'revoked_total', 1)
  return {epoch, 1, until_}
end
return {epoch, 0, until_}
