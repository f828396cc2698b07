-- Reset (ARGV[18] = 'closed') or forced open (ARGV[18] = 'forced_open').
-- Returns reply(0, 0).
fetch(STATE)
advance()
if ARGV[18] == 'forced_open' then
  transition('forced_open', now, 'manual open from admin API', 0, 0, 0, 0, false)
else
  transition('closed', now, 'manual reset from admin API', 0, 0, 0, 0, false)
end
save()
return reply(0, 0)
