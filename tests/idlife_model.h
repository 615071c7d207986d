/*
 * tests/idlife_model.h - the lives of one job id, as a model the sync and
 * async suites both check their client against (test_idlife.c,
 * async/test_async_idlife.c).
 *
 * An id goes through incarnations: a push that creates it starts one, an
 * ack, cancel or purge ends it.  A done record answers a keep push with
 * DQ_DONE only for the incarnation that was acked: one binds from the ack
 * until a push creates the id again or a cancel; after that it still tells
 * a retried ack of that delivery that it landed (0), but refuses no push.
 * Debounced pushes (DQ_PUSH_DEBOUNCE, delay 0) take part: created, moved
 * while pending and never delivered, else one follow-up that the ack of
 * the running delivery starts as a new incarnation.
 * Random sequences of every operation on one id are applied to the client
 * and to the model, step by step; each answer and each poll's job must be
 * the model's.  Bounded: a fixed number of sequences and steps, and a time
 * limit.  Every push is due at once, every lease a minute: no time passes
 * in the model.
 */
#ifndef DQ_TEST_IDLIFE_MODEL_H
#define DQ_TEST_IDLIFE_MODEL_H

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "delayq.h"
#include "harness.h"

/* The client under test, one call each; each returns what the
 * corresponding sync call returns. */
typedef struct im_ops {
    int (*push)(void *cx, const char *q, const char *id, const char *pl,
                int flags, int *outcome);
    /* one poll of at most one job: its count (0, 1) or an error; the job's
     * token and payload (NUL-terminated) into tok and pl */
    int (*poll)(void *cx, const char *q, char *tok, char *pl, size_t plsz);
    int (*ack)(void *cx, const char *q, const char *id, const char *tok);
    int (*nack)(void *cx, const char *q, const char *id, const char *tok,
                int flags);
    int (*cancel)(void *cx, const char *q, const char *id, int flags);
    int (*requeue)(void *cx, const char *q, const char *id);
    int (*purge)(void *cx, const char *q, const char *id);
} im_ops;

enum { IM_NONE, IM_PENDING, IM_FLIGHT, IM_DEAD };
enum { IM_REC_NONE, IM_REC_BINDS, IM_REC_RETIRED };

#define IM_TOKS 64

typedef struct im_model {
    int state;
    int rec;                    /* IM_REC_* */
    char rec_tok[DQ_TOKEN_BUF]; /* the token the record holds */
    char cur[DQ_TOKEN_BUF];     /* the token of the delivery in flight */
    char pl[32];                /* payload of the current incarnation */
    char fu[32];  /* a debounced job's follow-up payload ("" none) */
    int att;      /* delivered since it was created or requeued */
    char toks[IM_TOKS][DQ_TOKEN_BUF]; /* every token handed out */
    int ntoks;
    unsigned seed;
    int step;
    char trace[2048]; /* the last steps, for the failure message */
} im_model;

static uint64_t im_x;
static uint64_t im_rnd(void) {
    im_x ^= im_x >> 12;
    im_x ^= im_x << 25;
    im_x ^= im_x >> 27;
    return im_x * 2685821657736338717ULL;
}

static void im_note(im_model *m, const char *what, int got) {
    char one[96];
    snprintf(one, sizeof(one), " %s=%d", what, got);
    size_t have = strlen(m->trace);
    if (have + strlen(one) + 1 >= sizeof(m->trace))
        memmove(m->trace, m->trace + 512, have - 512 + 1);
    strcat(m->trace, one);
}

#define IM_CK(m, cond, ...)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            char im_msg_[512];                                                \
            snprintf(im_msg_, sizeof(im_msg_), __VA_ARGS__);                  \
            ck_abort_msg("seed %u step %d: %s; steps:%s", (m)->seed,          \
                         (m)->step, im_msg_, (m)->trace);                     \
        }                                                                     \
    } while (0)

static void im_retire(im_model *m) {
    if (m->rec == IM_REC_BINDS)
        m->rec = IM_REC_RETIRED;
}

/* A token for an ack or nack: the current one mostly, else an old one. */
static const char *im_pick_tok(im_model *m) {
    if (m->state == IM_FLIGHT && im_rnd() % 100 < 70)
        return m->cur;
    if (m->ntoks == 0)
        return "1";
    return m->toks[im_rnd() % (uint64_t)m->ntoks];
}

