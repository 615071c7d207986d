/*
 * tests/support/test_utils.c - see test_utils.h.
 */
#include "test_utils.h"

#include <delayq-consumer.h>

#include "cluster_harness.h"

int64_t wall_ms(void) {
    return wall_us() / 1000;
}

int64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

dq_client *open_uri(const char *uri, const dq_options *opts) {
    dq_client *c = NULL;
    char buf[1024];
    uri = tu_layout_uri(uri, buf, sizeof(buf));
    int rc = dq_open(uri, opts, &c);
    ck_assert_msg(rc == 0, "dq_open(%s): %d %s", uri, rc, dq_errmsg(c));
    ck_assert_ptr_nonnull(c);
    return c;
}

dq_client *open_client(void) { return open_uri(g_srv.uri, NULL); }

dq_client *open_client_opt(int key, int64_t value) {
    dq_options *o = dq_options_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(dq_options_set_int(o, key, value), 0);
    dq_client *c = open_uri(g_srv.uri, o);
    dq_options_free(o);
    return c;
}

int push_text(dq_client *c, const char *queue, const char *payload,
              int64_t delay_ms, const char *id, int flags, char *id_out) {
    int outcome = -1;
    char buf[DQ_ID_BUF];
    int rc = dq_push(c, queue, payload, strlen(payload), delay_ms, id, flags,
                     id_out ? id_out : buf, DQ_ID_BUF, &outcome);
    ck_assert_msg(rc == 0, "dq_push: %d %s", rc, dq_errmsg(c));
    return outcome;
}

int poll_n(dq_client *c, const char *queue, int max, int64_t lease_ms,
           dq_jobs **out, int64_t *next) {
    int n = dq_poll(c, queue, max, lease_ms, out, next);
    ck_assert_msg(n >= 0, "dq_poll: %d %s", n, dq_errmsg(c));
    ck_assert_int_eq((int)dq_jobs_count(*out), n);
    if (n == 0)
        ck_assert_ptr_null(*out);
    return n;
}

dq_jobs *poll_until(dq_client *c, const char *queue, int max,
                    int64_t lease_ms, int64_t limit_ms) {
    int64_t end = th_mono_ms() + limit_ms;
    for (;;) {
        dq_jobs *j = NULL;
        int n = poll_n(c, queue, max, lease_ms, &j, NULL);
        if (n > 0)
            return j;
        if (th_mono_ms() >= end)
            return NULL;
        th_sleep_ms(10);
    }
}

dq_jobs *poll_one(dq_client *c, const char *queue, int64_t lease_ms) {
    dq_jobs *j = NULL;
    int n = poll_n(c, queue, 1, lease_ms, &j, NULL);
    ck_assert_msg(n == 1, "expected one due job in %s, got %d", queue, n);
    return j;
}

void stats5(dq_client *c, const char *queue, int64_t s[5]) {
    int rc = dq_stats(c, queue, &s[0], &s[1], &s[2], &s[3], &s[4]);
    ck_assert_msg(rc == 0, "dq_stats: %d %s", rc, dq_errmsg(c));
}

redisContext *rconn(void) {
    redisContext *r = th_redis_connect(&g_srv);
    ck_assert_ptr_nonnull(r);
    return r;
}

redisReply *rcmd_try(redisContext *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    return rep;
}

redisReply *th_cmd(redisContext *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r, fmt, ap);
    va_end(ap);
    ck_assert_msg(rep != NULL, "redis command failed: %s", r->errstr);
    return rep;
}

long long rint_(redisContext *r, const char *cmd, const char *arg1,
                const char *arg2) {
    redisReply *rep =
        arg2 ? redisCommand(r, "%s %s %s", cmd, arg1, arg2)
             : arg1 ? redisCommand(r, "%s %s", cmd, arg1) : redisCommand(r, cmd);
    ck_assert_ptr_nonnull(rep);
    ck_assert_msg(rep->type == REDIS_REPLY_INTEGER, "%s: not an integer reply",
                  cmd);
    long long v = rep->integer;
    freeReplyObject(rep);
    return v;
}

