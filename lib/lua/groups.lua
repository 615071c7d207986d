#!lua flags=no-writes
--- @include "include/keys"
--- @include "include/fair"
-- groups.lua: per tenant group counts of one queue (include/fair.lua:
-- the index g<p>:<group>, the turns gq, the lease index gl:<group> and
-- the groups that have one, gls),
-- read-only (no-writes: it runs on replicas and under maxmemory).
-- ARGV[2] max: the most groups to read (1..DQ_GROUP_STATS_MAX, checked by
--   the client): the first max of gq in turn order (the groups served
--   next first), then those of gls (below).
-- Returns { now_ms, name_1, due_1, later_1, inflight_1, ... }:
--   due      index entries due by now (every priority level in use)
--   later    index entries due after now
--   inflight its jobs in flight (lease in lease, deadline not passed):
--            under DQ_SET_GROUP_MAX_INFLIGHT the live entries of
--            gl:<group>, the lease index the polls keep for the limit
--            (include/fair.lua; at most 1024 read); without it, counted
--            over this partition's live leases and their jobs' metas
--            (at most SCAN, soonest ending first).  Group '', the jobs
--            without one: 0.
-- After the groups of gq (those with jobs pending), while fewer than max
-- are listed: those with jobs in flight and none pending (of gls, head
-- first; without a limit, in the order the leases were read), so a group
-- whose jobs are all leased is listed too.
-- The index is a hint (fair.lua): an entry whose job left due by a path
-- other than a poll (cancel) counts until a poll of its group drops it.
-- Bounded: max groups of gq, each one ZCOUNT pair per level in use, and
-- under a limit one ZRANGE with a LIMIT and one ZMSCORE; then at most max
-- groups of gls, each one ZRANGE and one ZMSCORE; without a limit, one
-- ZRANGEBYSCORE and one HMGET per thousand leases, at most SCAN.
local SCAN = 10000 -- live leases read without a limit per group, at most
local now = dq_now()
local max = tonumber(ARGV[2])
local c = redis.call('HMGET', K_CONF, 'grouped', 'group_inflight_part')
local flag = tonumber(c[1] or 0)
local pfx = string.sub(K_DUE, 1, -4)
local out = { now }
if flag == 0 then return out end
local levels = { 0 }
for p = 1, 9 do
    if bit.band(flag, bit.lshift(1, p)) ~= 0 then levels[#levels + 1] = p end
end
-- (no limit per group: the jobs in flight counted per group, and the
-- groups in the order first found)
local scanned, found = {}, {}
if not c[2] then
    local F, off = fair_lib(), 0
    repeat
        local l, gs = F.live_leases(now, off)
        for i = 1, #l / 2 do
            local g = gs[i]
            if g ~= '' and not scanned[g] then found[#found + 1] = g end
            if g ~= '' then scanned[g] = (scanned[g] or 0) + 1 end
        end
        off = off + #l / 2
    until #l < 2 * F.BATCH or off >= SCAN -- (a short page: the last)
end
local function live(g)
    if not c[2] then return scanned[g] or 0 end
    local ids = redis.call('ZRANGE', pfx .. 'gl:' .. g, 0, 1023)
    if #ids == 0 then return 0 end
    local sc, n = redis.call('ZMSCORE', K_LEASE, unpack(ids)), 0
    for i = 1, #ids do
        if sc[i] and tonumber(sc[i]) > now then n = n + 1 end
    end
    return n
end
local listed = {}
for _, g in ipairs(redis.call('ZRANGE', pfx .. 'gq', 0, max - 1)) do
    listed[g] = true
    local due, later = 0, 0
    for _, p in ipairs(levels) do
        local k = pfx .. (p > 0 and ('g' .. p) or 'g') .. ':' .. g
        due = due + redis.call('ZCOUNT', k, '-inf', now)
        later = later + redis.call('ZCOUNT', k, '(' .. now, '+inf')
    end
    out[#out + 1] = g
    out[#out + 1] = due
    out[#out + 1] = later
    out[#out + 1] = live(g)
end
local left = max - (#out - 1) / 4
if left > 0 then
    local rest = found
    if c[2] then rest = redis.call('ZRANGE', pfx .. 'gls', 0, max - 1) end
    for _, g in ipairs(rest) do
        local n = not listed[g] and left > 0 and live(g) or 0
        if n > 0 then
            out[#out + 1], out[#out + 2], out[#out + 3], out[#out + 4] =
                g, 0, 0, n
            left = left - 1
        end
    end
end
return out
