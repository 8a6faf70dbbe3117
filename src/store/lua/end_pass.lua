-- Store::end_pass. ARGV 12: id, 13: the channel that tells every instance about revocations,
-- 14: the reason ('ended' or 'shared').
-- Answers {epoch, had (0 or 1), until}.
-- A pass revoked for sharing is also kept as the member 'shared:<id>' (visitor ids hold no ':'),
-- so that an instance reloading the set learns why, and its holders are told.
local id, channel, reason = ARGV[12], ARGV[13], ARGV[14]
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
if reason == 'shared' then
  redis.call('ZADD', K_REVOKED, int(until_), 'shared:' .. id)
end
redis.call('PUBLISH', channel, int(until_) .. ' ' .. id .. ' ' .. reason)
forget_if_gone(id)
if had then
  redis.call('HINCRBY', K_COUNTERS, 'revoked_total', 1)
  return {epoch, 1, until_}
end
return {epoch, 0, until_}
