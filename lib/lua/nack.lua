#!lua flags=allow-oom
-- nack.lua: releases a leased job for a retry, or dead-letters it.
-- ARGV[2] id, ARGV[3] token, ARGV[4] delay ms, ARGV[5] dead flag (1 = give
-- up now), ARGV[6] max attempts, ARGV[7] (optional) the failure reason:
-- recorded with the server time as the job's last reason (ef, "<ms>:
-- <reason>", in the HSET of the meta); without it the last one stays.
-- Returns 0 requeued, 1 dead-lettered, -16 stale token, -17 no such job.
-- Every key is read before the first write (jobs by the token check).
local id = ARGV[2]
local attempts, err = check_token(id, ARGV[3])
if not attempts then return err end
local now, now_us = dq_now()
local max_attempts = tonumber(ARGV[6])
local to_dead = ARGV[5] == '1' or (max_attempts > 0 and attempts >= max_attempts)
local where = held_where(id)
local at, cands = now + tonumber(ARGV[4]), false
if to_dead then
    if where ~= 'dead' then redis.call('ZCARD', K_DEAD) end
else
    cands = wake_prep(at, first_due(), now)
end
counts_read()
if ARGV[7] then
    redis.call('HSET', K_JOBS, mf(id), fmt_meta(attempts, '-' .. ARGV[3]),
               ef(id), string.format('%d:', now) .. ARGV[7])
else
    redis.call('HSET', K_JOBS, mf(id), fmt_meta(attempts, '-' .. ARGV[3]))
end
if where and where ~= (to_dead and 'dead' or 'due') then
    redis.call('ZREM', HELD_KEY[where], id)
end
if to_dead then
    redis.call('ZADD', K_DEAD, now, id)
    count('failed', 1)
    return 1
end
redis.call('ZADD', K_DUE, at, id)
count('retried', 1)
wake(at, cands, now, now_us)
return 0
