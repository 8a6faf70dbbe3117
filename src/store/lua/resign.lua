-- Store::resign. ARGV 4: instance. Answers {epoch}.
if redis.call('HGET', K_LEADER, 'instance') == ARGV[4] then
  redis.call('HDEL', K_LEADER, 'instance', 'until', 'fence')
end
return {epoch}
