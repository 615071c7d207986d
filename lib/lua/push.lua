#!lua
-- push.lua: adds or replaces jobs.
-- ARGV[1] mode: 0 = keep an existing job with the same id, 1 = replace it
-- ARGV[2] time: 0 = values are delays (ms from now), 1 = absolute epoch ms
-- ARGV[3..] triples: id, delay-or-time, payload (the client chunks batches
--           to at most 1000 jobs per call)
-- Returns one outcome per job: 1 pushed, 2 kept, 3 replaced.
local now = dq_now()
local replace = ARGV[1] == '1'
local absolute = ARGV[2] == '1'
if #ARGV == 5 and not replace then
    -- One job, keep mode (the common single push): HSETNX checks and
    -- writes in one command.
    local id, at = ARGV[3], tonumber(ARGV[4])
    if not absolute then at = now + at end
    if redis.call('HSETNX', K_JOBS, id, ARGV[5]) == 0 then return { 2 } end
    local before = first_due()
    redis.call('ZADD', K_DUE, string.format('%d', at), id)
    wake(at, before)
    return { 1 }
end
local ids = {}
for i = 3, #ARGV, 3 do ids[#ids + 1] = ARGV[i] end
local exists = redis.call('HMGET', K_JOBS, unpack(ids))
local out, hset, zadd, reset, seen = {}, {}, {}, {}, {}
local earliest
for j, id in ipairs(ids) do
    local i = 3 * j
    local outcome = 1
    if exists[j] or seen[id] then
        outcome = replace and 3 or 2
        -- Rescheduling takes the job out of lease or dead: a holder's
        -- token goes stale and attempts restart.
        if replace and exists[j] then reset[#reset + 1] = id end
    end
    seen[id] = true
    if outcome ~= 2 then
        local at = tonumber(ARGV[i + 1])
        if not absolute then at = now + at end
        hset[#hset + 1] = id
        hset[#hset + 1] = ARGV[i + 2]
        -- Numbers reach redis.call as strings formatted here: Lua's own
        -- conversion prints them the slow floating-point way.
        zadd[#zadd + 1] = string.format('%d', at)
        zadd[#zadd + 1] = id
        if not earliest or at < earliest then earliest = at end
    end
    out[j] = outcome
end
if #reset > 0 then
    redis.call('ZREM', K_LEASE, unpack(reset))
    redis.call('ZREM', K_DEAD, unpack(reset))
    redis.call('HDEL', K_JOBS, unpack(mfs(reset)))
end
local before
if earliest then
    before = first_due()
    redis.call('HSET', K_JOBS, unpack(hset))
    redis.call('ZADD', K_DUE, unpack(zadd))
end
wake(earliest, before)
return out
