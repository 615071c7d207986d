#!lua flags=allow-oom
--- @include "include/keys"
--- @include "include/meta"
--- @include "include/tokens"
-- extend.lua: sets the lease of a held job to lease ms from now.
-- ARGV[2] id, ARGV[3] token, ARGV[4] lease ms.
-- Returns the new deadline (ms), or -16 / -17.
-- A lease that ran out but was not claimed again is still this holder's:
-- the job goes back to lease from wherever it waits (see held_where).
local id = ARGV[2]
local attempts, err, ext = check_token(id, ARGV[3])
if not attempts then return err end
local where = held_where(id) -- reads lease (and dead, due) before writing
local deadline = dq_now() + tonumber(ARGV[4])
if where and where ~= 'lease' then
    redis.call('HSET', K_JOBS, mf(id), fmt_meta(attempts, ARGV[3], ext))
    redis.call('ZREM', HELD_KEY[where], id)
end
redis.call('ZADD', K_LEASE, deadline, id)
return deadline
