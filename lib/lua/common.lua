-- common.lua: prelude that the build prepends to every libdelayq script.
--
-- Every script gets the same six keys of one queue, all under one hash tag
-- so that a queue lives in one Redis Cluster slot:
--   KEYS[1] due    ZSET  id -> due time (ms, server clock)
--   KEYS[2] lease  ZSET  id -> lease deadline (ms)
--   KEYS[3] jobs   HASH  id -> payload
--   KEYS[4] meta   HASH  id -> "attempts:token" (only for jobs delivered at
--                        least once; token "0" = no valid lease)
--   KEYS[5] dead   ZSET  id -> time it was dead-lettered (ms)
--   KEYS[6] seq    STRING  counter that hands out lease tokens
-- The wake-up channel is the due key with "due" replaced by "wake".
--
-- Time: every decision uses TIME, read once per call.  Lua numbers are
-- doubles: epoch milliseconds (~1.8e12) and microseconds (~1.8e15) are exact.

local K_DUE, K_LEASE, K_JOBS, K_META, K_DEAD, K_SEQ =
    KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

-- Server time as (ms, us).
local function dq_now()
    local t = redis.call('TIME')
    local s, us = tonumber(t[1]), tonumber(t[2])
    return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- "attempts:token" -> attempts (number), token (string).  Absent -> 0, "0".
local function dq_meta(id)
    local v = redis.call('HGET', K_META, id)
    if not v then return 0, '0' end
    local c = string.find(v, ':', 1, true)
    return tonumber(string.sub(v, 1, c - 1)), string.sub(v, c + 1)
end

local function dq_set_meta(id, attempts, token)
    redis.call('HSET', K_META, id, string.format('%d:%s', attempts, token))
end

-- Earliest due score, or nil when nothing is pending.
local function dq_first_due()
    local f = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
    if f[2] then return tonumber(f[2]) end
    return nil
end

-- Tells blocked consumers that a job due at `at` was added, if it is now the
-- earliest pending job (`before` = earliest due time before the change).
local function dq_wake(at, before)
    if at and (not before or at < before) then
        redis.call('PUBLISH', string.sub(K_DUE, 1, -4) .. 'wake', at)
    end
end

-- Checks a lease token.  Returns attempts, or nil plus an error code:
-- -17 (no such job) or -16 (stale token).  Error codes match delayq.h.
local function dq_check_token(id, token)
    local attempts, current = dq_meta(id)
    if current == '0' or current ~= token then
        if redis.call('HEXISTS', K_JOBS, id) == 0 then return nil, -17 end
        return nil, -16
    end
    return attempts
end
