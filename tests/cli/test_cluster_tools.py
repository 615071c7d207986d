#!/usr/bin/env python3
"""The delayq tool and the Python binding over a Redis Cluster.

usage: test_cluster_tools.py PATH/TO/delayq [unittest args...]

Runs under `with_redis --cluster` (tests/support), which starts a private
3-primary cluster on 127.0.0.1 and passes a redis+cluster:// URI of its
primaries in $DQ_TEST_REDIS_URI; $DELAYQ_LIB names the build's libdelayq.so
for the binding.  Plain and partitioned queues, whose slots land on every
primary; `delayq stats` and `delayq web` list the queues of all of them.
A missing URI is a failure, never a skip.
"""
import http.client
import json
import os
import subprocess
import sys
import time
import unittest

DELAYQ = None
URI = None
TIMEOUT = 60


def run(args, uri=None, input=None):
    return subprocess.run([DELAYQ, "--uri", uri or URI] + list(args),
                          input=input, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=TIMEOUT)


def ok(args, uri=None, input=None):
    r = run(args, uri, input)
    if r.returncode != 0:
        raise AssertionError("delayq %s: exit %d: %s" % (
            " ".join(args), r.returncode, r.stderr.decode(errors="replace")))
    return r.stdout.decode()


def parted(n):
    return URI + ("&" if "?" in URI else "?") + "partitions=%d" % n


