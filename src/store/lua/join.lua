-- Store::join. ARGV 12: id, 13: the ticket's place ('' for no ticket), 14: the ticket's epoch;
-- KEYS 13: the visitor's heartbeat shard. A ticket from another epoch was issued before the data
-- was lost: its place is restored. Answers {epoch, place, position, queued}.
local id, restore = ARGV[12], ARGV[13]
if ARGV[14] == epoch then
  restore = ''
end
local l = limits()
local place = place_of(id)
if not place then
  local last = tonumber(redis.call('HGET', K_COUNTERS, 'last_place')) or 0
  if restore ~= '' then
    place = tonumber(restore)
    if not place then
      return redis.error_reply('ERR the place to restore is not a number')
    end
    last = math.max(last, place)
  else
    place = math.max(last + 1, now * 1000)
    last = place
  end
  redis.call('HSET', K_COUNTERS, 'last_place', int(last))
  redis.call('ZADD', K_QUEUE, int(place), id)
end
beat(KEYS[13], id, int(now + l.abandon_after_ms))
return {epoch, place, rank_of(id, place) + 1, redis.call('ZCARD', K_QUEUE)}
