-- Memory Forget: KEYS[1] the subject's generation, KEYS[2] the index of its
-- entries. ARGV[1] the new generation, ARGV[2] how long it is kept (ms): a
-- lookup that read the old one before and writes later is refused. The
-- index is dropped; the names of the entries it held are returned, for the
-- caller to delete (they share the subject's hash slot).
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local names = {}
if redis.call('TYPE', KEYS[2])['ok'] == 'set' then
  names = redis.call('SMEMBERS', KEYS[2])
end
redis.call('DEL', KEYS[2])
return names
