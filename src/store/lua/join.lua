-- Store::join. ARGV 12: id, 13: the ticket's place ('' for no ticket), 14: the ticket's epoch,
-- 15..18: how a new place is drawn (Placing: 'arrival', 'lottery' window_ms, or 'draw' from_ms
-- until_ms) and the proxy's random number for a draw.
-- A ticket from another epoch was issued before the data was lost: its place is restored.
-- Answers {epoch, place, position, queued}.
local id, restore = ARGV[12], ARGV[13]

-- The span a new arrival draws its place from, as Placing::draw_span: nil for arrival order.
local function draw_span()
  local kind, a, b = ARGV[15], tonumber(ARGV[16]), tonumber(ARGV[17])
  if kind == 'lottery' then
    local window = math.max(a, 1)
    local from = now - (now % window)
    return from, from + window
  elseif kind == 'draw' and now < b then
    return math.min(a, now), b
  end
  return nil
end
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
    local from, untl = draw_span()
    if from then
      -- As drawn_place in Rust: uniform over the span's places (one per microsecond). Arrivals
      -- in order after the span go behind all of it.
      place = from * 1000 + tonumber(ARGV[18]) % ((untl - from) * 1000)
      last = math.max(last, untl * 1000 - 1)
    else
      place = math.max(last + 1, now * 1000)
      last = place
    end
  end
  redis.call('HSET', K_COUNTERS, 'last_place', int(last))
  redis.call('ZADD', K_QUEUE, int(place), id)
end
redis.call('ZADD', K_BEATS, int(now + l.abandon_after_ms), id)
return {epoch, place, rank_of(id, place) + 1, redis.call('ZCARD', K_QUEUE)}
