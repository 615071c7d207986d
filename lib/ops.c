/*
 * ops.c - argument checks, EVALSHA argv building and reply decoding.
 * Pure: no I/O (apart from seeding the id generator from getrandom).
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "cron.h"
#include "ops.h"
#include "pushopts.h"
#include "route.h"
#include "resp.h"

/* ---- Core ---- */

/* One step of the id generator (xorshift128+). */
static uint64_t xs_next(uint64_t s[2]) {
    uint64_t x = s[0], y = s[1];
    s[0] = y;
    x ^= x << 23;
    s[1] = x ^ y ^ (x >> 17) ^ (y >> 26);
    return s[1] + y;
}

/* Seeds the id generator; called again after a fork (pid changed), so a
 * child never repeats its parent's ids. */
static void rng_seed(dq__core *core) {
    uint64_t seed[2] = {0, 0};
    if (getrandom(seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed[0] = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL ^
                  (uint64_t)(uintptr_t)core;
        seed[1] = ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
    }
    core->rng[0] = seed[0] | 1;
    core->rng[1] = seed[1] ^ 0xD1B54A32D192ED03ULL;
    core->rng_pid = (uint64_t)getpid();
}

int dq__core_init(dq__core *core, const dq_options *opts) {
    memset(core, 0, sizeof(*core));
    if (dq__options_copy(&core->opts, opts) != DQ_OK)
        return DQ_ENOMEM;
    rng_seed(core);
    return DQ_OK;
}

void dq__core_clear(dq__core *core) {
    dq__options_clear(&core->opts);
    for (int i = 0; i < DQ_QPARTS_CACHE; i++)
        free(core->qp[i].due_us);
}

void dq__core_set_partitions(dq__core *core, int n) {
    core->partitions = n < 1 ? 1 : n > DQ_PARTS_MAX ? DQ_PARTS_MAX : n;
}

uint32_t dq__fnv1a(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

int dq__part_of(const char *id, int n) {
    return n > 1 ? (int)(dq__fnv1a(id, strlen(id)) % (uint32_t)n) : 0;
}

static size_t encode_queue(const char *q, char *out);
static void gen_id(dq__core *core, char *out);

int dq__core_wake_msg(dq__core *core, const char *channel, size_t len,
                      const char *msg, size_t mlen) {
    const char *open = memchr(channel, '{', len);
    const char *close =
        open ? memchr(open, '}', len - (size_t)(open - channel)) : NULL;
    if (close == NULL)
        return 0;
    const char *hash = memchr(open, '#', (size_t)(close - open));
    long part = hash ? strtol(hash + 1, NULL, 10) : 0;
    size_t enclen = (size_t)((hash ? hash : close) - open - 1);
    /* A consumer's own channel (<channel>:<id>) says in how many us to
     * poll; the queue's broadcast, or a new subscription: now. */
    int64_t at = 0;
    const char *tail = close;
    size_t tlen = len - (size_t)(close - channel);
    const char *me = core->me;
    size_t melen = strlen(me);
    if (msg != NULL && melen > 0 && tlen > melen + 1 &&
        tail[tlen - melen - 1] == ':' &&
        memcmp(tail + tlen - melen, me, melen) == 0) {
        char num[24];
        size_t n = mlen < sizeof(num) - 1 ? mlen : sizeof(num) - 1;
        memcpy(num, msg, n);
        num[n] = '\0';
        long long d = strtoll(num, NULL, 10);
        if (d > 0)
            at = dq__mono_us() + d;
    }
    char enc[DQ_ENC_QUEUE_MAX + 1];
    int due = 0;
    for (int i = 0; i < DQ_QPARTS_CACHE; i++) {
        dq__qparts *q = &core->qp[i];
        if (q->due_us == NULL || part < 0 || part >= core->partitions ||
            (hash == NULL) != (core->partitions <= 1))
            continue;
        size_t el = encode_queue(q->queue, enc);
        if (el == enclen && memcmp(enc, open + 1, el) == 0) {
            if (at < q->due_us[part])
                q->due_us[part] = at;
            q->told[part]++;
            due |= at == 0;
        }
    }
    return due;
}

const char *dq__core_me(dq__core *core) {
    if (core->me[0] == '\0' || core->me_pid != (uint64_t)getpid()) {
        gen_id(core, core->me);
        core->me_pid = (uint64_t)getpid();
    }
    return core->me;
}

uint64_t dq__core_rand(dq__core *core) {
    if (core->rng_pid != (uint64_t)getpid())
        rng_seed(core);
    return xs_next(core->rng);
}

int dq__check_multi(size_t n, const char *const *queues, const int *weights,
                    int mode, dq__err *err) {
    if (queues == NULL)
        return dq__err_set(err, DQ_EINVAL, "queues is NULL");
    if (n == 0 || n > DQ_MULTI_MAX)
        return dq__err_set(err, DQ_EINVAL,
                          "%zu queues; give 1..%d (DQ_MULTI_MAX)", n,
                          DQ_MULTI_MAX);
    if (mode != DQ_PRIO_STRICT && mode != DQ_PRIO_WEIGHTED)
        return dq__err_set(err, DQ_EINVAL,
                          "mode is %d; use DQ_PRIO_STRICT or "
                          "DQ_PRIO_WEIGHTED",
                          mode);
    for (size_t i = 0; i < n; i++) {
        if (queues[i] == NULL)
            return dq__err_set(err, DQ_EINVAL, "queues[%zu] is NULL", i);
        int rc = dq__check_queue(queues[i], err);
        if (rc != DQ_OK)
            return dq__err_set(err, rc, "queues[%zu]: %s", i, err->msg);
        for (size_t j = 0; j < i; j++)
            if (strcmp(queues[i], queues[j]) == 0)
                return dq__err_set(err, DQ_EINVAL,
                                  "queues[%zu] and queues[%zu] are both "
                                  "'%.200s'",
                                  j, i, queues[i]);
        if (weights != NULL && (weights[i] < 1 || weights[i] > DQ_WEIGHT_MAX))
            return dq__err_set(err, DQ_EINVAL,
                              "weights[%zu] is %d; it must be 1..%d", i,
                              weights[i], DQ_WEIGHT_MAX);
    }
    return DQ_OK;
}

int64_t dq__core_queue_due(dq__core *core, const char *queue) {
    dq__qparts *q = dq__core_qparts(core, queue);
    if (q == NULL)
        return 0; /* unknown: poll */
    int64_t first = INT64_MAX;
    for (int p = 0; p < core->partitions; p++)
        if (q->due_us[p] < first)
            first = q->due_us[p];
    return first;
}

int dq__multi_pick(dq__core *core, size_t n, const char *const *queues,
                   const int *weights, int mode, const unsigned char *skip,
                   int64_t *wait_us) {
    int64_t now = dq__mono_us(), first = INT64_MAX;
    uint64_t total = 0;
    int pick = -1;
    /* Weighted: one pass that keeps each due queue with probability
     * weight / (weights so far), which picks each with probability
     * weight / total (a weighted reservoir of one). */
    for (size_t i = 0; i < n; i++) {
        int64_t due = dq__core_queue_due(core, queues[i]);
        if (skip != NULL && skip[i] && due <= now)
            continue; /* polled in this round already */
        if (due > now) {
            if (due < first)
                first = due;
            continue;
        }
        if (mode == DQ_PRIO_STRICT)
            return (int)i;
        uint64_t w = weights != NULL ? (uint64_t)weights[i] : 1;
        total += w;
        if (dq__core_rand(core) % total < w)
            pick = (int)i;
    }
    if (pick < 0 && wait_us != NULL)
        *wait_us = first == INT64_MAX ? -1 : first - now;
    return pick;
}

void dq__core_woken_all(dq__core *core, const char *queue) {
    for (int i = 0; i < DQ_QPARTS_CACHE; i++)
        if (core->qp[i].due_us != NULL &&
            strcmp(core->qp[i].queue, queue) == 0)
            for (int p = 0; p < core->partitions; p++) {
                core->qp[i].due_us[p] = 0;
                core->qp[i].told[p]++;
            }
}

dq__qparts *dq__core_qparts(dq__core *core, const char *queue) {
    for (int i = 0; i < DQ_QPARTS_CACHE; i++)
        if (strcmp(core->qp[i].queue, queue) == 0 && core->qp[i].due_us)
            return &core->qp[i];
    dq__qparts *q = &core->qp[core->qp_next++ % DQ_QPARTS_CACHE];
    free(q->due_us);
    memset(q, 0, sizeof(*q));
    /* one block: due_us, then told */
    q->due_us = calloc(2 * (size_t)core->partitions, sizeof(int64_t));
    if (q->due_us == NULL)
        return NULL;
    q->told = q->due_us + core->partitions;
    snprintf(q->queue, sizeof(q->queue), "%s", queue);
    return q;
}

/* Writes a new DQ_GEN_ID_LEN-character id ([0-9A-Za-z], ~5.95 random bits
 * a character: ~83 for 14) to out. */
static void gen_id(dq__core *core, char *out) {
    static const char abc[] =
        "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    if (core->rng_pid != (uint64_t)getpid())
        rng_seed(core);
    for (int i = 0; i < DQ_GEN_ID_LEN; i++)
        out[i] = abc[xs_next(core->rng) % 62];
    out[DQ_GEN_ID_LEN] = '\0';
}

/* ---- Keys ---- */

static const char *const key_suffix[DQ_NKEYS] = {
    "due", "lease", "jobs", "dead", "done", "idle", "conf", "rate", "counts"};

/* The compact layout's fixed keys, named from the due key's prefix by
 * lua/include/compact/keys.lua: its meta and its bucket index exist while the queue
 * holds compact jobs. */
static const char *const compact_suffix[2] = {"cm", "cb"};

int dq__key_suffix_known(const char *s, size_t n) {
    for (int i = 0; i < DQ_NKEYS + 2; i++) {
        const char *k = i < DQ_NKEYS ? key_suffix[i]
                                     : compact_suffix[i - DQ_NKEYS];
        if (strlen(k) == n && memcmp(k, s, n) == 0)
            return 1;
    }
    return 0;
}

int dq__name_plain(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
}

/* Percent-encodes every byte outside [A-Za-z0-9._-], so a name can neither
 * close the hash tag ({ }) nor forge the ':' separator, and two different
 * names never map to the same keys. */
static size_t encode_queue(const char *q, char *out) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)q; *p; p++) {
        unsigned char ch = *p;
        if (dq__name_plain(ch)) {
            out[o++] = (char)ch;
        } else {
            out[o++] = '%';
            out[o++] = hex[ch >> 4];
            out[o++] = hex[ch & 15];
        }
    }
    out[o] = '\0';
    return o;
}

