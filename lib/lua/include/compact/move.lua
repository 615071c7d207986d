-- include/compact/move.lua: the mover, and the reads of due compact jobs
-- for poll, stats and count_due (inlined into c_lib,
-- include/compact/lib.lua, after store.lua).
--- @include "include/keys"
--- @include "include/meta"

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
