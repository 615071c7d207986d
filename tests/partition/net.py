"""tests/partition/net.py: network namespaces, a bridge, nftables cuts and
the processes started in them, for the partition harness (run.py).

Every node gets its own namespace "dqj<pid>-<node>" with one veth ("eth0",
10.77.0.N/24) whose peer sits on a bridge in the run's own bridge namespace
"dqj<pid>-br": the addresses exist only inside these namespaces, and the
host's own namespace gets nothing (the veth pairs are created directly in
theirs).  A cut is nftables rules in the nodes' namespaces (table inet dqj,
input and output chains) that drop packets to or from the other side;
healing flushes them.  teardown() stops every process this run started (by
pid, SIGCONT first for a stopped one), then deletes its namespaces, which
takes their veths, the bridge and the nft tables with them.
"""
import os
import signal
import subprocess
import time

PREFIX = 'dqj'
SUBNET = '10.77.0.'


def sh(argv, check=True, timeout=10, stdin=None):
    r = subprocess.run(argv, input=stdin, capture_output=True, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError('%s: %s' % (' '.join(argv), r.stderr.strip()))
    return r.stdout


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_stale():
    """Deletes namespaces left by an earlier run of this harness whose
    process is gone (a run killed with SIGKILL cannot clean up itself)."""
    for line in sh(['ip', 'netns', 'list'], check=False).splitlines():
        name = line.split()[0] if line.split() else ''
        owner = name[len(PREFIX):].split('-')[0]
        if name.startswith(PREFIX) and owner.isdigit() and \
                not pid_alive(int(owner)):
            sh(['ip', 'netns', 'del', name], check=False)


NFT_TABLE = '''table inet dqj {
  chain in { type filter hook input priority 0; policy accept; }
  chain out { type filter hook output priority 0; policy accept; }
}
'''


class Net:
    def __init__(self, workdir):
        self.tag = '%s%d' % (PREFIX, os.getpid())
        self.workdir = workdir
        self.nodes = {}      # node name -> (namespace, address)
        self.procs = []      # (name, Popen)
        self.bridge = self.tag + '-br'
        self.made = []       # namespaces created, in order

    def ns(self, node):
        return self.nodes[node][0]

    def ip(self, node):
        return self.nodes[node][1]

    def _netns_add(self, name):
        sh(['ip', 'netns', 'add', name])
        self.made.append(name)
        sh(['ip', '-n', name, 'link', 'set', 'lo', 'up'])

    def setup_bridge(self):
        self._netns_add(self.bridge)
        sh(['ip', '-n', self.bridge, 'link', 'add', 'br0', 'type', 'bridge'])
        sh(['ip', '-n', self.bridge, 'link', 'set', 'br0', 'up'])

    def add_node(self, node):
        n = len(self.nodes) + 1
        name, addr = '%s-%s' % (self.tag, node), SUBNET + str(n)
        self._netns_add(name)
        peer = 'v%d' % n
        sh(['ip', 'link', 'add', 'eth0', 'netns', name, 'type', 'veth',
            'peer', 'name', peer, 'netns', self.bridge])
        sh(['ip', '-n', self.bridge, 'link', 'set', peer, 'master', 'br0'])
        sh(['ip', '-n', self.bridge, 'link', 'set', peer, 'up'])
        sh(['ip', '-n', name, 'addr', 'add', addr + '/24', 'dev', 'eth0'])
        sh(['ip', '-n', name, 'link', 'set', 'eth0', 'up'])
        self.nft(node, NFT_TABLE)
        self.nodes[node] = (name, addr)
        return addr

    def nft(self, node, script):
        ns = self.nodes[node][0] if node in self.nodes else \
            '%s-%s' % (self.tag, node)
        sh(['ip', 'netns', 'exec', ns, 'nft', '-f', '-'], stdin=script)

    def cut(self, side_a, side_b, both=True):
        """Drops every packet between side_a and side_b; with both=False
        only those that go from side_a to side_b."""
        rules = {}
        for a in side_a:
            for b in side_b:
                rules.setdefault(a, []).append(
                    'add rule inet dqj out ip daddr %s drop' % self.ip(b))
                rules.setdefault(b, []).append(
                    'add rule inet dqj in ip saddr %s drop' % self.ip(a))
                if both:
                    rules[a].append('add rule inet dqj in ip saddr %s drop'
                                    % self.ip(b))
                    rules[b].append('add rule inet dqj out ip daddr %s drop'
                                    % self.ip(a))
        for node, lines in rules.items():
            self.nft(node, '\n'.join(lines) + '\n')

    def heal(self):
        for node in self.nodes:
            self.nft(node, 'flush chain inet dqj in\n'
                           'flush chain inet dqj out\n')

    def start(self, node, argv, name, env=None):
        out = open(os.path.join(self.workdir, name + '.out'), 'ab')
        full = ['ip', 'netns', 'exec', self.ns(node)]
        if env:
            full += ['env'] + ['%s=%s' % kv for kv in env.items()]
        p = subprocess.Popen(full + argv, stdout=out, stderr=out,
                             stdin=subprocess.DEVNULL)
        out.close()
        self.procs.append((name, p))
        return p

    def run(self, node, argv, timeout=5, check=False):
        return sh(['ip', 'netns', 'exec', self.ns(node)] + argv,
                  check=check, timeout=timeout)

    def stop_procs(self, procs, grace=3.0):
        for _, p in procs:
            if p.poll() is None:
                for sig in (signal.SIGCONT, signal.SIGTERM):
                    try:
                        p.send_signal(sig)
                    except ProcessLookupError:
                        pass
        deadline = time.monotonic() + grace
        for _, p in procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def teardown(self):
        self.stop_procs(self.procs)
        for name in reversed(self.made):
            sh(['ip', 'netns', 'del', name], check=False)
        self.made = []