void dq__core_keys(dq__core *core, const char *queue) {
    dq__core_keys_part(core, queue, -1);
}

void dq__core_keys_part(dq__core *core, const char *queue, int part) {
    dq__keys *k = &core->keys;
    const char *ns = core->opts.ns ? core->opts.ns : "dq";
    if (k->len[0] != 0 && k->db == core->db && k->part == part &&
        strcmp(k->queue, queue) == 0 && strcmp(k->ns, ns) == 0 &&
        k->sharded == core->sharded && k->counting == core->counting)
        return;
    char enc[DQ_ENC_QUEUE_MAX + 16];
    size_t el = encode_queue(queue, enc);
    if (part >= 0) /* '#' is never in an encoded name */
        snprintf(enc + el, sizeof(enc) - el, "#%d", part);
    k->part = part;
    snprintf(k->queue, sizeof(k->queue), "%s", queue);
    snprintf(k->ns, sizeof(k->ns), "%s", ns);
    for (int i = 0; i < DQ_NKEYS; i++) {
        int n = snprintf(k->key[i], sizeof(k->key[i]), "%s:{%s}:%s", ns, enc,
                         key_suffix[i]);
        k->len[i] = (size_t)n;
    }
    /* Pub/sub is server-wide while keys are per database: the database
     * number keeps queue Q of db 3 from waking the waiters of Q in db 0. */
    k->db = core->db;
    k->chanlen = (size_t)snprintf(k->chan, sizeof(k->chan), "%s:{%s}:wake:%d",
                                  ns, enc, core->db);
    k->sharded = core->sharded;
    k->counting = core->counting;
    k->chanarglen = (size_t)snprintf(k->chanarg, sizeof(k->chanarg), "%s%s%s",
                                     core->counting ? "+" : "",
                                     core->sharded ? "!" : "", k->chan);
    k->slot = dq__key_slot(k->key[0], k->len[0]);
}

/* ---- Commands ---- */

