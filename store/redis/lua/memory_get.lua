-- Memory Get: KEYS[1] a subject's generation, KEYS[2..] entries of the
-- subject (one per source of a query). Returns {gen, gen_state, value,
-- value_state, …}, a value and state per key in order; a state is 0 when
-- the key does not exist, 1 when it holds a string, 2 when it holds another
-- type (garbage: treated as absent, and the caller reports it).
local out = {}
for i, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'string' then
    out[2 * i - 1], out[2 * i] = redis.call('GET', key), 1
  elseif kind == 'none' then
    out[2 * i - 1], out[2 * i] = '', 0
  else
    out[2 * i - 1], out[2 * i] = '', 2
  end
end
return out
