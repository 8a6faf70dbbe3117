-- Store::find_visitor. ARGV 4: the queue key (queue_key). Answers {epoch, 0} (gone or never
-- seen), {epoch, 1, arrived_at, position, queued} (waiting), {epoch, 2, arrived_at, claim_by}
-- (called) or {epoch, 3, arrived_at, expires_at} (inside). One HGET, then O(log n) at most.
local entry = redis.call('HGET', K_VISITORS, ARGV[4])
if not entry then
  return {epoch, 0}
end
local arrived, id = visitor_entry(entry)
local expires = tonumber(redis.call('ZSCORE', K_PASSES, id))
if expires then
  return {epoch, 3, arrived, expires}
end
local claim_by = tonumber(redis.call('ZSCORE', K_CALLED, id))
if claim_by then
  return {epoch, 2, arrived, claim_by}
end
local rank = redis.call('ZRANK', K_QUEUE, id)
if rank then
  return {epoch, 1, arrived, rank + 1, redis.call('ZCARD', K_QUEUE)}
end
return {epoch, 0}
