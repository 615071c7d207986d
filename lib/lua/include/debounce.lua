-- include/debounce.lua: pushes with DQ_PUSH_DEBOUNCE (debounce.lua); the
-- follow-up run an ack starts is ack.lua's (inline there).
--- @include "include/keys"
--- @include "include/meta"
--- @include "include/pending"
--- @include "include/wake"

-- A debounced id is in one of three states, each push changing it by the
-- server clock (now) with its delay d and payload p, the call's max wait W
-- ("|b<W>" in the options; none: no cap):
--   unknown (or dead): created, due at now + d, and at the latest at the
--     deadline now + W ("|w<deadline>" in its meta).  Outcome 5.
--   pending, never delivered: p replaces its payload, due moves to now + d
--     but not past its deadline (a job pushed without the flag gets
--     now + W as its deadline at this push).  Outcome 6.
--   delivered (in flight, or waiting for a retry): the running job is left
--     alone; the id keeps one follow-up (nf(id), "<at>:<deadline>:<p>"):
--     at = now + d of the latest push, deadline = now + W of the first
--     one, p the latest payload.  Outcome 7.  When the running delivery is
--     acked the follow-up becomes the pending job, due at the later of the
--     ack and min(at, deadline), attempts 0.  A nack for a retry keeps
--     both; a delivery dead-lettered keeps its follow-up with it in the
--     dead set (a requeue runs the dead one first; a debounced push of a
--     dead id drops both and starts anew, as for an unknown id).
-- A debounced push never answers done; one that creates the id retires
-- its done record (include/tokens.lua), as every creating push does.

