-- Store::join, for a batch of visitors in arrival order. ARGV 12..14: how a new place is drawn
-- (Placing: 'arrival', 'lottery' window_ms, or 'draw' from_ms until_ms); ARGV 15..: four per
-- visitor: its id, its ticket's place ('' for no ticket), its ticket's epoch and the proxy's
-- random number for a draw; KEYS 14..: each one's heartbeat shard. A ticket from another epoch
-- was issued before the data was lost: its place is restored.
-- Answers {epoch, then per visitor: place, position, queued}.
local l = limits()

-- The span a new arrival draws its place from, as Placing::draw_span: nil for arrival order.
local function draw_span()
  local kind, a, b = ARGV[12], tonumber(ARGV[13]), tonumber(ARGV[14])
  if kind == 'lottery' then
    local window = math.max(a, 1)
    local from = now - (now % window)
    return from, from + window
  elseif kind == 'draw' and now < b then
    return math.min(a, now), b
  end
  return nil
end
local draw_from, draw_until = draw_span()
local deadline = int(now + l.abandon_after_ms)
local joiners = #KEYS - 13
-- Checked before anything is written: a script's writes stay even when it fails halfway.
for i = 1, joiners do
  local restore = ARGV[12 + 4 * i]
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
-- New places given (Store::counts' joined_total): a visitor joining again is not counted twice.
local joined = 0

-- The place a visitor new to the line would get, and the highest place given once it has it.
local function new_place(restore, ticket_epoch, r)
  if restore ~= '' and ticket_epoch ~= epoch then
    local place = tonumber(restore)
    return place, math.max(last, place), false
  elseif draw_from then
    -- As drawn_place in Rust: uniform over the span's places (one per microsecond). Arrivals
    -- in order after the span go behind all of it.
    return draw_from * 1000 + r % ((draw_until - draw_from) * 1000),
      math.max(last, draw_until * 1000 - 1), false
  end
  local place = math.max(last + 1, now * 1000)
  return place, place, true
end

-- One visitor: its place (kept, restored, or at the back), its position and the line's length.
-- Almost every joiner is new, so the place is added first (ZADD NX) and a place already held is
-- read only when that added nothing: two commands for a new visitor, not three.
local function join(id, restore, ticket_epoch, r, shard)
  local place, last_if_new, at_back = new_place(restore, ticket_epoch, r)
  if redis.call('ZADD', K_QUEUE, 'NX', int(place), id) == 1 then
    local called = redis.call('HGET', K_PLACES, id)
    if called then
      -- Called already: joining again keeps the call, and the place it was called from.
      redis.call('ZREM', K_QUEUE, id)
      place = tonumber(called)
      if not place then
        corrupt('place of ' .. id)
      end
      at_back = false
    else
      queued = queued + 1
      last = last_if_new
      note_visitor(id)
      joined = joined + 1
    end
  else
    place = tonumber(redis.call('ZSCORE', K_QUEUE, id))
    if not place then
      corrupt('place of ' .. id)
    end
    at_back = false
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
  local a = 11 + 4 * i
  local place, position, line = join(ARGV[a], ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3]),
    KEYS[13 + i])
  answer[#answer + 1] = place
  answer[#answer + 1] = position
  answer[#answer + 1] = line
end
if #due > 0 then
  redis.call('ZADD', K_BEATS, 'LT', unpack(due))
end
if joined > 0 then
  redis.call('HINCRBY', K_COUNTERS, 'joined_total', joined)
end
if last ~= last_before then
  redis.call('HSET', K_COUNTERS, 'last_place', int(last))
end
return answer
