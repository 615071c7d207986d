/*
 * tests/fuzz/fuzz_uri.c - fuzz target: the Redis URI parser (lib/uri.c).
 *
 * The input, cut at its first NUL, is parsed; the result must be coherent:
 * on success hosts (1..255 bytes, no blank, '%', '?', '#' or ',') and ports
 * 1..65535 - one for a node, up to 16 seeds for a cluster or Sentinels -
 * or a unix path; a database 0..1000000 (0 in a cluster), a primary's name
 * exactly for Sentinel, partitions 0..1024.  On failure a known code,
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
        CHECK(u.kind >= DQ_URI_TCP && u.kind <= DQ_URI_SENTINEL);
        CHECK(u.db >= 0 && u.db <= 1000000);
        CHECK(u.partitions >= 0 && u.partitions <= 1024);
        if (u.kind != DQ_URI_UNIX) {
            CHECK(u.host != NULL && u.path == NULL);
            CHECK(u.nseeds >= 1 && u.nseeds <= DQ_URI_MAX_SEEDS);
            CHECK(u.host == u.seeds[0].host && u.port == u.seeds[0].port);
            CHECK(u.kind == DQ_URI_TCP ? u.nseeds == 1 : 1);
            CHECK((u.kind == DQ_URI_SENTINEL) == (u.master != NULL));
            CHECK(u.kind != DQ_URI_CLUSTER || u.db == 0);
            for (int k = 0; k < u.nseeds; k++) {
                const char *h = u.seeds[k].host;
                size_t hl = strlen(h);
                CHECK(hl >= 1 && hl <= 255);
                for (size_t i = 0; i < hl; i++)
                    CHECK((unsigned char)h[i] > ' ' && h[i] != '%' &&
                          h[i] != '?' && h[i] != '#' && h[i] != ',');
                CHECK(u.seeds[k].port >= 1 && u.seeds[k].port <= 65535);
            }
            CHECK(u.tls == (strncmp(s, "rediss", 6) == 0));
        } else {
            CHECK(u.path != NULL && u.host == NULL && !u.tls);
            CHECK(strlen(u.path) >= 1 && strlen(u.path) <= 107);
        }
    } else {
        CHECK(rc == DQ_EURI || rc == DQ_ENOMEM || rc == DQ_ENULL);
        CHECK(err.code == rc && err.msg[0] != '\0');
        CHECK(u.host == NULL && u.path == NULL && u.user == NULL &&
              u.password == NULL && u.nseeds == 0 && u.master == NULL);
    }
    dq__uri_clear(&u);
    CHECK(u.host == NULL && u.path == NULL && u.nseeds == 0);
    dq__uri_clear(&u); /* twice is harmless */
    free(s);
    return 0;
}