-- db_lib(): the debounced push's functions, as one table (debounce.lua
-- calls it; kept out of push.lua and ack.lua, whose plain calls would pay
-- for making them: a script makes its functions anew on every call).
local function db_lib()
    -- The field of a debounced job's follow-up (see above).
    local function nf(id) return id .. '\0n' end

    -- "<at>:<deadline>:<payload>" -> at, deadline, payload
    local function fu_parse(v)
        local a = string.find(v, ':', 1, true)
        local b = string.find(v, ':', a + 1, true)
        return tonumber(string.sub(v, 1, a - 1)),
            tonumber(string.sub(v, a + 1, b - 1)), string.sub(v, b + 1)
    end

    local function fu_fmt(at, deadline, payload)
        return string.format('%d:%d:', at, deadline) .. payload
    end

    -- A due time capped by a deadline (0: none).
    local function capped(at, deadline)
        if deadline > 0 and deadline < at then return deadline end
        return at
    end

    -- Options with the deadline of the pending job.
    local function with_deadline(ext, deadline)
        ext = meta_drop(ext, 'w')
        if deadline > 0 then ext = ext .. string.format('|w%d', deadline) end
        return ext
    end

    -- The state of each distinct id of the call (reads only).
    local function db_read(ids, cany, C)
        local fields, n = {}, #ids
        for i, id in ipairs(ids) do
            fields[i], fields[n + i], fields[2 * n + i] = id, mf(id), nf(id)
        end
        local got = redis.call('HMGET', K_JOBS, unpack(fields))
        local dz = redis.call('ZMSCORE', K_DEAD, unpack(ids))
        local recs = redis.call('ZMSCORE', K_DONE, unpack(ids))
        local st = {}
        for i, id in ipairs(ids) do
            local s = { rec = recs[i], fu = got[2 * n + i], tok = '0', ext = '' }
            if got[i] then
                local att, tok, _, ext = parse_meta(got[n + i])
                s.tok, s.ext, s.had_meta = tok, ext, got[n + i]
                s.kind = dz[i] and 'dead' or (att > 0 and 'flight' or 'pending')
                s.att = att
            else
                local d = cany and redis.call('HMGET', C.skey(id), id)[1]
                s.kind = d and 'compact' or 'new'
                s.cdue = d and tonumber(d)
            end
            s.from = s.kind
            st[id] = s
        end
        return st
    end

    -- One push (delay d, payload p) applied to the state s; returns its
    -- outcome.
    local function db_apply(s, now, d, p, wait)
        if s.kind == 'flight' then
            if s.fu then
                local _, dl = fu_parse(s.fu)
                s.fu = fu_fmt(now + d, dl, p)
            else
                s.fu = fu_fmt(now + d, wait > 0 and now + wait or 0, p)
            end
            s.fu_set = true
            return 7
        end
        if not s.deadline then -- the call's first push of the id
            local dl = s.from == 'pending' and meta_opt(s.ext, 'w')
            if type(dl) ~= 'number' then dl = wait > 0 and now + wait or 0 end
            s.deadline = dl
        end
        local outcome = (s.kind == 'new' or s.kind == 'dead') and 5 or 6
        s.kind, s.payload, s.at = 'pending', p, capped(now + d, s.deadline)
        return outcome
    end

    -- The writes of one id's final state, added to the lists of w.
    local function db_plan(w, id, s, ext)
        if s.fu_set then
            w.hset[#w.hset + 1] = nf(id)
            w.hset[#w.hset + 1] = s.fu
            if not meta_opt(s.ext, 'b') then -- its ack must look for it
                w.hset[#w.hset + 1] = mf(id)
                w.hset[#w.hset + 1] = s.had_meta .. '|b'
            end
            return
        end
        if not s.payload then return end
        local from, tok = s.from, s.tok
        if from == 'dead' then
            w.undead[#w.undead + 1] = id
            tok = ended_tok(tok)
        end
        if from == 'compact' then w.unc[#w.unc + 1] = { id, s.cdue } end
        if from ~= 'new' and from ~= 'compact' then
            w.hdel[#w.hdel + 1] = nf(id)
            if from == 'dead' then w.hdel[#w.hdel + 1] = ef(id) end
            if meta_opt(s.ext, 'r') then w.hdel[#w.hdel + 1] = rf(id) end
        end
        if from ~= 'pending' and s.rec and tonumber(s.rec) % 1 == 0 then
            w.retire[#w.retire + 1] = string.format('%d.5', s.rec)
            w.retire[#w.retire + 1] = id
        end
        w.hset[#w.hset + 1] = id
        w.hset[#w.hset + 1] = s.payload
        -- a pending job moved keeps its group (include/fair.lua)
        -- and priority
        local g = from == 'pending' and string.match(s.ext, '|g([^|]*)')
        local p = from == 'pending' and string.match(s.ext, '|p(%d)')
        w.hset[#w.hset + 1] = mf(id)
        w.hset[#w.hset + 1] = fmt_meta(0, tok, with_deadline(ext, s.deadline)
                                       .. (g and '|g' .. g or '')
                                       .. (p and '|p' .. p or ''))
        w.zadd[#w.zadd + 1] = string.format('%d', s.at)
        w.zadd[#w.zadd + 1] = id
        w.gs[#w.gs + 1] = g or ''
        w.gs.ps[#w.gs] = tonumber(p or 0)
        if not w.earliest or s.at < w.earliest then w.earliest = s.at end
    end

    -- The writes, after every read.
    local function db_write(w)
        if #w.undead > 0 then redis.call('ZREM', K_DEAD, unpack(w.undead)) end
        if #w.hdel > 0 then redis.call('HDEL', K_JOBS, unpack(w.hdel)) end
        if #w.unc > 0 then w.C.remove(w.unc) end
        if #w.hset > 0 then redis.call('HSET', K_JOBS, unpack(w.hset)) end
        if #w.zadd > 0 then redis.call('ZADD', K_DUE, unpack(w.zadd)) end
        if w.F and #w.zadd > 0 then w.F.moved(w.gs, w.zadd) end
        if #w.retire > 0 then redis.call('ZADD', K_DONE, unpack(w.retire)) end
    end

    -- The debounced push (debounce.lua): ARGV as push.lua documents them
    -- (times are delays); the options ext carry "|b[<max wait ms>]".
    -- F: fair_lib() for a queue with groups (its jobs are indexed at
    -- their due time), else nil.  Returns the outcomes.
    local function debounce_push(now, now_us, ext, cflag, C, fresh, F)
        local wait = meta_opt(ext, 'b')
        if wait == nil then ext = ext .. '|b' end
        if type(wait) ~= 'number' then wait = 0 end
        local ids, seen = {}, {}
        for i = 8, #ARGV, 3 do
            if not seen[ARGV[i]] then
                seen[ARGV[i]] = true
                ids[#ids + 1] = ARGV[i]
            end
        end
        local before, cany = first_due(cflag)
        local st = db_read(ids, cany and not fresh, C)
        local out = {}
        for i = 8, #ARGV, 3 do
            out[#out + 1] = db_apply(st[ARGV[i]], now, tonumber(ARGV[i + 1]),
                                     ARGV[i + 2], wait)
        end
        local w = { hset = {}, zadd = {}, hdel = {}, undead = {}, unc = {},
                    retire = {}, C = C, F = F, gs = { ps = {} } }
        for _, id in ipairs(ids) do db_plan(w, id, st[id], ext) end
        local cands = wake_prep(w.earliest, before, now)
        db_write(w)
        wake(w.earliest, cands, now, now_us)
        return out
    end

    return { push = debounce_push }
end
