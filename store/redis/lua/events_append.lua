-- Appends ARGV[2...] to the event list KEYS[1], keeping the newest ARGV[1].
-- Returns 2 when a key of another type was there (and deleted), else 1.
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
local found = 1
if kind ~= 'list' and kind ~= 'none' then
  redis.call('DEL', key)
  found = 2
end
redis.call('RPUSH', key, unpack(ARGV, 2))
redis.call('LTRIM', key, -tonumber(ARGV[1]), -1)
return found
