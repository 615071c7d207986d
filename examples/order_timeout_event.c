/*
 * order_timeout_event.c - close unpaid orders after a timeout, on a
 * libevent loop (delayq-event.h): the order service and the consumer share
 * one event_base and never block.
 *
 * Same story as order_timeout.c: placing order N schedules "close order N"
 * for the end of its payment window (job id "order-N"); paying cancels it.
 * Here every call returns at once and reports through a callback:
 *
 *   place 5 orders (5 pushes, pipelined) -> all placed -> pay 2 and 4
 *   (2 cancels) -> both paid -> the consumer starts -> each timeout is
 *   handled asynchronously (a 20 ms "database write" on a libevent timer,
 *   then dq_consumer_done) -> all handled -> graceful stop -> loop exits.
 *
 * The consumer sleeps until the next timeout is due (the server says when)
 * and is woken early through a second connection when an earlier one is
 * pushed; it renews the lease of a running handler and retries failures
 * with a backoff.  SIGINT/SIGTERM stop it gracefully.
 *
 *   usage: order_timeout_event [URI] [WINDOW_MS]
 *          URI defaults to $DELAYQ_URI, else redis://127.0.0.1:6379;
 *          WINDOW_MS (payment window) defaults to 1500 for the demo.
 *
 * Exits 0 if exactly orders 1, 3 and 5 were closed.  Build:
 *   cc order_timeout_event.c $(pkg-config --cflags --libs delayq-event)
 */
#include <delayq-event.h>

#include <event2/event.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE "order-timeouts-event"
#define NORDERS 5

/* The shop's own state (a database in real life). */
static int paid[NORDERS + 1];
static int closed[NORDERS + 1];

static struct event_base *base;
static dq_async *client;
static dq_consumer *consumer;
static int64_t window = 1500;
static int placed, payments, handled, failed;

static void fail(const char *what, int status) {
    fprintf(stderr, "order_timeout_event: %s: %s (%s)\n", what,
            dq_async_errmsg(client), dq_errname(status));
    failed = 1;
    event_base_loopbreak(base);
}

static void on_state(dq_async *a, int state, int status, const char *reason,
                     void *ud) {
    (void)a;
    (void)ud;
    if (state == DQ_CONNECTED)
        printf("connected to Redis\n");
    else
        printf("Redis unavailable (%s: %s); reconnecting\n",
               dq_errname(status), reason);
}

/* ---- the consumer ---- */

typedef struct closing {
    const dq_job *job;  /* valid until dq_consumer_done */
    int order;
    struct event *ev;
} closing;

/* The "database write" finished: report the outcome. */
static void order_closed(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    closing *cl = arg;
    closed[cl->order] = 1;
    printf("timeout of order %d: unpaid, order closed (attempt %" PRId64
           ")\n", cl->order, dq_job_attempt(cl->job));
    dq_consumer_done(consumer, cl->job, DQ_JOB_OK, -1);
    event_free(cl->ev);
    free(cl);
}

/* The handler: called when a timeout is due. */
static int handle_timeout(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    (void)ud;
    int order = 0;
    const char *payload = dq_job_payload(job, NULL);
    if (sscanf(payload, "{\"order\":%d}", &order) != 1 || order < 1 ||
        order > NORDERS)
        return DQ_JOB_FAIL; /* cannot be fixed by retrying */
    if (paid[order]) {
        printf("timeout of order %d: already paid, nothing to do\n", order);
        return DQ_JOB_OK;
    }
    closing *cl = calloc(1, sizeof(*cl));
    if (cl == NULL)
        return DQ_JOB_RETRY; /* try again after the backoff */
    cl->job = job;
    cl->order = order;
    cl->ev = evtimer_new(base, order_closed, cl);
    struct timeval tv = {0, 20000};
    evtimer_add(cl->ev, &tv);
    return DQ_JOB_ASYNC; /* order_closed() finishes it */
}

static void on_stopped(dq_consumer *c, int released, void *ud) {
    (void)ud;
    printf("consumer stopped (%d job(s) released)\n", released);
    dq_consumer_free(c);
    consumer = NULL;
    event_base_loopbreak(base);
}

static void on_outcome(dq_consumer *c, const dq_job *job, int outcome,
                       int status, void *ud) {
    (void)ud;
    if (status < 0)
        fprintf(stderr, "job %s: %s\n", dq_job_id(job), dq_consumer_errmsg(c));
    if (outcome == DQ_JOB_OK || outcome == DQ_JOB_FAIL)
        handled++;
    if (handled == NORDERS - NORDERS / 2) /* a service runs until SIGTERM */
        dq_consumer_stop(c, 5000, on_stopped, NULL);
}

