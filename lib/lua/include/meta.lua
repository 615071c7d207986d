-- include/meta.lua: a job's fields in the jobs hash, its meta
-- ("[d]attempts:token|options") and its lease token.
--- @include "include/keys"

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

-- Every field of the jobs ids (payload, meta, reason, repeat rule,
-- follow-up): one HDEL of them deletes all their data.  A caller that read
-- the jobs' metas passes repeats, the set of those ids that repeat ("|r"),
-- and debounced, of those pushed with DQ_PUSH_DEBOUNCE ("|b"): only those
-- get their rule's or follow-up's field named, since each name that misses
-- still costs a lookup in what is usually a very big hash.
local function job_fields(ids, repeats, debounced)
    local n, out = #ids, {}
    if not repeats then
        for i, id in ipairs(ids) do
            out[i], out[n + i], out[2 * n + i], out[3 * n + i] =
                id, mf(id), ef(id), rf(id)
            out[4 * n + i] = id .. '\0n' -- a follow-up (include/debounce)
        end
        return out
    end
    for i, id in ipairs(ids) do
        out[i], out[n + i], out[2 * n + i] = id, mf(id), ef(id)
    end
    for _, id in ipairs(ids) do
        if repeats[id] then out[#out + 1] = rf(id) end
        if debounced and debounced[id] then out[#out + 1] = id .. '\0n' end
    end
    return out
end

-- A job's meta: "[d]attempts:token" then its push options, if any, as
-- "|<tag><value>" items (push.lua): "|m<n>" its own max attempts, "|x<ms>"
-- the server time after which it is not delivered (expiry), "|r" it
-- repeats (its rule in rf(id)), "|b[<ms>]" it was pushed with
-- DQ_PUSH_DEBOUNCE (and that max wait), "|w<ms>" the server time by which
-- such a pending job runs however often it is pushed again
-- (include/debounce.lua).  A job pushed with options has a meta from
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

-- The groups and priorities of a reply's jobs (list.lua, poll.lua; read by
-- lib/ops.c), as runs: { pos, fair, ... }, pos the place of a run's first
-- job in the reply (1 first, increasing), fair that of its jobs up to the
-- next run's; a script adds a run where a job's fair differs from the last
-- run's ('' before the first), so the jobs before the first run have
-- neither.  fair_of: the fair of a job of options ext ("|.." or ''), its
-- priority digit then its group ("3", "0acme", "9acme"), or '' for
-- neither.
local function fair_of(ext)
    local g, p = string.match(ext, '|g([^|]*)'), string.match(ext, '|p(%d)')
    return (g or p) and (p or '0') .. (g or '') or ''
end

-- The options without tag's item.
local function meta_drop(ext, tag)
    if ext == '' then return ext end
    return (string.gsub(ext, '|' .. tag .. '[^|]*', ''))
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

-- The meta of a dead job put back to pending by an operator (a requeue, a
-- revive): attempts restart, the last token stays (ended) so the next
-- delivery's token is above it, an expiry that had passed no longer holds
-- and the job's other options do.
local function requeued_meta(v)
    local _, last, _, ext = parse_meta(v)
    return fmt_meta(0, ended_tok(last), meta_drop(ext, 'x'))
end
