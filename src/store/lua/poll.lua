-- Store::poll. ARGV 12: id; KEYS 13: the visitor's heartbeat shard. Answers {epoch, 0} (unknown),
-- {epoch, 1, position, queued} (waiting) or {epoch, 2, expires_at, has_waited, waited_ms}
-- (admitted).
local id = ARGV[12]
local l = limits()
local expires = redis.call('ZSCORE', K_PASSES, id)
if expires then
  return {epoch, 2, tonumber(expires), 0, 0}
end
if redis.call('ZREM', K_CALLED, id) == 1 then
  -- A round that calls a visitor leaves its heartbeat (it knows no shard): it goes with the claim.
  redis.call('HDEL', KEYS[13], id)
  local expires_at = now + l.session_ms
  redis.call('ZADD', K_PASSES, int(expires_at), id)
  local place = tonumber(redis.call('HGET', K_PLACES, id))
  if place then
    redis.call('HDEL', K_PLACES, id)
    return {epoch, 2, expires_at, 1, now - div1000(place)}
  end
  return {epoch, 2, expires_at, 0, 0}
end
local place = place_of(id)
if place then
  local position = rank_of(id, place) + 1
  beat(KEYS[13], id, int(now + l.abandon_after_ms))
  return {epoch, 1, position, redis.call('ZCARD', K_QUEUE)}
end
return {epoch, 0}
