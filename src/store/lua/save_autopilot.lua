-- Store::save_autopilot. KEYS 14: the autopilot hash. ARGV 4: the caller's fencing token, 5: the
-- record (JSON). Answers {epoch, 0} when the token is stale (nothing written), else {epoch, 1}.
if not leads(tonumber(ARGV[4])) then
  return {epoch, 0}
end
redis.call('HSET', KEYS[14], 'record', ARGV[5])
return {epoch, 1}