int dq__cmd_begin(dq__cmd *c, int script, const dq__keys *k, int nargs) {
    int cap = 4 + DQ_NKEYS + nargs;
    c->script = script;
    c->slot = k->slot;
    c->argc = 0;
    c->nums_used = 0;
    c->resp = NULL;
    c->resp_len = 0;
    c->eval = 0;
    if (cap <= DQ_CMD_INLINE) {
        c->cap = DQ_CMD_INLINE;
        c->argv = c->inline_argv;
        c->lens = c->inline_lens;
        c->nums = c->inline_nums;
        c->nums_cap = sizeof(c->inline_nums);
    } else {
        c->cap = cap;
        c->nums_cap = (size_t)cap * 21;
        c->argv = malloc(sizeof(*c->argv) * (size_t)cap);
        c->lens = malloc(sizeof(*c->lens) * (size_t)cap);
        c->nums = malloc(c->nums_cap);
        if (c->argv == NULL || c->lens == NULL || c->nums == NULL) {
            dq__cmd_free(c);
            return DQ_ENOMEM;
        }
    }
    c->argv[0] = "EVALSHA";
    c->lens[0] = 7;
    c->argv[1] = dq__scripts[script].sha;
    c->lens[1] = 40;
    /* Keys after the first five only go along to the scripts that use
     * them: a key that does not exist makes Redis answer TRYAGAIN to a
     * multi-key script while its slot migrates, so an unused one would only
     * cost.  The order (idle, conf, rate, counts) makes each list a prefix
     * of the next: counts, last, brings all the others along. */
    static const char *const nkeys_str[DQ_NKEYS + 1] = {
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
    int nk;
    if (k->counting || script == DQ_SCRIPT_COUNTS)
        nk = DQ_NKEYS; /* + counts */
    else if (script == DQ_SCRIPT_POLL)
        nk = DQ_NKEYS - 1; /* + idle, conf, rate */
    else if (script == DQ_SCRIPT_NACK || script == DQ_SCRIPT_CONFIG ||
             script == DQ_SCRIPT_GROUPS)
        nk = DQ_NKEYS - 2; /* + idle, conf */
    else if (script == DQ_SCRIPT_PUSH || script == DQ_SCRIPT_DEAD ||
             script == DQ_SCRIPT_ACK || script == DQ_SCRIPT_RESCHEDULE ||
             script == DQ_SCRIPT_DEBOUNCE)
        nk = DQ_NKEYS - 3; /* + idle: they wake consumers */
    else
        nk = DQ_NKEYS - 4;
    c->argv[2] = nkeys_str[nk];
    c->lens[2] = 1;
    for (int i = 0; i < nk; i++) {
        c->argv[3 + i] = k->key[i];
        c->lens[3 + i] = k->len[i];
    }
    c->argv[3 + nk] = k->chanarg; /* ARGV[1] of every script */
    c->lens[3 + nk] = k->chanarglen;
    c->argc = 4 + nk;
    return DQ_OK;
}

/* Frees the argv arrays (when on the heap); the sealed bytes stay. */
static void cmd_drop_argv(dq__cmd *c) {
    if (c->argv != NULL && c->argv != c->inline_argv) {
        free((void *)c->argv);
        free(c->lens);
        free(c->nums);
    }
    c->argv = NULL;
    c->lens = NULL;
    c->nums = NULL;
}

/* Room for n bytes of sealed command: the inline buffer or the heap. */
static char *cmd_room(dq__cmd *c, size_t n) {
    return n <= sizeof(c->inline_resp) ? c->inline_resp : malloc(n);
}

int dq__cmd_seal(dq__cmd *c) {
    size_t total = dq__resp_size(c->argc, c->argv, c->lens);
    char *buf = cmd_room(c, total + 1);
    if (buf == NULL)
        return DQ_ENOMEM;
    *dq__resp_put(buf, c->argc, c->argv, c->lens) = '\0';
    c->resp = buf;
    c->resp_len = total;
    c->rest_off = dq__resp_array_size(c->argc) + dq__resp_bulk_size(7) +
                  dq__resp_bulk_size(40);
    cmd_drop_argv(c);
    return DQ_OK;
}

void dq__cmd_free(dq__cmd *c) {
    cmd_drop_argv(c);
    if (c->resp != NULL && c->resp != c->inline_resp)
        free(c->resp);
    c->resp = NULL;
    c->resp_len = 0;
}

int dq__cmd_use_eval(dq__cmd *c) {
    const dq__script *sc = &dq__scripts[c->script];
    size_t rest = c->resp_len - c->rest_off;
    size_t total = dq__resp_array_size(c->argc) + dq__resp_bulk_size(4) +
                   dq__resp_bulk_size(sc->len) + rest;
    /* Never the inline buffer: the rest is copied out of it. */
    char *buf = malloc(total + 1);
    if (buf == NULL)
        return DQ_ENOMEM;
    char *p = dq__resp_put_array(buf, c->argc);
    p = dq__resp_put_bulk(p, "EVAL", 4);
    p = dq__resp_put_bulk(p, sc->body, sc->len);
    memcpy(p, c->resp + c->rest_off, rest);
    buf[total] = '\0';
    if (c->resp != c->inline_resp)
        free(c->resp);
    c->resp = buf;
    c->resp_len = total;
    c->rest_off = total - rest;
    c->eval = 1;
    return DQ_OK;
}

int dq__cmd_is_eval(const dq__cmd *c) { return c->eval; }

static void cmd_str(dq__cmd *c, const char *s, size_t len) {
    c->argv[c->argc] = s;
    c->lens[c->argc] = len;
    c->argc++;
}

static void cmd_cstr(dq__cmd *c, const char *s) { cmd_str(c, s, strlen(s)); }

/* Appends v in decimal, kept in c's number buffer. */
static void cmd_int(dq__cmd *c, int64_t v) {
    char *p = c->nums + c->nums_used;
    int n = snprintf(p, 21, "%" PRId64, v);
    c->nums_used += (size_t)n + 1;
    cmd_str(c, p, (size_t)n);
}

void dq__cmd_arg(dq__cmd *c, const char *s, size_t len) { cmd_str(c, s, len); }
void dq__cmd_int(dq__cmd *c, int64_t v) { cmd_int(c, v); }

/* ---- Checks ---- */

int dq__check_queue(const char *queue, dq__err *err) {
    if (queue == NULL)
        return dq__err_set(err, DQ_ENULL, "queue is NULL");
    size_t n = strlen(queue);
    if (n == 0)
        return dq__err_set(err, DQ_EQUEUE, "queue name is empty");
    if (n > DQ_QUEUE_MAX)
        return dq__err_set(err, DQ_EQUEUE,
                          "queue name is %zu bytes; the limit is %d", n,
                          DQ_QUEUE_MAX);
    return DQ_OK;
}

int dq__check_id(const char *id, const char *what, dq__err *err) {
    if (id == NULL)
        return dq__err_set(err, DQ_ENULL, "%s is NULL", what);
    size_t n = strlen(id);
    if (n == 0)
        return dq__err_set(err, DQ_EID, "%s is empty", what);
    if (n > DQ_ID_MAX)
        return dq__err_set(err, DQ_EID, "%s is %zu bytes; the limit is %d",
                          what, n, DQ_ID_MAX);
    return DQ_OK;
}

int dq__check_token_arg(const char *token, dq__err *err) {
    if (token == NULL)
        return dq__err_set(err, DQ_ENULL, "token is NULL");
    size_t n = strlen(token);
    if (n == 0 || n >= DQ_TOKEN_BUF)
        return dq__err_set(err, DQ_EINVAL,
                          "token must be 1..%d bytes (as dq_job_token "
                          "returned it)",
                          DQ_TOKEN_BUF - 1);
    for (size_t i = 0; i < n; i++)
        if (token[i] < '0' || token[i] > '9')
            return dq__err_set(err, DQ_EINVAL,
                              "token must be decimal digits (as "
                              "dq_job_token returned it)");
    return DQ_OK;
}

int dq__check_delay(int64_t v, const char *what, dq__err *err) {
    if (v < 0 || v > DQ_DELAY_MAX)
        return dq__err_set(err, DQ_EDELAY,
                          "%s is %" PRId64 " ms; it must be 0..%" PRId64,
                          what, v, (int64_t)DQ_DELAY_MAX);
    return DQ_OK;
}


int dq__check_lease(int64_t v, dq__err *err) {
    if (v < DQ_LEASE_MIN || v > DQ_LEASE_MAX)
        return dq__err_set(err, DQ_ELEASE,
                          "lease_ms is %" PRId64 " ms; it must be %d..%" PRId64,
                          v, DQ_LEASE_MIN, (int64_t)DQ_LEASE_MAX);
    return DQ_OK;
}

int dq__check_max(int max, int limit, const char *what, dq__err *err) {
    if (max < 1 || max > limit)
        return dq__err_set(err, DQ_EINVAL, "%s is %d; it must be 1..%d", what,
                          max, limit);
    return DQ_OK;
}

int dq__check_page(int which, int64_t offset, int count, dq__err *err) {
    if (which != DQ_LIST_SCHEDULED && which != DQ_LIST_INFLIGHT &&
        which != DQ_LIST_DEAD)
        return dq__err_set(err, DQ_EINVAL,
                          "which is %d; use DQ_LIST_SCHEDULED, "
                          "DQ_LIST_INFLIGHT or DQ_LIST_DEAD",
                          which);
    int rc = dq__check_max(count, DQ_POLL_MAX, "count", err);
    if (rc == DQ_OK && (offset < 0 || offset > INT32_MAX))
        rc = dq__err_set(err, DQ_EINVAL,
                        "offset is %" PRId64 "; it must be 0..%d", offset,
                        INT32_MAX);
    return rc;
}

int dq__check_poll(const char *queue, int max, int64_t lease_ms,
                  dq__err *err) {
    int rc = dq__check_queue(queue, err);
    if (rc == DQ_OK)
        rc = dq__check_max(max, DQ_POLL_MAX, "max", err);
    if (rc == DQ_OK && lease_ms != 0) /* 0: the queue's (or client's) */
        rc = dq__check_lease(lease_ms, err);
    return rc;
}

int dq__check_cancel(const char *queue, const char *id, int flags,
                    dq__err *err) {
    int rc = dq__check_queue(queue, err);
    if (rc == DQ_OK)
        rc = dq__check_id(id, "id", err);
    if (rc == DQ_OK && (flags & ~DQ_CANCEL_INFLIGHT) != 0)
        rc = dq__err_set(err, DQ_EINVAL,
                        "flags is %d; use 0 or DQ_CANCEL_INFLIGHT", flags);
    return rc;
}

int dq__check_ack(const char *queue, size_t n, const char *const *ids,
                 const char *const *tokens, dq__err *err) {
    int rc = dq__check_queue(queue, err);
    if (rc != DQ_OK)
        return rc;
    if (n == 0 || n > DQ_BATCH_MAX)
        return dq__err_set(err, DQ_EINVAL, "n is %zu; it must be 1..%d", n,
                          DQ_BATCH_MAX);
    if (ids == NULL || tokens == NULL)
        return dq__err_set(err, DQ_ENULL, "%s is NULL",
                          ids == NULL ? "ids" : "tokens");
    for (size_t i = 0; i < n; i++)
        if ((rc = dq__check_id(ids[i], n == 1 ? "id" : "an id", err)) ||
            (rc = dq__check_token_arg(tokens[i], err)))
            return rc;
    return DQ_OK;
}

/* The ids of a batch: n 1..DQ_BATCH_MAX, ids and each id valid. */
static int check_ids(size_t n, const char *const *ids, dq__err *err) {
    if (n == 0 || n > DQ_BATCH_MAX)
        return dq__err_set(err, DQ_EINVAL, "n is %zu; it must be 1..%d", n,
                          DQ_BATCH_MAX);
    if (ids == NULL)
        return dq__err_set(err, DQ_ENULL, "ids is NULL");
    int rc = DQ_OK;
    for (size_t i = 0; i < n && rc == DQ_OK; i++)
        rc = dq__check_id(ids[i], n == 1 ? "id" : "an id", err);
    return rc;
}

/* A time: a delay, or (absolute) an epoch ms 0..DQ_AT_MAX. */
static int check_when(int64_t when, int absolute, dq__err *err) {
    if (!absolute)
        return dq__check_delay(when, "when", err);
    if (when < 0 || when > DQ_AT_MAX)
        return dq__err_set(err, DQ_EDELAY,
                          "when is %" PRId64 " (DQ_RESCHED_AT: epoch ms); "
                          "it must be 0..%" PRId64,
                          when, (int64_t)DQ_AT_MAX);
    return DQ_OK;
}

int dq__check_resched(const char *queue, size_t n, const char *const *ids,
                      int64_t when, int flags, dq__err *err) {
    int rc = dq__check_queue(queue, err);
    if (rc == DQ_OK)
        rc = check_ids(n, ids, err);
    if (rc == DQ_OK && (flags & ~(DQ_RESCHED_AT | DQ_RESCHED_REVIVE)) != 0)
        rc = dq__err_set(err, DQ_EINVAL,
                        "flags is %d; use 0, DQ_RESCHED_AT and/or "
                        "DQ_RESCHED_REVIVE",
                        flags);
    if (rc == DQ_OK)
        rc = check_when(when, (flags & DQ_RESCHED_AT) != 0, err);
    return rc;
}

/* Queue, id and token of a job the caller holds. */
static int check_held(const char *queue, const char *id, const char *token,
                      dq__err *err) {
    int rc = dq__check_queue(queue, err);
    if (rc == DQ_OK)
        rc = dq__check_id(id, "id", err);
    if (rc == DQ_OK)
        rc = dq__check_token_arg(token, err);
    return rc;
}

int dq__check_nack(const char *queue, const char *id, const char *token,
                  int64_t delay_ms, int flags, dq__err *err) {
    int rc = check_held(queue, id, token, err);
    if (rc == DQ_OK)
        rc = dq__check_delay(delay_ms, "delay_ms", err);
    if (rc == DQ_OK && (flags & ~(DQ_NACK_DEAD | DQ_NACK_BACKOFF)) != 0)
        rc = dq__err_set(err, DQ_EINVAL,
                        "flags is %d; use 0, DQ_NACK_DEAD or DQ_NACK_BACKOFF",
                        flags);
    return rc;
}

int dq__check_reason(const void *reason, size_t len, dq__err *err) {
    if (reason == NULL && len > 0)
        return dq__err_set(err, DQ_ENULL,
                          "reason is NULL but reason_len is %zu", len);
    if (len > DQ_REASON_MAX)
        return dq__err_set(err, DQ_EINVAL,
                          "reason is %zu bytes; the limit is %d "
                          "(DQ_REASON_MAX)",
                          len, DQ_REASON_MAX);
    return DQ_OK;
}

int dq__check_get(const char *queue, const char *id, dq__err *err) {
    int rc = dq__check_queue(queue, err);
    if (rc == DQ_OK)
        rc = dq__check_id(id, "id", err);
    return rc;
}

int dq__check_group_stats(const char *queue, int max, dq__err *err) {
    int rc = dq__check_queue(queue, err);
    if (rc == DQ_OK && (max < 1 || max > DQ_GROUP_STATS_MAX))
        rc = dq__err_set(err, DQ_EINVAL, "max is %d; it must be 1..%d", max,
                         DQ_GROUP_STATS_MAX);
    return rc;
}

int dq__check_count_due(const char *queue, const int64_t *bounds_ms,
                        int nbounds, dq__err *err) {
    int rc = dq__check_queue(queue, err);
    if (rc != DQ_OK)
        return rc;
    if (bounds_ms == NULL)
        return dq__err_set(err, DQ_EINVAL, "bounds_ms is NULL");
    if (nbounds < 1 || nbounds > DQ_COUNT_DUE_MAX)
        return dq__err_set(err, DQ_EINVAL,
                          "nbounds is %d; it must be 1..%d", nbounds,
                          DQ_COUNT_DUE_MAX);
    for (int i = 0; i < nbounds; i++) {
        if (bounds_ms[i] < -DQ_DELAY_MAX || bounds_ms[i] > DQ_DELAY_MAX)
            return dq__err_set(err, DQ_EINVAL,
                              "bounds_ms[%d] is %" PRId64 "; it must be "
                              "-%" PRId64 "..%" PRId64,
                              i, bounds_ms[i], DQ_DELAY_MAX, DQ_DELAY_MAX);
        if (i > 0 && bounds_ms[i] <= bounds_ms[i - 1])
            return dq__err_set(err, DQ_EINVAL,
                              "bounds_ms[%d] is %" PRId64 ", not above "
                              "bounds_ms[%d] (%" PRId64 "): the bounds "
                              "must increase",
                              i, bounds_ms[i], i - 1, bounds_ms[i - 1]);
    }
    return DQ_OK;
}

int dq__check_extend(const char *queue, const char *id, const char *token,
                    int64_t lease_ms, dq__err *err) {
    int rc = check_held(queue, id, token, err);
    if (rc == DQ_OK)
        rc = dq__check_lease(lease_ms, err);
    return rc;
}

int dq__check_dead_change(const char *queue, const char *id, int64_t delay_ms,
                         dq__err *err) {
    int rc = dq__check_queue(queue, err);
    if (rc == DQ_OK && id != NULL)
        rc = dq__check_id(id, "id", err);
    if (rc == DQ_OK)
        rc = dq__check_delay(delay_ms, "delay_ms", err);
    return rc;
}

/* ---- Push ---- */

void dq__push_plan_free(dq__push_plan *p) {
    if (p->cmds != NULL)
        for (size_t i = 0; i < p->nchunks; i++)
            dq__cmd_free(&p->cmds[i]);
    free(p->cmds);
    free(p->first);
    free(p->ids);
    free(p->outcomes);
    free(p->order);
    memset(p, 0, sizeof(*p));
}

/* Checks a push's arguments (count, payloads, flags, times, ids) before
 * anything is built. */
static int check_push_args(dq__core *core, size_t n,
                           const void *const *payloads, const size_t *lens,
                           const int64_t *times, int absolute,
                           const char *const *ids, int flags, dq__err *err) {
    if (n == 0 || n > DQ_BATCH_MAX)
        return dq__err_set(err, DQ_EINVAL, "n is %zu; it must be 1..%d", n,
                          DQ_BATCH_MAX);
    if (payloads == NULL || lens == NULL)
        return dq__err_set(err, DQ_ENULL, "%s is NULL",
                          payloads == NULL ? "payloads" : "lens");
    if (flags != DQ_PUSH_KEEP && flags != DQ_PUSH_REPLACE &&
        flags != DQ_PUSH_DEBOUNCE)
        return dq__err_set(err, DQ_EINVAL,
                          "flags is %d; use DQ_PUSH_KEEP, DQ_PUSH_REPLACE "
                          "or DQ_PUSH_DEBOUNCE (with DQ_PUSH_AT or not)",
                          flags);
    int rc;
    for (size_t i = 0; i < n; i++) {
        char what[64];
        if (payloads[i] == NULL && lens[i] != 0)
            return dq__err_set(err, DQ_ENULL,
                              "payload of job %zu is NULL with length %zu",
                              i, lens[i]);
        if ((int64_t)lens[i] > core->opts.max_payload || lens[i] > INT32_MAX)
            return dq__err_set(err, DQ_ETOOBIG,
                              "payload of job %zu is %zu bytes; the limit "
                              "(DQ_OPT_MAX_PAYLOAD) is %" PRId64,
                              i, lens[i], core->opts.max_payload);
        if (times != NULL) {
            if (absolute) {
                if (times[i] < 0 || times[i] > DQ_AT_MAX)
                    return dq__err_set(err, DQ_EDELAY,
                                      "at_ms of job %zu is %" PRId64
                                      "; it must be 0..%" PRId64,
                                      i, times[i], (int64_t)DQ_AT_MAX);
            } else {
                snprintf(what, sizeof(what), "delay_ms of job %zu", i);
                if ((rc = dq__check_delay(times[i], what, err)) != DQ_OK)
                    return rc;
            }
        }
        if (ids != NULL && ids[i] != NULL) {
            snprintf(what, sizeof(what), n == 1 ? "id" : "id of job %zu", i);
            if ((rc = dq__check_id(ids[i], what, err)) != DQ_OK)
                return rc;
        }
    }
    return DQ_OK;
}

int dq__push_plan_make(dq__push_plan *p, dq__core *core, const char *queue,
                      size_t n, const void *const *payloads,
                      const size_t *lens, const int64_t *times, int absolute,
                      const char *const *ids, int flags,
                      const dq_push_opts *po, dq__err *err) {
    memset(p, 0, sizeof(*p));
    int rc = dq__check_queue(queue, err);
    if (rc == DQ_OK)
        rc = check_push_args(core, n, payloads, lens, times, absolute, ids,
                             flags, err);
    if (rc == DQ_OK)
        rc = dq__check_push_opts(po, n, times, absolute, ids, err);
    if (rc == DQ_OK)
        rc = dq__check_debounce(po, flags, n, absolute, ids, err);
    if (rc != DQ_OK)
        return rc;
    char ext[DQ_PUSH_OPTS_STR], rule[DQ_PUSH_RULE_STR];
    size_t extlen = dq__push_opts_str(po, ext, sizeof(ext));
    size_t rulelen = dq__push_rule_str(po, rule, sizeof(rule));
    dq__core_keys(core, queue);
    p->n = n;
    p->ids = malloc(n * DQ_ID_BUF);
    p->outcomes = calloc(n, sizeof(int));
    p->first = malloc((n + 1) * sizeof(size_t));
    if (p->ids == NULL || p->outcomes == NULL || p->first == NULL)
        goto oom;
    int generated = 1; /* every id made here: none can be in the queue */
    for (size_t i = 0; i < n; i++) {
        char *id = p->ids + i * DQ_ID_BUF;
        if (ids != NULL && ids[i] != NULL) {
            memcpy(id, ids[i], strlen(ids[i]) + 1);
            generated = 0;
        } else {
            gen_id(core, id);
        }
    }
    /* A partitioned queue: jobs grouped by the partition of their id
     * (stable), so that each chunk goes to one partition. */
    int np = core->partitions;
    int *part = NULL;
    if (np > 1) {
        size_t *count = calloc((size_t)np + 1, sizeof(size_t));
        part = malloc(n * sizeof(int));
        p->order = malloc(n * sizeof(size_t));
        if (count == NULL || part == NULL || p->order == NULL) {
            free(count);
            free(part);
            goto oom;
        }
        for (size_t i = 0; i < n; i++) {
            part[i] = dq__part_of(p->ids + i * DQ_ID_BUF, np);
            count[part[i] + 1]++;
        }
        for (int k = 0; k < np; k++)
            count[k + 1] += count[k];
        for (size_t i = 0; i < n; i++)
            p->order[count[part[i]]++] = i;
        free(count);
    }
#define JOB(pos) (p->order ? p->order[pos] : (pos))
    /* Chunks: at most DQ_CHUNK jobs and DQ_CHUNK_BYTES bytes each, one
     * partition each. */
    size_t bytes = 0;
    p->first[0] = 0;
    for (size_t pos = 0; pos < n; pos++) {
        size_t i = JOB(pos);
        size_t b = lens[i] + strlen(p->ids + i * DQ_ID_BUF) + 24;
        size_t cnt = pos - p->first[p->nchunks];
        if (cnt > 0 && (cnt == DQ_CHUNK || bytes + b > DQ_CHUNK_BYTES ||
                        (part && part[i] != part[JOB(pos - 1)]))) {
            p->first[++p->nchunks] = pos;
            bytes = 0;
        }
        bytes += b;
    }
    p->first[++p->nchunks] = n;
    p->cmds = calloc(p->nchunks, sizeof(dq__cmd));
    if (p->cmds == NULL)
        goto oom_part;
    for (size_t ch = 0; ch < p->nchunks; ch++) {
        size_t lo = p->first[ch], hi = p->first[ch + 1];
        dq__cmd *c = &p->cmds[ch];
        dq__core_keys_part(core, queue, part ? part[JOB(lo)] : -1);
        if (dq__cmd_begin(c, flags == DQ_PUSH_DEBOUNCE ? DQ_SCRIPT_DEBOUNCE
                                                      : DQ_SCRIPT_PUSH,
                          &core->keys,
                         6 + 3 * (int)(hi - lo)) != DQ_OK)
            goto oom_part;
        cmd_cstr(c, flags == DQ_PUSH_REPLACE    ? "1"
                    : flags == DQ_PUSH_DEBOUNCE ? "2"
                                                : "0");
        cmd_cstr(c, absolute ? "1" : "0");
        cmd_int(c, core->opts.done_ttl_ms);
        cmd_str(c, ext, extlen);
        cmd_str(c, rule, rulelen);
        static const char *const lay[3][2] = {
            {"0", "0g"}, {"1", "1g"}, {"2", "2g"}};
        cmd_cstr(c, lay[core->layout][generated]);
        for (size_t pos = lo; pos < hi; pos++) {
            size_t i = JOB(pos);
            cmd_cstr(c, p->ids + i * DQ_ID_BUF);
            cmd_int(c, times ? times[i] : 0);
            cmd_str(c, lens[i] ? (const char *)payloads[i] : "", lens[i]);
        }
        if (dq__cmd_seal(c) != DQ_OK)
            goto oom_part;
    }
#undef JOB
    free(part);
    return DQ_OK;
oom_part:
    free(part);
oom:
    dq__push_plan_free(p);
    return dq__err_set(err, DQ_ENOMEM, "out of memory building the push");
}

int dq__push_plan_decode(dq__push_plan *p, size_t i, const dq__reply *r,
                        dq__err *err) {
    size_t lo = p->first[i];
    size_t cnt = p->first[i + 1] - lo;
    if (dq__reply_type(r) != DQ_R_ARRAY || dq__reply_len(r) != cnt)
        return dq__err_set(err, DQ_EPROTO, "push: unexpected reply");
    for (size_t j = 0; j < cnt; j++) {
        const dq__reply *e = dq__reply_at(r, j);
        if (dq__reply_type(e) != DQ_R_INTEGER || dq__reply_int(e) < DQ_PUSHED ||
            dq__reply_int(e) > DQ_DEBOUNCE_FOLLOWUP)
            return dq__err_set(err, DQ_EPROTO, "push: unexpected reply");
        size_t pos = lo + j;
        p->outcomes[p->order ? p->order[pos] : pos] = (int)dq__reply_int(e);
    }
    return DQ_OK;
}

int dq__push_plan_count(const dq__push_plan *p) {
    int n = 0;
    for (size_t i = 0; i < p->n; i++)
        n += p->outcomes[i] == DQ_PUSHED || p->outcomes[i] == DQ_REPLACED ||
             p->outcomes[i] >= DQ_DEBOUNCE_CREATED;
    return n;
}

/* ---- Other builders ---- */

int dq__build_parts(dq__cmd *c, dq__core *core) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_PARTS, &core->keys, 1);
    if (rc != DQ_OK)
        return rc;
    cmd_int(c, core->partitions);
    return dq__cmd_seal(c);
}

