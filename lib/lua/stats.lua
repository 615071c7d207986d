#!lua flags=no-writes
--- @include "include/keys"
--- @include "include/compact/keys"
--- @include "include/compact/lib"
--- @include "include/pending"
-- stats.lua: counts of one queue, read atomically (each O(log n)).
-- Compact jobs due by now are counted bucket by bucket (one HLEN per
-- bucket of up to 120 jobs).
-- Returns { scheduled, due, inflight, dead, next_ms }: due counts expired
-- leases too (the next poll delivers them); next_ms is the time until the
-- earliest pending job is due (0 if one is due now, counting expired
-- leases; -1 if none is pending; leases still running do not count).
local now = dq_now()
local pending = redis.call('ZCARD', K_DUE)
local due_now = redis.call('ZCOUNT', K_DUE, '-inf', now)
local first, cany = first_due()
if cany then
    -- compact jobs (include/compact/keys.lua): their count, and those due
    -- by now
    pending = pending + tonumber(redis.call('HMGET', K_PFX .. 'cm', 'n')[1]
                                 or 0)
    due_now = due_now + c_lib().count(-math.huge, now)
end
local leased = redis.call('ZCARD', K_LEASE)
local expired = redis.call('ZCOUNT', K_LEASE, '-inf', now)
local dead = redis.call('ZCARD', K_DEAD)
local next_ms = -1
if expired > 0 then
    next_ms = 0
elseif first then
    next_ms = math.max(first - now, 0)
end
return { pending - due_now, due_now + expired, leased - expired, dead, next_ms }
