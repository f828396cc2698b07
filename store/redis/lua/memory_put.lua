-- Memory Put: KEYS[1] a subject's entry, KEYS[2] the subject's generation,
-- KEYS[3] the index of the subject's entries (a set of entry names).
-- ARGV[1] the generation the writer read before calling the portal ("" for
-- none), ARGV[2] the sealed value, ARGV[3] its time to live (ms), ARGV[4]
-- the entry's name. The value is written only while the generation is
-- still ARGV[1]: a subject forgotten since is not written back.
-- Returns {kept, garbage}: garbage is 1 when a key held another type than
-- this script writes (dropped).
local garbage = 0
local kind = redis.call('TYPE', KEYS[2])['ok']
local gen = ''
if kind == 'string' then
  gen = redis.call('GET', KEYS[2])
elseif kind ~= 'none' then
  redis.call('DEL', KEYS[2])
  return { 0, 1 }
end
if gen ~= ARGV[1] then
  return { 0, 0 }
end
kind = redis.call('TYPE', KEYS[3])['ok']
if kind ~= 'set' and kind ~= 'none' then
  redis.call('DEL', KEYS[3])
  garbage = 1
end
local ttl = tonumber(ARGV[3])
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
redis.call('SADD', KEYS[3], ARGV[4])
if redis.call('PTTL', KEYS[3]) < ttl then
  redis.call('PEXPIRE', KEYS[3], ttl)
end
return { 1, garbage }