long long tu_info_int(redisContext *r, const char *section, const char *field) {
    redisReply *rep = th_cmd(r, "INFO %s", section);
    ck_assert_int_eq(rep->type, REDIS_REPLY_STRING);
    char name[64];
    snprintf(name, sizeof(name), "%s:", field);
    const char *p = strstr(rep->str, name);
    ck_assert_msg(p != NULL, "INFO %s has no %s", section, field);
    long long v = atoll(p + strlen(name));
    freeReplyObject(rep);
    return v;
}

long long commands_processed(redisContext *r) {
    return tu_info_int(r, "stats", "total_commands_processed");
}

void tu_nothing_sent(redisContext *r, long long before) {
    long long after = commands_processed(r);
    ck_assert_msg(after - before == 1,
                  "%lld commands reached Redis (expected only the INFO)",
                  after - before);
}

long long client_commands(redisContext *r) {
    static const char *const internal[] = {
        "time",  "zrangebyscore", "zrange", "zadd", "zrem",    "zcard",
        "zcount", "zscore",       "hmget",  "hset", "hget",    "hdel",
        "hexists", "hlen",        "incrby", "publish", "info",  "pexpire",
        "zremrangebyscore", "spublish", "hincrby", "pttl",
        /* and what the compact layouts' scripts add (the mover of an
         * idle poll) */
        "get", "set", "del", "exists", "zrevrangebyscore", "hgetall",
        "hvals", "hrandfield", NULL};
    redisReply *rep = th_cmd(r, "INFO commandstats");
    ck_assert_int_eq(rep->type, REDIS_REPLY_STRING);
    long long sum = 0;
    for (const char *p = strstr(rep->str, "cmdstat_"); p != NULL;
         p = strstr(p + 1, "cmdstat_")) {
        const char *name = p + 8, *colon = strchr(name, ':');
        const char *calls = strstr(name, "calls=");
        if (colon == NULL || calls == NULL)
            break;
        int skip = 0;
        for (int i = 0; internal[i] != NULL; i++)
            if ((size_t)(colon - name) == strlen(internal[i]) &&
                strncmp(name, internal[i], strlen(internal[i])) == 0)
                skip = 1;
        if (!skip)
            sum += atoll(calls + 6);
    }
    freeReplyObject(rep);
    return sum;
}

int64_t server_ms(redisContext *r) {
    redisReply *rep = th_cmd(r, "TIME");
    ck_assert_int_eq(rep->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq((int)rep->elements, 2);
    int64_t ms = atoll(rep->element[0]->str) * 1000 +
                 atoll(rep->element[1]->str) / 1000;
    freeReplyObject(rep);
    return ms;
}

void pct_encode(const char *q, char *out) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)q; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-') {
            *out++ = (char)*p;
        } else {
            *out++ = '%';
            *out++ = hex[*p >> 4];
            *out++ = hex[*p & 15];
        }
    }
    *out = '\0';
}

void queue_key(const char *ns, const char *q, const char *suffix, char *out,
               size_t size) {
    char enc[DQ_QUEUE_MAX * 3 + 1];
    pct_encode(q, enc);
    snprintf(out, size, "%s:{%s}:%s", ns, enc, suffix);
}

/* ---- partitioned runs ---------------------------------------------------- */

int tu_parts(void) {
    const char *s = getenv("DQ_TEST_PARTITIONS");
    int n = s != NULL ? atoi(s) : 0;
    return n > 1 ? n : 1;
}

int tu_part_of(const char *id, int n) {
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 16777619u;
    return n > 1 ? (int)(h % (uint32_t)n) : 0;
}

const char *tu_id_in(char *buf, size_t n, const char *base, int part) {
    int np = tu_parts();
    ck_assert_uint_gt(n, strlen(base) + 11);
    snprintf(buf, n, "%s", base);
    for (int k = 1; np > 1 && tu_part_of(buf, np) != part % np; k++) {
        ck_assert_int_lt(k, 100000);
        snprintf(buf, n, "%s_%d", base, k);
    }
    return buf;
}