/* A debounced push (DQ_PUSH_DEBOUNCE, delay 0, no max wait). */
static void im_debounce(im_model *m, const im_ops *o, void *cx,
                        const char *q, const char *id, const char *pl) {
    int oc = 0;
    int rc = o->push(cx, q, id, pl, DQ_PUSH_DEBOUNCE, &oc);
    im_note(m, "debounce", oc);
    IM_CK(m, rc == 0, "debounced push: %d", rc);
    int want = m->state == IM_NONE || m->state == IM_DEAD ? DQ_DEBOUNCE_CREATED
               : m->state == IM_PENDING && !m->att        ? DQ_DEBOUNCE_MOVED
                                                   : DQ_DEBOUNCE_FOLLOWUP;
    IM_CK(m, oc == want, "debounced push (state %d, delivered %d): outcome "
          "%d, want %d", m->state, m->att, oc, want);
    if (want == DQ_DEBOUNCE_FOLLOWUP) {
        snprintf(m->fu, sizeof(m->fu), "%s", pl);
        return;
    }
    if (want == DQ_DEBOUNCE_CREATED) {
        m->att = 0;
        im_retire(m);
    }
    m->state = IM_PENDING;
    snprintf(m->pl, sizeof(m->pl), "%s", pl);
    m->fu[0] = '\0';
}

static void im_push(im_model *m, const im_ops *o, void *cx, const char *q,
                    const char *id) {
    char pl[32];
    snprintf(pl, sizeof(pl), "p%d", m->step);
    if (im_rnd() % 100 < 35) {
        im_debounce(m, o, cx, q, id, pl);
        return;
    }
    int replace = im_rnd() % 100 < 35;
    int oc = 0;
    int rc = o->push(cx, q, id, pl, replace ? DQ_PUSH_REPLACE : DQ_PUSH_KEEP,
                     &oc);
    im_note(m, replace ? "replace" : "keep", oc);
    IM_CK(m, rc == 0, "push: %d", rc);
    int want;
    if (m->state != IM_NONE)
        want = replace ? DQ_REPLACED : DQ_KEPT;
    else
        want = !replace && m->rec == IM_REC_BINDS ? DQ_DONE : DQ_PUSHED;
    IM_CK(m, oc == want, "%s push of an id in state %d (record %d): "
          "outcome %d, want %d", replace ? "replace" : "keep", m->state,
          m->rec, oc, want);
    if (want == DQ_PUSHED || want == DQ_REPLACED) {
        m->state = IM_PENDING;
        snprintf(m->pl, sizeof(m->pl), "%s", pl);
        m->fu[0] = '\0';
        m->att = 0;
        im_retire(m);
    }
}

static void im_poll(im_model *m, const im_ops *o, void *cx, const char *q) {
    char tok[DQ_TOKEN_BUF] = "", pl[32] = "";
    int n = o->poll(cx, q, tok, pl, sizeof(pl));
    im_note(m, "poll", n);
    int want = m->state == IM_PENDING;
    IM_CK(m, n == want, "poll of an id in state %d: %d jobs", m->state, n);
    if (!want)
        return;
    IM_CK(m, strcmp(pl, m->pl) == 0, "polled payload %s, want %s", pl,
          m->pl);
    m->state = IM_FLIGHT;
    m->att = 1;
    snprintf(m->cur, sizeof(m->cur), "%s", tok);
    if (m->ntoks < IM_TOKS)
        snprintf(m->toks[m->ntoks++], DQ_TOKEN_BUF, "%s", tok);
}

static void im_ack(im_model *m, const im_ops *o, void *cx, const char *q,
                   const char *id) {
    char tok[DQ_TOKEN_BUF];
    snprintf(tok, sizeof(tok), "%s", im_pick_tok(m));
    int rc = o->ack(cx, q, id, tok);
    im_note(m, "ack", rc);
    int want;
    if (m->state == IM_FLIGHT && strcmp(tok, m->cur) == 0)
        want = 0;
    else if (m->rec != IM_REC_NONE)
        want = strcmp(tok, m->rec_tok) == 0 ? 0 : DQ_ESTALE;
    else
        want = m->state != IM_NONE ? DQ_ESTALE : DQ_ENOTFOUND;
    IM_CK(m, rc == want, "ack (state %d, record %d, %s token): %d, want %d",
          m->state, m->rec, strcmp(tok, m->cur) == 0 ? "current" : "old", rc,
          want);
    if (m->state == IM_FLIGHT && strcmp(tok, m->cur) == 0) {
        m->state = IM_NONE;
        m->rec = IM_REC_BINDS;
        snprintf(m->rec_tok, sizeof(m->rec_tok), "%s", tok);
        m->cur[0] = '\0';
        if (m->fu[0]) { /* the follow-up starts: a new incarnation */
            m->state = IM_PENDING;
            m->rec = IM_REC_RETIRED;
            m->att = 0;
            snprintf(m->pl, sizeof(m->pl), "%s", m->fu);
            m->fu[0] = '\0';
        }
    }
}

