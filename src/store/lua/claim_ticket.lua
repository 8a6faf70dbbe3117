-- Store::claim_ticket: the per-address limit on new tickets, rule for rule as IpRecord::claim and
-- IpLedger (src/core/ip_limit.rs). It stands alone, without the room prelude: it needs no epoch,
-- only its own key and a look at the line.
-- KEYS 1: the address's record, a HASH: tokens and at (its bucket, while the rate is limited),
--         checked (when its tickets were last looked for in the line), and one field per ticket
--         it holds, id -> claimed at. It expires by itself once nothing in it matters, so an idle
--         address costs nothing.
--      2: the room's queue (ZSET id -> place): a ticket counts while it is in it.
-- ARGV 1: now in ms (negative: take it from TIME), 2: ticket id, 3: per_minute, 4: burst,
--      5: max_live, 6: join grace ms, 7: recheck every ms, 8: retain live ms.
-- Answers {0} (allowed), {1, retry_after_ms} (too fast) or {2} (too many live).
local K_IP, K_QUEUE = KEYS[1], KEYS[2]

local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local id = ARGV[2]
local per_minute, burst, max_live = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local grace, recheck_every, retain_live = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])

-- Numbers go to Redis as exact decimal strings: the default conversion keeps 14 digits only.
local function int(x)
  return string.format('%d', x)
end

local FIXED = {tokens = true, at = true, checked = true}
local r = redis.call('HMGET', K_IP, 'tokens', 'at', 'checked')
local fixed = 0
for i = 1, 3 do
  if r[i] then
    fixed = fixed + 1
  end
end
local live = redis.call('HLEN', K_IP) - fixed
-- A field that is not a number (written by something else) is as good as missing.
local tokens, at, checked = tonumber(r[1]), tonumber(r[2]), tonumber(r[3])

-- Expires the record once it no longer matters: its bucket full again, and no ticket held.
local function keep()
  local ms = 0
  if per_minute > 0 then
    ms = math.ceil((burst - tokens) * 60000 / per_minute)
  end
  if live > 0 then
    ms = math.max(ms, retain_live)
  end
  if ms > 0 then
    redis.call('PEXPIRE', K_IP, ms)
  else
    redis.call('DEL', K_IP)
  end
end

if per_minute > 0 then
  if not tokens or not at then
    tokens, at = burst, now
  end
  tokens = math.min(tokens + math.max(now - at, 0) * per_minute / 60000.0, burst)
  at = math.max(at, now)
  if tokens < 1 then
    redis.call('HSET', K_IP, 'tokens', string.format('%.17g', tokens), 'at', int(at))
    keep()
    return {1, math.max(math.ceil((1 - tokens) * 60000 / per_minute), 1)}
  end
end

if max_live > 0 then
  if live >= max_live and (not checked or now - checked >= recheck_every) then
    local fields = redis.call('HGETALL', K_IP)
    for i = 1, #fields, 2 do
      local ticket = fields[i]
      if not FIXED[ticket] then
        local claimed = tonumber(fields[i + 1])
        local on_its_way = claimed and now - claimed < grace
        if not on_its_way and not redis.call('ZSCORE', K_QUEUE, ticket) then
          redis.call('HDEL', K_IP, ticket)
          live = live - 1
        end
      end
    end
    redis.call('HSET', K_IP, 'checked', int(now))
  end
  if live >= max_live then
    if per_minute > 0 then
      redis.call('HSET', K_IP, 'tokens', string.format('%.17g', tokens), 'at', int(at))
    end
    keep()
    return {2}
  end
  redis.call('HSET', K_IP, id, int(now))
  live = live + 1
end

if per_minute > 0 then
  tokens = tokens - 1
  redis.call('HSET', K_IP, 'tokens', string.format('%.17g', tokens), 'at', int(at))
end
keep()
return {0}
