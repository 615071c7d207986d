/*
 * delayq_jobs.c - the commands that act on single jobs: push, cancel, get,
 * and poll / ack / nack / extend for scripts that hold jobs by hand.
 */
#include "delayq_tool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A growable byte buffer. */
typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

/* Makes room for more bytes (and a NUL) in b.  0 or -1. */
static int buf_reserve(buf *b, size_t more) {
    if (b->len + more + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more + 1) {
        if (cap > SIZE_MAX / 2)
            return -1;
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Reads all of fd into b.  0 or -1 (errno set). */
static int read_all(int fd, buf *b) {
    for (;;) {
        if (buf_reserve(b, 65536) != 0) {
            errno = ENOMEM;
            return -1;
        }
        ssize_t n = read(fd, b->p + b->len, b->cap - b->len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        b->len += (size_t)n;
    }
}

/* ---- push ---------------------------------------------------------------- */

const dqt_optspec dqt_push_opts[] = {{"in", 0, 1, DQT_O_IN},
                                     {"at", 0, 1, DQT_O_AT},
                                     {"id", 0, 1, DQT_O_ID},
                                     {"replace", 0, 0, DQT_O_REPLACE},
                                     {"keep", 0, 0, DQT_O_KEEP},
                                     {"json", 0, 0, DQT_O_JSON},
                                     {"every", 0, 1, DQT_O_EVERY},
                                     {"cron", 0, 1, DQT_O_CRON},
                                     {"tz", 0, 1, DQT_O_TZ},
                                     {"max-attempts", 0, 1, DQT_O_MAXATT},
                                     {"expire-in", 0, 1, DQT_O_EXPIN},
                                     {"expire-at", 0, 1, DQT_O_EXPAT},
                                     {"debounce", 0, 1, DQT_O_DEBOUNCE},
                                     {"max-wait", 0, 1, DQT_O_MAXWAIT},
                                     {"group", 0, 1, DQT_O_GROUP},
                                     {"priority", 0, 1, DQT_O_PRIORITY},
                                     {NULL, 0, 0, 0}};

/* A duration option that may also be plain milliseconds ("1500"). */
static int opt_ms(const dqt_cli *g, const dqt_optval *o, int64_t *ms) {
    const char *s = o->val;
    if (s != NULL && *s && strspn(s, "0123456789") == strlen(s) &&
        strlen(s) <= 15) {
        *ms = strtoll(s, NULL, 10);
        return 0;
    }
    return dqt_opt_duration(g, o, ms);
}

/* --tz: "+HH:MM", "-HH:MM" (or "Z", "UTC") -> minutes east of UTC.
 * 0 or -1. */
static int parse_tz(const char *s, int64_t *min) {
    if (strcmp(s, "Z") == 0 || strcmp(s, "UTC") == 0) {
        *min = 0;
        return 0;
    }
    if ((s[0] != '+' && s[0] != '-') || strlen(s) != 6 || s[3] != ':' ||
        strspn(s + 1, "0123456789") != 2 || strspn(s + 4, "0123456789") != 2)
        return -1;
    int h = (s[1] - '0') * 10 + (s[2] - '0');
    int m = (s[4] - '0') * 10 + (s[5] - '0');
    if (m > 59 || h * 60 + m > DQ_TZ_OFFSET_MAX)
        return -1;
    *min = (s[0] == '-' ? -1 : 1) * (h * 60 + m);
    return 0;
}

/* Sets one push option from the command line; a usage exit code when the
 * library refuses it (its reason printed). */
static int set_opt(const dqt_cli *g, dq_push_opts *po, const dqt_optval *o,
                   int opt, int64_t v, const char *text) {
    int rc = text != NULL ? dq_push_opts_set_str(po, opt, text)
                          : dq_push_opts_set(po, opt, v);
    if (rc == DQ_OK)
        return 0;
    fprintf(stderr, "delayq %s: --%s: %s\n", g->cmd, o->name,
            dq_push_opts_errmsg(po));
    return DQT_EXIT_USAGE;
}

/* delayq push: one job, payload from the argument or stdin. */
int dqt_cmd_push(dqt_cli *g) {
    int64_t delay = 0, at = -1, v = 0;
    const char *id = NULL;
    int flags = DQ_PUSH_KEEP, json = 0, rc, have_in = 0, every = 0, cron = 0;
    int debounce = 0;
    dq_push_opts *po = dq_push_opts_new();
    if (po == NULL) {
        fprintf(stderr, "delayq push: out of memory\n");
        return DQT_EXIT_FAILED;
    }
    rc = 0;
    for (int i = 0; i < g->a.nopts && rc == 0; i++) {
        const dqt_optval *o = &g->a.opts[i];
        switch (o->id) {
        case DQT_O_EVERY:
            if ((rc = opt_ms(g, o, &v)) == 0)
                rc = set_opt(g, po, o, DQ_PUSHOPT_EVERY_MS, v, NULL);
            every = 1;
            break;
        case DQT_O_CRON:
            rc = set_opt(g, po, o, DQ_PUSHOPT_CRON, 0, o->val);
            cron = 1;
            break;
        case DQT_O_GROUP:
            rc = set_opt(g, po, o, DQ_PUSHOPT_GROUP, 0, o->val);
            break;
        case DQT_O_PRIORITY:
            if ((rc = dqt_opt_int(g, o, 0, DQ_PRIORITY_MAX, &v)) == 0)
                rc = set_opt(g, po, o, DQ_PUSHOPT_PRIORITY, v, NULL);
            break;
        case DQT_O_TZ:
            if (parse_tz(o->val, &v) != 0) {
                fprintf(stderr, "delayq push: --tz: '%s' is not an offset; "
                                "use +HH:MM or -HH:MM (at most 14:00)\n",
                        o->val);
                rc = DQT_EXIT_USAGE;
            } else {
                rc = set_opt(g, po, o, DQ_PUSHOPT_TZ_OFFSET_MIN, v, NULL);
            }
            break;
        case DQT_O_MAXATT:
            if ((rc = dqt_opt_int(g, o, 1, DQ_ATTEMPTS_MAX, &v)) == 0)
                rc = set_opt(g, po, o, DQ_PUSHOPT_MAX_ATTEMPTS, v, NULL);
            break;
        case DQT_O_EXPIN:
            if ((rc = opt_ms(g, o, &v)) == 0)
                rc = set_opt(g, po, o, DQ_PUSHOPT_EXPIRE_IN_MS, v, NULL);
            break;
        case DQT_O_EXPAT:
            if (dqt_parse_time(o->val, &v) != 0) {
                fprintf(stderr,
                        "delayq push: --expire-at: '%s' is not a time; use "
                        "ISO-8601 UTC or epoch ms\n",
                        o->val);
                rc = DQT_EXIT_USAGE;
            } else {
                rc = set_opt(g, po, o, DQ_PUSHOPT_EXPIRE_AT, v, NULL);
            }
            break;
        case DQT_O_IN:
            rc = dqt_opt_duration(g, o, &delay);
            have_in++;
            break;
        case DQT_O_DEBOUNCE: /* debounced: its delay is this one */
            rc = opt_ms(g, o, &delay);
            have_in++;
            flags = DQ_PUSH_DEBOUNCE;
            debounce = 1;
            break;
        case DQT_O_MAXWAIT:
            if ((rc = opt_ms(g, o, &v)) == 0)
                rc = set_opt(g, po, o, DQ_PUSHOPT_DEBOUNCE_MAX_MS, v, NULL);
            break;
        case DQT_O_AT:
            if (dqt_parse_time(o->val, &at) != 0) {
                fprintf(stderr,
                        "delayq push: --at: '%s' is not a time; use ISO-8601 "
                        "UTC like 2026-12-01T09:00:00Z or epoch ms\n",
                        o->val);
                rc = DQT_EXIT_USAGE;
            }
            break;
        case DQT_O_ID:
            id = o->val;
            break;
        case DQT_O_REPLACE:
            flags = DQ_PUSH_REPLACE;
            break;
        case DQT_O_KEEP:
            flags = DQ_PUSH_KEEP;
            break;
        case DQT_O_JSON:
            json = 1;
            break;
        }
    }
    if (rc == 0 && (have_in > 1 || (have_in && at >= 0)))
        rc = dqt_usage_error(g, "use one of --in, --debounce and --at%s", "");
    if (rc == 0 && debounce && flags != DQ_PUSH_DEBOUNCE)
        rc = dqt_usage_error(g, "use either --debounce or --replace/--keep%s",
                             "");
    if (rc == 0 && every && cron)
        rc = dqt_usage_error(g, "use either --every or --cron, not both%s",
                             "");
    if (rc == 0)
        rc = dqt_npos_check(g, 0, 1, "payload");
    if (rc) {
        dq_push_opts_free(po);
        return rc;
    }
    const char *queue;
    buf payload = {0};
    const char *data;
    size_t len;
    if (g->a.npos == 1 && strcmp(g->a.pos[0], "-") != 0) {
        data = g->a.pos[0];
        len = strlen(data);
    } else {
        if (read_all(0, &payload) != 0) {
            fprintf(stderr, "delayq push: reading the payload from stdin: %s\n",
                    strerror(errno));
            free(payload.p);
            dq_push_opts_free(po);
            return DQT_EXIT_FAILED;
        }
        data = payload.p ? payload.p : "";
        len = payload.len;
    }
    if ((rc = dqt_start(g, &queue))) {
        free(payload.p);
        dq_push_opts_free(po);
        return rc;
    }
    char idbuf[DQ_ID_BUF];
    int outcome = 0;
    rc = dq_push_ex(g->c, queue, data, len, at >= 0 ? at : delay, id,
                    flags | (at >= 0 ? DQ_PUSH_AT : 0), po, idbuf,
                    sizeof(idbuf), &outcome);
    free(payload.p);
    dq_push_opts_free(po);
    if (rc < 0)
        return dqt_report(g, rc);
    const char *what = outcome == DQ_PUSHED     ? "pushed"
                       : outcome == DQ_KEPT     ? "kept"
                       : outcome == DQ_REPLACED ? "replaced"
                       : outcome == DQ_DONE     ? "done"
                       : outcome == DQ_DEBOUNCE_CREATED  ? "created"
                       : outcome == DQ_DEBOUNCE_MOVED    ? "moved"
                       : outcome == DQ_DEBOUNCE_FOLLOWUP ? "followup"
                                                : "unknown";
    if (json) {
        fputs("{\"id\":", stdout);
        dqt_json_cstr(stdout, idbuf);
        printf(",\"outcome\":\"%s\"}\n", what);
    } else {
        printf("%s %s\n", what, idbuf);
    }
    return DQT_EXIT_OKAY;
}

/* ---- cancel -------------------------------------------------------------- */

const dqt_optspec dqt_cancel_opts[] = {{"inflight", 0, 0, DQT_O_INFLIGHT},
                                       {NULL, 0, 0, 0}};

/* delayq cancel: jobs not delivered yet (or in flight with --inflight). */
int dqt_cmd_cancel(dqt_cli *g) {
    int flags = 0, rc, ret = DQT_EXIT_OKAY;
    for (int i = 0; i < g->a.nopts; i++)
        if (g->a.opts[i].id == DQT_O_INFLIGHT)
            flags = DQ_CANCEL_INFLIGHT;
    const char *queue;
    if ((rc = dqt_npos_check(g, 1, -1, "job id")) ||
        (rc = dqt_start(g, &queue)))
        return rc;
    for (int i = 0; i < g->a.npos; i++) {
        const char *id = g->a.pos[i];
        rc = dq_cancel(g->c, queue, id, flags);
        if (rc < 0)
            return dqt_report(g, rc);
        if (rc == DQ_CANCELED_PENDING) {
            printf("canceled %s\n", id);
        } else if (rc == DQ_CANCELED_INFLIGHT) {
            printf("canceled %s (was in flight)\n", id);
        } else if (rc == DQ_CANCEL_BUSY) {
            fprintf(stderr,
                    "delayq cancel: job '%s' is in flight: left alone (use "
                    "--inflight to remove it)\n",
                    id);
            ret = DQT_EXIT_FAILED;
        } else {
            fprintf(stderr,
                    "delayq cancel: no pending or in-flight job '%s'\n", id);
            ret = DQT_EXIT_FAILED;
        }
    }
    return ret;
}

/* ---- reschedule, promote ------------------------------------------------- */

const dqt_optspec dqt_reschedule_opts[] = {{"in", 0, 1, DQT_O_IN},
                                           {"at", 0, 1, DQT_O_AT},
                                           {"revive", 0, 0, DQT_O_REVIVE},
                                           {NULL, 0, 0, 0}};
const dqt_optspec dqt_promote_opts[] = {{"revive", 0, 0, DQT_O_REVIVE},
                                        {NULL, 0, 0, 0}};

/* The new time of a reschedule from --in / --at: *when and DQ_RESCHED_AT
 * in *flags for --at.  0 or a usage exit code. */
static int resched_when(dqt_cli *g, int64_t *when, int *flags) {
    int have = 0, rc = 0;
    for (int i = 0; i < g->a.nopts && rc == 0; i++) {
        const dqt_optval *o = &g->a.opts[i];
        if (o->id == DQT_O_IN) {
            rc = opt_ms(g, o, when);
            have |= 1;
        } else if (o->id == DQT_O_AT) {
            if (dqt_parse_time(o->val, when) != 0)
                rc = dqt_usage_error(g, "--at: '%s' is not a time; use "
                                        "ISO-8601 UTC or epoch ms",
                                     o->val);
            *flags |= DQ_RESCHED_AT;
            have |= 2;
        }
    }
    if (rc == 0 && have == 3)
        rc = dqt_usage_error(g, "use either --in or --at, not both%s", "");
    if (rc == 0 && have == 0)
        rc = dqt_usage_error(g, "say when: --in DUR or --at TIME%s", "");
    return rc;
}

/* Prints the outcome of one job; 0 when it moved, else DQT_EXIT_FAILED. */
static int resched_say(const dqt_cli *g, const char *id, int outcome) {
    static const char *const why[] = {
        [DQ_RESCHED_UNKNOWN] = "no such job",
        [DQ_RESCHED_INFLIGHT] = "in flight: left alone",
        [DQ_RESCHED_DEAD] = "dead: left alone (use --revive to move it)"};
    if (outcome == DQ_RESCHED_MOVED || outcome == DQ_RESCHED_REVIVED) {
        printf("%s %s\n", outcome == DQ_RESCHED_MOVED ? "moved" : "revived",
               id);
        return 0;
    }
    fprintf(stderr, "delayq %s: job '%s': %s\n", g->cmd, id,
            outcome >= 0 && outcome <= DQ_RESCHED_DEAD ? why[outcome]
                                                      : "unexpected answer");
    return DQT_EXIT_FAILED;
}

/* delayq reschedule / promote (promote: due now): every id in one batch. */
static int resched_common(dqt_cli *g, int promote) {
    int64_t when = 0;
    int flags = 0, rc = promote ? 0 : resched_when(g, &when, &flags);
    for (int i = 0; i < g->a.nopts; i++)
        if (g->a.opts[i].id == DQT_O_REVIVE)
            flags |= DQ_RESCHED_REVIVE;
    const char *queue;
    if (rc || (rc = dqt_npos_check(g, 1, -1, "job id")) ||
        (rc = dqt_start(g, &queue)))
        return rc;
    int *out = calloc((size_t)g->a.npos, sizeof(int));
    if (out == NULL) {
        fprintf(stderr, "delayq %s: out of memory\n", g->cmd);
        return DQT_EXIT_FAILED;
    }
    rc = dq_reschedule_batch(g->c, queue, (size_t)g->a.npos,
                             (const char *const *)g->a.pos, when, flags, out);
    int ret = rc < 0 ? dqt_report(g, rc) : DQT_EXIT_OKAY;
    for (int i = 0; rc >= 0 && i < g->a.npos; i++)
        if (resched_say(g, g->a.pos[i], out[i]) != 0)
            ret = DQT_EXIT_FAILED;
    free(out);
    return ret;
}

int dqt_cmd_reschedule(dqt_cli *g) { return resched_common(g, 0); }
int dqt_cmd_promote(dqt_cli *g) { return resched_common(g, 1); }

/* ---- poll ---------------------------------------------------------------- */

const dqt_optspec dqt_poll_opts[] = {{"max", 0, 1, DQT_O_MAX},
                                     {"lease", 0, 1, DQT_O_LEASE},
                                     {"wait", 0, 1, DQT_O_WAIT},
                                     {"json", 0, 0, DQT_O_JSON},
                                     {NULL, 0, 0, 0}};

/* delayq poll: claims due jobs and prints them with their tokens. */
int dqt_cmd_poll(dqt_cli *g) {
    /* lease 0: the queue's lease_ms setting, else the library's 30 s */
    int64_t max = 1, lease = 0, wait = 0;
    int json = 0, rc;
    for (int i = 0; i < g->a.nopts; i++) {
        const dqt_optval *o = &g->a.opts[i];
        rc = 0;
        if (o->id == DQT_O_MAX)
            rc = dqt_opt_int(g, o, 1, DQ_POLL_MAX, &max);
        else if (o->id == DQT_O_LEASE)
            rc = dqt_opt_duration(g, o, &lease);
        else if (o->id == DQT_O_WAIT)
            rc = dqt_opt_duration(g, o, &wait);
        else if (o->id == DQT_O_JSON)
            json = 1;
        if (rc)
            return rc;
    }
    const char *queue;
    if ((rc = dqt_npos_check(g, 0, 0, "")) || (rc = dqt_start(g, &queue)))
        return rc;
    dq_jobs *jobs = NULL;
    if (wait > 0)
        rc = dq_poll_wait(g->c, queue, (int)max, lease, wait, &jobs);
    else
        rc = dq_poll(g->c, queue, (int)max, lease, &jobs, NULL);
    if (rc < 0)
        return dqt_report(g, rc);
    size_t n = dq_jobs_count(jobs);
    if (json)
        putchar('[');
    for (size_t i = 0; i < n; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        size_t len;
        const void *p = dq_job_payload(j, &len);
        if (json) {
            fputs(i ? ",{\"id\":" : "{\"id\":", stdout);
            dqt_json_cstr(stdout, dq_job_id(j));
            printf(",\"attempt\":%" PRId64
                   ",\"token\":\"%s\",\"due_ms\":%" PRId64
                   ",\"lease_deadline_ms\":%" PRId64,
                   dq_job_attempt(j), dq_job_token(j), dq_job_due_ms(j),
                   dq_job_lease_deadline_ms(j));
            dqt_json_payload(stdout, p, len);
            dqt_json_group(stdout, dqt_job_group(j), dq_job_priority(j));
            putchar('}');
        } else {
            dqt_escaped(stdout, dq_job_id(j), strlen(dq_job_id(j)), 0);
            printf("\t%" PRId64 "\t%s\t", dq_job_attempt(j), dq_job_token(j));
            dqt_escaped(stdout, p, len, 0);
            putchar('\n');
        }
    }
    if (json)
        puts("]");
    dq_jobs_free(jobs);
    return DQT_EXIT_OKAY;
}

/* ---- ack / nack / extend ------------------------------------------------- */

/* delayq ack: finishes a held job. */
int dqt_cmd_ack(dqt_cli *g) {
    const char *queue;
    int rc;
    if ((rc = dqt_npos_check(g, 2, 2, "job id and token")) ||
        (rc = dqt_start(g, &queue)))
        return rc;
    if ((rc = dq_ack(g->c, queue, g->a.pos[0], g->a.pos[1])) < 0)
        return dqt_report(g, rc);
    printf("acked %s\n", g->a.pos[0]);
    return DQT_EXIT_OKAY;
}

const dqt_optspec dqt_nack_opts[] = {{"in", 0, 1, DQT_O_IN},
                                     {"dead", 0, 0, DQT_O_DEAD},
                                     {"reason", 0, 1, DQT_O_REASON},
                                     {NULL, 0, 0, 0}};

/* delayq nack: releases a held job for a retry, or dead-letters it. */
int dqt_cmd_nack(dqt_cli *g) {
    int64_t delay = 0;
    int flags = 0, rc;
    const char *reason = NULL;
    for (int i = 0; i < g->a.nopts; i++) {
        const dqt_optval *o = &g->a.opts[i];
        if (o->id == DQT_O_IN && (rc = dqt_opt_duration(g, o, &delay)))
            return rc;
        if (o->id == DQT_O_DEAD)
            flags = DQ_NACK_DEAD;
        if (o->id == DQT_O_REASON)
            reason = o->val;
    }
    const char *queue;
    if ((rc = dqt_npos_check(g, 2, 2, "job id and token")) ||
        (rc = dqt_start(g, &queue)))
        return rc;
    if (reason != NULL)
        rc = dq_nack_reason(g->c, queue, g->a.pos[0], g->a.pos[1], delay,
                            flags, reason, strlen(reason));
    else
        rc = dq_nack(g->c, queue, g->a.pos[0], g->a.pos[1], delay, flags);
    if (rc < 0)
        return dqt_report(g, rc);
    printf("%s %s\n", rc == 1 ? "dead" : "requeued", g->a.pos[0]);
    return DQT_EXIT_OKAY;
}

const dqt_optspec dqt_extend_opts[] = {{"lease", 0, 1, DQT_O_LEASE},
                                       {NULL, 0, 0, 0}};

/* delayq extend: renews the lease of a held job. */
int dqt_cmd_extend(dqt_cli *g) {
    int64_t lease = 30000, deadline = 0;
    int rc;
    for (int i = 0; i < g->a.nopts; i++)
        if (g->a.opts[i].id == DQT_O_LEASE &&
            (rc = dqt_opt_duration(g, &g->a.opts[i], &lease)))
            return rc;
    const char *queue;
    if ((rc = dqt_npos_check(g, 2, 2, "job id and token")) ||
        (rc = dqt_start(g, &queue)))
        return rc;
    rc = dq_extend(g->c, queue, g->a.pos[0], g->a.pos[1], lease, &deadline);
    if (rc < 0)
        return dqt_report(g, rc);
    char iso[40], d[48];
    printf("extended %s until %s (%s from now)\n", g->a.pos[0],
           dqt_fmt_iso(deadline, iso, sizeof(iso)),
           dqt_fmt_dur(lease, d, sizeof(d)));
    return DQT_EXIT_OKAY;
}

/* ---- get ----------------------------------------------------------------- */

const dqt_optspec dqt_get_opts[] = {{"json", 0, 0, DQT_O_JSON},
                                    {NULL, 0, 0, 0}};

/* Prints a found job: one "name  value" line per field, or one JSON
 * object. */
static void print_info(const dq_job_info *in, int json) {
    int st = dq_job_info_state(in);
    int64_t now = dq_job_info_now_ms(in), t = dq_job_info_due_ms(in);
    size_t len, rlen;
    const void *p = dq_job_info_payload(in, &len);
    const void *reason = dq_job_info_last_error(in, &rlen);
    int64_t failed = dq_job_info_failed_ms(in);
    const char *tkey = st == DQ_JOB_INFLIGHT ? "lease_deadline_ms"
                       : st == DQ_JOB_DEAD   ? "died_ms"
                                             : "due_ms";
    if (json) {
        fputs("{\"id\":", stdout);
        dqt_json_cstr(stdout, dq_job_info_id(in));
        printf(",\"state\":\"%s\",\"%s\":%" PRId64 ",\"attempts\":%" PRId64
               ",\"now_ms\":%" PRId64,
               dqt_job_state_name(st), tkey, t, dq_job_info_attempts(in),
               now);
        dqt_json_payload(stdout, p, len);
        dqt_json_reason(stdout, reason, rlen, failed);
        if (dq_job_info_repeat(in) != NULL) {
            fputs(",\"repeat\":", stdout);
            dqt_json_cstr(stdout, dq_job_info_repeat(in));
        }
        dqt_json_group(stdout, dq_job_info_group(in),
                       dq_job_info_priority(in));
        puts("}");
        return;
    }
    char rel[64], iso[40];
    fputs("id         ", stdout);
    dqt_escaped(stdout, dq_job_info_id(in), strlen(dq_job_info_id(in)), 0);
    printf("\nstate      %s\n", dqt_job_state_name(st));
    printf("%-10s %s (%s)\n",
           st == DQ_JOB_INFLIGHT ? "lease ends"
           : st == DQ_JOB_DEAD   ? "died"
                                 : "due",
           dqt_fmt_iso(t, iso, sizeof(iso)),
           dqt_fmt_rel(t, now, rel, sizeof(rel)));
    printf("attempts   %" PRId64 "\n", dq_job_info_attempts(in));
    if (dq_job_info_repeat(in) != NULL)
        printf("repeats    %s\n", dq_job_info_repeat(in));
    if (dq_job_info_group(in) != NULL)
        printf("group      %s\n", dq_job_info_group(in));
    if (dq_job_info_priority(in) > 0)
        printf("priority   %d\n", dq_job_info_priority(in));
    if (reason != NULL) {
        fputs("last error ", stdout);
        dqt_escaped(stdout, reason, rlen, 0);
        printf(" (%s)\n", dqt_fmt_rel(failed, now, rel, sizeof(rel)));
    }
    fputs("payload    ", stdout);
    dqt_escaped(stdout, p, len, 0);
    putchar('\n');
}

/* delayq get: one job by id, whatever it is doing. */
int dqt_cmd_get(dqt_cli *g) {
    int json = 0, rc;
    for (int i = 0; i < g->a.nopts; i++)
        if (g->a.opts[i].id == DQT_O_JSON)
            json = 1;
    const char *queue;
    if ((rc = dqt_npos_check(g, 1, 1, "job id")) ||
        (rc = dqt_start(g, &queue)))
        return rc;
    const char *id = g->a.pos[0];
    dq_job_info *in = NULL;
    rc = dq_get(g->c, queue, id, &in);
    if (rc < 0)
        return dqt_report(g, rc);
    if (rc == 0) {
        if (json) {
            fputs("{\"id\":", stdout);
            dqt_json_cstr(stdout, id);
            puts(",\"state\":\"unknown\"}");
        }
        fprintf(stderr, "delayq get: no job '");
        dqt_escaped(stderr, id, strlen(id), 0);
        fprintf(stderr, "'\n");
        return DQT_EXIT_FAILED;
    }
    print_info(in, json);
    dq_job_info_free(in);
    return DQT_EXIT_OKAY;
}
