#!lua flags=allow-oom
--- @include "include/keys"
--- @include "include/meta"
--- @include "include/compact/keys"
--- @include "include/compact/lib"
--- @include "include/fair"
-- cancel.lua: removes a job that has not been delivered.
-- ARGV[2] id, ARGV[3] flags (1 = also remove a job in flight).
-- Returns 1 removed pending, 2 in flight and left alone, 3 removed in
-- flight, 0 no pending or in-flight job with that id (dead jobs untouched).
-- A job whose lease ran out stays in lease until a poll claims it again,
-- so it is in flight (2) whether or not some poll ran since: its holder's
-- token is still valid.
-- The index is read first; the jobs hash is the first key written (for a
-- compact job: its bucket, after the reads that found it).
local id = ARGV[2]
-- A cancel retires the id's done record (include/tokens.lua): whatever was
-- acked before, no later push of the id is taken for its retry.  The
-- record is read first (and its type with it), written last.
local rec = redis.call('ZSCORE', K_DONE, id)
local function retire()
    if rec and tonumber(rec) % 1 == 0 then
        redis.call('ZADD', K_DONE, string.format('%d.5', rec), id)
    end
end
-- forget deletes every field of the job, a repeating job's rule too: a
-- cancel stops the series.
local function forget()
    redis.call('HDEL', K_JOBS, unpack(job_fields({ id })))
end
if redis.call('ZSCORE', K_DUE, id) then
    forget()
    redis.call('ZREM', K_DUE, id)
    retire()
    return 1
end
if redis.call('ZSCORE', K_LEASE, id) then
    if ARGV[3] ~= '1' then return 2 end
    -- a slot of the limit on jobs in flight frees (include/fair.lua)
    -- (HMGET, not HEXISTS: the commands of a minimal ACL user, README)
    local F = redis.call('HMGET', K_JOBS, '\0full')[1] and fair_lib()
    local waiters = F and F.waiters(nil, nil, nil, dq_now)
    forget()
    redis.call('ZREM', K_LEASE, id)
    retire()
    if F then F.freed(waiters, nil, PUBLISH, CHANNEL) end
    return 3
end
-- a compact job (include/compact/keys.lua) has no other field
if c_flagged() then
    local C = c_lib()
    local due, _, b, score = C.find(id)
    if due then
        C.remove({ { id, due, b, score } })
        retire()
        return 1
    end
end
retire()
return 0
