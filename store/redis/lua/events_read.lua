-- Reads the event list KEYS[1] from ARGV[1] to ARGV[2] (LRANGE indexes);
-- a key of another type is an empty log.
if redis.call('TYPE', KEYS[1])['ok'] ~= 'list' then
  return {}
end
return redis.call('LRANGE', KEYS[1], ARGV[1], ARGV[2])
