-- include/fair.lua: fair claiming: the queue-wide limit on jobs in flight
-- (built), and the design of tenant groups and priorities beside it.
--- @include "include/keys"
--- @include "include/meta"
--- @include "include/wake"

-- A queue that uses none of this pays one more field in the HMGET of conf
-- that poll does anyway, and one more field in the HMGET of the metas that
-- ack and nack do anyway (bench/srvcost.sh: within 3%).
--
-- Limit on jobs in flight (DQ_SET_MAX_INFLIGHT).  Settings in conf:
--   inflight_max   the total over all partitions, as set
--   inflight_part  this partition's share (config.lua: the total split
--                  evenly; the client asks for at least one per partition)
-- The number in flight is never counted in a key of its own: it is the
-- number of leases whose deadline has not passed, ZCOUNT lease (now +inf.
-- Every way out of flight already takes the job out of lease or lets its
-- deadline pass: ack, nack and cancel ZREM it, a poll that dead-letters a
-- job whose lease ran out ZREMs it, a lease that expires (the holder
-- crashed, hung or forgot) stops counting at its deadline even before a
-- poll claims the job again.  So no slot can leak: a slot is free at the
-- latest when its lease ends, and extending a lease keeps it.
-- A poll takes at most inflight_part - in flight jobs.  A poll that finds
-- every slot taken while due work waits answers, like the rate limit, the
-- time until the first lease in flight ends (next_us), a consumer being
-- registered in idle until then (include/wake.lua), and it sets the field
-- F_FULL ("\0full", no job's: include/meta.lua) of the jobs hash.  A
-- script that takes jobs out of lease (ack, nack, cancel of a job in
-- flight) reads that field in the HMGET of the metas it does anyway
-- (check_tokens; cancel: one HEXISTS on that rare path); when set it
-- deletes it and tells one waiting consumer to poll now (idle_tell), or
-- broadcasts when none is registered.  A poll of a limited queue that is
-- not held back deletes it, and so does unsetting the limit (config.lua):
-- a queue whose jobs are gone keeps no hash for it.  A lost wake-up
-- (consumer gone) costs at most the waiter's registration time: the first
-- lease deadline.
--
-- Groups (DQ_PUSHOPT_GROUP) and priorities (DQ_PUSHOPT_PRIORITY): design,
-- not built yet.  A job with neither stays in due, as today; the others go
-- to separate ready structures, so the plain path only reads one more conf
-- field, "fair" (a flag the push of such a job sets, like "compact"):
--   <prefix>g<p>:<group> ZSET id -> due ms: the pending jobs of one group
--                        and priority p (group '' = no group, p 1..9; p 0
--                        of group '' is due itself)
--   <prefix>gq           ZSET group -> turn: the groups with pending jobs;
--                        turn = the earliest due time of its sets, or,
--                        after a poll served the group, the poll's ms + a
--                        fraction (behind every group still waiting)
--   <prefix>gp           HASH group -> the priorities it has jobs of (a
--                        bit mask), so a poll reads only sets that exist
-- A poll of a flagged queue reads the groups whose turn has come (LIMIT
-- max, turn order, due counting as group ''), then takes one job per
-- group per round, round-robin, until max: in each group the head of its
-- highest priority set whose head is due (never a job before its due
-- time), oldest due first within one priority.  With 100,000 jobs of A and
-- one of B due together, B's turn is as early as A's, so a poll with
-- max >= 2 takes B's job.  Per-group in flight (DQ_SET_GROUP_MAX_INFLIGHT)
-- would mirror lease for grouped jobs only (<prefix>gl:<group>, id ->
-- lease deadline, counted the same way: an expired entry is a free slot);
-- ack and nack know a job's group from the meta they read ("|g<name>").

-- The limit on jobs in flight of this partition (conf.inflight_part, or
-- nil) for a poll of max jobs: how many more it may lease now (nil: no
-- limit), and, when that is at most max (the poll fills every slot), when
-- a slot frees on its own: the first lease in flight ends (server ms; the
-- poll's own leases end at now + lease_ms).  Reads only.
local function inflight_room(limit, max, now, lease_ms)
    if not limit then return nil end
    local open = string.format('(%d', now)
    local room = limit - redis.call('ZCOUNT', K_LEASE, open, '+inf')
    if room > max then return room, nil end
    if room < 0 then room = 0 end
    local f = redis.call('ZRANGEBYSCORE', K_LEASE, open, '+inf',
                         'WITHSCORES', 'LIMIT', 0, 1)
    local ends = now + lease_ms
    if f[2] and tonumber(f[2]) < ends then ends = tonumber(f[2]) end
    return room, ends
end

-- After the writes of a poll of a limited queue: whether it was held back
-- (so the script that frees a slot wakes a waiter) or not.
local function inflight_mark(held)
    if held then
        redis.call('HSET', K_JOBS, F_FULL, '1')
    else
        redis.call('HDEL', K_JOBS, F_FULL)
    end
end

-- Before a script's first write, when it takes jobs out of lease: false,
-- or, when a poll waits for a slot (seen: check_tokens read the marker),
-- what slot_freed needs: the waiting consumers and the time (the
-- caller's, when it read TIME).
local function slot_waiters(seen, now, now_us)
    if not seen then return false end
    if not now then now, now_us = dq_now() end
    return { idle_peek(now) or {}, now, now_us }
end

-- After the writes: a slot is free; one waiter polls now.
local function slot_freed(w)
    if not w then return end
    redis.call('HDEL', K_JOBS, F_FULL)
    if not idle_tell(w[1], w[2], w[3], nil) then
        redis.call(PUBLISH, CHANNEL, string.format('%d', w[2]))
    end
end
