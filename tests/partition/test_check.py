#!/usr/bin/python3
"""tests/partition/test_check.py: check.py on histories with planted
violations: a clean history reports nothing, and each planted violation
is found, counted once and named."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402

MS = 1000000


def write(d, name, lines):
    with open(os.path.join(d, name + '.hist'), 'w') as f:
        f.write('# %s role test\n' % name)
        for t, rest in lines:
            f.write('%d %s %s\n' % (t * MS, name, rest))


def push(t, jid, typ='ok'):
    return [(t, 'invoke push ' + jid), (t + 1, '%s push %s 0' % (typ, jid))]


def work(t, jid, tok, hold=100, ack='ok'):
    """A poll of jid at t, held hold ms, then its ack."""
    return [(t, 'invoke poll'), (t + 1, 'ok poll %s/%s/1' % (jid, tok)),
            (t + hold, 'invoke ack %s %s' % (jid, tok)),
            (t + hold + 1, '%s ack %s %s 0' % (ack, jid, tok))]


def run(producer, consumers):
    with tempfile.TemporaryDirectory() as d:
        write(d, 'A-p', producer)
        for name, lines in consumers.items():
            write(d, name, lines)
        return check.check_dir(d)


def clean():
    prod = push(0, 'j1') + push(10, 'j2') + push(20, 'j3', 'info')
    cons = {'A-s': work(30, 'j1', 't1') + work(200, 'j2', 't2'),
            'B-s': [(5, 'invoke poll'), (6, 'ok poll')] + work(40, 'j3', 't3')}
    return prod, cons


def expect(name, res, **want):
    got = {k: res[k] for k in want}
    if got != want:
        print('FAIL %s: want %s, got %s (%s)' % (name, want, got,
                                                  res['examples']))
        return 1
    print('ok   %s' % name)
    return 0


def main():
    bad = 0
    prod, cons = clean()
    bad += expect('clean', run(prod, cons), lost=0, overlap=0,
                  acked_rerun=0, sequential=0, pushes_ok=2, malformed=0)

    prod, cons = clean()   # an acked push nobody ever got
    bad += expect('lost', run(prod + push(300, 'j9'), cons), lost=1,
                  overlap=0, acked_rerun=0, sequential=0)

    prod, cons = clean()   # B holds j1 while A still does
    cons['B-s'] += work(50, 'j1', 'tx')
    bad += expect('overlap', run(prod, cons), overlap=1, acked_rerun=0,
                  sequential=0, lost=0)

    prod, cons = clean()   # j1 polled again after A's ack returned ok
    cons['B-s'] += work(500, 'j1', 'ty')
    bad += expect('acked rerun', run(prod, cons), acked_rerun=1,
                  overlap=0, sequential=0)

    prod, cons = clean()   # A's ack of j2 fails; B gets j2 later
    cons['A-s'] = work(30, 'j1', 't1') + work(200, 'j2', 't2', ack='info')
    cons['B-s'] += work(600, 'j2', 'tz')
    bad += expect('sequential', run(prod, cons), sequential=1,
                  acked_rerun=0, overlap=0)

    prod, cons = clean()   # A-s holds j2 until it dies: overlap with B
    cons['A-s'] = work(30, 'j1', 't1') + \
        [(200, 'invoke poll'), (201, 'ok poll j2/t2/1'), (900, 'invoke poll')]
    cons['B-s'] += work(700, 'j2', 'tw')
    bad += expect('unended hold', run(prod, cons), overlap=1)

    prod, cons = clean()   # side B's consumer: 2 s without a success
    cons['B-s'] += [(2000, 'invoke poll'), (2500, 'info poll -10'),
                    (4300, 'invoke poll'), (4301, 'ok poll')]
    res = run(prod, cons)
    bad += expect('unavailable', res, unavail_ms={'A': 100, 'B': 4301 - 141})

    prod, cons = clean()
    cons['B-s'] += [(900, 'garbage line')]
    bad += expect('malformed', run(prod, cons), malformed=1)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
