-- Prelude of every room script: the Rust side puts it in front of each script's own body.
--
-- KEYS, the same thirteen for every script, all in one hash slot ({room}):
--   1 epoch    HASH  id, born, lost_at (set once a loss of the data was detected)
--   2 queue    ZSET  id -> place (rank = position: place, then id, as the pure model orders)
--   3 places   HASH  id -> place of a called visitor, kept until the claim (joining again
--                    keeps the call)
--                    (a waiting visitor's place is its score in the queue)
--   4 beats    ZSET  heartbeat shard key -> a time at or before the earliest deadline in that
--                    shard: the shards an admission round must sweep
--   5 called   ZSET  id -> claim deadline
--   6 passes   ZSET  id -> pass expiry
--   7 revoked  ZSET  id -> refused until
--   8 bucket   HASH  tokens, at
--   9 recent   LIST  "time:count" admissions of the last minute, oldest first
--  10 counters HASH  admitted_total, abandoned_total, expired_total, revoked_total,
--                    no_show_total, joined_total, recent (sum of the recent list), last_place
--  11 leader   HASH  instance, until, fence, last (the last fence handed out), seen (the
--                    highest fence a round used)
--  12 settings HASH  version, json
--  13 visitors HASH  queue key -> "<arrived_at>:<id>", for every visitor waiting, called or
--                    inside: the operator's look-up by queue id (queue_key, core/queue_id.rs)
-- A waiting visitor's heartbeat deadline lives in one of many small hashes, `…:beats:<n>` (id ->
-- deadline; the Rust side picks the shard from the id and passes it in KEYS from 14), so that each
-- stays in Redis's compact listpack encoding: a heartbeat costs a few dozen bytes, not a sorted set
-- entry.
-- The autopilot's scripts get their own key at KEYS 14: the room's `…:autopilot` hash (record:
-- the leader's JSON record, paused: '1' while the operator paused it), or one window's hash,
-- `…:autopilot:w:<started_at>` (requests, errors, latency_us, b:<bucket> counts added up by every
-- instance; ended_at; until: kept until then).
-- ARGV: 1 now in ms (negative: take it from TIME), 2 the epoch this instance saw last ('' if
-- none), 3 a fresh epoch to use if the data is missing. Scripts given the room limits find them
-- at 4..11 (capacity, new_users_per_minute, burst, session_ms, abandon_after_ms,
-- claim_window_ms, pick, admitting) and their own arguments from 12; the others from 4.
-- Every script answers an array whose first element is the current epoch.

local K_EPOCH, K_QUEUE, K_PLACES, K_BEATS = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_CALLED, K_PASSES, K_REVOKED, K_BUCKET = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local K_RECENT, K_COUNTERS, K_LEADER, K_SETTINGS = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local K_VISITORS = KEYS[13]

local MINUTE_MS = 60000

local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Numbers go to Redis as exact decimal strings: the default conversion keeps 14 digits only.
local function int(x)
  return string.format('%d', x)
end

local function dbl(x)
  return string.format('%.17g', x)
end

local function corrupt(what)
  error({err = 'CORRUPT ' .. what})
end

-- The epoch names this copy of the room's data. Missing means the data is new or was lost; an
-- instance that had seen another epoch knows it was lost, and admissions then pause for a session
-- (see recovering) so that live passes can register again before the room is filled.
local epoch, lost_at
do
  local e = redis.call('HMGET', K_EPOCH, 'id', 'born', 'lost_at')
  local known = ARGV[2]
  if not e[1] then
    epoch = ARGV[3]
    if known ~= '' then
      lost_at = now
      redis.call('HSET', K_EPOCH, 'id', epoch, 'born', int(now), 'lost_at', int(now))
    else
      redis.call('HSET', K_EPOCH, 'id', epoch, 'born', int(now))
    end
  else
    epoch = e[1]
    lost_at = tonumber(e[3])
    if not lost_at and known ~= '' and known ~= epoch then
      -- Another instance that had not seen the old epoch made the new one: it was born at the
      -- loss.
      lost_at = tonumber(e[2]) or now
      redis.call('HSET', K_EPOCH, 'lost_at', int(lost_at))
    end
  end
end

-- Whether `fence` may act for the leader, and if so it is recorded: what a leader's writes
-- check. One lease leads every room of a proxy group (it may live in another room's slot), so a
-- room refuses a token below the highest it has seen, handed out here or used here: a leader that
-- was replaced can never act after its successor has.
local function leads(fence)
  local l = redis.call('HMGET', K_LEADER, 'last', 'seen')
  if fence < math.max(tonumber(l[1]) or 0, tonumber(l[2]) or 0) then
    return false
  end
  redis.call('HSET', K_LEADER, 'seen', int(fence))
  return true
end

local function recovering(session_ms)
  return lost_at ~= nil and now < lost_at + session_ms
end

local function limits()
  return {
    capacity = tonumber(ARGV[4]),
    per_minute = tonumber(ARGV[5]),
    burst = tonumber(ARGV[6]),
    session_ms = tonumber(ARGV[7]),
    abandon_after_ms = tonumber(ARGV[8]),
    claim_window_ms = tonumber(ARGV[9]),
    random = ARGV[10] == 'random',
    admitting = ARGV[11] == '1',
  }
end

local function occupancy()
  return redis.call('ZCARD', K_PASSES) + redis.call('ZCARD', K_CALLED)
end

-- The token bucket, created full at its first use, refilled as TokenBucket::refill does.
local function refill(l)
  local b = redis.call('HMGET', K_BUCKET, 'tokens', 'at')
  local tokens, at = tonumber(b[1]), tonumber(b[2])
  if not tokens or not at then
    tokens, at = l.burst, now
  end
  local elapsed = math.max(now - at, 0)
  tokens = math.min(tokens + elapsed * l.per_minute / 60000.0, l.burst)
  return tokens, math.max(at, now)
end

local function save_bucket(tokens, at)
  redis.call('HSET', K_BUCKET, 'tokens', dbl(tokens), 'at', int(at))
end

local function whole(tokens)
  return math.floor(math.max(tokens, 0))
end

local function parse_recent(entry)
  local sep = string.find(entry, ':', 1, true)
  local t = sep and tonumber(string.sub(entry, 1, sep - 1))
  local n = sep and tonumber(string.sub(entry, sep + 1))
  if not t or not n then
    corrupt('recent admissions entry ' .. entry)
  end
  return t, n
end

local function forget_old_admissions()
  while true do
    local head = redis.call('LINDEX', K_RECENT, 0)
    if not head then
      return
    end
    local t, n = parse_recent(head)
    if t > now - MINUTE_MS then
      return
    end
    redis.call('LPOP', K_RECENT)
    redis.call('HINCRBY', K_COUNTERS, 'recent', -n)
  end
end

local function record_admissions(n)
  if n > 0 then
    redis.call('HINCRBY', K_COUNTERS, 'admitted_total', n)
    redis.call('HINCRBY', K_COUNTERS, 'recent', n)
    local tail = redis.call('LINDEX', K_RECENT, -1)
    local t, m = nil, 0
    if tail then
      t, m = parse_recent(tail)
    end
    if t == now then
      redis.call('LSET', K_RECENT, -1, int(now) .. ':' .. int(m + n))
    else
      redis.call('RPUSH', K_RECENT, int(now) .. ':' .. int(n))
    end
  end
  forget_old_admissions()
end

-- Byte order, as Rust compares strings (Lua's < follows the server's locale).
local function bytes_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- How many stand before (place, id): its rank when in line, else where it would stand.
local function rank_of(id, place)
  local r = redis.call('ZRANK', K_QUEUE, id)
  if r then
    return r
  end
  local before = redis.call('ZCOUNT', K_QUEUE, '-inf', '(' .. int(place))
  for _, other in ipairs(redis.call('ZRANGEBYSCORE', K_QUEUE, int(place), int(place))) do
    if bytes_less(other, id) then
      before = before + 1
    end
  end
  return before
end

-- The place recorded for a visitor: waiting (in the queue) or called (in places).
local function place_of(id)
  local p = redis.call('ZSCORE', K_QUEUE, id) or redis.call('HGET', K_PLACES, id)
  if not p then
    return nil
  end
  local place = tonumber(p)
  if not place then
    corrupt('place of ' .. id)
  end
  return place
end

-- Sets a heartbeat deadline (an int string), keeping the shard's score in the beats index at or
-- before its earliest deadline (deadlines only move later, unless abandon_after was lowered).
local function beat(shard, id, deadline)
  redis.call('HSET', shard, id, deadline)
  redis.call('ZADD', K_BEATS, 'LT', deadline, shard)
end


-- A visitor's key in the visitors index: the first 15 hex digits of SHA-1 over the domain and
-- its id, as QueueId::key computes it in Rust.
local function queue_key(id)
  return string.sub(redis.sha1hex('waitroom queue id:' .. id), 1, 15)
end

-- Indexes a visitor by its queue key, unless it is already (its first arrival stays).
local function note_visitor(id)
  redis.call('HSETNX', K_VISITORS, queue_key(id), int(now) .. ':' .. id)
end

-- The index entry's arrival and id.
local function visitor_entry(entry)
  local sep = string.find(entry, ':', 1, true)
  local arrived = sep and tonumber(string.sub(entry, 1, sep - 1))
  if not arrived then
    corrupt('visitors entry ' .. entry)
  end
  return arrived, string.sub(entry, sep + 1)
end

-- Takes a visitor out of the index once the room holds nothing of it any more.
local function forget_if_gone(id)
  if redis.call('ZSCORE', K_QUEUE, id) or redis.call('HEXISTS', K_PLACES, id) == 1
      or redis.call('ZSCORE', K_PASSES, id) or redis.call('ZSCORE', K_CALLED, id) then
    return
  end
  local key = queue_key(id)
  local entry = redis.call('HGET', K_VISITORS, key)
  if entry then
    local _, known = visitor_entry(entry)
    if known == id then
      redis.call('HDEL', K_VISITORS, key)
    end
  end
end
