-- Store::load_autopilot. KEYS 14: the autopilot hash. Answers {epoch, paused, 0} or
-- {epoch, paused, 1, record}.
local a = redis.call('HMGET', KEYS[14], 'paused', 'record')
local paused = a[1] == '1' and 1 or 0
if a[2] then
  return {epoch, paused, 1, a[2]}
end
return {epoch, paused, 0}
