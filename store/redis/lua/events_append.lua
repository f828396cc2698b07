-- Appends ARGV[2...] to the event list KEYS[1], keeping the newest ARGV[1].
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'list' and kind ~= 'none' then
  redis.call('DEL', key)
end
redis.call('RPUSH', key, unpack(ARGV, 2))
redis.call('LTRIM', key, -tonumber(ARGV[1]), -1)
return 1
