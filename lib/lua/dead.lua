#!lua flags=allow-oom
-- dead.lua: requeues or purges dead-lettered jobs (list.lua lists them).
-- ARGV[1] action: 'requeue' | 'purge'
--   requeue: ARGV[2] id ('' = the oldest up to ARGV[4]), ARGV[3] delay ms,
--            ARGV[4] limit -> number requeued (attempts reset to 0)
--   purge:   ARGV[2] id ('' = the oldest up to ARGV[4]), ARGV[4] limit
--            -> number deleted
local action = ARGV[1]
local ids
if ARGV[2] ~= '' then
    ids = { ARGV[2] }
else
    ids = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[4]) - 1)
end
local n = 0
if action == 'requeue' then
    local at = dq_now() + tonumber(ARGV[3])
    local before = first_due()
    for _, id in ipairs(ids) do
        if redis.call('ZREM', K_DEAD, id) == 1 then
            redis.call('HDEL', K_JOBS, mf(id))
            redis.call('ZADD', K_DUE, at, id)
            n = n + 1
        end
    end
    if n > 0 then wake(at, before) end
elseif action == 'purge' then
    for _, id in ipairs(ids) do
        if redis.call('ZREM', K_DEAD, id) == 1 then
            redis.call('HDEL', K_JOBS, id, mf(id))
            n = n + 1
        end
    end
else
    return redis.error_reply('ERR delayq: unknown dead action')
end
return n
