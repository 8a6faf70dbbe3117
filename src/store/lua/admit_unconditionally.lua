-- Store::admit_unconditionally. ARGV 12: id. Answers {epoch, expires_at}.
local id = ARGV[12]
local l = limits()
local expires_at = now + l.session_ms
redis.call('ZADD', K_PASSES, int(expires_at), id)
note_visitor(id)
record_admissions(1)
return {epoch, expires_at}