int dq__build_counts(dq__cmd *c, dq__core *core) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_COUNTS, &core->keys, 0);
    return rc == DQ_OK ? dq__cmd_seal(c) : rc;
}

int dq__build_poll(dq__cmd *c, dq__core *core, int max, int64_t lease_ms,
                   int waiting) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_POLL, &core->keys, 7);
    if (rc != DQ_OK)
        return rc;
    cmd_int(c, max);
    cmd_int(c, lease_ms);
    cmd_int(c, core->opts.max_attempts);
    cmd_cstr(c, waiting ? dq__core_me(core) : "");
    cmd_int(c, core->opts.wait_cap_ms);
    cmd_int(c, core->opts.lease_ms);
    cmd_int(c, core->layout);
    return dq__cmd_seal(c);
}

int dq__build_ack(dq__cmd *c, dq__core *core, size_t n, const char *const *ids,
                 const char *const *tokens) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_ACK, &core->keys, 1 + 2 * (int)n);
    if (rc != DQ_OK)
        return rc;
    cmd_int(c, core->opts.done_ttl_ms);
    for (size_t i = 0; i < n; i++) {
        cmd_cstr(c, ids[i]);
        cmd_cstr(c, tokens[i]);
    }
    return dq__cmd_seal(c);
}

int dq__build_nack(dq__cmd *c, dq__core *core, const char *id,
                  const char *token, int64_t delay_ms, int flags,
                  const void *reason, size_t reason_len) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_NACK, &core->keys, 6);
    if (rc != DQ_OK)
        return rc;
    cmd_cstr(c, id);
    cmd_cstr(c, token);
    cmd_int(c, delay_ms);
    cmd_int(c, flags);
    cmd_int(c, core->opts.max_attempts);
    if (reason != NULL)
        cmd_str(c, reason_len ? (const char *)reason : "", reason_len);
    return dq__cmd_seal(c);
}

