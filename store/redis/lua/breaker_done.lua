-- Done of a probe: records the verdict of the half-open breaker's probe.
-- ARGV[18] the permit's generation, ARGV[19] verdict (0 neutral, 1 success,
-- 2 failure), ARGV[20] the portal's Retry-After, ARGV[21] the outcome,
-- ARGV[22] the probe permit's lease.
-- Returns reply(-1, -1).
fetch(STATE)
local verdict = num(ARGV[19])
local retryAfter = num(ARGV[20])
if num(ARGV[18]) == gen and st == 'half_open' then
  if verdict == 1 then
    transition('closed', now, 'probe succeeded', 0, 0, 0, 0, false)
  elseif verdict == 2 then
    open(now, 'probe failed (' .. ARGV[21] .. ')', 0, 0, 0, retryAfter, false)
  elseif pu ~= 0 and pu == num(ARGV[22]) then
    -- Neutral: the slot is free for the next call.
    pu = 0
    ver = ver + 1
    dirty, notify = true, true
  end
end
-- Otherwise a verdict of an earlier generation: stale.
save()
return reply(-1, -1)
