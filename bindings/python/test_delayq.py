#!/usr/bin/env python3
"""Tests of the ctypes binding against a real, private redis-server.

Run by `meson test --suite python` with DELAYQ_LIB pointing at the build's
libdelayq.so and PYTHONPATH at this directory, under tests/support/
with_redis, which starts redis-server on a unix socket in a temp dir, passes
its URI and socket in DQ_TEST_REDIS_URI / DQ_TEST_REDIS_SOCKET and stops it
by pid.  A missing redis-server (or launcher) is a failure.
"""
import os
import socket
import threading
import time
import unittest

import delayq

SERVER = None


class RedisServer:
    """The private redis-server that tests/support/with_redis started for
    this run (its URI and unix socket come in the environment)."""

    def __init__(self):
        self.uri = os.environ.get("DQ_TEST_REDIS_URI")
        self.sock = os.environ.get("DQ_TEST_REDIS_SOCKET")
        if not self.uri or not self.sock:
            raise RuntimeError(
                "DQ_TEST_REDIS_URI / DQ_TEST_REDIS_SOCKET not set: run this "
                "suite under tests/support/with_redis (meson test does)")

    def command(self, *args):
        """Sends one command (RESP) and returns the raw reply bytes."""
        req = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            req += b"$%d\r\n%s\r\n" % (len(a), a)
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(self.sock)
            s.sendall(req)
            return s.recv(65536)

    def stop(self):
        """Nothing to do: with_redis stops the server by its pid."""


def setUpModule():
    global SERVER
    SERVER = RedisServer()


def tearDownModule():
    if SERVER is not None:
        SERVER.stop()


_seq = [0]


def new_queue(tag):
    _seq[0] += 1
    return "py-%s-%d" % (tag, _seq[0])


def wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    return pred()


class Base(unittest.TestCase):
    def setUp(self):
        self.c = delayq.Client(SERVER.uri)
        self.q = new_queue(self._testMethodName)

    def tearDown(self):
        self.c.close()


class TestLibrary(unittest.TestCase):
    def test_versions(self):
        self.assertRegex(delayq.version(), r"^\d+\.\d+\.\d+$")
        maj, mi, pa = (int(x) for x in delayq.version().split("."))
        self.assertEqual(delayq.version_number(), maj * 10000 + mi * 100 + pa)

    def test_error_table_comes_from_the_library(self):
        self.assertEqual(delayq.ERRORS["ESTALE"], -16)
        self.assertEqual(delayq.errname(-17), "ENOTFOUND")
        self.assertEqual(delayq.errname(-999), "UNKNOWN")
        self.assertEqual(delayq.strerror(-999), "unknown error")
        self.assertIn("stale", delayq.strerror(-16))
        # Every code the library knows maps to a specific exception class.
        for name, code in delayq.ERRORS.items():
            e = delayq._error(code)
            self.assertIsInstance(e, delayq.DelayqError)
            self.assertIsNot(type(e), delayq.DelayqError, name)
            self.assertEqual((e.code, e.name), (code, name))

    def test_every_public_function_is_declared(self):
        lib = delayq._lib
        for name, (res, args) in delayq._PROTOTYPES.items():
            fn = getattr(lib, name)
            self.assertEqual(fn.argtypes, args, name)
            self.assertEqual(fn.restype, res, name)
        # Every function of delayq.h / delayq-consumer.h has a prototype
        # here (the libevent API of delayq-event.h is left out on purpose).
        inc = os.environ.get("DELAYQ_INCLUDE")
        if inc:
            import re
            known = set(delayq._PROTOTYPES) | set(delayq._OPTIONAL_PROTOTYPES)
            for h in ("delayq.h", "delayq-consumer.h"):
                path = os.path.join(inc, h)
                if not os.path.exists(path):
                    continue
                with open(path) as f:
                    text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
                for name in re.findall(r"DQ_EXTERN[^;(]*?\b(dq_\w+)\s*\(",
                                       text):
                    self.assertIn(name, known, "%s: %s has no prototype"
                                  % (h, name))


class TestConnect(unittest.TestCase):
    def test_context_manager_closes(self):
        with delayq.Client(SERVER.uri) as c:
            self.assertFalse(c.closed)
            self.assertEqual(c.warnings, "")
        self.assertTrue(c.closed)
        with self.assertRaises(delayq.Closed) as cm:
            c.push("q", b"x")
        self.assertEqual(cm.exception.name, "ECLOSED")
        c.close()   # idempotent

    def test_unreachable(self):
        with self.assertRaises(delayq.ConnectionFailed) as cm:
            delayq.Client("unix:///nonexistent/dir/redis.sock")
        e = cm.exception
        self.assertEqual((e.code, e.name), (-10, "EIO"))
        self.assertIn("nonexistent", e.message)
        self.assertIsInstance(e, ConnectionError)

    def test_bad_uri(self):
        with self.assertRaises(delayq.BadURI) as cm:
            delayq.Client("http://example.com/")
        self.assertEqual(cm.exception.name, "EURI")
        self.assertIsInstance(cm.exception, delayq.InvalidArgument)

    def test_options(self):
        with self.assertRaises(delayq.InvalidArgument) as cm:
            delayq.Client(SERVER.uri, namespace="bad namespace!")
        self.assertIn("namespace", cm.exception.message)
        with self.assertRaises(delayq.InvalidArgument):
            delayq.Client(SERVER.uri, wait_cap_ms=1)
        with self.assertRaises(TypeError):
            delayq.Client(SERVER.uri, no_such_option=1)
        q = new_queue("ns")
        with delayq.Client(SERVER.uri, namespace="other",
                           connect_timeout_ms=1000, command_timeout_ms=2000,
                           max_payload=10) as c:
            c.push(q, b"0123456789")
            with self.assertRaises(delayq.PayloadTooBig):
                c.push(q, b"0123456789A")
            self.assertEqual(c.stats(q)["due"], 1)
        with delayq.Client(SERVER.uri) as c:
            self.assertEqual(c.stats(q)["due"], 0)


