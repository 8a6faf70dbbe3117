-- Store::report_window. KEYS 14: the window's hash. ARGV 4: the window's end, 5: until when it is
-- kept (ms), then field and count pairs to add: requests, errors, latency_us, b:<bucket>. The
-- counts go to HINCRBY as the decimal strings they came as, so no Lua number rounds them.
-- Answers {epoch, 1}, or {epoch, 0} for a window already past keeping (nothing added).
local w = KEYS[14]
local ended_at, kept_until = tonumber(ARGV[4]), tonumber(ARGV[5])
if not ended_at or not kept_until then
  corrupt('report_window arguments')
end
if kept_until <= now then
  return {epoch, 0}
end
for i = 6, #ARGV, 2 do
  redis.call('HINCRBY', w, ARGV[i], ARGV[i + 1])
end
local h = redis.call('HMGET', w, 'ended_at', 'until')
if not tonumber(h[1]) or ended_at > tonumber(h[1]) then
  redis.call('HSET', w, 'ended_at', int(ended_at))
end
if not tonumber(h[2]) or kept_until > tonumber(h[2]) then
  redis.call('HSET', w, 'until', int(kept_until))
  -- Gone by itself once no leader reads it any more; `until` hides it from reads before that
  -- when the scripts run on a test clock.
  redis.call('PEXPIRE', w, int(kept_until - now))
end
return {epoch, 1}
