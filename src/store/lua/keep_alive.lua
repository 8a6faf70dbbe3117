-- Store::keep_alive. ARGV 12..: ids of visitors seen polling since the last call. Slides the
-- heartbeat of those still in line (ZADD XX touches only members: the others left or were
-- called), in batches that stay within Lua's argument limit. Answers {epoch, called ids...}.
local l = limits()
local deadline = int(now + l.abandon_after_ms)
local batch = {}
for i = 12, #ARGV do
  batch[#batch + 1] = deadline
  batch[#batch + 1] = ARGV[i]
  if #batch >= 1000 then
    redis.call('ZADD', K_BEATS, 'XX', unpack(batch))
    batch = {}
  end
end
if #batch > 0 then
  redis.call('ZADD', K_BEATS, 'XX', unpack(batch))
end
local answer = redis.call('ZRANGE', K_CALLED, 0, -1)
table.insert(answer, 1, epoch)
return answer
