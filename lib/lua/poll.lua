#!lua flags=allow-oom
--- @include "include/keys"
--- @include "include/counters"
--- @include "include/batch"
--- @include "include/meta"
--- @include "include/settings"
--- @include "include/compact/lib"
--- @include "include/pending"
--- @include "include/wake"
--- @include "include/retry"
--- @include "include/fair"
-- poll.lua: claims due jobs under a lease, oldest due first.
-- ARGV[2] max jobs (1..1000), ARGV[3] lease ms (0: the queue's lease_ms
-- setting, else ARGV[7]), ARGV[4] max attempts (0 = unlimited; a job's own
-- or the queue's setting come first), ARGV[5] the polling consumer's id
-- ('' = a plain poll), ARGV[6] its idle cap ms (with an id), ARGV[7] the
-- client's default lease ms, ARGV[8] the client's layout for a queue
-- without the 'layout' setting (DQ_LAYOUT_*: an idle poll moves jobs
-- into the compact layout, 1, below).
-- Returns { now_ms, next_us, lease_ms, id, payload, attempt, due_ms, token,
-- ... }; when some jobs handed out have a group or a priority, one more
-- element ends it, as list.lua's reply: their runs { pos, fair, ... }
-- (include/meta.lua, fair_of); a poll of jobs without them sends what it
-- sent before groups.
--   next_us: microseconds until the next job is due (0 when more may be due
--   now, -1 when nothing is pending or in flight; when the queue's rate
--   limit holds due work back: until a delivery is allowed again); for a
--   consumer (an id): until it is to poll again, as registered in the idle
--   set (0: now).
--
-- Settings (conf, config.lua) read here: lease_ms, max_attempts, expired
-- (what happens to a job whose expiry time passed before a delivery: 0
-- dead-lettered with reason "expired", 1 dropped), rate_part (this
-- partition's share of rate_max) and rate_window_ms (at most that many
-- deliveries in any rate_window_ms, over all consumers: each delivery is
-- logged in the rate key for a window), dead_part and dead_ttl_ms
-- (include/retry.lua, dead_trim_plan).
-- A consumer's poll that took all that was due registers it as waiting
-- (include/wake.lua): as the owner of the next event when no other
-- live consumer polls by then (a consumer that just took jobs first hands
-- the event to an idle one), else until its cap.  A poll that leaves due
-- work behind tells one more waiting consumer to poll now.
-- Bounded: at most max expired leases, max due jobs and the buckets of
-- max compact jobs (include/compact/move.lua, c_due) are read, max taken.
--
-- A lease that ran out makes its job due again at the lease deadline, so it
-- sorts before jobs that came due later; it stays in lease (its holder's
-- token valid, a late ack still counts) until a poll claims it.  A job that
-- had max attempts goes to dead with its holder's token kept (marked "d"):
-- nobody else claimed it, so its last holder may still ack it; its last
-- failure reason becomes "max attempts" (in the HSET of the metas).
--
-- Tokens come from the server clock: the microsecond of this call plus the
-- job's place in it (below 2^53, exact in Lua), so no counter key outlives
-- the queue.  A job's new token is always above its previous one (the meta
-- remembers it through nacks, requeues and replaces as "-<token>"), even
-- if the clock stepped back or it is delivered again within microseconds.
local now, now_us = dq_now()
local max = tonumber(ARGV[2])
local conf = settings('lease_ms', 'max_attempts', 'expired', 'rate_part',
                      'rate_window_ms', 'dead_part', 'dead_ttl_ms', 'compact',
                      'layout', 'inflight_part', 'grouped',
                      'group_inflight_part')
-- compact jobs (include/compact/keys.lua) only when flagged
local cany = conf.compact ~= nil
local C = cany and c_lib()
local lease_ms = tonumber(ARGV[3])
if lease_ms == 0 then lease_ms = conf.lease_ms or tonumber(ARGV[7]) end
local max_attempts = tonumber(ARGV[4])
local me, cap = ARGV[5] or '', tonumber(ARGV[6] or 0)
local cands = idle_peek(now) -- read before the first write

-- The rate limit: how many deliveries the window still allows, and when
-- the oldest one in it leaves the window (a slot frees).
local rate_max, window = conf.rate_part, conf.rate_window_ms
local rate_oldest, used
if rate_max and window then
    local since = string.format('(%d', now - window)
    used = redis.call('ZCOUNT', K_RATE, since, '+inf')
    if used > 0 then
        local o = redis.call('ZRANGEBYSCORE', K_RATE, since, '+inf',
                             'WITHSCORES', 'LIMIT', 0, 1)
        rate_oldest = tonumber(o[2])
    end
    if rate_max - used < max then max = rate_max - used end
    if max < 0 then max = 0 end
else
    rate_max = nil
