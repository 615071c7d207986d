-- include/retry.lua: what a failed job meets: the queue's backoff and its
-- dead-letter retention.
--- @include "include/keys"
--- @include "include/meta"

-- Dead-letter retention (the queue's settings dead_max: keep at most that
-- many, read as this partition's share dead_part; dead_ttl_ms: keep each
-- at most that long).  A script that adds
-- `adding` jobs to dead calls dead_trim_plan before its first write (it
-- reads dead: the oldest adding + 16 entries at most, so each call's work
-- is bounded and the set still shrinks back) and dead_trim after its
-- writes, which deletes the chosen jobs with all their data.  Only jobs
-- already dead are trimmed: one call that adds more than dead_max leaves
-- the set over by what it added until the next one.
local function dead_trim_plan(conf, adding, now)
    local max, ttl = conf.dead_part, conf.dead_ttl_ms
    if not max and not ttl then return nil end
    local have = redis.call('ZCARD', K_DEAD)
    local excess = max and have + adding - max or 0
    if excess > have then excess = have end
    local budget = adding + 16
    local old = redis.call('ZRANGE', K_DEAD, 0, budget - 1, 'WITHSCORES')
    local ids = {}
    for i = 1, #old, 2 do
        local k = (i + 1) / 2
        if k <= excess or (ttl and tonumber(old[i + 1]) < now - ttl) then
            ids[#ids + 1] = old[i]
        else
            break
        end
    end
    if #ids == 0 then return nil end
    return ids
end

local function dead_trim(ids)
    if not ids then return end
    redis.call('ZREM', K_DEAD, unpack(ids))
    redis.call('HDEL', K_JOBS, unpack(job_fields(ids)))
end

-- The retry delay the queue's backoff settings give a job's attempt-th
-- failure: backoff 1 fixed (base), 2 exponential (base * 2^(attempts-1)),
-- at most backoff_cap_ms (else DQ_DELAY_MAX); backoff_jitter percent of it is taken off at
-- random (seeded from the server's microsecond and the id: Redis seeds
-- math.random the same way in every call).  nil: the queue has no backoff
-- setting.
local function backoff_delay(conf, attempts, now_us, id)
    if conf.backoff == nil then return nil end
    local base = conf.backoff_base_ms or 1000
    local d = base
    if conf.backoff == 2 then
        local e = attempts - 1
        if e < 0 then e = 0 end
        if e > 60 then e = 60 end
        d = base * 2 ^ e
    end
    -- without a cap the doubling still stops at DQ_DELAY_MAX (the due
    -- time stays an exact integer, as every other delay's)
    local cap = conf.backoff_cap_ms or 3153600000000
    if d > cap then d = cap end
    local jit = conf.backoff_jitter or 0
    if jit > 0 and d > 0 then
        local h = now_us % 1000003
        for i = 1, #id do h = (h * 31 + string.byte(id, i)) % 1000003 end
        d = d - math.floor(d * jit / 100 * (h / 1000003))
    end
    return math.floor(d)
end
