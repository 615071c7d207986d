#!lua flags=no-writes
--- @include "include/keys"
--- @include "include/meta"
--- @include "include/compact/keys"
--- @include "include/compact/lib"
-- list.lua: pages through the jobs of one state, read-only (no-writes: it
-- runs on replicas and under maxmemory, and never changes anything).
-- ARGV[2] which: 1 scheduled (due set), 2 in flight (lease set), 3 dead
-- ARGV[3] offset (>= 0), ARGV[4] count (1..1000)
-- Returns { now_ms, id, payload, attempts, time_ms, reason, ... } in time
--   order: time_ms = due time (scheduled), lease deadline (in flight) or
--   time of death (dead); attempts = deliveries so far (from meta); reason
--   = the job's last failure reason field "<ms>:<reason>", or nil (false)
--   when it has none.  When some listed jobs have a group or a priority
--   (include/fair.lua), one more element ends the reply: their runs
--   { pos, fair, ... } (include/meta.lua, fair_of), fair a priority digit
--   then a group ("3", "0acme", "9acme") or '' for neither; a page of jobs
--   without them is what it was before groups.  Expired leases
--   are listed as in flight until the next poll reclaims them.  No token is
--   returned: a listing never hands out a lease.
local now = dq_now()
local key = ({ K_DUE, K_LEASE, K_DEAD })[tonumber(ARGV[2])]
if not key then
    return redis.error_reply('ERR delayq: unknown list kind')
end
local offset, count = tonumber(ARGV[3]), tonumber(ARGV[4])

-- Scheduled jobs of a queue with compact ones (include/compact/keys.lua),
-- in (due, id) order over both layouts: { id, due, .. } and the
-- compact jobs' payloads by id.  Bucket i holds due times in [s_i,
-- s_(i+1)); a range's native jobs are counted with ZCOUNT and its bucket
-- with HLEN, so whole ranges before the offset are skipped unread (one
-- ZCOUNT and one HLEN per 120 compact jobs skipped).  In a range that is
-- listed the bucket is read whole (a uniform one too) and merged with at
-- most its size + count native jobs of the range: a native job's place
-- is its rank in the range plus the compact jobs before it.
local function merged_page()
    local C = c_lib()
    local page, cpay = {}, {}
    local n, skip = 0, offset
    local idx, bs, bi = 0, {}, 1
    local function next_bucket()
        if bi > #bs then
            bs = redis.call('ZRANGE', K_PFX .. 'cb', idx, idx + 127,
                            'WITHSCORES')
            idx, bi = idx + 128, 1
            if #bs == 0 then return nil end
        end
        bi = bi + 2
        return bs[bi - 2], bs[bi - 1]
    end
    local cur_b, lo = nil, '-inf'
    local nb, ns = next_bucket()
    while n < count do
        local hi = ns and ('(' .. ns) or '+inf'
        local nat = redis.call('ZCOUNT', K_DUE, lo, hi)
        local cn = cur_b and redis.call('HLEN', C.bkey(cur_b)) or 0
        if skip >= nat + cn then
            skip = skip - nat - cn
        else
            local e = cur_b and C.entries(redis.call('HGETALL', C.bkey(cur_b)))
                or {}
            local a = skip - cn
            if a < 0 then a = 0 end
            local np = redis.call('ZRANGEBYSCORE', K_DUE, lo, hi, 'WITHSCORES',
                                  'LIMIT', a, skip - a + count - n)
            -- whether native job (d, id) sorts before compact entry x:
            -- by due time, then by id in the ZSET's byte order
            local function before(d, id, x)
                return d < x[2] or (d == x[2] and C.id_lt(id, x[1]))
            end
            local p, q, pos = 1, 1, 0
            if a > 0 then
                local d1 = tonumber(np[2])
                while e[q] and not before(d1, np[1], e[q]) do q = q + 1 end
                pos = a + q - 1
            end
            while n < count and (np[p] or e[q]) do
                local nat_first = np[p] and
                    (not e[q] or before(tonumber(np[p + 1]), np[p], e[q]))
                if pos >= skip then
                    if nat_first then
                        page[#page + 1], page[#page + 2] = np[p], np[p + 1]
                    else
                        page[#page + 1] = e[q][1]
                        page[#page + 1] = string.format('%d', e[q][2])
                        cpay[e[q][1]] = e[q][3]
                    end
                    n = n + 1
                end
                if nat_first then p = p + 2 else q = q + 1 end
                pos = pos + 1
            end
            skip = 0
        end
        if not ns then break end
        cur_b, lo = nb, ns
        nb, ns = next_bucket()
    end
    return page, cpay
end

local page, cpay
if key == K_DUE and c_flagged() then
    page, cpay = merged_page()
else
    page = redis.call('ZRANGE', key, offset, offset + count - 1, 'WITHSCORES')
end
local out = { now }
if #page == 0 then return out end
local ids = {}
for i = 1, #page, 2 do ids[#ids + 1] = page[i] end
local fair, fcur = {}, '' -- the runs of groups and priorities (fair_of)
-- One HMGET per 1000 jobs: unpack takes at most ~8000 values, and a
-- partitioned listing asks each partition for offset + count jobs.
for lo = 1, #ids, 1000 do
    local slice = {}
    for k = lo, math.min(lo + 999, #ids) do slice[#slice + 1] = ids[k] end
    local m = #slice
    local got = redis.call('HMGET', K_JOBS, unpack(job_fields(slice)))
    for j, id in ipairs(slice) do
        out[#out + 1] = id
        out[#out + 1] = got[j] or (cpay and cpay[id]) or ''
        local attempts, _, _, ext = parse_meta(got[m + j])
        out[#out + 1] = attempts
        out[#out + 1] = page[2 * (lo + j - 1)]
        out[#out + 1] = got[2 * m + j] or false
        if ext ~= '' or fcur ~= '' then
            local f = fair_of(ext)
            if f ~= fcur then
                fair[#fair + 1], fair[#fair + 2] = lo + j - 1, f
            end
            fcur = f
        end
    end
end
if #fair > 0 then out[#out + 1] = fair end
return out
