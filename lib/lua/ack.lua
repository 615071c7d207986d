#!lua flags=allow-oom
-- ack.lua: finishes jobs and deletes all their data.
-- ARGV[2] done window ms: how long the ack of each job is remembered (0 =
-- not at all), ARGV[3..] pairs: id, token.
-- Returns one result per job:
--   0 acked (or acked already by this same token: a retried ack whose
--     first try landed), -16 stale token (nothing changed; also when the
--     job was finished by another holder), -17 no such job (or the id
--     came twice in this call).
--
-- The done record (done: id -> until when, dtok: id -> token) lets a
-- retried ack tell "mine landed" from "someone else's", and a retried
-- keep-mode push tell "already done" from "never pushed".  Each call trims
-- at most as many expired records as it adds plus 16, so the set keeps up;
-- both keys expire with the window when the queue goes quiet.
local keep_ms = tonumber(ARGV[2])
local ids, toks = {}, {}
for i = 3, #ARGV, 2 do
    ids[#ids + 1] = ARGV[i]
    toks[#toks + 1] = ARGV[i + 1]
end
local now = dq_now()
local res = check_tokens(ids, toks) -- reads jobs
local ok, oktok, out, failed, seen = {}, {}, {}, {}, {}
for i, id in ipairs(ids) do
    out[i] = res[i] >= 0 and 0 or res[i]
    if res[i] >= 0 then
        ok[#ok + 1] = id
        oktok[#oktok + 1] = toks[i]
    elseif not seen[id] then
        failed[#failed + 1] = i
    end
    seen[id] = true
end
if #failed > 0 then
    -- Reads only: a done record with this token means this holder's
    -- earlier ack landed; with another token, someone else finished it.
    local fids = {}
    for k, i in ipairs(failed) do fids[k] = ids[i] end
    local until_ms = redis.call('ZMSCORE', K_DONE, unpack(fids))
    local tok = redis.call('HMGET', K_DTOK, unpack(fids))
    for k, i in ipairs(failed) do
        if until_ms[k] and tonumber(until_ms[k]) > now and tok[k] then
            out[i] = tok[k] == toks[i] and 0 or -16
        end
    end
end
if #ok == 0 then return out end

-- Reads before writes: where each job is (lease; dead when a poll
-- dead-lettered it after its lease ran out; due for an expired lease an
-- older version put back), and the done records due for trimming.
local in_lease = redis.call('ZMSCORE', K_LEASE, unpack(ok))
local rest, in_dead, in_due = {}, {}, {}
for k, id in ipairs(ok) do
    if not in_lease[k] then rest[#rest + 1] = id end
end
if #rest > 0 then
    local sc = redis.call('ZMSCORE', K_DEAD, unpack(rest))
    local other = {}
    for k, id in ipairs(rest) do
        if sc[k] then in_dead[#in_dead + 1] = id
        else other[#other + 1] = id end
    end
    if #other > 0 then
        redis.call('ZCARD', K_DUE)
        in_due = other
    end
end
local expired = {}
if keep_ms > 0 then
    expired = redis.call('ZRANGEBYSCORE', K_DONE, '-inf', now, 'LIMIT', 0,
                         #ok + 16)
end

-- Writes.  dtok is the one key not read above, so it is written first.
local until_s = string.format('%d', now + keep_ms)
if #expired > 0 then
    redis.call('HDEL', K_DTOK, unpack(expired))
    redis.call('ZREM', K_DONE, unpack(expired))
end
if keep_ms > 0 then
    local hset = {}
    for k, id in ipairs(ok) do
        hset[#hset + 1] = id
        hset[#hset + 1] = oktok[k]
    end
    redis.call('HSET', K_DTOK, unpack(hset))
end
if #rest < #ok then redis.call('ZREM', K_LEASE, unpack(ok)) end
if #in_dead > 0 then redis.call('ZREM', K_DEAD, unpack(in_dead)) end
if #in_due > 0 then redis.call('ZREM', K_DUE, unpack(in_due)) end
local n = #ok
for i = 1, n do ok[n + i] = mf(ok[i]) end
redis.call('HDEL', K_JOBS, unpack(ok))
if keep_ms > 0 then
    local zadd = {}
    for i = 1, n do
        zadd[#zadd + 1] = until_s
        zadd[#zadd + 1] = ok[i]
    end
    redis.call('ZADD', K_DONE, unpack(zadd))
    redis.call('PEXPIRE', K_DONE, keep_ms)
    redis.call('PEXPIRE', K_DTOK, keep_ms)
end
return out
