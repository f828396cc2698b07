-- Memory Get: KEYS[1] a subject's entry, KEYS[2] the subject's generation.
-- Returns {value, value_state, gen, gen_state}; a state is 0 when the key
-- does not exist, 1 when it holds a string, 2 when it holds another type
-- (garbage: treated as absent, and the caller reports it).
local function read(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'string' then
    return redis.call('GET', key), 1
  elseif kind == 'none' then
    return '', 0
  end
  return '', 2
end
local v, vs = read(KEYS[1])
local g, gs = read(KEYS[2])
return { v, vs, g, gs }
