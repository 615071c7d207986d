/*
 * wake.c - wake-up subscribers of the blocking client (see wake.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wake.h"

void dq__wake_clear(dq__wake *w) {
    for (int i = 0; i < w->n; i++)
        dq__conn_free(w->conns[i]);
    free(w->conns);
    free(w->queues);
    memset(w, 0, sizeof(*w));
}

/* What a reply on a subscriber is: 1 a wake-up ("message", or "smessage"
 * in a cluster), 2 the server dropping a sharded subscription
 * ("sunsubscribe": the slot moved to another node), 0 anything else. */
static int kind_of(const dq__reply *r) {
    if (dq__reply_type(r) != DQ_R_ARRAY || dq__reply_len(r) < 1)
        return 0;
    size_t len;
    const char *kind = dq__reply_str(dq__reply_at(r, 0), &len);
    if (kind == NULL)
        return 0;
    if ((len == 7 && memcmp(kind, "message", 7) == 0) ||
        (len == 8 && memcmp(kind, "smessage", 8) == 0))
        return 1;
    if (len == 12 && memcmp(kind, "sunsubscribe", 12) == 0)
        return 2;
    return 0;
}

/* Notes what message r means for w and core. */
static int take(dq__wake *w, dq__core *core, const dq__reply *r) {
    int k = kind_of(r);
    if (k == 1 && dq__reply_len(r) >= 3) {
        size_t len, mlen;
        const char *ch = dq__reply_str(dq__reply_at(r, 1), &len);
        const char *msg = dq__reply_str(dq__reply_at(r, 2), &mlen);
        if (ch != NULL && msg != NULL)
            dq__core_wake_msg(core, ch, len, msg, mlen);
    }
    w->lost |= k == 2;
    return k;
}

/* Reads replies of conn until one that is not a pub/sub message. */
static int read_answer(dq__wake *w, dq__core *core, dq__conn *conn,
                       dq__reply **r, dq__err *err) {
    for (;;) {
        int rc = dq__conn_read(conn, r, err);
        if (rc != DQ_OK || take(w, core, *r) == 0)
            return rc;
        dq__reply_free(*r);
    }
}

/* A new subscriber, to the node that owns slot. */
static int conn_for(dq__wake *w, dq__links *links, int slot, dq__conn **out,
                    dq__err *err) {
    dq__conn *c;
    int rc = dq__links_open_new(links, slot, &c, err);
    if (rc != DQ_OK)
        return rc;
    dq__conn **a = realloc(w->conns, sizeof(*a) * (size_t)(w->n + 1));
    if (a == NULL) {
        dq__conn_free(c);
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    }
    w->conns = a;
    w->conns[w->n++] = c;
    *out = c;
    return DQ_OK;
}

/* 1 when w listens for exactly the n queues (in this order). */
static int same_queues(const dq__wake *w, size_t n,
                       const char *const *queues) {
    if (w->nq != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(w->queues[i], queues[i]) != 0)
            return 0;
    return 1;
}

