-- include/repeat.lua: repeating jobs' next runs (every-ms and cron rules).

-- Repeating jobs.  A job pushed with a repeat rule has "|r" in its meta
-- options and its rule in rf(id): "e<every ms>;<start ms>" (runs at start
-- + k * every) or a cron rule as the client parsed it (lib/cron.c):
-- "c<tz min>;<minutes>;<hours>;<days>;<months>;<weekdays>;<a|o>;<text>",
-- each list explicit comma-separated values, a: a day needs both its day
-- of the month and its weekday listed, o: either; text is for people.
-- Nothing here parses cron text.
--
-- Civil dates (proleptic Gregorian, days since 1970-01-01), after Howard
-- Hinnant's days_from_civil / civil_from_days: integer arithmetic, exact
-- in doubles.
local function days_from_civil(y, m, d)
    if m <= 2 then y = y - 1 end
    local era = math.floor(y / 400)
    local yoe = y - era * 400
    local mp = (m + 9) % 12
    local doy = math.floor((153 * mp + 2) / 5) + d - 1
    local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
    return era * 146097 + doe - 719468
end

local function civil_from_days(z)
    z = z + 719468
    local era = math.floor(z / 146097)
    local doe = z - era * 146097
    local yoe = math.floor((doe - math.floor(doe / 1460) +
        math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
    local y = yoe + era * 400
    local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
    local mp = math.floor((5 * doy + 2) / 153)
    local d = doy - math.floor((153 * mp + 2) / 5) + 1
    local m = mp < 10 and mp + 3 or mp - 9
    if m <= 2 then y = y + 1 end
    return y, m, d
end

-- A cron rule's lists as sets and a sorted list: { tz, min = {set, list},
-- hour, dom, mon, dow, day_or }.
local function cron_rule(rule)
    local parts = {}
    for p in string.gmatch(string.sub(rule, 2) .. ';', '([^;]*);') do
        parts[#parts + 1] = p
        if #parts == 8 then break end
    end
    local function list(s)
        local set, arr = {}, {}
        for v in string.gmatch(s, '%d+') do
            v = tonumber(v)
            set[v] = true
            arr[#arr + 1] = v
        end
        return { set = set, arr = arr }
    end
    return { tz = tonumber(parts[1]), min = list(parts[2]),
             hour = list(parts[3]), dom = list(parts[4]),
             mon = list(parts[5]), dow = list(parts[6]),
             day_or = parts[7] == 'o' }
end

-- The first minute (as server epoch ms) that the cron rule r matches at
-- or after ms t (strictly after when after is true), or nil when none
-- within 50 years (the client refuses rules that never fire).  The search
-- steps by month, then day, then through the hour and minute lists: at
-- most 600 months and 31 days each, never minute by minute.
local function cron_next(r, t, after)
    local tzms = r.tz * 60000
    local m0 = math.floor((t + tzms) / 60000) -- local minute at or before t
    if after or m0 * 60000 < t + tzms then m0 = m0 + 1 end
    local day0 = math.floor(m0 / 1440)
    local mod0 = m0 - day0 * 1440
    local y, mo, d = civil_from_days(day0)
    for _ = 1, 600 do
        if r.mon.set[mo] then
            local ny, nmo = y, mo + 1
            if nmo > 12 then ny, nmo = y + 1, 1 end
            local first = days_from_civil(y, mo, 1)
            local ndays = days_from_civil(ny, nmo, 1) - first
            for dd = d, ndays do
                local day = first + dd - 1
                local wd = (day + 4) % 7 -- 1970-01-01 was a Thursday
                local a, b = r.dom.set[dd], r.dow.set[wd]
                local ok
                if r.day_or then ok = a or b else ok = a and b end
                if ok then
                    local from = day == day0 and mod0 or 0
                    for _, h in ipairs(r.hour.arr) do
                        for _, mi in ipairs(r.min.arr) do
                            if h * 60 + mi >= from then
                                return (day * 1440 + h * 60 + mi) * 60000 - tzms
                            end
                        end
                    end
                end
            end
        end
        d = 1
        mo = mo + 1
        if mo > 12 then y, mo = y + 1, 1 end
    end
    return nil
end

-- A repeating job's first run: "e.." starts at t (the push's time), a cron
-- rule at its first match at or after t.  Returns the time and the rule
-- to store (an every rule gains its start), or nil if it never fires.
local function repeat_first(rule, t)
    if string.byte(rule, 1) == 101 then -- 'e'
        return t, rule .. ';' .. string.format('%d', t)
    end
    local at = cron_next(cron_rule(rule), t, false)
    return at, rule
end

-- The run after an ack at now: the first slot strictly after now.  nil
-- for a rule it cannot read.
local function repeat_next(rule, now)
    if string.byte(rule, 1) == 101 then -- 'e'
        local every, start = string.match(rule, '^e(%d+);(%-?%d+)$')
        every, start = tonumber(every), tonumber(start)
        if not every or every <= 0 then return nil end
        local k = math.floor((now - start) / every) + 1
        if k < 1 then k = 1 end
        return start + k * every
    end
    if string.byte(rule, 1) == 99 then -- 'c'
        return cron_next(cron_rule(rule), now, true)
    end
    return nil
end
