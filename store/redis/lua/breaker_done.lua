-- Done: records the verdict of a permitted call.
-- ARGV[11] the permit's generation, ARGV[12] verdict (0 neutral, 1 success,
-- 2 failure), ARGV[13] the portal's Retry-After, ARGV[14] the outcome,
-- ARGV[15] the probe permit's lease, ARGV[16] the window as written in the
-- settings.
-- Returns {state, gen, ver, open_until, events, garbage}.
fetch({ 'st', 'gen', 'ver', 'cf', 'bp', 'wi', 'wc', 'wf' })
local verdict = num(ARGV[12])
local retryAfter = num(ARGV[13])
if num(ARGV[11]) ~= gen or fresh then
  -- A call of an earlier generation: its verdict is stale. (A breaker
  -- found unreadable is written back afresh.)
  if garbage then save() end
  return { st, gen, ver, ou, events, garbage and 1 or 0 }
end
if st == 'half_open' then
  fetch(STATE)
  if fresh then
    -- Unreadable after all: started afresh, the probe's verdict is moot.
    save()
    return { st, gen, ver, ou, events, garbage and 1 or 0 }
  end
  if verdict == 1 then
    transition('closed', now, 'probe succeeded', 0, 0, 0, 0, false)
  elseif verdict == 2 then
    open(now, 'probe failed (' .. ARGV[14] .. ')', 0, 0, 0, retryAfter, false)
  elseif pu ~= 0 and pu == num(ARGV[15]) then
    -- Neutral: the slot is free for the next call.
    pu = 0
    ver = ver + 1
    dirty, notify = true, true
  end
elseif st == 'closed' and verdict ~= 0 then
  local calls, failures, wi, reset = counts(math.floor(now / bp))
  -- A caller whose clock is behind the others' counts in the newest bucket.
  local slot = BUCKETS[wi % 10 + 1]
  local s, f = 0, 0
  if not reset then
    local n, bs, bf = parseBucket(redis.call('HGET', key, slot))
    if n == wi then s, f = bs, bf end
  end
  local consec = cf
  if verdict == 1 then
    s, calls, consec = s + 1, calls + 1, 0
  else
    f, calls, failures, consec = f + 1, calls + 1, failures + 1, consec + 1
  end
  local byConsecutive = consecutive > 0 and consec >= consecutive
  -- Only a failure trips, as in breaker.MemoryStore (gobreaker asks
  -- ReadyToTrip on failures only): a success, while older failures are
  -- still in the window, is no reason to stop calling the portal.
  if verdict == 2 and (byConsecutive or (calls >= minCalls and failures >= failureRatio * calls)) then
    local reason
    if byConsecutive then
      reason = string.format('%d consecutive failures', consec)
    else
      reason = string.format('%d of %d calls failed in the %s window (ratio %.2f, threshold %.2f)',
        failures, calls, ARGV[16], failures / calls, failureRatio)
    end
    fetch(STATE)
    open(now, reason, calls, failures, consec, retryAfter, true)
  else
    -- The hot path: one bucket, the window's sums, the consecutive count.
    if reset then
      redis.call('HDEL', key, unpack(BUCKETS))
    end
    redis.call('HSET', key, slot, I(wi) .. ':' .. I(s) .. ':' .. I(f), 'wi', I(wi), 'wc', I(calls),
      'wf', I(failures), 'cf', I(consec), 'bp', I(bp))
    return { st, gen, ver, ou, events, garbage and 1 or 0 }
  end
end
save()
return { st, gen, ver, ou, events, garbage and 1 or 0 }
