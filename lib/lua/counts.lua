#!lua flags=no-writes
--- @include "include/keys"
-- counts.lua: the counters of a queue, kept by clients with
-- DQ_OPT_COUNTERS (see include/counters.lua): { delivered, acked,
-- retried, failed } since the queue's counters began (0 for a queue that
-- has none).
local v = redis.call('HMGET', K_COUNTS, 'delivered', 'acked', 'retried',
                     'failed')
for i = 1, 4 do v[i] = tonumber(v[i] or 0) end
return v
