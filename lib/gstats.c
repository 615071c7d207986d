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

struct dq_group_list {
    gent *g;
    size_t n, max;
};

dq_group_list *dq__glist_new(int max) {
    dq_group_list *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->max = (size_t)max;
    l->g = calloc(l->max, sizeof(*l->g));
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
 * when the list is full. */
static gent *entry(dq_group_list *l, const char *name, size_t len) {
    for (size_t i = 0; i < l->n; i++)
        if (strlen(l->g[i].name) == len && memcmp(l->g[i].name, name, len) == 0)
            return &l->g[i];
    if (l->n == l->max)
        return NULL;
    gent *e = &l->g[l->n++];
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
    for (int k = 0; e != NULL && k < 3; k++)
        e->v[k] += v[k];
    return 0;
}

int dq__glist_feed(dq_group_list *l, const dq__reply *r, int64_t *now_ms,
                   dq__err *err) {
    int64_t now;
    size_t n = dq__reply_len(r);
    if (dq__reply_type(r) != DQ_R_ARRAY || n % 4 != 1 || count_at(r, 0, &now))
        return dq__err_set(err, DQ_EPROTO, "group stats: unexpected reply");
    for (size_t i = 1; i < n; i += 4)
        if (feed_one(l, r, i))
            return dq__err_set(err, DQ_EPROTO, "group stats: unexpected reply");
    if (now > *now_ms)
        *now_ms = now;
    return DQ_OK;
}

size_t dq_group_list_count(const dq_group_list *l) {
    return l == NULL ? 0 : l->n;
}

const char *dq_group_list_name(const dq_group_list *l, size_t i) {
    return l == NULL || i >= l->n ? NULL : l->g[i].name;
}

/* Count k of the i-th group; 0 out of range. */
static int64_t value(const dq_group_list *l, size_t i, int k) {
    return l == NULL || i >= l->n ? 0 : l->g[i].v[k];
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