class TestPushPoll(Base):
    def test_push_poll_ack(self):
        jid, outcome = self.c.push(self.q, b"hello")
        self.assertEqual(outcome, delayq.PUSHED)
        self.assertRegex(jid, r"^[0-9A-Za-z]{14}$")
        jobs = self.c.poll(self.q, max=10, lease_ms=5000)
        self.assertEqual(len(jobs), 1)
        j = jobs[0]
        self.assertEqual((j.id, j.payload, j.attempt, j.queue),
                         (jid, b"hello", 1, self.q))
        self.assertRegex(j.token, r"^\d+$")
        self.assertGreater(j.lease_deadline_ms, j.due_ms)
        self.assertEqual(self.c.stats(self.q)["inflight"], 1)
        j.ack()
        self.assertEqual(self.c.stats(self.q),
                         {"scheduled": 0, "due": 0, "inflight": 0, "dead": 0,
                          "next_due_ms": -1})
        # A repeated ack with the same token finds its own done record:
        # the first one landed, so it succeeds again.
        j.ack()
        with self.assertRaises(delayq.NotFound) as cm:
            self.c.ack(self.q, jid + "-never", j.token)
        self.assertEqual(cm.exception.code, -17)
        self.assertIn(jid + "-never", cm.exception.message)

    def test_binary_payloads_with_nuls(self):
        payloads = [b"", b"\0", b"a\0b\0", bytes(range(256)) * 10,
                    "h\u00e9llo \u2603".encode()]
        ids = []
        for p in payloads:
            ids.append(self.c.push(self.q, p)[0])
        self.c.push(self.q, "str \u2603 payload")
        got = {j.id: j.payload for j in self.c.poll(self.q, max=10)}
        for jid, p in zip(ids, payloads):
            self.assertEqual(got[jid], p)
        self.assertIn("str \u2603 payload".encode(), got.values())

    def test_ids_keep_replace(self):
        self.assertEqual(self.c.push(self.q, b"v1", 3600000, id="o1"),
                         ("o1", delayq.PUSHED))
        self.assertEqual(self.c.push(self.q, b"v2", id="o1"),
                         ("o1", delayq.KEPT))
        self.assertEqual(self.c.stats(self.q)["scheduled"], 1)
        self.assertEqual(self.c.push(self.q, b"v3", id="o1", replace=True),
                         ("o1", delayq.REPLACED))
        [j] = self.c.poll(self.q)
        self.assertEqual((j.id, j.payload), ("o1", b"v3"))

    def test_debounce(self):
        q = self.q
        self.assertEqual(
            self.c.push(q, b"a", 60000, id="d1", debounce=True,
                        max_wait_ms=1000),
            ("d1", delayq.DEBOUNCE_CREATED))
        self.assertEqual(
            self.c.push(q, b"b", 60000, id="d1", debounce=True,
                        max_wait_ms=1000),
            ("d1", delayq.DEBOUNCE_MOVED))
        info = self.c.get(q, "d1")
        self.assertEqual(info.payload, b"b")
        self.assertLessEqual(info.due_ms, info.now_ms + 1000)
        self.c.cancel(q, "d1")
        self.c.push(q, b"r1", id="d2", debounce=True)
        [j] = self.c.poll(q)
        self.assertEqual(self.c.push(q, b"r2", id="d2", debounce=True),
                         ("d2", delayq.DEBOUNCE_FOLLOWUP))
        self.assertEqual(self.c.push(q, b"r3", id="d2", debounce=True),
                         ("d2", delayq.DEBOUNCE_FOLLOWUP))
        info = self.c.get(q, "d2")
        self.assertGreaterEqual(info.followup_ms, info.now_ms - 1000)
        self.assertLessEqual(info.followup_ms, info.now_ms + 1000)
        j.ack()
        self.assertEqual(self.c.get(q, "d2").followup_ms, 0)
        [j2] = self.c.poll(q)
        self.assertEqual((j2.id, j2.payload, j2.attempt), ("d2", b"r3", 1))
        j2.ack()
        # never DONE: the acked id is created again
        self.assertEqual(self.c.push(q, b"r4", id="d2", debounce=True),
                         ("d2", delayq.DEBOUNCE_CREATED))
        with self.assertRaises(TypeError):
            self.c.push(q, b"x", id="d3", debounce=True, replace=True)
        with self.assertRaises(TypeError):
            self.c.push(q, b"x", id="d3", max_wait_ms=5)
        with self.assertRaises(delayq.InvalidArgument):
            self.c.push(q, b"x", debounce=True)
        self.assertEqual(
            self.c.push_batch(q, [b"y1", b"y2"], delays_ms=[60000, 60000],
                              ids=["d4", "d4"], debounce=True),
            [("d4", delayq.DEBOUNCE_CREATED), ("d4", delayq.DEBOUNCE_MOVED)])

    def test_delay_and_at(self):
        self.c.push(self.q, b"later", 3600000)
        self.c.push(self.q, b"past", at_ms=1000)
        st = self.c.stats(self.q)
        self.assertEqual((st["scheduled"], st["due"]), (1, 1))
        [j] = self.c.poll(self.q, max=5)
        self.assertEqual((j.payload, j.due_ms), (b"past", 1000))
        with self.assertRaises(TypeError):
            self.c.push(self.q, b"x", 5, at_ms=1000)

    def test_push_batch(self):
        n = 2500     # more than two chunks of 1000
        payloads = [b"p%d\0" % i for i in range(n)]
        ids = [None] * n
        ids[0], ids[1] = "first", "first"     # the second one is kept
        delays = [0] * n
        delays[2] = 3600000
        res = self.c.push_batch(self.q, payloads, delays_ms=delays, ids=ids)
        self.assertEqual(len(res), n)
        self.assertEqual(res[0], ("first", delayq.PUSHED))
        self.assertEqual(res[1], ("first", delayq.KEPT))
        self.assertEqual(len({r[0] for r in res}), n - 1)
        self.assertTrue(all(o == delayq.PUSHED for _, o in res[2:]))
        st = self.c.stats(self.q)
        self.assertEqual((st["scheduled"], st["due"]), (1, n - 2))
        jobs = self.c.poll(self.q, max=1000)
        self.assertEqual(len(jobs), 1000)
        by_id = {r[0]: payloads[i] for i, r in enumerate(res) if i != 1}
        for j in jobs:
            self.assertEqual(j.payload, by_id[j.id])
        self.assertEqual(self.c.push_batch(self.q, []), [])

    def test_poll_wait_wakes_on_push_from_another_thread(self):
        def producer():
            time.sleep(0.3)
            with delayq.Client(SERVER.uri) as other:
                other.push(self.q, b"late")
        t = threading.Thread(target=producer)
        t0 = time.monotonic()
        t.start()
        try:
            jobs = self.c.poll(self.q, wait_ms=20000)
        finally:
            t.join(30)
        self.assertEqual([j.payload for j in jobs], [b"late"])
        self.assertLess(time.monotonic() - t0, 15)
        # A wait that times out returns an empty list.
        self.assertEqual(self.c.poll(self.q, wait_ms=50), [])
        self.assertEqual(self.c.poll(self.q, wait_ms=0), [])

    def test_client_shared_between_threads(self):
        n_threads, per = 4, 50

        def work(k):
            for i in range(per):
                self.c.push(self.q, b"%d-%d" % (k, i))
        threads = [threading.Thread(target=work, args=(k,))
                   for k in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(self.c.stats(self.q)["due"], n_threads * per)


class TestLeases(Base):
    def test_extend_and_stale_token(self):
        self.c.push(self.q, b"x", id="e1")
        [j] = self.c.poll(self.q, lease_ms=200)
        deadline = j.extend(60000)
        self.assertEqual(deadline, j.lease_deadline_ms)
        self.assertGreater(deadline, j.due_ms + 50000)
        # Let a short lease run out and another consumer take the job.
        j.extend(50)
        again = wait_for(lambda: self.c.poll(self.q, lease_ms=60000))
        self.assertEqual([(x.id, x.attempt) for x in again], [("e1", 2)])
        for op in (j.ack, j.nack, lambda: j.extend(1000)):
            with self.assertRaises(delayq.StaleToken) as cm:
                op()
            self.assertEqual((cm.exception.code, cm.exception.name),
                             (-16, "ESTALE"))
        again[0].ack()

    def test_nack_delay_and_dead(self):
        self.c.push(self.q, b"x", id="n1")
        [j] = self.c.poll(self.q)
        self.assertFalse(j.nack(3600000))
        st = self.c.stats(self.q)
        self.assertEqual((st["scheduled"], st["inflight"]), (1, 0))
        self.c.push(self.q, b"y", id="n2")
        [j] = self.c.poll(self.q)
        self.assertFalse(j.nack())
        [j] = self.c.poll(self.q)
        self.assertEqual(j.attempt, 2)
        self.assertTrue(j.nack(dead=True))
        self.assertEqual(self.c.stats(self.q)["dead"], 1)

    def test_max_attempts_option(self):
        with delayq.Client(SERVER.uri, max_attempts=2) as c:
            c.push(self.q, b"x", id="m1")
            for attempt in (1, 2):
                [j] = c.poll(self.q)
                self.assertEqual(j.attempt, attempt)
                dead = j.nack()
            self.assertTrue(dead)
            self.assertEqual(c.stats(self.q)["dead"], 1)

    def test_ack_batch(self):
        for i in range(3):
            self.c.push(self.q, b"x", id="b%d" % i)
        jobs = self.c.poll(self.q, max=3)
        res = self.c.ack_batch(self.q, jobs[:2] + [("nope", "1")])
        self.assertEqual(res, [0, 0, delayq.NotFound])
        res = self.c.ack_batch(self.q, [(jobs[2].id, "999999")])
        self.assertEqual(res, [delayq.StaleToken])

    def test_cancel(self):
        self.c.push(self.q, b"x", 3600000, id="c1")
        self.assertEqual(self.c.cancel(self.q, "c1"), delayq.CANCELED_PENDING)
        self.assertEqual(self.c.cancel(self.q, "c1"), 0)
        self.c.push(self.q, b"y", id="c2")
        [j] = self.c.poll(self.q)
        self.assertEqual(self.c.cancel(self.q, "c2"), delayq.CANCEL_BUSY)
        self.assertEqual(self.c.cancel(self.q, "c2", inflight=True),
                         delayq.CANCELED_INFLIGHT)
        # The job's data is gone: its holder's ack answers ENOTFOUND.
        with self.assertRaises(delayq.NotFound):
            j.ack()

    def test_reschedule_promote(self):
        self.c.push(self.q, b"keep", 3600000, id="r1")
        self.assertEqual(self.c.reschedule(self.q, "r1", delay_ms=7200000),
                         delayq.MOVED)
        info = self.c.get(self.q, "r1")
        self.assertTrue(7190000 <= info.due_ms - info.now_ms <= 7200000)
        self.assertEqual(self.c.reschedule(self.q, "r1", at_ms=4102444800000),
                         delayq.MOVED)
        self.assertEqual(self.c.get(self.q, "r1").due_ms, 4102444800000)
        self.c.push(self.q, b"y", id="f1")
        [j] = self.c.poll(self.q)
        self.assertEqual(self.c.promote(self.q, ["r1", "f1", "nope"]),
                         [delayq.MOVED, delayq.INFLIGHT, delayq.UNKNOWN])
        j.nack(dead=True)
        self.assertEqual(self.c.promote(self.q, "f1"), delayq.DEAD)
        self.assertEqual(self.c.promote(self.q, "f1", revive=True),
                         delayq.REVIVED)
        got = sorted((x.id, x.payload) for x in self.c.poll(self.q, max=5))
        self.assertEqual(got, [("f1", b"y"), ("r1", b"keep")])
        with self.assertRaises(ValueError):
            self.c.reschedule(self.q, "r1")
        with self.assertRaises(delayq.InvalidArgument):
            self.c.reschedule(self.q, "r1", delay_ms=-1)


class TestDeadLetters(Base):
    def kill(self, jid):
        self.c.push(self.q, jid.encode(), id=jid)
        [j] = self.c.poll(self.q)
        self.assertEqual(j.id, jid)
        self.assertTrue(j.nack(dead=True))

    def test_list_requeue_purge(self):
        for i in range(3):
            self.kill("d%d" % i)
        dead = self.c.dead_list(self.q)
        self.assertEqual([(j.id, j.payload, j.attempt, j.token)
                          for j in dead],
                         [("d0", b"d0", 1, ""), ("d1", b"d1", 1, ""),
                          ("d2", b"d2", 1, "")])
        self.assertEqual([j.id for j in self.c.dead_list(self.q, 1, 1)],
                         ["d1"])
        self.assertEqual(self.c.dead_requeue(self.q, "d0", 3600000), 1)
        self.assertEqual(self.c.dead_requeue(self.q, "d0"), 0)
        self.assertEqual(self.c.dead_purge(self.q, "d1"), 1)
        self.assertEqual(self.c.stats(self.q)["dead"], 1)
        self.assertEqual(self.c.dead_requeue(self.q), 1)
        [j] = self.c.poll(self.q)
        self.assertEqual((j.id, j.attempt), ("d2", 1))   # attempts reset
        self.assertTrue(j.nack(dead=True))
        self.assertEqual(self.c.dead_purge(self.q), 1)
        self.assertEqual(self.c.dead_list(self.q), [])

    def test_list_scheduled_when_available(self):
        self.c.push(self.q, b"later", 60000, id="s1")
        if not delayq.HAVE_LIST:
            with self.assertRaises(delayq.NotSupported):
                self.c.list(self.q)
            return
        [j] = self.c.list(self.q, delayq.LIST_SCHEDULED)
        self.assertEqual((j.id, j.payload, j.token), ("s1", b"later", ""))

    def test_listed_jobs_carry_group_and_priority(self):
        self.assertTrue(delayq.HAVE_JOB_GROUP)
        want = {"plain": (None, 0), "a": ("acme", 0), "a5": ("acme", 5),
                "p9": (None, 9)}
        for jid, (g, p) in want.items():
            self.c.push(self.q, jid.encode(), id=jid, group=g,
                        priority=p or None)

        def listed(which):
            return {j.id: (j.group, j.priority)
                    for j in self.c.list(self.q, which)}

        self.assertEqual(listed(delayq.LIST_SCHEDULED), want)
        held = self.c.poll(self.q, max=4, lease_ms=60000)
        self.assertEqual(len(held), 4)
        self.assertEqual({j.id: (j.group, j.priority) for j in held}, want)
        self.assertEqual(listed(delayq.LIST_INFLIGHT), want)
        for j in held:
            self.assertTrue(j.nack(dead=True))
        self.assertEqual(listed(delayq.LIST_DEAD), want)
        self.assertEqual({j.id: (j.group, j.priority)
                          for j in self.c.dead_list(self.q)}, want)
        self.assertEqual(self.c.dead_requeue(self.q), 4)
        self.assertEqual(listed(delayq.LIST_SCHEDULED), want)

    def test_polled_jobs_carry_group_and_priority(self):
        want = {"plain": (None, 0), "a": ("acme", 0), "a5": ("acme", 5),
                "p9": (None, 9)}
        for jid, (g, p) in want.items():
            self.c.push(self.q, jid.encode(), id=jid, group=g,
                        priority=p or None)
        got, end = {}, time.time() + 10
        while len(got) < 4 and time.time() < end:
            for j in self.c.poll(self.q, max=4, lease_ms=50, wait_ms=1000):
                got[j.id] = (j.group, j.priority)
        self.assertEqual(got, want)
        time.sleep(0.1)         # every lease runs out: polled again
        seen = {}

        def handler(job):
            seen[job.id] = (job.group, job.priority, job.attempt)
            if len(seen) == 4:
                cons.interrupt()
        with self.c.consumer(self.q, handler) as cons:
            cons.run()
        self.assertEqual(seen, {k: v + (2,) for k, v in want.items()})


class TestGetAndReasons(Base):
    def test_get_every_state(self):
        self.assertTrue(delayq.HAVE_GET)
        self.c.push(self.q, b"later", 3600000, id="s1")
        info = self.c.get(self.q, "s1")
        self.assertIsInstance(info, delayq.JobInfo)
        self.assertEqual((info.id, info.queue, info.state, info.attempts,
                          info.payload, info.last_error, info.failed_ms,
                          info.lease_deadline_ms),
                         ("s1", self.q, delayq.SCHEDULED, 0, b"later", None,
                          0, 0))
        self.assertGreater(info.due_ms - info.now_ms, 3500000)
        self.c.push(self.q, b"n\0w", id="d1")
        self.assertEqual(self.c.get(self.q, "d1").state, delayq.DUE)
        [j] = self.c.poll(self.q)
        info = self.c.get(self.q, "d1")
        self.assertEqual((info.state, info.attempts, info.lease_deadline_ms,
                          info.payload),
                         (delayq.INFLIGHT, 1, j.lease_deadline_ms, b"n\0w"))
        self.assertTrue(j.nack(dead=True))
        self.assertEqual(self.c.get(self.q, "d1").state, delayq.DEAD)
        self.assertIsNone(self.c.get(self.q, "nope"))
        self.c.dead_purge(self.q, "d1")
        self.assertIsNone(self.c.get(self.q, "d1"))

    def test_reasons_through_retry_dead_list_and_get(self):
        self.c.push(self.q, b"x", id="r1")
        [j] = self.c.poll(self.q)
        self.assertFalse(j.nack(reason="db timeout"))
        info = self.c.get(self.q, "r1")
        self.assertEqual(info.last_error, b"db timeout")
        self.assertLessEqual(abs(info.failed_ms - info.now_ms), 60000)
        [j] = self.c.poll(self.q)
        self.assertEqual(self.c.get(self.q, "r1").last_error, b"db timeout")
        why = b"bin\0\xff" * 10
        self.assertTrue(self.c.nack(self.q, "r1", j.token, dead=True,
                                    reason=why))
        [d] = self.c.dead_list(self.q)
        self.assertEqual((d.id, d.last_error), ("r1", why))
        self.assertGreater(d.failed_ms, 0)
        self.assertEqual(self.c.get(self.q, "r1").last_error, why)
        # Jobs from a poll carry none; an empty reason is recorded.
        self.c.push(self.q, b"y", id="r2")
        [j] = self.c.poll(self.q)
        self.assertIsNone(j.last_error)
        j.nack(reason=b"")
        self.assertEqual(self.c.get(self.q, "r2").last_error, b"")

    def test_bad_arguments_change_nothing(self):
        self.c.push(self.q, b"x", id="b1")
        [j] = self.c.poll(self.q)
        with self.assertRaises(delayq.InvalidArgument) as cm:
            j.nack(reason=b"r" * (delayq.REASON_MAX + 1))
        self.assertEqual(cm.exception.name, "EINVAL")
        self.assertIn("reason is 1025 bytes", cm.exception.message)
        info = self.c.get(self.q, "b1")
        self.assertEqual((info.state, info.last_error),
                         (delayq.INFLIGHT, None))
        for bad, name in (("", "EID"), ("x" * 129, "EID")):
            with self.assertRaises(delayq.InvalidArgument) as cm:
                self.c.get(self.q, bad)
            self.assertEqual(cm.exception.name, name)
        with self.assertRaises(delayq.InvalidArgument) as cm:
            self.c.get("", "b1")
        self.assertEqual(cm.exception.name, "EQUEUE")
        with self.assertRaises(TypeError):
            self.c.get(self.q, 5)
        with self.assertRaises(TypeError):
            j.nack(reason=5)
        j.ack()


class TestSettings(Base):
    """Queue settings stored in Redis: config_set / config_get."""

    NAMES = ["max_attempts", "lease_ms", "backoff", "backoff_base_ms",
             "backoff_cap_ms", "backoff_jitter", "dead_max", "dead_ttl_ms",
             "expired", "rate_max", "rate_window_ms", "layout",
             "inflight_max", "group_inflight_max"]

    def test_round_trip(self):
        got = self.c.config_get(self.q)
        self.assertEqual(list(got), self.NAMES)
        self.assertEqual(set(got.values()), {None})
        self.c.config_set(self.q, max_attempts=3, backoff="exponential",
                          backoff_base_ms=500, expired="drop",
                          rate_max=10, rate_window_ms=1000, layout="compact")
        got = self.c.config_get(self.q)
        self.assertEqual(got["layout"], delayq.LAYOUT_COMPACT)
        self.assertEqual(got["max_attempts"], 3)
        self.assertEqual(got["backoff"], delayq.BACKOFF_EXPONENTIAL)
        self.assertEqual(got["expired"], delayq.EXPIRED_DROP)
        self.assertEqual(got["rate_max"], 10)
        self.assertIsNone(got["dead_max"])
        self.c.config_set(self.q, layout="compact-push")
        self.assertEqual(self.c.config_get(self.q)["layout"],
                         delayq.LAYOUT_COMPACT_PUSH)
        # None unsets; numbers for the words work too; 0 is a value
        self.c.config_set(self.q, rate_max=None, rate_window_ms=None,
                          backoff=delayq.BACKOFF_FIXED, max_attempts=0)
        got = self.c.config_get(self.q)
        self.assertIsNone(got["rate_max"])
        self.assertEqual(got["backoff"], delayq.BACKOFF_FIXED)
        self.assertEqual(got["max_attempts"], 0)
        # what was read writes back
        with delayq.Client(SERVER.uri) as c2:
            q2 = self.q + "-copy"
            c2.config_set(q2, **got)
            self.assertEqual(c2.config_get(q2), got)

    def test_settings_act(self):
        # max attempts 1 on the queue beats the client's option of 5
        with delayq.Client(SERVER.uri, max_attempts=5) as c:
            c.config_set(self.q, max_attempts=1)
            c.push(self.q, b"x", id="a")
            j = c.poll(self.q)[0]
            self.assertTrue(c.nack(self.q, j.id, j.token))
            info = c.get(self.q, "a")
            self.assertEqual(info.state, delayq.DEAD)

    def test_lease_option(self):
        # poll(lease_ms=0): the queue's lease_ms setting, else the
        # client's lease_ms option
        with delayq.Client(SERVER.uri, lease_ms=50000) as c:
            c.push(self.q, b"x", id="l1")
            j = c.poll(self.q, lease_ms=0)[0]
            left = c.get(self.q, "l1")
            self.assertTrue(45000 < j.lease_deadline_ms - left.now_ms <= 50000)
            c.config_set(self.q, lease_ms=7000)
            c.push(self.q, b"x", id="l2")
            j = c.poll(self.q, lease_ms=0)[0]
            left = c.get(self.q, "l2")
            self.assertTrue(2000 < j.lease_deadline_ms - left.now_ms <= 7000)
        with self.assertRaises(delayq.InvalidArgument):
            delayq.Client(SERVER.uri, lease_ms=0)

    def test_bad_input(self):
        self.c.config_set(self.q, lease_ms=4000)
        with self.assertRaises(TypeError):
            self.c.config_set(self.q, nope=1)
        with self.assertRaises(TypeError):
            self.c.config_set(self.q)
        with self.assertRaises(TypeError):
            self.c.config_set(self.q, max_attempts="3")
        with self.assertRaises(TypeError):
            self.c.config_set(self.q, max_attempts=True)
        with self.assertRaises(delayq.InvalidArgument):
            self.c.config_set(self.q, backoff="slow")
        with self.assertRaises(delayq.InvalidArgument) as cm:
            self.c.config_set(self.q, backoff_jitter=101)
        self.assertIn("backoff_jitter", str(cm.exception))
        with self.assertRaises(delayq.InvalidArgument):
            self.c.config_set(self.q, lease_ms=0)
        with self.assertRaises(delayq.InvalidArgument) as cm:
            self.c.config_set(self.q, rate_max=5, lease_ms=9)
        self.assertIn("together", str(cm.exception))
        with self.assertRaises(delayq.InvalidArgument):
            self.c.config_get("")
        got = self.c.config_get(self.q)
        self.assertEqual(got["lease_ms"], 4000)
        self.assertIsNone(got["rate_max"])

    def test_push_ex_prototypes(self):
        # the push options through the raw prototypes (push() itself does
        # not take them here)
        lib = delayq._lib
        o = lib.dq_push_opts_new()
        self.assertTrue(o)
        try:
            self.assertEqual(lib.dq_push_opts_set(o, 1, 2), 0)
            self.assertEqual(lib.dq_push_opts_set(o, 1, -1),
                             delayq.ERRORS["EINVAL"])
            self.assertEqual(lib.dq_push_opts_set(o, 3, 60000), 0)
            out = delayq.ctypes.create_string_buffer(delayq.ID_BUF)
            oc = delayq._c_int(0)
            rc = lib.dq_push_ex(self.c._handle(), self.q.encode(), b"x", 1,
                                0, b"p1", 0, o, out, delayq.ID_BUF,
                                delayq.ctypes.byref(oc))
            self.assertEqual((rc, oc.value, out.value), (0, 1, b"p1"))
            pls = (delayq._c_str * 2)(b"a", b"b")
            lens = (delayq._c_size * 2)(1, 1)
            ocs = (delayq._c_int * 2)()
            rc = lib.dq_push_batch_ex(self.c._handle(), self.q.encode(), 2,
                                      pls, lens, None, None, 0, o, None, ocs)
            self.assertEqual((rc, list(ocs)), (2, [1, 1]))
            # an expiry before the due time is refused
            rc = lib.dq_push_ex(self.c._handle(), self.q.encode(), b"x", 1,
                                60000, b"p2", 0, o, out, delayq.ID_BUF,
                                delayq.ctypes.byref(oc))
            self.assertEqual(rc, delayq.ERRORS["EINVAL"])
        finally:
            lib.dq_push_opts_free(o)
        self.assertEqual(self.c.stats(self.q)["due"], 3)
        self.assertEqual(delayq._lib.dq_setting_name(1), b"max_attempts")
        self.assertEqual(delayq._lib.dq_setting_by_name(b"rate_max"), 10)
class TestRepeatAndPushOptions(Base):
    def test_every_registers_once_and_reschedules(self):
        self.assertEqual(self.c.push(self.q, b"t", id="tick",
                                     every_ms=60000),
                         ("tick", delayq.PUSHED))
        self.assertEqual(self.c.push(self.q, b"t", id="tick",
                                     every_ms=60000),
                         ("tick", delayq.KEPT))
        info = self.c.get(self.q, "tick")
        self.assertRegex(info.repeat, r"^every 60000 ms from \d+$")
        jobs = self.c.poll(self.q)
        self.assertEqual(len(jobs), 1)
        self.c.ack(self.q, jobs[0].id, jobs[0].token)
        info = self.c.get(self.q, "tick")
        self.assertEqual((info.state, info.attempts), (delayq.SCHEDULED, 0))
        self.assertTrue(0 < info.due_ms - info.now_ms <= 60000)
        self.assertEqual(self.c.cancel(self.q, "tick"),
                         delayq.CANCELED_PENDING)

    def test_cron_with_offset(self):
        self.c.push(self.q, b"c", id="c", cron="30 9 * * mon-fri",
                    tz_offset_min=330)
        info = self.c.get(self.q, "c")
        self.assertEqual(info.repeat, "cron 30 9 * * mon-fri tz +330")
        import time
        t = time.gmtime(info.due_ms // 1000 + 330 * 60)
        self.assertEqual((t.tm_hour, t.tm_min, t.tm_wday < 5),
                         (9, 30, True))

    def test_group_and_inflight_limit(self):
        # a burst of one group does not hold a job of another group
        for i in range(50):
            self.c.push(self.q, b"a", id="a%d" % i, group="big")
        self.c.push(self.q, b"b", id="b", group="small")
        ids = [j.id for j in self.c.poll(self.q, max=2)]
        self.assertIn("b", ids)
        self.assertEqual(self.c.get(self.q, "a7").group, "big")
        with self.assertRaises(delayq.InvalidArgument):
            self.c.push(self.q, b"x", group="no spaces")
        # at most inflight_max leased at once
        self.c.config_set(self.q, inflight_max=3)
        self.assertEqual(self.c.config_get(self.q)["inflight_max"], 3)
        got = self.c.poll(self.q, max=10)
        self.assertEqual(len(got), 1)  # 2 of 3 slots were taken above

    def test_group_stats(self):
        self.assertEqual(self.c.group_stats(self.q), [])
        self.c.config_set(self.q, group_inflight_max=5)
        for i in range(4):
            self.c.push(self.q, b"a", id="a%d" % i, group="A")
        self.c.push(self.q, b"l", id="al", group="A", delay_ms=3600000)
        self.c.push(self.q, b"b", id="b0", group="B", priority=3)
        self.c.push(self.q, b"n", id="n0")
        by = {g["group"]: (g["due"], g["later"], g["inflight"])
              for g in self.c.group_stats(self.q)}
        self.assertEqual(by, {"A": (4, 1, 0), "B": (1, 0, 0), "": (1, 0, 0)})
        got = self.c.poll(self.q, max=10)
        self.assertEqual(len(got), 6)
        by = {g["group"]: (g["due"], g["later"], g["inflight"])
              for g in self.c.group_stats(self.q, max=10)}
        # B: nothing pending, listed for its job in flight; "": not counted
        self.assertEqual(by, {"A": (0, 1, 4), "B": (0, 0, 1)})
        self.assertEqual(len(self.c.group_stats(self.q, max=1)), 1)
        for bad in (0, delayq.GROUP_STATS_MAX + 1):
            with self.assertRaises(delayq.InvalidArgument):
                self.c.group_stats(self.q, max=bad)

    def test_priority(self):
        for i in range(20):
            self.c.push(self.q, b"low", id="lo%d" % i)
        self.c.push(self.q, b"high", id="hi", priority=7)
        self.assertEqual(self.c.get(self.q, "hi").priority, 7)
        self.assertEqual(self.c.get(self.q, "lo0").priority, 0)
        self.assertEqual([j.id for j in self.c.poll(self.q, max=1)], ["hi"])
        with self.assertRaises(delayq.InvalidArgument):
            self.c.push(self.q, b"x", priority=10)

    def test_other_options(self):
        self.c.push(self.q, b"m", id="m", max_attempts=1)
        j = self.c.poll(self.q)[0]
        self.assertTrue(self.c.nack(self.q, j.id, j.token))  # dead
        self.c.push(self.q, b"e", id="e", expire_in_ms=60000)
        self.c.push(self.q, b"f", id="f", delay_ms=1000,
                    expire_at_ms=delayq.AT_MAX)
        self.assertIsNone(self.c.get(self.q, "e").repeat)

    def test_bad_options_send_nothing(self):
        for kw, word in ((dict(every_ms=60000), "id"),
                         (dict(id="a", every_ms=5), "every"),
                         (dict(id="a", cron="0 0 30 2 *"), "never"),
                         (dict(id="a", cron="* * *"), "5"),
                         (dict(id="a", cron="* * * * *", tz_offset_min=900),
                          "tz"),
                         (dict(id="a", every_ms=1000, expire_in_ms=10),
                          "expire")):
            with self.assertRaises(delayq.InvalidArgument) as cm:
                self.c.push(self.q, b"x", **kw)
            self.assertIn(word, cm.exception.message)
        with self.assertRaises(TypeError):
            self.c.push(self.q, b"x", id="a", every_ms=1000, cron="* * * * *")
        st = self.c.stats(self.q)
        self.assertEqual(st["scheduled"] + st["due"], 0)


class TestCounters(Base):
    def test_counted_by_clients_with_the_option(self):
        zero = {"delivered": 0, "acked": 0, "retried": 0, "failed": 0}
        self.assertEqual(self.c.counters(self.q), zero)
        with delayq.Client(SERVER.uri, counters=True) as c:
            for i in range(4):
                c.push(self.q, b"x", id="k%d" % i)
            jobs = c.poll(self.q, max=4)
            self.assertEqual(len(jobs), 4)
            jobs[0].ack()
            self.assertFalse(jobs[1].nack())
            self.assertTrue(jobs[2].nack(dead=True))
            self.c.ack(self.q, jobs[3].id, jobs[3].token)  # does not count
            self.assertEqual(c.counters(self.q),
                             {"delivered": 4, "acked": 1, "retried": 1,
                              "failed": 1})
        with delayq.Client(SERVER.uri, counters=False) as c:
            self.assertEqual(len(c.poll(self.q)), 1)
        self.assertEqual(self.c.counters(self.q)["delivered"], 4)
        with self.assertRaises(TypeError):
            delayq.Client(SERVER.uri, counters=2)
        with self.assertRaises(TypeError):
            delayq.Client(SERVER.uri, counters="yes")
        with self.assertRaises(delayq.InvalidArgument):
            self.c.counters("")


@unittest.skipUnless(delayq.HAVE_CONSUMER or os.environ.get(
    "DELAYQ_REQUIRE_CONSUMER") == "1", "library without delayq-consumer.h")
class TestCountDue(Base):
    def test_windows_and_bad_input(self):
        for d in (0, 0, 30000, 120000, 120000, 7200000):
            self.c.push(self.q, b"x", delay_ms=d)
        now, counts = self.c.count_due(self.q, [0, 60000, 3600000])
        self.assertEqual(counts, [2, 1, 2, 1])
        self.assertGreater(now, 1600000000000)
        self.assertEqual(self.c.count_due(new_queue("empty"), [0])[1], [0, 0])
        for bad in ([], [5, 5], [1] * (delayq.COUNT_DUE_MAX + 1),
                    [delayq.DELAY_MAX + 1]):
            with self.assertRaises(delayq.InvalidArgument):
                self.c.count_due(self.q, bad)


class TestQueues(unittest.TestCase):
    def test_every_queue_of_the_namespace(self):
        ns = "pyq-%d" % os.getpid()
        with delayq.Client(SERVER.uri, namespace=ns) as c, \
                delayq.Client(SERVER.uri, namespace=ns, partitions=4) as p, \
                delayq.Client(SERVER.uri, namespace=ns + "x") as o:
            self.assertEqual(c.queues(), [])
            self.assertTrue(c.queues().complete)
            c.push("b", b"x", delay_ms=60000)
            c.push("a \u00e9", b"x", delay_ms=60000)
            for i in range(12):
                p.push("parted", b"x%d" % i, delay_ms=60000)
            o.push("elsewhere", b"x")
            got = c.queues()
            self.assertEqual(got, ["a \u00e9", "b", "parted"])
            self.assertEqual(got.partitioned, {"parted"})
            self.assertTrue(got.complete)
            two = c.queues(max=2)
            self.assertEqual((len(two), two.complete), (2, False))
            self.assertEqual(o.queues(), ["elsewhere"])
            for bad in (0, -1, delayq.QUEUES_MAX + 1):
                with self.assertRaises(delayq.InvalidArgument):
                    c.queues(max=bad)


class TestConsumer(Base):
    def test_handler_outcomes(self):
        q = self.q
        self.c.push(q, b"fine", id="ok")
        self.c.push(q, b"flaky", id="retry")
        self.c.push(q, b"boom", id="raise")
        self.c.push(q, b"hopeless", id="fail")
        seen, outcomes = [], []
        done = threading.Event()

        def handler(job):
            seen.append((job.id, job.attempt, job.payload))
            if job.id == "retry" and job.attempt == 1:
                return False
            if job.id == "raise":
                raise RuntimeError("handler failed")
            if job.id == "fail":
                return delayq.JOB_FAIL
            return None

        def on_outcome(job_id, outcome, status):
            outcomes.append((job_id, outcome, status))
            # ok, retry x2, raise x2 (dead at 2 attempts), fail.
            if len(outcomes) >= 6:
                done.set()

        with delayq.Client(SERVER.uri) as worker:
            with worker.consumer(q, handler, concurrency=4, lease_ms=10000,
                                 retry_backoff="fixed", retry_base_ms=50,
                                 retry_jitter=0, max_attempts=2,
                                 on_outcome=on_outcome) as cons:
                self.assertEqual(cons.backoff_ms(1), 50)

                def stopper():
                    done.wait(30)
                    cons.interrupt()
                t = threading.Thread(target=stopper)
                t.start()
                released = cons.run()
                t.join(30)
                self.assertTrue(done.is_set(), (seen, outcomes))
                self.assertEqual(released, 0)
                self.assertEqual(len(cons.errors), 2)
                self.assertIsInstance(cons.errors[0], RuntimeError)
        by = {}
        for job_id, outcome, status in outcomes:
            self.assertEqual(status, 0)
            by.setdefault(job_id, []).append(outcome)
        self.assertEqual(by["ok"], [delayq.JOB_OK])
        self.assertEqual(by["retry"], [delayq.JOB_RETRY, delayq.JOB_OK])
        self.assertEqual(by["fail"], [delayq.JOB_FAIL])
        self.assertEqual(by["raise"], [delayq.JOB_RETRY, delayq.JOB_FAIL])
        self.assertIn(("ok", 1, b"fine"), seen)
        st = self.c.stats(q)
        self.assertEqual((st["scheduled"], st["due"], st["inflight"],
                          st["dead"]), (0, 0, 0, 2))
        self.assertEqual(sorted(j.id for j in self.c.dead_list(q)),
                         ["fail", "raise"])

    def test_interrupt_while_idle_and_options(self):
        with delayq.Client(SERVER.uri, wait_cap_ms=100) as worker:
            with self.assertRaises(TypeError):
                worker.consumer(self.q, print, bogus=1)
            with self.assertRaises(delayq.InvalidArgument):
                worker.consumer(self.q, print, concurrency=0)
            cons = worker.consumer(self.q, lambda job: None)
            timer = threading.Timer(0.3, cons.interrupt)
            timer.start()
            t0 = time.monotonic()
            self.assertEqual(cons.run(), 0)
            self.assertLess(time.monotonic() - t0, 20)
            timer.join()
            cons.close()
            cons.close()
            with self.assertRaises(delayq.Closed):
                cons.run()


class TestSeveralQueues(Base):
    def test_poll_wait_multi_strict_and_weighted(self):
        hi, lo = new_queue("multi-hi"), new_queue("multi-lo")
        for i in range(3):
            self.c.push(lo, b"l", id="l%d" % i)
            self.c.push(hi, b"h", id="h%d" % i)
        got = []
        for _ in range(6):
            i, jobs = self.c.poll_wait_multi([hi, lo], strict=True,
                                             wait_ms=2000)
            self.assertEqual(len(jobs), 1)
            self.assertEqual(jobs[0].queue, [hi, lo][i])
            jobs[0].ack()  # on its own queue
            got.append(jobs[0].id[0])
        self.assertEqual(got, ["h"] * 3 + ["l"] * 3)
        for q in (hi, lo):
            st = self.c.stats(q)
            self.assertEqual((st["scheduled"], st["due"], st["inflight"]),
                             (0, 0, 0))
        # Nothing due: (None, []) after the wait.
        self.assertEqual(self.c.poll_wait_multi([hi, lo], [2, 1],
                                                wait_ms=50), (None, []))
        # Weighted, both full: the heavy queue gets most deliveries.
        for i in range(100):
            self.c.push(hi, b"h", id="wh%d" % i)
            self.c.push(lo, b"l", id="wl%d" % i)
        heavy = 0
        for _ in range(100):
            i, jobs = self.c.poll_wait_multi([hi, lo], weights=[4, 1],
                                             wait_ms=2000)
            heavy += i == 0
        self.assertGreater(heavy, 60)

    def test_poll_wait_multi_bad_arguments(self):
        for args, kw in [(([],), {}), ((["a", "a"],), {}),
                         ((["a", "b"], [1, 0]), {}),
                         ((["a", "b"], [1]), {}),
                         ((["a", "b"], [1, 1001]), {}),
                         ((["q%d" % i for i in range(65)],), {})]:
            with self.assertRaises(delayq.InvalidArgument, msg=repr(args)):
                self.c.poll_wait_multi(*args, wait_ms=10, **kw)

    def test_consumer_over_two_queues(self):
        a, b = new_queue("cons-a"), new_queue("cons-b")
        for i in range(5):
            self.c.push(a, b"x", id="a%d" % i)
            self.c.push(b, b"x", id="b%d" % i)
        seen, holder = [], {}

        def handler(job):
            seen.append((job.id, job.queue))
            if len(seen) == 10:
                holder["cons"].interrupt()
        with delayq.Client(SERVER.uri) as cl:
            cons = delayq.Consumer(cl, a, handler, concurrency=2, strict=True)
            holder["cons"] = cons
            self.assertEqual(cons.add_queue(b, 3), 1)
            with self.assertRaises(delayq.InvalidArgument):
                cons.add_queue(b, 0)
            cons.run()
            cons.close()
        self.assertEqual(len(seen), 10)
        for job_id, q in seen:
            self.assertEqual(q, a if job_id[0] == "a" else b)
        self.assertEqual([j[0][0] for j in seen], ["a"] * 5 + ["b"] * 5)
        for q in (a, b):
            st = self.c.stats(q)
            self.assertEqual((st["scheduled"], st["due"], st["inflight"]),
                             (0, 0, 0))


class TestArgumentErrors(Base):
    def test_codes_names_messages(self):
        cases = [
            (lambda: self.c.push("", b"x"), "EQUEUE", "queue"),
            (lambda: self.c.push("q" * 201, b"x"), "EQUEUE", "200"),
            (lambda: self.c.push(self.q, b"x", -1), "EDELAY", "delay"),
            (lambda: self.c.push(self.q, b"x", id=""), "EID", "id"),
            # (push_batch: dq_push checks its id_out buffer size first and
            # reports EINVAL for a 129-byte id; see the report of H6.)
            (lambda: self.c.push_batch(self.q, [b"x"], ids=["i" * 129]),
             "EID", "128"),
            (lambda: self.c.poll(self.q, max=0), "EINVAL", "max"),
            (lambda: self.c.poll(self.q, max=1001), "EINVAL", "max"),
            # (lease_ms 0 asks for the queue's lease_ms setting)
            (lambda: self.c.poll(self.q, lease_ms=-1), "ELEASE", "lease"),
            (lambda: self.c.poll(self.q, wait_ms=-1), "EDELAY", "wait"),
            (lambda: self.c.ack(self.q, "x", "abc"), "EINVAL", "token"),
            (lambda: self.c.nack(self.q, "x", "1", -5), "EDELAY", "delay"),
            (lambda: self.c.extend(self.q, "x", "1", 0), "ELEASE", "lease"),
            (lambda: self.c.dead_list(self.q, -1), "EINVAL", "offset"),
            (lambda: self.c.push(self.q, b"x", id="a\0b"), "EID", "NUL"),
        ]
        for fn, name, word in cases:
            with self.assertRaises(delayq.InvalidArgument) as cm:
                fn()
            e = cm.exception
            self.assertEqual(e.name, name, e)
            self.assertEqual(e.code, delayq.ERRORS[name])
            self.assertIn(word, e.message)
            self.assertIsInstance(e, ValueError)
        # Nothing reached Redis.
        self.assertEqual(self.c.stats(self.q)["due"], 0)

    def test_type_errors(self):
        with self.assertRaises(TypeError):
            self.c.push(self.q, 42)
        with self.assertRaises(TypeError):
            self.c.push(1234, b"x")

    def test_redis_error_after_server_side_change(self):
        # A key of the wrong type makes Redis itself fail the script.
        SERVER.command("SET", "dq:{%s}:due" % self.q, "not a zset")
        with self.assertRaises(delayq.RedisError) as cm:
            self.c.push(self.q, b"x")
        self.assertEqual(cm.exception.name, "EREDIS")
        self.assertIn("WRONGTYPE", cm.exception.message)


if __name__ == "__main__":
    unittest.main(verbosity=2)
