/*
 * tests/support/fault.c - shared pieces of the fault-injection suites (see
 * fault.h).
 */
#include "fault.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- time, randomness, processes ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

uint64_t ft_seed(void) {
    const char *env = getenv("DQ_FAULT_SEED");
    uint64_t seed;
    if (env != NULL && env[0] != '\0') {
        seed = strtoull(env, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = ((uint64_t)ts.tv_sec * 1000003u) ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)getpid() << 32);
    }
    rng_state = seed ? seed : 1;
    return seed;
}

uint64_t ft_rand(void) {
    /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

long ft_rand_range(long lo, long hi) {
    return lo + (long)(ft_rand() % (uint64_t)(hi - lo + 1));
}

pid_t ft_fork(void (*fn)(void *), void *arg) {
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(3);
        /* Each child its own random sequence. */
        rng_state ^= (uint64_t)getpid() * 0x9E3779B97F4A7C15ULL;
        fn(arg);
        _exit(0);
    }
    return pid;
}

int ft_reap(pid_t pid, long timeout_ms) {
    int64_t end = th_mono_ms() + timeout_ms;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return st;
        if (w < 0 && errno != EINTR)
            return -1;
        if (th_mono_ms() > end) {
            kill(pid, SIGKILL);
            return waitpid(pid, &st, 0) == pid ? st : -1;
        }
        th_sleep_ms(5);
    }
}

void ft_assert_exit_ok(int status, const char *who) {
    if (status != -1 && WIFSIGNALED(status))
        ck_abort_msg("%s died of signal %d%s", who, WTERMSIG(status),
                     WTERMSIG(status) == SIGPIPE
                         ? " (SIGPIPE: the library wrote to a connection "
                           "Redis had closed and did not block SIGPIPE)"
                         : "");
    ck_assert_msg(status != -1 && WIFEXITED(status) &&
                      WEXITSTATUS(status) == 0,
                  "%s ended with status 0x%x", who, status);
}

/* ---- Redis ---- */

void ft_start(th_redis *r, int tcp, const char *conf) {
    ck_assert_msg(th_redis_start(r, tcp, conf) == 0,
                  "cannot start redis-server (see stderr): a missing "
                  "redis-server is a failure; run tools/deps.sh");
}

long long ft_cmd_int(redisContext *ctx, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "%s: %s", fmt, ctx->errstr);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "%s: reply type %d (%s)",
                  fmt, r->type, r->str ? r->str : "");
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

int ft_info_field(redisContext *ctx, const char *section, const char *field,
                  char *out, size_t size) {
    redisReply *r = rcmd_try(ctx, "INFO %s", section);
    int rc = -1;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        size_t fl = strlen(field);
        const char *p = r->str;
        while ((p = strstr(p, field)) != NULL) {
            if ((p == r->str || p[-1] == '\n') && p[fl] == ':') {
                const char *v = p + fl + 1;
                size_t n = strcspn(v, "\r\n");
                snprintf(out, size, "%.*s", (int)n, v);
                rc = 0;
                break;
            }
            p += fl;
        }
    }
    if (r != NULL)
        freeReplyObject(r);
    return rc;
}

int ft_queue_empty(dq_client *c, const char *queue) {
    int64_t s = -1, d = -1, f = -1, x = -1;
    if (dq_stats(c, queue, &s, &d, &f, &x, NULL) != 0)
        return 0;
    return s == 0 && d == 0 && f == 0 && x == 0;
}

dq_options *ft_wait_opts(int n, int timeout_ms, int durable) {
    dq_options *o = dq_options_new();
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_WAIT_REPLICAS, n), 0);
    ck_assert_int_eq(
        dq_options_set_int(o, DQ_OPT_WAIT_REPLICAS_TIMEOUT_MS, timeout_ms), 0);
    if (durable)
        ck_assert_int_eq(dq_options_set_int(o, DQ_OPT_DURABLE, 1), 0);
    return o;
}

int ft_wait_empty(dq_client *c, const char *queue, long timeout_ms) {
    int64_t end = th_mono_ms() + timeout_ms;
    while (!ft_queue_empty(c, queue)) {
        if (th_mono_ms() > end)
            return 0;
        th_sleep_ms(20);
    }
    return 1;
}

/* ---- jobs ---- */

void ft_job_id(char *buf, size_t size, const char *prefix, size_t index) {
    snprintf(buf, size, "%s-%zu", prefix, index);
}

