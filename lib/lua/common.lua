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
-- '+' keeps the counters (KEYS[9]), then '!' asks for sharded pub/sub:
-- in a Redis Cluster a plain PUBLISH is broadcast to every node, SPUBLISH
-- reaches only the subscribers on the owner of the channel's slot, which
-- is the queue's own slot (same hash tag).
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
-- pay for Redis's listpack inserts (bench/HISTORY.md, R1).
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

-- HSET or ZADD of many entries (args: field, value, .. or score, member,
-- ..) into key.  A new or small hash or sorted set is a listpack, and
-- every entry added to one scans it: a call that adds many entries to a
-- small one (a poll's claims into an emptied jobs hash or lease set, a
-- batch into an empty queue) pays time quadratic in the entries until
-- Redis converts the key (zset-max-listpack-entries: 128 by default;
-- hash-max-listpack-entries: 512).  An entry longer than any id first
-- (over hash- and zset-max-listpack-value) makes Redis convert it at
-- once; it is removed right after and never names a job (ids are at
-- most 128 bytes).  Only with more than over entries (128 unless told):
-- a sorted set that large is converted anyway; a hash of 129 to 512
-- entries would have stayed a listpack, a few kilobytes that the
-- quadratic scan of so many entries is not worth.
local function add_many(cmd, key, args, over)
    if #args <= 2 * (over or 128) then
        redis.call(cmd, key, unpack(args))
        return
    end
    local big = string.rep('~', 129) -- made here: every call runs the prelude
    if cmd == 'HSET' then
        redis.call('HSET', key, big, '', unpack(args))
        redis.call('HDEL', key, big)
    else
        redis.call('ZADD', key, '0', big, unpack(args))
        redis.call('ZREM', key, big)
    end
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

