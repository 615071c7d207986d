#!lua
--- @include "include/keys"
--- @include "include/fair"
-- config.lua: reads or changes the queue's settings (the conf hash).
-- ARGV[2] 'set' | 'get', ARGV[3] this partition (0..P-1; 0 for a plain
-- queue), ARGV[4] partitions P, then
--   set: pairs name, value ('' = unset) -> 0 (the client sends rate_max
--        and rate_window_ms together, both set or both unset)
--   get: names -> their values (false when unset)
-- The client checks names and ranges.  rate_max, dead_max and
-- inflight_max (include/fair.lua) hold for the whole queue: a partition
-- keeps its share (rate_part, dead_part, inflight_part: the total split
-- evenly, at least 1) beside the total, and poll and nack read the
-- share.  A changed rate limit counts the deliveries already
-- logged (restarting workers that set the same limit do not reset it).
-- Settings outlive the queue's jobs: the hash stays until every setting
-- is unset.  Some fields are not settings: "compact", the flag that the
-- queue has compact jobs (include/compact/keys.lua), kept by the
-- scripts that move jobs in and out of that layout; "grouped", the flag
-- of a queue with groups or priorities, and "gfill", the cursor of the
-- polls that index the jobs pushed before it (include/fair.lua).
-- Setting group_inflight_max on a queue with groups that had no limit per
-- group also indexes its jobs in flight by group (O(jobs in flight),
-- include/fair.lua: F.index_leases), after the settings are written.
-- The settings written need no read first: a wrong type fails the first
-- write, before anything changed.
local action = ARGV[2]
if action == 'get' then
    local names = {}
    for i = 5, #ARGV do names[#names + 1] = ARGV[i] end
    return redis.call('HMGET', K_CONF, unpack(names))
end
if action ~= 'set' then
    return redis.error_reply('ERR delayq: unknown config action')
end
local part, parts = tonumber(ARGV[3]), tonumber(ARGV[4])
local sets, dels = {}, {}
local glimit_new -- a limit per group set where none was
local function share(total)
    local s = math.floor(total / parts)
    if part < total % parts then s = s + 1 end
    if s < 1 then s = 1 end
    return string.format('%d', s)
end
for i = 5, #ARGV, 2 do
    local name, v = ARGV[i], ARGV[i + 1]
    local derived = (name == 'rate_max' and 'rate_part') or
        (name == 'dead_max' and 'dead_part') or
        (name == 'inflight_max' and 'inflight_part') or
        (name == 'group_inflight_max' and 'group_inflight_part') or nil
    if v == '' then
        dels[#dels + 1] = name
        if derived then dels[#dels + 1] = derived end
    else
        sets[#sets + 1] = name
        sets[#sets + 1] = v
        if derived then
            sets[#sets + 1] = derived
            sets[#sets + 1] = share(tonumber(v))
        end
        glimit_new = glimit_new or name == 'group_inflight_max'
    end
end
-- no limit on jobs in flight: no poll waits for a slot (include/fair.lua;
-- written first: a wrong type fails it before anything changed)
for _, name in ipairs(dels) do
    if name == 'inflight_max' then redis.call('HDEL', K_JOBS, '\0full') end
end
if glimit_new then
    local c = redis.call('HMGET', K_CONF, 'grouped', 'group_inflight_part')
    glimit_new = c[1] and not c[2]
end
if #dels > 0 then redis.call('HDEL', K_CONF, unpack(dels)) end
if #sets > 0 then redis.call('HSET', K_CONF, unpack(sets)) end
if glimit_new then fair_lib().index_leases(dq_now()) end
return 0
