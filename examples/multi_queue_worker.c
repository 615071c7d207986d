/*
 * multi_queue_worker.c - one worker serving two queues with weights: the
 * sync consumer (delayq-consumer.h) over "emails-urgent" (weight 3) and
 * "emails-bulk" (weight 1).
 *
 * While both queues have due jobs, about three claims in four go to the
 * urgent queue, and the bulk queue is never starved (DQ_PRIO_WEIGHTED; set
 * DQ_COPT_PRIORITY to DQ_PRIO_STRICT to serve the urgent queue whenever
 * it has anything).  The worker waits for both with one wake-up
 * connection and polls an idle queue only when told of due work or once
 * per idle cap.  The handler asks dq_consumer_job_queue which queue a job
 * came from; the consumer acks each job on its own queue.
 *
 *   usage: multi_queue_worker [URI]
 *          URI defaults to $DELAYQ_URI, else redis://127.0.0.1:6379.
 *
 * It pushes 40 jobs to each queue, handles 40 of them, prints how many
 * came from each queue, releases the claimed rest at the stop and purges
 * both queues' leftovers, then exits 0 if the urgent queue got most of
 * the 40.  Build:
 *   cc multi_queue_worker.c $(pkg-config --cflags --libs delayq)
 */
#include <delayq-consumer.h>
#include <delayq.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define URGENT "emails-urgent"
#define BULK "emails-bulk"
#define PER_QUEUE 40
#define HANDLE 40

static int from_urgent, from_bulk;
static dq_consumer *g_consumer; /* for the signal handlers */

static void on_signal(int sig) {
    (void)sig;
    dq_consumer_interrupt(g_consumer); /* only sets a flag */
}

/* Sends one email (here: counts it), whichever queue it came from. */
static int send_email(dq_consumer *c, const dq_job *job, void *userdata) {
    (void)userdata;
    const char *queue = dq_consumer_job_queue(c, job);
    if (queue != NULL && strcmp(queue, URGENT) == 0)
        from_urgent++;
    else
        from_bulk++;
    if (from_urgent + from_bulk == HANDLE)
        dq_consumer_interrupt(c); /* enough for the demo */
    return DQ_JOB_OK;
}

static int fail(dq_client *c, const char *what, int rc) {
    fprintf(stderr, "multi_queue_worker: %s: %s (%s)\n", what,
            c ? dq_errmsg(c) : dq_strerror(rc), dq_errname(rc));
    dq_close(c);
    return 1;
}

/* Cancels every pending job of queue (a clean slate for the next run). */
static void clear_queue(dq_client *c, const char *queue, const char *p) {
    for (int i = 0; i < PER_QUEUE; i++) {
        char id[32];
        snprintf(id, sizeof(id), "%s-%d", p, i);
        dq_cancel(c, queue, id, DQ_CANCEL_INFLIGHT);
    }
}

int main(int argc, char **argv) {
    const char *uri = argc > 1 ? argv[1] : getenv("DELAYQ_URI");
    if (uri == NULL || *uri == '\0')
        uri = "redis://127.0.0.1:6379";
    dq_client *c = NULL;
    int rc = dq_open(uri, NULL, &c);
    if (rc != 0)
        return fail(c, "open", rc);
    clear_queue(c, URGENT, "u");
    clear_queue(c, BULK, "b");
    /* Producers: both queues get work due now. */
    for (int i = 0; i < PER_QUEUE; i++) {
        char id[32];
        snprintf(id, sizeof(id), "u-%d", i);
        if ((rc = dq_push(c, URGENT, "urgent", 6, 0, id, 0, NULL, 0, NULL)))
            return fail(c, "push", rc);
        snprintf(id, sizeof(id), "b-%d", i);
        if ((rc = dq_push(c, BULK, "bulk", 4, 0, id, 0, NULL, 0, NULL)))
            return fail(c, "push", rc);
    }
    /* The worker: the first queue at creation (weight 1), then weights. */
    rc = dq_consumer_new_sync(c, URGENT, send_email, NULL, &g_consumer);
    if (rc == 0)
        rc = dq_consumer_add_queue(g_consumer, BULK, 1) < 0 ? -1 : 0;
    if (rc == 0)
        rc = dq_consumer_add_queue(g_consumer, URGENT, 3) < 0 ? -1 : 0;
    if (rc == 0)
        rc = dq_consumer_set_int(g_consumer, DQ_COPT_PRIORITY,
                                 DQ_PRIO_WEIGHTED);
    if (rc != 0) {
        fprintf(stderr, "multi_queue_worker: consumer: %s\n",
                g_consumer ? dq_consumer_errmsg(g_consumer) : "");
        dq_consumer_free(g_consumer);
        dq_close(c);
        return 1;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int released = dq_consumer_run(g_consumer);
    dq_consumer_free(g_consumer);
    printf("handled %d: %d urgent, %d bulk (%d released at the stop)\n",
           from_urgent + from_bulk, from_urgent, from_bulk, released);
    clear_queue(c, URGENT, "u");
    clear_queue(c, BULK, "b");
    dq_close(c);
    return from_urgent > from_bulk ? 0 : 1;
}
