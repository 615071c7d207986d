/*
 * tests/support/test_suite.c - the shared main of the Check suites; see
 * test_suite.h.
 */
#include "test_suite.h"

#include <stdio.h>
#include <stdlib.h>

#include "test_utils.h"

th_redis g_srv;

int tu_main(const char *suite, enum tu_server server, const tu_test *tests,
            size_t ntests) {
    if (server != TU_SRV_NONE &&
        th_redis_start(&g_srv, server == TU_SRV_TCP, NULL) != 0) {
        fprintf(stderr, "%s: cannot start redis-server (is it installed? "
                        "run tools/deps.sh)\n", suite);
        return 1; /* a missing redis-server is a failure, never a skip */
    }
    /* DQ_TEST_PARTITIONS=N runs the suite on partitioned queues: the same
     * behaviour over N partitions of every queue (tests that read Redis's
     * keys directly name them with tu_key / tu_sum of test_utils.h, tests
     * that start their own server build its URI with tu_uri). */
    const char *parts = getenv("DQ_TEST_PARTITIONS");
    if (server != TU_SRV_NONE && parts != NULL && atoi(parts) > 1) {
        size_t n = strlen(g_srv.uri);
        snprintf(g_srv.uri + n, sizeof(g_srv.uri) - n, "?partitions=%d",
                 atoi(parts));
    }
    /* DQ_TEST_LAYOUT=compact or compact-push: the suite's queues use that
     * layout (delayq.h, DQ_LAYOUT_*), so every test runs on it. */
    if (server != TU_SRV_NONE && tu_compact()) {
        char buf[sizeof(g_srv.uri)];
        const char *u = tu_layout_uri(g_srv.uri, buf, sizeof(buf));
        if (u == buf)
            snprintf(g_srv.uri, sizeof(g_srv.uri), "%s", buf);
    }
    Suite *s = suite_create(suite);
    for (size_t i = 0; i < ntests; i++) {
        TCase *tc = tcase_create(tests[i].name);
        if (tests[i].fx != NULL)
            tcase_add_checked_fixture(tc, tests[i].fx->setup,
                                      tests[i].fx->teardown);
        tcase_set_timeout(tc, tests[i].timeout);
        tcase_add_test(tc, tests[i].fn);
        suite_add_tcase(s, tc);
    }
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    th_redis_stop(&g_srv);
    return failed == 0 ? 0 : 1;
}
