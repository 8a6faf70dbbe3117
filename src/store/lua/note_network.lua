-- Store::note_network: the client networks one pass was seen from, rule for rule as
-- NetworkRecord::note (src/core/sharing.rs). It stands alone, without the room prelude: it needs
-- no epoch, only the pass's own key.
-- KEYS 1: the pass's networks, a ZSET network -> when it was last reported (ms), in the room's
--         hash slot. It expires a session after the last report, so a pass nobody uses costs
--         nothing.
-- ARGV 1: now in ms (negative: take it from TIME), 2: the network, 3: the window (a session) in ms.
-- Answers {count}: the networks reported within the window, this one included.
local K_NETS = KEYS[1]

local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local network, window = ARGV[2], tonumber(ARGV[3])

redis.call('ZREMRANGEBYSCORE', K_NETS, '-inf', string.format('(%d', now - window + 1))
redis.call('ZADD', K_NETS, string.format('%d', now), network)
redis.call('PEXPIRE', K_NETS, string.format('%d', window))
return {redis.call('ZCARD', K_NETS)}