int dq__build_get(dq__cmd *c, dq__core *core, const char *id) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_GET, &core->keys, 1);
    if (rc != DQ_OK)
        return rc;
    cmd_cstr(c, id);
    return dq__cmd_seal(c);
}

int dq__build_extend(dq__cmd *c, dq__core *core, const char *id,
                    const char *token, int64_t lease_ms) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_EXTEND, &core->keys, 3);
    if (rc != DQ_OK)
        return rc;
    cmd_cstr(c, id);
    cmd_cstr(c, token);
    cmd_int(c, lease_ms);
    return dq__cmd_seal(c);
}

int dq__build_cancel(dq__cmd *c, dq__core *core, const char *id, int flags) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_CANCEL, &core->keys, 2);
    if (rc != DQ_OK)
        return rc;
    cmd_cstr(c, id);
    cmd_cstr(c, (flags & DQ_CANCEL_INFLIGHT) ? "1" : "0");
    return dq__cmd_seal(c);
}

int dq__build_resched(dq__cmd *c, dq__core *core, size_t n,
                      const char *const *ids, int64_t when, int flags) {
    static const char *const fl[4] = {"", "r", "a", "ar"};
    int rc = dq__cmd_begin(c, DQ_SCRIPT_RESCHEDULE, &core->keys,
                           2 + (int)n);
    if (rc != DQ_OK)
        return rc;
    cmd_cstr(c, fl[flags & (DQ_RESCHED_AT | DQ_RESCHED_REVIVE)]);
    cmd_int(c, when);
    for (size_t i = 0; i < n; i++)
        cmd_cstr(c, ids[i]);
    return dq__cmd_seal(c);
}

