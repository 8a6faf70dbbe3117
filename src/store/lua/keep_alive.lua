-- Store::keep_alive. KEYS 14..: the heartbeat shards of the visitors seen polling since the last
-- call; ARGV 12..: for each of those shards in turn, how many visitors, then their ids. Slides the
-- heartbeat of those still in line (the others left or were called: they have none, or keep the
-- one they had), in chunks that stay within Lua's argument limit. Answers {epoch, called ids...}.
local l = limits()
local deadline = int(now + l.abandon_after_ms)
local CHUNK = 500
local at = 12
for k = 14, #KEYS do
  local shard, n = KEYS[k], tonumber(ARGV[at])
  local first, last = at + 1, at + n
  at = last + 1
  local slid = false
  for from = first, last, CHUNK do
    local ids = {}
    for i = from, math.min(from + CHUNK - 1, last) do
      ids[#ids + 1] = ARGV[i]
    end
    local had = redis.call('HMGET', shard, unpack(ids))
    local fields = {}
    for i, deadline_before in ipairs(had) do
      if deadline_before then
        fields[#fields + 1] = ids[i]
        fields[#fields + 1] = deadline
      end
    end
    if #fields > 0 then
      redis.call('HSET', shard, unpack(fields))
      slid = true
    end
  end
  if slid then
    redis.call('ZADD', K_BEATS, 'LT', deadline, shard)
  end
end
local answer = redis.call('ZRANGE', K_CALLED, 0, -1)
table.insert(answer, 1, epoch)
return answer