-- The compact layout (the queue setting 'layout' = 1 or 2, config.lua; the
-- mover, c_move, moves jobs into it: idle polls run it in both, poll.lua,
-- and every push in 2, push.lua).  A pending job costs a ZSET entry in
-- due (~110 B) and a native hash entry in jobs (~56 B + its strings); a
-- huge backlog of small payloads keeps most of its pending jobs in small
-- hashes that Redis encodes as listpacks (a few bytes per entry) instead:
--   <prefix>c:<b>  HASH  bucket b: id -> <shard code><due><payload>, at
--                        most C_CAP entries (or any number that share one
--                        due time: a "uniform" bucket); fields and values
--                        of at most C_VMAX bytes (hash-max-listpack-value).
--                        The value's first 3 bytes name the id's shard
--                        (c_code: a poll deletes the shard entries of the
--                        jobs it claims without hashing their ids), the
--                        next 8 its due ms (0..2^48-1, 6 bits a byte, as
--                        the code; c_val), the rest is the payload
--   <prefix>cb     ZSET  b -> the earliest due time in bucket b.  Buckets
--                        hold disjoint time ranges: every job of a bucket
--                        is due before the next bucket's score, so the
--                        first bucket holds the earliest compact jobs
--   <prefix>s:<c>  HASH  id -> due ms (decimal), one of 2^18 shards by a
--                        hash of the id (listpacks up to ~30 million jobs
--                        per queue or partition): finds a job's bucket by
--                        its id.  c: the shard's number h as 3 bytes of 6
--                        bits, each 48 + a digit ('0'..'o'), most
--                        significant first
--   <prefix>cm     HASH  n: compact jobs, next: last bucket number
--   <prefix>mv     STRING where the mover goes on (a due score); it
--                        expires soon (a waiting consumer that moves
--                        comes back sooner): a lost one only starts it
--                        over, and an emptied queue keeps no key
-- Only jobs never delivered and pushed without options are compact (a
-- meta goes with the native layout); a poll moves the jobs it claims back
-- to the native keys, so leases, acks, nacks and dead jobs never see the
-- compact keys.  Every script that reads pending jobs reads both layouts,
-- whatever the setting says: a queue switched back keeps working while
-- its compact jobs drain.  The keys are named from KEYS[1] (all under the
-- queue's hash tag), not passed: their number changes with the backlog.
-- What a default-layout queue runs of this is reads with the commands it
-- needs anyway (HMGET, ZRANGE, ZRANGEBYSCORE, ZCARD): an ACL user needs
-- more commands only for the compact layout (README).
local K_PFX = string.sub(K_DUE, 1, -4)

-- In a Redis Cluster a script may touch keys it did not declare, but
-- while their slot migrates some of them are on one node and some on the
-- other: on the source a key that is not there raises "non local key",
-- half-way through a call; on the target (a call sent there with ASKING)
-- a key not moved yet just looks absent.  c_stable() probes once per
-- call, before the first undeclared key is touched and before any write,
-- with a two-key command naming a key that never exists: Redis refuses a
-- multi-key command with a missing key in a migrating or importing slot
-- on either node, so the call answers TRYAGAIN instead (the clients retry
-- that until the slot is settled, which for a compact queue is when the
-- migration ends).  A user the ACL refuses EXISTS gets the one-key probe,
-- which sees the source side only (README).  Outside a cluster (plain
-- PUBLISH) there is nothing to probe.
local C_STABLE = false
local function c_stable()
    if C_STABLE or PUBLISH ~= 'SPUBLISH' then return end
    local probe = K_PFX .. 'probe'
    local r = redis.pcall('EXISTS', probe, K_DUE)
    if type(r) == 'table' and r.err and string.find(r.err, 'NOPERM', 1, true)
    then
        r = redis.pcall('ZCARD', probe)
    end
    if type(r) == 'table' and r.err then
        error(redis.error_reply('TRYAGAIN delayq: the slot of ' .. K_PFX ..
                                ' is migrating'))
    end
    C_STABLE = true
end

-- The one-key probe alone (in a cluster): a key that never exists raises
-- "non local key" on the source of a migrating slot (TRYAGAIN then, as
-- c_stable); on its target it just looks absent, as the index of a queue
-- without compact jobs is.
local function c_probe1()
    if PUBLISH ~= 'SPUBLISH' then return end
    local r = redis.pcall('ZCARD', K_PFX .. 'probe')
    if type(r) == 'table' and r.err then
        error(redis.error_reply('TRYAGAIN delayq: the slot of ' .. K_PFX ..
                                ' is migrating'))
    end
end

-- Whether the queue has compact jobs: the flag "compact" in its conf hash,
-- which c_put sets with the first compact job and c_gone deletes with the
-- last, for the scripts that get that key (push, poll, nack); the others
-- look for the compact index itself, after c_probe1.  A script touches the
-- other compact keys only when there are compact jobs (or when the mover
-- moves jobs in).
local C_FLAG = nil
local function c_flagged()
    if C_FLAG == nil then
        if K_CONF then
            C_FLAG = redis.call('HMGET', K_CONF, 'compact')[1] ~= false
        else
            c_probe1()
            C_FLAG = redis.call('ZCARD', K_PFX .. 'cb') > 0
        end
    end
    return C_FLAG
end


-- The shard code of a compact job's id (see c_lib below): the id's bytes
-- as a polynomial in 31, mod 2^18, as 3 bytes of 6 bits.  It runs for
-- every compact job the mover moves, so it takes fourteen bytes per
-- string.byte call, seven per step (Horner's rule, then h * 31^7 + that,
-- mod 2^18: below 2^53, exact), and makes the code with one string.char
-- (string.format's %d alone costs more).
local function c_code(id)
    local h, n, i = 0, #id, 1
    local byte = string.byte
    while i + 13 <= n do -- 14 bytes (a generated id) with one call
        local a, b, c, d, e, f, g, a2, b2, c2, d2, e2, f2, g2 =
            byte(id, i, i + 13)
        h = (h * 27512614111 +
             (((((a * 31 + b) * 31 + c) * 31 + d) * 31 + e) * 31 + f) * 31 +
             g) % 262144
        h = (h * 27512614111 +
             (((((a2 * 31 + b2) * 31 + c2) * 31 + d2) * 31 + e2) * 31 + f2) *
             31 + g2) % 262144
        i = i + 14
    end
    while i <= n do
        h = (h * 31 + byte(id, i)) % 262144
        i = i + 1
    end
    local c = h % 64
    local t = (h - c) / 64
    local b = t % 64
    return string.char(48 + (t - b) / 64, 48 + b, 48 + c)
end

-- Shard keys: K_S .. a shard code; c_skey(id) is that of id's code.
local K_S = K_PFX .. 's:'
local function c_skey(id) return K_S .. c_code(id) end

-- Whether id is a compact job (its shard names it).
local function c_has(id)
    c_stable()
    return redis.call('HMGET', c_skey(id), id)[1] ~= false
end

-- The compact layout's functions and keys, made only by the calls that
-- touch it (c_lib()): a script body makes each of its functions anew
-- on every call, and a queue in the default layout should not pay for
-- them.  Fields: the functions below without their "c_".
local function c_lib()
    c_stable()
    local K_CB, K_CM, K_MV = K_PFX .. 'cb', K_PFX .. 'cm', K_PFX .. 'mv'
    local K_CONFN = K_PFX .. 'conf'
    local C_CAP, C_HALF, C_VMAX = 120, 64, 64

    local function c_bkey(b) return K_PFX .. 'c:' .. b end

    -- A bucket value -> due (number), payload, shard code.  The due time's
    -- bytes are 48 + a digit each: Horner's rule over the bytes, less
    -- C_D0 (48 times 64^7 + .. + 64 + 1), exact below 2^53.
    local C_D0 = 214457125112880
    local function c_val(v)
        local a, b, c, d, e, f, g, h = string.byte(v, 4, 11)
        return ((((((a * 64 + b) * 64 + c) * 64 + d) * 64 + e) * 64 + f) *
                64 + g) * 64 + h - C_D0, string.sub(v, 12),
            string.sub(v, 1, 3)
    end

    -- A bucket value of shard code, due (0..2^48-1) and payload.
    local function c_enc(code, due, payload)
        local d, d8, d7, d6, d5, d4, d3, d2 = due
        d8 = d % 64; d = (d - d8) / 64
        d7 = d % 64; d = (d - d7) / 64
        d6 = d % 64; d = (d - d6) / 64
        d5 = d % 64; d = (d - d5) / 64
        d4 = d % 64; d = (d - d4) / 64
        d3 = d % 64; d = (d - d3) / 64
        d2 = d % 64; d = (d - d2) / 64
        return code .. string.char(48 + d, 48 + d2, 48 + d3, 48 + d4,
                                   48 + d5, 48 + d6, 48 + d7, 48 + d8) ..
            payload
    end

    -- The bucket that holds (or would hold) due time d (a string or number):
    -- the one with the greatest score <= d, and that score (a number); nil
    -- when d is below them all.
    local function c_bucket_of(d)
        if type(d) == 'number' then d = string.format('%d', d) end
        local r = redis.call('ZREVRANGEBYSCORE', K_CB, d, '-inf', 'WITHSCORES',
                             'LIMIT', 0, 1)
        if not r[1] then return nil end
        return r[1], tonumber(r[2])
    end

    -- A compact job by id: due (number), payload, bucket; or nil.
    local function c_find(id)
        local d = redis.call('HMGET', c_skey(id), id)[1]
        if not d then return nil end
        local b, score = c_bucket_of(d)
        if not b then return nil end
        local v = redis.call('HMGET', c_bkey(b), id)[1]
        if not v then return nil end
        local due, payload = c_val(v)
        return due, payload, b, score
    end

    -- a < b in byte order (a sorted set's order of equal scores): Lua's <
    -- follows the server's collation, which need not be bytewise
    local function c_id_lt(a, b)
        for i = 1, math.min(#a, #b) do
            local x, y = string.byte(a, i), string.byte(b, i)
            if x ~= y then return x < y end
        end
        return #a < #b
    end

    local function c_order(x, y)
        if x[2] ~= y[2] then return x[2] < y[2] end
        return c_id_lt(x[1], y[1])
    end

    -- Entries e ({ {id, due, ..}, .. }) sorted by (due, id), as a new list.
    -- Every poll that claims compact jobs sorts the buckets it reads, so
    -- the sort compares numbers, not entries through a Lua function: each
    -- key is due * m + the entry's place (m a power of two above the
    -- count; exact below 2^53, else the plain sort), and only runs of one
    -- due time are sorted again, by id.
    local function c_sort(e)
        local n, keys, m = #e, {}, 1
        while m < n do m = m * 2 end
        local lim = 9007199254740992 / m - 1
        for i = 1, n do
            local d = e[i][2]
            if d >= lim or d <= -lim then
                table.sort(e, c_order)
                return e
            end
            keys[i] = d * m + (i - 1)
        end
        table.sort(keys)
        local s, tie = {}, false
        for i = 1, n do
            s[i] = e[keys[i] % m + 1]
            if i > 1 and s[i][2] == s[i - 1][2] then tie = true end
        end
        if not tie then return s end
        local function by_id(x, y) return c_id_lt(x[1], y[1]) end
        local i = 1
        while i <= n do
            local j = i
            while j < n and s[j + 1][2] == s[i][2] do j = j + 1 end
            if j > i then
                local run = {}
                for k = i, j do run[#run + 1] = s[k] end
                table.sort(run, by_id)
                for k = i, j do s[k] = run[k - i + 1] end
            end
            i = j + 1
        end
        return s
    end

    -- Columns { ids, dues, payloads, shard codes } as rows
    -- { {id, due, payload, shard code}, .. }.
    local function c_rows(cols)
        local ids, dues, pays, codes = cols[1], cols[2], cols[3], cols[4]
        local e = {}
        for k = 1, #ids do e[k] = { ids[k], dues[k], pays[k], codes[k] } end
        return e
    end

    -- A bucket's entries as columns { ids, dues, payloads, shard codes }
    -- (entry k is ids[k], dues[k], ..), sorted by (due, id); flat is an
    -- HGETALL answer.  Columns, not a table per entry: a poll parses up to
    -- a thousand entries per call.  A listpack keeps its fields in the
    -- order they were written, and the mover writes buckets in due order
    -- (a new bucket sorted, later jobs mostly after the earlier ones), so
    -- most buckets come back sorted already: the parse checks that and
    -- only a bucket out of order is sorted (as rows, c_sort).
    local function c_cols(flat)
        local ids, dues, pays, codes = {}, {}, {}, {}
        local up, prev = true, -math.huge
        for i = 2, #flat, 2 do
            local k = i / 2
            local due, payload, code = c_val(flat[i])
            if due <= prev then up = false end
            prev = due
            ids[k], dues[k], pays[k], codes[k] =
                flat[i - 1], due, payload, code
        end
        local cols = { ids, dues, pays, codes }
        if not up then
            for k, x in ipairs(c_sort(c_rows(cols))) do
                ids[k], dues[k], pays[k], codes[k] = x[1], x[2], x[3], x[4]
            end
        end
        return cols
    end

    -- A bucket's entries as rows, sorted by (due, id).
    local function c_entries(flat) return c_rows(c_cols(flat)) end

    -- The HSET arguments of entries { {id, due, payload, shard code}, .. }
    -- in a bucket.
    local function c_fields(list)
        local f = {}
        for _, x in ipairs(list) do
            f[#f + 1] = x[1]
            f[#f + 1] = c_enc(x[4], x[2], x[3])
        end
        return f
    end

    -- A bucket that held more than C_CAP jobs (a uniform one: one due
    -- time) may have passed hash-max-listpack-entries (512 by default),
    -- and Redis then made it a native hash, which it never turns back.
    -- Once it holds at most C_CAP it is an ordinary bucket (c_put adds
    -- jobs of other due times to it), so it is written anew, as a
    -- listpack: one read and one write of at most C_CAP entries, once each
    -- time a bucket shrinks past C_CAP.
    local function c_repack(k)
        local all = redis.call('HGETALL', k)
        if #all == 0 then return end
        redis.call('DEL', k)
        redis.call('HSET', k, unpack(all))
    end

    -- After gone jobs left bucket b: its score becomes its earliest due
    -- time again (an empty bucket leaves cb; a uniform one keeps its only
    -- due time).  Only a bucket that lost a job due at its score (its
    -- earliest) needs it: otherwise that job is still there, and so is the
    -- score.  A uniform bucket loses only such jobs, so it is repacked here
    -- when it shrinks past C_CAP.
    local function c_fix(b, gone)
        local k = c_bkey(b)
        local n = redis.call('HLEN', k)
        if n == 0 then
            redis.call('ZREM', K_CB, b)
            return
        end
        if n > C_CAP then return end
        if n + gone > C_CAP then c_repack(k) end
        local m
        for _, v in ipairs(redis.call('HVALS', k)) do
            local d = c_val(v)
            if not m or d < m then m = d end
        end
        redis.call('ZADD', K_CB, string.format('%d', m), b)
    end

    -- Counts k compact jobs gone; the last one takes cm with it (no bucket is
    -- left, so bucket numbers may start over).
    local function c_gone(k)
        if redis.call('HINCRBY', K_CM, 'n', -k) <= 0 then
            redis.call('HDEL', K_CM, 'n', 'next')
            redis.call('HDEL', K_CONFN, 'compact')
        end
    end

    -- Deletes compact jobs: items { {id, due[, bucket, its score]}, .. },
    -- each in the store.  Bounded: per touched bucket one HDEL, and a read
    -- of at most C_CAP values when its earliest job went.
    local function c_remove(items)
        if #items == 0 then return end
        local byb, order, earliest = {}, {}, {}
        for _, it in ipairs(items) do
            local b, score = it[3], it[4]
            if not b then b, score = c_bucket_of(it[2]) end
            if not byb[b] then
                byb[b] = {}
                order[#order + 1] = b
            end
            local l = byb[b]
            l[#l + 1] = it[1]
            if it[2] == score then earliest[b] = true end
        end
        for _, b in ipairs(order) do
            redis.call('HDEL', c_bkey(b), unpack(byb[b]))
            if earliest[b] then c_fix(b, #byb[b]) end
        end
        for _, it in ipairs(items) do
            redis.call('HDEL', c_skey(it[1]), it[1])
        end
        c_gone(#items)
    end

    -- Cuts entries e (sorted) into pieces of at most C_HALF jobs where it
    -- can: a run of jobs due at one time is never cut (a run longer than
    -- C_CAP makes a uniform piece of its own).
    local function c_pieces(e)
        local pieces, cur, i = {}, {}, 1
        while i <= #e do
            local j = i
            while j < #e and e[j + 1][2] == e[i][2] do j = j + 1 end
            local run = j - i + 1
            if #cur > 0 and (#cur >= C_HALF or #cur + run > C_CAP) then
                pieces[#pieces + 1] = cur
                cur = {}
            end
            for k = i, j do cur[#cur + 1] = e[k] end
            i = j + 1
        end
        if #cur > 0 then pieces[#pieces + 1] = cur end
        return pieces
    end

    -- A new bucket holding piece (sorted); its score is its first due time.
    local function c_new(piece)
        local nb = tostring(redis.call('HINCRBY', K_CM, 'next', 1))
        redis.call('HSET', c_bkey(nb), unpack(c_fields(piece)))
        redis.call('ZADD', K_CB, string.format('%d', piece[1][2]), nb)
    end

    -- Whether a job fits the compact layout: an id and a value (11 bytes
    -- and the payload) of at most C_VMAX bytes each (longer ones stay
    -- native; Redis would turn the whole bucket into a native hash), and a
    -- due time the value holds (0..2^48-1: every time a push can set).
    local function c_fits(id, payload, due)
        return #id <= C_VMAX and #payload + 11 <= C_VMAX and due >= 0 and
            due < 281474976710656
    end

    -- Stores jobs in the compact layout: items { {id, due, payload}, .. },
    -- none of them anywhere yet.  Each job goes to the bucket of its due
    -- time (jobs below every bucket to new ones), with one HSET per
    -- bucket.  A bucket that would pass C_CAP is rebuilt from its entries
    -- and the new ones, cut by c_pieces: the first piece stays (fields
    -- that leave are deleted before any is added, and a fresh hash gets
    -- at most C_HALF, so no listpack ever passes 128 entries and becomes
    -- a native hash, which Redis never turns back); a uniform bucket
    -- takes only jobs of its own due time.  Shards keep due times, not
    -- bucket numbers: none changes when a bucket is cut.  Bounded: per
    -- touched bucket one lookup and one HLEN, and a read of at most C_CAP
    -- entries when it is rebuilt; per job one shard HSET.  Each item gets
    -- its shard code (as its 4th field, as entries have it).
    local function c_put(items)
        if #items == 0 then return end
        for _, it in ipairs(items) do it[4] = c_code(it[1]) end
        table.sort(items, function(x, y) return x[2] > y[2] end)
        local groups, order = {}, {}
        local cur_b, cur_s
        for _, it in ipairs(items) do
            if not cur_b or it[2] < cur_s then
                cur_b, cur_s = c_bucket_of(it[2])
                if not cur_b then cur_b, cur_s = false, -math.huge end
            end
            local key = cur_b or '' -- '': below every bucket
            local g = groups[key]
            if not g then
                g = { b = cur_b, s = cur_s }
                groups[key] = g
                order[#order + 1] = key
            end
            g[#g + 1] = it
        end
        for _, key in ipairs(order) do
            local g = groups[key]
            -- the group's jobs in ascending order
            local e = {}
            for i = #g, 1, -1 do e[#e + 1] = g[i] end
            if not g.b then
                for _, piece in ipairs(c_pieces(e)) do c_new(piece) end
            else
                local k = c_bkey(g.b)
                local had = redis.call('HLEN', k)
                if had > C_CAP then
                    local same, later = {}, {}
                    for _, it in ipairs(e) do
                        if it[2] == g.s then same[#same + 1] = it
                        else later[#later + 1] = it end
                    end
                    if #same > 0 then
                        redis.call('HSET', k, unpack(c_fields(same)))
                    end
                    for _, piece in ipairs(c_pieces(later)) do c_new(piece) end
                elseif had + #e <= C_CAP then
                    redis.call('HSET', k, unpack(c_fields(e)))
                else
                    local old = c_entries(redis.call('HGETALL', k))
                    local was = {}
                    for _, x in ipairs(old) do was[x[1]] = true end
                    for _, it in ipairs(e) do old[#old + 1] = it end
                    old = c_sort(old)
                    local pieces = c_pieces(old)
                    local keep, add, drop = {}, {}, {}
                    for _, x in ipairs(pieces[1]) do
                        keep[x[1]] = true
                        if not was[x[1]] then add[#add + 1] = x end
                    end
                    for id in pairs(was) do
                        if not keep[id] then drop[#drop + 1] = id end
                    end
                    if #drop > 0 then redis.call('HDEL', k, unpack(drop)) end
                    if #add > 0 then
                        redis.call('HSET', k, unpack(c_fields(add)))
                    end
                    for p = 2, #pieces do c_new(pieces[p]) end
                end
            end
        end
        for _, it in ipairs(items) do
            redis.call('HSET', K_S .. it[4], it[1],
                       string.format('%d', it[2]))
        end
        if redis.call('HINCRBY', K_CM, 'n', #items) == #items then
            -- the first compact job: the flag that tells the scripts
            -- reading the settings anyway to look at the compact keys
            redis.call('HSET', K_CONFN, 'compact', 1)
        end
    end

    -- The mover (idle polls, or pushes in layout 2): up to budget native
    -- pending jobs that fit (never delivered, no options, small) go to
    -- compact buckets, farthest due first from cursor (a ZREVRANGEBYSCORE
    -- max, read from K_MV before the call's first write) down; the next
    -- call goes on below where this one stopped, one that reaches the
    -- bottom starts over at the top (and deletes K_MV).  Moved in due
    -- order, the jobs of one call share buckets: one HSET per bucket, not
    -- per job.  Returns how many jobs it moved, and whether jobs it did not
    -- read remain (another call has work).
    local function c_move(cursor, budget)
        local page = redis.call('ZREVRANGEBYSCORE', K_DUE, cursor, '-inf',
                                'WITHSCORES', 'LIMIT', 0, budget)
        local m = #page / 2
        if m < budget and cursor ~= '+inf' then
            -- the bottom: start over at the top for the rest (jobs pushed
            -- above the cursor since it passed)
            local top = redis.call('ZREVRANGEBYSCORE', K_DUE, '+inf',
                                   '(' .. cursor:gsub('^%(', ''),
                                   'WITHSCORES', 'LIMIT', 0, budget - m)
            for _, v in ipairs(top) do page[#page + 1] = v end
            m = #page / 2
            if m < budget then redis.call('DEL', K_MV) end
        end
        local more = m == budget
        if more then
            redis.call('SET', K_MV, '(' .. page[#page], 'PX', 1500)
        end
        if m == 0 then return 0, false end
        local ids = {}
        for i = 1, #page, 2 do ids[#ids + 1] = page[i] end
        local got = get_with_meta(ids)
        local items, moved = {}, {}
        for j, id in ipairs(ids) do
            if got[j] and not got[m + j] and
                c_fits(id, got[j], tonumber(page[2 * j])) then
                items[#items + 1] = { id, tonumber(page[2 * j]), got[j] }
                moved[#moved + 1] = id
            end
        end
        if #moved == 0 then return 0, more end
        redis.call('ZREM', K_DUE, unpack(moved))
        redis.call('HDEL', K_JOBS, unpack(moved))
        c_put(items)
        return #moved, more
    end

    -- Compact jobs due by now, earliest first, at most need of them, as
    -- columns: their ids, due times and payloads; the buckets read, each
    -- as { b, its columns (c_cols), uniform size or nil }; for each job
    -- its bucket's place in that list; and for each bucket read how many
    -- of the jobs are its (c_taken's counts of a poll that takes them
    -- all).  Bounded: buckets are read in time order until need jobs are
    -- found, so at most need + C_CAP entries.
    local function c_due(now, need)
        local ids, dues, pays, read, rof, cnt = {}, {}, {}, {}, {}, {}
        local from, got = '-inf', 0
        local upto = string.format('%d', now)
        while got < need do
            local bs = redis.call('ZRANGEBYSCORE', K_CB, from, upto,
                                  'WITHSCORES',
                                  'LIMIT', 0, 8)
            for i = 1, #bs, 2 do
                local b, k = bs[i], c_bkey(bs[i])
                local n = redis.call('HLEN', k)
                local cols
                if n > C_CAP then
                    -- uniform: every job is due at the score; any of them
                    cols = c_cols(redis.call('HRANDFIELD', k, need - got,
                                             'WITHVALUES'))
                else
                    cols = c_cols(redis.call('HGETALL', k))
                end
                local r, had = #read + 1, got
                read[r] = { b, cols, n > C_CAP and n or nil }
                local bid, bdue, bpay = cols[1], cols[2], cols[3]
                for x = 1, #bid do
                    if bdue[x] > now or got >= need then break end
                    got = got + 1
                    ids[got], dues[got], pays[got], rof[got] =
                        bid[x], bdue[x], bpay[x], r
                end
                if got > had then cnt[r] = got - had end
                from = '(' .. bs[i + 1]
                if got >= need then break end
            end
            if #bs < 16 then break end
        end
        return ids, dues, pays, read, rof, cnt
    end

    -- After a poll took the first taken[r] jobs (in order) of each bucket of
    -- read (c_due): deletes them, their shard entries (by the codes read:
    -- no id is hashed) and fixes the buckets' scores, from what was read
    -- (no read again).  A bucket taken whole goes with one DEL: an HDEL of
    -- each field scans the listpack once per field.
    local function c_taken(read, taken)
        local total = 0
        for r, t in pairs(taken) do
            local b, cols, uniform = read[r][1], read[r][2], read[r][3]
            local bid, codes = cols[1], cols[4]
            if t == (uniform or #bid) then
                redis.call('DEL', c_bkey(b))
                redis.call('ZREM', K_CB, b)
            else
                redis.call('HDEL', c_bkey(b), unpack(bid, 1, t))
                if not uniform then
                    redis.call('ZADD', K_CB,
                               string.format('%d', cols[2][t + 1]), b)
                elseif uniform - t <= C_CAP then
                    c_repack(c_bkey(b)) -- (c_fix: its score stays)
                end
            end
            for k = 1, t do redis.call('HDEL', K_S .. codes[k], bid[k]) end
            total = total + t
        end
        if total > 0 then c_gone(total) end
    end

    -- How many compact jobs are due after lo and at or before hi (numbers;
    -- lo may be -math.huge, hi math.huge).  Buckets wholly inside count by
    -- HLEN; the one that reaches below lo and the last one are read.
    local function c_count(lo, hi)
        local n = 0
        local function count_in(b)
            local k = c_bkey(b)
            local len = redis.call('HLEN', k)
            if len > C_CAP then
                local s = tonumber(redis.call('ZSCORE', K_CB, b))
                return (s > lo and s <= hi) and len or 0
            end
            local c = 0
            for _, v in ipairs(redis.call('HVALS', k)) do
                local d = c_val(v)
                if d > lo and d <= hi then c = c + 1 end
            end
            return c
        end
        local los = lo == -math.huge and '-inf' or string.format('%d', lo)
        local his = hi == math.huge and '+inf' or string.format('%d', hi)
        if lo ~= -math.huge then
            local b = c_bucket_of(los)
            if b then n = n + count_in(b) end
        end
        local from = lo == -math.huge and '-inf' or '(' .. los
        local last, last_len
        while true do
            local bs = redis.call('ZRANGEBYSCORE', K_CB, from, his,
                                  'WITHSCORES',
                                  'LIMIT', 0, 256)
            for i = 1, #bs, 2 do
                last = bs[i]
                last_len = redis.call('HLEN', c_bkey(last))
                n = n + last_len
            end
            if #bs < 512 then break end
            from = '(' .. bs[#bs]
        end
        -- the last bucket may hold jobs due after hi
        if last and hi ~= math.huge then n = n - last_len + count_in(last) end
        return n
    end
    return { MV = K_MV, id_lt = c_id_lt, bkey = c_bkey, skey = c_skey,
        has = c_has, val = c_val, bucket_of = c_bucket_of, find = c_find,
        entries = c_entries, fields = c_fields, gone = c_gone,
        remove = c_remove, fits = c_fits, put = c_put, move = c_move,
        due = c_due, taken = c_taken, count = c_count }
end

-- Earliest due score, or nil when nothing is pending (either layout), and
-- whether the queue has compact jobs.  A caller that read the settings
-- passes cany: whether they have the flag "compact" (c_flagged); without
-- it the flag is read.
local function first_due(cany)
    local f = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
    local a = f[2] and tonumber(f[2])
    if cany == nil then cany = c_flagged() end
    if not cany then return a, false end
    c_stable()
    local c = redis.call('ZRANGE', K_PFX .. 'cb', 0, 0, 'WITHSCORES')
    if c[2] and (not a or tonumber(c[2]) < a) then
        return tonumber(c[2]), true
    end
    return a, c[2] ~= nil
end

-- Earliest of the first due time and the first lease deadline, or nil
-- (cany: as for first_due).
local function next_event(cany)
    local first = first_due(cany)
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
    -- Metas first: payloads read into a script are slow (one HMGET of 100
    -- payloads of 1 MiB took 2.2 s in Redis 7.0), so an ack of big jobs
    -- reads none; only the payloads of jobs whose token does not match are
    -- read, to tell "stale token" (the job exists) from "no such job".
    local metas = redis.call('HMGET', K_JOBS, unpack(mfs(ids)))
    local res, dead, dup, exts = {}, {}, {}, {}
    local seen = n > 1 and {} or nil
    local look = {}
    for i = 1, n do
        local attempts, current, d, ext = parse_meta(metas[i])
        exts[i] = ext
        if seen and seen[ids[i]] then
            res[i] = -17
            dup[i] = true
        elseif valid_tok(current) and current == toks[i] then
            res[i] = attempts
            dead[i] = d
        else
            look[#look + 1] = i
        end
        if seen then seen[ids[i]] = true end
    end
    if #look > 0 then
        local lids = {}
        for k, i in ipairs(look) do lids[k] = ids[i] end
        local got = redis.call('HMGET', K_JOBS, unpack(lids))
        for k, i in ipairs(look) do
            if got[k] then
                res[i] = -16
            else
                -- a compact job exists but was never delivered: no token
                -- holds
                res[i] = (c_flagged() and c_has(ids[i])) and -16 or -17
            end
        end
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
