-- Store::admit_directly. ARGV 12: id. Answers {epoch, 0} or {epoch, 1, expires_at}.
local id = ARGV[12]
local l = limits()
if not l.admitting or recovering(l.session_ms) or redis.call('ZCARD', K_QUEUE) > 0
    or occupancy() >= l.capacity then
  return {epoch, 0}
end
local tokens, at = refill(l)
if whole(tokens) < 1 then
  save_bucket(tokens, at)
  return {epoch, 0}
end
save_bucket(tokens - 1, at)
local expires_at = now + l.session_ms
redis.call('ZADD', K_PASSES, int(expires_at), id)
note_visitor(id)
record_admissions(1)
return {epoch, 1, expires_at}
