/*
 * order_timeout_consumer.c - close unpaid orders after a timeout, with the
 * ready-made sync consumer (delayq-consumer.h) instead of a hand-written
 * poll/ack loop.
 *
 * Same story as order_timeout.c: placing order N schedules "close order N"
 * for the end of its payment window (job id "order-N"); paying cancels it.
 * The consumer runs the handler for each timeout that comes due and acks,
 * retries (with a backoff) or dead-letters the job from the handler's
 * return value.  It sleeps until the next timeout is due and is woken early
 * by new orders; SIGINT/SIGTERM stop it gracefully (the running handler
 * finishes, claimed jobs are released for another consumer).
 *
 *   usage: order_timeout_consumer [URI] [WINDOW_MS]
 *          URI defaults to $DELAYQ_URI, else redis://127.0.0.1:6379;
 *          WINDOW_MS (payment window) defaults to 1500 for the demo.
 *
 * It places 5 orders, gets orders 2 and 4 paid, consumes until the three
 * timeouts were handled, and exits 0 if exactly orders 1, 3 and 5 were
 * closed.  Build:
 *   cc order_timeout_consumer.c $(pkg-config --cflags --libs delayq)
 */
#include <delayq-consumer.h>
#include <delayq.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define QUEUE "order-timeouts-consumer"
#define NORDERS 5

/* The shop's own state (a database in real life). */
static int paid[NORDERS + 1];
static int closed[NORDERS + 1];
static int handled; /* timeouts finished (acked or dead) */

static dq_consumer *g_consumer; /* for the signal handlers */

static void on_signal(int sig) {
    (void)sig;
    dq_consumer_interrupt(g_consumer); /* only sets a flag */
}

static int die(dq_client *c, const char *what, int rc) {
    fprintf(stderr, "order_timeout_consumer: %s: %s (%s)\n", what,
            c ? dq_errmsg(c) : dq_strerror(rc), dq_errname(rc));
    dq_close(c);
    return 1;
}

/* Order service: place an order and schedule its timeout. */
static int place_order(dq_client *c, int order, int64_t window_ms) {
    char id[32], payload[64];
    snprintf(id, sizeof(id), "order-%d", order);
    snprintf(payload, sizeof(payload), "{\"order\":%d}", order);
    int rc = dq_push(c, QUEUE, payload, strlen(payload), window_ms, id,
                     DQ_PUSH_KEEP, NULL, 0, NULL);
    if (rc == 0)
        printf("order %d placed; closes in %" PRId64 " ms unless paid\n",
               order, window_ms);
    return rc;
}

/* Order service: payment arrived, the timeout is no longer wanted. */
static int pay_order(dq_client *c, int order) {
    char id[32];
    snprintf(id, sizeof(id), "order-%d", order);
    paid[order] = 1;
    int rc = dq_cancel(c, QUEUE, id, 0);
    if (rc >= 0)
        printf("order %d paid: timeout %s\n", order,
               rc == DQ_CANCELED_PENDING ? "cancelled" : "already running");
    return rc < 0 ? rc : 0;
}

/* The handler: one timeout.  Its return value is the outcome. */
static int handle_timeout(dq_consumer *cons, const dq_job *job, void *ud) {
    (void)cons;
    (void)ud;
    int order = 0;
    const char *payload = dq_job_payload(job, NULL); /* NUL-terminated */
    if (sscanf(payload, "{\"order\":%d}", &order) != 1 || order < 1 ||
        order > NORDERS) {
        fprintf(stderr, "bad job %s: %s\n", dq_job_id(job), payload);
        return DQ_JOB_FAIL; /* retrying cannot fix it: dead set */
    }
    if (paid[order]) {
        printf("timeout of order %d: already paid, nothing to do\n", order);
    } else {
        closed[order] = 1;
        printf("timeout of order %d: unpaid, order closed (attempt %" PRId64
               ")\n", order, dq_job_attempt(job));
    }
    return DQ_JOB_OK; /* a DB error here would return DQ_JOB_RETRY */
}

/* After each job: stop once the three timeouts are done (a service would
 * run until SIGTERM). */
static void on_outcome(dq_consumer *cons, const dq_job *job, int outcome,
                       int status, void *ud) {
    (void)ud;
    if (status < 0)
        fprintf(stderr, "job %s: %s\n", dq_job_id(job),
                dq_consumer_errmsg(cons));
    if (outcome == DQ_JOB_OK || outcome == DQ_JOB_FAIL)
        handled++;
    if (handled == NORDERS - NORDERS / 2)
        dq_consumer_interrupt(cons);
}

int main(int argc, char **argv) {
    const char *uri = argc > 1 ? argv[1] : getenv("DELAYQ_URI");
    int64_t window = argc > 2 ? strtoll(argv[2], NULL, 10) : 1500;
    if (uri == NULL || *uri == '\0')
        uri = "redis://127.0.0.1:6379";
    if (window < 0)
        window = 0;

    dq_client *producer = NULL, *worker = NULL;
    int rc = dq_open(uri, NULL, &producer);
    if (rc != 0)
        return die(producer, "connect", rc);
    for (int o = 1; o <= NORDERS; o++)
        if ((rc = place_order(producer, o, window)) != 0)
            return die(producer, "push", rc);
    for (int o = 2; o <= NORDERS; o += 2)
        if ((rc = pay_order(producer, o)) != 0)
            return die(producer, "cancel", rc);
    dq_close(producer);

    /* The consumer has its own client (it blocks in dq_poll_wait). */
    if ((rc = dq_open(uri, NULL, &worker)) != 0)
        return die(worker, "connect", rc);
    dq_consumer *cons = NULL;
    if ((rc = dq_consumer_new_sync(worker, QUEUE, handle_timeout, NULL,
                                   &cons)) != 0)
        return die(worker, "consumer", rc);
    dq_consumer_set_int(cons, DQ_COPT_CONCURRENCY, 10); /* claimed per poll */
    dq_consumer_set_int(cons, DQ_COPT_LEASE_MS, 30000);
    dq_consumer_set_int(cons, DQ_COPT_MAX_ATTEMPTS, 3);
    dq_consumer_set_int(cons, DQ_COPT_RETRY_BASE_MS, 5000);
    dq_consumer_set_outcome_cb(cons, on_outcome, NULL);

    g_consumer = cons;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGALRM, on_signal);
    alarm((unsigned)(window / 1000 + 30)); /* bound for the demo */
    rc = dq_consumer_run(cons);
    alarm(0);
    printf("consumer stopped (%d claimed job(s) released)\n", rc);
    dq_consumer_free(cons);
    dq_close(worker);

    int ok = 1;
    for (int o = 1; o <= NORDERS; o++)
        ok &= closed[o] == !paid[o];
    printf("%s: orders 1, 3, 5 closed; 2, 4 paid and open\n",
           ok ? "done" : "UNEXPECTED");
    return ok ? 0 : 1;
}
