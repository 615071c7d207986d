/*
 * alink.c - one connection of the async client that reconnects by itself
 * (see alink.h).  Every entry from the loop (timers, state changes) runs
 * between the host's enter and leave, like the rest of the async client.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "alink.h"
#include "resp.h"

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 2000

/* ---- Link mechanics ---- */

/* us microseconds as a timeval (negative: 0). */
static struct timeval tv_us(int64_t us) {
    struct timeval tv;
    if (us < 0)
        us = 0;
    tv.tv_sec = (time_t)(us / 1000000);
    tv.tv_usec = (suseconds_t)(us % 1000000);
    return tv;
}

void dq__alink_arm(struct event *ev, int64_t us) {
    struct timeval tv = tv_us(us);
    evtimer_add(ev, &tv);
}

static int64_t cmd_timeout_us(const dq__alink *l) {
    return l->h->opts->command_timeout_ms * 1000;
}

/* "host:port" or "unix:path" of u into l->where. */
static void set_where(dq__alink *l, const dq__uri *u) {
    if (u == NULL)
        snprintf(l->where, sizeof(l->where), "?");
    else if (u->kind == DQ_URI_UNIX)
        snprintf(l->where, sizeof(l->where), "unix:%s", u->path);
    else
        snprintf(l->where, sizeof(l->where), "%s:%d", u->host, u->port);
}

void dq__alink_fail(dq__alink *l, int code, const char *msg) {
    int was_up = l->state == DQ_AL_UP;
    dq__aconn_close(l->conn);
    l->conn = NULL;
    l->pending = 0;
    l->doomed = 0;
    evtimer_del(l->tick_ev);
    l->state = DQ_AL_WAIT;
    dq__alink_arm(l->retry_ev, l->backoff_ms * 1000);
    l->backoff_ms = l->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                       : l->backoff_ms * 2;
    l->down(l, code, msg, was_up);
}

/* The connection's state: ready means up (backoff reset, owner told);
 * anything else fails the link. */
static void link_on_state(void *priv, int code, const char *msg) {
    dq__alink *l = priv;
    const dq__ahost *h = l->h;
    h->enter(h->ud);
    if (code == DQ_OK) {
        l->state = DQ_AL_UP;
        if (!l->keep_backoff)
            l->backoff_ms = BACKOFF_MIN_MS;
        l->pending = 0;
        l->last_us = dq__mono_us();
        evtimer_del(l->tick_ev);
        l->up(l);
    } else {
        dq__alink_fail(l, code, msg);
    }
    h->leave(h->ud);
}

/* The retry timer: opens a new connection (unless the owner parks the
 * link), bounded by the connect timeout. */
static void link_on_retry(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dq__alink *l = arg;
    const dq__ahost *h = l->h;
    h->enter(h->ud);
    if (l->target != NULL && !l->target(l)) {
        l->state = DQ_AL_IDLE;
        h->leave(h->ud);
        return;
    }
    dq__conn_cfg cfg = {l->uri, l->opts, h->dns(h->ud, l->uri)};
    dq__err e;
    int rc = dq__aconn_open(&cfg, h->base, link_on_state, l,
                            &l->conn, &e);
    if (rc != DQ_OK) {
        dq__alink_fail(l, rc, e.msg);
    } else {
        l->state = DQ_AL_CONNECTING;
        int64_t ct = h->opts->connect_timeout_ms * 1000;
        if (ct > 0) {
            l->connect_deadline_us = dq__mono_us() + ct;
            dq__alink_arm(l->tick_ev, ct);
        }
    }
    h->leave(h->ud);
}

/* The link's one timer: fails a connection not ready by its deadline, one
 * whose replies are later than the command timeout, or one found closed
 * by the server; else re-arms. */
static void link_on_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dq__alink *l = arg;
    const dq__ahost *h = l->h;
    const dq_options *o = h->opts;
    char msg[400];
    h->enter(h->ud);
    int64_t now = dq__mono_us();
    if (l->state == DQ_AL_CONNECTING) {
        if (now >= l->connect_deadline_us) {
            snprintf(msg, sizeof(msg),
                     "connect to %s: not ready within %" PRId64
                     " ms (DQ_OPT_CONNECT_TIMEOUT_MS)",
                     l->where, o->connect_timeout_ms);
            dq__alink_fail(l, DQ_ETIMEDOUT, msg);
        } else {
            dq__alink_arm(l->tick_ev, l->connect_deadline_us - now);
        }
    } else if (l->state == DQ_AL_UP && l->doomed) {
        snprintf(msg, sizeof(msg), "connection to %s lost: closed by the server",
                 l->where);
        dq__alink_fail(l, DQ_EIO, msg);
    } else if (l->state == DQ_AL_UP && l->pending > 0 && cmd_timeout_us(l) > 0) {
        int64_t due = l->last_us + cmd_timeout_us(l);
        if (now >= due) {
            snprintf(msg, sizeof(msg),
                     "%s did not answer within %" PRId64
                     " ms (DQ_OPT_COMMAND_TIMEOUT_MS): connection dropped",
                     l->where, o->command_timeout_ms);
            dq__alink_fail(l, DQ_ETIMEDOUT, msg);
        } else {
            dq__alink_arm(l->tick_ev, due - now);
        }
    }
    h->leave(h->ud);
}

