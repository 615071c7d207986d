#!lua
-- push.lua: adds or replaces jobs.
-- ARGV[2] mode: 0 = keep an existing job with the same id, 1 = replace it
-- ARGV[3] time: 0 = values are delays (ms from now), 1 = absolute epoch ms
-- ARGV[4..] triples: id, delay-or-time, payload (the client cuts batches
--           into calls of at most 1000 jobs and a few MiB)
-- Returns one outcome per job: 1 pushed, 2 kept, 3 replaced, 4 done (keep
-- mode: the id was acked within its done window, so this push is taken for
-- a retry of one that landed; nothing is written).
-- Reads (done, jobs, due, and lease/dead before a reset) all come before
-- the first write.
local now = dq_now()
local replace = ARGV[2] == '1'
local absolute = ARGV[3] == '1'
if #ARGV == 6 and not replace then
    -- One job, keep mode (the common single push): HSETNX checks and
    -- writes in one command, after the reads of done and due.
    local id, at = ARGV[4], tonumber(ARGV[5])
    if not absolute then at = now + at end
    local d = redis.call('ZSCORE', K_DONE, id)
    if d and tonumber(d) > now then return { 4 } end
    local before = first_due()
    if redis.call('HSETNX', K_JOBS, id, ARGV[6]) == 0 then return { 2 } end
    redis.call('ZADD', K_DUE, string.format('%d', at), id)
    wake(at, before)
    return { 1 }
end
local ids = {}
for i = 4, #ARGV, 3 do ids[#ids + 1] = ARGV[i] end
local exists = redis.call('HMGET', K_JOBS, unpack(ids))
local recs = redis.call('ZMSCORE', K_DONE, unpack(ids))
local before = first_due()
local out, hset, zadd, reset, seen, forget = {}, {}, {}, {}, {}, {}
local earliest
for j, id in ipairs(ids) do
    local i = 1 + 3 * j
    local outcome = 1
    if seen[id] == 4 and not replace then
        outcome = 4
    elseif exists[j] or seen[id] then
        outcome = replace and 3 or 2
        -- Rescheduling takes the job out of lease or dead: a holder's
        -- token goes stale and attempts restart.
        if replace and exists[j] and not seen[id] then
            reset[#reset + 1] = id
        end
    elseif not replace and recs[j] and tonumber(recs[j]) > now then
        outcome = 4
    end
    -- A replaced or new job forgets the done record of an earlier one.
    if replace and recs[j] and not seen[id] then forget[#forget + 1] = id end
    seen[id] = seen[id] or outcome
    if outcome == 1 or outcome == 3 then
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
    -- Type checks of the keys the reset writes, before any write.
    redis.call('ZCARD', K_LEASE)
    redis.call('ZCARD', K_DEAD)
end
if #forget > 0 then
    redis.call('HDEL', K_DTOK, unpack(forget)) -- the first write
    redis.call('ZREM', K_DONE, unpack(forget))
end
if #reset > 0 then
    redis.call('ZREM', K_LEASE, unpack(reset))
    redis.call('ZREM', K_DEAD, unpack(reset))
    redis.call('HDEL', K_JOBS, unpack(mfs(reset)))
end
if earliest then
    redis.call('HSET', K_JOBS, unpack(hset))
    redis.call('ZADD', K_DUE, unpack(zadd))
end
wake(earliest, before)
return out
