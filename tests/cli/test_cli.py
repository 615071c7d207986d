#!/usr/bin/env python3
"""Tests of the delayq command-line tool against a real, private redis-server.

usage: test_cli.py PATH/TO/delayq [unittest args...]

Runs under tests/support/with_redis, which starts a private redis-server on a
unix socket in a temp dir, passes its URI in $DQ_TEST_REDIS_URI and stops it
by pid afterwards; runs the binary as a user would.  A missing redis-server
(or a missing $DQ_TEST_REDIS_URI) is a failure, never a skip.  $DELAYQ_EXAMPLE_SHELL (optional) is the path of
examples/shell_consumer.sh, exercised by one test.
"""
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

DELAYQ = None          # path of the binary under test (argv[1])
REDIS = None           # the module's server
CMD_TIMEOUT = 60       # seconds any one CLI run may take


class RedisServer:
    """The private redis-server this run gets from tests/support/with_redis
    (meson runs this script under it): its URI is $DQ_TEST_REDIS_URI, and
    with_redis stops it by pid when the script ends."""

    def __init__(self):
        self.uri = os.environ.get("DQ_TEST_REDIS_URI")
        if not self.uri:
            raise RuntimeError("DQ_TEST_REDIS_URI is not set: run this "
                               "script under tests/support/with_redis (as "
                               "meson test does); a failure, not a skip")


# The soft limit on open files the CLI runs inherit.  `delayq consume`
# closes every descriptor above 2 in each command it starts, up to this
# limit: at CI's 20000 that was ~85 ms of close() calls per job on its VM
# (TestDead's 1201 jobs through consume: over two minutes), at 1024 (the usual
# default) about 5 ms.  No test here needs more than a few dozen.
CHILD_NOFILE = 1024


def setUpModule():
    global REDIS
    REDIS = RedisServer()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft > CHILD_NOFILE:
        resource.setrlimit(resource.RLIMIT_NOFILE, (CHILD_NOFILE, hard))


_queue_seq = [0]


def new_queue(tag):
    _queue_seq[0] += 1
    return "cli-%s-%d" % (tag, _queue_seq[0])


def wait_for(pred, timeout):
    """Polls pred every 20 ms until it is true or timeout (s) passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return bool(pred())


# The fill of TestDead's 1201 jobs: one batch push through the Python
# binding (bindings/python) over the build's libdelayq, in a python process
# of its own.  A `delayq push` per job cost a process each: about 0.1 s of
# CPU each under ASan (most of it LeakSanitizer's scan of the sanitizer
# runtimes' own 11 MB of globals at exit), two minutes of the ASan build's
# run for jobs that only set the scene; the CLI's push is what TestPush
# tests.  meson passes the library (DQ_CLI_FILL_LIB), the binding's
# directory (DQ_CLI_FILL_PYTHONPATH) and, in a sanitized build, the ASan
# runtime an uninstrumented python must load first (DQ_CLI_FILL_PRELOAD;
# python itself "leaks" at exit: no LSan in that process).
FILL_CODE = """
import sys, delayq
uri, queue, ids = sys.argv[1], sys.argv[2], sys.argv[3:]
with delayq.Client(uri) as c:
    got = c.push_batch(queue, [b"p"] * len(ids), ids=ids)
bad = [r for r, i in zip(got, ids) if r != (i, delayq.PUSHED)]
sys.exit("push_batch: %d of %d not pushed: %r" % (len(bad), len(ids), bad[:3])
         if bad else 0)
