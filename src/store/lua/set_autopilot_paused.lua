-- Store::set_autopilot_paused. KEYS 14: the autopilot hash. ARGV 4: '1' to pause, '0' to resume.
-- Answers {epoch}.
redis.call('HSET', KEYS[14], 'paused', ARGV[4])
return {epoch}
