-- Store::leave_queue. ARGV 4: id; KEYS 13: the visitor's heartbeat shard. Answers
-- {epoch, left (0 or 1)}.
local id = ARGV[4]
redis.call('ZREM', K_CALLED, id)
redis.call('HDEL', KEYS[13], id)
if place_of(id) then
  redis.call('HDEL', K_PLACES, id)
  return {epoch, redis.call('ZREM', K_QUEUE, id)}
end
return {epoch, 0}
