-- common.lua: prelude that the build prepends to every libdelayq script.
--
-- Every script gets the same first five keys of one queue, all under one hash tag
-- ({<queue>}, the name percent-encoded) so a queue lives in one Redis
-- Cluster slot:
--   KEYS[1] due    ZSET  id -> due time (ms, server clock): pending jobs
--   KEYS[2] lease  ZSET  id -> lease deadline (ms): jobs in flight
--   KEYS[3] jobs   HASH  id -> payload (pending, in flight and dead jobs),
--                        and id.."\0" -> "attempts:token" for jobs delivered
--                        at least once (token "-<last token>" or "0" = no
--                        valid lease; "d<attempts>:token" = a poll
--                        dead-lettered the job while its holder's token was
--                        still valid), and id.."\0e" -> "<ms>:<reason>",
--                        the job's last failure reason (a nack that gave
--                        one, or "max attempts" from a poll) and the server
--                        ms it was set at; deleted with the job's other
--                        fields (ack, cancel, purge) and by a replacing push;
--                        and id.."\0r" -> the repeat rule of a repeating job
--                        (see push.lua and ack.lua)
--   KEYS[4] dead   ZSET  id -> time it was dead-lettered (ms)
--   KEYS[6] idle   ZSET  consumer id -> server ms at which that waiting
--                        consumer polls on its own next (see "Wake-ups"
--                        below); passed to the scripts that wake or
--                        register consumers (push, poll, ack, nack, dead)
--   KEYS[7] conf   HASH  the queue's settings (config.lua; absent: the
--                        client's options decide): passed to poll, nack
--                        and config
--   KEYS[8] rate   ZSET  the rate limit's log: "<poll us>.<n>" -> server ms
--                        of each delivery in the last window (poll.lua);
--                        passed to poll
--   KEYS[9] counts HASH  delivered, acked, retried, failed: totals kept
--                        only by clients with DQ_OPT_COUNTERS (the key is
--                        passed only then, with the '+' flag below, and
--                        with it every key before it)
--   KEYS[5] done   ZSET  id -> the token a finished job was acked with (a
--                        number: the us of that delivery + a little),
--                        so a retried push answers "done" and a retried ack
--                        "yours landed" (see ack.lua)
-- ARGV[1] is the queue's wake-up channel (its name carries the database
-- number: pub/sub is server-wide, databases are not); the operation's own
-- arguments start at ARGV[2].  Leading flag bytes (never in a namespace):
-- '+' keeps the counters (KEYS[9]), then '!' asks for sharded pub/sub: in a Redis Cluster a plain PUBLISH is broadcast to
-- every node, SPUBLISH reaches only the subscribers on the owner of the
-- channel's slot, which is the queue's own slot (same hash tag).
-- A job id is in at most one of due, lease and dead.  A queue without jobs
-- leaves no key behind: Redis deletes empty sets and hashes, and done
-- expires a window after the last ack.
--
-- Failure atomicity: Redis does not roll a script back when a command fails
-- half-way (a key of the wrong type is the usual cause), so every script
-- reads each key it is going to write before its first write.  A failed
-- script has then written nothing.  The reads are the ones the script needs
-- anyway where possible; where not, a cheap O(1) read stands in.
--
-- One key per kind (not one per job) lets a script touch a whole batch with
-- one command per kind (HMGET, HSET, ZADD, ZREM with many members), which
-- is what makes batches cheap.  Every range read has a LIMIT.  The meta
-- fields live in the big jobs hash (ids are C strings, so id.."\0" never
-- names a job) rather than a small hash of their own: one HMGET reads a
-- job's payload and meta, and a small hash recreated by every poll would
-- pay for Redis's listpack inserts (bench/RESULTS.md, R1).
--
-- Time: every decision uses TIME, read once per call.  Lua numbers are
-- doubles: epoch milliseconds (~1.8e12) and microseconds (~1.8e15) are exact.

local K_DUE, K_LEASE, K_JOBS, K_DEAD, K_DONE = KEYS[1], KEYS[2], KEYS[3],
    KEYS[4], KEYS[5]
