-- Store::report_pass_use: every instance's requests of each pass by minute, rule for rule as
-- UseCounts::add (src/core/sharing.rs). It stands alone, without the room prelude: it needs no
-- epoch, only the two minutes' hashes.
-- KEYS 1: the current minute's counts, a HASH pass -> requests of every instance, in the room's
--         hash slot; 2: the minute before's. A minute's hash expires at the end of the next
--         minute, so it costs at most two minutes of the passes in use.
-- ARGV 1: now in ms (negative: take it from TIME), 2: until when the current minute's hash is
--         kept (ms), then pass and count pairs.
-- Answers {current, previous} for each pass, in the order given.
local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local kept_until = tonumber(ARGV[2])

local counts = {}
for i = 3, #ARGV, 2 do
  counts[#counts + 1] = redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
  counts[#counts + 1] = tonumber(redis.call('HGET', KEYS[2], ARGV[i])) or 0
end
if #counts > 0 then
  redis.call('PEXPIRE', KEYS[1], string.format('%d', math.max(kept_until - now, 1)))
end
return counts
