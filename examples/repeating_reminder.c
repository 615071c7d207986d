/*
 * repeating_reminder.c - a reminder that repeats, registered idempotently
 * (sync API).
 *
 * Every instance of a service may register the same repeating job at its
 * start: the job id names the series, so a DQ_PUSH_KEEP push of an id that
 * is already registered changes nothing (DQ_KEPT) and there is never more
 * than one reminder pending or running.  When a consumer acks a run, the
 * library schedules the next one in the same atomic step.  A run that was
 * missed while no consumer ran is delivered once, late; the next run comes
 * after it.  The same with a cron schedule: DQ_PUSHOPT_CRON ("0 9 * * 1-5"
 * and DQ_PUSHOPT_TZ_OFFSET_MIN for 09:00 local on weekdays).
 *
 *   usage: repeating_reminder [URI] [EVERY_MS] [RUNS]
 *          URI defaults to $DELAYQ_URI, else redis://127.0.0.1:6379;
 *          EVERY_MS defaults to 300 for the demo (a real reminder would
 *          repeat every hour or day), RUNS to 3.
 *
 * Story: three "service instances" register the reminder (one pushed,
 * two kept); a consumer handles RUNS runs, each acked, and each next run
 * is due one interval after the last; then the reminder is cancelled,
 * which stops the series.  Exits 0 if all of that held.
 * Build: cc repeating_reminder.c $(pkg-config --cflags --libs delayq)
 */
#include <delayq.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE "reminders"
#define ID "reminder:standup"

static int die(dq_client *c, const char *what, int rc) {
    fprintf(stderr, "repeating_reminder: %s: %s (%s)\n", what,
            c ? dq_errmsg(c) : dq_strerror(rc), dq_errname(rc));
    dq_close(c);
    return 1;
}

/* What every service instance does at its start: register the series.
 * Returns the push's outcome or a negative code. */
static int register_reminder(dq_client *c, int64_t every_ms) {
    dq_push_opts *o = dq_push_opts_new();
    if (o == NULL)
        return DQ_ENOMEM;
    int rc = dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, every_ms);
    if (rc != 0) {
        fprintf(stderr, "repeating_reminder: %s\n", dq_push_opts_errmsg(o));
        dq_push_opts_free(o);
        return rc;
    }
    const char *text = "time for the stand-up";
    int outcome = 0;
    rc = dq_push_ex(c, QUEUE, text, strlen(text), every_ms, ID, DQ_PUSH_KEEP,
                    o, NULL, 0, &outcome);
    dq_push_opts_free(o);
    return rc < 0 ? rc : outcome;
}

int main(int argc, char **argv) {
    const char *uri = argc > 1 ? argv[1] : getenv("DELAYQ_URI");
    int64_t every = argc > 2 ? strtoll(argv[2], NULL, 10) : 300;
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    if (uri == NULL || *uri == '\0')
        uri = "redis://127.0.0.1:6379";
    if (every < DQ_EVERY_MIN)
        every = DQ_EVERY_MIN;
    if (runs < 1)
        runs = 1;
    dq_client *c = NULL;
    int rc = dq_open(uri, NULL, &c);
    if (rc != 0)
        return die(c, "connect", rc);
    dq_cancel(c, QUEUE, ID, DQ_CANCEL_INFLIGHT); /* a clean start */

    int pushed = 0, kept = 0;
    for (int instance = 0; instance < 3; instance++) {
        int oc = register_reminder(c, every);
        if (oc < 0)
            return die(c, "register", oc);
        printf("instance %d: %s\n", instance,
               oc == DQ_PUSHED ? "registered the reminder"
                               : "already registered: kept");
        pushed += oc == DQ_PUSHED;
        kept += oc == DQ_KEPT;
    }

    int handled = 0, ok = pushed == 1 && kept == 2;
    int64_t last_due = 0;
    for (int tries = 0; handled < runs && tries < runs * 20; tries++) {
        dq_jobs *jobs = NULL;
        rc = dq_poll_wait(c, QUEUE, 1, 30000, 2000, &jobs);
        if (rc < 0)
            return die(c, "poll", rc);
        if (rc == 0)
            continue;
        const dq_job *job = dq_jobs_at(jobs, 0);
        int64_t due = dq_job_due_ms(job);
        printf("run %d: %s (due %lld)\n", handled + 1,
               (const char *)dq_job_payload(job, NULL), (long long)due);
        /* each run's slot is a whole number of intervals after the last */
        if (last_due != 0 && (due <= last_due || (due - last_due) % every))
            ok = 0;
        last_due = due;
        rc = dq_ack(c, QUEUE, dq_job_id(job), dq_job_token(job));
        dq_jobs_free(jobs);
        if (rc < 0)
            return die(c, "ack", rc);
        handled++;
    }

    dq_job_info *in = NULL;
    if ((rc = dq_get(c, QUEUE, ID, &in)) < 0)
        return die(c, "get", rc);
    if (rc == 1) {
        printf("next run in %lld ms (%s)\n",
               (long long)(dq_job_info_due_ms(in) - dq_job_info_now_ms(in)),
               dq_job_info_repeat(in) ? dq_job_info_repeat(in) : "?");
        if (dq_job_info_repeat(in) == NULL)
            ok = 0;
    } else {
        ok = 0;
    }
    dq_job_info_free(in);
    rc = dq_cancel(c, QUEUE, ID, DQ_CANCEL_INFLIGHT);
    printf("reminder %s\n", rc > 0 ? "cancelled: the series stops"
                                   : "was not there");
    dq_close(c);
    ok = ok && handled == runs && rc > 0;
    printf("%s\n", ok ? "OK" : "FAILED");
    return ok ? 0 : 1;
}
