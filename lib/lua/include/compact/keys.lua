-- include/compact/keys.lua: the compact layout's keys, the cluster
-- probes before touching them, and whether a queue or job is compact.
--- @include "include/keys"

-- The compact layout (the queue setting 'layout' = 1 or 2, config.lua; the
-- mover, c_move, moves jobs into it: idle polls run it in both, poll.lua,
-- and every push in 2, push.lua).  A pending job costs a ZSET entry in
-- due (~110 B) and a native hash entry in jobs (~56 B + its strings); a
-- huge backlog of small payloads keeps most of its pending jobs in small
-- hashes that Redis encodes as listpacks (a few bytes per entry) instead:
--   <prefix>c:<b>  HASH  bucket b: id -> <shard code><due><payload>, at
--                        most C_CAP entries (or any number that share one
--                        due time: a "uniform" bucket); fields and values
--                        of at most C_VMAX bytes (hash-max-listpack-value).
--                        The value's first 3 bytes name the id's shard
--                        (c_code: a poll deletes the shard entries of the
--                        jobs it claims without hashing their ids), the
--                        next 8 its due ms (0..2^48-1, 6 bits a byte, as
--                        the code; c_val), the rest is the payload
--   <prefix>cb     ZSET  b -> the earliest due time in bucket b.  Buckets
--                        hold disjoint time ranges: every job of a bucket
--                        is due before the next bucket's score, so the
--                        first bucket holds the earliest compact jobs
--   <prefix>s:<c>  HASH  id -> due ms (decimal), one of 2^18 shards by a
--                        hash of the id (listpacks up to ~30 million jobs
--                        per queue or partition): finds a job's bucket by
--                        its id.  c: the shard's number h as 3 bytes of 6
--                        bits, each 48 + a digit ('0'..'o'), most
--                        significant first
--   <prefix>cm     HASH  n: compact jobs, next: last bucket number
--   <prefix>mv     STRING where the mover goes on (a due score); it
--                        expires soon (a waiting consumer that moves
--                        comes back sooner): a lost one only starts it
--                        over, and an emptied queue keeps no key
-- Only jobs never delivered and pushed without options are compact (a
-- meta goes with the native layout); a poll moves the jobs it claims back
-- to the native keys, so leases, acks, nacks and dead jobs never see the
-- compact keys.  Every script that reads pending jobs reads both layouts,
-- whatever the setting says: a queue switched back keeps working while
-- its compact jobs drain.  The keys are named from KEYS[1] (all under the
-- queue's hash tag), not passed: their number changes with the backlog.
-- What a default-layout queue runs of this is reads with the commands it
-- needs anyway (HMGET, ZRANGE, ZRANGEBYSCORE, ZCARD): an ACL user needs
-- more commands only for the compact layout (README).
local K_PFX = string.sub(K_DUE, 1, -4)

-- In a Redis Cluster a script may touch keys it did not declare, but
-- while their slot migrates some of them are on one node and some on the
-- other: on the source a key that is not there raises "non local key",
-- half-way through a call; on the target (a call sent there with ASKING)
-- a key not moved yet just looks absent.  c_stable() probes once per
-- call, before the first undeclared key is touched and before any write,
-- with a two-key command naming a key that never exists: Redis refuses a
-- multi-key command with a missing key in a migrating or importing slot
-- on either node, so the call answers TRYAGAIN instead (the clients retry
-- that until the slot is settled, which for a compact queue is when the
-- migration ends).  A user the ACL refuses EXISTS gets the one-key probe,
-- which sees the source side only (README).  Outside a cluster (plain
-- PUBLISH) there is nothing to probe.
local C_STABLE = false
local function c_stable()
    if C_STABLE or PUBLISH ~= 'SPUBLISH' then return end
    local probe = K_PFX .. 'probe'
    local r = redis.pcall('EXISTS', probe, K_DUE)
    if type(r) == 'table' and r.err and string.find(r.err, 'NOPERM', 1, true)
    then
        r = redis.pcall('ZCARD', probe)
    end
    if type(r) == 'table' and r.err then
        error(redis.error_reply('TRYAGAIN delayq: the slot of ' .. K_PFX ..
                                ' is migrating'))
    end
    C_STABLE = true
end

-- The one-key probe alone (in a cluster): a key that never exists raises
-- "non local key" on the source of a migrating slot (TRYAGAIN then, as
-- c_stable); on its target it just looks absent, as the index of a queue
-- without compact jobs is.
local function c_probe1()
    if PUBLISH ~= 'SPUBLISH' then return end
    local r = redis.pcall('ZCARD', K_PFX .. 'probe')
    if type(r) == 'table' and r.err then
        error(redis.error_reply('TRYAGAIN delayq: the slot of ' .. K_PFX ..
                                ' is migrating'))
    end
end

-- Whether the queue has compact jobs: the flag "compact" in its conf hash,
-- which c_put sets with the first compact job and c_gone deletes with the
-- last, for the scripts that get that key (push, poll, nack); the others
-- look for the compact index itself, after c_probe1.  A script touches the
-- other compact keys only when there are compact jobs (or when the mover
-- moves jobs in).
local C_FLAG = nil
local function c_flagged()
    if C_FLAG == nil then
        if K_CONF then
            C_FLAG = redis.call('HMGET', K_CONF, 'compact')[1] ~= false
        else
            c_probe1()
            C_FLAG = redis.call('ZCARD', K_PFX .. 'cb') > 0
        end
    end
    return C_FLAG
end


-- The shard code of a compact job's id (see c_lib, lib.lua): the id's bytes
-- as a polynomial in 31, mod 2^18, as 3 bytes of 6 bits.  It runs for
-- every compact job the mover moves, so it takes fourteen bytes per
-- string.byte call, seven per step (Horner's rule, then h * 31^7 + that,
-- mod 2^18: below 2^53, exact), and makes the code with one string.char
-- (string.format's %d alone costs more).
local function c_code(id)
    local h, n, i = 0, #id, 1
    local byte = string.byte
    while i + 13 <= n do -- 14 bytes (a generated id) with one call
        local a, b, c, d, e, f, g, a2, b2, c2, d2, e2, f2, g2 =
            byte(id, i, i + 13)
        h = (h * 27512614111 +
             (((((a * 31 + b) * 31 + c) * 31 + d) * 31 + e) * 31 + f) * 31 +
             g) % 262144
        h = (h * 27512614111 +
             (((((a2 * 31 + b2) * 31 + c2) * 31 + d2) * 31 + e2) * 31 + f2) *
             31 + g2) % 262144
        i = i + 14
    end
    while i <= n do
        h = (h * 31 + byte(id, i)) % 262144
        i = i + 1
    end
    local c = h % 64
    local t = (h - c) / 64
    local b = t % 64
    return string.char(48 + (t - b) / 64, 48 + b, 48 + c)
end

-- Shard keys: K_S .. a shard code; c_skey(id) is that of id's code.
local K_S = K_PFX .. 's:'
local function c_skey(id) return K_S .. c_code(id) end

-- Whether id is a compact job (its shard names it).
local function c_has(id)
    c_stable()
    return redis.call('HMGET', c_skey(id), id)[1] ~= false
end
