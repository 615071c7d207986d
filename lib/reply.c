/*
 * reply.c - the engine's view of a Redis reply (reply.h), over hiredis's
 * redisReply, the same for both hiredis versions and both links.
 */
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "reply.h"

int dq__reply_is_error(const dq__reply *r, const char *prefix) {
    const redisReply *rr = (const redisReply *)r;
    size_t n = strlen(prefix);
    return rr != NULL && rr->type == REDIS_REPLY_ERROR && rr->len >= n &&
           memcmp(rr->str, prefix, n) == 0;
}

int dq__reply_is(const dq__reply *r, const char *s) {
    size_t len;
    const char *p = r != NULL ? dq__reply_str(r, &len) : NULL;
    return p != NULL && len == strlen(s) && memcmp(p, s, len) == 0;
}

int dq__reply_error(const dq__reply *r, const char *what, dq__err *err) {
    const redisReply *rr = (const redisReply *)r;
    int code = DQ_EREDIS;
    if (dq__reply_is_error(r, "OOM"))
        code = DQ_EOOM;
    else if (dq__reply_is_error(r, "NOAUTH") ||
             dq__reply_is_error(r, "WRONGPASS") ||
             dq__reply_is_error(r, "ERR invalid password") ||
             dq__reply_is_error(r, "ERR invalid username-password") ||
             dq__reply_is_error(r, "ERR AUTH"))
        code = DQ_EAUTH;
    else if (dq__reply_is_error(r, "NOREPLICAS"))
        code = DQ_EREPLICAS; /* min-replicas-to-write: not run */
    return dq__err_set(err, code, "%s: Redis error: %.*s", what,
                      (int)(rr->len > 400 ? 400 : rr->len), rr->str);
}

int dq__reply_type(const dq__reply *r) {
    switch (((const redisReply *)r)->type) {
    case REDIS_REPLY_STRING:
        return DQ_R_STRING;
    case REDIS_REPLY_ARRAY:
        return DQ_R_ARRAY;
    case REDIS_REPLY_INTEGER:
        return DQ_R_INTEGER;
    case REDIS_REPLY_NIL:
        return DQ_R_NIL;
    case REDIS_REPLY_STATUS:
        return DQ_R_STATUS;
    case REDIS_REPLY_ERROR:
        return DQ_R_ERROR;
    default:
        return DQ_R_OTHER;
    }
}

long long dq__reply_int(const dq__reply *r) {
    return ((const redisReply *)r)->integer;
}

const char *dq__reply_str(const dq__reply *r, size_t *len) {
    const redisReply *rr = (const redisReply *)r;
    *len = rr->str ? (size_t)rr->len : 0;
    return rr->str ? rr->str : "";
}

int dq__reply_ll(const dq__reply *r, long long *v) {
    size_t len;
    const char *s = dq__reply_str(r, &len);
    char buf[32];
    if (dq__reply_type(r) != DQ_R_STRING || len == 0 || len >= sizeof(buf))
        return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    *v = strtoll(buf, &end, 10);
    return *end == '\0';
}

size_t dq__reply_len(const dq__reply *r) {
    const redisReply *rr = (const redisReply *)r;
    return rr->type == REDIS_REPLY_ARRAY ? rr->elements : 0;
}

const dq__reply *dq__reply_at(const dq__reply *r, size_t i) {
    const redisReply *rr = (const redisReply *)r;
    return (const dq__reply *)rr->element[i];
}

void dq__reply_free(dq__reply *r) {
    if (r != NULL)
        freeReplyObject(r);
}
