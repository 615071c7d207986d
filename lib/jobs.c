/*
 * jobs.c - job lists returned by poll and dead-list, and their accessors.
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

/* Fills j with one allocation holding "id\0payload\0". */
static int job_fill(dq_job *j, const char *id, size_t idlen,
                    const char *payload, size_t len) {
    char *buf = malloc(idlen + 1 + len + 1);
    if (buf == NULL)
        return -1;
    memcpy(buf, id, idlen);
    buf[idlen] = '\0';
    if (len > 0)
        memcpy(buf + idlen + 1, payload, len);
    buf[idlen + 1 + len] = '\0';
    j->buf = buf;
    j->id = buf;
    j->payload = buf + idlen + 1;
    j->len = len;
    return 0;
}

dq_job *dq__jobs_add(dq_jobs *l, const char *id, size_t idlen,
                    const char *payload, size_t len) {
    dq_job *j = &l->jobs[l->count];
    memset(j, 0, sizeof(*j));
    if (job_fill(j, id, idlen, payload, len) != 0)
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

dq_job *dq_job_dup(const dq_job *j) {
    if (j == NULL)
        return NULL;
    dq_job *c = malloc(sizeof(*c));
    if (c == NULL)
        return NULL;
    *c = *j;
    if (job_fill(c, j->id, strlen(j->id), j->payload, j->len) != 0) {
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
