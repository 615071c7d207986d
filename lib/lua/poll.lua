#!lua flags=allow-oom
-- poll.lua: claims due jobs under a lease, oldest due first.
-- ARGV[1] max jobs (1..1000), ARGV[2] lease ms, ARGV[3] max attempts
-- (0 = unlimited).
-- Returns { now_ms, next_us, id, payload, attempt, due_ms, token, ... }
--   next_us: microseconds until the next job is due (0 when more may be due
--   now, -1 when nothing is pending or in flight).
-- Bounded: at most max expired leases are reclaimed and max jobs taken.
local now, now_us = dq_now()
local max = tonumber(ARGV[1])
local lease_ms = tonumber(ARGV[2])
local max_attempts = tonumber(ARGV[3])

-- A lease that ran out makes its job due again at the lease deadline, so it
-- sorts before jobs that came due later.
local expired = redis.call('ZRANGEBYSCORE', K_LEASE, '-inf', now,
                           'WITHSCORES', 'LIMIT', 0, max)
if #expired > 0 then
    local ids, back = {}, {}
    for i = 1, #expired, 2 do
        ids[#ids + 1] = expired[i]
        back[#back + 1] = expired[i + 1]
        back[#back + 1] = expired[i]
    end
    redis.call('ZREM', K_LEASE, unpack(ids))
    redis.call('ZADD', K_DUE, unpack(back))
end

local due = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now, 'WITHSCORES',
                       'LIMIT', 0, max)
local out = { now, 0 }
local now_s = string.format('%d', now)
local n = #due / 2
if n > 0 then
    local ids = {}
    for i = 1, #due, 2 do ids[#ids + 1] = due[i] end
    redis.call('ZREM', K_DUE, unpack(ids))
    local got, fields = get_with_meta(ids)
    local token = redis.call('INCRBY', K_SEQ, n) - n
    local deadline = string.format('%d', now + lease_ms) -- formatted once
    local mset, leased, died, gone = {}, {}, {}, {}
    for j, id in ipairs(ids) do
        local attempts = parse_meta(got[n + j])
        if not got[j] then
            gone[#gone + 1] = id -- an index entry without a job: drop it
        elseif max_attempts > 0 and attempts >= max_attempts then
            died[#died + 1] = now_s
            died[#died + 1] = id
            mset[#mset + 1] = fields[n + j]
            mset[#mset + 1] = fmt_meta(attempts, '0')
        else
            token = token + 1
            attempts = attempts + 1
            local tok = string.format('%d', token)
            mset[#mset + 1] = fields[n + j]
            mset[#mset + 1] = fmt_meta(attempts, tok)
            leased[#leased + 1] = deadline
            leased[#leased + 1] = id
            out[#out + 1] = id
            out[#out + 1] = got[j]
            out[#out + 1] = attempts
            out[#out + 1] = due[2 * j]
            out[#out + 1] = tok
        end
    end
    if #mset > 0 then redis.call('HSET', K_JOBS, unpack(mset)) end
    if #leased > 64 then
        -- A new small ZSET is a listpack whose every insert scans it; a
        -- member longer than any id (zset-max-listpack-value) makes Redis
        -- build the skiplist at once.  It is removed right after and can
        -- never be a job (ids are at most 128 bytes).
        local big = string.rep('~', 129)
        table.insert(leased, 1, big)
        table.insert(leased, 1, '0')
        redis.call('ZADD', K_LEASE, unpack(leased))
        redis.call('ZREM', K_LEASE, big)
    elseif #leased > 0 then
        redis.call('ZADD', K_LEASE, unpack(leased))
    end
    if #died > 0 then redis.call('ZADD', K_DEAD, unpack(died)) end
    if #gone > 0 then redis.call('HDEL', K_JOBS, unpack(mfs(gone))) end
end

if n < max then
    -- Everything due was taken: say when the next one comes due.
    local first = next_event()
    if not first then
        out[2] = -1
    elseif first * 1000 > now_us then
        out[2] = first * 1000 - now_us
    end
end
return out
