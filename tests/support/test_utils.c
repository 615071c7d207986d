/*
 * tests/support/test_utils.c - see test_utils.h.
 */
#include "test_utils.h"

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

long long commands_processed(redisContext *r) {
    redisReply *rep = th_cmd(r, "INFO stats");
    ck_assert_int_eq(rep->type, REDIS_REPLY_STRING);
    const char *p = strstr(rep->str, "total_commands_processed:");
    ck_assert_ptr_nonnull(p);
    long long v = atoll(p + strlen("total_commands_processed:"));
    freeReplyObject(rep);
    return v;
}

long long client_commands(redisContext *r) {
    static const char *const internal[] = {
        "time",  "zrangebyscore", "zrange", "zadd", "zrem",    "zcard",
        "zcount", "zscore",       "hmget",  "hset", "hget",    "hdel",
        "hexists", "hlen",        "incrby", "publish", "info", NULL};
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
