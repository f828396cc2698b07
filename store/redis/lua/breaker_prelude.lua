-- The state of one breaker and the steps every breaker script shares.
-- Times are integer microseconds on the caller's clock: Redis TIME is never
-- read, so replicas (and tests with a fake clock) decide on the time they
-- pass in.
--
-- KEYS[1]  the breaker's hash
-- ARGV[1]  now
-- ARGV[2]  window (> 0)           ARGV[3]  min_calls
-- ARGV[4]  failure_ratio          ARGV[5]  consecutive_failures (0 = off)
-- ARGV[6]  open_for               ARGV[7]  probe lease
-- ARGV[8]  invalidation channel   ARGV[9]  breaker key   ARGV[10] operation
-- ARGV[11..17] the caller's view of the breaker (its seed): state, gen,
--          ver, since, open_until, probe_until, open time before since;
--          state '' when it has none
-- ARGV[18...] the script's own arguments
--
-- No amnesia (SPEC 11): when the hash is gone (FLUSHALL, a restart, a
-- failover that lost writes) or holds an older generation than the
-- caller's view, the view is written back, so that a breaker the fleet
-- knows open stays open; of two views of one generation, the later
-- open_until wins. A generation only grows in Redis, and views are read
-- from it: a view ahead of Redis means Redis lost what it had.
--
-- Hash fields:
--   st     state: closed, open, half_open or forced_open
--   since  when it entered it
--   gen    generation, bumped at every transition: a permit of an earlier
--          one is stale
--   ver    version, bumped at every change another replica may have cached
--   ou     open_until; pu probe_until (the probe's lease)
--   ot     time spent open before the current state
--   cf     consecutive failures
--   bp     bucket period (window/10) the window was counted with
--   b0..b9 the rolling window: bucket "number:successes:failures" in field
--          b(number % 10), number = floor(now / bp)
--   wi, wc, wf  the newest bucket number counted, and the calls and
--          failures of the ten buckets that end with it, so that the hot
--          path reads one bucket, not ten
--   last   the last transition, a JSON array of strings
--
-- Redis contents are untrusted (SPEC 9). A key of another type, a hash
-- without a valid state, or any field fetched that is not what this script
-- writes (a number that is not an integer, a time further ahead than the
-- breaker could have set it, an open breaker that ends before it began, a
-- last transition that does not decode) makes the whole hash unreadable: it
-- is deleted, the breaker starts closed and is written afresh, and the
-- script reports it (reply element 12, after the view, is 1) so that the caller logs
-- the key's name. A window bucket that does not parse counts as empty and
-- is reported the same way. Scripts fetch only the fields they need (HMGET
-- costs by the field), and always fetch STATE before changing anything.

local key = KEYS[1]
local LIMIT = 2 ^ 53

local function num(v)
  v = tonumber(v)
  if v == nil or v ~= v or v >= LIMIT or v <= -LIMIT then
    return 0
  end
  return math.floor(v)
end

-- I formats an integer for Redis: a bare Lua number would be written with
-- 14 significant digits, too few for a time in microseconds.
local function I(x)
  return string.format('%d', x)
end

local now = num(ARGV[1])
local window = num(ARGV[2])
if window < 10 then window = 10 end
local minCalls = num(ARGV[3])
if minCalls < 1 then minCalls = 1 end
local failureRatio = tonumber(ARGV[4]) or 0
local consecutive = num(ARGV[5])
local openFor = num(ARGV[6])
local lease = num(ARGV[7])
local bp = math.floor(window / 10)

local STATE = { 'st', 'since', 'gen', 'ver', 'ou', 'pu', 'ot', 'cf' }
local WINDOW = { 'bp', 'wi', 'wc', 'wf' }
local BUCKETS = { 'b0', 'b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7', 'b8', 'b9' }
local VALID = { closed = true, open = true, half_open = true, forced_open = true }

-- How far ahead of now a time written by another replica may be: clocks
-- disagree. Further than that, it was not written by a replica.
local SKEW = 300000000
-- The longest open time a breaker takes from a portal's Retry-After: the
-- furthest open_until a script writes is now + max(open_for, MAXFLOOR).
local MAXFLOOR = 86400000000

-- int returns v as an integer when it is one written by I (digits, an
-- optional minus, within the exact range of a Lua number), else nil.
local function int(v)
  if type(v) ~= 'string' or not string.match(v, '^%-?%d+$') then
    return nil
  end
  local n = tonumber(v)
  if n == nil or n >= LIMIT or n <= -LIMIT then
    return nil
  end
  return n
end

local function counter(v)
  local n = int(v)
  return n ~= nil and n >= 0
end

local function validLast(v)
  local ok, e = pcall(cjson.decode, v)
  if not ok or type(e) ~= 'table' or #e ~= 9 then
    return false
  end
  for i = 1, 9 do
    if type(e[i]) ~= 'string' then return false end
  end
  if not VALID[e[2]] or not VALID[e[3]] then return false end
  local at = int(e[1])
  if at == nil or at < 0 or at > now + SKEW then return false end
  for i = 5, 9 do
    if not counter(e[i]) then return false end
  end
  return true
end

-- CHECK tells, field by field, whether a value is one the scripts write.
local CHECK = {
  st = function(v) return VALID[v] == true end,
  since = function(v) local n = int(v) return n ~= nil and n >= 0 and n <= now + SKEW end,
  gen = counter, ver = counter, ot = counter, cf = counter, wc = counter, wf = counter, wi = counter,
  ou = function(v) local n = int(v) return n ~= nil and n >= 0 and n <= now + math.max(openFor, MAXFLOOR) + SKEW end,
  pu = function(v) local n = int(v) return n ~= nil and n >= 0 and n <= now + lease + SKEW end,
  bp = function(v) local n = int(v) return n ~= nil and n > 0 end,
  last = validLast,
}

local raw, loaded, fresh, restored = {}, {}, false, false
local garbage = false -- something unreadable was found
local reborn = false  -- the hash was unreadable, deleted, started afresh
local st, since, gen, ver, ou, pu, ot, cf = 'closed', now, 0, 0, 0, 0, 0, 0
local last -- a transition made by this script

local dirty = false  -- the state fields must be written
local clear = false  -- the window must be emptied
local notify = false -- other replicas must drop what they cached
local events = {}

-- restore writes the caller's view back (see above) when Redis holds none
-- or an older one. It runs once, at the first fetch.
local seeded = false
local function restore()
  if seeded then return end
  seeded = true
  local sst = ARGV[11]
  -- A hash found unreadable starts closed (SPEC 9), whatever the caller
  -- saw: its view may be what the garbage was read as.
  if not VALID[sst] or reborn then return end
  local sgen = num(ARGV[12])
  local cur = num(raw.gen)
  if fresh and (sst ~= 'closed' or sgen > 0) or not fresh and sgen > cur then
    raw = { st = sst, gen = ARGV[12], ver = I(math.max(num(ARGV[13]), num(raw.ver)) + 1), since = ARGV[14],
      ou = ARGV[15], pu = ARGV[16], ot = ARGV[17], cf = '0', last = raw.last }
    for _, f in ipairs(STATE) do loaded[f] = true end
    for _, f in ipairs(WINDOW) do loaded[f] = true end
    fresh, restored = false, true
    dirty, clear, notify = true, true, true
  elseif not fresh and sgen == cur and sst == 'open' and raw.st == 'open' and num(ARGV[15]) > num(raw.ou) then
    raw.ou = ARGV[15] -- the latest open_until wins
    raw.ver = I(num(raw.ver) + 1)
    dirty, notify = true, true
  end
end

-- fetch reads the named fields not read yet, then parses the state again:
-- call it before changing anything. The first call must name 'st'.
local function fetch(names)
  local want = {}
  for i = 1, #names do
    local f = names[i]
    if not loaded[f] then
      loaded[f] = true
      want[#want + 1] = f
    end
  end
  if #want > 0 and not fresh then
    local vals = redis.pcall('HMGET', key, unpack(want))
    local bad = false
    if vals['err'] ~= nil then
      vals = {}
      raw.st = nil -- not a hash
    end
    for i = 1, #want do
      local v = vals[i]
      if v then
        raw[want[i]] = v
        local check = CHECK[want[i]]
        if check and not check(v) then bad = true end
      end
    end
    -- Across fields (each one valid by now): an open breaker does not end
    -- before it began, the window's failures are among its calls, and its
    -- newest bucket is not ahead of the clocks.
    if not bad then
      if raw.st == 'open' and raw.since and raw.ou and int(raw.ou) < int(raw.since) then bad = true end
      if raw.wc and raw.wf and int(raw.wf) > int(raw.wc) then bad = true end
      if raw.wi and raw.bp and int(raw.wi) * int(raw.bp) > now + SKEW then bad = true end
    end
    if bad or not VALID[raw.st] then
      -- Whatever is there without a readable state: the breaker starts
      -- afresh, closed, and is written back.
      if redis.call('DEL', key) == 1 then garbage, reborn = true, true end
      raw, fresh, dirty = {}, true, true
    end
    restore()
  end
  st = raw.st or 'closed'
  since = num(raw.since)
  if fresh then since = now end
  gen, ver, ou, pu, ot, cf = num(raw.gen), num(raw.ver), num(raw.ou), num(raw.pu), num(raw.ot), num(raw.cf)
  if reborn then
    -- Replicas may have kept what the lost state said (open, say) at a
    -- version of its own: the new state's version is above any counted
    -- one (the clock, in microseconds), and published, so that they drop
    -- it; permits of the lost generations are stale.
    gen, ver, notify = now, now, true
  end
end

local function parseBucket(v)
  if not v then return nil, 0, 0 end
  local n, s, f = string.match(v, '^(%-?%d+):(%d+):(%d+)$')
  if n == nil or int(n) == nil or int(s) == nil or int(f) == nil then
    garbage = true -- counts as empty; overwritten in its turn
    return nil, 0, 0
  end
  return num(n), num(s), num(f)
end

-- counts returns the calls and failures of the window that ends in bucket
-- number idx, the newest bucket number counted, and whether the buckets
-- were counted with another period (and must be deleted). WINDOW must have
-- been fetched.
local function counts(idx)
  if fresh or num(raw.bp) ~= bp then
    return 0, 0, idx, not fresh
  end
  local wi, wc, wf = num(raw.wi), num(raw.wc), num(raw.wf)
  if idx <= wi then
    return wc, wf, wi, false
  end
  if idx - wi >= 10 then
    return 0, 0, idx, false -- every bucket counted has left the window
  end
  -- Buckets wi-9 .. idx-10 leave the window: take them off the sums.
  local names = {}
  for k = wi - 9, idx - 10 do
    names[#names + 1] = BUCKETS[k % 10 + 1]
  end
  local vals = redis.call('HMGET', key, unpack(names))
  for i = 1, #names do
    local n, s, f = parseBucket(vals[i])
    if n == wi - 10 + i then
      wc, wf = wc - s - f, wf - f
    end
  end
  return math.max(wc, 0), math.max(wf, 0), idx, false
end

local function transition(to, at, reason, calls, failures, consec, retryAfter, trip)
  if st == 'open' or st == 'forced_open' then
    ot = ot + math.max(at - since, 0)
  end
  local w = 0
  if trip then w = window end
  local e = { I(at), st, to, reason, I(calls), I(failures), I(consec), I(retryAfter), I(w) }
  gen = gen + 1
  ver = ver + 1
  st, since, ou, pu, cf = to, at, 0, 0, 0
  last = cjson.encode(e)
  events[#events + 1] = e
  dirty, clear, notify = true, true, true -- counts restart
end

-- open trips the breaker: open for open_for, or longer if the portal asked
-- (the Retry-After floor).
local function open(at, reason, calls, failures, consec, retryAfter, trip)
  local d, ra = openFor, 0
  -- A Retry-After beyond MAXFLOOR is taken as MAXFLOOR: no script writes an
  -- open_until that the next one would not read back.
  retryAfter = math.min(retryAfter, MAXFLOOR)
  if retryAfter > d then
    d, ra = retryAfter, retryAfter
  end
  transition('open', at, reason, calls, failures, consec, ra, trip)
  ou = at + d
end

-- advance turns an open breaker whose time has passed into half-open, at
-- the instant it passed.
local function advance()
  if st == 'open' and now >= ou then
    transition('half_open', ou, 'open time elapsed', 0, 0, 0, 0, false)
  end
end

local function save()
  if clear then
    redis.call('HDEL', key, unpack(BUCKETS))
  end
  if dirty then
    redis.call('HSET', key, 'st', st, 'since', I(since), 'gen', I(gen), 'ver', I(ver), 'ou', I(ou),
      'pu', I(pu), 'ot', I(ot), 'cf', I(cf))
    if clear or fresh then
      redis.call('HSET', key, 'bp', I(bp), 'wi', '0', 'wc', '0', 'wf', '0')
    end
    if last ~= nil then
      redis.call('HSET', key, 'last', last)
    end
  end
  if notify then
    -- The new state itself: replicas update their view without a read.
    redis.call('PUBLISH', ARGV[8], cjson.encode({ k = ARGV[9], o = ARGV[10], v = I(ver), st = st, g = I(gen),
      sn = I(since), ou = I(ou), pu = I(pu), ot = I(ot) }))
  end
end

-- reply is what every breaker script returns first: the transitions it
-- made, then the breaker as it stands (the caller's new view), then the
-- window's sums when known (-1 otherwise), then 1 when something
-- unreadable was found (the caller logs the key), then extra.
local function reply(wc, wf, ...)
  return { events, st, I(gen), I(ver), I(since), I(ou), I(pu), I(ot), I(cf), I(wc), I(wf), garbage and 1 or 0, ... }
end
