-- Reset (ARGV[11] = 'closed') or forced open (ARGV[11] = 'forced_open').
-- Returns {state, gen, ver, events, garbage}.
fetch(STATE)
advance()
if ARGV[11] == 'forced_open' then
  transition('forced_open', now, 'manual open from admin API', 0, 0, 0, 0, false)
else
  transition('closed', now, 'manual reset from admin API', 0, 0, 0, 0, false)
end
save()
return { st, gen, ver, events, garbage and 1 or 0 }
