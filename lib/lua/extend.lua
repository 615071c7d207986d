#!lua flags=allow-oom
--- @include "include/keys"
--- @include "include/meta"
--- @include "include/tokens"
--- @include "include/fair"
-- extend.lua: sets the lease of a held job to lease ms from now.
-- ARGV[2] id, ARGV[3] token, ARGV[4] lease ms.
-- Returns the new deadline (ms), or -16 / -17.
-- A live lease (deadline not passed) keeps its slot: one ZSCORE, one ZADD.
-- A lease that ran out but was not claimed again is still this holder's:
-- the job goes back to lease from wherever it waits (see held_where), but
-- only if the limits on jobs in flight (include/fair.lua) have room for it
-- now, as a poll would count them: the queue-wide one (conf inflight_part:
-- ZCOUNT lease (now +inf)) and its group's (conf group_inflight_part, a
-- job of a named group on a queue with groups: F.g_room).  Else -16
-- (lease lost) and nothing changes.  Brought back under a limit per
-- group, a job of a named group enters its group's lease index again
-- (F.relet), so polls count it.
-- conf is read only then (it is not among this script's keys: same hash
-- tag, as ack.lua reads it).
local id = ARGV[2]
local attempts, err, ext = check_token(id, ARGV[3])
if not attempts then return err end
local s = redis.call('ZSCORE', K_LEASE, id)
local now = dq_now()
local deadline = now + tonumber(ARGV[4])
if s and tonumber(s) > now then
    redis.call('ZADD', K_LEASE, deadline, id)
    return deadline
end
local where = s and 'lease' or held_where(id)
local c = redis.pcall('HMGET', string.sub(K_DUE, 1, -4) .. 'conf',
                      'inflight_part', 'group_inflight_part', 'grouped')
if c.err then c = {} end
local limit = tonumber(c[1])
if limit and redis.call('ZCOUNT', K_LEASE, string.format('(%d', now),
                        '+inf') >= limit then
    return -16
end
local g = c[3] and c[2] and string.match(ext, '|g([^|]*)')
local F = g and g ~= '' and fair_lib()
if F and not F.g_room(g, tonumber(c[2]), now) then return -16 end
if where and where ~= 'lease' then
    redis.call('HSET', K_JOBS, mf(id), fmt_meta(attempts, ARGV[3], ext))
    redis.call('ZREM', HELD_KEY[where], id)
end
redis.call('ZADD', K_LEASE, deadline, id)
if F then F.relet(g, id, deadline) end
return deadline
