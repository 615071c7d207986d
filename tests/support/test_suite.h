/*
 * tests/support/test_suite.h - the one way a Check suite is declared.
 *
 A suite file ends with TEST_SUITE: its name, its server and the table of
 * its tests, {name, test, timeout, fixture}:
 *
 *     TEST_SUITE("batch", TU_SRV_UNIX,
 *         {"push_chunks", push_batch_crosses_chunks, 30, NULL},
 *         {"ack_mixed", ack_batch_mixed, 30, &fixture})
 *
 * (The table is built inside main() because Check's test handles are
 * variables, not constants.)  Each entry becomes one TCase of that name holding the one test, with its
 * timeout (seconds) and, when fx is not NULL, fx's checked fixture (run in
 * the forked test process around the test).  The shared main (tu_main)
 * starts the suite's private redis-server g_srv (TU_SRV_UNIX: unix socket;
 * TU_SRV_TCP: also 127.0.0.1; TU_SRV_NONE: the tests start their own) in the
 * srunner process, so it outlives every forked test, runs the suite with
 * CK_ENV (CK_FORK etc. from the environment), stops the server and exits 1
 * if anything failed.  A missing redis-server is a failure, never a skip.
 */
#ifndef DQ_TEST_SUITE_H
#define DQ_TEST_SUITE_H

#include <check.h>
#include <stddef.h>

/* A checked fixture: setup before and teardown after one test. */
typedef struct tu_fixture {
    void (*setup)(void);
    void (*teardown)(void);
} tu_fixture;

/* One test of a suite's table. */
typedef struct tu_test {
    const char *name;      /* TCase name, as meson test logs print it */
    const TTest *fn;       /* START_TEST function */
    int timeout;           /* seconds */
    const tu_fixture *fx;  /* checked fixture, or NULL */
} tu_test;

/* Which private redis-server the shared main starts for the suite. */
enum tu_server {
    TU_SRV_NONE = 0, /* none: the tests start their own */
    TU_SRV_UNIX = 1, /* unix socket only */
    TU_SRV_TCP = 2   /* unix socket and 127.0.0.1:<free port> */
};

/* Runs the suite: see the top of this file.  Returns main's exit code. */
int tu_main(const char *suite, enum tu_server server, const tu_test *tests,
            size_t ntests);

/* The suite's main(); the variable arguments are the tu_test entries. */
#define TEST_SUITE(suite_name, server, ...)                                   \
    int main(void) {                                                          \
        const tu_test tests_[] = {__VA_ARGS__};                               \
        return tu_main((suite_name), (server), tests_,                        \
                       sizeof(tests_) / sizeof(tests_[0]));                   \
    }

#endif
