#!lua flags=allow-oom
-- ack.lua: finishes jobs and deletes all their data.
-- ARGV pairs: id, token.  Returns one result per job:
--   0 acked, -16 stale token (nothing changed), -17 no such job.
local ids, toks = {}, {}
for i = 1, #ARGV, 2 do
    ids[#ids + 1] = ARGV[i]
    toks[#toks + 1] = ARGV[i + 1]
end
local res = check_tokens(ids, toks)
local ok, out = {}, {}
for i, id in ipairs(ids) do
    if res[i] >= 0 then
        ok[#ok + 1] = id
        out[i] = 0
    else
        out[i] = res[i]
    end
end
if #ok > 0 then
    -- A lease that ran out puts the job back in due; while nobody claimed
    -- it again the holder's token is still valid and the ack counts.  A
    -- job is in lease or in due, never both: due only needs looking at
    -- when some were not in lease.
    if redis.call('ZREM', K_LEASE, unpack(ok)) < #ok then
        redis.call('ZREM', K_DUE, unpack(ok))
    end
    local n = #ok
    for i = 1, n do ok[n + i] = mf(ok[i]) end
    redis.call('HDEL', K_JOBS, unpack(ok))
end
return out
