#!/usr/bin/python3
"""tests/partition/run.py: network partitions and failovers under load.

Each scenario builds a fresh network (net.py): Redis 7 primary + 2 replicas
+ 3 Sentinels, or a Redis Cluster of 3 primaries with a replica each, every
server in its own network namespace, and client processes (dqload: one
producer, one sync consumer and one libevent consumer on each side, A and
B, each in its own namespace).  Under steady load it injects one fault,
heals it, waits for the old primary to rejoin as a replica, stops the load,
drains the queue from side B and hands the histories to check.py.

  run.py --dqload PATH --clockshift PATH [--mode default|wait|durable]
         [--scenario TOPOLOGY:FAULT]... [--long] [--repeat N] [--json FILE]
         [--keep] [--expect-safe]

Faults: none, jepsen (primary + side A cut from the rest), client (side
A's consumers cut from the primary for longer than a lease), asym (the
primary's packets to its peers dropped), pause (SIGSTOP past the failover
timeout), clock (a failover, then the promoted primary's clock 2 leases
ahead).  Modes: default; wait (pushes WAIT for 1 replica); durable (the
library's durable mode, servers with min-replicas-to-write 1).
Prints one line per run and a table; exits 1 when a run failed to complete
(setup, drain), a history was malformed, a run without a fault lost an
acked push, had overlapping leases or re-ran an acked job (with
--expect-safe: any run did, overlapping leases under a clock jump
excepted); exits 77 when not root.  bash run.sh wraps
this with a build of its own.
"""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402
import net as netmod  # noqa: E402

QUEUE = 'jq'
LEASE_MS = 3000
WORK_MS = 250       # each poll's jobs are held this long, then acked
SIDES = ('A', 'B')


class Timing:
    def __init__(self, long, mode):
        k = 4 if long else 1
        self.warm, self.post = 2.0 * k, 2.0 * k
        self.hold = (6.0 if not long else 15.0) + \
            (detect_ms(mode) - 1000) / 1000
        self.drain_ms = LEASE_MS + 15000


def now_ns():
    return time.monotonic_ns()


# ---- servers ---------------------------------------------------------------

def write_conf(path, lines):
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


def redis_conf(net, node, extra):
    d = os.path.join(net.workdir, node)
    os.makedirs(d, exist_ok=True)
    conf = os.path.join(d, 'redis.conf')
    write_conf(conf, ['bind %s 127.0.0.1' % net.ip(node), 'port 6379',
                      'protected-mode no', 'save ""', 'appendonly no',
                      'dir ' + d, 'repl-diskless-sync yes',
                      'repl-diskless-sync-delay 0',
                      'logfile ' + os.path.join(d, 'redis.log')] + extra)
    return conf


def cli(net, node, *args, port=6379, timeout=3):
    return net.run(node, ['redis-cli', '-h', '127.0.0.1', '-p', str(port)] +
                   list(args), timeout=timeout).strip()


def wait_for(what, fn, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if fn():
                return True
        except Exception:  # a server not up yet, a timeout of redis-cli
            pass
        time.sleep(0.1)
    raise RuntimeError('timed out waiting for ' + what)


def role(net, node):
    out = cli(net, node, 'ROLE', timeout=2)
    return out.split('\n')[0] if out else ''


class Sentinel:
    kind = 'sentinel'
    data = ('n1', 'n2', 'n3')
    sentinels = ('s1', 's2', 's3')

    def nodes(self):
        return self.data + self.sentinels

    def start(self, net, mode, env_of):
        for node in self.data:
            extra = [] if node == 'n1' else ['replicaof %s 6379' % net.ip('n1')]
            extra += mode_conf(mode, len(self.data) - 1)
            net.start(node, ['redis-server', redis_conf(net, node, extra)],
                      node, env=env_of(node))
        for node in self.sentinels:
            net.start(node, ['redis-server',
                             self.sentinel_conf(net, node, mode),
                             '--sentinel'], node)
        wait_for('replicas', lambda: 'connected_slaves:2' in
                 cli(net, 'n1', 'INFO', 'replication'), 20)
        wait_for('sentinels', lambda: all(
            self.sentinel_ready(net, s) for s in self.sentinels), 30)
        self.primary = 'n1'

    def sentinel_ready(self, net, s):
        """s knows the other two Sentinels and both replicas (it learns
        replicas from the primary's INFO every 10 s: a failover before
        that finds no replica to promote)."""
        out = cli(net, s, 'SENTINEL', 'master', 'm', port=26379)
        return 'num-other-sentinels\n2' in out and 'num-slaves\n2' in out

    def sentinel_conf(self, net, node, mode):
        d = os.path.join(net.workdir, node)
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, 'sentinel.conf')
        write_conf(conf, ['bind %s 127.0.0.1' % net.ip(node), 'port 26379',
                          'protected-mode no', 'dir ' + d,
                          'logfile ' + os.path.join(d, 'sentinel.log'),
                          'sentinel resolve-hostnames no',
                          'sentinel monitor m %s 6379 2' % net.ip('n1'),
                          'sentinel down-after-milliseconds m %d'
                          % detect_ms(mode),
                          'sentinel failover-timeout m 3000'])
        return conf

    def uri(self, net):
        return 'redis+sentinel://%s/m' % ','.join(
            '%s:26379' % net.ip(s) for s in self.sentinels)

    def master_of(self, net, s='s2'):
        out = cli(net, s, 'SENTINEL', 'get-master-addr-by-name', 'm',
                  port=26379).split('\n')
        return next((n for n in self.data if net.ip(n) == out[0]), None)

    def converged(self, net):
        """One primary that every Sentinel names, with both others as its
        replicas (the old primary has rejoined)."""
        masters = {self.master_of(net, s) for s in self.sentinels}
        if len(masters) != 1 or None in masters:
            return False
        m = masters.pop()
        return role(net, m) == 'master' and all(
            role(net, n) == 'slave' for n in self.data if n != m)

    def victim(self, net):
        return self.master_of(net)

    def failover(self, net, old):
        cli(net, 's1', 'SENTINEL', 'FAILOVER', 'm', port=26379)

    def peers(self, victim):
        return [n for n in self.nodes() if n != victim]


