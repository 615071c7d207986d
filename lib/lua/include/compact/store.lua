-- include/compact/store.lua: puts compact jobs into buckets and removes
-- them (inlined into c_lib, include/compact/lib.lua, after bucket.lua).
--- @include "include/compact/keys"

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