void tu_part_key(char *buf, size_t n, const char *ns, const char *queue,
                 const char *suffix, int part) {
    char enc[DQ_QUEUE_MAX * 3 + 1];
    pct_encode(queue, enc);
    int w = part >= 0
                ? snprintf(buf, n, "%s:{%s#%d}:%s", ns, enc, part, suffix)
                : snprintf(buf, n, "%s:{%s}:%s", ns, enc, suffix);
    ck_assert_msg(w >= 0 && (size_t)w < n, "key of %s does not fit", queue);
}

void tu_key(char *buf, size_t n, const char *ns, const char *queue,
            const char *suffix, const char *id) {
    int np = tu_parts();
    tu_part_key(buf, n, ns, queue, suffix,
                np > 1 && id != NULL ? tu_part_of(id, np) : -1);
}

long long tu_sum(redisContext *r, const char *cmd, const char *ns,
                 const char *queue, const char *suffix) {
    int np = tu_parts();
    long long sum = 0;
    char key[800];
    if (np == 1) {
        tu_part_key(key, sizeof(key), ns, queue, suffix, -1);
        return rint_(r, cmd, key, NULL);
    }
    for (int p = 0; p < np; p++) {
        tu_part_key(key, sizeof(key), ns, queue, suffix, p);
        sum += rint_(r, cmd, key, NULL);
    }
    return sum;
}

long long tu_job_fields(redisContext *r, const char *ns, const char *queue) {
    long long sum = tu_sum(r, "HLEN", ns, queue, "jobs");
    int np = tu_parts();
    char key[800];
    for (int p = np == 1 ? -1 : 0; p < (np == 1 ? 0 : np); p++) {
        tu_part_key(key, sizeof(key), ns, queue, "cm", p);
        redisReply *rep = th_cmd(r, "HGET %s n", key);
        ck_assert_ptr_nonnull(rep);
        if (rep->type == REDIS_REPLY_STRING)
            sum += atoll(rep->str);
        freeReplyObject(rep);
    }
    return sum;
}

unsigned tu_shard_of(const char *id) {
    uint64_t h = 0;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h * 31 + *p) % UINT64_C(4294967296);
    return (unsigned)(h % 262144);
}

void tu_shard_suffix(const char *id, char buf[TU_SHARD_SUFFIX]) {
    unsigned h = tu_shard_of(id);
    buf[0] = 's';
    buf[1] = ':';
    buf[2] = (char)('0' + (h >> 12));
    buf[3] = (char)('0' + ((h >> 6) & 63));
    buf[4] = (char)('0' + (h & 63));
    buf[5] = '\0';
}

int tu_job_stored(redisContext *r, const char *ns, const char *queue,
                  const char *id) {
    char key[800];
    tu_key(key, sizeof(key), ns, queue, "jobs", id);
    if (rint_(r, "HEXISTS", key, id) == 1)
        return 1;
    char suffix[TU_SHARD_SUFFIX];
    tu_shard_suffix(id, suffix);
    tu_key(key, sizeof(key), ns, queue, suffix, id);
    return rint_(r, "HEXISTS", key, id) == 1;
}

void tu_assert_plain_clean(redisContext *r, const char *ns,
                           const char *queue) {
    if (tu_parts() == 1)
        return;
    static const char *const others[] = {"due", "lease", "dead", "done",
                                         "meta"};
    char key[800];
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        tu_part_key(key, sizeof(key), ns, queue, others[i], -1);
        ck_assert_msg(rint_(r, "EXISTS", key, NULL) == 0,
                      "%s exists on a partitioned queue", key);
    }
    tu_part_key(key, sizeof(key), ns, queue, "jobs", -1);
    long long n = rint_(r, "HLEN", key, NULL);
    redisReply *rep = rcmd_try(r, "HEXISTS %s %b", key, "\0parts", (size_t)6);
    ck_assert_msg(rep != NULL, "redis command failed: %s", r->errstr);
    ck_assert_int_eq(rep->type, REDIS_REPLY_INTEGER);
    long long has = rep->integer;
    freeReplyObject(rep);
    ck_assert_msg(n == 0 || (n == 1 && has == 1),
                  "%s holds %lld fields (\\0parts %s): only the partition "
                  "count belongs there",
                  key, n, has ? "among them" : "missing");
}