end

-- The limit on jobs in flight (include/fair.lua): held_until is when a
-- slot frees on its own once this poll has filled every slot.
local F = (conf.inflight_part or conf.grouped) and fair_lib()
local room, held_until
if conf.inflight_part then
    room, held_until = F.room(conf.inflight_part, max, now, lease_ms)
    if room < max then max = room end
end
local held = false

-- Reads: the oldest expired leases, due jobs and compact due jobs, merged
-- by time (most polls find no expired lease and no compact job and skip
-- the merge).
-- (compact jobs as columns: ids cid, due times cdt, payloads cpay)
local exp, due, cid, cdt, cpay, cread, crof, ccnt = {}, {}, {}, {}, {}
local pick -- a grouped queue's picks
if max > 0 then
    exp = redis.call('ZRANGEBYSCORE', K_LEASE, '-inf', now, 'WITHSCORES',
                     'LIMIT', 0, max)
    if conf.grouped then -- round-robin over groups (include/fair.lua)
        -- (the jobs in due when the queue was flagged: a batch indexed)
        local gfill = redis.call('HGET', K_CONF, 'gfill')
        if gfill then F.fill(gfill, now) end
        -- (compact jobs first: they and the expired leases, which no
        -- index holds, keep a share of max)
        if cany then cid, cdt, cpay, cread, crof, ccnt = C.due(now, max) end
        -- (one group's turn, nothing to share with: due as is)
        pick = not gfill and #exp == 0 and #cid == 0 and
            conf.grouped == 1 and not conf.group_inflight_part and
            F.solo(now)
        if pick then
            due = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now,
                             'WITHSCORES', 'LIMIT', 0, max)
        else
            pick = F.pick(now, max, F.levels(conf.grouped),
                          conf.group_inflight_part, #cid + #exp / 2)
            due = F.due(pick, now, max)
            local eread = #exp / 2
            exp = F.admit(pick, exp, now) -- the limit per group
            -- (room that left: read on, include/fair.lua)
            F.refill(pick, due, exp, eread, #cid, max, now)
        end
    else
        due = redis.call('ZRANGEBYSCORE', K_DUE, '-inf', now, 'WITHSCORES',
                         'LIMIT', 0, max)
    end
    if cany and not pick then
        cid, cdt, cpay, cread, crof, ccnt = C.due(now, max)
    end
end
-- The mover of the compact layouts (include/compact/keys.lua): a
-- poll that finds nothing due moves up to IDLE_MOVE pushed jobs into
-- compact buckets, as its first write (in layout 2 pushes move them too:
-- an idle poll then finds little to move).  It moves the farthest due first,
-- from where the last one stopped, so the jobs of one call have
-- neighbouring due times and share buckets.  While more are left to move
-- a waiting consumer is told to poll again within MOVE_PACE_US, so idle
-- consumers compact a backlog at a bounded share of the server's time (a
-- plain poll's next_us stays the time to the next due job).
local IDLE_MOVE, MOVE_PACE_US = 256, 20000
local moving = false
if max > 0 and #exp == 0 and #due == 0 and #cid == 0 and
    (conf.layout or ARGV[8] or '0') ~= '0' then
    C = C or c_lib()
    local moved, more = C.move(redis.call('GET', C.MV) or '+inf', IDLE_MOVE)
    -- paced while it moves jobs: a page of jobs that do not fit (big or
    -- with options) is not worth coming back early for
    moving = more and moved > 0
    if moved > 0 then cany = true end
end
local ids, from_lease, from_due = {}, {}, {}
local from_c = {} -- ids[k] -> its place in c_due's columns (merged)
local scores -- merged: score of ids[k]; nil: due[2k] is
local conly = false -- compact jobs only: all of c_due's, in its order
if #exp == 0 and #cid == 0 then
    for i = 1, #due, 2 do ids[#ids + 1] = due[i] end
    from_due = ids
elseif #exp == 0 and #due == 0 then -- compact jobs only (at most max)
    ids, scores, conly = cid, cdt, true
else
    scores = {}
    local a, b, c = 1, 1, 1
    while #ids < max and (exp[a] or due[b] or cid[c]) do
        local k = #ids + 1
        local se = exp[a] and tonumber(exp[a + 1])
        local sd = due[b] and tonumber(due[b + 1])
        local sc = cdt[c]
        -- a grouped queue's picks (priority, then round-robin) come first
        local pk = sd and pick and pick.gof[due[b]]
        if se and not pk and (not sd or se <= sd) and
            (not sc or se <= sc) then
            ids[k], scores[k] = exp[a], exp[a + 1]
            from_lease[#from_lease + 1] = exp[a]
            a = a + 2
        elseif sd and (pk or not sc or sd <= sc) then
            ids[k], scores[k] = due[b], due[b + 1]
            from_due[#from_due + 1] = due[b]
            b = b + 2
        else
            ids[k], scores[k] = cid[c], cdt[c]
            from_c[k] = c
            c = c + 1
        end
    end
end

local out = { now, 0, lease_ms }
-- the runs of groups and priorities (include/meta.lua, fair_of; made at
-- the first run), the options of the last job handed out and its fair,
-- and the fair of each options string met (a round-robin poll alternates
-- groups from job to job: each group's options are read once)
local fair, fext, fcur, fof = nil, '', '', nil
local H = 3 -- header entries of out
local n = #ids
local delivered = 0
if n > 0 then
    -- Compact jobs move to the native keys: payload (and meta, below)
    -- into jobs, like any claimed job into lease.  They have nothing
    -- there yet: a poll that claims only compact jobs reads nothing.
    local ctaken, ctotal = ccnt, n -- per bucket read, and in all
    if not conly then
        ctaken, ctotal = {}, 0
        for _, c in pairs(from_c) do
            ctaken[crof[c]] = (ctaken[crof[c]] or 0) + 1
            ctotal = ctotal + 1
        end
    end
    local got, fields
    local mset = {} -- written to jobs: compact payloads, then meta
    if ctotal == n then -- all compact: nothing of theirs in jobs to read
        got, fields = conly and cpay or {}, {}
        for i, id in ipairs(ids) do
            fields[n + i] = mf(id)
            if conly then mset[2 * i - 1], mset[2 * i] = id, cpay[i] end
        end
    else
        got, fields = get_with_meta(ids)
    end
    local deadline = string.format('%d', now + lease_ms) -- formatted once
    local tok0 = now_us - 1
    local now_s = string.format('%d', now)
    local leased, died, gone = {}, {}, {}
    for k, c in pairs(from_c) do -- merged: ids[k] is c_due's c-th
        got[k] = cpay[c]
        mset[#mset + 1] = ids[k]
        mset[#mset + 1] = got[k]
    end
    local queue_most = max_attempts_of('', conf, max_attempts)
    -- A job that is not delivered goes to dead with a reason (or, expired
    -- in a queue that drops those, is deleted).  Its holder, if its token
    -- is still valid, may still ack it there: the meta marks that ("d").
    local function give_up(j, id, attempts, cur, ext, reason)
        died[#died + 1] = now_s
        died[#died + 1] = id
        mset[#mset + 1] = ef(id) -- its last failure reason
        mset[#mset + 1] = now_s .. ':' .. reason
        if valid_tok(cur) then -- its holder may still ack it: mark where
            mset[#mset + 1] = fields[n + j]
            mset[#mset + 1] = 'd' .. fmt_meta(attempts, cur, ext)
        end
    end
    for j, id in ipairs(ids) do
        local attempts, cur, _, ext = parse_meta(got[n + j])
        local expires, most = nil, queue_most -- most jobs carry no options
        if ext ~= '' then
            expires = meta_opt(ext, 'x')
            most = max_attempts_of(ext, conf, max_attempts)
        end
        if not got[j] then
            gone[#gone + 1] = id -- an index entry without a job: drop it
        elseif expires and now > expires then
            if conf.expired == 1 then
                gone[#gone + 1] = id
            else
                give_up(j, id, attempts, cur, ext, 'expired')
            end
        elseif most > 0 and attempts >= most then
            give_up(j, id, attempts, cur, ext, 'max attempts')
        else
            local tok = tok0 + j
            if cur ~= '0' then
                local last = math.abs(tonumber(cur))
                if last >= tok then tok = last + 1 end
            end
            tok = string.format('%d', tok)
            attempts = attempts + 1
            mset[#mset + 1] = fields[n + j]
            mset[#mset + 1] = fmt_meta(attempts, tok, ext)
            leased[#leased + 1] = deadline
            leased[#leased + 1] = id
            out[#out + 1] = id
            out[#out + 1] = got[j]
            out[#out + 1] = attempts
            out[#out + 1] = scores and scores[j] or due[2 * j]
            out[#out + 1] = tok
            -- (a run of jobs of the same options is looked at once)
            if ext ~= fext then
                fof = fof or {}
                local f = fof[ext] or fair_of(ext)
                fof[ext] = f
                if f ~= fcur then
                    fair = fair or {}
                    fair[#fair + 1], fair[#fair + 2] = (#out - H) / 5, f
                end
                fcur, fext = f, ext
            end
        end
    end
    delivered = (#out - H) / 5
    local trim
    if #died > 0 then
        trim = dead_trim_plan(conf, #died / 2, now)
        redis.call('ZCARD', K_DEAD) -- type check first
    end
    counts_read()
    -- Writes: lease and due were read above, jobs and dead too.
    if #from_lease > 0 then redis.call('ZREM', K_LEASE, unpack(from_lease)) end
    if #from_due > 0 then redis.call('ZREM', K_DUE, unpack(from_due)) end
    if ctotal > 0 then C.taken(cread, ctaken) end
    -- (the lease set is short-lived: converted from 32 claims on)
    if #mset > 0 then add_many('HSET', K_JOBS, mset) end
    if #leased > 0 then add_many('ZADD', K_LEASE, leased, 32) end
    if #died > 0 then redis.call('ZADD', K_DEAD, unpack(died)) end
    if #gone > 0 then redis.call('HDEL', K_JOBS, unpack(job_fields(gone))) end
    dead_trim(trim)
    if rate_max and delivered > 0 then
        -- Log each delivery for a window (and forget older ones: at most
        -- the last window's, as every limited poll trims).
        local log = {}
        for k = 1, delivered do
            log[#log + 1] = now_s
            log[#log + 1] = string.format('%d.%d', now_us, k)
        end
        redis.call('ZREMRANGEBYSCORE', K_RATE, '-inf',
                   string.format('%d', now - window))
        redis.call('ZADD', K_RATE, unpack(log))
        redis.call('PEXPIRE', K_RATE, window)
        if not rate_oldest then rate_oldest = now end
    end
    count('delivered', delivered)
    count('failed', #died / 2)
    -- (the groups of the jobs leased: their lease index under a limit per
    -- group, include/fair.lua)
    if pick and pick.glimit then F.took(pick, ids, got, n, out, H) end
end
if pick then F.done(pick, from_due, now, lease_ms) end
-- every due group at its limit per group: back when a slot frees
if pick and pick.free_at and n == 0 and
    (not held_until or pick.free_at < held_until) then
    held_until = pick.free_at
end

-- With the rate limit used up, nothing is delivered before a slot frees.
local limited_until
if rate_max and rate_oldest and used + delivered >= rate_max then
    limited_until = rate_oldest + window
end

if n < max or cands or limited_until or held_until then
    -- Say when the next one comes due (0: more is due now).
    local first = next_event(cany)
    if first and limited_until and first < limited_until then
        first = limited_until
    end
    -- every slot taken: work due before one frees waits for it, and the
    -- script that frees a slot wakes a waiter (a poll that took fewer
    -- than the slots left did not fill them: its next due time stands,
    -- unless the limit per group held it back)
    if first and held_until and first < held_until and
        (not room or delivered >= room or (pick and pick.free_at and n == 0))
    then
        first = held_until
        held = true
    end
    -- every slot left promised to consumers told of one (include/fair.lua):
    -- a consumer waits to be told too, rather than race them for it
    local spare = not room or held or not first or first * 1000 > now_us or
        F.spare(room, delivered, now)
    if not spare and me ~= '' and cands then first = nil end
    if not first then
        out[2] = -1
    elseif first * 1000 > now_us then
        out[2] = first * 1000 - now_us
    else
        out[2] = 0
    end
    if out[2] == 0 then
        -- One more waiting consumer polls now; a consumer that took its
        -- fill polls again at once itself, so it is not waiting.  (A
        -- limited queue: only for a free slot no consumer told already is
        -- on its way to, include/fair.lua.)
        if spare and idle_tell(cands, now, now_us, me) and room then
            F.told()
        end
        if me ~= '' and cands then
            local listed = #cands >= 12
            for i = 1, #cands, 2 do listed = listed or cands[i] == me end
            if listed then redis.call('ZREM', K_IDLE, me) end
        end
    elseif me ~= '' and cands then
        -- Register me: until I own the next event, else until my cap.
        local mine = now + cap
        if first and first < mine and not idle_covered(cands, first, me)
            and not (#out > H and idle_tell(cands, first, now_us, me)) then
            mine = first
        end
        out[2] = mine * 1000 - now_us
        -- A half ms marks a registration of a consumer that just took jobs
        -- (it may still run handlers): others are told first.
        redis.call('ZADD', K_IDLE,
                   string.format(#out > H and '%d.5' or '%d', mine), me)
        -- The key lives a while past the longest cap of its registrations:
        -- another client's shorter cap never cuts it.
        if redis.call('PTTL', K_IDLE) < cap + 2000 then
            redis.call('PEXPIRE', K_IDLE, cap + 2000)
        end
        redis.call('ZREMRANGEBYSCORE', K_IDLE, '-inf',
                   string.format('(%d', now - IDLE_SLACK))
    end
    if moving and me ~= '' and (out[2] < 0 or out[2] > MOVE_PACE_US) then
        out[2] = MOVE_PACE_US
    end
end
if room or (pick and pick.glimit) then F.mark(held) end
if fair then out[#out + 1] = fair end
return out
