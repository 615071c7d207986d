#!lua
--- @include "include/keys"
--- @include "include/meta"
--- @include "include/compact/keys"
--- @include "include/compact/lib"
--- @include "include/pending"
--- @include "include/wake"
--- @include "include/fair"
-- reschedule.lua: moves pending jobs to a new due time (a promote is a
-- move to now), keeping their payload, attempts, options, repeat rule
-- and last failure reason.
-- ARGV[2] flags: 'a' the time is absolute epoch ms (else a delay from
--         now, server clock), 'r' revive dead jobs
-- ARGV[3] the time, ARGV[4..] ids (the client cuts batches into calls of
--         at most 1000 ids of one partition)
-- Returns one outcome per id: 0 no such job, 1 moved, 2 in flight (left
-- alone, also when its lease ran out and no poll claimed it again: its
-- holder may still ack it), 3 dead (left alone), 4 dead and revived
-- ('r': back to pending at the time, as dq_dead_requeue does: attempts
-- restart, a passed expiry goes, the reason stays).  A repeating job
-- moves its next run only: its rule stays, and the run after comes from
-- the rule at its ack.  A compact job (include/compact/keys.lua) goes
-- back to the default layout at its new time.
-- Reads (due, lease, dead, the compact index and shards, the metas of
-- revived jobs) come before the first write, which is the jobs hash (an
-- HSET, when any job needs one) or else the due index.
local now, now_us = dq_now()
local at = tonumber(ARGV[3])
if not string.find(ARGV[2], 'a', 1, true) then at = now + at end
local revive = string.find(ARGV[2], 'r', 1, true) ~= nil
local ids = {}
for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
local due = redis.call('ZMSCORE', K_DUE, unpack(ids))
local lease = redis.call('ZMSCORE', K_LEASE, unpack(ids))
local dead = redis.call('ZMSCORE', K_DEAD, unpack(ids))
local cany = c_flagged()
local C = cany and c_lib()
local before = first_due(cany)
local out, seen, zadd, hset, raise, unc = {}, {}, {}, {}, {}, {}
local moved = {} -- the ids of zadd, in its order
for j, id in ipairs(ids) do
    local o = seen[id]
    if not o then
        o = 0
        if due[j] then
            o = 1
        elseif lease[j] then
            o = 2
        elseif dead[j] then
            o = revive and 4 or 3
            if revive then raise[#raise + 1] = id end
        elseif cany then
            local d, payload, b, score = C.find(id)
            if d then
                o = 1
                unc[#unc + 1] = { id, d, b, score }
                hset[#hset + 1] = id
                hset[#hset + 1] = payload
            end
        end
        if o == 1 or o == 4 then
            zadd[#zadd + 1] = string.format('%d', at)
            zadd[#zadd + 1] = id
            moved[#moved + 1] = id
        end
        seen[id] = o
    end
    out[j] = o
end
if #zadd == 0 then return out end
if #raise > 0 then
    local metas = redis.call('HMGET', K_JOBS, unpack(mfs(raise)))
    for i, id in ipairs(raise) do
        if metas[i] then
            hset[#hset + 1] = mf(id)
            hset[#hset + 1] = requeued_meta(metas[i])
        end
    end
end
-- a queue with groups indexes them at the new time (include/fair.lua)
local F = has_groups() and fair_lib()
local gs = F and F.groups(moved)
local cands = wake_prep(at, before, now)
if #hset > 0 then redis.call('HSET', K_JOBS, unpack(hset)) end
if #unc > 0 then C.remove(unc) end
if #raise > 0 then redis.call('ZREM', K_DEAD, unpack(raise)) end
redis.call('ZADD', K_DUE, unpack(zadd))
if F then F.moved(gs, zadd) end
wake(at, cands, now, now_us)
return out
