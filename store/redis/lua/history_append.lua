-- Appends ARGV[3...] to one breaker's transition history KEYS[1], keeping
-- the newest ARGV[1], and lets the history expire ARGV[2] milliseconds
-- after its last transition (a day of history, and some margin).
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
redis.call('PEXPIRE', key, ARGV[2])
return found
