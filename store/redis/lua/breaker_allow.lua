-- Allow: a permit, or the reason for a refusal.
-- Returns {code, gen, ver, t, events, garbage}: code 0 closed permit, 1 forced open,
-- 2 open until t, 3 probe in flight until t, 4 probe permit with lease t.
fetch({ 'st', 'gen', 'ver', 'ou', 'pu' })
if (st == 'open' and now >= ou) or (st == 'half_open' and now >= pu) then
  fetch(STATE) -- about to change
end
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
    dirty = true
    code, t = 4, pu
  end
end
save()
return { code, gen, ver, t, events, garbage and 1 or 0 }
