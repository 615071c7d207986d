/*
 * examples/demo.c - the quick-start demo of libdelayq: three everyday uses
 * of a delayed-job queue, printed as a timeline (seconds since start).
 *
 *   1. An order service schedules "close order 1042" (30 minutes in real
 *      life, 3 s here).  A second order, 1043, gets paid first, so its
 *      close job is cancelled by id and never runs.
 *   2. A session service schedules "log out user 77" after a grace period.
 *      User 77 comes back, so the same id is pushed again with
 *      DQ_PUSH_REPLACE, which moves the job later; user 88 comes back and
 *      that logout job is cancelled.
 *   3. Three consumer processes poll the same queue with dq_poll_wait.  One
 *      of them crashes in the middle of a job (exits without ack); when its
 *      lease runs out the job is delivered again, with attempt 2, to another
 *      consumer.
 *
 *   demo [URI]      URI defaults to $DELAYQ_URI, then redis://127.0.0.1:6379
 *
 * Takes about 9 s; prints a summary and the queue's stats, and exits 0 when
 * everything happened as described (1 otherwise).
 */
#define _POSIX_C_SOURCE 200809L

#include <delayq.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NCONSUMERS 3
#define LEASE_MS 2000 /* a consumer has 2 s per job before it is redelivered */

static struct timespec t_start; /* shared by the forked consumers */
static char queue[64];

/* Seconds since the demo started. */
static double since_start(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t_start.tv_sec) +
           (double)(now.tv_nsec - t_start.tv_nsec) / 1e9;
}

/* One timeline line: "+1.234s who: text", written at once (processes share
 * the terminal). */
static void say(const char *who, const char *fmt, ...) {
    char line[512];
    int n = snprintf(line, sizeof(line), "+%6.3fs %-16s ", since_start(), who);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    fwrite(line, 1, (size_t)n, stdout);
    fflush(stdout);
}

