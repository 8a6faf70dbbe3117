-- Store::spend_seed: a proof-of-work seed is spent once, on any instance. It stands alone,
-- without the room prelude: it needs only the seed's own key.
-- KEYS 1: the seed's key, in the room's hash slot, holding the seed's expiry (ms): the seed is
--         spent until then included, by the caller's clock like every script's time; Redis
--         drops the key a little after (PX), when an answer for the seed is refused unopened.
-- ARGV 1: now in ms (negative: take it from TIME), 2: the seed's expiry in ms.
-- Answers {1} the first time, {0} for a seed already spent.
local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local until_ms = tonumber(ARGV[2])
local spent = tonumber(redis.call('GET', KEYS[1]) or '')
if spent and spent >= now then
  return {0}
end
redis.call('SET', KEYS[1], string.format('%d', until_ms), 'PX',
  string.format('%d', math.max(until_ms - now, 0) + 60000))
return {1}
