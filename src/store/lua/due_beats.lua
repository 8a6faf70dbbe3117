-- Store::admission_round, first step: the heartbeat shards that may hold a lapsed deadline, for
-- the round to sweep (a script gets the keys it touches in KEYS, so they are read before).
-- ARGV 4: how many at most. Answers {epoch, shard keys...}.
local due = redis.call('ZRANGEBYSCORE', K_BEATS, '-inf', int(now), 'LIMIT', 0, tonumber(ARGV[4]))
table.insert(due, 1, epoch)
return due
