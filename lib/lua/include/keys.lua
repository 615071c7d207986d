-- include/keys.lua: the keys and arguments every script gets (the state
-- of a queue in Redis, documented below), the pub/sub flags, and the
-- server's time.

-- The state of a queue in Redis, and what every libdelayq script gets.
--
-- Every script gets the same first five keys of one queue, all under one hash tag
-- ({<queue>}, the name percent-encoded) so a queue lives in one Redis
-- Cluster slot:
--   KEYS[1] due    ZSET  id -> due time (ms, server clock): pending jobs
--   KEYS[2] lease  ZSET  id -> lease deadline (ms): jobs in flight
--   KEYS[3] jobs   HASH  id -> payload (pending, in flight and dead jobs),
--                        and id.."\0" -> "attempts:token" for jobs delivered
--                        at least once (token "-<last token>" or "0" = no
--                        valid lease; "d<attempts>:token" = a poll
--                        dead-lettered the job while its holder's token was
--                        still valid), and id.."\0e" -> "<ms>:<reason>",
--                        the job's last failure reason (a nack that gave
--                        one, or "max attempts" from a poll) and the server
--                        ms it was set at; deleted with the job's other
--                        fields (ack, cancel, purge) and by a replacing push;
--                        and id.."\0r" -> the repeat rule of a repeating job
--                        (see push.lua and ack.lua), and id.."\0n" -> the
--                        follow-up of a debounced job that runs
--                        ("<at>:<deadline>:<payload>", include/debounce.lua;
--                        ack.lua starts it)
--   KEYS[4] dead   ZSET  id -> time it was dead-lettered (ms)
--   KEYS[6] idle   ZSET  consumer id -> server ms at which that waiting
--                        consumer polls on its own next (see "Wake-ups",
--                        include/wake.lua); passed to the scripts that
--                        wake or register consumers (push, poll, ack,
--                        nack, dead, reschedule)
--   KEYS[7] conf   HASH  the queue's settings (config.lua; absent: the
--                        client's options decide): passed to poll, nack
--                        and config
--   KEYS[8] rate   ZSET  the rate limit's log: "<poll us>.<n>" -> server ms
--                        of each delivery in the last window (poll.lua);
--                        passed to poll
--   KEYS[9] counts HASH  delivered, acked, retried, failed: totals kept
--                        only by clients with DQ_OPT_COUNTERS (the key is
--                        passed only then, with the '+' flag below, and
--                        with it every key before it)
--   KEYS[5] done   ZSET  id -> the token a finished job was acked with (a
--                        number: the us of that delivery + a little),
--                        so a retried push answers "done" and a retried ack
--                        "yours landed" (see ack.lua)
-- ARGV[1] is the queue's wake-up channel (its name carries the database
-- number: pub/sub is server-wide, databases are not); the operation's own
-- arguments start at ARGV[2].  Leading flag bytes (never in a namespace):
-- '+' keeps the counters (KEYS[9]), then '!' asks for sharded pub/sub:
-- in a Redis Cluster a plain PUBLISH is broadcast to every node, SPUBLISH
-- reaches only the subscribers on the owner of the channel's slot, which
-- is the queue's own slot (same hash tag).
-- A job id is in at most one of due, lease and dead.  A queue without jobs
-- leaves no key behind: Redis deletes empty sets and hashes, and done
-- expires a window after the last ack.
--
-- Failure atomicity: Redis does not roll a script back when a command fails
-- half-way (a key of the wrong type is the usual cause), so every script
-- reads each key it is going to write before its first write.  A failed
-- script has then written nothing.  The reads are the ones the script needs
-- anyway where possible; where not, a cheap O(1) read stands in.
--
-- One key per kind (not one per job) lets a script touch a whole batch with
-- one command per kind (HMGET, HSET, ZADD, ZREM with many members), which
-- is what makes batches cheap.  Every range read has a LIMIT.  The meta
-- fields live in the big jobs hash (ids are C strings, so id.."\0" never
-- names a job) rather than a small hash of their own: one HMGET reads a
-- job's payload and meta, and a small hash recreated by every poll would
-- pay for Redis's listpack inserts (bench/HISTORY.md, R1).
--
-- Time: every decision uses TIME, read once per call.  Lua numbers are
-- doubles: epoch milliseconds (~1.8e12) and microseconds (~1.8e15) are exact.

local K_DUE, K_LEASE, K_JOBS, K_DEAD, K_DONE = KEYS[1], KEYS[2], KEYS[3],
    KEYS[4], KEYS[5]
local K_IDLE, K_CONF, K_RATE, K_COUNTS = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local CHANNEL, PUBLISH, COUNTING = ARGV[1], 'PUBLISH', false
if string.byte(CHANNEL, 1) == 43 then
    CHANNEL, COUNTING = string.sub(CHANNEL, 2), true
end
if string.byte(CHANNEL, 1) == 33 then
    CHANNEL, PUBLISH = string.sub(CHANNEL, 2), 'SPUBLISH'
end

-- Server time as (ms, us).
local function dq_now()
    local t = redis.call('TIME')
    local s, us = tonumber(t[1]), tonumber(t[2])
    return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end