class Cluster:
    kind = 'cluster'
    data = ('c1', 'c2', 'c3', 'c4', 'c5', 'c6')

    def nodes(self):
        return self.data

    def start(self, net, mode, env_of):
        for node in self.data:
            extra = ['cluster-enabled yes',
                     'cluster-node-timeout %d' % detect_ms(mode),
                     'cluster-config-file nodes.conf',
                     'cluster-allow-replica-migration no'] + mode_conf(mode, 1)
            net.start(node, ['redis-server', redis_conf(net, node, extra)],
                      node, env=env_of(node))
        for node in self.data:
            wait_for(node, lambda: cli(net, node, 'PING') == 'PONG', 10)
        net.run('c1', ['redis-cli', '--cluster', 'create'] +
                ['%s:6379' % net.ip(n) for n in self.data] +
                ['--cluster-replicas', '1', '--cluster-yes'], timeout=30,
                check=True)
        wait_for('cluster ok', lambda: all(
            'cluster_state:ok' in cli(net, n, 'CLUSTER', 'INFO')
            for n in self.data), 30)
        wait_for('replicas synced', lambda: all(
            self.synced(net, n) for n in self.data), 30)

    def synced(self, net, node):
        info = cli(net, node, 'INFO', 'replication')
        return 'role:master' in info or 'master_link_status:up' in info

    def uri(self, net):
        return 'redis+cluster://%s' % ','.join(
            '%s:6379' % net.ip(n) for n in self.data)

    def victim(self, net):
        """The primary of the queue's slot."""
        slot = int(cli(net, 'c1', 'CLUSTER', 'KEYSLOT', '{%s}' % QUEUE))
        for line in cli(net, 'c1', 'CLUSTER', 'NODES').splitlines():
            f = line.split()
            if 'master' not in f[2]:
                continue
            for r in f[8:]:
                lo, _, hi = r.partition('-')
                if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                    ip = f[1].split(':')[0]
                    return next(n for n in self.data if net.ip(n) == ip)
        raise RuntimeError('no owner of slot %d' % slot)

    def peers(self, victim):
        return [n for n in self.data if n != victim]

    def failover(self, net, old):
        oid = cli(net, old, 'CLUSTER', 'MYID')
        for line in cli(net, old, 'CLUSTER', 'NODES').splitlines():
            f = line.split()
            if f[3] == oid:
                ip = f[1].split(':')[0]
                node = next(n for n in self.data if net.ip(n) == ip)
                cli(net, node, 'CLUSTER', 'FAILOVER')
                return

    def converged(self, net):
        roles = [role(net, n) for n in self.data]
        return roles.count('master') == 3 and all(
            'cluster_state:ok' in cli(net, n, 'CLUSTER', 'INFO') and
            self.synced(net, n) for n in self.data)


def detect_ms(mode):
    """How long a primary may be silent before the Sentinels (down-after-
    milliseconds) or the other primaries (cluster-node-timeout) fail it
    over: above the durable mode's min-replicas-max-lag, which must be
    shorter (in whole seconds)."""
    return 3000 if mode == 'durable' else 1000


