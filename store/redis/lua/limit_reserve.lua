-- GCRA: KEYS[1] holds the theoretical arrival time (TAT) of the next token,
-- in microseconds on the callers' clock.
-- ARGV[1] at, ARGV[2] emission interval (1/rps), ARGV[3] burst,
-- ARGV[4] max wait. Every time may have a fraction.
-- A token is due at max(TAT, at) + interval - burst*interval; it is taken
-- (TAT moves one interval on) when it is due within max wait of at.
-- Returns {1, wait, garbage} or {0, wait until a token is due, garbage};
-- waits as strings, so that fractions survive; garbage is 1 when the key
-- held something this script does not write (another type, not a number,
-- or a TAT further ahead than a caller could have set it), which counts as
-- absent: a full bucket.
local key = KEYS[1]
local at = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local maxWait = tonumber(ARGV[4])

local tat = nil
local garbage = 0
local kind = redis.call('TYPE', key)['ok']
if kind == 'string' then
  tat = tonumber(redis.call('GET', key))
  -- The furthest a TAT goes is a whole burst plus the longest wait a
  -- caller accepts (bounded by the query's budget) ahead of its clock;
  -- ten minutes cover both the wait and clocks that disagree.
  if tat == nil or tat ~= tat or tat >= 2 ^ 60 or tat <= -2 ^ 60 or tat > at + burst * interval + 600000000 then
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
local wait = base + interval - burst * interval - at
if wait < 0 then wait = 0 end
if wait > maxWait then
  return { 0, string.format('%.17g', wait), garbage }
end
local next = base + interval
-- The key outlives the time the bucket needs to fill again, with a margin
-- for callers whose clocks lag; an expired key is a full bucket.
local ttl = math.ceil((next - at) / 1000) + 60000
redis.call('SET', key, string.format('%.17g', next), 'PX', string.format('%d', ttl))
return { 1, string.format('%.17g', wait), garbage }
