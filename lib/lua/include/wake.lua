-- include/wake.lua: waking waiting consumers.
--- @include "include/keys"

-- Wake-ups.  Waiting consumers do not all sleep until the next due time
-- (each would poll for it: a thundering herd).  A waiting consumer is
-- registered in the idle set with the server time at which it will poll
-- on its own: the consumer that owns the queue's next event (a due time or
-- a lease deadline) sleeps until then, every other one until its idle cap.
-- A script that makes an earlier event (a push, a nack, a requeue) or that
-- leaves due work behind (a poll that took its fill) tells exactly one
-- registered consumer, on that consumer's own channel (CHANNEL..':'..id),
-- how many microseconds from now to poll: 0 = now.  A consumer whose
-- channel has no subscriber (it is gone) is dropped and the next one is
-- told.  A registration whose time is over by more than IDLE_SLACK ms is
-- taken for a dead or stalled consumer and ignored; a stalled or killed
-- owner thus delays its event by at most the others' idle cap.  With no
-- consumer registered the old broadcast on CHANNEL goes out instead.
local IDLE_SLACK = 250

-- The live registrations, earliest first: { id, ms, id, ms, .. } (at most
-- 6 consumers), or nil when the client passed no idle key.  A script calls
-- it before its first write: it also checks the key's type.
local function idle_peek(now)
    if not K_IDLE then return nil end
    return redis.call('ZRANGEBYSCORE', K_IDLE, now - IDLE_SLACK, '+inf',
                      'WITHSCORES', 'LIMIT', 0, 6)
end

-- Whether a live consumer other than me polls by `at` on its own.
local function idle_covered(cands, at, me)
    if not cands then return false end
    for i = 1, #cands, 2 do
        if cands[i] ~= me then return tonumber(cands[i + 1]) <= at end
    end
    return false
end

-- Tells the first live consumer of cands other than me (one that waits
-- rather than one a poll just gave jobs, when there is one) to poll at `at`
-- (server ms; now or earlier: at once) and records that as its time (a
-- consumer told to poll now leaves the set: its poll registers it again).
-- A consumer nobody listens for any more (closed, killed) is dropped and
-- the next one tried; when a whole page of cands was gone, the next page
-- is read (at most 8 pages: each gone consumer is dropped only once, so
-- the work evens out).  Returns whether one heard it.
local function idle_tell(cands, at, now_us, me)
    if not cands then return false end
    local delay = at * 1000 - now_us
    if delay < 0 then delay = 0 end
    local msg = string.format('%d', delay)
    for _ = 1, 8 do
        -- waiting consumers first, then those registered by a poll that
        -- gave them jobs (a half in the score: maybe still in a handler)
        for pass = 0, 1 do
            for i = 1, #cands, 2 do
                local id = cands[i]
                local busy = tonumber(cands[i + 1]) % 1 ~= 0
                if id ~= me and busy == (pass == 1) then
                    if redis.call(PUBLISH, CHANNEL .. ':' .. id, msg) > 0 then
                        if delay == 0 then
                            redis.call('ZREM', K_IDLE, id)
                        else
                            redis.call('ZADD', K_IDLE, 'XX',
                                       string.format('%d', at), id)
                        end
                        return true
                    end
                    redis.call('ZREM', K_IDLE, id) -- nobody listens: gone
                end
            end
        end
        if #cands < 12 then return false end
        -- a full page: there may be more; me (if listed) stays listed
        cands = idle_peek(math.floor(now_us / 1000))
    end
    return false
end

-- Before a script's first write: the consumers to tell if the change makes
-- `at` the earliest due time (before = the earliest before the change), or
-- false when it does not.
local function wake_prep(at, before, now)
    if at and (not before or at < before) then
        return idle_peek(now) or {}
    end
    return false
end

-- After the writes: tells one consumer about the new earliest due time
-- (unless one already polls by then), or broadcasts when none is
-- registered (waiters of older versions listen there).
local function wake(at, cands, now, now_us)
    if not cands then return end
    if at > now and idle_covered(cands, at, nil) then return end
    if not idle_tell(cands, at, now_us, nil) then
        redis.call(PUBLISH, CHANNEL, string.format('%d', at))
    end
end