int dq__build_stats(dq__cmd *c, dq__core *core) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_STATS, &core->keys, 0);
    return rc != DQ_OK ? rc : dq__cmd_seal(c);
}

int dq__build_count_due(dq__cmd *c, dq__core *core, const int64_t *bounds_ms,
                        int nbounds) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_COUNT_DUE, &core->keys, nbounds);
    if (rc != DQ_OK)
        return rc;
    for (int i = 0; i < nbounds; i++)
        cmd_int(c, bounds_ms[i]);
    return dq__cmd_seal(c);
}

int dq__build_group_stats(dq__cmd *c, dq__core *core, int max) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_GROUPS, &core->keys, 1);
    if (rc != DQ_OK)
        return rc;
    cmd_int(c, max);
    return dq__cmd_seal(c);
}

int dq__build_list(dq__cmd *c, dq__core *core, int which, int64_t offset,
                  int count) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_LIST, &core->keys, 3);
    if (rc != DQ_OK)
        return rc;
    cmd_int(c, which);
    cmd_int(c, offset);
    cmd_int(c, count);
    return dq__cmd_seal(c);
}

int dq__build_dead_change(dq__cmd *c, dq__core *core, const char *action,
                         const char *id, int64_t delay_ms, int limit) {
    int rc = dq__cmd_begin(c, DQ_SCRIPT_DEAD, &core->keys, 4);
    if (rc != DQ_OK)
        return rc;
    cmd_cstr(c, action);
    cmd_cstr(c, id ? id : "");
    cmd_int(c, delay_ms);
    cmd_int(c, limit);
    return dq__cmd_seal(c);
}

/* ---- Decoders ---- */

/* Parses a decimal integer from a string or integer reply element. */
static int elem_i64(const dq__reply *e, int64_t *v) {
    if (dq__reply_type(e) == DQ_R_INTEGER) {
        *v = dq__reply_int(e);
        return 0;
    }
    if (dq__reply_type(e) != DQ_R_STRING)
        return -1;
    size_t len;
    const char *s = dq__reply_str(e, &len);
    char buf[32];
    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    double d = strtod(buf, &end); /* scores may come as "1.7e12" */
    /* A score can be any double (1e300, inf, nan): converting one outside
     * int64_t is undefined behaviour, so it is no number of ours. */
    if (*end != '\0' || !(d >= -9223372036854775808.0 &&
                           d < 9223372036854775808.0))
        return -1;
    *v = (int64_t)d;
    return 0;
}

/* A lease token: 1..DQ_TOKEN_BUF-1 decimal digits, as a string or an
 * integer reply (integers formatted exactly, never through a double). */
static int elem_token(const dq__reply *e, char out[DQ_TOKEN_BUF]) {
    if (dq__reply_type(e) == DQ_R_INTEGER) {
        if (dq__reply_int(e) <= 0)
            return -1;
        snprintf(out, DQ_TOKEN_BUF, "%lld", dq__reply_int(e));
        return 0;
    }
    size_t len;
    const char *s = dq__reply_str(e, &len);
    if (dq__reply_type(e) != DQ_R_STRING || len == 0 || len >= DQ_TOKEN_BUF)
        return -1;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return -1;
    memcpy(out, s, len);
    out[len] = '\0';
    return 0;
}

int dq__result_code(long long v, const char *what, const char *id,
                   dq__err *err) {
    if (v == DQ_ESTALE)
        return dq__err_set(err, DQ_ESTALE,
                          "%s of job '%.200s': the lease token is stale (the "
                          "lease ran out and the job was claimed again, or "
                          "it was nacked, replaced or cancelled)",
                          what, id);
    if (v == DQ_ENOTFOUND)
        return dq__err_set(err, DQ_ENOTFOUND, "%s: no job '%.200s'", what,
                          id);
    return dq__err_set(err, DQ_EPROTO, "%s: unexpected result %lld", what, v);
}

/* One integer per job, each lo..hi, into results (may be NULL); returns
 * how many are among the values 0..31 of mask's bits. */
static int decode_each(const dq__reply *r, size_t n, int *results,
                       long long lo, long long hi, unsigned mask,
                       const char *what, dq__err *err) {
    if (dq__reply_type(r) != DQ_R_ARRAY || dq__reply_len(r) != n)
        return dq__err_set(err, DQ_EPROTO, "%s: unexpected reply", what);
    int counted = 0;
    for (size_t i = 0; i < n; i++) {
        const dq__reply *e = dq__reply_at(r, i);
        if (dq__reply_type(e) != DQ_R_INTEGER || dq__reply_int(e) < lo ||
            dq__reply_int(e) > hi)
            return dq__err_set(err, DQ_EPROTO, "%s: unexpected reply", what);
        int v = (int)dq__reply_int(e);
        if (results != NULL)
            results[i] = v;
        counted += v >= 0 && v < 32 && (mask >> v & 1u);
    }
    return counted;
}

