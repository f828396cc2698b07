-- Status: reads the breaker, turning open into half-open when its time has
-- passed. Returns reply(calls, failures, open_total, last).
fetch({ 'st', 'since', 'gen', 'ver', 'ou', 'pu', 'ot', 'cf', 'bp', 'wi', 'wc', 'wf', 'last' })
advance()
save()
local total = ot
if st == 'open' or st == 'forced_open' then
  total = total + math.max(now - since, 0)
end
local calls, failures = 0, 0
if st == 'closed' and not clear then
  calls, failures = counts(math.floor(now / bp))
end
return reply(calls, failures, I(total), last or raw.last or false)
