#!lua flags=allow-oom
-- cancel.lua: removes a job that has not been delivered.
-- ARGV: id, flags (1 = also remove a job in flight).
-- Returns 1 removed pending, 2 in flight and left alone, 3 removed in
-- flight, 0 no pending or in-flight job with that id (dead jobs untouched).
local id = ARGV[1]
local function forget() redis.call('HDEL', K_JOBS, id, mf(id)) end
if redis.call('ZREM', K_DUE, id) == 1 then
    forget()
    return 1
end
if redis.call('ZSCORE', K_LEASE, id) then
    if ARGV[2] ~= '1' then return 2 end
    redis.call('ZREM', K_LEASE, id)
    forget()
    return 3
end
return 0
