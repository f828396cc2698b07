-- Allow: a permit, or the reason for a refusal. A closed breaker is not
-- asked (replicas decide from their view); this runs when the view says
-- open with its time passed, half-open with no probe in flight, or when
-- the replica has no view yet.
-- Returns reply(-1, -1, code, t): code 0 closed permit, 1 forced open,
-- 2 open until t, 3 probe in flight until t, 4 probe permit with lease t.
fetch(STATE) -- the view returned is whole
advance()
local code, t = 0, 0
if st == 'forced_open' then
  code = 1
elseif st == 'open' then
  code, t = 2, ou
elseif st == 'half_open' then
  if now < pu then
    code, t = 3, pu
  else
    pu = now + lease
    ver = ver + 1
    dirty, notify = true, true -- the other replicas refuse until the lease ends
    code, t = 4, pu
  end
end
save()
return reply(-1, -1, I(code), I(t))
