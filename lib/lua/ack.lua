#!lua flags=allow-oom
-- ack.lua: finishes jobs and deletes all their data.
-- ARGV[2] done window ms (0 = leave no done record), ARGV[3..] pairs: id,
-- token.
-- Returns one result per job:
--   0 acked (or acked already with this same token: a retried ack whose
--     first try landed), -16 stale token (nothing changed; also when
--     another holder finished the job), -17 no such job (or the id came
--     twice in this call).
--
-- The done record (done: id -> the token it was acked with; tokens carry
-- the ms of their delivery) lets a retried ack tell "mine landed" from
-- "someone else's", and a retried keep-mode push tell "already done" from
-- "never pushed", for a window after that delivery.  Each call trims at
-- most as many expired records as it adds plus 16, so the set keeps up,
-- and the key expires a window after the last ack.
-- Reads (jobs, done, dead when needed) come before the first write.
local window = tonumber(ARGV[2])
local ids, toks = {}, {}
for i = 3, #ARGV, 2 do
    ids[#ids + 1] = ARGV[i]
    toks[#toks + 1] = ARGV[i + 1]
end
local res, dead, dup = check_tokens(ids, toks) -- reads jobs
local ok, zadd, in_dead, out, failed = {}, {}, {}, {}, {}
for i, id in ipairs(ids) do
    if res[i] >= 0 then
        out[i] = 0
        ok[#ok + 1] = id
        if window > 0 then
            zadd[#zadd + 1] = toks[i] -- the done record: id -> token
            zadd[#zadd + 1] = id
        end
        if dead[i] then in_dead[#in_dead + 1] = id end
    else
        out[i] = res[i]
        if not dup[i] then failed[#failed + 1] = i end
    end
end
local now
if #failed > 0 or (window > 0 and #ok > 0) then now = dq_now() end
if #failed > 0 then
    -- Reads only: a done record with this token means this holder's
    -- earlier ack landed; with another token, someone else finished it.
    local fids = {}
    for k, i in ipairs(failed) do fids[k] = ids[i] end
    local sc = redis.call('ZMSCORE', K_DONE, unpack(fids))
    for k, i in ipairs(failed) do
        if done_live(sc[k], now, window) then
            out[i] = tonumber(sc[k]) == tonumber(toks[i]) and 0 or -16
        end
    end
end
local n = #ok
if n == 0 then return out end

-- More reads: dead (when a job waits there), and how many done records
-- ran out (this also checks the type of done before anything is written).
if #in_dead > 0 then redis.call('ZCARD', K_DEAD) end
local trim = 0
if window > 0 then
    trim = redis.call('ZCOUNT', K_DONE, '-inf',
                      string.format('%d', (now - window) * 1000))
    if trim > n + 16 then trim = n + 16 end
end

counts_read()
-- Writes: lease is the one key not read above, so it comes first.
if #in_dead < n then redis.call('ZREM', K_LEASE, unpack(ok)) end
if #in_dead > 0 then redis.call('ZREM', K_DEAD, unpack(in_dead)) end
redis.call('HDEL', K_JOBS, unpack(job_fields(ok)))
if window > 0 then
    if trim > 0 then redis.call('ZREMRANGEBYRANK', K_DONE, 0, trim - 1) end
    redis.call('ZADD', K_DONE, unpack(zadd))
    redis.call('PEXPIRE', K_DONE, window)
end
count('acked', n)
return out