long ft_job_index(const char *id, const char *prefix) {
    size_t pl = strlen(prefix);
    if (strncmp(id, prefix, pl) != 0 || id[pl] != '-' || id[pl + 1] == '\0')
        return -1;
    char *end;
    long v = strtol(id + pl + 1, &end, 10);
    return *end == '\0' && v >= 0 ? v : -1;
}

size_t ft_payload(char *buf, size_t size, size_t index) {
    int n = snprintf(buf, size, "payload-%zu", index);
    return (size_t)n;
}

/* ---- the ledger ---- */

ft_ledger *ft_ledger_new(const char *queue, const char *prefix, size_t njobs,
                         int maxatt) {
    size_t size = sizeof(ft_ledger) + njobs + 64 +
                  njobs * (size_t)maxatt * sizeof(ft_deliv);
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_msg(m != MAP_FAILED, "mmap %zu: %s", size, strerror(errno));
    ft_ledger *L = m;
    memset(L, 0, sizeof(*L));
    L->njobs = njobs;
    L->maxatt = maxatt;
    snprintf(L->prefix, sizeof(L->prefix), "%s", prefix);
    snprintf(L->queue, sizeof(L->queue), "%s", queue);
    L->d = (ft_deliv *)((char *)m + sizeof(ft_ledger));
    L->pushed = (uint8_t *)(L->d + njobs * (size_t)maxatt);
    return L;
}

void ft_ledger_free(ft_ledger *L) {
    if (L != NULL)
        munmap(L, sizeof(ft_ledger) + L->njobs + 64 +
                      L->njobs * (size_t)L->maxatt * sizeof(ft_deliv));
}

void ft_ledger_error(ft_ledger *L, const char *what, int rc,
                     const char *msg) {
    __atomic_add_fetch(&L->errors, 1, __ATOMIC_SEQ_CST);
    snprintf(L->last_error, sizeof(L->last_error), "pid %ld: %s: %s: %s",
             (long)getpid(), what, dq_errname(rc), msg ? msg : "");
}

/* 1 for the errors a fault may cause: I/O, timeout, LOADING. */
static int is_io(int rc, const char *msg) {
    return rc == DQ_EIO || rc == DQ_ETIMEDOUT ||
           /* a restarted server answers LOADING while it reads its AOF */
           (rc == DQ_EREDIS && msg != NULL && strstr(msg, "LOADING") != NULL);
}

/* Counts an error: expected (I/O, while faults are injected) or not. */
static void worker_error(const ft_consumer *cc, const char *what, int rc,
                         const char *msg) {
    if (!cc->strict && is_io(rc, msg))
        __atomic_add_fetch(&cc->L->io_errors, 1, __ATOMIC_SEQ_CST);
    else
        ft_ledger_error(cc->L, what, rc, msg);
}

