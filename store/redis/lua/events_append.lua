-- Appends ARGV[3...] to the event list KEYS[1] (the shared log, or one
-- breaker's history), keeping the newest ARGV[1]; with ARGV[2] > 0, the
-- list expires ARGV[2] milliseconds after this append.
-- Returns 2 when a key of another type was there (and deleted), else 1.
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
local found = 1
if kind ~= 'list' and kind ~= 'none' then
  redis.call('DEL', key)
  found = 2
end
redis.call('RPUSH', key, unpack(ARGV, 3))
redis.call('LTRIM', key, -tonumber(ARGV[1]), -1)
if tonumber(ARGV[2]) > 0 then
  redis.call('PEXPIRE', key, ARGV[2])
end
return found
