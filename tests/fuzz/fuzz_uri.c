/*
 * tests/fuzz/fuzz_uri.c - fuzz target: the Redis URI parser (lib/uri.c).
 *
 * The input, cut at its first NUL, is parsed; the result must be coherent:
 * on success a TCP host (1..255 bytes, no blank, '%', '?' or '#') and port
 * 1..65535, or a unix path; a database 0..1000000.  On failure a known code,
 * a message, and nothing left to free.  ASan/LSan catch the rest.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "uri.h"

#define CHECK(cond)     \
    do {                \
        if (!(cond))    \
            abort();    \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 8192)
        return 0;
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    dq__uri u;
    dq__err err;
    dq__err_clear(&err);
    int rc = dq__uri_parse(s, &u, &err);
    if (rc == DQ_OK) {
        CHECK(u.kind == DQ_URI_TCP || u.kind == DQ_URI_UNIX);
        CHECK(u.db >= 0 && u.db <= 1000000);
        if (u.kind == DQ_URI_TCP) {
            CHECK(u.host != NULL && u.path == NULL);
            size_t hl = strlen(u.host);
            CHECK(hl >= 1 && hl <= 255);
            for (size_t i = 0; i < hl; i++)
                CHECK((unsigned char)u.host[i] > ' ' && u.host[i] != '%' &&
                      u.host[i] != '?' && u.host[i] != '#');
            CHECK(u.port >= 1 && u.port <= 65535);
            CHECK(u.tls == (strncmp(s, "rediss://", 9) == 0));
        } else {
            CHECK(u.path != NULL && u.host == NULL && !u.tls);
            CHECK(strlen(u.path) >= 1 && strlen(u.path) <= 107);
        }
    } else {
        CHECK(rc == DQ_EURI || rc == DQ_ENOMEM || rc == DQ_ENULL);
        CHECK(err.code == rc && err.msg[0] != '\0');
        CHECK(u.host == NULL && u.path == NULL && u.user == NULL &&
              u.password == NULL);
    }
    dq__uri_clear(&u);
    CHECK(u.host == NULL && u.path == NULL);
    dq__uri_clear(&u); /* twice is harmless */
    free(s);
    return 0;
}
