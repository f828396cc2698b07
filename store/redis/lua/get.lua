-- GET KEYS[1]: the string, nil when there is none, or an empty array when
-- the key holds another type (contents that do not parse count as absent).
if redis.call('TYPE', KEYS[1])['ok'] ~= 'string' then
  if redis.call('EXISTS', KEYS[1]) == 1 then
    return {}
  end
  return false
end
return redis.call('GET', KEYS[1])