const char *uri_with(const char *extra, char *buf, size_t n) {
    int w = snprintf(buf, n, "%s%c%s", g_srv.uri,
                     strchr(g_srv.uri, '?') ? '&' : '?', extra);
    ck_assert_msg(w >= 0 && (size_t)w < n, "URI does not fit: %s", g_srv.uri);
    return buf;
}

/* The layout of DQ_TEST_LAYOUT ("compact" or "compact-push"), or NULL. */
static const char *test_layout(void) {
    const char *s = getenv("DQ_TEST_LAYOUT");
    return s != NULL && (strcmp(s, "compact") == 0 ||
                         strcmp(s, "compact-push") == 0)
               ? s
               : NULL;
}

int tu_compact(void) { return test_layout() != NULL; }

const char *tu_layout_uri(const char *uri, char *buf, size_t n) {
    if (!tu_compact() || strstr(uri, "layout=") != NULL)
        return uri;
    int w = snprintf(buf, n, "%s%slayout=%s", uri,
                     strchr(uri, '?') ? "&" : "?", test_layout());
    return w >= 0 && (size_t)w < n ? buf : uri;
}

const char *tu_uri(const char *base, const char *extra, char *buf, size_t n) {
    char parts[64] = "";
    const char *lay = test_layout();
    if (tu_parts() > 1)
        snprintf(parts, sizeof(parts), "partitions=%d%s%s", tu_parts(),
                 lay ? "&layout=" : "", lay ? lay : "");
    else if (lay)
        snprintf(parts, sizeof(parts), "layout=%s", lay);
    const char *sep1 = strchr(base, '?') ? "&" : "?";
    int w;
    if (parts[0] && extra)
        w = snprintf(buf, n, "%s%s%s&%s", base, sep1, parts, extra);
    else if (parts[0] || extra)
        w = snprintf(buf, n, "%s%s%s", base, sep1, parts[0] ? parts : extra);
    else
        w = snprintf(buf, n, "%s", base);
    ck_assert_msg(w >= 0 && (size_t)w < n, "URI does not fit: %s", base);
    return buf;
}

const char **tu_ids(size_t n, const char *prefix) {
    size_t each = strlen(prefix) + 24;
    const char **ids = malloc(n * (sizeof(char *) + each));
    ck_assert_ptr_nonnull(ids);
    char *text = (char *)(ids + n);
    for (size_t i = 0; i < n; i++) {
        snprintf(text + i * each, each, "%s%zu", prefix, i);
        ids[i] = text + i * each;
    }
    return ids;
}

void tu_push_ids(dq_client *c, const char *queue, size_t n,
                 const char *const *ids, int64_t delay_ms) {
    const void **pl = malloc(n * sizeof(*pl));
    size_t *lens = malloc(n * sizeof(*lens));
    int64_t *delays = malloc(n * sizeof(*delays));
    ck_assert(pl != NULL && lens != NULL && delays != NULL);
    for (size_t i = 0; i < n; i++) {
        pl[i] = "z";
        lens[i] = 1;
        delays[i] = delay_ms;
    }
    int rc = dq_push_batch(c, queue, n, pl, lens, delays, ids, 0, NULL, NULL);
    ck_assert_msg(rc == (int)n, "push of %zu ids: %d %s", n, rc,
                  dq_errmsg(c));
    free(pl);
    free(lens);
    free(delays);
}

