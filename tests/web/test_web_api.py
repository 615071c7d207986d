#!/usr/bin/env python3
"""Tests of `delayq web` (the dashboard's HTTP server and JSON API).

usage: test_web_api.py PATH/TO/delayq [unittest args...]

Runs under tests/support/with_redis (private redis-server, URI in
$DQ_TEST_REDIS_URI; a missing one is a failure, never a skip).  Starts real
`delayq web` processes on 127.0.0.1 port 0 (each prints its address on its
first line), pushes jobs with the `delayq` CLI and talks HTTP with the
standard library only.
"""
import http.client
import json
import os
import socket
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

DELAYQ = None
URI = None
_seq = [0]


def new_queue(tag):
    _seq[0] += 1
    return "web-%s-%d" % (tag, _seq[0])


def cli(args, input=None, ns=None, check=True):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DELAYQ_")}
    env["DELAYQ_URI"] = URI
    if ns:
        env["DELAYQ_NAMESPACE"] = ns
    r = subprocess.run([DELAYQ] + list(args), input=input, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    if check and r.returncode != 0:
        raise AssertionError("delayq %r: %d %s" % (args, r.returncode,
                                                   r.stderr.decode()))
    return r


def fill(cmd, queue, *args):
    """Bulk jobs through the Python binding (tests/web/fill.py), in a
    python of its own: see tests/web/meson.build."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    env["PYTHONPATH"] = os.environ["DQ_WEB_PYTHONPATH"]
    if os.environ.get("DQ_WEB_FILL_PRELOAD"):
        env["LD_PRELOAD"] = os.environ["DQ_WEB_FILL_PRELOAD"]
        env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1"
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, os.path.join(here, "fill.py"), URI,
                        cmd, queue] + [str(a) for a in args], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    if r.returncode != 0:
        raise AssertionError("fill %s %s: %s" % (cmd, queue,
                                                 r.stderr.decode()))


def push(queue, payload, *extra):
    if isinstance(payload, str):
        payload = payload.encode()
    r = cli(["-q", queue, "push", "-"] + list(extra), input=payload)
    return r.stdout.decode().split()[1]


def make_dead(queue, payload, job_id):
    push(queue, payload, "--id", job_id)
    r = cli(["-q", queue, "poll", "--max", "1", "--lease", "30s"])
    jid, _att, token = r.stdout.decode().split("\t")[:3]
    assert jid == job_id, r.stdout
    cli(["-q", queue, "nack", jid, token, "--dead"])


def seg(name):
    """A path segment for any name (percent-encoding every reserved byte)."""
    if isinstance(name, str):
        name = name.encode()
    if name in (b".", b".."):
        return "~x" + name.hex()
    return urllib.parse.quote(name, safe="")


class Server:
    """One `delayq web` process."""

    def __init__(self, *args, uri=None, env_extra=None):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("DELAYQ_")}
        env.update(env_extra or {})
        self.proc = subprocess.Popen(
            [DELAYQ, "-u", uri or URI, "web", "--listen", "127.0.0.1:0"]
            + list(args), env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("listening on http://127.0.0.1:"):
            self.stop()
            raise AssertionError("delayq web did not start: %r %s" % (
                line, self.proc.stderr.read().decode()))
        self.port = int(line.rsplit(":", 1)[1].strip().strip("/"))
        self.csrf = None

    def request(self, method, path, headers=None, body=None, timeout=10):
        c = http.client.HTTPConnection("127.0.0.1", self.port,
                                       timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def json(self, method, path, headers=None, expect=200):
        st, hd, body = self.request(method, path, headers)
        if expect is not None and st != expect:
            raise AssertionError("%s %s: %d %r" % (method, path, st,
                                                   body[:300]))
        self_ct = hd.get("Content-Type", "")
        assert self_ct.startswith("application/json"), self_ct
        return json.loads(body)

    def get(self, path, expect=200, headers=None):
        return self.json("GET", path, headers, expect)

    def post(self, path, expect=200, csrf=True, headers=None):
        h = dict(headers or {})
        if csrf:
            if self.csrf is None:
                self.csrf = self.get("/api/session", headers=h)["csrf"]
            h["X-CSRF-Token"] = self.csrf
        return self.json("POST", path, h, expect)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdout, self.proc.stderr):
            f.close()


class WebCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server()

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()

    def queue_entry(self, name):
        for q in self.srv.get("/api/queues")["queues"]:
            if q["name"] == name:
                return q
        return None


class TestQueuesAndJobs(WebCase):
    def test_session(self):
        s = self.srv.get("/api/session")
        self.assertEqual(len(s["csrf"]), 32)
        int(s["csrf"], 16)
        self.assertFalse(s["read_only"])
        self.assertEqual(s["auth"], "none")

    def test_queues_listed_with_counts(self):
        q = new_queue("counts")
        make_dead(q, "d", "dead-1")
        push(q, "a", "--in", "1h")
        push(q, "b", "--in", "2h")
        push(q, "c")
        e = self.queue_entry(q)
        self.assertIsNotNone(e)
        self.assertEqual((e["scheduled"], e["due"], e["inflight"], e["dead"]),
                         (2, 1, 0, 1))
        self.assertEqual(e["next_due_ms"], 0)
        self.assertFalse(e["partitioned"])
        info = self.srv.get("/api/queues/" + seg(q))
        self.assertEqual(info["stats"]["scheduled"], 2)
        buckets = {b["label"]: b["jobs"] for b in info["histogram"]["buckets"]}
        self.assertEqual(buckets["due"], 1)
        self.assertEqual(buckets["15-60m"] + buckets["1-6h"], 2)
        self.assertEqual(info["histogram"]["jobs"], 3)
        self.assertIn("rates", info)
        self.assertGreaterEqual(len(info["samples"]), 1)
        # [t, 4 counts, 4 counters]; no client counts here
        self.assertEqual(len(info["samples"][0]), 9)
        self.assertEqual(info["counters"], {"delivered": 0, "acked": 0,
                                            "retried": 0, "failed": 0})
        self.assertIsInstance(info["rates"]["series"], list)

    def test_counters(self):
        """Clients with --counters (DQ_OPT_COUNTERS): totals in the JSON
        and counters in /metrics, the same as `delayq stats`."""
        q = new_queue("counters")
        for i in range(3):
            cli(["--counters", "-q", q, "push", "j%d" % i, "--id", "j%d" % i])
        r = cli(["--counters", "-q", q, "poll", "--max", "3", "--json"])
        jobs = json.loads(r.stdout)
        self.assertEqual(len(jobs), 3)
        cli(["--counters", "-q", q, "ack", jobs[0]["id"], jobs[0]["token"]])
        cli(["--counters", "-q", q, "nack", jobs[1]["id"], jobs[1]["token"]])
        cli(["--counters", "-q", q, "nack", jobs[2]["id"], jobs[2]["token"],
             "--dead"])
        want = {"delivered": 3, "acked": 1, "retried": 1, "failed": 1}
        info = self.srv.get("/api/queues/" + seg(q))
        self.assertEqual(info["counters"], want)
        self.assertEqual(info["samples"][-1][5:], [3, 1, 1, 1])
        # rates from two samples (5 s apart at the least)
        time.sleep(5.2)
        cli(["--counters", "-q", q, "poll", "--max", "1"])  # the retried one
        info = self.srv.get("/api/queues/" + seg(q))
        self.assertEqual(info["counters"]["delivered"], 4)
        r = info["rates"]
        self.assertGreater(r["window_ms"], 0)
        self.assertGreater(r["delivered_per_min"], 0)
        self.assertEqual(r["acked_per_min"], 0)
        self.assertGreaterEqual(len(r["series"]), 1)
        self.assertEqual(len(r["series"][-1]), 5)
        self.assertGreater(sum(p[1] for p in r["series"]), 0)
        st, _, body = self.srv.request("GET", "/metrics")
        self.assertEqual(st, 200)
        lines = body.decode().splitlines()
        want["delivered"] = 4
        for name, v in want.items():
            self.assertIn("# TYPE delayq_jobs_%s_total counter" % name, lines)
            self.assertIn('delayq_jobs_%s_total{queue="%s"} %d'
                          % (name, q, v), lines)
        cli_text = cli(["stats", "--prometheus", q]).stdout.decode()
        for line in cli_text.splitlines():
            if line.startswith("delayq_jobs_"):
                self.assertIn(line, lines)

    def test_partitions_merged_and_namespace(self):
        q = new_queue("parts")
        cli(["-u", URI + "?partitions=4", "-q", q, "push", "x"])
        cli(["-u", URI + "?partitions=4", "-q", q, "push", "y"])
        e = self.queue_entry(q)
        self.assertIsNotNone(e)
        self.assertTrue(e["partitioned"])
        names = [x["name"] for x in self.srv.get("/api/queues")["queues"]]
        self.assertEqual(names.count(q), 1)
        self.assertFalse(any("#" in n for n in names if n.startswith(q)))
        # with the partitioned URI the counts merge the partitions
        s = Server(uri=URI + "?partitions=4")
        try:
            e = [x for x in s.get("/api/queues")["queues"] if x["name"] == q][0]
            self.assertEqual(e["due"], 2)
        finally:
            s.stop()
        # another namespace is not listed
        other = new_queue("ns")
        cli(["-q", other, "push", "z"], ns="elsewhere")
        self.assertIsNone(self.queue_entry(other))

    def test_paging(self):
        q = new_queue("paging")
        for i in range(25):
            push(q, "job %d" % i, "--in", "%dm" % (i + 1), "--id", "p%02d" % i)
        seen = []
        offset = 0
        while True:
            page = self.srv.get("/api/queues/%s/jobs?state=scheduled&offset=%d"
                                "&count=10" % (seg(q), offset))
            self.assertEqual(page["total"], 25)
            seen += [j["id"] for j in page["jobs"]]
            offset += 10
            if not page["more"] or not page["jobs"]:
                break
        self.assertEqual(seen, ["p%02d" % i for i in range(25)])
        for bad in ("count=201", "count=0", "offset=-1", "state=nope",
                    "count=abc"):
            st, _, body = self.srv.request(
                "GET", "/api/queues/%s/jobs?%s" % (seg(q), bad))
            self.assertEqual(st, 400, bad)
            self.assertEqual(json.loads(body)["code"], "EINVAL")
        empty = self.srv.get("/api/queues/%s/jobs?state=inflight" % seg(q))
        self.assertEqual(empty["jobs"], [])

    def test_hostile_payloads_are_escaped(self):
        q = new_queue("hostile")
        evil = "<script>alert(1)</script>\"'&"
        push(q, evil, "--id", "text")
        push(q, evil.encode() + b"\x00\x01tail", "--id", "nul")
        big = b"<b>&" * (256 * 1024)  # 1 MiB
        push(q, big, "--id", "big")
        st, hd, raw = self.srv.request(
            "GET", "/api/queues/%s/jobs?state=scheduled" % seg(q))
        self.assertEqual(st, 200)
        for bad in (b"<", b">", b"&", b"'", b"\x00"):
            self.assertNotIn(bad, raw)
        self.assertIn(b"\\u003cscript\\u003e", raw)
        jobs = {j["id"]: j for j in json.loads(raw)["jobs"]}
        self.assertEqual(jobs["text"]["payload"], {"text": evil})
        self.assertFalse(jobs["text"]["truncated"])
        self.assertEqual(bytes.fromhex(jobs["nul"]["payload"]["hex"]),
                         evil.encode() + b"\x00\x01tail")
        self.assertTrue(jobs["big"]["truncated"])
        self.assertEqual(jobs["big"]["size"], len(big))
        self.assertEqual(jobs["big"]["payload"]["text"],
                         big[:256].decode())
        full = self.srv.get("/api/queues/%s/jobs/big" % seg(q))["job"]
        self.assertFalse(full["truncated"])
        self.assertEqual(full["payload"]["text"].encode(), big)
        self.assertEqual(hd["X-Content-Type-Options"], "nosniff")

    def test_last_error_shown_escaped(self):
        q = new_queue("why")
        push(q, "p", "--id", "w1")
        r = cli(["-q", q, "poll", "--max", "1", "--lease", "30s"])
        jid, _att, token = r.stdout.decode().split("\t")[:3]
        why = "<script>alert(1)</script> timeout"
        cli(["-q", q, "nack", jid, token, "--dead", "--reason", why])
        st, _hd, raw = self.srv.request(
            "GET", "/api/queues/%s/jobs?state=dead" % seg(q))
        self.assertEqual(st, 200)
        self.assertNotIn(b"<script>", raw)
        job = json.loads(raw)["jobs"][0]
        self.assertEqual(job["last_error"], {"text": why})
        self.assertGreater(job["failed_ms"], 0)
        full = self.srv.get("/api/queues/%s/jobs/w1" % seg(q))["job"]
        self.assertEqual(full["last_error"], {"text": why})
        # a job that never failed has none
        push(q, "p", "--id", "w2")
        st, _hd, raw = self.srv.request(
            "GET", "/api/queues/%s/jobs?state=scheduled" % seg(q))
        self.assertNotIn("last_error", json.loads(raw)["jobs"][0])

    def test_hostile_names(self):
        names = ["<img src=x onerror=alert(1)>", "a/b", "..", ".", "q?x=1#f",
                 "sp ace%41", "ünï\u2028code", "~x41"]
        for name in names:
            jid = "id/<&>\"'..%2F"
            push(name, "p", "--id", jid)
            e = self.queue_entry(name)
            self.assertIsNotNone(e, name)
            self.assertEqual(e["due"], 1, name)
            path = "/api/queues/" + seg(name)
            if name == "~x41":  # a name starting "~x" must be sent as %7E
                path = "/api/queues/%7Ex41"
            self.assertEqual(self.srv.get(path)["name"], name)
            job = self.srv.get(path + "/jobs/" + seg(jid))["job"]
            self.assertEqual(job["id"], jid)
            r = self.srv.post(path + "/jobs/" + seg(jid) + "/cancel")
            self.assertEqual(r["canceled"], 1)
            self.assertEqual(self.queue_entry(name), None)
        # a queue name that is not UTF-8 comes with its hex
        raw = b"bin\xff\xfe"
        subprocess.run([DELAYQ, "-u", URI, "-q", raw, "push", "x"], check=True,
                       stdout=subprocess.DEVNULL)
        qs = [q for q in self.srv.get("/api/queues")["queues"]
              if q.get("name_hex") == raw.hex()]
        self.assertEqual(len(qs), 1)
        self.assertEqual(self.srv.get("/api/queues/~x" + raw.hex())["stats"]
                         ["due"], 1)
        # malformed names and ids
        for bad in ("/api/queues/%zz", "/api/queues/a%00b", "/api/queues/~xzz",
                    "/api/queues/a//jobs", "/api/queues/" + "x" * 201):
            st, _, body = self.srv.request("GET", bad)
            self.assertEqual(st, 400, bad)
            json.loads(body)

    def test_job_lookup_not_found(self):
        q = new_queue("lookup")
        push(q, "x", "--id", "here")
        st, _, body = self.srv.request("GET", "/api/queues/%s/jobs/nothere"
                                       % seg(q))
        self.assertEqual(st, 404)
        self.assertEqual(json.loads(body)["code"], "ENOTFOUND")
        # dq_get tells a pending job that is due from one due later
        self.assertEqual(self.srv.get("/api/queues/%s/jobs/here" % seg(q))
                         ["job"]["state"], "due")
        push(q, "y", "--id", "later", "--in", "1h")
        self.assertEqual(self.srv.get("/api/queues/%s/jobs/later" % seg(q))
                         ["job"]["state"], "scheduled")

    def test_job_by_id_at_any_depth(self):
        """The job page asks dq_get: a job behind 10,000 others of its
        state is found (the old listing search stopped at 10,000)."""
        q = new_queue("deep")
        fill("push", q, 10050, 3600000, "bulk-")
        push(q, "the deep one", "--id", "deep", "--in", "2h")
        page = self.srv.get("/api/queues/%s/jobs?state=scheduled&offset=10000"
                            "&count=200" % seg(q))
        self.assertEqual([j["id"] for j in page["jobs"]][-1], "deep")
        r = self.srv.get("/api/queues/%s/jobs/deep" % seg(q))
        j = r["job"]
        self.assertEqual(j["id"], "deep")
        self.assertEqual(j["state"], "scheduled")
        self.assertEqual(j["payload"], {"text": "the deep one"})
        self.assertEqual((j["attempt"], j["lease_deadline_ms"]), (0, 0))
        self.assertIsNone(j["repeat"])
        self.assertNotIn("last_error", j)
        self.assertAlmostEqual(j["due_ms"] - r["now_ms"], 7200000,
                               delta=60000)
        st, _, body = self.srv.request("GET", "/api/queues/%s/jobs/bulk-x"
                                       % seg(q))
        self.assertEqual((st, json.loads(body)["code"]), (404, "ENOTFOUND"))

    def test_job_page_debounce_followup(self):
        """A debounced job that runs with pushes waiting shows its one
        follow-up (followup_ms, the earliest it is due); the ack starts it
        and the mark goes."""
        q = new_queue("followup")
        cli(["-q", q, "push", "v1", "--id", "d", "--debounce", "0",
             "--max-wait", "60s"])
        r = cli(["-q", q, "poll", "--max", "1", "--lease", "60s", "--json"])
        got = json.loads(r.stdout)[0]
        j = self.srv.get("/api/queues/%s/jobs/d" % seg(q))["job"]
        self.assertEqual((j["state"], j["followup_ms"]), ("inflight", 0))
        for pl in ("v2", "v3"):
            out = cli(["-q", q, "push", pl, "--id", "d", "--debounce", "10s",
                       "--max-wait", "60s"]).stdout
            self.assertIn(b"followup d", out)
        info = self.srv.get("/api/queues/%s/jobs/d" % seg(q))
        j = info["job"]
        self.assertEqual((j["state"], j["payload"]),
                         ("inflight", {"text": "v1"}))
        self.assertAlmostEqual(j["followup_ms"] - info["now_ms"], 10000,
                               delta=5000)
        cli(["-q", q, "ack", got["id"], got["token"]])
        j = self.srv.get("/api/queues/%s/jobs/d" % seg(q))["job"]
        self.assertEqual((j["state"], j["payload"], j["followup_ms"]),
                         ("scheduled", {"text": "v3"}, 0))
        # a job that is no debounce at all: 0 too
        push(q, "x", "--id", "plain")
        j = self.srv.get("/api/queues/%s/jobs/plain" % seg(q))["job"]
        self.assertEqual(j["followup_ms"], 0)

    def test_job_page_repeat_lease_and_error(self):
        q = new_queue("jobinfo")
        cli(["-q", q, "push", "tick", "--id", "every", "--every", "60000"])
        cli(["-q", q, "push", "daily", "--id", "cron", "--cron", "30 9 * * 1-5",
             "--tz", "+02:00"])
        j = self.srv.get("/api/queues/%s/jobs/every" % seg(q))["job"]
        self.assertRegex(j["repeat"], r"^every 60000 ms from \d+$")
        j = self.srv.get("/api/queues/%s/jobs/cron" % seg(q))["job"]
        self.assertEqual(j["repeat"], "cron 30 9 * * 1-5 tz +120")
        self.assertEqual(j["state"], "scheduled")
        # in flight: lease deadline and attempt, here and in the listing
        r = cli(["-q", q, "poll", "--max", "1", "--lease", "90s", "--json"])
        got = json.loads(r.stdout)[0]
        self.assertEqual(got["id"], "every")
        info = self.srv.get("/api/queues/%s/jobs/every" % seg(q))
        j = info["job"]
        self.assertEqual((j["state"], j["attempt"]), ("inflight", 1))
        self.assertAlmostEqual(j["lease_deadline_ms"] - info["now_ms"], 90000,
                               delta=10000)
        self.assertEqual(j["due_ms"], j["lease_deadline_ms"])
        page = self.srv.get("/api/queues/%s/jobs?state=inflight" % seg(q))
        self.assertEqual(len(page["jobs"]), 1)
        lj = page["jobs"][0]
        self.assertEqual((lj["id"], lj["attempt"]), ("every", 1))
        self.assertEqual(lj["lease_deadline_ms"], j["lease_deadline_ms"])
        # a retry with a reason: attempt 2 on the next delivery, last error
        cli(["-q", q, "nack", got["id"], got["token"], "--reason",
             "smtp <down>\x01"])
        cli(["-q", q, "poll", "--max", "1", "--lease", "30s"])
        page = self.srv.get("/api/queues/%s/jobs?state=inflight" % seg(q))
        self.assertEqual(page["jobs"][0]["attempt"], 2)
        self.assertGreater(page["jobs"][0]["lease_deadline_ms"], 0)
        j = self.srv.get("/api/queues/%s/jobs/every" % seg(q))["job"]
        self.assertEqual(j["attempt"], 2)
        self.assertEqual(j["last_error"], {"hex": b"smtp <down>\x01".hex()})
        self.assertGreater(j["failed_ms"], 0)
        self.assertRegex(j["repeat"], r"^every 60000 ms")
        st, _, body = self.srv.request("GET", "/api/queues/%s/jobs/every"
                                       % seg(q))
        self.assertNotIn(b"<down>", body)  # escaped in the JSON text too

    def test_settings(self):
        q = new_queue("settings")
        push(q, "x")
        s = self.srv.get("/api/queues/" + seg(q))["settings"]
        self.assertEqual(set(s), {"max_attempts", "lease_ms", "backoff",
                                  "backoff_base_ms", "backoff_cap_ms",
                                  "backoff_jitter", "dead_max", "dead_ttl_ms",
                                  "expired", "rate_max", "rate_window_ms",
                                  "layout", "inflight_max",
                                  "group_inflight_max"})
        self.assertTrue(all(v is None for v in s.values()), s)
        cli(["config", q, "max_attempts=5", "lease_ms=45s",
             "backoff=exponential", "backoff_base_ms=2s", "backoff_cap_ms=1m",
             "backoff_jitter=10", "dead_max=500", "dead_ttl_ms=7d",
             "expired=drop", "rate_max=20", "rate_window_ms=1s",
             "layout=compact", "inflight_max=8", "group_inflight_max=3"])
        s = self.srv.get("/api/queues/" + seg(q))["settings"]
        self.assertEqual(s, {"max_attempts": 5, "lease_ms": 45000,
                             "backoff": "exponential",
                             "backoff_base_ms": 2000, "backoff_cap_ms": 60000,
                             "backoff_jitter": 10, "dead_max": 500,
                             "dead_ttl_ms": 604800000, "expired": "drop",
                             "rate_max": 20, "rate_window_ms": 1000,
                             "layout": "compact", "inflight_max": 8,
                             "group_inflight_max": 3})
        cli(["config", q, "backoff=fixed", "expired=dead", "--unset",
             "dead_max", "--unset", "rate_max", "--unset", "rate_window_ms"])
        s = self.srv.get("/api/queues/" + seg(q))["settings"]
        self.assertEqual((s["backoff"], s["expired"], s["dead_max"],
                          s["rate_max"], s["rate_window_ms"]),
                         ("fixed", "dead", None, None, None))
        # a partitioned queue: the totals (dead_max is split when stored)
        pq = new_queue("psettings")
        cli(["-u", URI + "?partitions=4", "config", pq, "dead_max=400",
             "max_attempts=3"])
        srv = Server(uri=URI + "?partitions=4")
        try:
            s = srv.get("/api/queues/" + seg(pq))["settings"]
            self.assertEqual((s["dead_max"], s["max_attempts"]), (400, 3))
        finally:
            srv.stop()

    def test_groups(self):
        q = new_queue("groups")
        push(q, "x")
        self.assertEqual(self.srv.get("/api/queues/" + seg(q))["groups"], [])
        cli(["config", q, "group_inflight_max=5"])
        for i in range(3):
            push(q, "a", "--id", "a%d" % i, "--group", "A")
        push(q, "b", "--id", "b0", "--group", "B", "--in", "1h")
        # "x", pushed before the queue's first grouped job, is indexed by
        # the first poll as a job without a group, which is a group of its
        # own: the poll of 2 takes it and A's oldest.
        cli(["-q", q, "poll", "--max", "2"])
        g = self.srv.get("/api/queues/" + seg(q))["groups"]
        by = {x["group"]: (x["due"], x["later"], x["inflight"]) for x in g}
        self.assertEqual(by, {"A": (2, 0, 1), "B": (0, 1, 0)})

    def test_jobs_carry_group_and_priority(self):
        """Every list (scheduled, in flight, dead, requeued) and the job's
        own page give each job's group (null when none) and priority."""
        q = new_queue("grpcol")
        push(q, "p", "--id", "plain")
        push(q, "a", "--id", "a3", "--group", "acme", "--priority", "3")
        push(q, "b", "--id", "b0", "--group", "billing:eu")
        push(q, "c", "--id", "c7", "--priority", "7")
        want = {"plain": (None, 0), "a3": ("acme", 3),
                "b0": ("billing:eu", 0), "c7": (None, 7)}

        def listed(state):
            r = self.srv.get("/api/queues/%s/jobs?state=%s" % (seg(q), state))
            return {j["id"]: (j["group"], j["priority"]) for j in r["jobs"]}

        self.assertEqual(listed("scheduled"), want)
        for jid, (g, p) in want.items():
            j = self.srv.get("/api/queues/%s/jobs/%s" % (seg(q), jid))["job"]
            self.assertEqual((j["group"], j["priority"]), (g, p), jid)
        r = cli(["-q", q, "poll", "--max", "4", "--lease", "60s"])
        held = [ln.split("\t")[:3] for ln in r.stdout.decode().splitlines()]
        self.assertEqual(len(held), 4, r.stdout)
        self.assertEqual(listed("inflight"), want)
        for jid, _att, token in held:
            cli(["-q", q, "nack", jid, token, "--dead"])
        self.assertEqual(listed("dead"), want)
        self.srv.post("/api/queues/%s/dead/requeue-all" % seg(q))
        self.assertEqual(listed("scheduled"), want)

    def test_histogram_counts_exact(self):
        """Jobs pushed at known delays, each well inside its window, are
        counted exactly in each bucket."""
        want = [("due", 2, "0"), ("<1m", 3, "30s"), ("1-5m", 1, "3m"),
                ("5-15m", 4, "10m"), ("15-60m", 1, "30m"), ("1-6h", 2, "3h"),
                ("6-24h", 1, "12h"), ("1-7d", 1, "3d"), (">7d", 2, "30d")]
        q = new_queue("hist")
        # dead jobs are not scheduled: not counted
        make_dead(q, "d", "dead-h")
        for _label, n, delay in want:
            for _ in range(n):
                push(q, "h", "--in", delay)
        h = self.srv.get("/api/queues/" + seg(q))["histogram"]
        self.assertEqual([(b["label"], b["jobs"]) for b in h["buckets"]],
                         [(label, n) for label, n, _ in want])
        self.assertEqual(h["jobs"], sum(n for _, n, _ in want))
        self.assertTrue(h["complete"])
        self.assertEqual([b["upto_ms"] for b in h["buckets"]],
                         [0, 60000, 300000, 900000, 3600000, 21600000,
                          86400000, 604800000, -1])
        # beyond the 10,000 jobs the histogram once read with their
        # payloads: every one counted (dq_count_due reads no job)
        big = new_queue("histbig")
        fill("push", big, 12000, 600000, "b-")
        fill("push", big, 500, 30000, "s-")
        h = self.srv.get("/api/queues/" + seg(big))["histogram"]
        self.assertEqual(h["jobs"], 12500)
        self.assertTrue(h["complete"])
        got = {b["label"]: b["jobs"] for b in h["buckets"]}
        self.assertEqual((got["<1m"], got["5-15m"]), (500, 12000))
        # a partitioned queue: the partitions' counts combined
        pq = new_queue("histparts")
        for _label, n, delay in want[:4]:
            for _ in range(n):
                cli(["-u", URI + "?partitions=4", "-q", pq, "push", "p",
                     "--in", delay])
        srv = Server(uri=URI + "?partitions=4")
        try:
            h = srv.get("/api/queues/" + seg(pq))["histogram"]
            self.assertEqual([b["jobs"] for b in h["buckets"]],
                             [n for _, n, _ in want[:4]] + [0] * 5)
        finally:
            srv.stop()

    def test_requeue_and_purge_all_say_more(self):
        """One call moves at most 1000 dead jobs: the answer says how many
        are left, and going again finishes the rest."""
        q = new_queue("bulkdead")
        fill("dead", q, 1100, "dd-")
        r = self.srv.post("/api/queues/%s/dead/requeue-all" % seg(q))
        self.assertEqual(r, {"requeued": 1000, "more": True, "dead_left": 100})
        r = self.srv.post("/api/queues/%s/dead/requeue-all" % seg(q))
        self.assertEqual(r, {"requeued": 100, "more": False, "dead_left": 0})
        q2 = new_queue("bulkpurge")
        fill("dead", q2, 1001, "pp-")
        r = self.srv.post("/api/queues/%s/dead/purge" % seg(q2))
        self.assertEqual(r, {"purged": 1000, "more": True, "dead_left": 1})
        r = self.srv.post("/api/queues/%s/dead/purge" % seg(q2))
        self.assertEqual(r, {"purged": 1, "more": False, "dead_left": 0})
        r = self.srv.post("/api/queues/%s/dead/purge" % seg(q2))
        self.assertEqual(r, {"purged": 0, "more": False, "dead_left": 0})

    def test_metrics(self):
        q = new_queue("metrics")
        push(q, "x")
        push(q, "y", "--in", "1h")
        st, hd, body = self.srv.request("GET", "/metrics")
        self.assertEqual(st, 200)
        self.assertTrue(hd["Content-Type"].startswith("text/plain; version=0.0.4"))
        text = body.decode()  # UTF-8, whatever the queue names hold
        self.assertIn('delayq_jobs{queue="%s",state="due"} 1' % q, text)
        self.assertIn('delayq_jobs{queue="%s",state="scheduled"} 1' % q, text)
        self.assertIn("# TYPE delayq_jobs gauge", text)
        self.assertIn('delayq_next_due_seconds{queue="%s"} 0.000' % q, text)
        # the same series as `delayq stats --prometheus`
        cli_text = cli(["stats", "--prometheus", q]).stdout.decode()
        for line in cli_text.splitlines():
            if line.startswith("delayq_jobs{"):
                self.assertIn(line, text)


class TestActionsAndCsrf(WebCase):
    def test_csrf_and_state_changes(self):
        q = new_queue("csrf")
        make_dead(q, "dead payload", "d1")
        make_dead(q, "dead payload", "d2")
        make_dead(q, "dead payload", "d3")
        path = "/api/queues/%s/dead/d1/requeue" % seg(q)
        self.srv.post(path, expect=403, csrf=False)
        e = self.srv.post(path, expect=403, csrf=False,
                          headers={"X-CSRF-Token": "0" * 32})
        self.assertEqual(e["code"], "ECSRF")
        self.assertEqual(self.queue_entry(q)["dead"], 3)
        self.assertEqual(self.srv.post(path)["requeued"], 1)
        e = self.queue_entry(q)
        self.assertEqual((e["dead"], e["due"]), (2, 1))
        self.srv.post(path, expect=404)
        self.assertEqual(self.srv.post("/api/queues/%s/dead/d2/purge"
                                       % seg(q))["purged"], 1)
        self.assertEqual(self.srv.post("/api/queues/%s/dead/requeue-all"
                                       % seg(q))["requeued"], 1)
        q2 = new_queue("csrf-purge")
        make_dead(q2, "x", "d4")
        self.assertEqual(self.srv.post("/api/queues/%s/dead/purge"
                                       % seg(q2))["purged"], 1)
        self.assertEqual(self.queue_entry(q)["dead"], 0)
        self.assertIsNone(self.queue_entry(q2))
        # cancel: pending -> gone; unknown -> 404; in flight -> 409
        push(q, "c", "--id", "c1", "--in", "1h")
        self.assertEqual(self.srv.post("/api/queues/%s/jobs/c1/cancel"
                                       % seg(q))["canceled"], 1)
        self.srv.post("/api/queues/%s/jobs/c1/cancel" % seg(q), expect=404)
        push(q, "c", "--id", "c2")
        cli(["-q", q, "poll", "--max", "5", "--lease", "1m"])
        self.srv.post("/api/queues/%s/jobs/c2/cancel" % seg(q), expect=409)
        # promote ("run now"): pending -> due now, payload kept; unknown ->
        # 404; in flight -> 409 BUSY; dead -> 409 DEAD
        push(q, "later", "--id", "p1", "--in", "1h")
        self.assertEqual(self.srv.post("/api/queues/%s/jobs/p1/promote"
                                       % seg(q))["promoted"], 1)
        job = self.srv.get("/api/queues/%s/jobs/p1" % seg(q))["job"]
        self.assertEqual((job["state"], job["payload"]),
                         ("due", {"text": "later"}))
        self.srv.post("/api/queues/%s/jobs/nope/promote" % seg(q), expect=404)
        e = self.srv.post("/api/queues/%s/jobs/c2/promote" % seg(q),
                          expect=409)
        self.assertEqual(e["code"], "BUSY")
        q3 = new_queue("promote-dead")
        make_dead(q3, "x", "pd")
        e = self.srv.post("/api/queues/%s/jobs/pd/promote" % seg(q3),
                          expect=409)
        self.assertEqual(e["code"], "DEAD")

    def test_gets_never_change_state_and_get_on_post_paths(self):
        q = new_queue("getsafe")
        make_dead(q, "x", "g1")
        for p in ("/dead/g1/requeue", "/dead/requeue-all", "/dead/purge"):
            st, _, _ = self.srv.request("GET", "/api/queues/%s%s" % (seg(q), p))
            self.assertIn(st, (404, 405))
        self.assertEqual(self.queue_entry(q)["dead"], 1)

    def test_read_only(self):
        q = new_queue("ro")
        make_dead(q, "x", "r1")
        s = Server("--read-only")
        try:
            self.assertTrue(s.get("/api/session")["read_only"])
            e = s.post("/api/queues/%s/dead/r1/requeue" % seg(q), expect=403)
            self.assertEqual(e["code"], "EREADONLY")
            s.post("/api/queues/%s/dead/purge" % seg(q), expect=403)
            s.post("/api/queues/%s/jobs/r1/cancel" % seg(q), expect=403)
            s.post("/api/queues/%s/jobs/r1/promote" % seg(q), expect=403)
            self.assertEqual(s.get("/api/queues/%s" % seg(q))["stats"]["dead"],
                             1)
        finally:
            s.stop()


class TestAuth(unittest.TestCase):
    def test_non_loopback_needs_token(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("DELAYQ_")}
        r = subprocess.run([DELAYQ, "-u", URI, "web", "--listen", "0.0.0.0:0"],
                           env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stdout, b"")
        self.assertIn(b"token", r.stderr)
        for bad in ("nohost", "example.com:80", "127.0.0.1:99999"):
            r = subprocess.run([DELAYQ, "-u", URI, "web", "--listen", bad],
                               env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=30)
            self.assertEqual(r.returncode, 2, bad)

    def test_token_mode(self):
        s = Server("--token", "s3cret-t0ken")
        try:
            for p in ("/api/session", "/api/queues", "/metrics"):
                st, hd, _ = s.request("GET", p)
                self.assertEqual(st, 401, p)
                self.assertIn("Bearer", hd.get("WWW-Authenticate", ""))
            st, _, _ = s.request("GET", "/api/session",
                                 {"Authorization": "Bearer wrong"})
            self.assertEqual(st, 401)
            st, _, _ = s.request("GET", "/api/session",
                                 {"Authorization": "Bearer s3cret-t0ken"})
            self.assertEqual(st, 200)
            # the page itself is public (it holds no data)
            st, _, body = s.request("GET", "/")
            self.assertEqual(st, 200)
            self.assertIn(b"<html", body)
            # login form: a wrong token sets no cookie
            form = {"Content-Type": "application/x-www-form-urlencoded"}
            st, hd, _ = s.request("POST", "/login", form, "token=nope")
            self.assertEqual(st, 303)
            self.assertNotIn("Set-Cookie", hd)
            st, hd, _ = s.request("POST", "/login", form, "token=s3cret-t0ken")
            self.assertEqual(st, 303)
            cookie = hd["Set-Cookie"]
            self.assertIn("HttpOnly", cookie)
            self.assertIn("SameSite=Strict", cookie)
            self.assertNotIn("s3cret", cookie)
            st, _, _ = s.request("GET", "/api/queues",
                                 {"Cookie": cookie.split(";")[0]})
            self.assertEqual(st, 200)
            st, _, _ = s.request("GET", "/api/queues",
                                 {"Cookie": "delayq_session=" + "0" * 32})
            self.assertEqual(st, 401)
        finally:
            s.stop()
        # the token from the environment
        s = Server(env_extra={"DELAYQ_WEB_TOKEN": "from-env"})
        try:
            self.assertEqual(s.request("GET", "/api/session")[0], 401)
            self.assertEqual(s.request("GET", "/api/session", {
                "Authorization": "Bearer from-env"})[0], 200)
        finally:
            s.stop()

    def test_foreign_host_refused_without_token(self):
        s = Server()
        try:
            st, _, _ = s.request("GET", "/api/session",
                                 {"Host": "evil.example:80"})
            self.assertEqual(st, 403)
            st, _, _ = s.request("GET", "/api/session",
                                 {"Host": "localhost:%d" % s.port})
            self.assertEqual(st, 200)
        finally:
            s.stop()


class TestRobustness(WebCase):
    def test_slow_client_does_not_block(self):
        slow = socket.create_connection(("127.0.0.1", self.srv.port))
        try:
            slow.sendall(b"GET /api/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nX-")
            time.sleep(0.2)
            t0 = time.monotonic()
            st, _, _ = self.srv.request("GET", "/api/session", timeout=2)
            self.assertEqual(st, 200)
            self.assertLess(time.monotonic() - t0, 2.0)
        finally:
            slow.close()

    def raw(self, data):
        s = socket.create_connection(("127.0.0.1", self.srv.port), timeout=5)
        try:
            s.sendall(data)
            out = b""
            while True:
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    break
                if not chunk:
                    break
                out += chunk
            return out
        finally:
            s.close()

    def test_malformed_requests(self):
        out = self.raw(b"THIS IS NOT HTTP\r\n\r\n")
        self.assertTrue(out.startswith(b"HTTP/1.") and b" 400 " in out[:20],
                        out[:100])
        out = self.raw(b"GET /api/session HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       + b"X-Big: " + b"a" * 20000 + b"\r\n\r\n")
        self.assertTrue(out == b"" or b" 400 " in out[:20] or
                        b" 413 " in out[:20], out[:100])
        body = b"x" * (70 * 1024)
        out = self.raw(b"POST /api/queues/q/dead/purge HTTP/1.1\r\nHost: "
                       b"127.0.0.1\r\nContent-Length: %d\r\n\r\n" % len(body)
                       + body)
        self.assertTrue(out == b"" or b" 413 " in out[:20] or
                        b" 400 " in out[:20], out[:100])
        st, _, _ = self.srv.request("DELETE", "/api/queues")
        self.assertIn(st, (400, 405, 501))
        st, _, _ = self.srv.request("GET", "/nothing")
        self.assertEqual(st, 404)
        # and it still answers
        self.assertEqual(self.srv.request("GET", "/api/session")[0], 200)

    def test_redis_down_gives_json_errors(self):
        d = tempfile.mkdtemp()
        dead = "unix://" + os.path.join(d, "nothing.sock")
        s = Server(uri=dead)
        try:
            for p in ("/api/queues", "/api/queues/q", "/api/queues/q/jobs",
                      "/api/queues/q/jobs/x"):
                st, hd, body = s.request("GET", p)
                self.assertIn(st, (502, 503), p)
                e = json.loads(body)
                self.assertEqual(e["code"], "EIO", p)
                self.assertTrue(e["error"])
            st, _, _ = s.request("GET", "/metrics")
            self.assertIn(st, (502, 503))
            e = s.post("/api/queues/q/dead/purge", expect=None)
            self.assertEqual(e["code"], "EIO")
            self.assertEqual(s.request("GET", "/api/session")[0], 200)
            self.assertIsNone(s.proc.poll())
        finally:
            s.stop()
            os.rmdir(d)


    def test_redis_restart(self):
        """A Redis that restarts under the dashboard: the next requests
        are served again, without a restart of `delayq web`."""
        d = tempfile.mkdtemp()
        sock = os.path.join(d, "r.sock")
        uri = "unix://" + sock
        binary = os.environ.get("DQ_REDIS_SERVER") or shutil.which(
            "redis-server") or "/usr/bin/redis-server"

        def start():
            p = subprocess.Popen(
                [binary, "--port", "0", "--unixsocket", sock, "--save", "",
                 "--appendonly", "no", "--dir", d],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while not os.path.exists(sock) and time.monotonic() < deadline:
                time.sleep(0.02)
            self.assertTrue(os.path.exists(sock), "redis-server did not start")
            return p

        def stop(p):
            p.terminate()
            p.wait(10)

        r = start()
        s = None
        try:
            cli(["-u", uri, "-q", "rq1", "push", "a"])
            s = Server(uri=uri)
            names = [q["name"] for q in s.get("/api/queues")["queues"]]
            self.assertEqual(names, ["rq1"])
            stop(r)
            r = start()
            cli(["-u", uri, "-q", "rq2", "push", "b"])
            # both the SCAN link and the client's link broke: each
            # reconnects and the read goes once more
            names = [q["name"] for q in s.get("/api/queues")["queues"]]
            self.assertEqual(names, ["rq2"])
            self.assertEqual(s.get("/api/queues/rq2")["stats"]["due"], 1)
        finally:
            if s is not None:
                s.stop()
            stop(r)
            shutil.rmtree(d, ignore_errors=True)


class TestPage(WebCase):
    def test_page_and_assets(self):
        st, hd, body = self.srv.request("GET", "/")
        self.assertEqual(st, 200)
        self.assertTrue(hd["Content-Type"].startswith("text/html"))
        self.assertIn("script-src 'self'", hd["Content-Security-Policy"])
        self.assertNotIn(b"http://", body.replace(b"http://www.w3.org", b""))
        self.assertNotIn(b"https://", body)
        st, hd, js = self.srv.request("GET", "/app.js")
        self.assertEqual(st, 200)
        self.assertNotIn(b"innerHTML", js)
        self.assertNotIn(b"https://", js)
        self.assertIn(b"getContext('2d')", js)
        st, _, css = self.srv.request("GET", "/app.css")
        self.assertEqual(st, 200)

    def test_help(self):
        for args in (["help", "web"], ["web", "--help"]):
            r = cli(args)
            self.assertIn(b"--listen", r.stdout)
            self.assertIn(b"--read-only", r.stdout)
            self.assertIn(b"DELAYQ_WEB_TOKEN", r.stdout)


def main():
    global DELAYQ, URI
    if len(sys.argv) < 2:
        sys.exit("usage: test_web_api.py PATH/TO/delayq")
    DELAYQ = sys.argv.pop(1)
    URI = os.environ.get("DQ_TEST_REDIS_URI")
    if not URI:
        sys.exit("DQ_TEST_REDIS_URI is not set: run under "
                 "tests/support/with_redis (a failure, not a skip)")
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
