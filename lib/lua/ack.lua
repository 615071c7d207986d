-- ack.lua: finishes jobs and deletes all their data.
-- ARGV pairs: id, token.  Returns one result per job:
--   0 acked, -16 stale token (nothing changed), -17 no such job.
local out = {}
for i = 1, #ARGV, 2 do
    local id = ARGV[i]
    local attempts, err = dq_check_token(id, ARGV[i + 1])
    if attempts then
        redis.call('ZREM', K_LEASE, id)
        redis.call('ZREM', K_DUE, id)
        redis.call('HDEL', K_JOBS, id)
        redis.call('HDEL', K_META, id)
        out[#out + 1] = 0
    else
        out[#out + 1] = err
    end
end
return out
