-- push.lua: adds or replaces jobs.
-- ARGV[1] mode: 0 = keep an existing job with the same id, 1 = replace it
-- ARGV[2] time: 0 = values are delays (ms from now), 1 = absolute epoch ms
-- ARGV[3..] triples: id, delay-or-time, payload (the client chunks batches,
--           so one call handles a bounded number of jobs)
-- Returns one outcome per job: 1 pushed, 2 kept, 3 replaced.
local now = dq_now()
local replace = ARGV[1] == '1'
local absolute = ARGV[2] == '1'
local before = dq_first_due()
local zadd, out, earliest = {}, {}, nil
for i = 3, #ARGV, 3 do
    local id, t = ARGV[i], tonumber(ARGV[i + 1])
    local at = t
    if not absolute then at = now + t end
    local outcome
    if not replace then
        outcome = (redis.call('HSETNX', K_JOBS, id, ARGV[i + 2]) == 1) and 1 or 2
    elseif redis.call('HSET', K_JOBS, id, ARGV[i + 2]) == 1 then
        outcome = 1
    else
        -- Rescheduling: whoever held it loses the lease, attempts restart.
        outcome = 3
        redis.call('ZREM', K_LEASE, id)
        redis.call('ZREM', K_DEAD, id)
        redis.call('HDEL', K_META, id)
    end
    if outcome ~= 2 then
        zadd[#zadd + 1] = at
        zadd[#zadd + 1] = id
        if not earliest or at < earliest then earliest = at end
    end
    out[#out + 1] = outcome
end
if #zadd > 0 then redis.call('ZADD', K_DUE, unpack(zadd)) end
dq_wake(earliest, before)
return out
