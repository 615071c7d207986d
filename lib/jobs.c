/*
 * jobs.c - job lists returned by poll and the listings, the info of dq_get,
 * and their accessors.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

dq_jobs *dq__jobs_new(size_t n) {
    dq_jobs *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    if (n > 0 && (l->jobs = calloc(n, sizeof(dq_job))) == NULL) {
        free(l);
        return NULL;
    }
    return l;
}

/* Copies n bytes of s and a NUL to *at and moves *at past them; returns
 * where they went. */
static char *put(char **at, const char *s, size_t n) {
    char *p = *at;
    if (n > 0)
        memcpy(p, s, n);
    p[n] = '\0';
    *at = p + n + 1;
    return p;
}

/* Fills j with one allocation holding "id\0payload\0" and, when t has
 * them, "reason\0" and "group\0" after them. */
static int job_fill(dq_job *j, const dq__job_text *t) {
    size_t rsize = t->reason != NULL ? t->reason_len + 1 : 0;
    size_t gsize = t->group != NULL ? t->group_len + 1 : 0;
    char *at = malloc(t->idlen + 1 + t->len + 1 + rsize + gsize);
    if (at == NULL)
        return -1;
    j->buf = at;
    j->id = put(&at, t->id, t->idlen);
    j->payload = put(&at, t->payload, t->len);
    j->len = t->len;
    j->reason = rsize > 0 ? put(&at, t->reason, t->reason_len) : NULL;
    j->reason_len = rsize > 0 ? t->reason_len : 0;
    j->group = gsize > 0 ? put(&at, t->group, t->group_len) : NULL;
    return 0;
}

/* The text of a job without a group. */
static dq__job_text plain_text(const char *id, size_t idlen,
                               const char *payload, size_t len,
                               const char *reason, size_t reason_len) {
    dq__job_text t = {id, payload, reason, NULL, idlen, len, reason_len, 0};
    return t;
}

dq_job *dq__jobs_add_text(dq_jobs *l, const dq__job_text *t) {
    dq_job *j = &l->jobs[l->count];
    memset(j, 0, sizeof(*j));
    if (job_fill(j, t) != 0)
        return NULL;
    l->count++;
    return j;
}

size_t dq_jobs_count(const dq_jobs *l) { return l == NULL ? 0 : l->count; }

const dq_job *dq_jobs_at(const dq_jobs *l, size_t i) {
    if (l == NULL || i >= l->count)
        return NULL;
    return &l->jobs[i];
}

void dq_jobs_free(dq_jobs *l) {
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->count; i++)
        free(l->jobs[i].buf);
    free(l->jobs);
    free(l);
}

const char *dq_job_id(const dq_job *j) { return j == NULL ? NULL : j->id; }

const void *dq_job_payload(const dq_job *j, size_t *len) {
    if (len != NULL)
        *len = j == NULL ? 0 : j->len;
    return j == NULL ? NULL : j->payload;
}

int64_t dq_job_attempt(const dq_job *j) { return j == NULL ? 0 : j->attempt; }
int64_t dq_job_due_ms(const dq_job *j) { return j == NULL ? 0 : j->due_ms; }

int64_t dq_job_lease_deadline_ms(const dq_job *j) {
    return j == NULL ? 0 : j->lease_deadline_ms;
}

const char *dq_job_token(const dq_job *j) {
    return j == NULL ? NULL : j->token;
}

const void *dq_job_last_error(const dq_job *j, size_t *len) {
    if (len != NULL)
        *len = j == NULL ? 0 : j->reason_len;
    return j == NULL ? NULL : j->reason;
}

int64_t dq_job_failed_ms(const dq_job *j) {
    return j == NULL ? 0 : j->failed_ms;
}

const char *dq_job_group(const dq_job *j) {
    return j == NULL ? NULL : j->group;
}

int dq_job_priority(const dq_job *j) { return j == NULL ? 0 : j->priority; }

/* Copies j into c (fields and a buffer of its own); 0 or -1. */
static int job_copy(dq_job *c, const dq_job *j) {
    dq__job_text t = plain_text(j->id, strlen(j->id), j->payload, j->len,
                                j->reason, j->reason_len);
    t.group = j->group;
    t.group_len = j->group != NULL ? strlen(j->group) : 0;
    *c = *j;
    return job_fill(c, &t);
}

