-- include/counters.lua: the totals kept with DQ_OPT_COUNTERS.
--- @include "include/keys"

-- The counters: counts_read() before the first write of a script (it
-- checks the key's type, so a wrong one fails the call before it changed
-- anything), count() after.  Both do nothing unless the client counts.
local function counts_read()
    if COUNTING then redis.call('HLEN', K_COUNTS) end
end
local function count(field, n)
    if COUNTING and n > 0 then redis.call('HINCRBY', K_COUNTS, field, n) end
end
