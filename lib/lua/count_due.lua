#!lua flags=no-writes
--- @include "include/keys"
--- @include "include/compact/lib"
--- @include "include/pending"
-- count_due.lua: how many pending jobs of one queue fall due in each time
-- window, read-only (no-writes: it runs on replicas and under maxmemory),
-- without reading a single job: one ZCOUNT per window on the due set.
-- ARGV[2..n+1] the windows' upper bounds, ms from now (server clock),
--   strictly increasing (checked by the client: 1..64 of them).
-- Returns { now_ms, c_0, .., c_n }: c_0 the jobs due at or before
--   now + bound_1, c_i (0 < i < n) those due after now + bound_i and at
--   or before now + bound_(i+1), c_n those due after now + bound_n.  So
--   the counts add up to ZCARD due (pending jobs; in-flight ones whose
--   lease ran out are in the lease set, not counted).
-- Bounded: n + 1 ZCOUNTs, each O(log N); compact jobs (include/compact) are
-- counted by bucket (one HLEN per bucket of up to 120 jobs, two buckets
-- per window read).
local now = dq_now()
local out = { now }
local lo = '-inf'
local _, cany = first_due()
local C = cany and c_lib()
local clo = -math.huge
for i = 2, #ARGV do
    local hi = string.format('%.0f', now + tonumber(ARGV[i]))
    out[#out + 1] = redis.call('ZCOUNT', K_DUE, lo, hi)
    if cany then
        out[#out] = out[#out] + C.count(clo, tonumber(hi))
        clo = tonumber(hi)
    end
    lo = '(' .. hi
end
out[#out + 1] = redis.call('ZCOUNT', K_DUE, lo, '+inf')
if cany then out[#out] = out[#out] + C.count(clo, math.huge) end
return out
