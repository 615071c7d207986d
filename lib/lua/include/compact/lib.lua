-- include/compact/lib.lua: c_lib(), the compact layout's functions, made
-- only by the calls that touch that layout.  Its body is spliced in from
-- the files it inlines (each indented to its @inline line), so they stay
-- one closure, as Redis runs it.
--- @include "include/compact/keys"

-- The compact layout's functions and keys, made only by the calls that
-- touch it (c_lib()): a script body makes each of its functions anew
-- on every call, and a queue in the default layout should not pay for
-- them.  Fields: the functions it inlines without their "c_".
local function c_lib()
    c_stable()
    local K_CB, K_CM, K_MV = K_PFX .. 'cb', K_PFX .. 'cm', K_PFX .. 'mv'
    local K_CONFN = K_PFX .. 'conf'
    local C_CAP, C_HALF, C_VMAX = 120, 64, 64

    --- @inline "include/compact/bucket"

    --- @inline "include/compact/store"

    --- @inline "include/compact/move"
    return { MV = K_MV, id_lt = c_id_lt, bkey = c_bkey, skey = c_skey,
        has = c_has, val = c_val, bucket_of = c_bucket_of, find = c_find,
        entries = c_entries, fields = c_fields, gone = c_gone,
        remove = c_remove, fits = c_fits, put = c_put, move = c_move,
        due = c_due, taken = c_taken, count = c_count }
end
