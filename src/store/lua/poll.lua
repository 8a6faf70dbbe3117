-- Store::poll. ARGV 12: id; KEYS 14: the visitor's heartbeat shard. Answers {epoch, 0} (unknown),
-- {epoch, 1, position, queued} (waiting) or {epoch, 2, expires_at, claimed_now, called_at}
-- (admitted).
local id = ARGV[12]
local l = limits()
local expires = redis.call('ZSCORE', K_PASSES, id)
if expires then
  return {epoch, 2, tonumber(expires), 0, 0}
end
local claim_by = tonumber(redis.call('ZSCORE', K_CALLED, id))
if claim_by then
  redis.call('ZREM', K_CALLED, id)
  -- A round that calls a visitor leaves its heartbeat (it knows no shard): it goes with the claim.
  redis.call('HDEL', KEYS[14], id)
  redis.call('HDEL', K_PLACES, id)
  local expires_at = now + l.session_ms
  redis.call('ZADD', K_PASSES, int(expires_at), id)
  return {epoch, 2, expires_at, 1, claim_by - l.claim_window_ms}
end
local place = place_of(id)
if place then
  local position = rank_of(id, place) + 1
  beat(KEYS[14], id, int(now + l.abandon_after_ms))
  return {epoch, 1, position, redis.call('ZCARD', K_QUEUE)}
end
return {epoch, 0}
