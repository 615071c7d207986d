#!/usr/bin/env python3
"""Tests of `delayq config` (a queue's settings stored in Redis) against a
real, private redis-server, with the helpers of test_cli.py.

usage: test_cli_config.py PATH/TO/delayq [unittest args...]

Runs under tests/support/with_redis like test_cli.py ($DQ_TEST_REDIS_URI).
"""
import json
import os
import sys
import unittest

import test_cli
from test_cli import CliCase, new_queue, run

ALL = ["max_attempts", "lease_ms", "backoff", "backoff_base_ms",
       "backoff_cap_ms", "backoff_jitter", "dead_max", "dead_ttl_ms",
       "expired", "rate_max", "rate_window_ms", "layout",
       "inflight_max", "group_inflight_max"]


def setUpModule():
    test_cli.setUpModule()


class TestConfig(CliCase):
    def conf(self, q):
        doc = json.loads(self.ok(["config", q, "--json"]))
        self.assertEqual(doc["queue"], q)
        self.assertEqual(list(doc["settings"]), ALL)
        return doc["settings"]

    def test_help(self):
        out = self.ok(["config", "--help"])
        for word in ALL + ["delayq config QUEUE", "--unset", "--json",
                           "fixed | exponential", "dead | drop"]:
            self.assertIn(word, out)
        self.assertIn("config", self.ok(["--help"]))
        self.assertEqual(self.ok(["help", "config"]), out)

    def test_show_set_unset(self):
        q = new_queue("config")
        out = self.ok(["config", q])
        lines = [l.split() for l in out.splitlines()]
        self.assertEqual(lines, [[n, "-"] for n in ALL])
        self.assertEqual(self.conf(q), {n: None for n in ALL})
        self.assertEqual(self.ok(["config", q, "max_attempts=3",
                                  "backoff=exponential",
                                  "backoff_base_ms=2s", "backoff_cap_ms=90000",
                                  "backoff_jitter=10", "expired=drop",
                                  "dead_max=100", "dead_ttl_ms=7d",
                                  "lease_ms=1m30s", "rate_max=50",
                                  "rate_window_ms=1s", "layout=compact",
                                  "inflight_max=5",
                                  "group_inflight_max=2"]),
                         "")
        want = {"max_attempts": 3, "lease_ms": 90000, "backoff": "exponential",
                "backoff_base_ms": 2000, "backoff_cap_ms": 90000,
                "backoff_jitter": 10, "dead_max": 100,
                "dead_ttl_ms": 7 * 86400000, "expired": "drop",
                "rate_max": 50, "rate_window_ms": 1000, "layout": "compact",
                "inflight_max": 5, "group_inflight_max": 2}
        self.assertEqual(self.conf(q), want)
        self.assertIn("layout           compact\n", self.ok(["config", q]))
        self.assertEqual(self.ok(["config", q, "layout=compact-push"]), "")
        self.assertEqual(self.conf(q)["layout"], "compact-push")
        self.assertIn("layout           compact-push\n",
                      self.ok(["config", q]))
        self.ok(["config", q, "layout=compact"])
        out = self.ok(["config", q])
        self.assertIn("backoff          exponential\n", out)
        self.assertIn("expired          drop\n", out)
        self.assertIn("max_attempts     3\n", out)
        # named ones only, in the order given
        self.assertEqual(self.ok(["config", q, "expired", "max_attempts"]),
                         "expired          drop\nmax_attempts     3\n")
        doc = json.loads(self.ok(["config", q, "rate_max", "--json"]))
        self.assertEqual(doc, {"queue": q, "settings": {"rate_max": 50}})
        # set and show in one call
        self.assertEqual(self.ok(["config", q, "backoff=fixed", "backoff"]),
                         "backoff          fixed\n")
        self.assertEqual(self.ok(["config", q, "expired=dead", "--unset",
                                  "rate_max", "--unset", "rate_window_ms",
                                  "--unset", "max_attempts"]), "")
        got = self.conf(q)
        self.assertEqual(got["expired"], "dead")
        for n in ("rate_max", "rate_window_ms", "max_attempts"):
            self.assertIsNone(got[n])
        self.assertEqual(got["dead_max"], 100)
        # 0 is a value (unlimited max attempts), not an unset
        self.ok(["config", q, "max_attempts=0"])
        self.assertEqual(self.conf(q)["max_attempts"], 0)

    def test_queue_from_option(self):
        q = new_queue("config")
        self.ok(["config", "max_attempts=4"], queue=q)
        self.assertEqual(self.ok(["config", "max_attempts"], queue=q),
                         "max_attempts     4\n")
        self.assertEqual(self.conf(q)["max_attempts"], 4)
        self.assertIn("max_attempts     4", self.ok(["config"], queue=q))

    def test_settings_act(self):
        # the setting reaches the scripts: max attempts 1 dead-letters a
        # job at its first failure
        q = new_queue("config")
        self.ok(["config", q, "max_attempts=1"])
        self.push(q, "x", "--id", "a1")
        j = self.poll_one(q)
        self.assertEqual(self.ok(["nack", j["id"], j["token"]], q).split(),
                         ["dead", "a1"])

    def test_poll_lease_from_setting(self):
        # delayq poll without --lease (or --lease 0): the queue's lease_ms
        q = new_queue("config")
        self.push(q, "x", "--id", "l1")
        j = self.poll_one(q)
        got = j["lease_deadline_ms"] - json.loads(
            self.ok(["get", "l1", "--json"], q))["now_ms"]
        self.assertTrue(25000 < got <= 30000, got)
        self.ok(["config", q, "lease_ms=7s"])
        self.push(q, "x", "--id", "l2")
        j = self.poll_one(q, "--lease", "0")
        got = j["lease_deadline_ms"] - json.loads(
            self.ok(["get", "l2", "--json"], q))["now_ms"]
        self.assertTrue(2000 < got <= 7000, got)
        self.push(q, "x", "--id", "l3")
        j = self.poll_one(q, "--lease", "1m")
        got = j["lease_deadline_ms"] - json.loads(
            self.ok(["get", "l3", "--json"], q))["now_ms"]
        self.assertTrue(55000 < got <= 60000, got)

    def test_bad_input(self):
        q = new_queue("config")
        self.ok(["config", q, "lease_ms=5000"])
        cases = [
            (["config", q, "nope=1"], b"unknown setting 'nope'"),
            (["config", q, "nope"], b"unknown setting 'nope'"),
            (["config", q, "--unset", "nope"], b"unknown setting 'nope'"),
            (["config", q, "backoff=slow"], b"not fixed or exponential"),
            (["config", q, "backoff=1"], b"not fixed or exponential"),
            (["config", q, "expired=keep"], b"not dead or drop"),
            (["config", q, "layout=tiny"],
             b"not default, compact or compact-push"),
            (["config", q, "max_attempts=x"], b"not an integer"),
            (["config", q, "max_attempts="], b"not an integer"),
            (["config", q, "lease_ms=5q"], b"a duration"),
            (["config", q, "max_attempts=-2"], b"max_attempts is -2"),
            (["config", q, "max_attempts=1000001"], b"0..1000000"),
            (["config", q, "backoff_jitter=101"], b"backoff_jitter"),
            (["config", q, "lease_ms=0"], b"lease_ms"),
            (["config", q, "dead_max=0"], b"dead_max"),
            (["config", q, "rate_window_ms=0", "rate_max=1"],
             b"rate_window_ms"),
            (["config", q, "max_attempts=1", "max_attempts=2"],
             b"given twice"),
            (["config", q, "max_attempts=1", "--unset", "max_attempts"],
             b"given twice"),
            (["config", q, "lease_ms=1", "lease_ms"], None),  # ok: shows
            (["config", q, "--bogus"], b"--bogus"),
            (["config", "--unset", "lease_ms"], b"missing QUEUE"),
            (["config"], b"no queue"),
            # half a rate limit: refused by Redis, nothing changed
            (["config", q, "rate_max=10"], b"go together"),
            (["config", q, "rate_window_ms=10"], b"go together"),
        ]
        for args, word in cases:
            r = run(args)
            if word is None:
                self.assertEqual(r.returncode, 0, (args, r.stderr))
                continue
            self.assertEqual(r.returncode, 2, "%r -> %d %r" %
                             (args, r.returncode, r.stderr))
            self.assertIn(word, r.stderr, args)
            self.assertEqual(r.stdout, b"", args)
        got = self.conf(q)
        self.assertEqual(got["lease_ms"], 1)  # the one good call above
        self.assertIsNone(got["rate_max"])
        self.assertIsNone(got["rate_window_ms"])
        self.assertIsNone(got["max_attempts"])
        # cannot connect: exit 3
        r = run(["config", q], uri="unix:///nonexistent/sock")
        self.assertEqual(r.returncode, 3, r.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_cli_config.py PATH/TO/delayq [unittest args]")
    test_cli.DELAYQ = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
