-- Store::read_window. KEYS 14: the window's hash. Answers {epoch, 0} when nobody reported it or
-- it is past keeping, else {epoch, 1, field, value, field, value...} (the numbers as Redis keeps
-- them, decimal strings, parsed on the Rust side).
local w = KEYS[14]
local kept_until = tonumber(redis.call('HGET', w, 'until'))
if not kept_until or kept_until <= now then
  return {epoch, 0}
end
local answer = {epoch, 1}
for _, v in ipairs(redis.call('HGETALL', w)) do
  answer[#answer + 1] = v
end
return answer
