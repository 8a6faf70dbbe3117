-- Store::load_settings. Answers {epoch, 0} or {epoch, 1, version, json}.
local s = redis.call('HMGET', K_SETTINGS, 'version', 'json')
local version = tonumber(s[1])
if version and s[2] then
  return {epoch, 1, version, s[2]}
end
return {epoch, 0}