void *tu_wait_thread(void *arg) {
    tu_waiter *w = arg;
    dq_jobs *jobs = NULL;
    w->rc = dq_poll_wait(w->c, w->q, 1, 30000, 10000, &jobs);
    w->done_us = th_mono_us();
    if (w->rc == 1) {
        snprintf(w->id, sizeof(w->id), "%s", dq_job_id(dq_jobs_at(jobs, 0)));
        snprintf(w->token, sizeof(w->token), "%s",
                 dq_job_token(dq_jobs_at(jobs, 0)));
    } else {
        snprintf(w->err, sizeof(w->err), "%s", dq_errmsg(w->c));
    }
    dq_jobs_free(jobs);
    return NULL;
}

long long tu_script_calls(redisContext *r) {
    static const char *const names[] = {"eval",    "evalsha", "eval_ro",
                                        "evalsha_ro", "fcall", "fcall_ro",
                                        NULL};
    redisReply *rep = th_cmd(r, "INFO commandstats");
    ck_assert_int_eq(rep->type, REDIS_REPLY_STRING);
    long long sum = 0;
    for (int i = 0; names[i] != NULL; i++) {
        char pat[64];
        snprintf(pat, sizeof(pat), "cmdstat_%s:calls=", names[i]);
        const char *p = strstr(rep->str, pat);
        if (p != NULL)
            sum += atoll(p + strlen(pat));
    }
    freeReplyObject(rep);
    return sum;
}

long long tu_info_at(int port, const char *section, const char *field,
                     const char *sub) {
    redisContext *ctx = thc_connect(port);
    ck_assert_msg(ctx != NULL, "cannot connect to 127.0.0.1:%d", port);
    redisReply *rep = rcmd_try(ctx, "INFO %s", section);
    ck_assert_msg(rep != NULL, "127.0.0.1:%d: INFO %s: %s", port, section,
                  ctx->errstr);
    char key[128];
    snprintf(key, sizeof(key), "%s:", field);
    const char *p = rep->type == REDIS_REPLY_STRING ? strstr(rep->str, key)
                                                    : NULL;
    const char *eol = p != NULL ? strchr(p, '\r') : NULL;
    const char *v = p != NULL ? strstr(p, sub) : NULL;
    long long n = 0;
    if (v != NULL && (eol == NULL || v < eol))
        n = atoll(v + strlen(sub));
    freeReplyObject(rep);
    redisFree(ctx);
    return n;
}

long long tu_script_calls_at(int port) {
    redisContext *ctx = thc_connect(port);
    ck_assert_msg(ctx != NULL, "cannot connect to 127.0.0.1:%d", port);
    long long n = tu_script_calls(ctx);
    redisFree(ctx);
    return n;
}

long tu_last_error(dq_client *c, const char *q, const char *id, char *buf,
                   int *state) {
    dq_job_info *in = NULL;
    ck_assert_int_eq(dq_get(c, q, id, &in), 1);
    *state = dq_job_info_state(in);
    size_t len = 0;
    const char *e = dq_job_info_last_error(in, &len);
    long n = -1;
    if (e != NULL) {
        ck_assert(len <= DQ_REASON_MAX);
        memcpy(buf, e, len);
        n = (long)len;
    }
    dq_job_info_free(in);
    return n;
}

int tu_fork_writers(pid_t *pids, int n, tu_proc_fn proc, const void *arg) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    for (int k = 0; k < n; k++) {
        pids[k] = fork();
        ck_assert_int_ge(pids[k], 0);
        if (pids[k] == 0) {
            close(fds[0]);
            _exit(proc(k, fds[1], arg));
        }
    }
    close(fds[1]);
    return fds[0];
}

