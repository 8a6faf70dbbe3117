-- Store::leader. Answers {epoch, 0} or {epoch, 1, instance}.
local l = redis.call('HMGET', K_LEADER, 'instance', 'until')
local leads_until = tonumber(l[2])
if l[1] and leads_until and leads_until > now then
  return {epoch, 1, l[1]}
end
return {epoch, 0}
