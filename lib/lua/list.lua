#!lua flags=no-writes
-- list.lua: pages through the jobs of one state, read-only (no-writes: it
-- runs on replicas and under maxmemory, and never changes anything).
-- ARGV[2] which: 1 scheduled (due set), 2 in flight (lease set), 3 dead
-- ARGV[3] offset (>= 0), ARGV[4] count (1..1000)
-- Returns { now_ms, id, payload, attempts, time_ms, reason, ... } in time
--   order: time_ms = due time (scheduled), lease deadline (in flight) or
--   time of death (dead); attempts = deliveries so far (from meta); reason
--   = the job's last failure reason field "<ms>:<reason>", or nil (false)
--   when it has none.  Expired leases
--   are listed as in flight until the next poll reclaims them.  No token is
--   returned: a listing never hands out a lease.
local now = dq_now()
local key = ({ K_DUE, K_LEASE, K_DEAD })[tonumber(ARGV[2])]
if not key then
    return redis.error_reply('ERR delayq: unknown list kind')
end
local offset, count = tonumber(ARGV[3]), tonumber(ARGV[4])
local page = redis.call('ZRANGE', key, offset, offset + count - 1,
                        'WITHSCORES')
local out = { now }
if #page == 0 then return out end
local ids = {}
for i = 1, #page, 2 do ids[#ids + 1] = page[i] end
-- One HMGET per 1000 jobs: unpack takes at most ~8000 values, and a
-- partitioned listing asks each partition for offset + count jobs.
for lo = 1, #ids, 1000 do
    local slice = {}
    for k = lo, math.min(lo + 999, #ids) do slice[#slice + 1] = ids[k] end
    local m = #slice
    local got = redis.call('HMGET', K_JOBS, unpack(job_fields(slice)))
    for j, id in ipairs(slice) do
        out[#out + 1] = id
        out[#out + 1] = got[j] or ''
        out[#out + 1] = (parse_meta(got[m + j]))
        out[#out + 1] = page[2 * (lo + j - 1)]
        out[#out + 1] = got[2 * m + j] or false
    end
end
return out
