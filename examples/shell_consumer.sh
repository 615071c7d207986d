#!/bin/sh
# shell_consumer.sh - a worker written in shell, on `delayq consume`.
#
# `delayq consume` runs a command for every job as it comes due, with the
# payload on stdin and DELAYQ_JOB_ID / DELAYQ_ATTEMPT / DELAYQ_QUEUE in the
# environment.  Exit 0 acks the job; anything else retries it with
# exponential backoff until --max-attempts, then dead-letters it.
#
# Here the jobs are "send a reminder mail" (payload: an address); sending
# is appending a line to $OUTBOX.  Addresses ending in .invalid bounce.
#
# usage: examples/shell_consumer.sh           consume until Ctrl-C
#        examples/shell_consumer.sh --demo    push three jobs (one bounces),
#                                             handle them, show the result
#
# Environment:
#   DELAYQ        the delayq binary (default: delayq on PATH)
#   DELAYQ_URI    Redis, as for delayq (default redis://127.0.0.1:6379)
#   DELAYQ_QUEUE  queue (default: reminders)
#   OUTBOX        where "mails" go (default: ./outbox.txt)
set -eu

DELAYQ=${DELAYQ:-delayq}
DELAYQ_QUEUE=${DELAYQ_QUEUE:-reminders}
OUTBOX=${OUTBOX:-./outbox.txt}
export DELAYQ_QUEUE OUTBOX

# The handler: one shell snippet per job (run with sh -c, no eval of the
# payload: it is data read from stdin).
handler='
    to=$(cat)
    case $to in
    *.invalid) echo "attempt $DELAYQ_ATTEMPT: $to bounced" >&2; exit 1 ;;
    esac
    echo "mail to $to" >>"$OUTBOX"
'

# --max-attempts 2 with --backoff 200ms: a bouncing address is tried twice,
# 200 ms apart, then dead-lettered for an operator to look at.
consume() {
    "$DELAYQ" consume --concurrency 4 --lease 30s --max-attempts 2 \
        --backoff 200ms "$@" -- sh -c "$handler"
}

if [ "${1:-}" = "--demo" ]; then
    "$DELAYQ" push --id reminder-alice 'alice@example.com' --in 200ms
    "$DELAYQ" push --id reminder-bob 'bob@example.com'
    "$DELAYQ" push --id reminder-eve 'eve@mail.invalid'
    # 4 deliveries: alice, bob, and eve twice.  Bounded by --max-jobs.
    consume --max-jobs 4
    "$DELAYQ" stats
    "$DELAYQ" list dead
else
    consume
fi
