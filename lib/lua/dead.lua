#!lua flags=allow-oom
--- @include "include/keys"
--- @include "include/meta"
--- @include "include/pending"
--- @include "include/wake"
--- @include "include/fair"
-- dead.lua: requeues or purges dead-lettered jobs (list.lua lists them).
-- ARGV[2] action: 'requeue' | 'purge'
--   requeue: ARGV[3] id ('' = the oldest up to ARGV[5]), ARGV[4] delay ms,
--            ARGV[5] limit -> number requeued (attempts reset to 0, an
--            expiry time dropped; the last failure reason stays, to say
--            why it had died)
--   purge:   ARGV[3] id ('' = the oldest up to ARGV[5]), ARGV[5] limit
--            -> number deleted
-- dead, due (for a requeue) and jobs are read before the first write.
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
    local now, now_us = dq_now()
    local at = now + tonumber(ARGV[4])
    local cands = wake_prep(at, first_due(), now)
    local zadd = {}
    for _, id in ipairs(ids) do
        zadd[#zadd + 1] = string.format('%d', at)
        zadd[#zadd + 1] = id
    end
    -- Attempts restart; the meta keeps the last token (ended), so the
    -- next delivery's token is above it.
    local metas = redis.call('HMGET', K_JOBS, unpack(mfs(ids)))
    local hset = {}
    for i, id in ipairs(ids) do
        if metas[i] then
            hset[#hset + 1] = mf(id)
            hset[#hset + 1] = requeued_meta(metas[i])
        end
    end
    -- a queue with groups indexes them by their group and priority
    -- (include/fair.lua)
    local F = has_groups() and fair_lib()
    local exts = {}
    for i in ipairs(F and ids or {}) do
        exts[i] = metas[i] and select(4, parse_meta(metas[i])) or ''
    end
    if #hset > 0 then redis.call('HSET', K_JOBS, unpack(hset)) end
    redis.call('ZREM', K_DEAD, unpack(ids))
    redis.call('ZADD', K_DUE, unpack(zadd))
    if F then F.moved(F.of_exts(exts), zadd) end
    wake(at, cands, now, now_us)
else
    redis.call('HDEL', K_JOBS, unpack(job_fields(ids)))
    redis.call('ZREM', K_DEAD, unpack(ids))
end
return n
