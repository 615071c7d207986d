--- @include "include/keys"
--- @include "include/compact/keys"
-- parts.lua: the partition count of a queue, recorded in Redis the first
-- time a partitioned client uses it.  KEYS are the plain queue's (its name
-- without "#part"), which holds the record as a field of its jobs hash
-- ("\0parts": ids are C strings, so it never names a job).
-- ARGV[2]: the count this client uses (> 1).
-- Returns the recorded count, which the client compares with its own: 1
-- when the plain queue already holds jobs (it was used unpartitioned).
local want = tonumber(ARGV[2])
local got = redis.call('HMGET', K_JOBS, '\0parts')[1]
if got then
    return tonumber(got)
end
if redis.call('ZCARD', K_DUE) + redis.call('ZCARD', K_LEASE) +
        redis.call('ZCARD', K_DEAD) > 0 or c_flagged() then
    return 1
end
redis.call('HSET', K_JOBS, '\0parts', want)
return want
