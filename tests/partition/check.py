#!/usr/bin/python3
"""tests/partition/check.py: reads the histories of one partition run (the
*.hist files dqload writes, one per client process, and the harness's
"events") and reports what the queue did wrong:

  lost         acknowledged pushes (push ok) never delivered to anyone,
               the final drain included
  acked_rerun  jobs delivered again by a poll invoked after an ack of the
               job had returned ok
  overlap      jobs held by two deliveries at overlapping real times (a hold
               runs from the poll's ok to the ack's invoke, the lapse, or
               the holder's last logged event)
  sequential   other jobs delivered more than once (one after the other)
  unavail_ms   per side (the process name's part before '-'): the longest
               time one of its processes went without a successful call

Every count is of distinct job ids.  Times are CLOCK_MONOTONIC ns, one
clock for all the processes of the host.

  check.py DIR [--json]     exit 0 always (the harness decides)
"""
import json
import os
import sys


class Delivery:
    def __init__(self, proc, jid, token, t_invoke, t_ok):
        self.proc, self.id, self.token = proc, jid, token
        self.t_invoke, self.t_ok, self.t_end = t_invoke, t_ok, None


class History:
    def __init__(self):
        self.pushes = {}        # id -> 'ok' | 'info' | 'fail'
        self.deliveries = []    # Delivery, in file order
        self.acks_ok = {}       # id -> earliest ack ok time
        self.ok_times = {}      # proc -> [times of ok events]
        self.last = {}          # proc -> time of its last event
        self.malformed = 0


def parse_line(h, line, state):
    f = line.split()
    if len(f) < 3 or line.startswith('#'):
        return
    t, proc, typ = int(f[0]), f[1], f[2]
    if typ not in ('invoke', 'ok', 'fail', 'info', 'lapse'):
        raise ValueError(typ)
    h.last[proc] = t
    op = f[3] if len(f) > 3 else ''
    if typ == 'invoke' and op == 'poll':
        state[proc] = t
    elif typ == 'ok':
        h.ok_times.setdefault(proc, []).append(t)
    if op == 'push' and typ != 'invoke':
        prev = h.pushes.get(f[4])
        h.pushes[f[4]] = 'ok' if 'ok' in (prev, typ) else typ
    elif op == 'poll' and typ == 'ok':
        for j in f[4:]:
            jid, token = j.split('/')[:2]
            h.deliveries.append(Delivery(proc, jid, token,
                                         state.get(proc, t), t))
    elif typ == 'lapse' or (typ == 'invoke' and op == 'ack'):
        jid, token = (f[3], f[4]) if typ == 'lapse' else (f[4], f[5])
        end_hold(h, proc, jid, token, t)
    elif op == 'ack' and typ == 'ok':
        h.acks_ok[f[4]] = min(t, h.acks_ok.get(f[4], t))


def end_hold(h, proc, jid, token, t):
    for d in reversed(h.deliveries):
        if d.proc == proc and d.id == jid and d.token == token:
            if d.t_end is None:
                d.t_end = t
            return


def read_dir(path):
    h = History()
    for name in sorted(os.listdir(path)):
        if not name.endswith('.hist'):
            continue
        state = {}
        with open(os.path.join(path, name)) as f:
            for line in f:
                try:
                    parse_line(h, line, state)
                except (ValueError, IndexError):
                    h.malformed += 1
    for d in h.deliveries:   # a holder that never acked held it to its end
        if d.t_end is None:
            d.t_end = h.last.get(d.proc, d.t_ok)
    return h


def by_id(deliveries):
    out = {}
    for d in deliveries:
        out.setdefault(d.id, []).append(d)
    return out


def overlaps(ds):
    ds = sorted(ds, key=lambda d: d.t_ok)
    return any(ds[i].t_end > ds[j].t_ok
               for i in range(len(ds)) for j in range(i + 1, len(ds)))


def reran_after_ack(h, jid, ds):
    t = h.acks_ok.get(jid)
    return t is not None and any(d.t_invoke > t for d in ds)


def unavailability(h):
    sides = {}
    for proc, last in h.last.items():
        if proc == 'drain':
            continue
        ts = sorted(h.ok_times.get(proc, []))
        first = min([last] + ts)
        gaps = [b - a for a, b in zip([first] + ts, ts + [last])]
        side = proc.split('-')[0]
        sides[side] = max(sides.get(side, 0), max(gaps) // 1000000)
    return sides


def check_history(h):
    delivered = by_id(h.deliveries)
    lost = sorted(j for j, s in h.pushes.items()
                  if s == 'ok' and j not in delivered)
    rerun = sorted(j for j, ds in delivered.items()
                   if reran_after_ack(h, j, ds))
    overlap = sorted(j for j, ds in delivered.items() if overlaps(ds))
    seq = sorted(j for j, ds in delivered.items() if len(ds) > 1 and
                 j not in overlap and j not in rerun)
    return {'pushes_ok': sum(s == 'ok' for s in h.pushes.values()),
            'pushes_unknown': sum(s == 'info' for s in h.pushes.values()),
            'deliveries': len(h.deliveries), 'acked': len(h.acks_ok),
            'lost': len(lost), 'acked_rerun': len(rerun),
            'overlap': len(overlap), 'sequential': len(seq),
            'unavail_ms': unavailability(h), 'malformed': h.malformed,
            'examples': {'lost': lost[:5], 'acked_rerun': rerun[:5],
                         'overlap': overlap[:5], 'sequential': seq[:5]}}


def check_dir(path):
    return check_history(read_dir(path))


def summary_line(r):
    u = ' '.join('%s=%d' % kv for kv in sorted(r['unavail_ms'].items()))
    return ('%-18s %-8s %s pushes_ok=%d lost=%d overlap=%d acked_rerun=%d '
            'sequential=%d unavail_ms[%s]%s' % (
                r.get('scenario', '?'), r.get('mode', '?'),
                'done' if r.get('completed', True) else 'INCOMPLETE',
                r['pushes_ok'], r['lost'], r['overlap'], r['acked_rerun'],
                r['sequential'], u,
                ' (%ss)' % r['seconds'] if 'seconds' in r else ''))


def table(results):
    rows = ['| mode | topology:fault | acked pushes | lost | overlapping '
            'leases | acked re-run | sequential redeliveries | unavailable '
            'ms (A / B) |', '|---|---|---|---|---|---|---|---|']
    for r in results:
        u = r['unavail_ms']
        rows.append('| %s | %s | %d | %d | %d | %d | %d | %s / %s |' % (
            r['mode'], r['scenario'], r['pushes_ok'], r['lost'],
            r['overlap'], r['acked_rerun'], r['sequential'],
            u.get('A', '-'), u.get('B', '-')))
    return '\n'.join(rows)


if __name__ == '__main__':
    res = check_dir(sys.argv[1])
    print(json.dumps(res, indent=1) if '--json' in sys.argv[2:]
          else summary_line(res))