dq_job *dq_job_dup(const dq_job *j) {
    if (j == NULL)
        return NULL;
    dq_job *c = malloc(sizeof(*c));
    if (c == NULL)
        return NULL;
    if (job_copy(c, j) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

void dq_job_free(dq_job *j) {
    if (j == NULL)
        return;
    free(j->buf);
    free(j);
}

int dq__jobs_append(dq_jobs **dst, dq_jobs *src) {
    if (src == NULL || src->count == 0) {
        dq_jobs_free(src);
        return DQ_OK;
    }
    if (*dst == NULL) {
        *dst = src;
        return DQ_OK;
    }
    dq_jobs *d = *dst;
    dq_job *j = realloc(d->jobs, sizeof(dq_job) * (d->count + src->count));
    if (j == NULL) {
        dq_jobs_free(src);
        return DQ_ENOMEM;
    }
    memcpy(j + d->count, src->jobs, sizeof(dq_job) * src->count);
    d->jobs = j;
    d->count += src->count;
    free(src->jobs); /* the jobs' buffers moved to d */
    free(src);
    return DQ_OK;
}

static int by_due(const void *pa, const void *pb) {
    const dq_job *a = pa, *b = pb;
    if (a->due_ms != b->due_ms)
        return a->due_ms < b->due_ms ? -1 : 1;
    return strcmp(a->id, b->id);
}

void dq__jobs_slice(dq_jobs *l, size_t offset, size_t count) {
    if (l == NULL)
        return;
    qsort(l->jobs, l->count, sizeof(dq_job), by_due);
    size_t lo = offset < l->count ? offset : l->count;
    size_t hi = count < l->count - lo ? lo + count : l->count;
    for (size_t i = 0; i < lo; i++)
        free(l->jobs[i].buf);
    for (size_t i = hi; i < l->count; i++)
        free(l->jobs[i].buf);
    memmove(l->jobs, l->jobs + lo, sizeof(dq_job) * (hi - lo));
    l->count = hi - lo;
}

/* ---- dq_get's info ---- */

dq_job_info *dq__job_info_new(const char *id, size_t idlen,
                             const char *payload, size_t len,
                             const char *reason, size_t reason_len) {
    dq_job_info *in = calloc(1, sizeof(*in));
    if (in == NULL)
        return NULL;
    dq__job_text t = plain_text(id, idlen, payload, len, reason, reason_len);
    if (job_fill(&in->job, &t) != 0) {
        free(in);
        return NULL;
    }
    return in;
}

int dq_job_info_state(const dq_job_info *in) {
    return in == NULL ? DQ_JOB_UNKNOWN : in->state;
}

/* The job of an info, NULL for NULL: the dq_job accessors take it. */
static const dq_job *info_job(const dq_job_info *in) {
    return in == NULL ? NULL : &in->job;
}

const char *dq_job_info_id(const dq_job_info *in) {
    return dq_job_id(info_job(in));
}

int64_t dq_job_info_due_ms(const dq_job_info *in) {
    return dq_job_due_ms(info_job(in));
}

int64_t dq_job_info_attempts(const dq_job_info *in) {
    return dq_job_attempt(info_job(in));
}

int64_t dq_job_info_lease_deadline_ms(const dq_job_info *in) {
    return dq_job_lease_deadline_ms(info_job(in));
}

const void *dq_job_info_payload(const dq_job_info *in, size_t *len) {
    return dq_job_payload(info_job(in), len);
}

const void *dq_job_info_last_error(const dq_job_info *in, size_t *len) {
    return dq_job_last_error(info_job(in), len);
}

int64_t dq_job_info_failed_ms(const dq_job_info *in) {
    return dq_job_failed_ms(info_job(in));
}

const char *dq_job_info_repeat(const dq_job_info *in) {
    return in == NULL || in->repeat[0] == '\0' ? NULL : in->repeat;
}

const char *dq_job_info_group(const dq_job_info *in) {
    return in == NULL || in->group[0] == '\0' ? NULL : in->group;
}

int dq_job_info_priority(const dq_job_info *in) {
    return in == NULL ? 0 : in->priority;
}

int64_t dq_job_info_now_ms(const dq_job_info *in) {
    return in == NULL ? 0 : in->now_ms;
}

int64_t dq_job_info_followup_ms(const dq_job_info *in) {
    return in == NULL ? 0 : in->followup_ms;
}

dq_job_info *dq_job_info_dup(const dq_job_info *in) {
    if (in == NULL)
        return NULL;
    dq_job_info *c = malloc(sizeof(*c));
    if (c == NULL)
        return NULL;
    *c = *in;
    if (job_copy(&c->job, &in->job) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

void dq_job_info_free(dq_job_info *in) {
    if (in == NULL)
        return;
    free(in->job.buf);
    free(in);
}