int dq__alink_init(dq__alink *l, const dq__ahost *h, void *owner,
                   const dq__uri *uri, const dq_options *opts,
                   void (*up)(dq__alink *),
                   void (*down)(dq__alink *, int, const char *, int)) {
    memset(l, 0, sizeof(*l));
    l->h = h;
    l->owner = owner;
    l->uri = uri;
    l->opts = opts;
    l->up = up;
    l->down = down;
    l->state = DQ_AL_IDLE;
    l->backoff_ms = BACKOFF_MIN_MS;
    set_where(l, uri);
    l->retry_ev = evtimer_new(h->base, link_on_retry, l);
    l->tick_ev = evtimer_new(h->base, link_on_tick, l);
    if (l->retry_ev == NULL || l->tick_ev == NULL)
        return DQ_ENOMEM;
    return DQ_OK;
}

void dq__alink_start(dq__alink *l, int64_t delay_ms) {
    l->state = DQ_AL_WAIT;
    dq__alink_arm(l->retry_ev, delay_ms * 1000);
}

void dq__alink_kick(dq__alink *l) {
    if (l->state == DQ_AL_IDLE && l->retry_ev != NULL)
        dq__alink_start(l, 0);
}

void dq__alink_reset_backoff(dq__alink *l) { l->backoff_ms = BACKOFF_MIN_MS; }

void dq__alink_park(dq__alink *l) {
    dq__aconn_close(l->conn);
    l->conn = NULL;
    l->pending = 0;
    l->doomed = 0;
    if (l->tick_ev != NULL)
        evtimer_del(l->tick_ev);
    if (l->retry_ev != NULL)
        evtimer_del(l->retry_ev);
    if (l->state != DQ_AL_CLOSED)
        l->state = DQ_AL_IDLE;
}

void dq__alink_close(dq__alink *l) {
    dq__aconn_close(l->conn);
    l->conn = NULL;
    if (l->retry_ev != NULL)
        event_free(l->retry_ev);
    if (l->tick_ev != NULL)
        event_free(l->tick_ev);
    l->retry_ev = l->tick_ev = NULL;
    l->state = DQ_AL_CLOSED;
}

void dq__alink_sent(dq__alink *l) {
    if (l->pending++ == 0) {
        l->last_us = dq__mono_us();
        if (cmd_timeout_us(l) > 0)
            dq__alink_arm(l->tick_ev, cmd_timeout_us(l));
    }
}

void dq__alink_replied(dq__alink *l) {
    if (l->pending > 0)
        l->pending--;
    l->last_us = dq__mono_us();
}

int dq__alink_send(dq__alink *l, const char *resp, size_t len,
                   dq__aconn_reply_fn *fn, void *priv, size_t tag,
                   dq__err *err) {
    if (l->state != DQ_AL_UP || l->conn == NULL)
        return dq__err_set(err, DQ_EIO, "connection to %s is down", l->where);
    int rc = dq__aconn_send_raw(l->conn, resp, len, fn, priv, tag, err);
    if (rc == DQ_OK)
        dq__alink_sent(l);
    return rc;
}

int dq__alink_send_argv(dq__alink *l, int argc, const char **argv,
                        dq__aconn_reply_fn *fn, void *priv, size_t tag,
                        dq__err *err) {
    size_t len = dq__resp_size(argc, argv, NULL);
    char *p = malloc(len + 1);
    int rc = p == NULL ? dq__err_set(err, DQ_ENOMEM, "out of memory") : DQ_OK;
    if (rc == DQ_OK) {
        /* NUL after it: hiredis's async side peeks one byte further. */
        *dq__resp_put(p, argc, argv, NULL) = '\0';
        rc = dq__alink_send(l, p, len, fn, priv, tag, err);
    }
    free(p);
    return rc;
}

int dq__alink_usable(dq__alink *l) {
    if (l->state != DQ_AL_UP || l->doomed)
        return 0;
    if (l->pending > 0)
        return 1; /* replies are due: a dead server fails them anyway */
    /* Idle: a server that died meanwhile (a failover) may have left an end
     * of file the loop has not read yet; a call sent now would be lost
     * with it, its fate unknown.  Fail the link from the loop instead. */
    if (dq__aconn_alive(l->conn))
        return 1;
    l->doomed = 1;
    event_active(l->tick_ev, EV_TIMEOUT, 1);
    return 0;
}
