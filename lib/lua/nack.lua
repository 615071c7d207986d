#!lua flags=allow-oom
--- @include "include/keys"
--- @include "include/counters"
--- @include "include/meta"
--- @include "include/settings"
--- @include "include/pending"
--- @include "include/wake"
--- @include "include/tokens"
--- @include "include/retry"
--- @include "include/fair"
-- nack.lua: releases a leased job for a retry, or dead-letters it.
-- ARGV[2] id, ARGV[3] token, ARGV[4] delay ms, ARGV[5] flags (1 = give
-- up now, 2 = the queue's backoff setting, when it has one, decides the
-- delay instead of ARGV[4]), ARGV[6] max attempts (the client's; the
-- job's own and the queue's setting come first), ARGV[7] (optional) the
-- failure reason: recorded with the server time as the job's last reason
-- (ef, "<ms>:<reason>", in the HSET of the meta); without it the last one
-- stays, except that a retry this script turns into a dead letter for max
-- attempts records "max attempts".
-- Returns 0 requeued, 1 dead-lettered, -16 stale token, -17 no such job.
-- Every key is read before the first write (jobs by the token check, conf
-- by settings(), dead by dead_trim_plan or a ZCARD).
local id = ARGV[2]
local attempts, err, ext, full = check_token(id, ARGV[3])
if not attempts then return err end
local now, now_us = dq_now()
local flags = tonumber(ARGV[5])
local conf = settings('max_attempts', 'backoff', 'backoff_base_ms',
                      'backoff_cap_ms', 'backoff_jitter', 'dead_part',
                      'dead_ttl_ms', 'compact', 'grouped')
local most = max_attempts_of(ext, conf, tonumber(ARGV[6]))
local to_dead = flags % 2 == 1 or (most > 0 and attempts >= most)
local reason = ARGV[7]
if not reason and to_dead and flags % 2 == 0 then reason = 'max attempts' end
local where = held_where(id)
local delay = tonumber(ARGV[4])
if flags % 4 >= 2 then
    delay = backoff_delay(conf, attempts, now_us, id) or delay
end
local at, cands, trim = now + delay, false, nil
if to_dead then
    if where ~= 'dead' then
        trim = dead_trim_plan(conf, 1, now)
        redis.call('ZCARD', K_DEAD)
    end
else
    cands = wake_prep(at, first_due(conf.compact ~= nil), now)
end
-- a slot of the limit on jobs in flight frees, or the job goes back to
-- its group's index (include/fair.lua)
local F = ((full and where == 'lease') or conf.grouped) and fair_lib()
local waiters = full and where == 'lease' and
    F.waiters(now, now_us, idle_peek, dq_now)
counts_read()
if reason then
    redis.call('HSET', K_JOBS, mf(id), fmt_meta(attempts, '-' .. ARGV[3], ext),
               ef(id), string.format('%d:', now) .. reason)
else
    redis.call('HSET', K_JOBS, mf(id), fmt_meta(attempts, '-' .. ARGV[3], ext))
end
if where and where ~= (to_dead and 'dead' or 'due') then
    redis.call('ZREM', HELD_KEY[where], id)
end
if to_dead then
    redis.call('ZADD', K_DEAD, now, id)
    dead_trim(trim)
    count('failed', 1)
    if waiters then F.freed(waiters, idle_tell, PUBLISH, CHANNEL) end
    return 1
end
redis.call('ZADD', K_DUE, at, id)
if conf.grouped then
    F.add(ext ~= '' and string.match(ext, '|g([^|]*)') or '',
          { string.format('%d', at), id }, F.prio(ext))
end
count('retried', 1)
wake(at, cands, now, now_us)
if waiters then F.freed(waiters, idle_tell, PUBLISH, CHANNEL) end
return 0