int dq__decode_ack(const dq__reply *r, size_t n, int *results, dq__err *err) {
    return decode_each(r, n, results, INT_MIN, INT_MAX, 1u, "ack", err);
}

int dq__decode_resched(const dq__reply *r, size_t n, int *results,
                       dq__err *err) {
    return decode_each(r, n, results, DQ_RESCHED_UNKNOWN, DQ_RESCHED_REVIVED,
                       1u << DQ_RESCHED_MOVED | 1u << DQ_RESCHED_REVIVED,
                       "reschedule", err);
}

int dq__decode_int(const dq__reply *r, long long *v, dq__err *err) {
    if (dq__reply_type(r) != DQ_R_INTEGER)
        return dq__err_set(err, DQ_EPROTO, "unexpected non-integer reply");
    *v = dq__reply_int(r);
    return DQ_OK;
}

int dq__decode_stats(const dq__reply *r, int64_t out[5], dq__err *err) {
    if (dq__reply_type(r) != DQ_R_ARRAY || dq__reply_len(r) != 5)
        return dq__err_set(err, DQ_EPROTO, "stats: unexpected reply");
    for (size_t i = 0; i < 5; i++)
        if (elem_i64(dq__reply_at(r, i), &out[i]))
            return dq__err_set(err, DQ_EPROTO, "stats: unexpected reply");
    return DQ_OK;
}

int dq__decode_count_due(const dq__reply *r, int nbounds, int64_t *counts,
                         int64_t *now_ms, dq__err *err) {
    if (dq__reply_type(r) != DQ_R_ARRAY ||
        dq__reply_len(r) != (size_t)nbounds + 2 ||
        elem_i64(dq__reply_at(r, 0), now_ms))
        return dq__err_set(err, DQ_EPROTO, "count due: unexpected reply");
    for (int i = 0; i <= nbounds; i++)
        if (elem_i64(dq__reply_at(r, (size_t)i + 1), &counts[i]) ||
            counts[i] < 0)
            return dq__err_set(err, DQ_EPROTO, "count due: unexpected reply");
    return DQ_OK;
}

int dq__decode_counts(const dq__reply *r, int64_t out[4], dq__err *err) {
    if (dq__reply_type(r) != DQ_R_ARRAY || dq__reply_len(r) != 4)
        return dq__err_set(err, DQ_EPROTO, "counters: unexpected reply");
    for (size_t i = 0; i < 4; i++)
        if (elem_i64(dq__reply_at(r, i), &out[i]) || out[i] < 0)
            return dq__err_set(err, DQ_EPROTO, "counters: unexpected reply");
    return DQ_OK;
}

/* A job's last failure reason as the scripts return it: nil (none) or
 * "<ms>:<reason>".  0 with *reason NULL for none, or the reason's bytes
 * (in the reply) and its time; -1 for anything else. */
static int elem_reason(const dq__reply *e, const char **reason, size_t *len,
                       int64_t *ms) {
    *reason = NULL;
    *len = 0;
    *ms = 0;
    if (dq__reply_type(e) == DQ_R_NIL)
        return 0;
    if (dq__reply_type(e) != DQ_R_STRING)
        return -1;
    size_t n;
    const char *s = dq__reply_str(e, &n);
    const char *colon = memchr(s, ':', n < 20 ? n : 20);
    if (colon == NULL || colon == s)
        return -1;
    int64_t v = 0;
    for (const char *p = s; p < colon; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    *ms = v;
    *reason = colon + 1;
    *len = n - (size_t)(colon + 1 - s);
    return 0;
}

/* One job entry of a listing or a lookup: id, payload and reason of
 * reply elements. */
typedef struct entry {
    const char *id, *pl, *reason;
    size_t idlen, plen, rlen;
    int64_t failed_ms;
} entry;

/* Reads the id (eid), payload (epl) and reason (ere) elements of a job
 * entry; 0 or -1 when one is not what the scripts send. */
static int read_entry(const dq__reply *eid, const dq__reply *epl,
                      const dq__reply *ere, entry *en) {
    en->id = dq__reply_str(eid, &en->idlen);
    en->pl = dq__reply_str(epl, &en->plen);
    if (dq__reply_type(eid) != DQ_R_STRING ||
        dq__reply_type(epl) != DQ_R_STRING)
        return -1;
    return elem_reason(ere, &en->reason, &en->rlen, &en->failed_ms);
}

/* A job's fair element (list.lua, poll.lua): NULL or "", none; else its
 * priority digit then its group (none when empty).  0, or -1 for anything
 * else. */
static int elem_fair(const dq__reply *e, dq__job_text *t, int *prio) {
    *prio = 0;
    size_t n = 0;
    const char *s = e != NULL ? dq__reply_str(e, &n) : NULL;
    if (e == NULL || (dq__reply_type(e) == DQ_R_STRING && n == 0))
        return 0;
    if (dq__reply_type(e) != DQ_R_STRING || n > 1 + DQ_GROUP_MAX ||
        s[0] < '0' || s[0] > '0' + DQ_PRIORITY_MAX || memchr(s, 0, n))
        return -1;
    *prio = s[0] - '0';
    t->group = n > 1 ? s + 1 : NULL;
    t->group_len = n - 1;
    return 0;
}

/* The last element of a list.lua or poll.lua reply when some of its jobs
 * have a group or priority: runs { pos (1..cnt, increasing), fair element,
 * ... } (lua/include/meta.lua, fair_of), a run's element that of its
 * jobs up to the next run; sets fair[i] of each job (NULL before the first
 * run).  0, or -1 when it is not that. */
static int read_fair(const dq__reply *t, size_t cnt, const dq__reply **fair) {
    size_t n = dq__reply_len(t);
    int64_t last = 0, pos;
    if (dq__reply_type(t) != DQ_R_ARRAY || n == 0 || n % 2 != 0)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        if (elem_i64(dq__reply_at(t, i), &pos) || pos <= last ||
            pos > (int64_t)cnt)
            return -1;
        fair[pos - 1] = dq__reply_at(t, i + 1);
        last = pos;
    }
    for (size_t i = 1; i < cnt; i++)
        if (fair[i] == NULL)
            fair[i] = fair[i - 1];
    return 0;
}

/* Reads listed job i of r (list.lua's 5 elements from b, its fair element
 * fe or NULL) into t and j's numbers; 0 or -1 when one is not what the
 * script sends. */
static int read_listed(const dq__reply *r, size_t b, const dq__reply *fe,
                       dq__job_text *t, dq_job *j) {
    entry en;
    if (read_entry(dq__reply_at(r, b), dq__reply_at(r, b + 1),
                   dq__reply_at(r, b + 4), &en) ||
        elem_i64(dq__reply_at(r, b + 2), &j->attempt) ||
        elem_i64(dq__reply_at(r, b + 3), &j->due_ms) ||
        elem_fair(fe, t, &j->priority))
        return -1;
    t->id = en.id;
    t->idlen = en.idlen;
    t->payload = en.pl;
    t->len = en.plen;
    t->reason = en.reason;
    t->reason_len = en.rlen;
    j->failed_ms = en.failed_ms;
    return 0;
}

/* Reads polled job i of r (poll.lua's id, payload, attempt, due time and
 * token from b, its fair element fe or NULL) into t, j's numbers and its
 * token; 0 or -1 when one is not what the script sends. */
static int read_polled(const dq__reply *r, size_t b, const dq__reply *fe,
                       dq__job_text *t, dq_job *j) {
    const dq__reply *eid = dq__reply_at(r, b), *epl = dq__reply_at(r, b + 1);
    t->id = dq__reply_str(eid, &t->idlen);
    t->payload = dq__reply_str(epl, &t->len);
    return dq__reply_type(eid) != DQ_R_STRING ||
                   dq__reply_type(epl) != DQ_R_STRING ||
                   elem_i64(dq__reply_at(r, b + 2), &j->attempt) ||
                   elem_i64(dq__reply_at(r, b + 3), &j->due_ms) ||
                   elem_token(dq__reply_at(r, b + 4), j->token) ||
                   elem_fair(fe, t, &j->priority)
               ? -1
               : 0;
}

