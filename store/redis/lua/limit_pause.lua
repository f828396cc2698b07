-- SetPause: KEYS[1] holds the end of the pause (microseconds, callers'
-- clock); it only ever extends. ARGV[1] until, ARGV[2] when the key may
-- expire (Unix milliseconds, a margin past until), ARGV[3] the invalidation
-- channel, ARGV[4] the source: replicas that remembered its pause forget it.
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
local cur = nil
if kind == 'string' then
  cur = tonumber(redis.call('GET', key))
elseif kind ~= 'none' then
  redis.call('DEL', key)
end
if cur ~= nil and (cur ~= cur or cur >= 2 ^ 53 or cur <= -2 ^ 53 or cur ~= math.floor(cur)) then
  cur = nil -- not a time: no pause
end
if cur == nil or tonumber(ARGV[1]) > cur then
  redis.call('SET', key, ARGV[1])
  redis.call('PEXPIREAT', key, ARGV[2])
  redis.call('PUBLISH', ARGV[3], cjson.encode({ p = ARGV[4] }))
  return 1
end
return 0