local K_IDLE, K_CONF, K_RATE, K_COUNTS = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local CHANNEL, PUBLISH, COUNTING = ARGV[1], 'PUBLISH', false
if string.byte(CHANNEL, 1) == 43 then
    CHANNEL, COUNTING = string.sub(CHANNEL, 2), true
end
if string.byte(CHANNEL, 1) == 33 then
    CHANNEL, PUBLISH = string.sub(CHANNEL, 2), 'SPUBLISH'
end

-- The counters: counts_read() before the first write of a script (it
-- checks the key's type, so a wrong one fails the call before it changed
-- anything), count() after.  Both do nothing unless the client counts.
local function counts_read()
    if COUNTING then redis.call('HLEN', K_COUNTS) end
end
local function count(field, n)
    if COUNTING and n > 0 then redis.call('HINCRBY', K_COUNTS, field, n) end
end

-- The field of a job's meta ("attempts:token") in the jobs hash.
local function mf(id) return id .. '\0' end

-- The field of a job's last failure reason ("<ms>:<reason>").  Every
-- script that deletes a job's fields deletes this one too.
local function ef(id) return id .. '\0e' end

-- { id1, .., idn } -> { ef(id1), .., ef(idn) }
local function efs(ids)
    local out = {}
    for i, id in ipairs(ids) do out[i] = ef(id) end
    return out
end

