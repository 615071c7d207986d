/*
 * gstats.c - the per-group counts of a queue (dq_group_stats): the list
 * and its accessors, filled from groups.lua's replies
 * ({ now_ms, name, due, later, inflight, ... }).
 */
#include <stdlib.h>
#include <string.h>

#include "gstats.h"

typedef struct gent {
    char name[DQ_GROUP_MAX + 1];
    int64_t v[3]; /* due, later, inflight */
} gent;

/* Every group the replies named so far (each partition names at most max),
 * those with jobs pending first, each part in the order first named; the
 * list shows the first max.  Kept whole while replies come, so a group
 * pending in a later partition goes before one only in flight in an
 * earlier one, and its counts from every partition add up. */
struct dq_group_list {
    gent *g;
    size_t n, cap, max;
};

dq_group_list *dq__glist_new(int max) {
    dq_group_list *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->max = l->cap = (size_t)max;
    l->g = calloc(l->cap, sizeof(*l->g));
    if (l->g == NULL) {
        free(l);
        return NULL;
    }
    return l;
}

void dq_group_list_free(dq_group_list *l) {
    if (l == NULL)
        return;
    free(l->g);
    free(l);
}

/* The entry of group name (len bytes): the listed one, a new one, or NULL
 * when out of memory. */
static gent *entry(dq_group_list *l, const char *name, size_t len) {
    for (size_t i = 0; i < l->n; i++)
        if (strlen(l->g[i].name) == len && memcmp(l->g[i].name, name, len) == 0)
            return &l->g[i];
    if (l->n == l->cap) {
        gent *g = realloc(l->g, 2 * l->cap * sizeof(*g));
        if (g == NULL)
            return NULL;
        l->g = g;
        l->cap *= 2;
    }
    gent *e = &l->g[l->n++];
    memset(e, 0, sizeof(*e));
    memcpy(e->name, name, len);
    e->name[len] = '\0';
    return e;
}

/* A count of the reply: an integer >= 0. */
static int count_at(const dq__reply *r, size_t i, int64_t *v) {
    const dq__reply *e = dq__reply_at(r, i);
    if (dq__reply_type(e) != DQ_R_INTEGER || dq__reply_int(e) < 0)
        return -1;
    *v = dq__reply_int(e);
    return 0;
}

/* One group of the reply (elements i..i+3) into l. */
static int feed_one(dq_group_list *l, const dq__reply *r, size_t i) {
    size_t len;
    int64_t v[3];
    if (dq__reply_type(dq__reply_at(r, i)) != DQ_R_STRING)
        return -1;
    const char *name = dq__reply_str(dq__reply_at(r, i), &len);
    if (len > DQ_GROUP_MAX || memchr(name, '\0', len) != NULL)
        return -1;
    for (int k = 0; k < 3; k++)
        if (count_at(r, i + 1 + (size_t)k, &v[k]))
            return -1;
    gent *e = entry(l, name, len);
    if (e == NULL)
        return -2;
    for (int k = 0; k < 3; k++)
        e->v[k] += v[k];
    return 0;
}

/* Moves the groups with jobs pending (due or later) before those only in
 * flight, each part kept in its order (one pass over a copy). */
static int pending_first(dq_group_list *l) {
    gent *t = malloc(l->n * sizeof(*t));
    if (t == NULL)
        return -1;
    size_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < l->n; i++)
            if ((l->g[i].v[0] + l->g[i].v[1] > 0) == (pass == 0))
                t[k++] = l->g[i];
    memcpy(l->g, t, l->n * sizeof(*t));
    free(t);
    return 0;
}

int dq__glist_feed(dq_group_list *l, const dq__reply *r, int64_t *now_ms,
                   dq__err *err) {
    int64_t now;
    size_t n = dq__reply_len(r);
    if (dq__reply_type(r) != DQ_R_ARRAY || n % 4 != 1 || count_at(r, 0, &now))
        return dq__err_set(err, DQ_EPROTO, "group stats: unexpected reply");
    for (size_t i = 1; i < n; i += 4) {
        int rc = feed_one(l, r, i);
        if (rc == -2)
            return dq__err_set(err, DQ_ENOMEM, "group stats: out of memory");
        if (rc)
            return dq__err_set(err, DQ_EPROTO, "group stats: unexpected reply");
    }
    if (l->n > 0 && pending_first(l))
        return dq__err_set(err, DQ_ENOMEM, "group stats: out of memory");
    if (now > *now_ms)
        *now_ms = now;
    return DQ_OK;
}

size_t dq_group_list_count(const dq_group_list *l) {
    return l == NULL ? 0 : l->n < l->max ? l->n : l->max;
}

const char *dq_group_list_name(const dq_group_list *l, size_t i) {
    return i >= dq_group_list_count(l) ? NULL : l->g[i].name;
}

/* Count k of the i-th group; 0 out of range. */
static int64_t value(const dq_group_list *l, size_t i, int k) {
    return i >= dq_group_list_count(l) ? 0 : l->g[i].v[k];
}

int64_t dq_group_list_due(const dq_group_list *l, size_t i) {
    return value(l, i, 0);
}

int64_t dq_group_list_later(const dq_group_list *l, size_t i) {
    return value(l, i, 1);
}

int64_t dq_group_list_inflight(const dq_group_list *l, size_t i) {
    return value(l, i, 2);
}
