-- Store::join, for a batch of visitors in arrival order. ARGV 12..: three per visitor: its id,
-- its ticket's place ('' for no ticket) and its ticket's epoch; KEYS 13..: each one's heartbeat
-- shard. A ticket from another epoch was issued before the data was lost: its place is restored.
-- Answers {epoch, then per visitor: place, position, queued}.
local l = limits()
local deadline = int(now + l.abandon_after_ms)
local joiners = #KEYS - 12
-- Checked before anything is written: a script's writes stay even when it fails halfway.
for i = 1, joiners do
  local restore = ARGV[10 + 3 * i]
  if restore ~= '' and not tonumber(restore) then
    return redis.error_reply('ERR the place to restore is not a number')
  end
end
-- Above every place in line, restored ones included.
local last = tonumber(redis.call('HGET', K_COUNTERS, 'last_place')) or 0
local last_before = last
local queued = redis.call('ZCARD', K_QUEUE)
-- Every joiner's heartbeat gets the same deadline: the beats index is lowered to it (as beat in
-- common.lua does) once for all their shards, at the end.
local due = {}

-- One visitor: its place (kept, restored, or at the back), its position and the line's length.
local function join(id, restore, ticket_epoch, shard)
  local place = place_of(id)
  local at_back = false
  if not place then
    if restore ~= '' and ticket_epoch ~= epoch then
      place = tonumber(restore)
      last = math.max(last, place)
    else
      place = math.max(last + 1, now * 1000)
      last = place
      at_back = true
    end
    queued = queued + redis.call('ZADD', K_QUEUE, int(place), id)
  end
  redis.call('HSET', shard, id, deadline)
  due[#due + 1] = deadline
  due[#due + 1] = shard
  if at_back then
    return place, queued, queued
  end
  return place, rank_of(id, place) + 1, queued
end

local answer = {epoch}
for i = 1, joiners do
  local a = 9 + 3 * i
  local place, position, line = join(ARGV[a], ARGV[a + 1], ARGV[a + 2], KEYS[12 + i])
  answer[#answer + 1] = place
  answer[#answer + 1] = position
  answer[#answer + 1] = line
end
if #due > 0 then
  redis.call('ZADD', K_BEATS, 'LT', unpack(due))
end
if last ~= last_before then
  redis.call('HSET', K_COUNTERS, 'last_place', int(last))
end
return answer
