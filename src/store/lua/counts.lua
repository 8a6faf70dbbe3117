-- Store::counts. Answers {epoch, passes, called, queued, admitted_total, admitted_last_minute,
-- abandoned_total, expired_total, revoked_total, no_show_total, joined_total}.
forget_old_admissions()
local c = redis.call('HMGET', K_COUNTERS, 'admitted_total', 'recent', 'abandoned_total',
  'expired_total', 'revoked_total', 'no_show_total', 'joined_total')
local answer = {epoch, redis.call('ZCARD', K_PASSES), redis.call('ZCARD', K_CALLED),
  redis.call('ZCARD', K_QUEUE)}
for i = 1, 7 do
  answer[#answer + 1] = tonumber(c[i]) or 0
end
return answer
