#!lua
--- @include "include/keys"
--- @include "include/compact/keys"
--- @include "include/compact/lib"
--- @include "include/debounce"
--- @include "include/fair"
-- debounce.lua: pushes with DQ_PUSH_DEBOUNCE (include/debounce.lua says
-- what each does).  A script of its own, so plain pushes (push.lua) pay
-- nothing for it.  ARGV as push.lua's, with ARGV[2] '2' and ARGV[3] '0'
-- (delays); the options ARGV[5] carry "|b[<max wait ms>]" and "|m<n>"
-- only, ARGV[6] is ''.  Returns one outcome per job: 5 created, 6 moved,
-- 7 follow-up.  Reads (jobs, dead, done, due, the compact shards) come
-- before the first write.
local now, now_us = dq_now()
-- the settings read as push.lua does: whether compact jobs exist, and
-- whether the queue has groups
local lay = redis.pcall('HMGET', K_PFX .. 'conf', 'compact', 'grouped')
local cflag = not lay.err and lay[1] ~= false
local F = not lay.err and lay[2] and fair_lib() -- include/fair.lua
local fresh = string.byte(ARGV[7], 2) == 103 -- 'g': never, ids are given
local C = cflag and c_lib()
return db_lib().push(now, now_us, ARGV[5], cflag, C, fresh, F)
