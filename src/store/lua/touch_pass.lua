-- Store::touch_pass. ARGV 12: id, 13: the pass's epoch. Answers {epoch, 0} or
-- {epoch, 1, expires_at}.
local id, pass_epoch = ARGV[12], ARGV[13]
local l = limits()
local expires_at = now + l.session_ms
local known = redis.call('ZSCORE', K_PASSES, id)
if not known then
  local outlived_a_loss = pass_epoch ~= epoch
  if not outlived_a_loss or redis.call('ZSCORE', K_REVOKED, id) then
    return {epoch, 0}
  end
end
redis.call('ZADD', K_PASSES, int(expires_at), id)
note_visitor(id)
return {epoch, 1, expires_at}