def mode_conf(mode, replicas):
    """The durable mode's server settings: a primary that cannot reach its
    replicas stops taking writes before one of them is promoted."""
    if mode == 'durable':
        return ['min-replicas-to-write %d' % replicas, 'min-replicas-max-lag 2']
    return []


# ---- clients -------------------------------------------------------------

CLIENTS = [('A', 'producer'), ('A', 'sync'), ('A', 'event'),
           ('B', 'producer'), ('B', 'sync'), ('B', 'event')]


def client_node(side, role):
    return '%s%s' % (side.lower(), role[0])


def wait_replicas(mode, topo):
    """dqload's WAIT argument: the durable mode waits for every replica
    of the primary (Sentinel may promote either of its two)."""
    n = len(topo.data) - 1 if topo.kind == 'sentinel' else 1
    return {'default': '0', 'wait': '1', 'durable': 'd%d' % n}[mode]


def pace(fault):
    """dqload's DELAYS and EVERY_MS: jobs due 0..3 s later, one every 20 ms
    per producer (more than the consumers take: a backlog builds up), but
    for the clock jump jobs due at once, one every 100 ms, which the
    consumers keep up with.  Expired leases are due again at their
    deadline, behind every job due before it: only with no backlog are the
    jobs whose leases the jump ended the next ones polled, while their
    holders still run them.  (With a backlog the holders have acked by
    then, and the jump costs nothing.)"""
    return ['1', '100'] if fault == 'clock' else ['4', '20']


def start_clients(net, topo, args, hist, run_ms, fault):
    procs = []
    for side, role_ in CLIENTS:
        node = client_node(side, role_)
        name = '%s-%s' % (side, role_[0])
        procs.append((name, net.start(node, [
            args.dqload, role_, topo.uri(net), QUEUE,
            os.path.join(hist, name + '.hist'), name, str(run_ms),
            wait_replicas(args.mode, topo), str(LEASE_MS), str(WORK_MS)] +
            pace(fault), name)))
    return procs


def drain(net, topo, args, hist, timing):
    p = net.start('bd', [args.dqload, 'drain', topo.uri(net), QUEUE,
                         os.path.join(hist, 'drain.hist'), 'drain',
                         str(timing.drain_ms), '0', '60000'], 'drain')
    try:
        return p.wait(timing.drain_ms / 1000 + 10) == 0
    except Exception:
        return False


# ---- faults ----------------------------------------------------------------

def side_nodes(side):
    return [client_node(side, r) for s, r in CLIENTS if s == side]


def fault_jepsen(net, topo, t, ev):
    """The primary and side A's clients cut off from everyone else."""
    v = topo.victim(net)
    a = [v] + side_nodes('A')
    b = [n for n in topo.peers(v)] + side_nodes('B') + ['bd']
    ev('cut %s+A | rest' % v)
    net.cut(a, b)
    time.sleep(t.hold)
    net.heal()
    ev('heal')


def fault_client(net, topo, t, ev):
    """Side A's consumers cut from the primary mid-lease, longer than a
    lease."""
    v = topo.victim(net)
    ev('cut A-s,A-e | %s' % v)
    net.cut(['as', 'ae'], [v])
    time.sleep(max(t.hold, LEASE_MS / 1000 + 2))
    net.heal()
    ev('heal')


def fault_asym(net, topo, t, ev):
    """The primary's packets to its replicas and Sentinels dropped; theirs
    to it still arrive."""
    v = topo.victim(net)
    ev('drop %s -> peers' % v)
    net.cut([v], topo.peers(v), both=False)
    time.sleep(t.hold)
    net.heal()
    ev('heal')


def fault_pause(net, topo, t, ev):
    """The primary frozen (SIGSTOP) past the failover timeout, resumed."""
    v = topo.victim(net)
    p = dict(net.procs)[v]
    ev('SIGSTOP %s' % v)
    p.send_signal(signal.SIGSTOP)
    time.sleep(t.hold)
    p.send_signal(signal.SIGCONT)
    ev('SIGCONT')


def clock_file(net, node):
    return os.path.join(net.workdir, node + '.clock')


def fault_clock(net, topo, t, ev):
    """A failover (SENTINEL FAILOVER, or CLUSTER FAILOVER on the replica),
    then the promoted primary's wall clock jumps ahead by two leases."""
    old = topo.victim(net)
    ev('failover from %s' % old)
    topo.failover(net, old)
    wait_for('promotion', lambda: topo.victim(net) not in (old, None), 20)
    new = topo.victim(net)
    time.sleep(1.0)
    ev('clock of %s +%d ms' % (new, 2 * LEASE_MS))
    with open(clock_file(net, new), 'w') as f:
        f.write('%d\n' % (2 * LEASE_MS))
    time.sleep(t.hold)


