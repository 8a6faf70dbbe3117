-- Store::save_settings. ARGV 4: json. Answers {epoch, version}.
local version = redis.call('HINCRBY', K_SETTINGS, 'version', 1)
redis.call('HSET', K_SETTINGS, 'json', ARGV[4])
return {epoch, version}
