#!lua flags=allow-oom
-- nack.lua: releases a leased job for a retry, or dead-letters it.
-- ARGV: id, token, delay ms, dead flag (1 = give up now), max attempts.
-- Returns 0 requeued, 1 dead-lettered, -16 stale token, -17 no such job.
local id = ARGV[1]
local attempts, err = check_token(id, ARGV[2])
if not attempts then return err end
local now = dq_now()
local max_attempts = tonumber(ARGV[5])
redis.call('ZREM', K_LEASE, id)
redis.call('HSET', K_JOBS, mf(id), fmt_meta(attempts, '0'))
if ARGV[4] == '1' or (max_attempts > 0 and attempts >= max_attempts) then
    redis.call('ZREM', K_DUE, id)
    redis.call('ZADD', K_DEAD, now, id)
    return 1
end
local at = now + tonumber(ARGV[3])
local before = first_due()
redis.call('ZADD', K_DUE, at, id)
wake(at, before)
return 0
