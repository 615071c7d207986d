#!lua flags=allow-oom
-- dead.lua: requeues or purges dead-lettered jobs (list.lua lists them).
-- ARGV[2] action: 'requeue' | 'purge'
--   requeue: ARGV[3] id ('' = the oldest up to ARGV[5]), ARGV[4] delay ms,
--            ARGV[5] limit -> number requeued (attempts reset to 0)
--   purge:   ARGV[3] id ('' = the oldest up to ARGV[5]), ARGV[5] limit
--            -> number deleted
-- dead (and due, for a requeue) is read first; the jobs hash is the first
-- key written.
local action = ARGV[2]
if action ~= 'requeue' and action ~= 'purge' then
    return redis.error_reply('ERR delayq: unknown dead action')
end
local ids
if ARGV[3] ~= '' then
    ids = {}
    if redis.call('ZSCORE', K_DEAD, ARGV[3]) then ids[1] = ARGV[3] end
else
    ids = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[5]) - 1)
end
local n = #ids
if n == 0 then return 0 end
if action == 'requeue' then
    local at = dq_now() + tonumber(ARGV[4])
    local before = first_due()
    local zadd = {}
    for _, id in ipairs(ids) do
        zadd[#zadd + 1] = string.format('%d', at)
        zadd[#zadd + 1] = id
    end
    redis.call('HDEL', K_JOBS, unpack(mfs(ids)))
    redis.call('ZREM', K_DEAD, unpack(ids))
    redis.call('ZADD', K_DUE, unpack(zadd))
    wake(at, before)
else
    local fields = mfs(ids)
    for i, id in ipairs(ids) do fields[n + i] = id end
    redis.call('HDEL', K_JOBS, unpack(fields))
    redis.call('ZREM', K_DEAD, unpack(ids))
end
return n
