-- Lease: GCRA as limit_reserve.lua, taking at once up to ARGV[5] tokens
-- due by ARGV[1] + ARGV[6] (one flush interval), for a replica to hand out
-- locally within that interval: a token may go up to one flush interval
-- before it is due, never more (SPEC 11: the shared budget is never
-- exceeded by more than one flush interval's worth). When none is due by
-- then, one token is reserved as limit_reserve.lua does, within max wait.
-- ARGV[1] at, ARGV[2] emission interval, ARGV[3] burst, ARGV[4] max wait,
-- ARGV[5] most tokens to lease, ARGV[6] the horizon (flush interval).
-- Returns {tokens taken, wait, garbage}: wait is 0 with tokens > 1;
-- garbage is 1 when the key held something this script does not write,
-- which counts as absent: a full bucket (SPEC 9).
local key = KEYS[1]
local at = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local maxWait = tonumber(ARGV[4])
local most = math.floor(tonumber(ARGV[5]) or 1)
if most < 1 then most = 1 end
local horizon = tonumber(ARGV[6]) or 0
if horizon < 0 then horizon = 0 end

local tat = nil
local garbage = 0
local kind = redis.call('TYPE', key)['ok']
if kind == 'string' then
  tat = tonumber(redis.call('GET', key))
  -- As limit_reserve.lua: a TAT further ahead than a lease or a
  -- reservation could have moved it (a burst, a flush interval, ten
  -- minutes for waits and clocks that disagree) is garbage.
  if tat == nil or tat ~= tat or tat >= 2 ^ 60 or tat <= -2 ^ 60 or tat > at + burst * interval + horizon + 600000000 then
    tat = nil
    garbage = 1
  end
elseif kind ~= 'none' then
  redis.call('DEL', key)
  garbage = 1
end
if tat == nil then
  tat = at -- absent: a full bucket
end

local base = math.max(tat, at)
-- Token j (from 1) is due at base + j*interval - burst*interval.
local due = math.floor((at + horizon - base) / interval + burst)
local take = math.min(most, due)
local wait = 0
if take < 1 then
  wait = base + interval - burst * interval - at
  if wait > maxWait then
    return { 0, string.format('%.17g', wait), garbage }
  end
  take = 1
end
local next = base + take * interval
local ttl = math.ceil((next - at) / 1000) + 60000
redis.call('SET', key, string.format('%.17g', next), 'PX', string.format('%d', ttl))
return { take, string.format('%.17g', math.max(wait, 0)), garbage }
