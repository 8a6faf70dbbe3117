-- Store::shares_of. KEYS 14...: the minutes' hashes of shares (see publish_shares.lua). ARGV 4:
-- the instance whose own shares are left out (it holds fresher ones), 5: how long a share is
-- kept (ms), then each key's minute: a minute past keeping reads empty (its key expires by
-- itself; this hides it before then when the scripts run on a test clock). Answers {epoch, then
-- for each key: the number of shares, then each share's JSON}.
local except, kept = ARGV[4], tonumber(ARGV[5])
if not except or not kept then
  corrupt('read_shares arguments')
end
local answer = {epoch}
for i = 14, #KEYS do
  local minute = tonumber(ARGV[6 + i - 14])
  if not minute then
    corrupt('read_shares arguments')
  end
  local mark = #answer + 1
  answer[mark] = 0
  if minute + kept > now then
    local shares = redis.call('HGETALL', KEYS[i])
    for j = 1, #shares, 2 do
      if shares[j] ~= except then
        answer[#answer + 1] = shares[j + 1]
        answer[mark] = answer[mark] + 1
      end
    end
  end
end
return answer
