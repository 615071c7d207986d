-- include/settings.lua: the queue's settings (config.lua).
--- @include "include/keys"
--- @include "include/meta"

-- The queue's settings (config.lua): one HMGET of the named fields, as
-- numbers (nil: not set).  Without a conf key (scripts that do not get
-- it) every setting is unset.
local function settings(...)
    local names = { ... }
    if not K_CONF then return {} end
    local got = redis.call('HMGET', K_CONF, unpack(names))
    local out = {}
    for i, name in ipairs(names) do
        if got[i] then out[name] = tonumber(got[i]) end
    end
    return out
end

-- The max attempts that holds for a job: its own, else the queue's
-- setting, else the client's option (0 = unlimited).
local function max_attempts_of(ext, conf, client)
    return meta_opt(ext, 'm') or conf.max_attempts or client
end
