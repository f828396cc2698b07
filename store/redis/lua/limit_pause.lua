-- SetPause: KEYS[1] holds the end of the pause (microseconds, callers'
-- clock); it only ever extends. ARGV[1] until, ARGV[2] when the key may
-- expire (Unix milliseconds, a margin past until), ARGV[3] the invalidation
-- channel, ARGV[4] the source: replicas that remembered its pause forget it,
-- ARGV[5] the latest end a pause can have (no caller sets one further).
-- Returns {set, garbage}: garbage is 1 when the key held something else
-- than an end this script writes, which counts as no pause.
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
local cur = nil
local garbage = 0
if kind == 'string' then
  cur = redis.call('GET', key)
  if not string.match(cur, '^%-?%d+$') then
    cur = nil
    garbage = 1
  else
    cur = tonumber(cur)
  end
elseif kind ~= 'none' then
  redis.call('DEL', key)
  garbage = 1
end
if cur ~= nil and (cur ~= cur or cur >= 2 ^ 53 or cur <= -2 ^ 53 or cur > tonumber(ARGV[5])) then
  cur = nil -- not a time, or further than any pause: no pause
  garbage = 1
end
if cur == nil or tonumber(ARGV[1]) > cur then
  redis.call('SET', key, ARGV[1])
  redis.call('PEXPIREAT', key, ARGV[2])
  redis.call('PUBLISH', ARGV[3], cjson.encode({ p = ARGV[4] }))
  return { 1, garbage }
end
return { 0, garbage }