class CliOverCluster(unittest.TestCase):
    def roundtrip(self, uri, prefix):
        # 12 queues: their hash slots fall on every primary of 3.
        queues = ["%s-%d" % (prefix, i) for i in range(12)]
        for q in queues:
            out = ok(["-q", q, "push", "payload of " + q], uri)
            self.assertTrue(out.startswith("pushed "), out)
        for q in queues:
            line = ok(["-q", q, "poll"], uri).strip()
            jid, _, token, payload = line.split("\t", 3)
            self.assertEqual(payload, "payload of " + q)
            ok(["-q", q, "ack", jid, token], uri)
            stats = ok(["-q", q, "stats", "--json"], uri)
            self.assertIn('"inflight":0', stats.replace(" ", ""))

    def test_plain_queues(self):
        self.roundtrip(URI, "plain")

    def test_partitioned_queues(self):
        uri = parted(6)
        self.roundtrip(uri, "parted")
        # one queue, many jobs: spread over partitions, listed merged
        for i in range(20):
            ok(["-q", "wide", "push", "j%d" % i, "--id", "id%02d" % i], uri)
        listing = ok(["-q", "wide", "list"], uri)
        self.assertIn("scheduled jobs (from 0): 20", listing)
        # another partition count is refused, clearly
        r = run(["-q", "wide", "stats"], parted(5))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"partitions", r.stderr)

    def test_wait_is_woken_over_sharded_pubsub(self):
        for uri in (URI, parted(4)):
            q = "woken-%d" % len(uri)
            p = subprocess.Popen(
                [DELAYQ, "--uri", uri, "-q", q, "poll", "--wait", "20s"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(0.5)  # the waiter subscribes
            t0 = time.monotonic()
            ok(["-q", q, "push", "wake"], uri)
            out, err = p.communicate(timeout=TIMEOUT)
            took = time.monotonic() - t0
            self.assertEqual(p.returncode, 0, err)
            self.assertIn("wake", out.decode())
            # woken by the push, not by the 1 s wait cap
            self.assertLess(took, 0.9, "woken after %.3f s" % took)

    def test_consume(self):
        for uri, q in ((URI, "cons-plain"), (parted(4), "cons-parted")):
            for i in range(10):
                ok(["-q", q, "push", "c%d" % i], uri)
            r = subprocess.run(
                [DELAYQ, "--uri", uri, "-q", q, "consume", "--max-jobs",
                 "10", "--", "cat"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                timeout=TIMEOUT)
            self.assertEqual(r.returncode, 0, r.stderr)
            for i in range(10):
                self.assertIn(b"c%d" % i, r.stdout)


def crc16(data):
    """CRC16/XMODEM, Redis Cluster's key hash."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc


def third_of(tag):
    """Which of the three slot ranges `redis-cli --cluster create` gives
    three primaries (0-5460, 5461-10922, 10923-16383) the tag is in."""
    slot = crc16(tag.encode()) % 16384
    return 0 if slot <= 5460 else 1 if slot <= 10922 else 2


class QueuesOverCluster(unittest.TestCase):
    """Every queue of a namespace, wherever its slot lives: `delayq stats`
    without a queue and `delayq web`'s /api/queues (dq_queues)."""
    NS = "every"
    PLAIN = ["lq-%d" % i for i in range(9)]
    PARTED = "lq-parted"

    @classmethod
    def setUpClass(cls):
        thirds = sorted(third_of(q) for q in cls.PLAIN)
        assert set(thirds) == {0, 1, 2}, thirds  # on every primary
        for q in cls.PLAIN:
            ok(["-n", cls.NS, "-q", q, "push", "x"])
        assert len({third_of("%s#%d" % (cls.PARTED, p))
                    for p in range(6)}) > 1
        for i in range(12):
            ok(["-n", cls.NS, "-q", cls.PARTED, "push", "p%d" % i], parted(6))
        # another namespace's queue is not listed
        ok(["-n", cls.NS + "-other", "-q", "elsewhere", "push", "x"])

    def names(self):
        return sorted(self.PLAIN + [self.PARTED])

    def test_stats_lists_every_queue(self):
        out = ok(["-n", self.NS, "stats", "--json"])
        docs = [json.loads(x) for x in out.splitlines()]
        self.assertEqual([d["queue"] for d in docs], self.names())
        for d in docs:
            if d["queue"] != self.PARTED:
                self.assertEqual(d["due"], 1, d)
        # the partitioned client reads the partitioned queue; the plain
        # ones (another count) are named on stderr and left out
        r = run(["-n", self.NS, "stats", "--json"], parted(6))
        self.assertEqual(r.returncode, 0, r.stderr)
        docs = [json.loads(x) for x in r.stdout.decode().splitlines()]
        self.assertEqual([(d["queue"], d["due"]) for d in docs],
                         [(self.PARTED, 12)])
        self.assertEqual(r.stderr.count(b"(EINVAL)"), len(self.PLAIN))

    def test_web_lists_every_queue(self):
        p = subprocess.Popen(
            [DELAYQ, "--uri", URI, "-n", self.NS, "web", "--listen",
             "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            line = p.stdout.readline().decode()
            self.assertTrue(line.startswith("listening on http://127.0.0.1:"),
                            line)
            port = int(line.rsplit(":", 1)[1].strip().strip("/"))
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/api/queues")
            r = c.getresponse()
            body = r.read()
            c.close()
            self.assertEqual(r.status, 200, body)
            doc = json.loads(body)
        finally:
            p.terminate()
            p.communicate(timeout=TIMEOUT)
        self.assertTrue(doc["complete"])
        got = [(q["name"], q["partitioned"]) for q in doc["queues"]]
        self.assertEqual(got, [(n, n == self.PARTED) for n in self.names()])
        for q in doc["queues"]:
            if not q["partitioned"]:
                self.assertEqual(q["due"], 1, q)


class PythonOverCluster(unittest.TestCase):
    def test_binding(self):
        sys.path.insert(0, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), "..", "..", "bindings", "python"))
        import delayq
        for kw in ({}, {"partitions": 8}):
            with delayq.Client(URI, **kw) as c:
                q = "py-%d" % len(kw)
                ids = c.push_batch(q, [b"p%d" % i for i in range(300)])
                self.assertEqual(len(ids), 300)
                got = c.poll(q, max=1000)
                self.assertEqual(len(got), 300)
                res = c.ack_batch(q, got)
                self.assertEqual(res, [0] * 300)
                self.assertEqual(c.stats(q)["inflight"], 0)

    def test_queues(self):
        sys.path.insert(0, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), "..", "..", "bindings", "python"))
        import delayq
        ns, names = "pyq", QueuesOverCluster.PLAIN
        with delayq.Client(URI, namespace=ns) as c, \
                delayq.Client(URI, namespace=ns, partitions=6) as p:
            for q in names:
                c.push(q, b"x", delay_ms=60000)
            for i in range(12):
                p.push("lq-parted", b"p%d" % i, delay_ms=60000)
            got = c.queues()
            self.assertEqual(got, sorted(names + ["lq-parted"]))
            self.assertEqual(got.partitioned, {"lq-parted"})
            self.assertTrue(got.complete)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_cluster_tools.py PATH/TO/delayq")
    DELAYQ = sys.argv.pop(1)
    URI = os.environ.get("DQ_TEST_REDIS_URI")
    if not URI or not URI.startswith("redis+cluster://"):
        sys.exit("DQ_TEST_REDIS_URI is not a cluster URI: run under "
                 "with_redis --cluster (a failure, not a skip)")
    unittest.main()