/* What a reply of jobs is: a poll's (its lease deadline) or a listing's
 * (which list). */
typedef struct jobs_of {
    const char *what;
    int poll, which;
    int64_t deadline;
} jobs_of;

/* Adds one job of a reply to l: its 5 elements from b and its fair
 * element fe (NULL: none).  DQ_OK, or an error code. */
static int read_job(const dq__reply *r, size_t b, const dq__reply *fe,
                    const jobs_of *k, dq_jobs *l, dq__err *err) {
    dq__job_text t = {0};
    dq_job nums = {0}, *j;
    if (k->poll ? read_polled(r, b, fe, &t, &nums)
                : read_listed(r, b, fe, &t, &nums))
        return dq__err_set(err, DQ_EPROTO, "%s: unexpected job entry",
                          k->what);
    if ((j = dq__jobs_add_text(l, &t)) == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory decoding jobs");
    j->attempt = nums.attempt;
    j->due_ms = nums.due_ms;
    j->lease_deadline_ms = k->poll                        ? k->deadline
                           : k->which == DQ_LIST_INFLIGHT ? nums.due_ms
                                                          : 0;
    j->failed_ms = nums.failed_ms;
    j->priority = nums.priority;
    memcpy(j->token, nums.token, sizeof(nums.token));
    return DQ_OK;
}

/* The fair elements of the cnt jobs of reply r when has (its last element
 * is read_fair's table): *fair an array of cnt (NULL: a job without), or
 * NULL when not has.  DQ_OK, or an error code. */
static int fair_table(const dq__reply *r, int has, size_t cnt,
                      const char *what, const dq__reply ***fair,
                      dq__err *err) {
    *fair = NULL;
    if (!has)
        return DQ_OK;
    if ((*fair = calloc(cnt + 1, sizeof(**fair))) == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory decoding jobs");
    if (read_fair(dq__reply_at(r, dq__reply_len(r) - 1), cnt, *fair) == 0)
        return DQ_OK;
    free(*fair);
    *fair = NULL;
    return dq__err_set(err, DQ_EPROTO, "%s: unexpected reply", what);
}

/* The jobs of a reply of head elements, 5 per job, then (list.lua and
 * poll.lua, when some job has a group or a priority) the fair table:
 * *jobs (NULL if none) and their count, or an error code (nothing kept). */
static int decode_jobs(const dq__reply *r, size_t head, const jobs_of *k,
                       dq_jobs **jobs, dq__err *err) {
    size_t n = dq__reply_len(r), cnt = (n - head) / 5;
    const dq__reply **fair;
    if ((n - head) % 5 > 1)
        return dq__err_set(err, DQ_EPROTO, "%s: unexpected reply", k->what);
    int rc = fair_table(r, (n - head) % 5 == 1, cnt, k->what, &fair, err);
    if (rc != DQ_OK || cnt == 0)
        return rc;
    dq_jobs *l = dq__jobs_new(cnt);
    if (l == NULL)
        rc = dq__err_set(err, DQ_ENOMEM, "out of memory decoding jobs");
    for (size_t i = 0; rc == DQ_OK && i < cnt; i++)
        rc = read_job(r, head + i * 5, fair ? fair[i] : NULL, k, l, err);
    free(fair);
    if (rc != DQ_OK) {
        dq_jobs_free(l);
        return rc;
    }
    *jobs = l;
    return (int)cnt;
}

int dq__decode_list(const dq__reply *r, int which, dq_jobs **jobs,
                   int64_t *now_ms, dq__err *err) {
    *jobs = NULL;
    int64_t now;
    if (dq__reply_type(r) != DQ_R_ARRAY || dq__reply_len(r) < 1 ||
        elem_i64(dq__reply_at(r, 0), &now))
        return dq__err_set(err, DQ_EPROTO, "list: unexpected reply");
    if (now_ms != NULL)
        *now_ms = now;
    jobs_of k = {"list", 0, which, 0};
    return decode_jobs(r, 1, &k, jobs, err);
}

int dq__decode_poll(const dq__reply *r, dq_jobs **jobs, int64_t *next_us,
                    dq__err *err) {
    *jobs = NULL;
    int64_t now, next, lease_ms;
    if (dq__reply_type(r) != DQ_R_ARRAY || dq__reply_len(r) < 3 ||
        elem_i64(dq__reply_at(r, 0), &now) ||
        elem_i64(dq__reply_at(r, 1), &next) ||
        elem_i64(dq__reply_at(r, 2), &lease_ms))
        return dq__err_set(err, DQ_EPROTO, "poll: unexpected reply");
    *next_us = next;
    jobs_of k = {"poll", 1, 0, now + lease_ms};
    return decode_jobs(r, 3, &k, jobs, err);
}

/* get.lua's 9th element: a follow-up's earliest due time (false, or a
 * shorter reply, or no positive number: 0, none). */
static int64_t get_followup(const dq__reply *r, size_t n) {
    int64_t v = 0;
    if (n < 9 || elem_i64(dq__reply_at(r, 8), &v) != 0 || v < 0)
        return 0;
    return v;
}

int dq__decode_get(const dq__reply *r, const char *id, dq_job_info **info,
                   dq__err *err) {
    *info = NULL;
    size_t n = dq__reply_len(r);
    int64_t now, state, t, att;
    if (dq__reply_type(r) != DQ_R_ARRAY || (n != 1 && n != 7 && n != 10) ||
        elem_i64(dq__reply_at(r, 0), &now))
        return dq__err_set(err, DQ_EPROTO, "get: unexpected reply");
    if (n == 1)
        return 0;
    entry en; /* the id is the caller's: the reply does not repeat it */
    if (elem_i64(dq__reply_at(r, 1), &state) || state < DQ_JOB_SCHEDULED ||
        state > DQ_JOB_DEAD || elem_i64(dq__reply_at(r, 2), &t) ||
        elem_i64(dq__reply_at(r, 3), &att) ||
        dq__reply_type(dq__reply_at(r, 4)) != DQ_R_STRING ||
        elem_reason(dq__reply_at(r, 5), &en.reason, &en.rlen,
                    &en.failed_ms))
        return dq__err_set(err, DQ_EPROTO, "get: unexpected job entry");
    en.pl = dq__reply_str(dq__reply_at(r, 4), &en.plen);
    dq_job_info *in = dq__job_info_new(id, strlen(id), en.pl, en.plen,
                                      en.reason, en.rlen);
    if (in == NULL)
        return dq__err_set(err, DQ_ENOMEM, "get: out of memory");
    in->state = (int)state;
    in->now_ms = now;
    in->job.attempt = att;
    in->job.due_ms = t;
    in->job.lease_deadline_ms = state == DQ_JOB_INFLIGHT ? t : 0;
    in->job.failed_ms = en.failed_ms;
    const dq__reply *rule = dq__reply_at(r, 6);
    if (dq__reply_type(rule) == DQ_R_STRING) {
        size_t rlen;
        const char *rs = dq__reply_str(rule, &rlen);
        dq__repeat_text(rs, rlen, in->repeat, sizeof(in->repeat));
    }
    const dq__reply *grp = n >= 8 ? dq__reply_at(r, 7) : NULL;
    if (grp != NULL && dq__reply_type(grp) == DQ_R_STRING) {
        size_t glen;
        const char *gs = dq__reply_str(grp, &glen);
        if (glen >= sizeof(in->group))
            glen = sizeof(in->group) - 1;
        memcpy(in->group, gs, glen);
        in->group[glen] = '\0';
    }
    in->followup_ms = get_followup(r, n);
    int64_t prio = 0;
    if (n == 10 && elem_i64(dq__reply_at(r, 9), &prio) == 0 && prio >= 0 &&
        prio <= DQ_PRIORITY_MAX)
        in->priority = (int)prio;
    *info = in;
    return 1;
}
