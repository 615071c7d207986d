#!lua flags=no-writes
--- @include "include/keys"
--- @include "include/meta"
--- @include "include/compact/keys"
--- @include "include/compact/lib"
-- get.lua: one job by its id, read-only (no-writes: it runs on replicas
-- and under maxmemory, and never changes anything).
-- ARGV[2] id.
-- Returns { now_ms } when there is no such job, else
--   { now_ms, state, time_ms, attempts, payload, reason, rule, group,
--     followup, priority }
--   state: 1 pending and not due yet, 2 pending and due (time_ms <= now),
--   3 in flight (also a lease that ran out while no poll claimed the job
--   again: its holder may still ack it, as dq_cancel and list.lua see it),
--   4 dead; time_ms: due time, lease deadline or time of death; attempts:
--   deliveries so far (from meta); reason: the last failure reason field
--   ("<ms>:<reason>") or nil (false) when none was recorded; rule: a
--   repeating job's rule (include/repeat.lua) or false; group: the job's
--   group (include/fair.lua) or false; followup: a debounced job's
--   follow-up (include/debounce.lua) as the earliest time it may be due,
--   min(at, deadline), or false when none waits; priority (0 none) (a
--   compact job's reply ends before group).
-- Bounded: one HMGET of five fields and up to three ZSCOREs (or, for a
-- compact job, three lookups).  An index
-- entry without a payload (polls drop those) is no job.
local now = dq_now()
local id = ARGV[2]
local got = redis.call('HMGET', K_JOBS, id, mf(id), ef(id), rf(id),
                       id .. '\0n')
if not got[1] then
    -- a compact job: pending, never delivered, no reason, no rule
    local due, payload
    if c_flagged() then due, payload = c_lib().find(id) end
    if not due then return { now } end
    return { now, due <= now and 2 or 1, string.format('%d', due), 0, payload,
             false, false }
end
local state, t = 0, nil
t = redis.call('ZSCORE', K_DUE, id)
if t then
    state = tonumber(t) <= now and 2 or 1
else
    t = redis.call('ZSCORE', K_LEASE, id)
    if t then
        state = 3
    else
        t = redis.call('ZSCORE', K_DEAD, id)
        if t then state = 4 end
    end
end
if state == 0 then return { now } end
local attempts, _, _, ext = parse_meta(got[2])
-- the follow-up "<at>:<deadline>:<payload>": min(at, deadline), 0 none
local fu = false
if got[5] then
    local at, dl = string.match(got[5], '^(%d+):(%d+):')
    at, dl = tonumber(at), tonumber(dl)
    fu = string.format('%d', (dl > 0 and dl < at) and dl or at)
end
return { now, state, t, attempts, got[1], got[3] or false, got[4] or false,
         ext ~= '' and string.match(ext, '|g([^|]*)') or false, fu,
         ext ~= '' and tonumber(string.match(ext, '|p(%d)') or 0) or 0 }
