/*
 * resp.h - RESP command formatting, in one pass, with no I/O: the engine
 * seals every script call into owned bytes with it, and the links format
 * their own few commands (AUTH, SELECT, SUBSCRIBE, PING) with it too.
 */
#ifndef DQ_RESP_H
#define DQ_RESP_H

#include <stddef.h>

/* Bytes the RESP array of argc arguments takes (lens NULL: strlen). */
size_t dq__resp_size(int argc, const char *const *argv, const size_t *lens);
/* Writes that array at p; returns the end of what it wrote. */
char *dq__resp_put(char *p, int argc, const char *const *argv,
                   const size_t *lens);
/* The pieces: an array header of n elements, one bulk string. */
size_t dq__resp_array_size(int n);
char *dq__resp_put_array(char *p, int n);
size_t dq__resp_bulk_size(size_t len);
char *dq__resp_put_bulk(char *p, const char *s, size_t len);

#endif