static void sleep_until(double t) {
    double left = t - since_start();
    if (left <= 0)
        return;
    struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static const char *outcome_name(int outcome) {
    return outcome == DQ_PUSHED ? "pushed (new job)"
           : outcome == DQ_KEPT ? "kept (the id existed)"
           : outcome == DQ_REPLACED ? "replaced (rescheduled)"
                                    : "?";
}

/* Pushes a job with a caller-chosen id; exits on error. */
static void push(dq_client *c, const char *who, const char *id,
                 const char *payload, int64_t delay_ms, int flags) {
    int outcome = 0;
    int rc = dq_push(c, queue, payload, strlen(payload), delay_ms, id, flags,
                     NULL, 0, &outcome);
    if (rc != 0) {
        say(who, "push %s FAILED: %s (%s)", id, dq_errname(rc), dq_errmsg(c));
        exit(1);
    }
    say(who, "push %-18s \"%s\" in %.1fs (due +%.1fs)%s -> %s", id, payload,
        (double)delay_ms / 1000, since_start() + (double)delay_ms / 1000,
        flags == DQ_PUSH_REPLACE ? " with DQ_PUSH_REPLACE" : "",
        outcome_name(outcome));
}

static void cancel(dq_client *c, const char *who, const char *id) {
    int rc = dq_cancel(c, queue, id, 0);
    say(who, "cancel %s -> %s", id,
        rc == DQ_CANCELED_PENDING ? "removed before it ran"
        : rc == DQ_CANCEL_BUSY    ? "too late: already running"
        : rc == 0                 ? "no such job"
                                  : dq_errmsg(c));
}

/* ---- consumers ----------------------------------------------------------- */

/*
 * A consumer process: claims one job at a time with dq_poll_wait, handles
 * it, acks it, and reports "id attempt consumer" lines on report_fd.  It
 * stops when stop_fd reaches EOF (the demo is over).  The first delivery of
 * render-report-9 makes it crash: it exits without acking.
 */
static int consumer(const char *uri, char name, int stop_fd, int report_fd) {
    char who[32];
    snprintf(who, sizeof(who), "consumer %c", name);
    dq_client *c = NULL;
    if (dq_open(uri, NULL, &c) != 0) {
        say(who, "cannot connect: %s", dq_errmsg(c));
        return 1;
    }
    say(who, "started (pid %ld), waiting for due jobs", (long)getpid());
    for (;;) {
        struct pollfd p = {stop_fd, POLLIN, 0};
        if (poll(&p, 1, 0) > 0)
            break; /* EOF: the demo is over */
        dq_jobs *jobs = NULL;
        int n = dq_poll_wait(c, queue, 1, LEASE_MS, 500, &jobs);
        if (n < 0) {
            say(who, "poll failed: %s", dq_errmsg(c));
            dq_close(c);
            return 1;
        }
        if (n == 0)
            continue;
        const dq_job *j = dq_jobs_at(jobs, 0);
        const char *id = dq_job_id(j);
        int64_t attempt = dq_job_attempt(j);
        /* Server times: claimed at (deadline - lease); due at due_ms. */
        int64_t late = dq_job_lease_deadline_ms(j) - LEASE_MS - dq_job_due_ms(j);
        say(who, "got  %-18s \"%s\" attempt %" PRId64 " (%" PRId64
            " ms after due)",
            id, (const char *)dq_job_payload(j, NULL), attempt, late);
        char line[200];
        int len = snprintf(line, sizeof(line), "%s %" PRId64 " %c\n", id,
                           attempt, name);
        if (write(report_fd, line, (size_t)len) != len)
            return 1;
        if (strcmp(id, "render-report-9") == 0 && attempt == 1) {
            say(who, "CRASH while rendering report 9 (exits without ack; "
                     "the lease runs out in %.0f s)",
                (double)LEASE_MS / 1000);
            _exit(3); /* no ack, no cleanup: a real crash */
        }
        int rc = dq_ack(c, queue, id, dq_job_token(j));
        say(who, "done %-18s ack -> %s", id, rc == 0 ? "ok" : dq_errmsg(c));
        dq_jobs_free(jobs);
    }
    say(who, "stopping");
    dq_close(c);
    return 0;
}

/* ---- the demo -------------------------------------------------------------- */

struct delivery {
    char id[DQ_ID_BUF];
    long long attempt;
    char consumer;
};

int main(int argc, char **argv) {
    const char *uri = argc > 1 ? argv[1] : getenv("DELAYQ_URI");
    if (uri == NULL || uri[0] == '\0')
        uri = "redis://127.0.0.1:6379";
    setvbuf(stdout, NULL, _IOLBF, 0);
    clock_gettime(CLOCK_MONOTONIC, &t_start);
    snprintf(queue, sizeof(queue), "demo-%ld", (long)getpid());

    dq_client *c = NULL;
    int rc = dq_open(uri, NULL, &c);
    if (rc != 0) {
        fprintf(stderr, "demo: cannot connect to %s: %s\n", uri, dq_errmsg(c));
        dq_close(c);
        return 1;
    }
    printf("libdelayq %s demo on %s, queue \"%s\"\n", dq_version_string(), uri,
           queue);
    printf("(delays are shortened: 30 minutes in real life are 3 s here)\n\n");

    /* Three consumers, forked; they stop when stop[1] is closed. */
    int stop[2], report[2];
    if (pipe(stop) != 0 || pipe(report) != 0) {
        perror("demo: pipe");
        return 1;
    }
    pid_t pids[NCONSUMERS];
    for (int k = 0; k < NCONSUMERS; k++) {
        pids[k] = fork();
        if (pids[k] < 0) {
            perror("demo: fork");
            return 1;
        }
        if (pids[k] == 0) {
            dq_close(c); /* the parent's connection is not ours */
            close(stop[1]);
            close(report[0]);
            _exit(consumer(uri, (char)('A' + k), stop[0], report[1]));
        }
    }
    close(stop[0]);
    close(report[1]);

    /* Scenario 1: orders that close themselves unless paid. */
    sleep_until(0.2);
    push(c, "order service", "close-order-1042", "close order 1042", 3000, 0);
    push(c, "order service", "close-order-1043", "close order 1043", 3000, 0);
    sleep_until(0.8);
    say("order service", "order 1043 is paid");
    cancel(c, "order service", "close-order-1043");

    /* Scenario 2: log users out after a grace period. */
    sleep_until(1.0);
    push(c, "session service", "logout-user-77", "log out user 77", 4000, 0);
    push(c, "session service", "logout-user-88", "log out user 88", 4000, 0);

    /* Scenario 3: a job whose first consumer crashes. */
    sleep_until(1.5);
    push(c, "report service", "render-report-9", "render report 9", 0, 0);

    sleep_until(3.0);
    say("session service", "user 77 is active again: push the same id later");
    push(c, "session service", "logout-user-77", "log out user 77", 5000,
         DQ_PUSH_REPLACE);
    sleep_until(3.5);
    say("session service", "user 88 is back");
    cancel(c, "session service", "logout-user-88");

    /* Wait until nothing is scheduled, due or in flight (bounded). */
    int64_t s[5] = {0, 0, 0, 0, 0};
    for (;;) {
        sleep_until(since_start() + 0.25);
        if (dq_stats(c, queue, &s[0], &s[1], &s[2], &s[3], &s[4]) != 0) {
            fprintf(stderr, "demo: stats: %s\n", dq_errmsg(c));
            break;
        }
        if (since_start() > 8.5 && s[0] + s[1] + s[2] == 0)
            break;
        if (since_start() > 20.0) {
            say("demo", "giving up waiting (20 s)");
            break;
        }
    }
    close(stop[1]); /* consumers: stop */

    /* Collect what the consumers did. */
    struct delivery d[32];
    int nd = 0;
    FILE *f = fdopen(report[0], "r");
    char idbuf[DQ_ID_BUF];
    long long att;
    char who;
    while (f != NULL && nd < 32 &&
           fscanf(f, "%128s %lld %c", idbuf, &att, &who) == 3) {
        snprintf(d[nd].id, sizeof(d[nd].id), "%s", idbuf);
        d[nd].attempt = att;
        d[nd].consumer = who;
        nd++;
    }
    if (f != NULL)
        fclose(f);
    int crashed = 0;
    for (int k = 0; k < NCONSUMERS; k++) {
        int status = 0;
        waitpid(pids[k], &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
            crashed++;
    }

    /* Summary: what ran, how often, and does it match the story? */
    int ok = 1;
    printf("\nsummary\n");
    struct {
        const char *id;
        int runs;   /* deliveries expected */
        const char *why;
    } expect[] = {
        {"close-order-1042", 1, "unpaid order closed once, after 3 s"},
        {"close-order-1043", 0, "paid order: cancelled, never ran"},
        {"logout-user-77", 1, "moved later by DQ_PUSH_REPLACE, ran once"},
        {"logout-user-88", 0, "user came back: cancelled, never ran"},
        {"render-report-9", 2, "crashed at attempt 1, redelivered as attempt 2"},
    };
    for (size_t e = 0; e < sizeof(expect) / sizeof(expect[0]); e++) {
        int runs = 0;
        long long attempts[32];
        char by[64] = "";
        for (int i = 0; i < nd; i++) {
            if (strcmp(d[i].id, expect[e].id) != 0)
                continue;
            attempts[runs++] = d[i].attempt;
            size_t l = strlen(by);
            snprintf(by + l, sizeof(by) - l, "%s%c(attempt %lld)", l ? ", " : "",
                     d[i].consumer, d[i].attempt);
        }
        /* each delivery of a job carries the next attempt number */
        int good = runs == expect[e].runs;
        for (int i = 0; good && i < runs; i++)
            good = attempts[i] == i + 1;
        ok &= good;
        printf("  %-18s delivered %d time%s %-28s %s%s\n", expect[e].id, runs,
               runs == 1 ? " " : "s", by[0] ? by : "-", expect[e].why,
               good ? "" : "   <-- NOT AS EXPECTED");
    }
    printf("  consumers that crashed: %d (expected 1)\n", crashed);
    ok &= crashed == 1;
    printf("\ndq_stats(\"%s\"): scheduled %" PRId64 ", due %" PRId64
           ", in flight %" PRId64 ", dead %" PRId64 ", next due %" PRId64 "\n",
           queue, s[0], s[1], s[2], s[3], s[4]);
    ok &= s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0;
    printf("%s\n", ok ? "demo: everything happened as described"
                      : "demo: something did NOT happen as described");
    dq_close(c);
    return ok ? 0 : 1;
}
