-- Flush: the outcome counts of one replica's calls through a closed
-- breaker since its last flush (SPEC 11, "Cost"), added to the rolling
-- window; the trip is decided here, on the fleet's counts.
-- ARGV[18] the generation the calls were permitted in, ARGV[19] when the
-- calls were counted (their bucket), ARGV[20] successes, ARGV[21] failures,
-- ARGV[22] failures before the first success, ARGV[23] failures after the
-- last success, ARGV[24] the longest run of failures, ARGV[25] 1 if any
-- call succeeded, ARGV[26] the Retry-After of the last failure, ARGV[27]
-- the window as written in the settings.
-- Returns reply(calls, failures) with the window after the counts.
-- The bucket the counts most likely go to is read with the state: one
-- HMGET on the hot path.
local idx = math.floor(num(ARGV[19]) / bp)
local guess = BUCKETS[idx % 10 + 1]
fetch({ 'st', 'gen', 'ver', 'ou', 'pu', 'since', 'ot', 'cf', 'bp', 'wi', 'wc', 'wf', guess })
local s, f = num(ARGV[20]), num(ARGV[21])
if st ~= 'closed' or num(ARGV[18]) ~= gen or s < 0 or f < 0 or s + f == 0 then
  -- Counts of an earlier generation are stale.
  advance()
  save()
  return reply(-1, -1)
end
local lead, tail, run = num(ARGV[22]), num(ARGV[23]), num(ARGV[24])
local calls, failures, wi, reset = counts(idx)
local slot = BUCKETS[wi % 10 + 1]
local bs, bf = 0, 0
if not reset then
  local v = raw[slot]
  if slot ~= guess then v = redis.call('HGET', key, slot) end
  local n, xs, xf = parseBucket(v)
  if n == wi then bs, bf = xs, xf end
end
bs, bf = bs + s, bf + f
calls, failures = calls + s + f, failures + f
local consec = cf + f
if ARGV[25] == '1' then consec = tail end
local longest = math.max(run, cf + lead)
local byConsecutive = consecutive > 0 and longest >= consecutive
-- Only a failure trips, as in breaker.MemoryStore: a success, while older
-- failures are still in the window, is no reason to stop calling.
if f > 0 and (byConsecutive or (calls >= minCalls and failures >= failureRatio * calls)) then
  local reason
  if byConsecutive then
    reason = string.format('%d consecutive failures', longest)
  else
    reason = string.format('%d of %d calls failed in the %s window (ratio %.2f, threshold %.2f)',
      failures, calls, ARGV[27], failures / calls, failureRatio)
  end
  if not byConsecutive then longest = consec end
  open(now, reason, calls, failures, longest, num(ARGV[26]), true)
  save()
  return reply(0, 0)
end
if reset then
  redis.call('HDEL', key, unpack(BUCKETS))
end
cf = consec
redis.call('HSET', key, slot, I(wi) .. ':' .. I(bs) .. ':' .. I(bf), 'wi', I(wi), 'wc', I(calls),
  'wf', I(failures), 'cf', I(cf), 'bp', I(bp))
save()
return reply(calls, failures)