void tu_kill(pid_t pid) {
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

void tu_reap(const pid_t *pids, int n) {
    for (int k = 0; k < n; k++) {
        int status = 0;
        ck_assert_int_eq(waitpid(pids[k], &status, 0), pids[k]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "worker %d: status %d", k, status);
    }
}

dq_job_info *tu_must_get(dq_client *c, const char *queue, const char *id) {
    dq_job_info *in = (dq_job_info *)&in; /* not NULL: must be overwritten */
    int rc = dq_get(c, queue, id, &in);
    ck_assert_msg(rc == 1, "dq_get %s: %d (%s) %s", id, rc, dq_errname(rc),
                  dq_errmsg(c));
    ck_assert_ptr_nonnull(in);
    ck_assert_str_eq(dq_job_info_id(in), id);
    return in;
}

int tu_state_of(dq_client *c, const char *queue, const char *id, int64_t *t) {
    dq_job_info *in = tu_must_get(c, queue, id);
    int st = dq_job_info_state(in);
    if (t != NULL)
        *t = dq_job_info_due_ms(in);
    dq_job_info_free(in);
    return st;
}

/* A reason one byte over DQ_REASON_MAX (not NUL-terminated). */
static char big[DQ_REASON_MAX + 1];

void tu_reason_refused(dq_consumer *c, const dq_job *job, const void *not_job) {
    memset(big, 'r', sizeof(big));
    ck_assert_int_eq(dq_consumer_set_reason(NULL, job, "x", 1), DQ_ENULL);
    ck_assert_int_eq(dq_consumer_set_reason(c, NULL, "x", 1), DQ_ENULL);
    ck_assert_int_eq(dq_consumer_set_reason(c, job, NULL, 1), DQ_ENULL);
    ck_assert_int_eq(dq_consumer_set_reason(c, job, big, sizeof(big)),
                     DQ_EINVAL);
    ck_assert_int_eq(
        dq_consumer_set_reason(c, (const dq_job *)not_job, "x", 1), DQ_EINVAL);
}

void tu_reason_retry_later(dq_consumer *c, const dq_job *job) {
    memset(big, 'r', sizeof(big));
    ck_assert_int_eq(dq_consumer_set_reason(c, job, "retry later", 11), 0);
    ck_assert_int_eq(dq_consumer_set_reason(c, job, big, sizeof(big)),
                     DQ_EINVAL);
}

void tu_reasons_of_retries(dq_client *c, const char *queue) {
    static char buf[DQ_REASON_MAX + 1];
    int st = 0;
    ck_assert_int_eq(tu_last_error(c, queue, "j0", buf, &st), -1);
    ck_assert_int_eq(st, DQ_JOB_SCHEDULED);
    ck_assert_int_eq(tu_last_error(c, queue, "j1", buf, &st), 11);
    ck_assert(memcmp(buf, "retry later", 11) == 0);
    ck_assert_int_eq(st, DQ_JOB_SCHEDULED);
}

/* Runs the command fmt (printf) in dir, its output appended to
 * dir/openssl.log; fails the test if it fails. */
static void sh_in(const char *dir, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sh_in(const char *dir, const char *fmt, ...) {
    char cmd[2048], full[2400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    snprintf(full, sizeof(full), "cd '%s' && { %s; } >>openssl.log 2>&1",
             dir, cmd);
    int rc = system(full);
    ck_assert_msg(rc == 0, "failed (%d): %s (see %s/openssl.log)", rc, cmd,
                  dir);
}

void tu_make_ca(const char *dir, const char *name, const char *cn) {
    sh_in(dir,
          "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
          "-nodes -keyout %s.key -out %s.crt -days 2 -subj /CN=%s",
          name, name, cn);
}

void tu_make_cert(const char *dir, const char *name, const char *ca,
                  const char *cn, const char *san) {
    sh_in(dir,
          "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
          "-nodes -keyout %s.key -out %s.csr -subj /CN=%s",
          name, name, cn);
    if (san != NULL)
        sh_in(dir, "printf 'subjectAltName=%s\\n' > %s.ext", san, name);
    else
        sh_in(dir, ": > %s.ext", name);
    sh_in(dir,
          "openssl x509 -req -in %s.csr -CA %s.crt -CAkey %s.key "
          "-CAcreateserial -out %s.crt -days 2 -extfile %s.ext",
          name, ca, ca, name, name);
}

void tu_rm_dir(const char *dir, const char *prefix) {
    if (dir[0] && strstr(dir, prefix) == dir) {
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", dir);
    }
}

int tu_free_port(void) {
    int port = th_free_port();
    ck_assert_int_gt(port, 0);
    return port;
}