-- One HMGET of the payloads, then the metas, of ids: returns got (got[i]
-- is ids[i]'s payload or false, got[n + i] its meta) and the field list
-- (fields[n + i] = mf(ids[i])).
local function get_with_meta(ids)
    local n = #ids
    local fields = {}
    for i, id in ipairs(ids) do
        fields[i] = id
        fields[n + i] = mf(id)
    end
    return redis.call('HMGET', K_JOBS, unpack(fields)), fields
end

-- { id1, .., idn } -> { mf(id1), .., mf(idn) }
local function mfs(ids)
    local out = {}
    for i, id in ipairs(ids) do out[i] = mf(id) end
    return out
end

-- The field of a repeating job's rule (see push.lua).
local function rf(id) return id .. '\0r' end

-- Every field of the jobs ids (payload, meta, reason, repeat rule): one
-- HDEL of them deletes all their data.  A caller that read the jobs' metas
-- passes repeats, the set of those ids that repeat ("|r"): only those get
-- their rule's field named, since each name that misses still costs a
-- lookup in what is usually a very big hash.
local function job_fields(ids, repeats)
    local n, out = #ids, {}
    if not repeats then
        for i, id in ipairs(ids) do
            out[i], out[n + i], out[2 * n + i], out[3 * n + i] =
                id, mf(id), ef(id), rf(id)
        end
        return out
    end
    for i, id in ipairs(ids) do
        out[i], out[n + i], out[2 * n + i] = id, mf(id), ef(id)
    end
    for _, id in ipairs(ids) do
        if repeats[id] then out[#out + 1] = rf(id) end
    end
    return out
end

-- Server time as (ms, us).
local function dq_now()
    local t = redis.call('TIME')
    local s, us = tonumber(t[1]), tonumber(t[2])
    return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- A job's meta: "[d]attempts:token" then its push options, if any, as
-- "|<tag><value>" items (push.lua): "|m<n>" its own max attempts, "|x<ms>"
-- the server time after which it is not delivered (expiry), "|r" it
-- repeats (its rule in rf(id)).  A job pushed with options has a meta from
-- its push on ("0:0|.."); others get one at their first delivery.
-- parse_meta: "[d]attempts:token[|..]" (or false) -> attempts (number),
-- token (string), true when a poll dead-lettered the job under a still
-- valid token, and the options ("|.." or '').
local function parse_meta(v)
    if not v then return 0, '0', false, '' end
    local c = string.find(v, ':', 1, true)
    local bar = string.find(v, '|', c, true)
    local tok = string.sub(v, c + 1, bar and bar - 1 or -1)
    local ext = bar and string.sub(v, bar) or ''
    if string.byte(v, 1) == 100 then -- 'd'
        return tonumber(string.sub(v, 2, c - 1)), tok, true, ext
    end
    return tonumber(string.sub(v, 1, c - 1)), tok, false, ext
end

local function fmt_meta(attempts, token, ext)
    if ext and ext ~= '' then
        return string.format('%d:%s%s', attempts, token, ext)
    end
    return string.format('%d:%s', attempts, token)
end

-- The value of option tag (one letter) in a meta's options, as a number
-- (or true for a flag without a value), or nil.
local function meta_opt(ext, tag)
    if ext == '' then return nil end
    local v = string.match(ext, '|' .. tag .. '([^|]*)')
    if v == nil then return nil end
    if v == '' then return true end
    return tonumber(v)
end

-- The options without tag's item.
local function meta_drop(ext, tag)
    if ext == '' then return ext end
    return (string.gsub(ext, '|' .. tag .. '[^|]*', ''))
end

-- The queue's settings (config.lua): one HMGET of the named fields, as
-- numbers (nil: not set).  Without a conf key (scripts that do not get
-- it) every setting is unset.
local function settings(...)
    local names = { ... }
    if not K_CONF then return {} end
    local got = redis.call('HMGET', K_CONF, unpack(names))
    local out = {}
    for i, name in ipairs(names) do
        if got[i] then out[name] = tonumber(got[i]) end
    end
    return out
end

-- The max attempts that holds for a job: its own, else the queue's
-- setting, else the client's option (0 = unlimited).
local function max_attempts_of(ext, conf, client)
    return meta_opt(ext, 'm') or conf.max_attempts or client
end

-- A meta token that names a valid lease (not "0", not "-<last>").
local function valid_tok(t)
    return t ~= '0' and string.byte(t, 1) ~= 45 -- '-'
end

-- The meta token that ends a lease but remembers it, so the job's next
-- token is still above it (see poll.lua).
local function ended_tok(t)
    if valid_tok(t) then return '-' .. t end
    return t
end

-- Earliest due score, or nil when nothing is pending.
local function first_due()
    local f = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
    if f[2] then return tonumber(f[2]) end
    return nil
end

-- Earliest of the first due time and the first lease deadline, or nil.
local function next_event()
    local first = first_due()
    local l = redis.call('ZRANGE', K_LEASE, 0, 0, 'WITHSCORES')
    if l[2] and (not first or tonumber(l[2]) < first) then
        first = tonumber(l[2])
    end
    return first
end

-- Wake-ups.  Waiting consumers do not all sleep until the next due time
-- (each would poll for it: a thundering herd).  A waiting consumer is
-- registered in the idle set with the server time at which it will poll
-- on its own: the consumer that owns the queue's next event (a due time or
-- a lease deadline) sleeps until then, every other one until its idle cap.
-- A script that makes an earlier event (a push, a nack, a requeue) or that
-- leaves due work behind (a poll that took its fill) tells exactly one
-- registered consumer, on that consumer's own channel (CHANNEL..':'..id),
-- how many microseconds from now to poll: 0 = now.  A consumer whose
-- channel has no subscriber (it is gone) is dropped and the next one is
-- told.  A registration whose time is over by more than IDLE_SLACK ms is
-- taken for a dead or stalled consumer and ignored; a stalled or killed
-- owner thus delays its event by at most the others' idle cap.  With no
-- consumer registered the old broadcast on CHANNEL goes out instead.
local IDLE_SLACK = 250

-- The live registrations, earliest first: { id, ms, id, ms, .. } (at most
-- 6 consumers), or nil when the client passed no idle key.  A script calls
-- it before its first write: it also checks the key's type.
local function idle_peek(now)
    if not K_IDLE then return nil end
    return redis.call('ZRANGEBYSCORE', K_IDLE, now - IDLE_SLACK, '+inf',
                      'WITHSCORES', 'LIMIT', 0, 6)
end

-- Whether a live consumer other than me polls by `at` on its own.
local function idle_covered(cands, at, me)
    if not cands then return false end
    for i = 1, #cands, 2 do
        if cands[i] ~= me then return tonumber(cands[i + 1]) <= at end
    end
    return false
end

-- Tells the first live consumer of cands other than me (one that waits
-- rather than one a poll just gave jobs, when there is one) to poll at `at`
-- (server ms; now or earlier: at once) and records that as its time (a
-- consumer told to poll now leaves the set: its poll registers it again).
-- A consumer nobody listens for any more (closed, killed) is dropped and
-- the next one tried; when a whole page of cands was gone, the next page
-- is read (at most 8 pages: each gone consumer is dropped only once, so
-- the work evens out).  Returns whether one heard it.
local function idle_tell(cands, at, now_us, me)
    if not cands then return false end
    local delay = at * 1000 - now_us
    if delay < 0 then delay = 0 end
    local msg = string.format('%d', delay)
    for _ = 1, 8 do
        -- waiting consumers first, then those registered by a poll that
        -- gave them jobs (a half in the score: maybe still in a handler)
        for pass = 0, 1 do
            for i = 1, #cands, 2 do
                local id = cands[i]
                local busy = tonumber(cands[i + 1]) % 1 ~= 0
                if id ~= me and busy == (pass == 1) then
                    if redis.call(PUBLISH, CHANNEL .. ':' .. id, msg) > 0 then
                        if delay == 0 then
                            redis.call('ZREM', K_IDLE, id)
                        else
                            redis.call('ZADD', K_IDLE, 'XX',
                                       string.format('%d', at), id)
                        end
                        return true
                    end
                    redis.call('ZREM', K_IDLE, id) -- nobody listens: gone
                end
            end
        end
        if #cands < 12 then return false end
        -- a full page: there may be more; me (if listed) stays listed
        cands = idle_peek(math.floor(now_us / 1000))
    end
    return false
end

-- Before a script's first write: the consumers to tell if the change makes
-- `at` the earliest due time (before = the earliest before the change), or
-- false when it does not.
local function wake_prep(at, before, now)
    if at and (not before or at < before) then
        return idle_peek(now) or {}
    end
    return false
end

-- After the writes: tells one consumer about the new earliest due time
-- (unless one already polls by then), or broadcasts when none is
-- registered (waiters of older versions listen there).
local function wake(at, cands, now, now_us)
    if not cands then return end
    if at > now and idle_covered(cands, at, nil) then return end
    if not idle_tell(cands, at, now_us, nil) then
        redis.call(PUBLISH, CHANNEL, string.format('%d', at))
    end
end

-- Whether a done record (the score: the acking delivery's token, in server
-- microseconds) is still in its window as of now_ms; window_ms 0 = as long
-- as it is kept.
local function done_live(score, now_ms, window_ms)
    if not score then return false end
    return window_ms == 0 or
        math.floor(tonumber(score) / 1000) + window_ms > now_ms
end

-- Checks the lease tokens of ids (a list) against toks.  Returns the
-- attempts of each id (a number when the token is the current one) or an
-- error code: -16 stale token, -17 no such job; the set of positions
-- whose job a poll dead-lettered under that still valid token; the set
-- of positions that repeat an earlier id (they get -17: an id named twice
-- counts once); and each job's push options (exts[i], see parse_meta).
-- Codes match delayq.h.
local function check_tokens(ids, toks)
    local n = #ids
    local got = get_with_meta(ids) -- a payload says the job exists
    local res, dead, dup, exts = {}, {}, {}, {}
    local seen = n > 1 and {} or nil
    for i = 1, n do
        local attempts, current, d, ext = parse_meta(got[n + i])
        exts[i] = ext
        if seen and seen[ids[i]] then
            res[i] = -17
            dup[i] = true
        elseif valid_tok(current) and current == toks[i] then
            res[i] = attempts
            dead[i] = d
        elseif not got[i] then
            res[i] = -17
        else
            res[i] = -16
        end
        if seen then seen[ids[i]] = true end
    end
    return res, dead, dup, exts
end

-- Holder of a single-id check: attempts, nil and the job's push options;
-- or nil and the error code.
local function check_token(id, tok)
    local res, _, _, exts = check_tokens({ id }, { tok })
    if res[1] < 0 then return nil, res[1] end
    return res[1], nil, exts[1]
end

-- Dead-letter retention (the queue's settings dead_max: keep at most that
-- many, read as this partition's share dead_part; dead_ttl_ms: keep each
-- at most that long).  A script that adds
-- `adding` jobs to dead calls dead_trim_plan before its first write (it
-- reads dead: the oldest adding + 16 entries at most, so each call's work
-- is bounded and the set still shrinks back) and dead_trim after its
-- writes, which deletes the chosen jobs with all their data.  Only jobs
-- already dead are trimmed: one call that adds more than dead_max leaves
-- the set over by what it added until the next one.
local function dead_trim_plan(conf, adding, now)
    local max, ttl = conf.dead_part, conf.dead_ttl_ms
    if not max and not ttl then return nil end
    local have = redis.call('ZCARD', K_DEAD)
    local excess = max and have + adding - max or 0
    if excess > have then excess = have end
    local budget = adding + 16
    local old = redis.call('ZRANGE', K_DEAD, 0, budget - 1, 'WITHSCORES')
    local ids = {}
    for i = 1, #old, 2 do
        local k = (i + 1) / 2
        if k <= excess or (ttl and tonumber(old[i + 1]) < now - ttl) then
            ids[#ids + 1] = old[i]
        else
            break
        end
    end
    if #ids == 0 then return nil end
    return ids
end

local function dead_trim(ids)
    if not ids then return end
    redis.call('ZREM', K_DEAD, unpack(ids))
    redis.call('HDEL', K_JOBS, unpack(job_fields(ids)))
end

-- The retry delay the queue's backoff settings give a job's attempt-th
-- failure: backoff 1 fixed (base), 2 exponential (base * 2^(attempts-1)),
-- at most backoff_cap_ms (else DQ_DELAY_MAX); backoff_jitter percent of it is taken off at
-- random (seeded from the server's microsecond and the id: Redis seeds
-- math.random the same way in every call).  nil: the queue has no backoff
-- setting.
local function backoff_delay(conf, attempts, now_us, id)
    if conf.backoff == nil then return nil end
    local base = conf.backoff_base_ms or 1000
    local d = base
    if conf.backoff == 2 then
        local e = attempts - 1
        if e < 0 then e = 0 end
        if e > 60 then e = 60 end
        d = base * 2 ^ e
    end
    -- without a cap the doubling still stops at DQ_DELAY_MAX (the due
    -- time stays an exact integer, as every other delay's)
    local cap = conf.backoff_cap_ms or 3153600000000
    if d > cap then d = cap end
    local jit = conf.backoff_jitter or 0
    if jit > 0 and d > 0 then
        local h = now_us % 1000003
        for i = 1, #id do h = (h * 31 + string.byte(id, i)) % 1000003 end
        d = d - math.floor(d * jit / 100 * (h / 1000003))
    end
    return math.floor(d)
end

-- Where a job its holder still owns (token valid) is: 'lease', 'dead'
-- (a poll dead-lettered it after its lease ran out, under max attempts)
-- or 'due' (an expired lease a version before 0.2 put back); nil if none.
-- Reads lease, then dead, then due, stopping at the first hit.
local function held_where(id)
    if redis.call('ZSCORE', K_LEASE, id) then return 'lease' end
    if redis.call('ZSCORE', K_DEAD, id) then return 'dead' end
    if redis.call('ZSCORE', K_DUE, id) then return 'due' end
    return nil
end

-- Which index key a held_where() answer names.
local HELD_KEY = { lease = K_LEASE, dead = K_DEAD, due = K_DUE }

-- Repeating jobs.  A job pushed with a repeat rule has "|r" in its meta
-- options and its rule in rf(id): "e<every ms>;<start ms>" (runs at start
-- + k * every) or a cron rule as the client parsed it (lib/cron.c):
-- "c<tz min>;<minutes>;<hours>;<days>;<months>;<weekdays>;<a|o>;<text>",
-- each list explicit comma-separated values, a: a day needs both its day
-- of the month and its weekday listed, o: either; text is for people.
-- Nothing here parses cron text.
--
-- Civil dates (proleptic Gregorian, days since 1970-01-01), after Howard
-- Hinnant's days_from_civil / civil_from_days: integer arithmetic, exact
-- in doubles.
local function days_from_civil(y, m, d)
    if m <= 2 then y = y - 1 end
    local era = math.floor(y / 400)
    local yoe = y - era * 400
    local mp = (m + 9) % 12
    local doy = math.floor((153 * mp + 2) / 5) + d - 1
    local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
    return era * 146097 + doe - 719468
end

local function civil_from_days(z)
    z = z + 719468
    local era = math.floor(z / 146097)
    local doe = z - era * 146097
    local yoe = math.floor((doe - math.floor(doe / 1460) +
        math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
    local y = yoe + era * 400
    local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
    local mp = math.floor((5 * doy + 2) / 153)
    local d = doy - math.floor((153 * mp + 2) / 5) + 1
    local m = mp < 10 and mp + 3 or mp - 9
    if m <= 2 then y = y + 1 end
    return y, m, d
end

-- A cron rule's lists as sets and a sorted list: { tz, min = {set, list},
-- hour, dom, mon, dow, day_or }.
local function cron_rule(rule)
    local parts = {}
    for p in string.gmatch(string.sub(rule, 2) .. ';', '([^;]*);') do
        parts[#parts + 1] = p
        if #parts == 8 then break end
    end
    local function list(s)
        local set, arr = {}, {}
        for v in string.gmatch(s, '%d+') do
            v = tonumber(v)
            set[v] = true
            arr[#arr + 1] = v
        end
        return { set = set, arr = arr }
    end
    return { tz = tonumber(parts[1]), min = list(parts[2]),
             hour = list(parts[3]), dom = list(parts[4]),
             mon = list(parts[5]), dow = list(parts[6]),
             day_or = parts[7] == 'o' }
end

-- The first minute (as server epoch ms) that the cron rule r matches at
-- or after ms t (strictly after when after is true), or nil when none
-- within 50 years (the client refuses rules that never fire).  The search
-- steps by month, then day, then through the hour and minute lists: at
-- most 600 months and 31 days each, never minute by minute.
local function cron_next(r, t, after)
    local tzms = r.tz * 60000
    local m0 = math.floor((t + tzms) / 60000) -- local minute at or before t
    if after or m0 * 60000 < t + tzms then m0 = m0 + 1 end
    local day0 = math.floor(m0 / 1440)
    local mod0 = m0 - day0 * 1440
    local y, mo, d = civil_from_days(day0)
    for _ = 1, 600 do
        if r.mon.set[mo] then
            local ny, nmo = y, mo + 1
            if nmo > 12 then ny, nmo = y + 1, 1 end
            local first = days_from_civil(y, mo, 1)
            local ndays = days_from_civil(ny, nmo, 1) - first
            for dd = d, ndays do
                local day = first + dd - 1
                local wd = (day + 4) % 7 -- 1970-01-01 was a Thursday
                local a, b = r.dom.set[dd], r.dow.set[wd]
                local ok
                if r.day_or then ok = a or b else ok = a and b end
                if ok then
                    local from = day == day0 and mod0 or 0
                    for _, h in ipairs(r.hour.arr) do
                        for _, mi in ipairs(r.min.arr) do
                            if h * 60 + mi >= from then
                                return (day * 1440 + h * 60 + mi) * 60000 - tzms
                            end
                        end
                    end
                end
            end
        end
        d = 1
        mo = mo + 1
        if mo > 12 then y, mo = y + 1, 1 end
    end
    return nil
end

-- A repeating job's first run: "e.." starts at t (the push's time), a cron
-- rule at its first match at or after t.  Returns the time and the rule
-- to store (an every rule gains its start), or nil if it never fires.
local function repeat_first(rule, t)
    if string.byte(rule, 1) == 101 then -- 'e'
        return t, rule .. ';' .. string.format('%d', t)
    end
    local at = cron_next(cron_rule(rule), t, false)
    return at, rule
end

-- The run after an ack at now: the first slot strictly after now.  nil
-- for a rule it cannot read.
local function repeat_next(rule, now)
    if string.byte(rule, 1) == 101 then -- 'e'
        local every, start = string.match(rule, '^e(%d+);(%-?%d+)$')
        every, start = tonumber(every), tonumber(start)
        if not every or every <= 0 then return nil end
        local k = math.floor((now - start) / every) + 1
        if k < 1 then k = 1 end
        return start + k * every
    end
    if string.byte(rule, 1) == 99 then -- 'c'
        return cron_next(cron_rule(rule), now, true)
    end
    return nil
end
