#!/usr/bin/env bash
# bench/cg-redis.sh CONF [ARG...]: redis-server CONF under callgrind,
# counting only what clients' commands cost the server: reading, parsing,
# running (Lua scripts included) and replying (readQueryFromClient and
# writeToClient), not the cron, the cluster bus or the start.
#
# scen_cluster.c points DQ_REDIS_SERVER (tests/harness.c) here for its
# deterministic count, and drives callgrind with vgdb's monitor commands:
# "instrumentation on" for the counted phases only (it starts off: the
# start and the setup run several times faster), "zero" and "dump" around
# each phase; the dumps land beside CONF as cg.out.1, cg.out.2, ...  The
# real server: $DQB_CG_SERVER, else redis-server on PATH.
set -eu
dir=$(dirname -- "$1")
exec valgrind --tool=callgrind --vgdb=yes --instr-atstart=no \
    --toggle-collect=readQueryFromClient --toggle-collect=writeToClient \
    --callgrind-out-file="$dir/cg.out" "${DQB_CG_SERVER:-redis-server}" "$@"
