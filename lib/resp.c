/*
 * resp.c - RESP command formatting (see resp.h).  One pass with exact
 * sizes: hiredis's own argv formatting goes through sds appends, which cost
 * the client about twice the instructions per command (bench/RESULTS.md).
 */
#include <string.h>

#include "resp.h"

/* Decimal digits of v. */
static size_t dec_digits(size_t v) {
    size_t n = 1;
    while (v >= 10)
        v /= 10, n++;
    return n;
}

/* Writes v in exactly `digits` decimal digits at p; returns the end. */
static char *put_dec(char *p, size_t v, size_t digits) {
    for (size_t i = digits; i > 0; i--, v /= 10)
        p[i - 1] = (char)('0' + v % 10);
    return p + digits;
}

size_t dq__resp_array_size(int n) { return 1 + dec_digits((size_t)n) + 2; }

char *dq__resp_put_array(char *p, int n) {
    *p++ = '*';
    p = put_dec(p, (size_t)n, dec_digits((size_t)n));
    *p++ = '\r', *p++ = '\n';
    return p;
}

size_t dq__resp_bulk_size(size_t len) { return 1 + dec_digits(len) + 2 + len + 2; }

char *dq__resp_put_bulk(char *p, const char *s, size_t len) {
    *p++ = '$';
    p = put_dec(p, len, dec_digits(len));
    *p++ = '\r', *p++ = '\n';
    if (len > 0)
        memcpy(p, s, len);
    p += len;
    *p++ = '\r', *p++ = '\n';
    return p;
}

size_t dq__resp_size(int argc, const char *const *argv, const size_t *lens) {
    size_t total = dq__resp_array_size(argc);
    for (int i = 0; i < argc; i++)
        total += dq__resp_bulk_size(lens ? lens[i] : strlen(argv[i]));
    return total;
}

char *dq__resp_put(char *p, int argc, const char *const *argv,
                   const size_t *lens) {
    p = dq__resp_put_array(p, argc);
    for (int i = 0; i < argc; i++)
        p = dq__resp_put_bulk(p, argv[i], lens ? lens[i] : strlen(argv[i]));
    return p;
}