static void im_nack(im_model *m, const im_ops *o, void *cx, const char *q,
                    const char *id) {
    char tok[DQ_TOKEN_BUF];
    snprintf(tok, sizeof(tok), "%s", im_pick_tok(m));
    int dead = im_rnd() % 100 < 40;
    int rc = o->nack(cx, q, id, tok, dead ? DQ_NACK_DEAD : 0);
    im_note(m, dead ? "nack_dead" : "nack", rc);
    int mine = m->state == IM_FLIGHT && strcmp(tok, m->cur) == 0;
    int want = mine ? dead : m->state != IM_NONE ? DQ_ESTALE : DQ_ENOTFOUND;
    IM_CK(m, rc == want, "nack (state %d): %d, want %d", m->state, rc, want);
    if (mine) {
        m->state = dead ? IM_DEAD : IM_PENDING;
        m->cur[0] = '\0';
    }
}

static void im_cancel(im_model *m, const im_ops *o, void *cx, const char *q,
                      const char *id) {
    int fl = im_rnd() % 2 ? DQ_CANCEL_INFLIGHT : 0;
    int rc = o->cancel(cx, q, id, fl);
    im_note(m, fl ? "cancel_all" : "cancel", rc);
    int want = m->state == IM_PENDING  ? DQ_CANCELED_PENDING
               : m->state == IM_FLIGHT ? (fl ? DQ_CANCELED_INFLIGHT
                                             : DQ_CANCEL_BUSY)
                                       : 0;
    IM_CK(m, rc == want, "cancel (state %d): %d, want %d", m->state, rc,
          want);
    if (want == DQ_CANCEL_BUSY)
        return;
    im_retire(m);
    if (want != 0) {
        m->state = IM_NONE;
        m->cur[0] = '\0';
        m->fu[0] = '\0';
    }
}

static void im_dead_op(im_model *m, const im_ops *o, void *cx, const char *q,
                       const char *id, int requeue) {
    int rc = requeue ? o->requeue(cx, q, id) : o->purge(cx, q, id);
    im_note(m, requeue ? "requeue" : "purge", rc);
    int want = m->state == IM_DEAD;
    IM_CK(m, rc == want, "%s (state %d): %d, want %d",
          requeue ? "requeue" : "purge", m->state, rc, want);
    if (want) {
        m->state = requeue ? IM_PENDING : IM_NONE;
        m->att = 0;
        if (!requeue)
            m->fu[0] = '\0';
    }
}

/* One random step. */
static void im_step(im_model *m, const im_ops *o, void *cx, const char *q,
                    const char *id) {
    uint64_t x = im_rnd() % 100;
    if (x < 30)
        im_push(m, o, cx, q, id);
    else if (x < 50)
        im_poll(m, o, cx, q);
    else if (x < 68)
        im_ack(m, o, cx, q, id);
    else if (x < 78)
        im_nack(m, o, cx, q, id);
    else if (x < 88)
        im_cancel(m, o, cx, q, id);
    else
        im_dead_op(m, o, cx, q, id, x < 94);
}

/* Runs nseq sequences of nsteps steps (each on a queue of its own, q with
 * the sequence's number) or until limit_ms pass; returns the steps run. */
static int im_run(const im_ops *o, void *cx, const char *q, int nseq,
                  int nsteps, int64_t limit_ms) {
    int64_t end = th_mono_ms() + limit_ms;
    int total = 0;
    for (int s = 0; s < nseq && th_mono_ms() < end; s++) {
        im_model m;
        memset(&m, 0, sizeof(m));
        m.seed = 1000u + (unsigned)s;
        im_x = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)m.seed * 7919u);
        char qs[200];
        snprintf(qs, sizeof(qs), "%s-%d", q, s);
        for (m.step = 0; m.step < nsteps; m.step++)
            im_step(&m, o, cx, qs, "order-1");
        total += nsteps;
    }
    return total;
}

#endif
