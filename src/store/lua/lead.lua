-- Store::lead. ARGV 4: instance, 5: ttl in ms. Answers {epoch, 0} or {epoch, 1, fence}.
-- A new fence is above every earlier one and at least the time in ms, so fences keep growing
-- across a loss of the data.
local instance, ttl = ARGV[4], tonumber(ARGV[5])
local l = redis.call('HMGET', K_LEADER, 'instance', 'until', 'fence', 'last')
local holder, leads_until, fence = l[1], tonumber(l[2]), tonumber(l[3])
if holder and leads_until and fence and leads_until > now then
  if holder ~= instance then
    return {epoch, 0}
  end
  redis.call('HSET', K_LEADER, 'until', int(now + ttl))
  return {epoch, 1, fence}
end
fence = math.max((tonumber(l[4]) or 0) + 1, now)
redis.call('HSET', K_LEADER, 'instance', instance, 'until', int(now + ttl), 'fence', int(fence),
  'last', int(fence))
return {epoch, 1, fence}
