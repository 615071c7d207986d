/*
 * error.c - error texts, generated from DQ_ERRNO_MAP in delayq.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

const char *dq_strerror(int code) {
    switch (code) {
    case DQ_OK:
        return "success";
#define DQ_XX_MSG(name, value, msg) \
    case DQ_##name:                 \
        return msg;
        DQ_ERRNO_MAP(DQ_XX_MSG)
#undef DQ_XX_MSG
    default:
        return "unknown error";
    }
}

const char *dq_errname(int code) {
    switch (code) {
    case DQ_OK:
        return "OK";
#define DQ_XX_NAME(name, value, msg) \
    case DQ_##name:                  \
        return #name;
        DQ_ERRNO_MAP(DQ_XX_NAME)
#undef DQ_XX_NAME
    default:
        return "UNKNOWN";
    }
}

int dq__err_set(dq__err *err, int code, const char *fmt, ...) {
    if (err == NULL)
        return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        snprintf(err->msg, sizeof(err->msg), "%s", dq_strerror(code));
    return code;
}

void dq__err_clear(dq__err *err) {
    if (err == NULL)
        return;
    err->code = DQ_OK;
    err->msg[0] = '\0';
}
