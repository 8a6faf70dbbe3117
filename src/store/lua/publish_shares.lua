-- Store::publish_shares. KEYS 14...: one hash per minute, `…:share:<minute>`, a field per
-- instance. ARGV 4: the instance, 5: how long a share is kept (ms), then for each key the
-- minute's start and the share (JSON as the instance wrote it, stored as it came). A share
-- replaces the instance's earlier one for its minute, so sending one again counts it once; a
-- minute past keeping is left out. Answers {epoch, shares kept}.
local instance, kept = ARGV[4], tonumber(ARGV[5])
if not instance or not kept then
  corrupt('publish_shares arguments')
end
local kept_now = 0
for i = 14, #KEYS do
  local at = 6 + (i - 14) * 2
  local minute, share = tonumber(ARGV[at]), ARGV[at + 1]
  if not minute or not share then
    corrupt('publish_shares arguments')
  end
  local left = minute + kept - now
  if left > 0 then
    redis.call('HSET', KEYS[i], instance, share)
    redis.call('PEXPIRE', KEYS[i], int(left))
    kept_now = kept_now + 1
  end
end
return {epoch, kept_now}
