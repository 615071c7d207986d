-- include/fair.lua: fair claiming: the queue-wide limit on jobs in flight
-- and tenant groups, their priorities and the limit per group.
--- @include "include/keys"

-- A queue that uses none of this pays one more field (poll: two) in the
-- HMGET of conf that push, poll and nack do anyway, one more field in the
-- HMGET of the metas that ack and nack do anyway, and the making of one
-- function that captures nothing (fair_lib, below; bench/srvcost.sh:
-- within 3%).
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
-- "\0full" (no job's: ids are not empty, so no mf/ef/rf names it) of the
-- jobs hash.  A
-- script that takes jobs out of lease (ack, nack, cancel of a job in
-- flight) reads that field in the HMGET of the metas it does anyway
-- (check_tokens; cancel: one HMGET on that rare path); when set it
-- tells one waiting consumer to poll now (idle_tell) and counts it in
-- the field as on its way ("p<until ms>:<n>", for TOLD_MS), or, none
-- registered, deletes it and broadcasts.  One told consumer per freed
-- slot, and no more: a poll that leaves due work and free slots tells
-- one more waiter only for a slot no told consumer is on its way to, and
-- a consumer that took jobs while every free slot is promised so waits
-- to be told like the others rather than poll again at once and race
-- them (bench: run.sh --only fair, its limit rows: 1.5 polls a job
-- before, 1.01 after).  A poll of a limited queue that is not held back
-- and leaves nobody on the way deletes it, and so does unsetting the
-- limit (config.lua): a
-- queue whose jobs are gone keeps no hash for it once a poll found
-- nothing.  A lost wake-up (consumer gone) costs at most the waiter's
-- registration time: its idle cap or the first lease deadline.
--
-- Groups (DQ_PUSHOPT_GROUP).  A grouped job stays in due like any job
-- (so get, list, stats, cancel, ack and everything else see it as before)
-- and is also indexed by its group:
--   <prefix>g:<group>  ZSET id -> due ms: the group's pending jobs (group
--                      '' = jobs without a group, indexed once the queue
--                      is flagged)
--   <prefix>gq         ZSET group -> turn: the groups with indexed jobs;
--                      a push lowers a group's turn to its job's due time
--                      (ZADD LT), a poll that served the group sets it to
--                      now + 1 (behind every group whose turn has come)
--   conf "grouped"     the flag: set by the first grouped push; a queue
--                      without it never reads the keys above
--   conf "gfill"       the fill's cursor (F.fill): while set, the jobs
--                      that were in due when the flag was set are not
--                      all indexed yet
-- A poll of a flagged queue reads the groups whose turn has come (at most
-- max, turn order), up to ceil(max / groups) due jobs of each, and takes
-- them round-robin (the first of every group, then the second...) until
-- max; the room that groups with fewer due jobs leave goes to the groups
-- with more, each read on in its own order (F.pick, top_up); what room
-- is left it fills from due as always (oldest first), but for the jobs
-- of a group whose index may still hold a better one (read up to its
-- share, or not read at all: more groups had their turn than max; then
-- the next groups are read while room is left, a bounded few batches),
-- so no job is handed out while a better one of its group waits.
-- Every job that enters due on a flagged queue is indexed by the script
-- that puts it there: push, nack (a retry), ack (a repeating job's next
-- run, a debounced follow-up), dead (a requeue), reschedule and debounce
-- (F.moved: an entry left at its old time would take one of its group's
-- picks until then, moved later, or leave the job to the fill from due,
-- moved earlier); a job left to the fill from due would wait behind a
-- big group's burst until it drained.  The jobs already in due when the
-- flag is set are indexed by the polls after it, a bounded batch each
-- (F.fill, from the cursor the flagging push sets).  Jobs no index holds,
-- compact jobs (include/compact/keys.lua; they have no group) and
-- expired leases, keep a share of each poll with max >= 2 (F.pick).  An
-- index entry is only a hint: each is checked against due (ZMSCORE)
-- before it is taken, and one whose job left due (acked, cancelled,
-- taken from due by another path) is dropped then, so the scripts that
-- only take jobs out of due need not know about groups.  With 100,000
-- jobs of A and one of B due together, B's turn is as early as A's, so a
-- poll with max >= 2 takes B's job.
-- Priorities (DQ_PUSHOPT_PRIORITY, 0..9, "|p<n>" in the meta): a job of
-- priority p > 0 is indexed in <prefix>g<p>:<group> instead of g:<group>
-- (a queue without groups: group '', like its other jobs once it has a
-- priority); the flag "grouped" is then a bit set, bit 0 for the index,
-- bit p for each priority pushed (push sets them), so a poll reads only
-- the levels in use: of each group whose turn has come its due jobs of
-- the highest level first, oldest first in each, never one not yet due.
-- A queue without priorities reads no more than before.
-- Jobs in flight per group under a limit per group: <prefix>gl:<group>,
-- id -> the lease deadline it was claimed with (jobs of a named group),
-- kept by every poll of a limited, flagged queue (F.took, F.leased),
-- counted against lease itself, so no script but poll knows of it;
-- <prefix>gls, group -> its head's deadline, lets polls groom the groups
-- no poll serves any more (groom_head; every poll of a flagged queue
-- grooms, so the entries left when a limit is unset go too).  A queue
-- without the limit keeps no such index: each entry cost a poll an
-- insert and a later groom per job (a big group's drain ran at 0.6x of
-- a plain queue's with it); dq_group_stats then counts the jobs in
-- flight from lease and the jobs' metas (groups.lua), and the config
-- call that sets the limit on such a queue indexes the jobs in flight
-- then (F.index_leases), so the first limited poll counts them.
-- Limit per group (DQ_SET_GROUP_MAX_INFLIGHT; conf group_inflight_max and
-- this partition's share group_inflight_part; jobs of a named group
-- only): counted from gl:<group> (groom, below), so no slot can leak.
-- A poll of a flagged, limited
-- queue takes of a group at most its room, also from the fill from due
-- and the expired leases (their metas read: F.admit; the room those it
-- drops leave, a bounded few more reads fill: F.refill), skips a group
-- at its limit (the others are served) and, when it took nothing for
-- that, answers when the first lease of a held group ends and sets the
-- "\0full" field like the queue-wide limit, so an ack wakes a waiter.
-- An extend of a lease that ran out but was not claimed again (extend.lua)
-- takes a slot anew: it brings the lease back only if both limits have
-- room for it as a poll counts them (ZCOUNT lease (now +inf) against
-- inflight_part; F.g_room against group_inflight_part), else it answers
-- "lease lost" and changes nothing, so no slot given to another job
-- meanwhile is taken twice; brought back under a limit per group, a job
-- of a named group enters gl:<group> and gls again (F.relet), which
-- grooming may have dropped it from.  A live lease's extend keeps its
-- slot and reads neither.

-- The functions of fair claiming, made only when a script needs them (as
-- c_lib): a script body makes each of its functions anew on every call,
-- and every capture of one of the script's locals walks its list of open
-- upvalues (a few thousand instructions a call for a handful of
-- functions, bench/srvcost.sh).  This one captures nothing: its keys come
-- from KEYS, the wake-up functions as arguments.
local function fair_lib()
    local K_DUE, K_LEASE, K_JOBS = KEYS[1], KEYS[2], KEYS[3]
    local PFX = string.sub(K_DUE, 1, -4) -- as K_PFX
    local K_GQ, F_FULL = PFX .. 'gq', '\0full'
    -- how long a consumer told of a free slot counts as on its way to it
    local TOLD_MS = 100
    local F = {}

    -- The index key of a group.
    local function gkey(g) return PFX .. 'g:' .. g end

    -- The index key of a group's jobs of priority p (0: gkey).
    local function pkey(g, p)
        if p > 0 then return PFX .. 'g' .. p .. ':' .. g end
        return gkey(g)
    end

    -- A job's priority, from its meta's options ("|p<n>"; none: 0).
    function F.prio(ext)
        return tonumber(string.match(ext, '|p(%d)') or 0)
    end

    -- The levels used (the flag conf.grouped: bit 0 set, bit p for each
    -- priority p > 0 pushed), highest first.
    function F.levels(flag)
        local out = {}
        for p = 9, 1, -1 do
            if bit.band(flag, bit.lshift(1, p)) ~= 0 then out[#out + 1] = p end
        end
        return out
    end

    -- The flag after a push of group grp (nil: none) and priority p over
    -- the flag cur (conf.grouped as read, or false): nil when unchanged.
    function F.flag(cur, grp, p)
        if not grp and p == 0 then return nil end
        local was = tonumber(cur) or 0
        local v = bit.bor(was, 1)
        if p > 0 then v = bit.bor(v, bit.lshift(1, p)) end
        if v ~= was then return v end
        return nil
    end

    -- The index keys of group g: its levels' (highest first), then its
    -- priority 0's.
    local function keys_of(g, levels)
        local out = {}
        for i, p in ipairs(levels) do out[i] = pkey(g, p) end
        out[#out + 1] = gkey(g)
        return out
    end

    -- The consumers told of a free slot and on their way to it, from the
    -- field "\0full" as read (nil or '1': none; 'p<until ms>:<n>': n,
    -- until then, when the last of them counts as lost).
    local function pending(v, now)
        local til, n = string.match(v or '', '^p(%d+):(%d+)$')
        if til and tonumber(til) > now then return tonumber(n) end
        return 0
    end

    -- The field "\0full" saying n consumers are on their way (n > 0).
    local function set_pending(n, now)
        redis.call('HSET', K_JOBS, F_FULL,
                   string.format('p%d:%d', now + TOLD_MS, n))
    end

    -- The limit on jobs in flight of this partition (conf.inflight_part)
    -- for a poll of max jobs: how many more it may lease now, and, when
    -- that is at most max (the poll fills every slot), when a slot frees
    -- on its own: the first lease in flight ends (server ms; the poll's
    -- own leases end at now + lease_ms).  Reads only (also the consumers
    -- told of a free slot: F.spare).
    function F.room(limit, max, now, lease_ms)
        local open = string.format('(%d', now)
        local room = limit - redis.call('ZCOUNT', K_LEASE, open, '+inf')
        F.pend = pending(redis.call('HGET', K_JOBS, F_FULL), now)
        if room > max then return room, nil end
        if room < 0 then room = 0 end
        local f = redis.call('ZRANGEBYSCORE', K_LEASE, open, '+inf',
                             'WITHSCORES', 'LIMIT', 0, 1)
        local ends = now + lease_ms
        if f[2] and tonumber(f[2]) < ends then ends = tonumber(f[2]) end
        return room, ends
    end

    -- A poll of a limited queue that took taken of room and leaves due
    -- work behind: whether a slot is left that no consumer told of one is
    -- on its way to (this poll counts as one of them: a told consumer
    -- polls once), so that one more waiter is to be told (then F.told).
    function F.spare(room, taken, now)
        F.keep, F.at = math.max(F.pend - math.max(taken, 1), 0), now
        return room - taken > F.keep
    end

    -- One more waiter was told to poll now (after F.spare).
    function F.told() F.keep = F.keep + 1 end

    -- After the writes of a poll of a limited queue: whether it was held
    -- back (so the script that frees a slot wakes a waiter), or else how
    -- many consumers told of a free slot are on their way (F.spare; none
    -- when the poll left no due work), so a slot that frees meanwhile
    -- wakes one more rather than the next poll doing it (which could not
    -- tell those on their way from free slots: a herd).
    function F.mark(held)
        if held then
            redis.call('HSET', K_JOBS, F_FULL, '1')
        elseif F.keep and F.keep > 0 then
            set_pending(F.keep, F.at)
        else
            redis.call('HDEL', K_JOBS, F_FULL)
        end
    end

    -- Before a script's first write, when it takes jobs out of lease and
    -- a poll waits for a slot: what freed needs (the consumers to tell,
    -- peek: idle_peek or nil; the time, the caller's when it read TIME;
    -- the consumers already told of a slot).
    function F.waiters(now, now_us, peek, clock)
        if not now then now, now_us = clock() end
        local v = redis.call('HGET', K_JOBS, F_FULL)
        return { peek and peek(now) or {}, now, now_us, pending(v, now) }
    end

    -- After the writes: a slot is free; one waiter (tell: idle_tell or
    -- nil) polls now and counts as on its way (a slot freed before it
    -- polled wakes another one, not the same), or, none registered, all
    -- hear it on the queue's channel.  The last job gone (the field is
    -- all the hash holds), nobody is counted: the hash goes with it.
    function F.freed(w, tell, publish, channel)
        local last = redis.call('HLEN', K_JOBS) <= 1
        local told = tell and tell(w[1], w[2], w[3], nil)
        if told and not last then
            set_pending(w[4] + 1, w[2])
            return
        end
        redis.call('HDEL', K_JOBS, F_FULL)
        if not told then
            redis.call(publish, channel, string.format('%d', w[2]))
        end
    end

    -- Indexes jobs of group g: zadd = { due, id, .. } (strings, as for
    -- due); the group's turn comes no later than its earliest one (or
    -- than floor, when that is later: the fill's jobs wait their turn).
    function F.add(g, zadd, p, floor)
        local first
        for k = 1, #zadd, 2 do
            local at = tonumber(zadd[k])
            if not first or at < first then first = at end
        end
        if floor and first < floor then first = floor end
        redis.call('ZADD', pkey(g, p or 0), unpack(zadd))
        redis.call('ZADD', K_GQ, 'LT', string.format('%d', first), g)
    end

    -- The group and priority of each of ids (reads their metas; '' and
    -- 0 for none or no meta), for F.moved and F.live_leases.
    function F.groups(ids)
        local f, out = {}, { ps = {} }
        if #ids == 0 then return out end
        for i, id in ipairs(ids) do f[i] = id .. '\0' end
        for i, m in ipairs(redis.call('HMGET', K_JOBS, unpack(f))) do
            out[i] = m and string.match(m, '|g([^|]*)') or ''
            out.ps[i] = m and F.prio(m) or 0
        end
        return out
    end

    -- The groups and priorities of jobs from their options (exts[i] of
    -- the i-th job, '' none), as F.groups.
    function F.of_exts(exts)
        local out = { ps = {} }
        for i, ext in ipairs(exts) do
            out[i] = string.match(ext, '|g([^|]*)') or ''
            out.ps[i] = F.prio(ext)
        end
        return out
    end

    -- Jobs moved to a new due time (reschedule, debounce): each indexed
    -- at it, so no entry keeps its old time (a later one would take one
    -- of its group's picks until then, an earlier one wait for the fill
    -- from due).  zadd = { due, id, .. } as for due, gs their groups
    -- (gs.ps their priorities).
    function F.moved(gs, zadd, floor)
        local order, by = {}, {}
        for k = 1, #zadd, 2 do
            local i = (k + 1) / 2
            local g, p = gs[i], gs.ps[i] or 0
            local at = g .. '\0' .. p
            if not by[at] then
                by[at] = { g = g, p = p }
                order[#order + 1] = at
            end
            local z = by[at]
            z[#z + 1], z[#z + 2] = zadd[k], zadd[k + 1]
        end
        for _, at in ipairs(order) do
            local z = by[at]
            F.add(z.g, z, z.p, floor)
        end
    end

    -- The fill (conf "gfill", set by the push that flags a queue whose
    -- due holds jobs): "<last>:<at>:<id>", the jobs of due up to score
    -- last (the newest when the flag was set) not yet indexed start at
    -- (at, id) (id '': the first of score at).  Indexes the next FILL of
    -- due from there (their metas read: each under its group and
    -- priority, at its due time, which a job indexed already has: ZADD
    -- of the same score changes nothing), its groups' turns no earlier
    -- than now + 1 (behind the groups served), and moves the cursor on
    -- (or deletes it at the end).  Equal scores at a batch's edge: the
    -- cursor's id, still at that score, gives its rank (ZRANK); gone, the
    -- walk starts again at the first of its score.
    local FILL = 128
    function F.fill(cur, now)
        local last, at, id = string.match(cur, '^(%d+):(%d+):(.*)$')
        local r
        if id ~= '' and tonumber(redis.call('ZSCORE', K_DUE, id) or -1)
            == tonumber(at) then
            r = redis.call('ZRANK', K_DUE, id) + 1
        else
            r = redis.call('ZCOUNT', K_DUE, '-inf', '(' .. at)
        end
        local got = redis.call('ZRANGE', K_DUE, r, r + FILL - 1,
                               'WITHSCORES')
        local ids, zadd = {}, {}
        local done = #got < 2 * FILL
        for k = 1, #got, 2 do
            local sc = string.format('%d', tonumber(got[k + 1]))
            if tonumber(sc) > tonumber(last) then
                done = true
                break
            end
            ids[#ids + 1], zadd[#zadd + 1], zadd[#zadd + 2] = got[k], sc,
                got[k]
        end
        if #ids > 0 then F.moved(F.groups(ids), zadd, now + 1) end
        if done then
            redis.call('HDEL', PFX .. 'conf', 'gfill')
        else
            redis.call('HSET', PFX .. 'conf', 'gfill', last .. ':' ..
                       zadd[#zadd - 1] .. ':' .. zadd[#zadd])
        end
    end

    -- The cursor of the fill for a queue that a push with options ext
    -- flags now (read before the push's writes): nil when ext has no
    -- group and no priority, or due is empty.
    function F.fill_from(ext)
        if not (string.find(ext, '|g', 1, true) or
                string.find(ext, '|p[1-9]')) then
            return nil
        end
        local a = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
        if not a[2] then return nil end
        local b = redis.call('ZRANGE', K_DUE, -1, -1, 'WITHSCORES')
        return string.format('%d:%d:', tonumber(b[2]), tonumber(a[2]))
    end

    -- The limit per group (conf.group_inflight_part): the jobs of group
    -- g in flight, counted from its lease index gl:<g> (id -> the lease
    -- deadline it was claimed with) checked against lease itself, so an
    -- ack, nack, cancel or dead letter (out of lease), a lease that runs
    -- out (its deadline passed) and an extension (lease's own score) all
    -- count right with no script but poll knowing of it.  Read with a
    -- LIMIT: a poll of g trims the entries that no longer count and adds
    -- at most the room left, so gl:<g> holds at most the limit after it.
    -- Returns the room left, the entries to trim, and when the first
    -- live lease ends (nil: none).
    local function groom(g, limit, now)
        local ids = redis.call('ZRANGE', PFX .. 'gl:' .. g, 0, 2 * limit + 63)
        if #ids == 0 then return limit, {}, nil end
        local sc = redis.call('ZMSCORE', K_LEASE, unpack(ids))
        local live, dead, ends = 0, {}, nil
        for i, id in ipairs(ids) do
            local d = sc[i] and tonumber(sc[i])
            if d and d > now then
                live = live + 1
                if not ends or d < ends then ends = d end
            else
                dead[#dead + 1] = id
            end
        end
        return limit - live, dead, ends
    end

    -- The room of group g in pick (computed once per poll).
    local function room_of(pick, g, now)
        local r = pick.room[g]
        if r == nil then
            local dead, ends
            r, dead, ends = groom(g, pick.glimit, now)
            pick.room[g], pick.gdead[g] = r, dead
            if r <= 0 and ends and (not pick.free_at or ends < pick.free_at)
            then
                pick.free_at = ends
            end
        end
        return r
    end

    -- Keeps of list ({ id, score, .. }) the jobs whose group has room
    -- (a limited queue: jobs of a named group; their metas read), each
    -- taking one; skip: ids left out without a look; fill: the fill from
    -- due, which also leaves the jobs of the open groups (F.pick: their
    -- index may hold a better job than the oldest in due), and, when not
    -- every group whose turn came was read, of those not read.
    function F.admit(pick, list, now, skip, fill)
        local open = fill and pick and (pick.opens or pick.partial)
        if not pick or not (pick.glimit or open) or #list == 0 then
            return list
        end
        local f = {}
        for i = 1, #list, 2 do
            if not (skip and skip[list[i]]) then
                f[#f + 1] = list[i] .. '\0'
            end
        end
        if #f == 0 then return {} end
        local metas = redis.call('HMGET', K_JOBS, unpack(f))
        local out, k = {}, 0
        for i = 1, #list, 2 do
            local id, m = list[i], nil
            local keep = not (skip and skip[id])
            if keep then k = k + 1; m = metas[k] end
            local g = m and string.match(m, '|g([^|]*)')
            if keep and open then
                keep = not pick.open[g or ''] and
                    (not pick.partial or pick.shut[g or ''])
            end
            if keep and pick.glimit and g and g ~= '' then
                keep = room_of(pick, g, now) > 0
                if keep then pick.room[g] = pick.room[g] - 1 end
            end
            if keep then out[#out + 1], out[#out + 2] = id, list[i + 1] end
        end
        return out
    end

    -- Reads up to want more due ids of a group's index keys into rd.new
    -- (rd.k: the key being read, rd.off: the ids read of it; rd.k past
    -- the last key: every key read to its end).  Returns how many.
    local function read_more(rd, want, now)
        rd.new = {}
        while want > #rd.new and rd.k <= #rd.keys do
            local r = redis.call('ZRANGEBYSCORE', rd.keys[rd.k], '-inf', now,
                                 'LIMIT', rd.off, want - #rd.new)
            for _, id in ipairs(r) do
                rd.new[#rd.new + 1] = { id, rd.keys[rd.k] }
            end
            rd.off = rd.off + #r
            if want > #rd.new then rd.k, rd.off = rd.k + 1, 0 end
        end
        return #rd.new
    end

    -- Checks the ids read of groups rds against due (one ZMSCORE): those
    -- due join their group's list rd.ok ({ id, due's score, key }), those
    -- no longer in due go to pick.stale.
    local function check(pick, rds, now)
        local all = {}
        for _, rd in ipairs(rds) do
            for _, e in ipairs(rd.new) do all[#all + 1] = e[1] end
        end
        if #all == 0 then return end
        local sc, k = redis.call('ZMSCORE', K_DUE, unpack(all)), 0
        for _, rd in ipairs(rds) do
            for _, e in ipairs(rd.new) do
                k = k + 1
                local s = sc[k]
                if s and tonumber(s) <= now and not pick.gof[e[1]] then
                    pick.gof[e[1]] = rd.g
                    rd.ok[#rd.ok + 1] = { e[1], s, e[2] }
                elseif not s then
                    pick.stale[#pick.stale + 1] = { e[2], e[1] }
                end
            end
        end
    end

    -- The room of group g in pick for more picks (a limited queue: its
    -- room left, less those read and not taken yet, rd.took; else
    -- unbounded).
    local function cap_of(pick, rd, now)
        if pick.glimit and rd.g ~= '' then
            return math.max(room_of(pick, rd.g, now), 0) - #rd.ok + rd.took
        end
        return math.huge
    end

    -- The room the picks of rds left in a poll of max goes to the groups
    -- that may have more (turn order), each read on in its own order, so
    -- that no fill from due hands out a group's worse job while a better
    -- one of it waits.  Bounded: reads at most the room left a pass, a
    -- pass only while the last one read ids (stale ones too), at most 4;
    -- a group whose index may hold more is then open (pick.open): the
    -- fill from due leaves its jobs (F.admit).
    local function picked(rds)
        local n = 0
        for _, rd in ipairs(rds) do n = n + #rd.ok end
        return n
    end

    local function top_up(pick, rds, max, now)
        for _ = 1, 4 do
            local had = picked(rds)
            local left, more = max - had, {}
            for _, rd in ipairs(rds) do
                if left <= 0 then break end
                local want = math.min(left, cap_of(pick, rd, now))
                if want > 0 and rd.k <= #rd.keys and
                    read_more(rd, want, now) > 0 then
                    more[#more + 1] = rd
                    left = left - #rd.new
                end
            end
            if #more == 0 then return end
            check(pick, more, now)
        end
    end

    -- The due jobs of the groups whose turn has come, round-robin, at
    -- most max, as pick.ids = { id, due, .. } (due's own scores), with
    -- what the poll's writes need: each id's group and index key, and the
    -- index entries found stale.  levels: F.levels of the flag; a group's
    -- due jobs of the highest level come first, oldest first in each.
    -- Each group is read up to ceil(max / groups) (its room, when
    -- limited), and what room the groups with fewer due jobs leave goes
    -- to those with more (top_up).
    -- nc: the jobs due that no index holds (compact jobs, expired
    -- leases): a turn of their own keeps them a share of max, at least
    -- one of a max >= 2 (pick.share), taken oldest first with the fill.
    -- Reads groups gs (appended to pick.groups and rds) up to ceil(left
    -- / their number) due jobs each (their room, when limited), then
    -- gives the room they leave to those with more (top_up).
    local function read_groups(pick, rds, gs, left, max, now)
        local per, new = math.ceil(left / math.max(#gs, 1)), {}
        for _, g in ipairs(gs) do
            local rd = { g = g, keys = keys_of(g, pick.levels), k = 1,
                         off = 0, ok = {}, new = {}, took = 0 }
            rds[#rds + 1], new[#new + 1] = rd, rd
            pick.groups[#pick.groups + 1] = g
            local want = math.min(per, cap_of(pick, rd, now))
            if want > 0 then read_more(rd, want, now) end
        end
        check(pick, new, now)
        top_up(pick, rds, max, now)
    end

    function F.pick(now, max, levels, glimit, nc)
        local gs = redis.call('ZRANGEBYSCORE', K_GQ, '-inf', now + 1,
                              'LIMIT', 0, max)
        local share = 0
        if nc > 0 and max >= 2 then
            share = math.min(nc, math.max(1, math.floor(max / (#gs + 1))))
        end
        max = max - share
        local pick = { ids = {}, gof = {}, kof = {}, stale = {}, groups = {},
                       levels = levels, glimit = glimit, room = {},
                       gdead = {}, share = share, open = {},
                       shut = {}, rds = {},
                       don = { key = K_DUE, off = 0, done = false } }
        local rds = pick.rds
        read_groups(pick, rds, gs, max, max, now)
        -- More groups whose turn came than were read, and room left (the
        -- groups read had stale entries or too few due jobs): the next
        -- ones are read too, at most 3 more batches.
        pick.partial = #gs >= max + share
        for _ = 1, 3 do
            local left = max - picked(rds)
            if not pick.partial or left <= 0 then break end
            gs = redis.call('ZRANGEBYSCORE', K_GQ, '-inf', now + 1, 'LIMIT',
                            #pick.groups, left)
            pick.partial = #gs >= left
            read_groups(pick, rds, gs, left, max, now)
        end
        -- (the fill from due leaves the open groups' jobs; with groups
        -- whose turn came still unread, it takes only those read whose
        -- index is read to its end, F.admit)
        for _, rd in ipairs(rds) do
            if rd.k <= #rd.keys then
                pick.open[rd.g], pick.opens = true, true
            else
                pick.shut[rd.g] = true
            end
        end
        local longest = 0
        for _, rd in ipairs(rds) do longest = math.max(longest, #rd.ok) end
        for r = 1, longest do
            for _, rd in ipairs(rds) do
                local e = rd.ok[r]
                if e and #pick.ids < 2 * max then
                    pick.ids[#pick.ids + 1] = e[1]
                    pick.ids[#pick.ids + 1] = e[2]
                    pick.kof[e[1]] = e[3]
                    rd.took = rd.took + 1
                    if glimit and rd.g ~= '' then
                        pick.room[rd.g] = pick.room[rd.g] - 1
                    end
                elseif e then
                    pick.gof[e[1]] = nil
                end
            end
        end
        pick.np = #pick.ids
        return pick
    end

    -- A poll of a flagged queue where one group at most has its turn by
    -- now + 1, with no priority level, no limit per group, no fill left,
    -- no expired lease and no compact job to keep a share for (poll.lua
    -- checks those): every job due by now is that group's (each path
    -- that puts a job into due indexes it, and a group's turn is never
    -- later than its first indexed job's due time, or than now + 1 after
    -- a poll served it; a push that could not read conf while the slot
    -- migrated indexed nothing, and its job is taken in due's order, as
    -- the fill would take it), so round-robin has no other group to turn
    -- to and the group's oldest due jobs are due's oldest.  The poll
    -- reads due as an unflagged one does (a big group's drain then costs
    -- little more than a plain queue's, whatever groups wait for later
    -- turns), and F.done takes the jobs it took out of the group's index
    -- and sets its turn.  Returns that pick, or nil when more groups'
    -- turns have come.
    function F.solo(now)
        local gs = redis.call('ZRANGEBYSCORE', K_GQ, '-inf', now + 1,
                              'LIMIT', 0, 2)
        if #gs > 1 then return nil end
        return { gof = {}, kof = {}, stale = {}, groups = gs, levels = {},
                 room = {}, gdead = {}, share = 0,
                 solo = gs[1] and gkey(gs[1]) }
    end

    -- The due read of a flagged queue: the groups' picks, then due's
    -- oldest (those not picked) up to max (less the compact jobs' share).
    function F.due(pick, now, max)
        local out = pick.ids
        max = max - pick.share
        if #out >= 2 * max then return out end
        local due = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now,
                               'WITHSCORES', 'LIMIT', 0, max)
        pick.don = { key = K_DUE, off = #due / 2, done = #due < 2 * max }
        due = F.admit(pick, due, now, pick.gof, true)
        for i = 1, #due, 2 do
            if #out >= 2 * max then break end
            if not pick.gof[due[i]] then
                out[#out + 1] = due[i]
                out[#out + 1] = due[i + 1]
            end
        end
        return out
    end

    -- A poll of a limited, flagged queue whose reads left room (F.admit
    -- dropped jobs of groups at their limit, so the share kept for the
    -- leases that ran out and the nc compact jobs may be unused) reads
    -- on.  Bounded: at most 3 more rounds, each reading at most the room
    -- left of each of: the leases that ran out past the eread read, the
    -- groups' indexes (more picks, top_up's passes, into due after the
    -- picks), due past the fill's read; what room is left then waits for
    -- the next poll.  Never more than max in all, nor more of a group
    -- than its room; the poll merges what it takes oldest first as
    -- before (picks first).  due and exp grow in place.  Its helpers are
    -- made only by the polls that read on: every other call of fair_lib
    -- makes one closure for all this (bench/srvcost.sh gdrain100).
    function F.refill(pick, due, exp, eread, nc, max, now)
        if not pick.glimit then return end
        -- the room left after due (picks and fill), exp and the compact
        -- jobs
        local function left() return max - (#due + #exp) / 2 - nc end

        -- Puts list b into list a after its at-th entry (nil: at its end).
        local function put(a, b, at)
            at = at or #a
            for i = #a, at + 1, -1 do a[i + #b] = a[i] end
            for i, v in ipairs(b) do a[at + i] = v end
        end

        -- Reads on key on.key (due, lease) past the on.off entries read
        -- (on.done: read to its end): up to the room left, oldest first,
        -- through F.admit (fill: as the fill from due, leaving the
        -- picks), into list.  Returns whether it read.
        local function read_on(on, list, fill)
            local n = left()
            if n <= 0 or on.done then return false end
            local more = redis.call('ZRANGEBYSCORE', on.key, '-inf', now,
                                    'WITHSCORES', 'LIMIT', on.off, n)
            on.off, on.done = on.off + #more / 2, #more < 2 * n
            put(list, F.admit(pick, more, now, fill and pick.gof, fill))
            return true
        end

        -- Takes the next pick of group rd into out when its room allows.
        local function take(rd, out)
            local e = rd.ok[rd.took + 1]
            local g = rd.g ~= '' and rd.g
            if not e or (g and room_of(pick, g, now) <= 0) then
                return false
            end
            if g then pick.room[g] = pick.room[g] - 1 end
            rd.took = rd.took + 1
            pick.gof[e[1]], pick.kof[e[1]] = rd.g, e[3]
            out[#out + 1], out[#out + 2] = e[1], e[2]
            return true
        end

        -- Up to the room left more picks of the groups read, each within
        -- its room, round-robin in turn order: first those F.pick read
        -- past its max, then more read of their indexes (top_up); into
        -- due after the picks.  Those read and not taken (no room left in
        -- their group or the poll) stay out of the fill too (pick.gof), so
        -- no job is read twice.
        local function more_picks()
            local rds, out, ready, n = pick.rds, {}, 0, left()
            if n <= 0 then return false end
            for _, rd in ipairs(rds) do ready = ready + #rd.ok - rd.took end
            if ready < n then
                top_up(pick, rds, picked(rds) + n - ready, now)
            end
            local more = true
            while more do
                more = false
                for _, rd in ipairs(rds) do
                    more = #out < 2 * n and take(rd, out) or more
                end
            end
            for _, rd in ipairs(rds) do
                for r = rd.took + 1, #rd.ok do pick.gof[rd.ok[r][1]] = rd.g end
            end
            put(due, out, pick.np)
            pick.np = pick.np + #out
            return #out > 0
        end

        local eon = { key = K_LEASE, off = eread, done = eread < max }
        for _ = 1, 3 do
            local r1 = read_on(eon, exp)
            local r2 = more_picks()
            if not read_on(pick.don, due, true) and not r1 and not r2 then
                return
            end
        end
    end

    -- After a flagged poll's writes: the taken jobs (those of from_due)
    -- leave their group's index, stale entries too, and every group read
    -- gets its next turn: now + 1 if it was served, its head's due time
    -- if not, none if its index is empty.
    function F.done(pick, taken, now, lease_ms)
        F.leased(pick, now, now + lease_ms)
        local rem = {}
        local function drop(key, id)
            rem[key] = rem[key] or {}
            rem[key][#rem[key] + 1] = id
        end
        if pick.solo then
            if #taken > 0 then rem[pick.solo] = taken end
        else
            for _, id in ipairs(taken) do
                if pick.kof[id] then drop(pick.kof[id], id) end
            end
        end
        for _, e in ipairs(pick.stale) do drop(e[1], e[2]) end
        for _, g in ipairs(pick.groups) do
            local served, turn = false, nil
            for _, key in ipairs(keys_of(g, pick.levels)) do
                if rem[key] then
                    redis.call('ZREM', key, unpack(rem[key]))
                    served = true
                end
                local h = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
                if h[2] and (not turn or tonumber(h[2]) < turn) then
                    turn = tonumber(h[2])
                end
            end
            if not turn then
                redis.call('ZREM', K_GQ, g)
            else
                if served and turn < now + 1 then turn = now + 1 end
                redis.call('ZADD', K_GQ, string.format('%d', turn), g)
            end
        end
    end

    -- The jobs a poll of a limited, flagged queue leased of named groups,
    -- for F.leased:
    -- pick.tl = { id, group, .. } (ids[j]'s meta as read: got[n + j];
    -- out: the poll's reply, its jobs from H + 1).
    function F.took(pick, ids, got, n, out, H)
        local leased, tl = {}, {}
        for k = H + 1, #out, 5 do leased[out[k]] = true end
        for j, id in ipairs(ids) do
            local m = leased[id] and got[n + j]
            local g = m and string.match(m, '|g([^|]*)')
            if g and g ~= '' then tl[#tl + 1], tl[#tl + 2] = id, g end
        end
        pick.tl = tl
    end

    -- The lease index gl:<g> of a group kept by every poll of a limited,
    -- flagged queue, bounded by grooming its head: the entries whose
    -- claimed deadline passed (at most lim of them) leave it, but those
    -- whose lease was extended, which move to their new deadline.
    -- <prefix>gls: group -> its head's deadline (when grooming it next
    -- finds work), so a group no poll serves any more is groomed too
    -- (F.leased: two a poll) and an empty index leaves gls.
    local function groom_head(g, lim, now)
        local key = PFX .. 'gl:' .. g
        local ids = redis.call('ZRANGEBYSCORE', key, '-inf', now,
                               'LIMIT', 0, lim)
        if #ids > 0 then
            local sc = redis.call('ZMSCORE', K_LEASE, unpack(ids))
            local rem, keep = {}, {}
            for i, id in ipairs(ids) do
                if sc[i] and tonumber(sc[i]) > now then
                    keep[#keep + 1], keep[#keep + 2] = sc[i], id
                else
                    rem[#rem + 1] = id
                end
            end
            if #rem > 0 then redis.call('ZREM', key, unpack(rem)) end
            if #keep > 0 then redis.call('ZADD', key, unpack(keep)) end
        end
        local h = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
        if h[2] then
            redis.call('ZADD', PFX .. 'gls', h[2], g)
        else
            redis.call('ZREM', PFX .. 'gls', g)
        end
    end

    -- After a flagged poll's writes: the jobs it leased of named groups
    -- under a limit (pick.tl, F.took) enter their group's lease index,
    -- whose head is groomed (at least as many entries as entered), the
    -- entries a limited poll found no longer counting leave it, and two
    -- more groups of gls whose head is due are groomed.
    function F.leased(pick, now, deadline)
        for g, dead in pairs(pick.gdead) do
            if #dead > 0 then
                redis.call('ZREM', PFX .. 'gl:' .. g, unpack(dead))
            end
        end
        local add, order, tl = {}, {}, pick.tl or {}
        local d = string.format('%d', deadline)
        for k = 1, #tl, 2 do
            local id, g = tl[k], tl[k + 1]
            if not add[g] then add[g] = {}; order[#order + 1] = g end
            add[g][#add[g] + 1] = d
            add[g][#add[g] + 1] = id
        end
        for _, g in ipairs(order) do
            redis.call('ZADD', PFX .. 'gl:' .. g, unpack(add[g]))
            groom_head(g, #add[g] / 2 + 64, now)
        end
        local due = redis.call('ZRANGEBYSCORE', PFX .. 'gls', '-inf', now,
                               'LIMIT', 0, 2)
        for _, g in ipairs(due) do
            if not add[g] then groom_head(g, 64, now) end
        end
    end

    -- An extend that brings back a lease that ran out (extend.lua), of a
    -- job of named group g on a flagged queue with a limit per group:
    -- whether g has room for it, counted as a poll counts it (groom; the
    -- lapsed lease itself no longer counts).  Reads gls too, the other
    -- key F.relet writes, so a key that moved fails the script before
    -- any write.
    function F.g_room(g, limit, now)
        redis.call('ZSCORE', PFX .. 'gls', g)
        return (groom(g, limit, now)) > 0
    end

    -- After F.g_room: the job id, leased again until deadline, enters its
    -- group's lease index again (groom_head may have dropped it when its
    -- old deadline passed), and gls holds the index's head no later.
    function F.relet(g, id, deadline)
        local d = string.format('%d', deadline)
        redis.call('ZADD', PFX .. 'gl:' .. g, d, id)
        redis.call('ZADD', PFX .. 'gls', 'LT', d, g)
    end

    -- The live leases of this partition ({ id, deadline, .. }, soonest
    -- ending first, at most BATCH from offset off: fewer, the last) and
    -- the groups of their jobs (F.groups: '' none).
    local BATCH = 1000
    F.BATCH = BATCH
    function F.live_leases(now, off)
        local l = redis.call('ZRANGEBYSCORE', K_LEASE,
                             string.format('(%d', now), '+inf', 'WITHSCORES',
                             'LIMIT', off, BATCH)
        local ids = {}
        for i = 1, #l, 2 do ids[#ids + 1] = l[i] end
        return l, F.groups(ids)
    end

    -- A limit per group set on a flagged queue that had none (config.lua,
    -- after its writes): the jobs of named groups in flight enter their
    -- group's lease index and gls, as the polls under the limit would
    -- have entered them.  Reads every live lease and its meta, BATCH at a
    -- time: O(jobs in flight), once per limit set.
    function F.index_leases(now)
        local off = 0
        repeat
            local l, gs = F.live_leases(now, off)
            local add, head = {}, {} -- (a group's first read: its head)
            for i = 1, #l / 2 do
                local g = gs[i]
                if g ~= '' then
                    local id, d = l[2 * i - 1], l[2 * i]
                    add[g] = add[g] or {}
                    add[g][#add[g] + 1], add[g][#add[g] + 2] = d, id
                    head[g] = head[g] or d
                end
            end
            for g, z in pairs(add) do
                redis.call('ZADD', PFX .. 'gl:' .. g, unpack(z))
                redis.call('ZADD', PFX .. 'gls', 'LT', head[g], g)
            end
            off = off + BATCH
        until #l < 2 * BATCH
    end

    return F
end

-- Whether the queue has groups (conf "grouped" set): the scripts that put
-- jobs back into due then index them by group and priority (fair_lib).
-- conf is not among their keys (same hash tag); a conf of another type
-- counts as a queue without groups.  Like fair_lib it captures nothing.
local function has_groups()
    local g = redis.pcall('HGET', string.sub(KEYS[1], 1, -4) .. 'conf',
                          'grouped')
    return type(g) == 'string'
end
