-- include/compact/bucket.lua: a compact bucket's values and entries, in
-- due order (inlined into c_lib, include/compact/lib.lua: it sees that
-- function's locals K_CB, C_CAP, ..).
--- @include "include/compact/keys"

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