/* Ledger slot of a delivery; NULL (overflow counted) if out of range. */
static ft_deliv *slot_of(ft_ledger *L, long idx, int64_t attempt) {
    if (idx < 0 || (size_t)idx >= L->njobs)
        return NULL;
    if (attempt < 1 || attempt > L->maxatt) {
        __atomic_add_fetch(&L->overflow, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    return &L->d[(size_t)idx * (size_t)L->maxatt + (size_t)(attempt - 1)];
}

/* Publishes a slot's state (atomically, for the analysing process). */
static void set_state(ft_deliv *s, int state) {
    if (s != NULL)
        __atomic_store_n(&s->state, state, __ATOMIC_SEQ_CST);
}

/* Final state of an ack given its result and whether an earlier try of the
 * same ack failed with an I/O error. */
static int ack_state(const ft_consumer *cc, int res, int failed_before,
                     const char *id) {
    if (res == 0)
        return FT_ACKED;
    if (res == DQ_ENOTFOUND && failed_before)
        return FT_ACKED_RETRY;
    if (res == DQ_ESTALE) {
        if (cc->strict)
            ft_ledger_error(cc->L, "ack (lease lost)", res, id);
        return FT_STALE;
    }
    ft_ledger_error(cc->L, "ack", res, id);
    return res == DQ_ENOTFOUND ? FT_NOTFOUND : FT_ACKING;
}

#define FT_RETRY_MS 15000 /* how long a worker retries one call */

/* 1 once the test asked the workers to finish. */
static int stopping(const ft_consumer *cc) { return cc->L->stop; }

/* Acks n jobs (slots may be NULL), retrying I/O errors with the same
 * tokens. */
static void ack_jobs(const ft_consumer *cc, dq_client *c, size_t n,
                     const char **ids, const char **toks, ft_deliv **slots) {
    ft_ledger *L = cc->L;
    int results[DQ_POLL_MAX];
    for (size_t i = 0; i < n; i++)
        set_state(slots[i], FT_ACKING);
    if (cc->batch_ack) {
        int failed = 0;
        int64_t end = th_mono_ms() + FT_RETRY_MS;
        for (;;) {
            int rc = dq_ack_batch(c, L->queue, n, ids, toks, results);
            if (rc >= 0)
                break;
            worker_error(cc, "ack_batch", rc, dq_errmsg(c));
            if (!is_io(rc, dq_errmsg(c)) || th_mono_ms() > end) {
                ft_ledger_error(L, "ack_batch gave up", rc, dq_errmsg(c));
                return;
            }
            failed = 1;
            __atomic_add_fetch(&L->retries, 1, __ATOMIC_SEQ_CST);
            th_sleep_ms(5);
        }
        for (size_t i = 0; i < n; i++)
            set_state(slots[i], ack_state(cc, results[i], failed, ids[i]));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        int failed = 0, rc;
        int64_t end = th_mono_ms() + FT_RETRY_MS;
        for (;;) {
            rc = dq_ack(c, L->queue, ids[i], toks[i]);
            if (rc == 0 || rc == DQ_ESTALE || rc == DQ_ENOTFOUND)
                break;
            worker_error(cc, "ack", rc, dq_errmsg(c));
            if (!is_io(rc, dq_errmsg(c)) || th_mono_ms() > end)
                break;
            failed = 1;
            __atomic_add_fetch(&L->retries, 1, __ATOMIC_SEQ_CST);
            th_sleep_ms(5);
        }
        if (rc == 0 || rc == DQ_ESTALE || rc == DQ_ENOTFOUND)
            set_state(slots[i], ack_state(cc, rc, failed, ids[i]));
        else
            ft_ledger_error(L, "ack gave up", rc, ids[i]);
    }
}

/* Opens a client for a worker, retrying I/O errors; NULL if it gave up. */
static dq_client *worker_open(const char *uri, const dq_options *opts,
                              ft_ledger *L, int strict) {
    ft_consumer cc = {.L = L, .strict = strict};
    int64_t end = th_mono_ms() + FT_RETRY_MS;
    char buf[1024];
    uri = tu_layout_uri(uri, buf, sizeof(buf));
    while (!L->stop) {
        dq_client *c = NULL;
        int rc = dq_open(uri, opts, &c);
        if (rc == 0)
            return c;
        worker_error(&cc, "open", rc, dq_errmsg(c));
        int io = is_io(rc, dq_errmsg(c));
        dq_close(c);
        if (th_mono_ms() > end || !io) {
            ft_ledger_error(L, "open gave up", rc, "");
            return NULL;
        }
        th_sleep_ms(10);
    }
    return NULL;
}

void ft_consume(void *arg) {
    const ft_consumer *cc = arg;
    ft_ledger *L = cc->L;
    dq_client *c = worker_open(cc->uri, cc->opts, L, cc->strict);
    if (c == NULL)
        return;
    const char *ids[DQ_POLL_MAX], *toks[DQ_POLL_MAX];
    ft_deliv *slots[DQ_POLL_MAX];
    while (!stopping(cc)) {
        dq_jobs *jobs = NULL;
        int rc = dq_poll_wait(c, L->queue, cc->max, cc->lease_ms, 100, &jobs);
        if (rc < 0) {
            worker_error(cc, "poll_wait", rc, dq_errmsg(c));
            th_sleep_ms(5);
            continue;
        }
        if (rc == 0)
            continue;
        __atomic_add_fetch(&L->polls, 1, __ATOMIC_SEQ_CST);
        size_t n = dq_jobs_count(jobs);
        for (size_t i = 0; i < n; i++) {
            const dq_job *j = dq_jobs_at(jobs, i);
            ids[i] = dq_job_id(j);
            toks[i] = dq_job_token(j);
            long idx = ft_job_index(ids[i], L->prefix);
            size_t len;
            const char *pl = dq_job_payload(j, &len);
            char want[64];
            size_t wl = idx >= 0 ? ft_payload(want, sizeof(want), (size_t)idx)
                                 : 0;
            if (idx < 0 || (size_t)idx >= L->njobs || len != wl ||
                memcmp(pl, want, wl) != 0)
                __atomic_add_fetch(&L->bad_payload, 1, __ATOMIC_SEQ_CST);
            ft_deliv *s = slot_of(L, idx, dq_job_attempt(j));
            slots[i] = s;
            if (s == NULL)
                continue;
            if (__atomic_load_n(&s->state, __ATOMIC_SEQ_CST) != FT_NONE)
                ft_ledger_error(L, "same attempt delivered twice", 0, ids[i]);
            s->inc = cc->inc;
            s->deadline_ms = dq_job_lease_deadline_ms(j);
            s->claim_ms = s->deadline_ms - cc->lease_ms;
            set_state(s, FT_CLAIMED);
        }
        if (cc->work_us > 0)
            for (size_t i = 0; i < n; i++)
                usleep((useconds_t)ft_rand_range(0, cc->work_us));
        ack_jobs(cc, c, n, ids, toks, slots);
        dq_jobs_free(jobs);
    }
    dq_close(c);
}

void ft_produce(void *arg) {
    const ft_producer *p = arg;
    ft_ledger *L = p->L;
    ft_consumer cc = {.L = L, .strict = p->strict};
    dq_client *c = worker_open(p->uri, p->opts, L, p->strict);
    if (c == NULL)
        return;
    size_t cap = (size_t)p->batch_max;
    char (*idb)[32] = calloc(cap, sizeof(*idb));
    char (*plb)[32] = calloc(cap, sizeof(*plb));
    const char **ids = calloc(cap, sizeof(*ids));
    const void **pls = calloc(cap, sizeof(*pls));
    size_t *lens = calloc(cap, sizeof(*lens));
    int64_t *delays = calloc(cap, sizeof(*delays));
    int *outcomes = calloc(cap, sizeof(*outcomes));
    if (!idb || !plb || !ids || !pls || !lens || !delays || !outcomes) {
        ft_ledger_error(L, "producer", DQ_ENOMEM, "calloc");
        goto out;
    }
    for (size_t i = p->lo; i < p->hi && !L->stop;) {
        while (L->pause && !L->stop)
            th_sleep_ms(1);
        size_t n = (size_t)ft_rand_range(1, p->batch_max);
        if (p->big_pct > 0 && ft_rand_range(1, 100) > p->big_pct)
            n = (size_t)ft_rand_range(1, p->batch_max < 8 ? p->batch_max : 8);
        if (n > p->hi - i)
            n = p->hi - i;
        for (size_t j = 0; j < n; j++) {
            ft_job_id(idb[j], sizeof(idb[j]), L->prefix, i + j);
            ids[j] = idb[j];
            lens[j] = ft_payload(plb[j], sizeof(plb[j]), i + j);
            pls[j] = plb[j];
            delays[j] = ft_rand_range(p->min_delay_ms, p->max_delay_ms);
        }
        int failed = 0, rc;
        int64_t end = th_mono_ms() + FT_RETRY_MS;
        for (;;) {
            if (n == 1) {
                rc = dq_push(c, L->queue, pls[0], lens[0], delays[0], ids[0],
                             DQ_PUSH_KEEP, NULL, 0, &outcomes[0]);
                if (rc == 0)
                    rc = outcomes[0] == DQ_PUSHED;
            } else {
                rc = dq_push_batch(c, L->queue, n, pls, lens, delays, ids,
                                   DQ_PUSH_KEEP, NULL, outcomes);
            }
            if (rc >= 0)
                break;
            worker_error(&cc, n == 1 ? "push" : "push_batch", rc,
                         dq_errmsg(c));
            if (!is_io(rc, dq_errmsg(c)) || th_mono_ms() > end)
                break;
            failed = 1;
            __atomic_add_fetch(&L->retries, 1, __ATOMIC_SEQ_CST);
            th_sleep_ms(5);
        }
        if (rc < 0) {
            ft_ledger_error(L, "push gave up", rc, ids[0]);
        } else {
            for (size_t j = 0; j < n; j++) {
                if (outcomes[j] == DQ_KEPT) {
                    /* Only a retry may find its job there already. */
                    if (!failed)
                        ft_ledger_error(L, "push kept a job never pushed",
                                        0, ids[j]);
                    __atomic_add_fetch(&L->kept, 1, __ATOMIC_SEQ_CST);
                } else if (outcomes[j] != DQ_PUSHED) {
                    ft_ledger_error(L, "push outcome", outcomes[j], ids[j]);
                }
                L->pushed[i + j] = 1;
            }
        }
        i += n;
        if (p->pace_us > 0)
            usleep((useconds_t)p->pace_us);
    }
out:
    free(idb);
    free(plb);
    free(ids);
    free(pls);
    free(lens);
    free(delays);
    free(outcomes);
    dq_close(c);
}

/* ---- analysis ---- */

/* 1 for the ledger states of an ack that took effect. */
static int is_acked(int st) { return st == FT_ACKED || st == FT_ACKED_RETRY; }

/* 1 if incarnation inc was SIGKILLed. */
static int was_killed(const uint8_t *killed, int ninc, int inc) {
    return killed != NULL && inc >= 0 && inc < ninc && killed[inc];
}

void ft_analyze(const ft_ledger *L, const uint8_t *killed, int ninc,
                ft_report *rep) {
    memset(rep, 0, sizeof(*rep));
    for (size_t i = 0; i < L->njobs; i++) {
        const ft_deliv *d = &L->d[i * (size_t)L->maxatt];
        int top = 0; /* highest recorded attempt */
        for (int a = 1; a <= L->maxatt; a++)
            if (d[a - 1].state != FT_NONE)
                top = a;
        if (top > rep->max_attempt)
            rep->max_attempt = top;
        long acks = 0, pending = 0;
        int prev = 0; /* previous recorded attempt */
        for (int a = 1; a <= top; a++) {
            const ft_deliv *s = &d[a - 1];
            if (s->state == FT_NONE) {
                rep->unrecorded++;
                continue;
            }
            rep->deliveries++;
            if (!L->pushed[i])
                rep->phantom++;
            if (is_acked(s->state))
                acks++;
            if (s->state == FT_STALE)
                rep->stale++;
            int dead_holder = was_killed(killed, ninc, s->inc);
            if (s->state == FT_ACKING && dead_holder)
                pending++;
            if (dead_holder && (s->state == FT_CLAIMED ||
                                s->state == FT_ACKING)) {
                if (a < top)
                    rep->kill_redeliv++;
                rep->kill_inflight++;
            }
            if (a > 1) {
                rep->redelivered++;
                const ft_deliv *p = &d[a - 2];
                if (p->state != FT_NONE &&
                    !was_killed(killed, ninc, p->inc) &&
                    p->state != FT_STALE)
                    rep->unexplained++;
            }
            if (prev > 0 && s->claim_ms < d[prev - 1].deadline_ms)
                rep->dup_lease++;
            prev = a;
        }
        if (acks == 0 && pending > 0) {
            /* The job is gone (the queue ended empty) and nobody else acked
             * it: the ack cut short by the SIGKILL took effect. */
            acks = 1;
            rep->resolved++;
        }
        if (L->pushed[i]) {
            rep->pushed++;
            if (acks == 0)
                rep->lost++;
        }
        if (acks == 1)
            rep->acked++;
        if (acks > 1)
            rep->dup_ack++;
    }
}

void ft_figures(const char *test, const ft_report *rep, long faults,
                const char *extra_fmt, ...) {
    char extra[512] = "";
    if (extra_fmt != NULL) {
        va_list ap;
        va_start(ap, extra_fmt);
        vsnprintf(extra, sizeof(extra), extra_fmt, ap);
        va_end(ap);
    }
    printf("figures: %s: pushed=%ld acked=%ld lost=%ld dup_ack=%ld "
           "dup_in_lease=%ld faults=%ld%s%s\n",
           test, rep->pushed, rep->acked, rep->lost, rep->dup_ack,
           rep->dup_lease, faults, extra[0] ? " " : "", extra);
    fflush(stdout);
}

void ft_assert_clean(const ft_ledger *L, const ft_report *rep) {
    ck_assert_msg(rep->lost == 0, "%ld jobs lost", rep->lost);
    ck_assert_msg(rep->dup_ack == 0, "%ld jobs acked twice", rep->dup_ack);
    ck_assert_msg(rep->dup_lease == 0,
                  "%ld deliveries within a valid lease", rep->dup_lease);
    ck_assert_msg(rep->phantom == 0, "%ld deliveries of jobs never pushed",
                  rep->phantom);
    ck_assert_msg(L->bad_payload == 0, "%" PRId64 " bad payloads",
                  L->bad_payload);
    ck_assert_msg(L->overflow == 0, "%" PRId64 " deliveries past attempt %d",
                  L->overflow, L->maxatt);
    ck_assert_msg(rep->unexplained == 0,
                  "%ld redeliveries of jobs a live consumer had acked",
                  rep->unexplained);
}

void ft_assert_all_done(const ft_ledger *L, const ft_report *rep,
                        long njobs) {
    ck_assert_msg(L->errors == 0, "%" PRId64 " unexpected errors, last: %s",
                  L->errors, L->last_error);
    ft_assert_clean(L, rep);
    ck_assert_int_eq(rep->pushed, njobs);
    ck_assert_int_eq(rep->acked, njobs);
}
