#!lua flags=allow-oom
--- @include "include/keys"
--- @include "include/counters"
--- @include "include/meta"
--- @include "include/pending"
--- @include "include/wake"
--- @include "include/tokens"
--- @include "include/repeat"
--- @include "include/fair"
-- ack.lua: finishes jobs and deletes all their data, or, for a repeating
-- job (include/repeat.lua), schedules its next run instead: due
-- at the first slot of its rule strictly after now (runs missed while no
-- consumer ran are not made up), attempts 0, the token ended (the next
-- delivery's is above it), the last failure reason deleted (the run
-- succeeded); its done record is written as for any ack, so a retried ack
-- still answers 0.  A job pushed with DQ_PUSH_DEBOUNCE that has a
-- follow-up (pushes made while it ran, include/debounce.lua) is replaced
-- by it in the same step: payload, due at the later of now and its time,
-- attempts 0; this ack's done record is written retired (it answers a
-- retried ack, but no push: the follow-up is a new job).
-- ARGV[2] done window ms (0 = leave no done record), ARGV[3..] pairs: id,
-- token.
-- Returns one result per job:
--   0 acked (or acked already with this same token: a retried ack whose
--     first try landed), -16 stale token (nothing changed; also when
--     another holder finished the job), -17 no such job (or the id came
--     twice in this call).
--
-- The done record (done: id -> the token it was acked with; tokens carry
-- the ms of their delivery) lets a retried ack tell "mine landed" from
-- "someone else's", and a retried keep-mode push tell "already done" from
-- "never pushed", for a window after that delivery.  Each call trims at
-- most as many expired records as it adds plus 16, so the set keeps up,
-- and the key expires a window after the last ack.
-- Reads (jobs, done, dead when needed, due when a job repeats) come before
-- the first write.
local window = tonumber(ARGV[2])
local ids, toks = {}, {}
for i = 3, #ARGV, 2 do
    ids[#ids + 1] = ARGV[i]
    toks[#toks + 1] = ARGV[i + 1]
end
local res, dead, dup, exts, full = check_tokens(ids, toks) -- reads jobs
local ok, zadd, in_dead, out, failed = {}, {}, {}, {}, {}
local rep = {} -- positions in ok of jobs that say they repeat
local dbs -- jobs pushed with DQ_PUSH_DEBOUNCE, if any: { id, token,
          -- options, position of their done record's score in zadd }
local repeats = {} -- their ids
for i, id in ipairs(ids) do
    if res[i] >= 0 then
        out[i] = 0
        ok[#ok + 1] = id
        if exts[i] ~= '' and meta_opt(exts[i], 'r') then
            rep[#rep + 1] = { #ok, i }
            repeats[id] = true
        end
        if window > 0 then
            zadd[#zadd + 1] = toks[i] -- the done record: id -> token
            zadd[#zadd + 1] = id
        end
        if exts[i] ~= '' and meta_opt(exts[i], 'b') then
            dbs = dbs or {}
            dbs[#dbs + 1] = { id, toks[i], exts[i], window > 0 and #zadd - 1 }
        end
        if dead[i] then in_dead[#in_dead + 1] = id end
    else
        out[i] = res[i]
        if not dup[i] then failed[#failed + 1] = i end
    end
end
local now, now_us
if #failed > 0 or (window > 0 and #ok > 0) or #rep > 0 or dbs then
    now, now_us = dq_now()
end
if #failed > 0 then
    -- Reads only: a done record with this token means this holder's
    -- earlier ack landed; with another token, someone else finished it.
    local fids = {}
    for k, i in ipairs(failed) do fids[k] = ids[i] end
    local sc = redis.call('ZMSCORE', K_DONE, unpack(fids))
    for k, i in ipairs(failed) do
        if done_live(sc[k], now, window) then
            -- the token, retired or not (include/tokens.lua)
            out[i] = math.floor(tonumber(sc[k])) == tonumber(toks[i]) and 0
                or -16
        end
    end
end
local n = #ok
if n == 0 then return out end

-- More reads: dead (when a job waits there), and how many done records
-- ran out (this also checks the type of done before anything is written).
if #in_dead > 0 then redis.call('ZCARD', K_DEAD) end
local trim = 0
if window > 0 then
    trim = redis.call('ZCOUNT', K_DONE, '-inf',
                      string.format('%d', (now - window) * 1000))
    if trim > n + 16 then trim = n + 16 end
end

-- Repeating jobs: their rules, and where each goes next (reads).
local gone, again, meta, earliest = ok, {}, {}, nil
local aext -- the options of the jobs of again, in its order
if #rep > 0 then
    aext = {}
    local rfs = {}
    for k, p in ipairs(rep) do rfs[k] = rf(ok[p[1]]) end
    local rules = redis.call('HMGET', K_JOBS, unpack(rfs))
    local keep = {}
    for k, p in ipairs(rep) do
        local at = rules[k] and repeat_next(rules[k], now)
        if at then
            local id = ok[p[1]]
            keep[p[1]] = true
            again[#again + 1] = string.format('%d', at)
            again[#again + 1] = id
            meta[#meta + 1] = mf(id)
            meta[#meta + 1] = fmt_meta(0, ended_tok(toks[p[2]]), exts[p[2]])
            aext[#aext + 1] = exts[p[2]]
            if not earliest or at < earliest then earliest = at end
        end
    end
    gone = {}
    for k, id in ipairs(ok) do
        if not keep[k] then gone[#gone + 1] = id end
    end
end
-- Debounced jobs with a follow-up ("<at>:<deadline>:<payload>",
-- include/debounce.lua): it becomes the pending job in this step (reads:
-- the follow-ups).  Inline, not a function: a script makes its functions
-- anew on every call, and plain acks should not pay for one.
local fu -- { HDEL fields, HSET pairs, ZADD pairs } when one is started
if dbs then
    local fs, ds = {}, {}
    for _, d in ipairs(dbs) do
        if not repeats[d[1]] then -- a series goes on as its rule says
            ds[#ds + 1] = d
            fs[#fs + 1] = d[1] .. '\0n'
        end
    end
    local got = #fs > 0 and redis.call('HMGET', K_JOBS, unpack(fs)) or {}
    local started = {}
    for k, d in ipairs(ds) do
        local v, id = got[k], d[1]
        if v then
            local a = string.find(v, ':', 1, true)
            local b = string.find(v, ':', a + 1, true)
            local at = tonumber(string.sub(v, 1, a - 1))
            local dl = tonumber(string.sub(v, a + 1, b - 1))
            if dl > 0 and dl < at then at = dl end
            if at < now then at = now end
            local ext = string.gsub(d[3], '|w[^|]*', '')
            if dl > 0 then ext = ext .. string.format('|w%d', dl) end
            fu = fu or { {}, {}, {}, {} } -- (4: the options, as aext)
            local del, set, due = fu[1], fu[2], fu[3]
            del[#del + 1] = id .. '\0n'
            del[#del + 1] = ef(id)
            set[#set + 1] = id
            set[#set + 1] = string.sub(v, b + 1)
            set[#set + 1] = mf(id)
            set[#set + 1] = fmt_meta(0, ended_tok(d[2]), ext)
            due[#due + 1] = string.format('%d', at)
            due[#due + 1] = id
            fu[4][#fu[4] + 1] = ext
            started[id] = true
            -- the record of this ack retires: the follow-up is a new job
            if d[4] then zadd[d[4]] = d[2] .. '.5' end
            if not earliest or at < earliest then earliest = at end
        end
    end
    if fu then
        local left = {}
        for _, id in ipairs(gone) do
            if not started[id] then left[#left + 1] = id end
        end
        gone = left
    end
end
local cands = wake_prep(earliest, earliest and first_due(), now)
-- a queue with groups indexes the jobs that go back to due by their
-- group and priority (include/fair.lua)
local FG = earliest and has_groups() and fair_lib()
-- a slot of the limit on jobs in flight frees (include/fair.lua)
local F = full and #in_dead < n and fair_lib()
local waiters = F and F.waiters(now, now_us, idle_peek, dq_now)

counts_read()
-- Writes: lease is the one key not read above, so it comes first.
if #in_dead < n then redis.call('ZREM', K_LEASE, unpack(ok)) end
if #in_dead > 0 then redis.call('ZREM', K_DEAD, unpack(in_dead)) end
if #gone > 0 then
    redis.call('HDEL', K_JOBS, unpack(job_fields(gone, repeats)))
end
if #again > 0 then
    local efl = {}
    for k = 2, #again, 2 do efl[#efl + 1] = ef(again[k]) end
    redis.call('HDEL', K_JOBS, unpack(efl))
    redis.call('HSET', K_JOBS, unpack(meta))
    redis.call('ZADD', K_DUE, unpack(again))
    if FG then FG.moved(FG.of_exts(aext), again) end
end
if fu then
    redis.call('HDEL', K_JOBS, unpack(fu[1]))
    redis.call('HSET', K_JOBS, unpack(fu[2]))
    redis.call('ZADD', K_DUE, unpack(fu[3]))
    if FG then FG.moved(FG.of_exts(fu[4]), fu[3]) end
end
if window > 0 then
    if trim > 0 then redis.call('ZREMRANGEBYRANK', K_DONE, 0, trim - 1) end
    redis.call('ZADD', K_DONE, unpack(zadd))
    redis.call('PEXPIRE', K_DONE, window)
end
count('acked', n)
if earliest then wake(earliest, cands, now, now_us) end
if F then F.freed(waiters, idle_tell, PUBLISH, CHANNEL) end
return out
