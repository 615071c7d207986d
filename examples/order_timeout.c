/*
 * order_timeout.c - close unpaid orders after a timeout (sync API).
 *
 * The classic delayed job: when an order is placed, schedule "close order
 * N" to run when its payment window ends.  When the order is paid first,
 * cancel that job.  A consumer loop closes the orders whose job came due.
 *
 * The job id is derived from the order ("order-42"), so the order service
 * needs no bookkeeping to cancel it, and a retried push (after a timeout,
 * say) keeps the job it already created instead of adding a second one.
 *
 *   usage: order_timeout [URI] [WINDOW_MS]
 *          URI defaults to $DELAYQ_URI, else redis://127.0.0.1:6379;
 *          WINDOW_MS (payment window) defaults to 1500 for the demo
 *          (a real shop would use 15-30 minutes).
 *
 * It places 5 orders, gets orders 2 and 4 paid, then consumes until every
 * timeout has been handled, and exits 0 if exactly orders 1, 3 and 5 were
 * closed.  Build: cc order_timeout.c $(pkg-config --cflags --libs delayq)
 */
#include <delayq.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QUEUE "order-timeouts"
#define NORDERS 5

/* The shop's own state (a database in real life). */
static int paid[NORDERS + 1];
static int closed[NORDERS + 1];

static int die(dq_client *c, const char *what, int rc) {
    fprintf(stderr, "order_timeout: %s: %s (%s)\n", what,
            c ? dq_errmsg(c) : dq_strerror(rc), dq_errname(rc));
    dq_close(c);
    return 1;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Order service: place an order and schedule its timeout. */
static int place_order(dq_client *c, int order, int64_t window_ms) {
    char id[32], payload[64];
    snprintf(id, sizeof(id), "order-%d", order);
    snprintf(payload, sizeof(payload), "{\"order\":%d}", order);
    int outcome;
    int rc = dq_push(c, QUEUE, payload, strlen(payload), window_ms, id,
                     DQ_PUSH_KEEP, NULL, 0, &outcome);
    if (rc == 0)
        printf("order %d placed; closes in %" PRId64 " ms unless paid (%s)\n",
               order, window_ms, outcome == DQ_PUSHED ? "new" : "existing");
    return rc;
}

/* Order service: payment arrived, the timeout is no longer wanted. */
static int pay_order(dq_client *c, int order) {
    char id[32];
    snprintf(id, sizeof(id), "order-%d", order);
    paid[order] = 1;
    int rc = dq_cancel(c, QUEUE, id, 0);
    if (rc < 0)
        return rc;
    if (rc == DQ_CANCELED_PENDING)
        printf("order %d paid: timeout cancelled\n", order);
    else if (rc == DQ_CANCEL_BUSY)
        /* The timeout is being handled right now: the handler sees the
         * order paid and leaves it open. */
        printf("order %d paid while its timeout runs\n", order);
    else
        printf("order %d paid, no pending timeout\n", order);
    return 0;
}

/* Consumer: the handler of one timeout.  Returns 0 when done. */
static int handle_timeout(const dq_job *job) {
    int order = 0;
    size_t len;
    const char *payload = dq_job_payload(job, &len); /* NUL-terminated */
    if (sscanf(payload, "{\"order\":%d}", &order) != 1 || order < 1 ||
        order > NORDERS) {
        fprintf(stderr, "bad job %s: %s\n", dq_job_id(job), payload);
        return -1;
    }
    if (paid[order]) {
        printf("timeout of order %d: already paid, nothing to do\n", order);
    } else {
        closed[order] = 1;
        printf("timeout of order %d: unpaid, order closed (attempt %" PRId64
               ")\n", order, dq_job_attempt(job));
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *uri = argc > 1 ? argv[1] : getenv("DELAYQ_URI");
    int64_t window = argc > 2 ? strtoll(argv[2], NULL, 10) : 1500;
    if (uri == NULL || *uri == '\0')
        uri = "redis://127.0.0.1:6379";
    if (window < 0)
        window = 0;

    /* A job delivered 3 times without an ack goes to the dead set for an
     * operator to look at (`delayq list dead`), instead of looping. */
    dq_options *opts = dq_options_new();
    if (opts == NULL)
        return die(NULL, "options", DQ_ENOMEM);
    dq_options_set_int(opts, DQ_OPT_MAX_ATTEMPTS, 3);
    dq_client *c = NULL;
    int rc = dq_open(uri, opts, &c);
    dq_options_free(opts);
    if (rc != 0)
        return die(c, "connect", rc);

    for (int o = 1; o <= NORDERS; o++)
        if ((rc = place_order(c, o, window)) != 0)
            return die(c, "push", rc);
    for (int o = 2; o <= NORDERS; o += 2)
        if ((rc = pay_order(c, o)) != 0)
            return die(c, "cancel", rc);

    /* Consumer loop: wait for due timeouts (no busy polling), handle them
     * under a 30 s lease, ack.  Stops when nothing is left in the queue,
     * or after a bound for the demo. */
    int64_t give_up = now_ms() + window + 30000;
    while (now_ms() < give_up) {
        dq_jobs *jobs = NULL;
        rc = dq_poll_wait(c, QUEUE, 10, 30000, 1000, &jobs);
        if (rc < 0)
            return die(c, "poll", rc);
        for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
            const dq_job *job = dq_jobs_at(jobs, i);
            if (handle_timeout(job) == 0)
                rc = dq_ack(c, QUEUE, dq_job_id(job), dq_job_token(job));
            else /* retry in 5 s; dead after 3 attempts */
                rc = dq_nack(c, QUEUE, dq_job_id(job), dq_job_token(job),
                             5000, 0);
            if (rc < 0 && rc != DQ_ESTALE) {
                dq_jobs_free(jobs);
                return die(c, "ack", rc);
            }
        }
        dq_jobs_free(jobs);
        int64_t scheduled, due, inflight;
        if ((rc = dq_stats(c, QUEUE, &scheduled, &due, &inflight, NULL,
                           NULL)) != 0)
            return die(c, "stats", rc);
        if (scheduled + due + inflight == 0)
            break;
    }
    dq_close(c);

    int ok = 1;
    for (int o = 1; o <= NORDERS; o++)
        ok &= closed[o] == !paid[o];
    printf("%s: orders 1, 3, 5 closed; 2, 4 paid and open\n",
           ok ? "done" : "UNEXPECTED");
    return ok ? 0 : 1;
}