"""


def push_many(queue, ids):
    """Pushes a job "p" under each id (none of them known yet)."""
    lib = os.environ.get("DQ_CLI_FILL_LIB")
    if not lib:
        raise RuntimeError("DQ_CLI_FILL_LIB is not set: run this script as "
                           "meson test does (tests/cli/meson.build)")
    env = dict(os.environ, DELAYQ_LIB=lib,
               PYTHONPATH=os.environ["DQ_CLI_FILL_PYTHONPATH"])
    if os.environ.get("DQ_CLI_FILL_PRELOAD"):
        env["LD_PRELOAD"] = os.environ["DQ_CLI_FILL_PRELOAD"]
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1"
    return subprocess.run([sys.executable, "-c", FILL_CODE, REDIS.uri, queue]
                          + list(ids), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env,
                          timeout=CMD_TIMEOUT)


def env_for(queue=None, uri=None, drop=()):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DELAYQ_") and k not in drop}
    env["DELAYQ_URI"] = uri or REDIS.uri
    if queue is not None:
        env["DELAYQ_QUEUE"] = queue
    return env


def run(args, queue=None, input=None, uri=None, env=None, timeout=CMD_TIMEOUT):
    """Runs delayq ARGS; returns CompletedProcess with bytes output."""
    return subprocess.run([DELAYQ] + list(args), input=input,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env or env_for(queue, uri), timeout=timeout)


class CliCase(unittest.TestCase):
    def ok(self, args, queue=None, input=None, code=0):
        r = run(args, queue=queue, input=input)
        self.assertEqual(r.returncode, code,
                         "delayq %s -> %d\nstdout: %r\nstderr: %r"
                         % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r.stdout.decode("utf-8", "replace")

    def stats(self, queue):
        return json.loads(self.ok(["stats", "--json"], queue))

    def push(self, queue, payload, *extra):
        out = self.ok(["push", payload] + list(extra), queue).split()
        self.assertEqual(len(out), 2, out)
        return out[1]

    def poll_one(self, queue, *extra):
        out = self.ok(["poll", "--json"] + list(extra), queue)
        jobs = json.loads(out)
        self.assertEqual(len(jobs), 1, out)
        return jobs[0]

    def kill_to_dead(self, queue, payload, job_id):
        self.push(queue, payload, "--id", job_id)
        j = self.poll_one(queue)
        self.assertEqual(j["id"], job_id)
        self.assertEqual(self.ok(["nack", j["id"], j["token"], "--dead"],
                                 queue).split(), ["dead", job_id])


class TestHelpAndUsage(CliCase):
    COMMANDS = ["push", "cancel", "poll", "ack", "nack", "extend", "get",
                "list", "peek", "stats", "dead", "consume", "reschedule",
                "promote", "groups"]

    def test_main_help_documents_commands_and_exit_codes(self):
        out = self.ok(["--help"])
        for c in self.COMMANDS + ["Exit codes", "DELAYQ_URI", "DELAYQ_QUEUE",
                                  "2  usage error", "3  cannot connect",
                                  "4  stale lease token"]:
            self.assertIn(c, out)
        self.assertEqual(self.ok(["help"]), out)

    def test_every_subcommand_has_help(self):
        for c in self.COMMANDS:
            for form in ([c, "--help"], [c, "-h"], ["help", c],
                         ["--help", c]):
                r = run(form, uri="unix:///nonexistent/sock")
                self.assertEqual(r.returncode, 0, (form, r.stderr))
                out = r.stdout.decode()
                want = "delayq list" if c == "peek" else "delayq " + c
                self.assertTrue(out.startswith("Usage: " + want), (form, out))
                self.assertIn("Exit codes", out)
                self.assertEqual(r.stderr, b"")

    def test_version(self):
        out = self.ok(["--version"])
        self.assertRegex(out, r"^delayq \d+\.\d+\.\d+ \(libdelayq \d+\.\d+")

    def test_bad_usage_exits_2(self):
        q = new_queue("usage")
        cases = [
            [],
            ["frobnicate"],
            ["help", "frobnicate"],
            ["push", "x", "--bogus"],
            ["push", "x", "--in", "30"],          # no unit
            ["push", "x", "--in", "5parsecs"],
            ["push", "x", "--at", "tomorrow"],
            ["push", "x", "--at", "2026-02-30T00:00:00Z"],
            ["push", "x", "--at", "2026-12-01T09:00:00"],  # no zone
            ["push", "x", "--in", "1s", "--at", "0"],
            ["push", "x", "y"],
            ["push", "x", "--id", "i" * 129],     # library: EID
            ["poll", "--max", "0"],
            ["poll", "--max", "1001"],
            ["poll", "--lease", "8d"],            # library: ELEASE
            ["ack", "onlyid"],
            ["ack", "id", "notdigits"],           # library: EINVAL
            ["nack"],
            ["extend", "id", "1", "--lease"],
            ["cancel"],
            ["reschedule", "a"],                  # no time
            ["reschedule", "--in", "1s"],         # no id
            ["reschedule", "a", "--in", "1s", "--at", "0"],
            ["reschedule", "a", "--at", "tomorrow"],
            ["reschedule", "a", "--in", "5parsecs"],
            ["reschedule", "a", "--at", "99999999999999999"],  # EDELAY
            ["promote"],
            ["promote", "a", "--in", "1s"],
            ["list", "sideways"],
            ["list", "--limit", "0"],
            ["stats", "--json", "--prometheus"],
            ["stats", "--count", "2"],
            ["dead"],
            ["dead", "explode"],
            ["dead", "purge"],
            ["dead", "purge", "a", "--all"],
            ["consume"],
            ["consume", "--", ""],
            ["consume", "--concurrency", "0", "--", "true"],
            ["consume", "extra", "--", "true"],
            ["consume", "--queue", "a:0", "--", "true"],
            ["consume", "--queue", "a:1001", "--", "true"],
            ["consume", "--queue", ":3", "--", "true"],
            ["consume", "--queue", "a", "--queue", "a:2", "--", "true"],
            ["-x"],
            ["--namespace", "bad namespace!", "stats"],
        ]
        for args in cases:
            r = run(args, queue=q)
            self.assertEqual(r.returncode, 2, "%r -> %d %r" %
                             (args, r.returncode, r.stderr))
            self.assertTrue(r.stderr.startswith(b"delayq"), (args, r.stderr))
            self.assertEqual(r.stdout, b"", args)

    def test_missing_queue_is_usage_error(self):
        r = run(["push", "x"], env=env_for(None))
        self.assertEqual(r.returncode, 2)
        self.assertIn(b"--queue", r.stderr)

    def test_queue_option_overrides_env(self):
        q1, q2 = new_queue("env"), new_queue("opt")
        self.push(q1, "a")
        self.ok(["--queue", q2, "push", "b"], q1)
        self.ok(["push", "c", "-q", q2], q1)
        self.assertEqual(self.stats(q1)["due"], 1)
        self.assertEqual(self.stats(q2)["due"], 2)

    def test_namespace_separates_queues(self):
        q = new_queue("ns")
        self.ok(["--namespace", "other", "push", "a"], q)
        self.assertEqual(self.stats(q)["due"], 0)
        st = json.loads(self.ok(["stats", "--json", "-n", "other"], q))
        self.assertEqual(st["due"], 1)


class TestConnectErrors(CliCase):
    def test_unreachable_server_exits_3(self):
        for uri in ("unix:///nonexistent/dir/redis.sock",
                    "redis://127.0.0.1:1"):
            for args in (["push", "x"], ["stats"], ["list", "dead"],
                         ["consume", "--", "true"]):
                r = run(args, queue="q", uri=uri)
                self.assertEqual(r.returncode, 3, (uri, args, r.stderr))
                self.assertIn(b"cannot connect", r.stderr)
                self.assertIn(b"(EIO)", r.stderr)

    def test_malformed_uri_exits_2(self):
        r = run(["stats"], queue="q", uri="http://example.com/")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"(EURI)", r.stderr)

    def test_uri_option_overrides_env(self):
        q = new_queue("uri")
        r = run(["--uri", REDIS.uri, "stats"], queue=q,
                uri="unix:///nonexistent/sock")
        self.assertEqual(r.returncode, 0, r.stderr)


class TestPush(CliCase):
    def test_outcomes_pushed_kept_replaced(self):
        q = new_queue("push")
        self.assertEqual(self.ok(["push", "v1", "--id", "o1", "--in", "1h"],
                                 q), "pushed o1\n")
        self.assertEqual(self.ok(["push", "v2", "--id", "o1"], q),
                         "kept o1\n")
        self.assertEqual(self.ok(["push", "v2", "--id", "o1", "--keep"], q),
                         "kept o1\n")
        self.assertEqual(self.ok(["push", "v3", "--id", "o1", "--replace"],
                                 q), "replaced o1\n")
        j = self.poll_one(q)     # replaced without a delay: due now
        self.assertEqual((j["id"], j["payload"]), ("o1", "v3"))

    def test_debounce(self):
        q = new_queue("debounce")
        self.assertEqual(self.ok(["push", "a", "--id", "d1", "--debounce",
                                  "1h", "--max-wait", "50"], q),
                         "created d1\n")
        self.assertEqual(self.ok(["push", "b", "--id", "d1", "--debounce",
                                  "1h", "--max-wait", "50"], q),
                         "moved d1\n")
        time.sleep(0.1)          # the max wait is over: due
        j = self.poll_one(q)
        self.assertEqual((j["id"], j["payload"]), ("d1", "b"))
        self.assertEqual(self.ok(["push", "c", "--id", "d1", "--debounce",
                                  "0"], q), "followup d1\n")
        self.ok(["push", "x", "--id", "d1", "--debounce", "1s", "--in",
                 "1s"], q, code=2)
        self.ok(["push", "x", "--id", "d1", "--debounce", "1s",
                 "--replace"], q, code=2)

    def test_generated_id_and_json(self):
        q = new_queue("pushjson")
        out = json.loads(self.ok(["push", "x", "--json"], q))
        self.assertEqual(out["outcome"], "pushed")
        self.assertRegex(out["id"], r"^[0-9A-Za-z]{14}$")
        self.assertEqual(self.poll_one(q)["id"], out["id"])

    def test_payload_from_stdin_is_binary_safe(self):
        q = new_queue("stdin")
        data = b"\x00bin\xff\xfe\n\x00end"
        for args in (["push"], ["push", "-"]):
            jid = self.ok(args, q, input=data).split()[1]
            j = self.poll_one(q)
            self.assertEqual(j["id"], jid)
            self.assertNotIn("payload", j)
            import base64
            self.assertEqual(base64.b64decode(j["payload_base64"]), data)
            self.ok(["ack", j["id"], j["token"]], q)

    def test_delays_and_times(self):
        q = new_queue("delay")
        # The shortest delay leaves room for six CLI processes and a stats
        # call on a loaded machine under ASan (a 250 ms one fell due first).
        for d in ("4500ms", "30s", "5m", "2h", "14d", "1h30m"):
            self.push(q, "x", "--in", d)
        st = self.stats(q)
        self.assertEqual((st["scheduled"], st["due"]), (6, 0))
        self.assertTrue(0 < st["next_due_ms"] <= 4500, st)
        # --at: past ISO-8601 / epoch ms are due now, future ones are not.
        q2 = new_queue("at")
        self.push(q2, "a", "--at", "2020-01-01T00:00:00Z")
        self.push(q2, "b", "--at", "2020-01-01T01:00:00+01:00")
        self.push(q2, "c", "--at", "1000")
        self.push(q2, "d", "--at", "2999-01-01T00:00:00.500Z")
        self.push(q2, "e", "--at", "%d" % ((time.time() + 3600) * 1000))
        st = self.stats(q2)
        self.assertEqual((st["due"], st["scheduled"]), (3, 2))
        jobs = json.loads(self.ok(["poll", "--max", "5", "--json"], q2))
        self.assertEqual(sorted(j["payload"] for j in jobs), ["a", "b", "c"])
        # The due times of the jobs: ISO with offset = the same instant.
        by = {j["payload"]: j["due_ms"] for j in jobs}
        self.assertEqual(by["a"], 1577836800000)
        self.assertEqual(by["b"], 1577836800000)
        self.assertEqual(by["c"], 1000)


class TestPushRepeatAndOptions(CliCase):
    def get_json(self, queue, job_id):
        return json.loads(self.ok(["get", job_id, "--json"], queue))

    def test_every_registers_once_and_reschedules(self):
        q = new_queue("every")
        self.assertEqual(self.ok(["push", "tick", "--id", "t", "--every",
                                  "60000"], q), "pushed t\n")
        self.assertEqual(self.ok(["push", "tick", "--id", "t", "--every",
                                  "1m"], q), "kept t\n")
        doc = self.get_json(q, "t")
        self.assertRegex(doc["repeat"], r"^every 60000 ms from \d+$")
        self.assertIn("repeats    every 60000 ms from ", self.ok(["get", "t"],
                                                              q))
        j = self.poll_one(q)
        self.ok(["ack", j["id"], j["token"]], q)
        doc = self.get_json(q, "t")
        self.assertEqual((doc["state"], doc["attempts"]), ("scheduled", 0))
        self.assertTrue(0 < doc["due_ms"] - doc["now_ms"] <= 60000, doc)
        self.assertEqual(self.ok(["cancel", "t"], q).split()[0], "canceled")
        self.assertEqual(self.stats(q)["scheduled"], 0)

    def test_cron_with_offsets(self):
        q = new_queue("cron")
        for tz, want in (("+05:30", 330), ("-05:00", -300), ("Z", 0)):
            jid = "c%d" % want
            self.push(q, "x", "--id", jid, "--cron", "30 9 * * 1-5",
                      "--tz", tz)
            doc = self.get_json(q, jid)
            self.assertEqual(doc["repeat"], "cron 30 9 * * 1-5 tz %+d" % want)
            # 09:30 local on a weekday, in the future, within a week
            local = (doc["due_ms"] // 1000 + want * 60)
            t = time.gmtime(local)
            self.assertEqual((t.tm_hour, t.tm_min, t.tm_sec), (9, 30, 0))
            self.assertLess(t.tm_wday, 5)  # Monday..Friday
            self.assertTrue(0 < doc["due_ms"] - doc["now_ms"] <= 4 * 86400000)

    def test_other_push_options(self):
        q = new_queue("pushopts")
        self.push(q, "x", "--id", "m", "--max-attempts", "1")
        j = self.poll_one(q)
        self.assertEqual(self.ok(["nack", j["id"], j["token"]], q).split()[0],
                         "dead")
        self.push(q, "y", "--id", "e", "--expire-in", "60000")
        self.push(q, "z", "--id", "f", "--in", "1h",
                  "--expire-at", "2999-01-01T00:00:00Z")
        self.assertEqual(self.stats(q)["scheduled"] + self.stats(q)["due"], 2)
        # expires before it is due: refused, nothing written
        r = run(["push", "x", "--id", "g", "--at", "2000", "--expire-at",
                 "1000"], q)
        self.assertEqual(r.returncode, 2, r)
        self.assertIn(b"expires", r.stderr)
        self.assertEqual(self.stats(q)["scheduled"] + self.stats(q)["due"], 2)

    def test_priority(self):
        q = new_queue("prio")
        self.push(q, "low", "--id", "lo")
        self.push(q, "high", "--id", "hi", "--priority", "5")
        self.assertEqual(self.poll_one(q)["id"], "hi")
        r = run(["push", "x", "--id", "bad", "--priority", "10"], q)
        self.assertEqual(r.returncode, 2, r)
        self.assertIn(b"priority", r.stderr)
        self.assertEqual(self.stats(q)["due"], 1)

    def test_bad_repeat_options(self):
        q = new_queue("badrep")
        for args, word in (
                (["--every", "60000"], b"id"),                 # no id
                (["--id", "a", "--every", "5"], b"every"),
                (["--id", "a", "--cron", "0 0 30 2 *"], b"never"),
                (["--id", "a", "--cron", "61 * * * *"], b"minute"),
                (["--id", "a", "--cron", "* * * *"], b"5"),
                (["--id", "a", "--cron", "* * * * *", "--tz", "+15:00"],
                 b"tz"),
                (["--id", "a", "--cron", "* * * * *", "--tz", "0530"],
                 b"tz"),
                (["--id", "a", "--every", "1000", "--cron", "* * * * *"],
                 b"either"),
                (["--id", "a", "--every", "1000", "--expire-in", "5000"],
                 b"expire"),
                (["--id", "a", "--max-attempts", "0"], b"max-attempts")):
            r = run(["push", "x"] + args, q)
            self.assertIn(r.returncode, (1, 2), (args, r))
            self.assertIn(word, r.stderr, (args, r.stderr))
        self.assertEqual(self.stats(q)["scheduled"] + self.stats(q)["due"], 0)


class TestCancel(CliCase):
    def test_cancel_pending_inflight_missing(self):
        q = new_queue("cancel")
        self.push(q, "x", "--id", "p1", "--in", "1h")
        self.assertEqual(self.ok(["cancel", "p1"], q), "canceled p1\n")
        self.assertEqual(self.stats(q)["scheduled"], 0)
        r = run(["cancel", "p1"], q)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"no pending or in-flight job 'p1'", r.stderr)
        self.push(q, "y", "--id", "f1")
        j = self.poll_one(q)
        r = run(["cancel", "f1"], q)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"in flight", r.stderr)
        self.assertIn("(was in flight)", self.ok(["cancel", "f1",
                                                  "--inflight"], q))
        # The job is gone: its holder's ack finds nothing (exit 1).
        r = run(["ack", j["id"], j["token"]], q)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"(ENOTFOUND)", r.stderr)

    def test_cancel_several(self):
        q = new_queue("cancel2")
        for i in ("a", "b"):
            self.push(q, "x", "--id", i, "--in", "1h")
        r = run(["cancel", "a", "zz", "b"], q)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, b"canceled a\ncanceled b\n")
        self.assertEqual(self.stats(q)["scheduled"], 0)


class TestRescheduleAndPromote(CliCase):
    def get_json(self, queue, job_id):
        return json.loads(self.ok(["get", job_id, "--json"], queue))

    def test_moves_keeping_the_job(self):
        q = new_queue("resched")
        self.push(q, "keep me", "--id", "r1", "--in", "1h",
                  "--max-attempts", "3")
        self.assertEqual(self.ok(["reschedule", "r1", "--in", "2h"], q),
                         "moved r1\n")
        doc = self.get_json(q, "r1")
        self.assertTrue(7190000 <= doc["due_ms"] - doc["now_ms"] <= 7200000,
                        doc)
        self.assertEqual(self.ok(["reschedule", "r1", "--at",
                                  "4102444800000"], q), "moved r1\n")
        self.assertEqual(self.get_json(q, "r1")["due_ms"], 4102444800000)
        self.assertEqual(self.ok(["reschedule", "r1", "--in", "90000"], q),
                         "moved r1\n")
        doc = self.get_json(q, "r1")
        self.assertTrue(80000 <= doc["due_ms"] - doc["now_ms"] <= 90000, doc)
        self.assertEqual(self.ok(["promote", "r1"], q), "moved r1\n")
        j = self.poll_one(q)
        self.assertEqual((j["id"], j["payload"]), ("r1", "keep me"))

    def test_outcomes_and_revive(self):
        q = new_queue("promote")
        self.push(q, "x", "--id", "p1", "--in", "1h")
        self.push(q, "y", "--id", "f1")
        j = self.poll_one(q)
        r = run(["promote", "p1", "f1", "zz"], q)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout, b"moved p1\n")
        self.assertIn(b"job 'f1': in flight: left alone", r.stderr)
        self.assertIn(b"job 'zz': no such job", r.stderr)
        self.ok(["nack", j["id"], j["token"], "--dead"], q)
        r = run(["reschedule", "f1", "--in", "1m"], q)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"dead: left alone (use --revive", r.stderr)
        self.assertEqual(self.ok(["promote", "f1", "--revive"], q),
                         "revived f1\n")
        st = self.stats(q)
        self.assertEqual((st["due"], st["dead"]), (2, 0))


class TestPollAckNackExtend(CliCase):
    def test_poll_text_format_and_ack(self):
        q = new_queue("poll")
        self.push(q, "line1\nline2\tx\\y", "--id", "t1")
        out = self.ok(["poll", "--lease", "1m"], q)
        self.assertTrue(out.endswith("\n"))
        fields = out[:-1].split("\t")
        self.assertEqual(len(fields), 4, out)
        jid, attempt, token, payload = fields
        self.assertEqual((jid, attempt), ("t1", "1"))
        self.assertRegex(token, r"^\d+$")
        self.assertEqual(payload, "line1\\nline2\\tx\\\\y")
        self.assertEqual(self.ok(["poll"], q), "")   # nothing else due
        self.assertEqual(self.stats(q)["inflight"], 1)
        self.assertEqual(self.ok(["ack", jid, token], q), "acked t1\n")
        st = self.stats(q)
        self.assertEqual((st["inflight"], st["due"], st["scheduled"]),
                         (0, 0, 0))
        # The same ack again: the job's done record holds this token, so
        # it reports the ack that landed; an unknown id is ENOTFOUND.
        self.assertEqual(self.ok(["ack", jid, token], q), "acked t1\n")
        r = run(["ack", "never-" + jid, token], q)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"ENOTFOUND", r.stderr)

    def test_poll_max_and_json_fields(self):
        q = new_queue("pollmax")
        for i in range(5):
            self.push(q, "p%d" % i, "--id", "j%d" % i)
        jobs = json.loads(self.ok(["poll", "--max", "3", "--json",
                                   "--lease", "10s"], q))
        self.assertEqual(len(jobs), 3)
        for j in jobs:
            self.assertEqual(set(j), {"id", "attempt", "token", "due_ms",
                                      "lease_deadline_ms", "payload",
                                      "group", "priority"})
            self.assertEqual((j["group"], j["priority"]), (None, 0))
            self.assertEqual(j["attempt"], 1)
            self.assertGreater(j["lease_deadline_ms"], j["due_ms"])
        self.assertEqual(self.ok(["poll", "--json", "--max", "10"], q)
                         .count('"id"'), 2)
        self.assertEqual(self.ok(["poll", "--json"], q), "[]\n")

    def test_poll_wait_gets_a_job_that_comes_due(self):
        q = new_queue("wait")
        self.push(q, "soon", "--in", "1500ms")   # not due at the first poll
        self.assertEqual(self.ok(["poll"], q), "")
        j = self.poll_one(q, "--wait", "20s")
        self.assertEqual(j["payload"], "soon")

    def test_stale_token_exits_4(self):
        q = new_queue("stale")
        self.push(q, "x", "--id", "s1")
        j1 = self.poll_one(q, "--lease", "100ms")
        deadline = time.monotonic() + 10
        j2 = None
        while j2 is None and time.monotonic() < deadline:
            jobs = json.loads(self.ok(["poll", "--json"], q))
            j2 = jobs[0] if jobs else None
            time.sleep(0.05)
        self.assertIsNotNone(j2, "lease never ran out")
        self.assertEqual(j2["attempt"], 2)
        for args in (["ack", "s1", j1["token"]],
                     ["nack", "s1", j1["token"]],
                     ["extend", "s1", j1["token"], "--lease", "1m"]):
            r = run(args, q)
            self.assertEqual(r.returncode, 4, (args, r.stderr))
            self.assertIn(b"(ESTALE)", r.stderr)
        self.ok(["ack", "s1", j2["token"]], q)

    def test_nack_requeue_delay_and_dead(self):
        q = new_queue("nack")
        self.push(q, "x", "--id", "n1")
        j = self.poll_one(q)
        self.assertEqual(self.ok(["nack", "n1", j["token"], "--in", "1h"], q),
                         "requeued n1\n")
        st = self.stats(q)
        self.assertEqual((st["scheduled"], st["inflight"]), (1, 0))
        self.assertGreater(st["next_due_ms"], 3500 * 1000)
        self.push(q, "y", "--id", "n2")
        j = self.poll_one(q)
        self.assertEqual(self.ok(["nack", "n2", j["token"]], q),
                         "requeued n2\n")
        j = self.poll_one(q)
        self.assertEqual((j["id"], j["attempt"]), ("n2", 2))
        self.assertEqual(self.ok(["nack", "n2", j["token"], "--dead"], q),
                         "dead n2\n")
        self.assertEqual(self.stats(q)["dead"], 1)

    def test_extend(self):
        q = new_queue("extend")
        self.push(q, "x", "--id", "e1")
        j = self.poll_one(q, "--lease", "1s")   # still held when extend runs
        out = self.ok(["extend", "e1", j["token"], "--lease", "1h"], q)
        self.assertRegex(out, r"^extended e1 until \d{4}-\d\d-\d\dT"
                              r"\d\d:\d\d:\d\dZ \(1h from now\)\n$")
        # Past the first lease's end the job is still ours.
        time.sleep(1.3)
        self.assertEqual(self.ok(["poll", "--json"], q), "[]\n")
        self.assertEqual(self.stats(q)["inflight"], 1)
        r = run(["extend", "nope", j["token"]], q)
        self.assertEqual(r.returncode, 1)


class TestGetAndReasons(CliCase):
    def get_json(self, queue, job_id, code=0):
        return json.loads(self.ok(["get", job_id, "--json"], queue,
                                  code=code))

    def test_get_every_state_text_and_json(self):
        q = new_queue("get")
        self.push(q, "later\tone", "--id", "s1", "--in", "30m")
        out = self.ok(["get", "s1"], q)
        self.assertRegex(out, r"^id         s1\nstate      scheduled\n"
                              r"due        \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ "
                              r"\(in 29m 5\ds\)\nattempts   0\n"
                              r"payload    later\\tone\n$")
        doc = self.get_json(q, "s1")
        self.assertEqual((doc["id"], doc["state"], doc["attempts"],
                          doc["payload"]), ("s1", "scheduled", 0,
                                            "later\tone"))
        self.assertGreater(doc["due_ms"] - doc["now_ms"], 29 * 60000)
        self.assertNotIn("last_error", doc)
        self.push(q, "now", "--id", "d1")
        self.assertEqual(self.get_json(q, "d1")["state"], "due")
        j = self.poll_one(q)
        doc = self.get_json(q, "d1")
        self.assertEqual((doc["state"], doc["attempts"],
                          doc["lease_deadline_ms"]),
                         ("inflight", 1, j["lease_deadline_ms"]))
        self.assertIn("lease ends ", self.ok(["get", "d1"], q))
        self.ok(["nack", "d1", j["token"], "--dead"], q)
        doc = self.get_json(q, "d1")
        self.assertEqual(doc["state"], "dead")
        self.assertLessEqual(abs(doc["died_ms"] - doc["now_ms"]), 60000)
        # Unknown: exit 1, a message, and {"state": "unknown"} in JSON.
        r = run(["get", "nope"], q)
        self.assertEqual((r.returncode, r.stdout), (1, b""))
        self.assertIn(b"no job 'nope'", r.stderr)
        self.assertEqual(self.get_json(q, "nope", code=1),
                         {"id": "nope", "state": "unknown"})
        # Usage: one id.
        for args in (["get"], ["get", "a", "b"], ["get", "a", "--bogus"]):
            self.assertEqual(run(args, q).returncode, 2, args)

    def test_nack_reason_shown_by_get_and_lists(self):
        q = new_queue("reason")
        self.push(q, "x", "--id", "r1")
        j = self.poll_one(q)
        self.assertEqual(self.ok(["nack", "r1", j["token"], "--reason",
                                  "db timeout\nretry"], q), "requeued r1\n")
        doc = self.get_json(q, "r1")
        self.assertEqual((doc["state"], doc["last_error"]),
                         ("due", "db timeout\nretry"))
        self.assertLessEqual(abs(doc["failed_ms"] - doc["now_ms"]), 60000)
        self.assertRegex(self.ok(["get", "r1"], q),
                         r"\nlast error db timeout\\nretry \((now|\d+ms ago|"
                         r"\ds ago)\)\n")
        # A plain nack keeps it; a dead one with a reason replaces it.
        j = self.poll_one(q)
        self.ok(["nack", "r1", j["token"]], q)
        self.assertEqual(self.get_json(q, "r1")["last_error"],
                         "db timeout\nretry")
        j = self.poll_one(q)
        self.ok(["nack", "r1", j["token"], "--dead", "--reason", "gave up"], q)
        out = self.ok(["list", "dead"], q)
        self.assertRegex(out, r"\n\s+failed (now|\d+ms ago|\ds ago): "
                              r"gave up\n")
        self.assertEqual(self.ok(["dead", "list"], q), out)
        doc = json.loads(self.ok(["list", "dead", "--json"], q))
        self.assertEqual(doc["jobs"][0]["last_error"], "gave up")
        self.assertIn("failed_ms", doc["jobs"][0])
        self.assertEqual(self.get_json(q, "r1")["last_error"], "gave up")

    def test_reason_too_long_is_refused(self):
        q = new_queue("reasonlong")
        self.push(q, "x", "--id", "l1")
        j = self.poll_one(q)
        r = run(["nack", "l1", j["token"], "--reason", "r" * 1025], q)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"reason is 1025 bytes", r.stderr)
        self.assertIn(b"(EINVAL)", r.stderr)
        doc = self.get_json(q, "l1")  # untouched: still ours, no reason
        self.assertEqual(doc["state"], "inflight")
        self.assertNotIn("last_error", doc)
        self.ok(["nack", "l1", j["token"], "--reason", "r" * 1024], q)
        self.assertEqual(len(self.get_json(q, "l1")["last_error"]), 1024)


class TestList(CliCase):
    def test_list_dead_text_and_json(self):
        q = new_queue("list")
        self.kill_to_dead(q, "payload one", "d1")
        self.kill_to_dead(q, "two\n", "d2")
        out = self.ok(["list", "dead"], q)
        self.assertIn("dead jobs (from 0): 2", out)
        self.assertRegex(out, r"d1\s+(now|\d+(ms|s) ago)\s+\d{4}-")
        self.assertIn("payload one", out)
        self.assertIn("two\\n", out)
        # The three spellings print the same listing; only the relative
        # times (and so the columns' padding) may differ, when the calls
        # fall in different seconds.
        def same(text):
            text = re.sub(r"(now|\d+(ms|s|m|h|d) ago)", "AGO", text)
            return re.sub(r" +", " ", text)
        self.assertEqual(same(self.ok(["peek", "dead"], q)), same(out))
        self.assertEqual(same(self.ok(["dead", "list"], q)), same(out))
        doc = json.loads(self.ok(["list", "dead", "--json"], q))
        self.assertEqual(doc["queue"], q)
        self.assertEqual([j["id"] for j in doc["jobs"]], ["d1", "d2"])
        for j in doc["jobs"]:
            self.assertEqual(j["state"], "dead")
            self.assertEqual(j["attempt"], 1)
            self.assertLessEqual(abs(j["died_ms"] - doc["now_ms"]), 60000)
        # Paging.
        doc = json.loads(self.ok(["list", "dead", "--json", "--offset", "1",
                                  "--limit", "1"], q))
        self.assertEqual([j["id"] for j in doc["jobs"]], ["d2"])
        out = self.ok(["list", "dead", "--limit", "1"], q)
        self.assertIn("more may follow: --offset 1", out)

    def test_list_all_and_scheduled(self):
        q = new_queue("listall")
        self.push(q, "later", "--id", "s1", "--in", "30m")
        self.kill_to_dead(q, "x", "d1")
        r = run(["list", "--json"], q)
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        states = {j["id"]: j["state"] for j in doc["jobs"]}
        self.assertEqual(states.get("d1"), "dead")
        r = run(["list", "scheduled"], q)
        if b"dq_list" in r.stderr:        # a libdelayq without dq_list
            self.assertEqual(r.returncode, 1)
            self.assertNotIn("s1", states)
        else:
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(states.get("s1"), "scheduled")
            self.assertRegex(r.stdout.decode(), r"s1\s+in (29|30)m")
            # In flight: by lease deadline, no token shown.
            self.push(q, "now", "--id", "f1")
            j = self.poll_one(q, "--lease", "2m")
            doc = json.loads(self.ok(["list", "inflight", "--json"], q))
            self.assertEqual([(x["id"], x["state"], x["attempt"],
                               x["lease_deadline_ms"]) for x in doc["jobs"]],
                             [("f1", "inflight", 1, j["lease_deadline_ms"])])
            self.assertNotIn("token", doc["jobs"][0])
            out = self.ok(["list", "inflight"], q)
            self.assertRegex(out, r"f1\s+in (1m \d+s|2m)")
            out = self.ok(["list"], q)
            for head in ("scheduled jobs", "inflight jobs", "dead jobs"):
                self.assertIn(head, out)

    def test_list_group_and_priority(self):
        q = new_queue("listgrp")
        self.push(q, "a", "--id", "plain")
        self.push(q, "b", "--id", "g1", "--group", "acme", "--priority", "3")
        self.push(q, "c", "--id", "g2", "--group", "billing.team-2")
        self.push(q, "d", "--id", "p7", "--priority", "7", "--in", "1h")
        want = {"plain": (None, 0), "g1": ("acme", 3),
                "g2": ("billing.team-2", 0), "p7": (None, 7)}

        def check(doc, state, ids):
            got = {j["id"]: (j["group"], j["priority"]) for j in doc["jobs"]}
            self.assertEqual(got, {i: want[i] for i in ids})
            for j in doc["jobs"]:
                self.assertEqual(j["state"], state)

        check(json.loads(self.ok(["list", "scheduled", "--json"], q)),
              "scheduled", want)
        out = self.ok(["list", "scheduled"], q)
        head = out.splitlines()[1]
        self.assertRegex(head, r"ATTEMPT  PRIO  GROUP +PAYLOAD$")
        col = head.index("GROUP")
        rows = {ln.split()[0]: ln for ln in out.splitlines()[2:]}
        self.assertEqual(rows["g1"][col:].split()[0], "acme")
        self.assertRegex(rows["g1"], r"\s0\s+3\s+acme\s+b$")
        self.assertEqual(rows["g2"][col:].split()[0], "billing.team-2")
        self.assertRegex(rows["p7"], r"\s0\s+7\s+d$")
        # a plain job: both columns blank
        self.assertEqual(rows["plain"][col - 6:].strip(), "a")
        # in flight, then dead (both spellings), then requeued
        for _ in range(3):  # a poll's jobs carry them too
            j = self.poll_one(q, "--lease", "2m")
            self.assertEqual((j["group"], j["priority"]), want[j["id"]])
        check(json.loads(self.ok(["list", "inflight", "--json"], q)),
              "inflight", ["plain", "g1", "g2"])
        for j in json.loads(self.ok(["list", "inflight", "--json"],
                                    q))["jobs"]:
            doc = self.get_json(q, j["id"])
            self.assertEqual((doc["group"], doc["priority"]), want[j["id"]])
        for job_id in ("plain", "g1", "g2"):
            self.ok(["cancel", job_id, "--inflight"], q)
        self.push(q, "e", "--id", "g3", "--group", "acme", "--priority", "9")
        want["g3"] = ("acme", 9)
        j = self.poll_one(q)
        self.ok(["nack", "g3", j["token"], "--dead"], q)
        check(json.loads(self.ok(["list", "dead", "--json"], q)), "dead",
              ["g3"])
        out = self.ok(["dead", "list"], q)
        self.assertRegex(out, r"g3\s.*\s1\s+9\s+acme\s+e\n")
        self.ok(["dead", "requeue", "g3"], q)
        check(json.loads(self.ok(["list", "scheduled", "--json"], q)),
              "scheduled", ["g3", "p7"])
        self.assertRegex(self.ok(["get", "g3"], q),
                         r"\ngroup      acme\npriority   9\n")
        self.assertNotIn("group", self.ok(["get", "p7"], q))

    def get_json(self, queue, job_id):
        return json.loads(self.ok(["get", job_id, "--json"], queue))


class TestGroups(CliCase):
    def test_counts_text_and_json(self):
        q = new_queue("groups")
        self.ok(["config", q, "group_inflight_max=10"])
        for i in range(3):
            self.push(q, "a", "--id", "a%d" % i, "--group", "A")
        self.push(q, "l", "--id", "al", "--group", "A", "--in", "1h")
        self.push(q, "b", "--id", "b0", "--group", "B", "--in", "1h")
        self.push(q, "n", "--id", "n0")
        got = json.loads(self.ok(["groups", q, "--json"]))
        self.assertEqual(got["queue"], q)
        by = {g["group"]: (g["due"], g["later"], g["inflight"])
              for g in got["groups"]}
        self.assertEqual(by, {"A": (3, 1, 0), "B": (0, 1, 0), "": (1, 0, 0)})
        j = self.poll_one(q, "--max", "1")
        self.assertEqual(j["id"][0], "a")
        by = {g["group"]: (g["due"], g["later"], g["inflight"])
              for g in json.loads(self.ok(["groups", "--json"], q))["groups"]}
        self.assertEqual(by["A"], (2, 1, 1))
        out = self.ok(["groups", q]).splitlines()
        self.assertEqual(out[0].split(), ["GROUP", "DUE", "LATER", "INFLIGHT"])
        rows = {r.split()[0]: r.split()[1:] for r in out[1:]}
        self.assertEqual(rows["A"], ["2", "1", "1"])
        self.assertEqual(rows["(none)"], ["1", "0", "0"])
        one = json.loads(self.ok(["groups", q, "--json", "--max", "1"]))
        self.assertEqual(len(one["groups"]), 1)

    def test_bad_usage(self):
        q = new_queue("groupsbad")
        for args in (["groups", q, "--max", "0"],
                     ["groups", q, "--max", "1001"],
                     ["groups", q, "extra"]):
            r = run(args)
            self.assertEqual(r.returncode, 2, (args, r))
        self.assertEqual(json.loads(self.ok(["groups", q, "--json"]))
                         ["groups"], [])


class TestStats(CliCase):
    def fill(self, q):
        """One job in each state: scheduled, due, in flight, dead."""
        self.push(q, "a", "--in", "1h")
        self.kill_to_dead(q, "d", "dd")
        self.push(q, "b")
        self.poll_one(q)
        self.push(q, "c")

    def test_table(self):
        q = new_queue("stats")
        self.fill(q)
        out = self.ok(["stats"], q).splitlines()
        self.assertEqual(out[0].split(), ["QUEUE", "SCHEDULED", "DUE",
                                          "INFLIGHT", "DEAD", "NEXT", "DUE"])
        self.assertEqual(out[1].split()[:5], [q, "1", "1", "1", "1"])
        self.assertEqual(out[1].split()[5], "now")

    def test_json(self):
        q = new_queue("statsjson")
        self.fill(q)
        st = self.stats(q)
        self.assertEqual({k: st[k] for k in ("queue", "scheduled", "due",
                                             "inflight", "dead")},
                         {"queue": q, "scheduled": 1, "due": 1,
                          "inflight": 1, "dead": 1})
        self.assertEqual(st["next_due_ms"], 0)
        empty = self.stats(new_queue("empty"))
        self.assertEqual(empty["next_due_ms"], -1)

    def test_every_queue_without_a_name(self):
        # no --queue and no argument: every queue of the namespace, once
        # each (a partitioned one too), sorted; none in an empty one
        ns, pns = "cli-all-%d" % os.getpid(), "cli-allp-%d" % os.getpid()
        for q in ("b q", "a"):
            self.ok(["push", "x", "-n", ns], q)
        puri = REDIS.uri + ("&" if "?" in REDIS.uri else "?") + "partitions=4"
        for i in range(12):
            r = run(["push", "x%d" % i, "-n", pns], queue="parted", uri=puri)
            self.assertEqual(r.returncode, 0, r.stderr)
        r = run(["stats", "--json", "-n", ns], env=env_for(None))
        self.assertEqual(r.returncode, 0, r.stderr)
        docs = [json.loads(x) for x in r.stdout.decode().splitlines()]
        self.assertEqual([(d["queue"], d["due"]) for d in docs],
                         [("a", 1), ("b q", 1)])
        r = run(["stats", "--json", "-n", pns], env=env_for(None, uri=puri))
        self.assertEqual(r.returncode, 0, r.stderr)
        docs = [json.loads(x) for x in r.stdout.decode().splitlines()]
        self.assertEqual([(d["queue"], d["due"]) for d in docs],
                         [("parted", 12)])
        # queues of another partition count than the client's (a
        # partitioned client on plain queues): named on stderr, left out
        r = run(["stats", "--json", "-n", ns], env=env_for(None, uri=puri))
        self.assertEqual((r.returncode, r.stdout), (0, b""), r.stderr)
        self.assertIn(b"delayq stats: a: ", r.stderr)
        self.assertIn(b"delayq stats: b q: ", r.stderr)
        self.assertIn(b"(EINVAL)", r.stderr)
        r = run(["stats", "--json", "-n", ns + "-none"], env=env_for(None))
        self.assertEqual((r.returncode, r.stdout), (0, b""), r.stderr)

    def test_several_queues(self):
        q1, q2 = new_queue("m1"), new_queue("m2")
        self.push(q1, "x")
        lines = self.ok(["stats", q1, q2, "--json"]).splitlines()
        docs = [json.loads(x) for x in lines]
        self.assertEqual([(d["queue"], d["due"]) for d in docs],
                         [(q1, 1), (q2, 0)])

    def test_prometheus(self):
        q = new_queue("prom")
        self.fill(q)
        weird = 'we"ird\\q'
        out = self.ok(["stats", q, weird, "--prometheus"])
        lines = out.splitlines()
        self.assertIn("# HELP delayq_jobs Jobs in a delayq queue, by state.",
                      lines)
        self.assertIn("# TYPE delayq_jobs gauge", lines)
        self.assertIn("# TYPE delayq_next_due_seconds gauge", lines)
        for state in ("scheduled", "due", "inflight", "dead"):
            self.assertIn('delayq_jobs{queue="%s",state="%s"} 1' % (q, state),
                          lines)
        self.assertIn('delayq_jobs{queue="we\\"ird\\\\q",state="due"} 0',
                      lines)
        self.assertIn('delayq_next_due_seconds{queue="%s"} 0.000' % q, lines)
        self.assertIn('delayq_next_due_seconds{queue="we\\"ird\\\\q"} -1',
                      lines)
        # Every sample line is valid exposition format; every metric has
        # HELP and TYPE before its samples.
        sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*\{([a-z_]+="(\\.|'
                            r'[^"\\])*",?)*\} -?\d+(\.\d+)?$')
        seen = set()
        for line in lines:
            if line.startswith("# TYPE "):
                seen.add(line.split()[2])
            elif not line.startswith("#"):
                self.assertRegex(line, sample)
                self.assertIn(line.split("{")[0], seen)

    def test_watch_count(self):
        q = new_queue("watch")
        out = self.ok(["stats", "--watch", "100ms", "--count", "3"], q)
        self.assertEqual(out.count("QUEUE"), 3)
        self.assertEqual(out.count("(Ctrl-C to stop)"), 3)
        out = self.ok(["stats", "--watch=100ms", "--count", "2", "--json"], q)
        self.assertEqual(len(out.splitlines()), 2)

    def test_watch_stops_on_sigint(self):
        q = new_queue("watchint")
        p = subprocess.Popen([DELAYQ, "stats", "--watch", "100ms"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env_for(q))
        try:
            deadline = time.monotonic() + 20
            first = p.stdout.readline()     # the first refresh has begun
            self.assertIn(b"delayq stats every 100ms", first)
            time.sleep(0.3)
            p.send_signal(signal.SIGINT)
            rc = p.wait(max(1, deadline - time.monotonic()))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
        self.assertEqual(rc, 0)


class TestCounters(CliCase):
    """--counters / DELAYQ_COUNTERS=1 (DQ_OPT_COUNTERS) and the totals that
    `delayq stats` shows."""

    def totals(self, queue):
        st = self.stats(queue)
        return tuple(st[k] for k in ("delivered", "acked", "retried",
                                     "failed"))

    def test_counted_and_shown(self):
        q = new_queue("counters")
        self.assertEqual(self.totals(q), (0, 0, 0, 0))
        for i in range(4):
            self.ok(["--counters", "push", "c%d" % i, "--id", "c%d" % i], q)
        jobs = json.loads(self.ok(["poll", "--counters", "--json", "--max",
                                   "4", "--lease", "1m"], q))
        self.assertEqual(len(jobs), 4)
        self.ok(["--counters", "ack", jobs[0]["id"], jobs[0]["token"]], q)
        self.ok(["--counters", "nack", jobs[1]["id"], jobs[1]["token"]], q)
        self.ok(["--counters", "nack", jobs[2]["id"], jobs[2]["token"],
                 "--dead"], q)
        # without the option nothing is counted
        self.ok(["ack", jobs[3]["id"], jobs[3]["token"]], q)
        self.assertEqual(self.totals(q), (4, 1, 1, 1))
        # the environment variable does the same; 0 does not count
        env = env_for(q)
        env["DELAYQ_COUNTERS"] = "0"
        r = run(["poll", "--json"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(json.loads(r.stdout)), 1)   # the retried one
        self.assertEqual(self.totals(q), (4, 1, 1, 1))
        self.ok(["push", "e", "--id", "e1"], q)
        env["DELAYQ_COUNTERS"] = "1"
        r = run(["poll", "--json"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.totals(q), (5, 1, 1, 1))
        env["DELAYQ_COUNTERS"] = "yes"
        r = run(["poll"], env=env)
        self.assertEqual(r.returncode, 2)
        self.assertIn(b"DELAYQ_COUNTERS", r.stderr)
        # table: the counts, then the totals
        out = self.ok(["stats"], q).splitlines()
        self.assertEqual(out[0].split()[0], "QUEUE")
        i = [x.split()[0] if x.split() else "" for x in out].index("TOTALS")
        self.assertEqual(out[i].split(), ["TOTALS", "DELIVERED", "ACKED",
                                          "RETRIED", "FAILED"])
        self.assertEqual(out[i + 1].split(), [q, "5", "1", "1", "1"])
        # Prometheus: counters, with HELP and TYPE
        lines = self.ok(["stats", "--prometheus"], q).splitlines()
        for name, v in (("delivered", 5), ("acked", 1), ("retried", 1),
                        ("failed", 1)):
            self.assertIn("# TYPE delayq_jobs_%s_total counter" % name, lines)
            self.assertIn('delayq_jobs_%s_total{queue="%s"} %d'
                          % (name, q, v), lines)

    def test_consume_counts(self):
        q = new_queue("counters-consume")
        self.push(q, "ok", "--id", "ok1")
        self.push(q, "bad", "--id", "bad1")
        env = env_for(q)
        env["DELAYQ_COUNTERS"] = "1"
        r = subprocess.run([DELAYQ, "consume", "--max-attempts", "2",
                            "--backoff", "100ms", "--jitter", "0",
                            "--max-jobs", "3", "--", "sh", "-c",
                            'test "$DELAYQ_JOB_ID" != bad1'],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env, timeout=CMD_TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        # ok1 once, bad1 twice: retried once, then dead-lettered
        self.assertEqual(self.totals(q), (3, 1, 1, 1))

    def test_help_mentions_counters(self):
        self.assertIn("--counters", self.ok(["--help"]))
        self.assertIn("delivered", self.ok(["stats", "--help"]))


class TestDead(CliCase):
    def test_requeue_and_purge(self):
        q = new_queue("dead")
        for i in range(4):
            self.kill_to_dead(q, "x%d" % i, "k%d" % i)
        self.assertEqual(self.ok(["dead", "requeue", "k0", "--in", "1h"], q),
                         "requeued 1\n")
        st = self.stats(q)
        self.assertEqual((st["dead"], st["scheduled"]), (3, 1))
        r = run(["dead", "requeue", "k0", "k1"], q)   # k0 is no longer dead
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, b"requeued 1\n")
        self.assertIn(b"no dead job 'k0'", r.stderr)
        # Requeued: attempts reset to 0, so the next delivery is attempt 1.
        j = self.poll_one(q)
        self.assertEqual((j["id"], j["attempt"]), ("k1", 1))
        self.assertEqual(self.ok(["dead", "purge", "k2"], q), "purged 1\n")
        self.assertEqual(self.ok(["dead", "requeue", "--all", "--in", "1h"],
                                 q), "requeued 1\n")
        self.kill_to_dead(q, "y", "k9")
        self.assertEqual(self.ok(["dead", "purge", "--all"], q),
                         "purged 1\n")
        self.assertEqual(self.ok(["dead", "purge", "--all"], q),
                         "purged 0\n")
        self.assertEqual(self.stats(q)["dead"], 0)

    def test_all_loops_over_batches(self):
        q = new_queue("deadmany")
        # 1201 dead jobs: more than one batch of 1000.  Pushed in one
        # batch (push_many), dead-lettered by consume with a command that
        # always fails and --max-attempts 1.
        n = 1201
        ids = ["m%04d" % i for i in range(n)]
        r = push_many(q, ids)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(self.stats(q)["due"], n)
        r = run(["consume", "--max-attempts", "1", "--concurrency", "50",
                 "--max-jobs", str(n), "--quiet", "--", "false"], q,
                timeout=240)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(self.stats(q)["dead"], n)
        self.assertEqual(self.ok(["dead", "requeue", "--all", "--in", "1h"],
                                 q), "requeued %d\n" % n)
        st = self.stats(q)
        self.assertEqual((st["dead"], st["scheduled"]), (0, n))


class TestConsume(CliCase):
    def test_success_and_failure_retried_then_dead(self):
        q = new_queue("consume")
        out = tempfile.mkdtemp(prefix="dq-cli-out-")
        try:
            self.push(q, "hello world", "--id", "ok1")
            self.push(q, "fail me", "--id", "bad1")
            data = b"\x00\xffbin\n"
            self.ok(["push", "--id", "bin1"], q, input=data)
            cmd = ('cat > "$OUT/$DELAYQ_JOB_ID.$DELAYQ_ATTEMPT"; '
                   'echo "$DELAYQ_QUEUE" > "$OUT/$DELAYQ_JOB_ID.queue"; '
                   'test "$DELAYQ_JOB_ID" != bad1')
            env = env_for(q)
            env["OUT"] = out
            # --jitter 0: exact delays (jitter has its own test).
            r = subprocess.run([DELAYQ, "consume", "--concurrency", "2",
                                "--max-attempts", "3", "--backoff", "100ms",
                                "--jitter", "0",
                                "--lease", "5s", "--max-jobs", "5", "--",
                                "sh", "-c", cmd],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, timeout=CMD_TIMEOUT)
            log = r.stderr.decode()
            self.assertEqual(r.returncode, 0, log)
            files = sorted(os.listdir(out))
            self.assertEqual(files, ["bad1.1", "bad1.2", "bad1.3",
                                     "bad1.queue", "bin1.1", "bin1.queue",
                                     "ok1.1", "ok1.queue"])
            with open(os.path.join(out, "ok1.1"), "rb") as f:
                self.assertEqual(f.read(), b"hello world")
            with open(os.path.join(out, "bin1.1"), "rb") as f:
                self.assertEqual(f.read(), data)
            with open(os.path.join(out, "ok1.queue")) as f:
                self.assertEqual(f.read(), q + "\n")
            self.assertIn("job ok1 attempt 1: exit 0", log)
            self.assertIn("job bad1 attempt 1: exit 1", log)
            self.assertIn("-> retry in 100ms", log)
            self.assertIn("job bad1 attempt 2: exit 1", log)
            self.assertIn("-> retry in 200ms", log)   # exponential
            self.assertIn("job bad1 attempt 3: exit 1", log)
            self.assertIn("dead-lettered", log)
            st = self.stats(q)
            self.assertEqual((st["scheduled"], st["due"], st["inflight"],
                              st["dead"]), (0, 0, 0, 1))
            doc = json.loads(self.ok(["list", "dead", "--json"], q))
            self.assertEqual([(j["id"], j["attempt"]) for j in doc["jobs"]],
                             [("bad1", 3)])
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_retry_backoff_is_the_librarys_with_jitter(self):
        # A command that always fails: the consumer's exponential backoff
        # with jitter decides each delay, within
        # [base*2^(n-1)*(1-jitter), base*2^(n-1)], and the next delivery
        # really waits that long.
        q = new_queue("jitter")
        out = tempfile.mkdtemp(prefix="dq-cli-jit-")
        try:
            self.push(q, "x", "--id", "j1")
            env = env_for(q)
            env["OUT"] = out
            base, jitter, attempts = 100, 50, 5
            r = subprocess.run([DELAYQ, "consume", "--backoff", "%dms" % base,
                                "--max-backoff", "10s", "--jitter",
                                "%d%%" % jitter, "--max-attempts",
                                str(attempts), "--max-jobs", str(attempts),
                                "--lease", "5s", "--", "sh", "-c",
                                'date +%s%N > "$OUT/$DELAYQ_ATTEMPT"; '
                                'exit 1'],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, timeout=30)
            log = r.stderr.decode()
            self.assertEqual(r.returncode, 0, log)
            delays = [int(m) for m in
                      re.findall(r"job j1 attempt \d+: exit 1 after \S+ -> "
                                 r"retry in (\d+)ms", log)]
            self.assertEqual(len(delays), attempts - 1, log)
            starts = []
            for n in range(1, attempts + 1):
                with open(os.path.join(out, str(n))) as f:
                    starts.append(int(f.read()) / 1e6)   # ms
            for n, d in enumerate(delays, 1):
                nominal = base * 2 ** (n - 1)
                lo = nominal * (100 - jitter) // 100
                self.assertTrue(lo <= d <= nominal, (n, d, log))
                gap = starts[n] - starts[n - 1]
                # Due no earlier than the delay; picked up promptly after.
                self.assertGreaterEqual(gap, d, (n, gap, log))
                self.assertLess(gap, nominal + 500, (n, gap, log))
            # Jitter really applies: not every delay is the nominal one
            # (each is with probability 1/51).
            self.assertNotEqual(delays, [base * 2 ** i
                                         for i in range(attempts - 1)], log)
            self.assertIn("job j1 attempt %d: exit 1" % attempts, log)
            self.assertIn("-> dead-lettered (%d attempts)" % attempts, log)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_max_attempts_dead_letters_via_the_library(self):
        q = new_queue("maxatt")
        # d1 fails every time: dead after its 2nd delivery.  d2 was
        # delivered twice already (leases that ran out): the consumer
        # dead-letters it without running the command.
        self.push(q, "x", "--id", "d2")
        self.poll_one(q, "--lease", "50ms")
        time.sleep(0.1)
        self.assertEqual(self.poll_one(q, "--lease", "50ms")["attempt"], 2)
        time.sleep(0.1)
        self.push(q, "y", "--id", "d1", "--in", "300ms")
        out = tempfile.mkdtemp(prefix="dq-cli-max-")
        try:
            env = env_for(q)
            env["OUT"] = out
            r = subprocess.run([DELAYQ, "consume", "--max-attempts", "1",
                                "--max-jobs", "1", "--", "sh", "-c",
                                'touch "$OUT/$DELAYQ_JOB_ID"; exit 3'],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, timeout=30)
            log = r.stderr.decode()
            self.assertEqual(r.returncode, 0, log)
            self.assertIn("job d2 attempt 3: over --max-attempts -> "
                          "dead-lettered", log)
            self.assertIn("job d1 attempt 1: exit 3 after", log)
            self.assertIn("-> dead-lettered (1 attempts)", log)
            self.assertEqual(os.listdir(out), ["d1"])   # d2 never ran
            doc = json.loads(self.ok(["list", "dead", "--json"], q))
            self.assertEqual(sorted((j["id"], j["attempt"])
                                    for j in doc["jobs"]),
                             [("d1", 1), ("d2", 3)])
            st = self.stats(q)
            self.assertEqual((st["scheduled"], st["due"], st["inflight"]),
                             (0, 0, 0))
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_lease_renewed_while_the_command_runs(self):
        q = new_queue("renew")
        self.push(q, "x", "--id", "r1")
        # Lease 1.2 s, command 8 s: the consumer renews the lease every
        # 600 ms, so its deadline keeps moving and no poll gets the job.
        # The samples stop 5 s after the job was seen in flight, well
        # before the command ends, however slow each CLI call is (under
        # ASan on a loaded machine six of them outlasted a 2 s command).
        p = subprocess.Popen([DELAYQ, "consume", "--lease", "1200ms",
                              "--max-jobs", "1", "--", "sleep", "8"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env_for(q))
        try:
            def inflight():
                doc = json.loads(self.ok(["list", "inflight", "--json"], q))
                return doc["jobs"]
            self.assertTrue(wait_for(lambda: len(inflight()) == 1, 5))
            deadlines = []
            until = time.monotonic() + 5
            while time.monotonic() < until:
                jobs = inflight()
                self.assertEqual([j["id"] for j in jobs], ["r1"])
                self.assertEqual(jobs[0]["attempt"], 1)
                deadlines.append(jobs[0]["lease_deadline_ms"])
                self.assertEqual(self.ok(["poll", "--json"], q), "[]\n")
                time.sleep(0.6)
            # Samples at least 0.6 s apart over 5 s: the deadline moved
            # at least 4 times.
            self.assertGreaterEqual(len(set(deadlines)), 4, deadlines)
            self.assertEqual(deadlines, sorted(deadlines))
            _, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertEqual(p.returncode, 0, err)
        self.assertIn(b"job r1 attempt 1: exit 0", err)
        self.assertIn(b"-> acked", err)
        self.assertEqual(self.stats(q)["inflight"], 0)

    def test_sigterm_releases_running_jobs_without_dead_letter(self):
        # --max-attempts 1: a failure would dead-letter the job, but a stop
        # releases it (the library's graceful stop): due again at once,
        # attempt kept, and its command is stopped with SIGTERM.
        q = new_queue("release")
        out = tempfile.mkdtemp(prefix="dq-cli-rel-")
        self.push(q, "x", "--id", "s1")
        env = env_for(q)
        env["OUT"] = out
        p = subprocess.Popen([DELAYQ, "consume", "--max-attempts", "1",
                              "--grace", "300ms", "--lease", "10s", "--",
                              "sh", "-c",
                              'trap "touch $OUT/term; exit 143" TERM; '
                              'touch "$OUT/started"; '
                              'i=0; while [ $i -lt 300 ]; do sleep 0.1; '
                              'i=$((i+1)); done'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env)
        try:
            self.assertTrue(wait_for(lambda: os.path.exists(
                os.path.join(out, "started")), 10))
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            _, err = p.communicate(timeout=15)
            took = time.monotonic() - t0
            log = err.decode()
            self.assertEqual(p.returncode, 0, log)
            self.assertLess(took, 5, log)
            self.assertIn("stopping: waiting up to 300ms for 1 running "
                          "command(s)", log)
            self.assertIn("grace period over: stopping 1 command(s)", log)
            self.assertIn("job s1 attempt 1: stopped at shutdown -> released",
                          log)
            self.assertTrue(wait_for(lambda: os.path.exists(
                os.path.join(out, "term")), 5), log)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
            shutil.rmtree(out, ignore_errors=True)
        st = self.stats(q)
        self.assertEqual((st["inflight"], st["due"], st["dead"]), (0, 1, 0))
        j = self.poll_one(q)
        self.assertEqual((j["id"], j["attempt"]), ("s1", 2))

    def test_command_not_found_is_a_failure(self):
        q = new_queue("notfound")
        self.push(q, "x", "--id", "nf")
        r = run(["consume", "--max-attempts", "1", "--max-jobs", "1", "--",
                 "/nonexistent/command"], q)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"cannot run '/nonexistent/command'", r.stderr)
        self.assertIn(b"exit 127", r.stderr)
        self.assertEqual(self.stats(q)["dead"], 1)

    def test_concurrency_runs_commands_at_once(self):
        q = new_queue("conc")
        out = tempfile.mkdtemp(prefix="dq-cli-conc-")
        try:
            for i in range(4):
                self.push(q, str(i), "--id", "c%d" % i)
            # Each command records its start, waits (bounded) until all 4
            # have started, and records whether it saw them all.
            cmd = ('touch "$OUT/start.$DELAYQ_JOB_ID"; i=0; '
                   'while [ $(ls "$OUT" | grep -c start) -lt 4 ] && '
                   '[ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; '
                   '[ $(ls "$OUT" | grep -c start) -ge 4 ] && '
                   'touch "$OUT/saw.$DELAYQ_JOB_ID"')
            env = env_for(q)
            env["OUT"] = out
            r = subprocess.run([DELAYQ, "consume", "--concurrency", "4",
                                "--max-jobs", "4", "--max-attempts", "1",
                                "--", "sh", "-c", cmd],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, timeout=CMD_TIMEOUT)
            self.assertEqual(r.returncode, 0, r.stderr)
            saw = sorted(f for f in os.listdir(out) if f.startswith("saw."))
            self.assertEqual(saw, ["saw.c0", "saw.c1", "saw.c2", "saw.c3"],
                             r.stderr.decode())
            self.assertEqual(self.stats(q)["dead"], 0)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_concurrency_one_runs_one_at_a_time(self):
        q = new_queue("serial")
        out = tempfile.mkdtemp(prefix="dq-cli-serial-")
        try:
            for i in range(3):
                self.push(q, str(i), "--id", "s%d" % i)
            # A command fails if another one is running.
            cmd = ('mkdir "$OUT/lock" || exit 3; sleep 0.1; '
                   'rmdir "$OUT/lock"')
            env = env_for(q)
            env["OUT"] = out
            r = subprocess.run([DELAYQ, "consume", "--max-jobs", "3",
                                "--max-attempts", "1", "--", "sh", "-c", cmd],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, timeout=CMD_TIMEOUT)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr.decode().count("-> acked"), 3)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def test_consume_several_queues(self):
        # Two queues, strict: every job of the first (given first) runs
        # before any of the second, each command sees its job's queue, and
        # each job is acked on its own queue.
        hi, lo = new_queue("multi-hi"), new_queue("multi-lo")
        for i in range(3):
            self.push(lo, "l", "--id", "l%d" % i)
            self.push(hi, "h", "--id", "h%d" % i)
        out = tempfile.mkdtemp(prefix="dq-cli-multi-")
        try:
            env = env_for(None)
            env["OUT"] = out
            cmd = 'echo "$DELAYQ_JOB_ID $DELAYQ_QUEUE" >> "$OUT/log"'
            r = subprocess.run([DELAYQ, "consume", "--queue", hi + ":2",
                                "--queue", lo, "--strict", "--max-jobs", "6",
                                "--", "sh", "-c", cmd],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, timeout=CMD_TIMEOUT)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("in strict order", r.stderr.decode())
            with open(os.path.join(out, "log")) as f:
                lines = [l.split() for l in f.read().splitlines()]
        finally:
            shutil.rmtree(out, ignore_errors=True)
        self.assertEqual(len(lines), 6, lines)
        self.assertEqual([l[0][0] for l in lines], ["h"] * 3 + ["l"] * 3)
        for job_id, queue in lines:
            self.assertEqual(queue, hi if job_id[0] == "h" else lo)
        for q in (hi, lo):
            st = self.stats(q)
            self.assertEqual((st["scheduled"], st["due"], st["inflight"],
                              st["dead"]), (0, 0, 0, 0), st)

    def test_long_command_keeps_its_lease(self):
        q = new_queue("extend")
        self.push(q, "x", "--id", "long")
        # Lease 1s, command 2.5 s: without extensions (every 500 ms) the
        # job would be redelivered (attempt 2) to a second consumer.
        env = env_for(q)
        p = subprocess.Popen([DELAYQ, "consume", "--lease", "1s",
                              "--max-jobs", "1", "--", "sleep", "2.5"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env)
        try:
            time.sleep(1.6)
            other = self.ok(["poll", "--json"], q)
            self.assertEqual(other, "[]\n")
            out, err = p.communicate(timeout=CMD_TIMEOUT)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.assertEqual(p.returncode, 0, err)
        self.assertIn(b"job long attempt 1: exit 0", err)
        self.assertIn(b"-> acked", err)

    def graceful(self, sig):
        q = new_queue("stop")
        out = tempfile.mkdtemp(prefix="dq-cli-stop-")
        self.push(q, "x", "--id", "slow")
        self.push(q, "y", "--id", "quick")
        env = env_for(q)
        env["OUT"] = out
        p = subprocess.Popen([DELAYQ, "consume", "-c", "2", "--grace", "1s",
                              "--lease", "10s", "--", "sh", "-c",
                              'touch "$OUT/$DELAYQ_JOB_ID"; '
                              'if [ "$DELAYQ_JOB_ID" = slow ]; then sleep 60; '
                              'else sleep 0.5; fi'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env)
        try:
            # Both commands have started (not merely been claimed).
            started = wait_for(lambda: len(os.listdir(out)) == 2, 20)
            self.assertTrue(started, os.listdir(out))
            p.send_signal(sig)
            _, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
            shutil.rmtree(out, ignore_errors=True)
        log = err.decode()
        self.assertEqual(p.returncode, 0, log)
        self.assertIn("stopping: waiting up to 1s", log)
        self.assertIn("job quick attempt 1: exit 0", log)
        self.assertIn("job slow attempt 1: stopped at shutdown -> released",
                      log)
        st = self.stats(q)
        # quick was acked; slow was released for another consumer.
        self.assertEqual((st["inflight"], st["due"], st["dead"]), (0, 1, 0))
        self.assertEqual(self.poll_one(q)["id"], "slow")

    def test_graceful_stop_on_sigterm(self):
        self.graceful(signal.SIGTERM)

    def test_graceful_stop_on_sigint(self):
        self.graceful(signal.SIGINT)

    def test_stop_while_idle(self):
        q = new_queue("idle")
        p = subprocess.Popen([DELAYQ, "consume", "--", "true"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env_for(q))
        try:
            first = p.stderr.readline()
            self.assertIn(b"consuming", first)
            p.send_signal(signal.SIGTERM)
            p.wait(10)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
        self.assertEqual(p.returncode, 0)


class TestShellConsumerExample(CliCase):
    def test_example_runs(self):
        script = os.environ.get("DELAYQ_EXAMPLE_SHELL")
        if not script:
            self.fail("DELAYQ_EXAMPLE_SHELL is not set (meson sets it)")
        q = new_queue("example")
        work = tempfile.mkdtemp(prefix="dq-cli-ex-")
        try:
            env = env_for(q)
            env["DELAYQ"] = DELAYQ
            env["OUTBOX"] = os.path.join(work, "outbox.txt")
            r = subprocess.run(["sh", script, "--demo"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            with open(env["OUTBOX"]) as f:
                sent = f.read().splitlines()
            self.assertEqual(sorted(sent), ["mail to alice@example.com",
                                            "mail to bob@example.com"])
            st = self.stats(q)
            self.assertEqual((st["scheduled"], st["due"], st["inflight"],
                              st["dead"]), (0, 0, 0, 1))
        finally:
            shutil.rmtree(work, ignore_errors=True)


class TestCExamples(CliCase):
    """The sync C examples run against the server and check their own
    story (exit 0).  Their job state is then checked through the CLI."""

    def example(self, name, *args):
        d = os.environ.get("DELAYQ_EXAMPLES_DIR")
        if not d:
            self.fail("DELAYQ_EXAMPLES_DIR is not set (meson sets it)")
        exe = os.path.join(d, name)
        self.assertTrue(os.access(exe, os.X_OK), "%s was not built" % exe)
        r = subprocess.run([exe, REDIS.uri] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env_for(None), timeout=120)
        self.assertEqual(r.returncode, 0, (r.stdout + r.stderr).decode())
        return r.stdout.decode()

    def test_order_timeout(self):
        out = self.example("order_timeout", "300")
        self.assertIn("order 2 paid: timeout cancelled", out)
        self.assertIn("timeout of order 3: unpaid, order closed", out)
        st = self.stats("order-timeouts")
        self.assertEqual((st["scheduled"], st["due"], st["inflight"],
                          st["dead"]), (0, 0, 0, 0))

    def test_multi_queue_worker(self):
        out = self.example("multi_queue_worker")
        self.assertIn("handled 40:", out)
        for q in ("emails-urgent", "emails-bulk"):
            st = self.stats(q)
            self.assertEqual((st["scheduled"], st["due"], st["inflight"],
                              st["dead"]), (0, 0, 0, 0), (q, st))

    def test_delayed_logout(self):
        out = self.example("delayed_logout", "600")
        self.assertIn("alice: reconnected, logout cancelled", out)
        self.assertIn("grace period restarted", out)
        self.assertEqual(out.count("session ended"), 2)
        st = self.stats("session-logouts")
        self.assertEqual((st["scheduled"], st["due"], st["inflight"]),
                         (0, 0, 0))

    def test_repeating_reminder(self):
        out = self.example("repeating_reminder", "200", "3")
        self.assertEqual(out.count("registered the reminder"), 1)
        self.assertEqual(out.count("already registered: kept"), 2)
        self.assertEqual(out.count("time for the stand-up"), 3)
        self.assertIn("cancelled: the series stops", out)
        st = self.stats("reminders")
        self.assertEqual((st["scheduled"], st["due"], st["inflight"]),
                         (0, 0, 0))


# The classes a part of the suite runs ($DQ_CLI_PART; unset: all of them).
# meson runs part "dead" (TestDead: 1201 jobs through consume, the longest
# test) as a test of its own beside part "rest", everything else, so that
# neither waits for the other; a new class goes to "rest" by itself.
PARTS = {"dead": ["TestDead"]}


def load_tests(loader, tests, pattern):
    part = os.environ.get("DQ_CLI_PART")
    if not part:
        return tests
    named = [c for names in PARTS.values() for c in names]
    if part != "rest" and part not in PARTS:
        raise ValueError("DQ_CLI_PART=%s: not rest or one of %s"
                         % (part, ", ".join(sorted(PARTS))))
    wanted = unittest.TestSuite()
    for name, obj in sorted(globals().items()):
        if not (isinstance(obj, type) and issubclass(obj, CliCase)):
            continue
        if obj.__module__ != __name__:
            continue
        if name in PARTS.get(part, []) or (part == "rest" and
                                          name not in named):
            wanted.addTests(loader.loadTestsFromTestCase(obj))
    return wanted


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_cli.py PATH/TO/delayq [unittest args]")
    DELAYQ = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
