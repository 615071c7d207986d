#!lua flags=allow-oom
-- extend.lua: sets the lease of a held job to lease ms from now.
-- ARGV: id, token, lease ms.  Returns the new deadline (ms), or -16 / -17.
local id = ARGV[1]
local attempts, err = check_token(id, ARGV[2])
if not attempts then return err end
local deadline = dq_now() + tonumber(ARGV[3])
-- A lease that ran out but was not claimed again is still this holder's:
-- take the job back from the due set.
redis.call('ZREM', K_DUE, id)
redis.call('ZADD', K_LEASE, deadline, id)
return deadline
