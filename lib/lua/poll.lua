-- poll.lua: claims due jobs under a lease.
-- ARGV[1] max jobs (bounded by the client), ARGV[2] lease ms,
-- ARGV[3] max attempts (0 = unlimited)
-- Returns { now_ms, next_us, id, payload, attempt, due_ms, token, ... }
--   next_us: microseconds until the next job is due (0 when more may be due
--   now, -1 when nothing is pending or in flight).
local now, now_us = dq_now()
local max = tonumber(ARGV[1])
local lease_ms = tonumber(ARGV[2])
local max_attempts = tonumber(ARGV[3])

-- Leases that ran out make their job due again at the lease deadline, so it
-- sorts before jobs that came due later.  Bounded like everything else.
local expired = redis.call('ZRANGEBYSCORE', K_LEASE, '-inf', now,
                           'WITHSCORES', 'LIMIT', 0, max)
if #expired > 0 then
    local back, ids = {}, {}
    for i = 1, #expired, 2 do
        back[#back + 1] = expired[i + 1]
        back[#back + 1] = expired[i]
        ids[#ids + 1] = expired[i]
    end
    redis.call('ZREM', K_LEASE, unpack(ids))
    redis.call('ZADD', K_DUE, unpack(back))
end

local due = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now,
                       'WITHSCORES', 'LIMIT', 0, max)
local out = { now, 0 }
local n = #due / 2
if n > 0 then
    local deadline = now + lease_ms
    local token = redis.call('INCRBY', K_SEQ, n) - n
    local taken, leased, died = {}, {}, {}
    for i = 1, #due, 2 do
        local id = due[i]
        taken[#taken + 1] = id
        local payload = redis.call('HGET', K_JOBS, id)
        local attempts = dq_meta(id)
        if not payload then
            -- An index entry without a job (never written by us): drop it.
            redis.call('HDEL', K_META, id)
        elseif max_attempts > 0 and attempts >= max_attempts then
            died[#died + 1] = now
            died[#died + 1] = id
            dq_set_meta(id, attempts, '0')
        else
            token = token + 1
            attempts = attempts + 1
            local tok = string.format('%d', token)
            dq_set_meta(id, attempts, tok)
            leased[#leased + 1] = deadline
            leased[#leased + 1] = id
            out[#out + 1] = id
            out[#out + 1] = payload
            out[#out + 1] = attempts
            out[#out + 1] = due[i + 1]
            out[#out + 1] = tok
        end
    end
    redis.call('ZREM', K_DUE, unpack(taken))
    if #leased > 0 then redis.call('ZADD', K_LEASE, unpack(leased)) end
    if #died > 0 then redis.call('ZADD', K_DEAD, unpack(died)) end
end

if n < max then
    -- Everything due was taken: say when the next one comes due.
    local first = dq_first_due()
    local l = redis.call('ZRANGE', K_LEASE, 0, 0, 'WITHSCORES')
    if l[2] and (not first or tonumber(l[2]) < first) then
        first = tonumber(l[2])
    end
    if not first then
        out[2] = -1
    elseif first * 1000 > now_us then
        out[2] = first * 1000 - now_us
    end
end
return out
