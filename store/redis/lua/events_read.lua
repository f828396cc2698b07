-- Reads the event list KEYS[1] from ARGV[1] to ARGV[2] (LRANGE indexes);
-- no key is an empty log, a key of another type is nil (an empty log too,
-- which the caller reports).
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'none' then
  return {}
end
if kind ~= 'list' then
  return false
end
return redis.call('LRANGE', KEYS[1], ARGV[1], ARGV[2])
