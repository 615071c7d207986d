/*
 * delayed_logout.c - log a user out only after a grace period (sync API).
 *
 * When a user's last connection drops (tab closed, phone in a tunnel), do
 * not end the session at once: schedule "log out alice" after a grace
 * period.  If she comes back in time, cancel it.  If she shows activity on
 * another device meanwhile, push again with DQ_PUSH_REPLACE: the same job
 * id is rescheduled, so the grace period restarts (and there is never more
 * than one pending logout per user).
 *
 *   usage: delayed_logout [URI] [GRACE_MS]
 *          URI defaults to $DELAYQ_URI, else redis://127.0.0.1:6379;
 *          GRACE_MS defaults to 600 for the demo (a real service would use
 *          minutes).
 *
 * Story: alice drops and comes back (cancelled: stays logged in); bob drops,
 * then his other device is active (postponed), then he drops for good
 * (logged out, once); carol drops (logged out).  Exits 0 if exactly bob and
 * carol were logged out.
 * Build: cc delayed_logout.c $(pkg-config --cflags --libs delayq)
 */
#include <delayq.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QUEUE "session-logouts"

static const char *const users[] = {"alice", "bob", "carol"};
static int logged_out[3];

static int die(dq_client *c, const char *what, int rc) {
    fprintf(stderr, "delayed_logout: %s: %s (%s)\n", what,
            c ? dq_errmsg(c) : dq_strerror(rc), dq_errname(rc));
    dq_close(c);
    return 1;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One pending logout per user: the job id is the user's. */
static void logout_id(const char *user, char *id, size_t n) {
    snprintf(id, n, "logout:%s", user);
}

/* The user's last connection dropped (or, with replace, the user was
 * active again elsewhere): (re)start the grace period. */
static int disconnected(dq_client *c, const char *user, int64_t grace,
                        int replace) {
    char id[64];
    int outcome;
    logout_id(user, id, sizeof(id));
    int rc = dq_push(c, QUEUE, user, strlen(user), grace, id,
                     replace ? DQ_PUSH_REPLACE : DQ_PUSH_KEEP, NULL, 0,
                     &outcome);
    if (rc == 0)
        printf("%s: %s, logout in %lld ms (%s)\n", user,
               replace ? "active elsewhere" : "disconnected",
               (long long)grace,
               outcome == DQ_REPLACED ? "grace period restarted"
               : outcome == DQ_KEPT   ? "one was already pending: kept"
                                      : "scheduled");
    return rc;
}

/* The user is back: the pending logout is no longer wanted. */
static int reconnected(dq_client *c, const char *user) {
    char id[64];
    logout_id(user, id, sizeof(id));
    int rc = dq_cancel(c, QUEUE, id, 0);
    if (rc < 0)
        return rc;
    printf("%s: reconnected, %s\n", user,
           rc == DQ_CANCELED_PENDING ? "logout cancelled"
           : rc == DQ_CANCEL_BUSY    ? "too late: logout running"
                                     : "no logout pending");
    return 0;
}

/* Handles the logouts that came due within wait_ms.  Returns the number
 * handled or a negative code. */
static int run_logouts(dq_client *c, int64_t wait_ms) {
    dq_jobs *jobs = NULL;
    int rc = dq_poll_wait(c, QUEUE, 10, 10000, wait_ms, &jobs);
    if (rc <= 0)
        return rc;
    for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
        const dq_job *job = dq_jobs_at(jobs, i);
        const char *user = dq_job_payload(job, NULL); /* NUL-terminated */
        for (int u = 0; u < 3; u++)
            if (strcmp(user, users[u]) == 0) {
                logged_out[u]++;
                printf("%s: grace period over, session ended\n", user);
            }
        int a = dq_ack(c, QUEUE, dq_job_id(job), dq_job_token(job));
        if (a < 0 && a != DQ_ESTALE && a != DQ_ENOTFOUND) {
            dq_jobs_free(jobs);
            return a;
        }
    }
    dq_jobs_free(jobs);
    return rc;
}

int main(int argc, char **argv) {
    const char *uri = argc > 1 ? argv[1] : getenv("DELAYQ_URI");
    int64_t grace = argc > 2 ? strtoll(argv[2], NULL, 10) : 600;
    if (uri == NULL || *uri == '\0')
        uri = "redis://127.0.0.1:6379";
    if (grace < 100)
        grace = 100;
    dq_client *c = NULL;
    int rc = dq_open(uri, NULL, &c);
    if (rc != 0)
        return die(c, "connect", rc);

    if ((rc = disconnected(c, "alice", grace, 0)) ||
        (rc = disconnected(c, "bob", grace, 0)) ||
        (rc = disconnected(c, "carol", grace, 0)))
        return die(c, "push", rc);
    sleep_ms(grace / 2);
    if ((rc = reconnected(c, "alice")) ||
        (rc = disconnected(c, "bob", grace, 1))) /* restarts bob's grace */
        return die(c, "push/cancel", rc);

    /* Handle logouts as they come due; when bob's first deadline passes he
     * must still be logged in. */
    int64_t until = now_ms() + grace / 2 + grace / 4;
    for (int64_t left; (left = until - now_ms()) > 0;)
        if ((rc = run_logouts(c, left)) < 0)
            return die(c, "poll", rc);
    printf("bob after his first deadline: %s\n",
           logged_out[1] ? "logged out (UNEXPECTED)" : "still logged in");
    /* Bob now drops for good: a KEEP push leaves the pending job alone. */
    if ((rc = disconnected(c, "bob", grace, 0)))
        return die(c, "push", rc);

    int64_t give_up = now_ms() + grace * 4 + 30000;
    while (now_ms() < give_up) {
        if ((rc = run_logouts(c, 500)) < 0)
            return die(c, "poll", rc);
        int64_t scheduled, due, inflight;
        if ((rc = dq_stats(c, QUEUE, &scheduled, &due, &inflight, NULL,
                           NULL)) != 0)
            return die(c, "stats", rc);
        if (scheduled + due + inflight == 0)
            break;
    }
    dq_close(c);
    int ok = logged_out[0] == 0 && logged_out[1] == 1 && logged_out[2] == 1;
    printf("%s: alice logged in; bob and carol logged out once each\n",
           ok ? "done" : "UNEXPECTED");
    return ok ? 0 : 1;
}
