/*
 * tests/support/selftest.h - the checks of the harness self-tests
 * (harness_selftest.c, cluster_selftest.c: plain mains, no Check): CHECK
 * counts a passed or failed condition and names a failed one on stderr;
 * main reports passed and failed and fails when failed > 0.
 */
#ifndef DQ_SELFTEST_H
#define DQ_SELFTEST_H

#include <stdio.h>
#include <sys/stat.h>

static int passed, failed;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) {                                                                 \
            passed++;                                                               \
        } else {                                                                    \
            failed++;                                                               \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);         \
        }                                                                           \
    } while (0)

/* 1 if path is a directory. */
static inline int is_dir(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

#endif