def clock_env(net, args, fault):
    """Data nodes run with the clock shim for the clock fault."""
    if fault != 'clock':
        return lambda node: None

    def env(node):
        with open(clock_file(net, node), 'w') as f:
            f.write('0\n')
        return {'LD_PRELOAD': args.clockshift,
                'DQJ_CLOCK_FILE': clock_file(net, node)}
    return env


def fault_none(net, topo, t, ev):
    time.sleep(t.hold)


FAULTS = {'none': fault_none, 'jepsen': fault_jepsen, 'client': fault_client,
          'asym': fault_asym, 'pause': fault_pause, 'clock': fault_clock}
SCENARIOS = ['sentinel:none', 'sentinel:jepsen', 'sentinel:client',
             'sentinel:asym', 'sentinel:pause', 'sentinel:clock',
             'cluster:jepsen']
# --long: the cluster under every fault too
LONG_EXTRA = ['cluster:none', 'cluster:client', 'cluster:asym',
              'cluster:pause', 'cluster:clock']


# ---- one run ---------------------------------------------------------------

def run_one(args, scenario, timing):
    kind, fault = scenario.split(':')
    topo = Sentinel() if kind == 'sentinel' else Cluster()
    work = tempfile.mkdtemp(prefix='dqj-%s-%s-' % (kind, fault))
    hist = os.path.join(work, 'hist')
    os.makedirs(hist)
    net = netmod.Net(work)
    events = open(os.path.join(hist, 'events'), 'w')

    def ev(what):
        events.write('%d %s\n' % (now_ns(), what))
        events.flush()

    ok = False
    try:
        net.setup_bridge()
        for node in list(topo.nodes()) + \
                [client_node(s, r) for s, r in CLIENTS] + ['bd']:
            net.add_node(node)
        topo.start(net, args.mode, clock_env(net, args, fault))
        run_ms = int((timing.warm + timing.hold + timing.post + 25) * 1000)
        clients = start_clients(net, topo, args, hist, run_ms, fault)
        time.sleep(timing.warm)
        ev('fault ' + fault)
        FAULTS[fault](net, topo, timing, ev)
        wait_for('rejoin', lambda: topo.converged(net), 20)
        ev('converged')
        time.sleep(timing.post)
        net.stop_procs(clients)
        ev('stopped')
        ok = drain(net, topo, args, hist, timing)
        ev('drained' if ok else 'drain failed')
    except Exception as e:  # reported as a failed run; teardown follows
        print('%s: %s' % (scenario, e), file=sys.stderr)
    finally:
        events.close()
        net.teardown()
    res = check.check_dir(hist)
    res['scenario'], res['mode'], res['completed'] = scenario, args.mode, ok
    if ok and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        res['workdir'] = work
    return res


def unsafe(res):
    """A lost acked push, an acked job run again, or overlapping leases
    (but under a clock jump, which shortens the leases the jumping server
    granted: no mode can hold those, and the checker counts them)."""
    clock = res['scenario'].endswith(':clock')
    return res['lost'] or res['acked_rerun'] or \
        (res['overlap'] and not clock)


def failed(args, res):
    """A run that did not complete, a malformed history, any violation
    without a fault, or any with --expect-safe."""
    return (not res['completed']) or res['malformed'] > 0 or \
        bool(unsafe(res)) and (args.expect_safe or
                               res['scenario'].endswith(':none'))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--dqload', required=True)
    ap.add_argument('--clockshift', help='the clock shim (clockshift.c)')
    ap.add_argument('--mode', default='default',
                    choices=['default', 'wait', 'durable'])
    ap.add_argument('--scenario', action='append')
    ap.add_argument('--long', action='store_true')
    ap.add_argument('--repeat', type=int, default=1)
    ap.add_argument('--json')
    ap.add_argument('--keep', action='store_true')
    ap.add_argument('--expect-safe', action='store_true')
    args = ap.parse_args()
    if os.geteuid() != 0:
        print('partition: needs root (network namespaces); skipped')
        return 77
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, f: sys.exit(128 + s))
    netmod.reap_stale()
    timing = Timing(args.long, args.mode)
    results, bad = [], 0
    for _ in range(args.repeat):
        for sc in args.scenario or SCENARIOS + (LONG_EXTRA if args.long
                                                 else []):
            t0 = time.monotonic()
            res = run_one(args, sc, timing)
            res['seconds'] = round(time.monotonic() - t0, 1)
            print(check.summary_line(res), flush=True)
            results.append(res)
            bad += failed(args, res)
    print(check.table(results))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
