-- include/pending.lua: the queue's next due time and next event, over
-- both layouts.
--- @include "include/keys"
--- @include "include/compact/keys"

-- Earliest due score, or nil when nothing is pending (either layout), and
-- whether the queue has compact jobs.  A caller that read the settings
-- passes cany: whether they have the flag "compact" (c_flagged); without
-- it the flag is read.
local function first_due(cany)
    local f = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
    local a = f[2] and tonumber(f[2])
    if cany == nil then cany = c_flagged() end
    if not cany then return a, false end
    c_stable()
    local c = redis.call('ZRANGE', K_PFX .. 'cb', 0, 0, 'WITHSCORES')
    if c[2] and (not a or tonumber(c[2]) < a) then
        return tonumber(c[2]), true
    end
    return a, c[2] ~= nil
end

-- Earliest of the first due time and the first lease deadline, or nil
-- (cany: as for first_due).
local function next_event(cany)
    local first = first_due(cany)
    local l = redis.call('ZRANGE', K_LEASE, 0, 0, 'WITHSCORES')
    if l[2] and (not first or tonumber(l[2]) < first) then
        first = tonumber(l[2])
    end
    return first
end
