/*
 * reply.h - the engine's view of one Redis reply: a type and accessors, no
 * hiredis in sight.  The engine (ops.c, op.c) reads replies only through
 * it; reply.c implements it over hiredis's redisReply for both links.
 */
#ifndef DQ_REPLY_H
#define DQ_REPLY_H

#include <stddef.h>

#include "internal.h"

typedef struct dq__reply dq__reply; /* a reply; only accessors below */

enum dq__reply_type {
    DQ_R_OTHER = 0,
    DQ_R_STRING,  /* bulk string */
    DQ_R_ARRAY,
    DQ_R_INTEGER,
    DQ_R_NIL,
    DQ_R_STATUS,
    DQ_R_ERROR
};

/* Maps an error reply's text to a code and sets err with Redis's message:
 * DQ_EOOM for OOM, DQ_EAUTH for NOAUTH/WRONGPASS (bad or missing
 * credentials), else DQ_EREDIS (NOPERM included: the credentials were fine,
 * the ACL forbids this key or command; Redis's text says which). */
int dq__reply_error(const dq__reply *r, const char *what, dq__err *err);
/* 1 if r is an error reply starting with prefix (e.g. "NOSCRIPT"). */
int dq__reply_is_error(const dq__reply *r, const char *prefix);
/* 1 if r is a string (bulk or status) equal to s. */
int dq__reply_is(const dq__reply *r, const char *s);

int dq__reply_type(const dq__reply *r);
long long dq__reply_int(const dq__reply *r);
/* String of a STRING/STATUS/ERROR reply; *len receives its length. */
const char *dq__reply_str(const dq__reply *r, size_t *len);
/* 1 if r is a bulk string holding a whole decimal integer (under 32
 * bytes), stored in *v; else 0. */
int dq__reply_ll(const dq__reply *r, long long *v);
size_t dq__reply_len(const dq__reply *r);                  /* array length */
const dq__reply *dq__reply_at(const dq__reply *r, size_t i); /* array element */
void dq__reply_free(dq__reply *r);                         /* NULL is no-op */

#endif
