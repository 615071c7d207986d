-- include/tokens.lua: lease tokens of the jobs an ack, nack or extend
-- names, where a held job is, and done records.
--- @include "include/keys"
--- @include "include/meta"
--- @include "include/compact/keys"

-- Whether a done record (the score: the acking delivery's token, in server
-- microseconds) is still in its window as of now_ms; window_ms 0 = as long
-- as it is kept.
local function done_live(score, now_ms, window_ms)
    if not score then return false end
    return window_ms == 0 or
        math.floor(tonumber(score) / 1000) + window_ms > now_ms
end

-- A done record answers for the incarnation of its id that was acked, and
-- for no later one: a push that creates the id again (a replace, or a keep
-- push once the record no longer applies) and a cancel mark it "retired"
-- by adding a half to its score (tokens are whole numbers, and a half is
-- exact below 2^52).  A retired record still tells a retried ack that it
-- landed (its token: the score rounded down), and still orders and
-- expires by its time, but never refuses a push (a binding record: live
-- and whole).  Inlined where used: each function of a script is made
-- anew on every call.
-- Checks the lease tokens of ids (a list) against toks.  Returns the
-- attempts of each id (a number when the token is the current one) or an
-- error code: -16 stale token, -17 no such job; the set of positions
-- whose job a poll dead-lettered under that still valid token; the set
-- of positions that repeat an earlier id (they get -17: an id named twice
-- counts once); each job's push options (exts[i], see parse_meta); and
-- whether a poll waits for a slot (include/fair.lua).
-- Codes match delayq.h.
local function check_tokens(ids, toks)
    local n = #ids
    -- Metas first: payloads read into a script are slow (one HMGET of 100
    -- payloads of 1 MiB took 2.2 s in Redis 7.0), so an ack of big jobs
    -- reads none; only the payloads of jobs whose token does not match are
    -- read, to tell "stale token" (the job exists) from "no such job".
    -- (and "\0full", set while a poll waits for a slot, include/fair.lua:
    -- one more field of the same HMGET)
    local fields = mfs(ids)
    fields[n + 1] = '\0full'
    local metas = redis.call('HMGET', K_JOBS, unpack(fields))
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
    return res, dead, dup, exts, metas[n + 1] ~= false
end

-- Holder of a single-id check: attempts, nil, the job's push options and
-- whether a poll waits for a slot; or nil and the error code.
local function check_token(id, tok)
    local res, _, _, exts, full = check_tokens({ id }, { tok })
    if res[1] < 0 then return nil, res[1] end
    return res[1], nil, exts[1], full
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