static void on_signal(evutil_socket_t sig, short what, void *arg) {
    (void)sig;
    (void)what;
    (void)arg;
    if (consumer == NULL || dq_consumer_stop(consumer, 5000, on_stopped,
                                             NULL) != 0)
        event_base_loopbreak(base);
}

static void start_consumer(void) {
    int rc = dq_consumer_new(client, QUEUE, handle_timeout, NULL, &consumer);
    if (rc != 0) {
        fail("consumer", rc);
        return;
    }
    dq_consumer_set_int(consumer, DQ_COPT_CONCURRENCY, 16);
    dq_consumer_set_int(consumer, DQ_COPT_LEASE_MS, 30000);
    dq_consumer_set_int(consumer, DQ_COPT_MAX_ATTEMPTS, 3);
    dq_consumer_set_outcome_cb(consumer, on_outcome, NULL);
    if ((rc = dq_consumer_start(consumer)) != 0)
        fail("consumer start", rc);
}

/* ---- the order service ---- */

static void on_paid(dq_async *a, int status, void *ud) {
    (void)a;
    int order = (int)(intptr_t)ud;
    if (status < 0) {
        fail("cancel", status);
        return;
    }
    printf("order %d paid: timeout %s\n", order,
           status == DQ_CANCELED_PENDING ? "cancelled" : "already running");
    if (++payments == NORDERS / 2)
        start_consumer();
}

static void pay_order(int order) {
    char id[32];
    snprintf(id, sizeof(id), "order-%d", order);
    paid[order] = 1;
    int rc = dq_async_cancel(client, QUEUE, id, 0, on_paid,
                             (void *)(intptr_t)order);
    if (rc != 0)
        fail("cancel", rc);
}

static void on_placed(dq_async *a, const char *id, int outcome, int status,
                      void *ud) {
    (void)a;
    (void)outcome;
    (void)ud;
    if (status < 0) {
        fail("push", status);
        return;
    }
    printf("%s placed; closes in %" PRId64 " ms unless paid\n", id, window);
    if (++placed == NORDERS)
        for (int o = 2; o <= NORDERS; o += 2)
            pay_order(o);
}

static void place_order(int order) {
    char id[32], payload[64];
    snprintf(id, sizeof(id), "order-%d", order);
    snprintf(payload, sizeof(payload), "{\"order\":%d}", order);
    /* The id and payload are copied before the call returns. */
    int rc = dq_async_push(client, QUEUE, payload, strlen(payload), window,
                           id, DQ_PUSH_KEEP, on_placed, NULL);
    if (rc != 0)
        fail("push", rc);
}

static void give_up(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    (void)arg;
    fprintf(stderr, "order_timeout_event: gave up waiting\n");
    failed = 1;
    event_base_loopbreak(base);
}

int main(int argc, char **argv) {
    const char *uri = argc > 1 ? argv[1] : getenv("DELAYQ_URI");
    if (argc > 2)
        window = strtoll(argv[2], NULL, 10);
    if (uri == NULL || *uri == '\0')
        uri = "redis://127.0.0.1:6379";
    if (window < 0)
        window = 0;

    base = event_base_new();
    if (base == NULL)
        return 1;
    int rc = dq_async_open(base, uri, NULL, &client);
    if (rc != 0) {
        fprintf(stderr, "order_timeout_event: %s\n", dq_async_errmsg(client));
        dq_async_free(client);
        event_base_free(base);
        return 1;
    }
    dq_async_set_state_cb(client, on_state, NULL);
    for (int o = 1; o <= NORDERS; o++)
        place_order(o); /* sent as soon as the connection is up */

    struct event *sigint = evsignal_new(base, SIGINT, on_signal, NULL);
    struct event *sigterm = evsignal_new(base, SIGTERM, on_signal, NULL);
    struct event *bound = evtimer_new(base, give_up, NULL);
    struct timeval tv = {(time_t)(window / 1000 + 30), 0};
    evsignal_add(sigint, NULL);
    evsignal_add(sigterm, NULL);
    evtimer_add(bound, &tv);

    event_base_dispatch(base);

    event_free(sigint);
    event_free(sigterm);
    event_free(bound);
    dq_async_free(client); /* also frees a consumer still running */
    event_base_free(base);

    int ok = !failed;
    for (int o = 1; o <= NORDERS; o++)
        ok &= closed[o] == !paid[o];
    printf("%s: orders 1, 3, 5 closed; 2, 4 paid and open\n",
           ok ? "done" : "UNEXPECTED");
    return ok ? 0 : 1;
}
