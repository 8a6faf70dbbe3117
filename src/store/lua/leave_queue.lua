-- Store::leave_queue. ARGV 4: id; KEYS 14: the visitor's heartbeat shard. Answers
-- {epoch, left (0 or 1)}.
local id = ARGV[4]
redis.call('ZREM', K_CALLED, id)
redis.call('HDEL', KEYS[14], id)
local left = 0
if place_of(id) then
  redis.call('HDEL', K_PLACES, id)
  left = redis.call('ZREM', K_QUEUE, id)
end
forget_if_gone(id)
return {epoch, left}
