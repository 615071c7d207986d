#!lua
--- @include "include/keys"
--- @include "include/batch"
--- @include "include/meta"
--- @include "include/compact/keys"
--- @include "include/compact/lib"
--- @include "include/pending"
--- @include "include/wake"
--- @include "include/tokens"
--- @include "include/repeat"
--- @include "include/fair"
-- push.lua: adds or replaces jobs.
-- ARGV[2] mode: 0 = keep an existing job with the same id, 1 = replace it
--         (2 = debounce goes to debounce.lua instead)
-- ARGV[3] time: 0 = values are delays (ms from now), 1 = absolute epoch ms
-- ARGV[4] done window ms (0: a done record counts as long as it is kept)
-- ARGV[5] the jobs' options ('' none): "|m<n>" max attempts, "|x<ms>"
--         expiry as server epoch ms or "|X<ms>" as ms from now (no
--         delivery starts after it); kept in each job's meta
--         (include/meta.lua, parse_meta), from the push on; "|r" the jobs
--         repeat
-- ARGV[6] the jobs' repeat rule ('' none; include/repeat.lua):
--         "e<every ms>" (stored with the job's start: its first due time)
--         or a cron rule (stored as given; the first due time is its first
--         match at or after the push's time).  A replace without a rule
--         drops the job's rule.  A repeating push ignores done records:
--         a retried one finds its job still there (kept), and one after a
--         cancel registers the series again.
-- ARGV[7] the client's layout for a queue without the 'layout' setting
--         (0 default, 1 compact, 2 compact moved by pushes:
--         include/compact/keys.lua), then 'g' when the client generated every
--         id of the call (80 random bits each, made for this call, whose
--         script runs at most once: no compact job can have one, so their
--         shards are not read)
-- ARGV[8..] triples: id, delay-or-time, payload (the client cuts batches
--           into calls of at most 1000 jobs and a few MiB)
-- Returns one outcome per job: 1 pushed, 2 kept, 3 replaced, 4 done (keep
-- mode: the id was acked within its done window, so this push is taken for
-- a retry of one that landed; nothing is written).
-- A job that exists answers kept before a done record answers done.  Done
-- records are facts about earlier acks, and answer a keep push only for the
-- incarnation that was acked: a push that creates or replaces the job
-- retires its id's record (include/tokens.lua), which then refuses no push
-- but still tells a holder whose ack landed before the replace so on a
-- retry.
-- Reads (done, jobs, due, the compact index and shards, and lease/dead
-- before a reset) all come before the first write.
--
-- Pushes write the default layout, whatever the setting says (one HSET
-- and one ZADD for a batch): in the compact layout idle polls move the
-- jobs into compact buckets later (poll.lua), in large groups of
-- neighbouring due times.  Only layout 2 ("compact-push") runs the mover
-- here: it moves as many native pending jobs as the call pushed that fit
-- (small, no options), farthest due first from where the last call
-- stopped, so memory is compact at once and pushes cost about four times
-- as much (bench/RESULTS.md, "Memory").
local now, now_us = dq_now()
local replace = ARGV[2] == '1'
local absolute = ARGV[3] == '1'
local window = tonumber(ARGV[4])
local ext = ARGV[5]
local rule = ARGV[6]
if ext ~= '' then
    local rel = meta_opt(ext, 'X')
    if rel then
        ext = meta_drop(ext, 'X') .. string.format('|x%d', now + rel)
    end
end
-- The settings read: layout, and the flag of a queue with compact jobs.
-- The conf hash is named, not declared: a declared key that is missing
-- (most queues have no settings) would hold every push back with
-- TRYAGAIN while the queue's slot migrates.  Named, it raises "non local
-- key" on the source of a migrating slot instead, and the push goes on as
-- in the default layout (README, "The compact layout").
local lay = redis.pcall('HMGET', K_PFX .. 'conf', 'layout', 'compact',
                        'grouped')
if lay.err then lay = { false, false, false } end
local eager = (lay[1] or string.sub(ARGV[7], 1, 1)) == '2'
local fresh = string.byte(ARGV[7], 2) == 103 -- 'g'
local cflag = lay[2] ~= false
local C = (eager or cflag) and c_lib()
local cursor = eager and (redis.call('GET', C.MV) or '+inf')

if #ARGV == 10 and not replace and ext == '' then
    -- One job, keep mode (the common single push): HSETNX checks and
    -- writes in one command, after the reads of done, due and compact.
    local id, at = ARGV[8], tonumber(ARGV[9])
    if not absolute then at = now + at end
    local before, cany = first_due(cflag)
    local held = cany and not fresh and C.has(id)
    local rec = redis.call('ZSCORE', K_DONE, id)
    -- a binding record: live and whole (include/tokens.lua)
    if done_live(rec, now, window) and tonumber(rec) % 1 == 0 then
        return { (held or redis.call('HMGET', K_JOBS, id)[1]) and 2 or 4 }
    end
    if held then return { 2 } end
    local cands = wake_prep(at, before, now)
    if redis.call('HSETNX', K_JOBS, id, ARGV[10]) == 0 then return { 2 } end
    redis.call('ZADD', K_DUE, string.format('%d', at), id)
    -- a record that no longer applied (out of this client's window) must
    -- not refuse a later push with a longer one: this job is not its
    if rec and tonumber(rec) % 1 == 0 then
        redis.call('ZADD', K_DONE, string.format('%d.5', rec), id)
    end
    -- (a queue with groups indexes jobs without one too: include/fair.lua)
    if lay[3] then fair_lib().add('', { string.format('%d', at), id }) end
    if eager and C.fits(id, ARGV[10], at) then C.move(cursor, 1) end
    wake(at, cands, now, now_us)
    return { 1 }
end
local ids = {}
for i = 8, #ARGV, 3 do ids[#ids + 1] = ARGV[i] end
local n = #ids
-- Replace reads the metas too: a reset job keeps its last token (ended).
local exists = replace and get_with_meta(ids) or
    redis.call('HMGET', K_JOBS, unpack(ids))
-- Done records: a keep push answers done for a binding one; every push
-- that creates or replaces a job retires its id's (include/tokens.lua).
local recs = redis.call('ZMSCORE', K_DONE, unpack(ids))
local before, cany = first_due(cflag)
-- An id not in jobs may be a compact job: its shard says (due time).
local cdue = {}
if cany and not fresh then
    for j, id in ipairs(ids) do
        if not exists[j] then
            local d = redis.call('HMGET', C.skey(id), id)[1]
            if d then cdue[j] = tonumber(d) end
        end
    end
end
local out, hset, zadd, reset, seen, ended = {}, {}, {}, {}, {}, {}
local retire = {} -- ZADD arguments that retire done records
-- the mover moves as many jobs as the call pushed that could be compact:
-- a batch of big payloads (or with options) does not pay for its reads
local fit = 0
local unc = {} -- compact jobs a replace takes out: { id, due }
local earliest
for j, id in ipairs(ids) do
    local i = 5 + 3 * j
    local outcome = 1
    if seen[id] == 4 and not replace then
        outcome = 4
    elseif exists[j] or cdue[j] or seen[id] then
        outcome = replace and 3 or 2
        if replace and cdue[j] and not seen[id] then
            unc[#unc + 1] = { id, cdue[j] }
        end
        -- Rescheduling takes the job out of lease or dead: a holder's
        -- token goes stale (the meta keeps it, ended), attempts restart
        -- and its last failure reason goes.
        if replace and exists[j] and not seen[id] then
            reset[#reset + 1] = id
            if exists[n + j] then
                local _, last = parse_meta(exists[n + j])
                ended[#ended + 1] = mf(id)
                ended[#ended + 1] = fmt_meta(0, ended_tok(last), ext)
            end
        end
    elseif not replace and rule == '' and done_live(recs[j], now, window)
        and tonumber(recs[j]) % 1 == 0 then
        outcome = 4
    end
    if recs[j] and tonumber(recs[j]) % 1 == 0 and not seen[id] and
        (outcome == 1 or outcome == 3) then
        retire[#retire + 1] = string.format('%d.5', recs[j])
        retire[#retire + 1] = id
    end
    seen[id] = seen[id] or outcome
    if outcome == 1 or outcome == 3 then
        local at = tonumber(ARGV[i + 1])
        if not absolute then at = now + at end
        hset[#hset + 1] = id
        hset[#hset + 1] = ARGV[i + 2]
        if rule ~= '' then
            local stored
            at, stored = repeat_first(rule, at)
            if not at then
                return redis.error_reply('ERR delayq: the repeat rule of ' ..
                                         id .. ' never fires')
            end
            hset[#hset + 1] = rf(id)
            hset[#hset + 1] = stored
        end
        -- a job without a meta gets one now to carry its options (a
        -- replaced one's meta was rewritten with them above)
        if ext ~= '' and not (replace and exists[n + j]) then
            hset[#hset + 1] = mf(id)
            hset[#hset + 1] = fmt_meta(0, '0', ext)
        end
        -- Numbers reach redis.call as strings formatted here: Lua's own
        -- conversion prints them the slow floating-point way.
        zadd[#zadd + 1] = string.format('%d', at)
        zadd[#zadd + 1] = id
        if eager and ext == '' and rule == '' and
            C.fits(id, ARGV[i + 2], at) then
            fit = fit + 1
        end
        if not earliest or at < earliest then earliest = at end
    end
    out[j] = outcome
end
local cands = wake_prep(earliest, before, now)
-- The queue's first grouped (or prioritized) push over jobs in due: the
-- polls index those later, from the cursor read here (include/fair.lua,
-- F.fill).
local FL = ext ~= '' and not lay[3] and earliest and fair_lib()
local gfill = FL and FL.fill_from(ext)
if #reset > 0 then
    -- Type checks of the keys the reset writes, before its first write.
    redis.call('ZCARD', K_LEASE)
    redis.call('ZCARD', K_DEAD)
    redis.call('ZREM', K_LEASE, unpack(reset))
    redis.call('ZREM', K_DEAD, unpack(reset))
    redis.call('HDEL', K_JOBS, unpack(efs(reset)))
    -- the old rule goes (a repeating push writes its own below), and a
    -- debounced job's follow-up (include/debounce.lua): the replace is
    -- the job now
    local rfs = {}
    for k, id in ipairs(reset) do rfs[k] = rf(id) end
    for _, id in ipairs(reset) do rfs[#rfs + 1] = id .. '\0n' end
    redis.call('HDEL', K_JOBS, unpack(rfs))
    if #ended > 0 then redis.call('HSET', K_JOBS, unpack(ended)) end
end
if #unc > 0 then C.remove(unc) end
if #retire > 0 then redis.call('ZADD', K_DONE, unpack(retire)) end
if earliest then
    add_many('HSET', K_JOBS, hset)
    add_many('ZADD', K_DUE, zadd)
    if lay[3] or ext ~= '' then
        -- the jobs' group (include/fair.lua): indexed by it, as jobs
        -- without one are once the queue has groups (lay[3], its flag)
        local grp = string.match(ext, '|g([^|]*)')
        local F = FL or fair_lib()
        local p = F.prio(ext) -- and their priority
        if grp or p > 0 or lay[3] then F.add(grp or '', zadd, p) end
        local flag = F.flag(lay[3], grp, p)
        if flag then
            redis.pcall('HSET', K_PFX .. 'conf', 'grouped',
                        string.format('%d', flag))
        end
        if flag and gfill then
            redis.pcall('HSET', K_PFX .. 'conf', 'gfill', gfill)
        end
    end
    if fit > 0 then C.move(cursor, fit) end
end
wake(earliest, cands, now, now_us)
return out
