#!/usr/bin/env python3
"""Bulk fills for the web tests, through the Python binding (one process,
batches of 1000: 10,000 jobs in well under a second).

usage: fill.py URI COMMAND QUEUE ARGS...
  push QUEUE N DELAY_MS PREFIX   N jobs "PREFIX<i>", due after DELAY_MS
                                 (job i after DELAY_MS + i ms)
  dead QUEUE N PREFIX            N dead jobs "PREFIX<i>"
Prints nothing; exits non-zero on any failure.
"""
import sys

import delayq


def main():
    uri, cmd, queue = sys.argv[1:4]
    with delayq.Client(uri) as c:
        if cmd == "push":
            n, delay, prefix = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
            for lo in range(0, n, 1000):
                hi = min(n, lo + 1000)
                c.push_batch(queue, [b"x"] * (hi - lo),
                             delays_ms=[delay + i for i in range(lo, hi)],
                             ids=["%s%d" % (prefix, i) for i in range(lo, hi)])
        elif cmd == "dead":
            n, prefix = int(sys.argv[4]), sys.argv[5]
            for lo in range(0, n, 1000):
                hi = min(n, lo + 1000)
                c.push_batch(queue, [b"d"] * (hi - lo),
                             ids=["%s%d" % (prefix, i) for i in range(lo, hi)])
                got = 0
                while got < hi - lo:
                    jobs = c.poll(queue, max=1000, lease_ms=60000)
                    if not jobs:
                        raise SystemExit("fill dead: nothing due to poll")
                    for j in jobs:
                        j.nack(dead=True)
                    got += len(jobs)
        else:
            raise SystemExit("fill: unknown command " + cmd)


if __name__ == "__main__":
    main()
