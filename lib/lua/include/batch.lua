-- include/batch.lua: many entries into a hash or sorted set at once.

-- HSET or ZADD of many entries (args: field, value, .. or score, member,
-- ..) into key.  A new or small hash or sorted set is a listpack, and
-- every entry added to one scans it: a call that adds many entries to a
-- small one (a poll's claims into an emptied jobs hash or lease set, a
-- batch into an empty queue) pays time quadratic in the entries until
-- Redis converts the key (zset-max-listpack-entries: 128 by default;
-- hash-max-listpack-entries: 512).  An entry longer than any id first
-- (over hash- and zset-max-listpack-value) makes Redis convert it at
-- once; it is removed right after and never names a job (ids are at
-- most 128 bytes).  Only with more than over entries (128 unless told):
-- a sorted set that large is converted anyway; a hash of 129 to 512
-- entries would have stayed a listpack, a few kilobytes that the
-- quadratic scan of so many entries is not worth.
local function add_many(cmd, key, args, over)
    if #args <= 2 * (over or 128) then
        redis.call(cmd, key, unpack(args))
        return
    end
    local big = string.rep('~', 129) -- made here: every call runs the prelude
    if cmd == 'HSET' then
        redis.call('HSET', key, big, '', unpack(args))
        redis.call('HDEL', key, big)
    else
        redis.call('ZADD', key, '0', big, unpack(args))
        redis.call('ZREM', key, big)
    end
end