int dq__wake_ensure(dq__wake *w, dq__links *links, dq__core *core, size_t n,
                    const char *const *queues, dq__err *err) {
    const char *ns = core->opts.ns ? core->opts.ns : "dq";
    const char *me = dq__core_me(core);
    /* Behind Sentinel: a failover announced, or a primary to find again,
     * leaves the subscribers on the old one. */
    int moving = dq__links_listen(links);
    int ok = w->n > 0 && !moving && dq__wake_current(w, links) &&
             w->parts == core->partitions &&
             same_queues(w, n, queues) && strcmp(w->ns, ns) == 0 &&
             strcmp(w->me, me) == 0;
    for (int i = 0; ok && i < w->n; i++)
        ok = !dq__conn_broken(w->conns[i]);
    if (ok)
        return DQ_OK;
    /* New queues, a broken link or a moved slot: fresh connections are
     * simplest and leave no stale subscription behind. */
    dq__wake_clear(w);
    int parts = core->partitions > 1 ? core->partitions : 1;
    size_t nch = n * (size_t)parts; /* channel k: queue k / parts */
    const char *cmd = core->sharded ? "SSUBSCRIBE" : "SUBSCRIBE";
    /* In a cluster each node's channels go to that node's subscriber; the
     * node of each channel is looked up once per subscription. */
    char (*where)[300] = calloc(nch, sizeof(*where));
    int *conn_of = calloc(nch, sizeof(int));
    w->queues = calloc(n, sizeof(*w->queues));
    int rc = where && conn_of && w->queues
                 ? DQ_OK
                 : dq__err_set(err, DQ_ENOMEM, "out of memory");
    for (size_t k = 0; rc == DQ_OK && k < nch; k++) {
        int p = (int)(k % (size_t)parts);
        dq__core_keys_part(core, queues[k / (size_t)parts], parts > 1 ? p : -1);
        int slot = core->keys.slot;
        snprintf(where[k], sizeof(where[k]), "%s",
                 dq__links_where(links, slot));
        int found = -1;
        for (size_t q = 0; q < k && found < 0; q++)
            if (strcmp(where[q], where[k]) == 0 || !dq__links_cluster(links))
                found = conn_of[q];
        dq__conn *c = NULL;
        if (found >= 0) {
            c = w->conns[found];
            conn_of[k] = found;
        } else if ((rc = conn_for(w, links, slot, &c, err)) == DQ_OK) {
            conn_of[k] = w->n - 1;
            /* the address may only be known once the map is loaded */
            snprintf(where[k], sizeof(where[k]), "%s",
                     dq__links_where(links, slot));
        }
        if (rc == DQ_OK) {
            /* this consumer's own channel of the partition (see
             * lua/include/wake.lua) */
            char chan[sizeof(core->keys.chan) + DQ_GEN_ID_LEN + 2];
            snprintf(chan, sizeof(chan), "%s:%s", core->keys.chan, me);
            const char *argv[2] = {cmd, chan};
            rc = dq__conn_append(c, 2, argv, NULL, err);
        }
    }
    /* One confirmation per channel, on the subscriber it went to. */
    for (size_t k = 0; rc == DQ_OK && k < nch; k++) {
        dq__reply *r;
        rc = read_answer(w, core, w->conns[conn_of[k]], &r, err);
        if (rc == DQ_OK && dq__reply_type(r) == DQ_R_ERROR) {
            rc = dq__reply_error(r, cmd, err);
            if (dq__links_routed(links))
                dq__links_stale(links); /* MOVED: the map is out of date */
        }
        dq__reply_free(r);
    }
    free(where);
    free(conn_of);
    if (rc != DQ_OK) {
        dq__wake_clear(w);
        return rc;
    }
    for (size_t i = 0; i < n; i++)
        snprintf(w->queues[i], sizeof(w->queues[i]), "%s", queues[i]);
    w->nq = n;
    snprintf(w->ns, sizeof(w->ns), "%s", ns);
    snprintf(w->me, sizeof(w->me), "%s", me);
    w->parts = core->partitions;
    w->lost = 0;
    w->epoch = dq__links_epoch(links);
    w->alive_us = dq__mono_us();
    /* Wake-ups may have been missed while nobody listened: every partition
     * of every queue is worth a look again. */
    for (size_t i = 0; i < n; i++)
        dq__core_woken_all(core, queues[i]);
    return DQ_OK;
}

int dq__wake_drain(dq__wake *w, dq__core *core) {
    int n = 0;
    dq__err e;
    for (int i = 0; i < w->n; i++) {
        dq__reply *r;
        while (dq__conn_buffered(w->conns[i], &r, &e) == 1) {
            take(w, core, r);
            dq__reply_free(r);
            n++;
        }
    }
    return n;
}

int dq__wake_current(const dq__wake *w, const dq__links *links) {
    return !w->lost && w->epoch == dq__links_epoch(links);
}

int dq__wake_wait(dq__wake *w, dq__links *links, int64_t timeout_us,
                  dq__err *err) {
    dq__conn *sub = dq__links_sentinel_sub(links);
    if (sub == NULL) {
        int which = 0;
        int rc = dq__conn_wait_any(w->conns, w->n, timeout_us, &which, err);
        if (rc < 0)
            w->lost = 1;
        return rc;
    }
    /* The wake-up links and, last, the Sentinel's subscriber. */
    dq__conn *small[9];
    dq__conn **cs =
        w->n < 9 ? small : malloc(sizeof(*cs) * (size_t)(w->n + 1));
    if (cs == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    for (int i = 0; i < w->n; i++)
        cs[i] = w->conns[i];
    cs[w->n] = sub;
    int which = 0;
    dq__err e;
    int rc = dq__conn_wait_any(cs, w->n + 1, timeout_us, &which, &e);
    if (cs != small)
        free(cs);
    if (rc != 0 && which == w->n) {
        /* The Sentinel spoke (or its link failed: reopened on demand). */
        if (dq__links_listen(links))
            w->lost = 1;
        return 1;
    }
    if (rc < 0) {
        w->lost = 1;
        if (err != NULL)
            *err = e;
    }
    return rc;
}

int dq__wake_ping(dq__wake *w, dq__core *core, dq__err *err) {
    const char *argv[1] = {"PING"};
    int rc = DQ_OK;
    for (int i = 0; rc == DQ_OK && i < w->n; i++) {
        dq__reply *r;
        rc = dq__conn_append(w->conns[i], 1, argv, NULL, err);
        if (rc == DQ_OK)
            rc = read_answer(w, core, w->conns[i], &r, err);
        if (rc == DQ_OK)
            dq__reply_free(r);
    }
    if (rc != DQ_OK)
        w->lost = 1;
    else
        w->alive_us = dq__mono_us();
    return rc;
}
