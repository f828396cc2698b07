-- GET KEYS[1], or nil when it holds another type (contents that do not
-- parse count as absent).
if redis.call('TYPE', KEYS[1])['ok'] ~= 'string' then
  return false
end
return redis.call('GET', KEYS[1])
