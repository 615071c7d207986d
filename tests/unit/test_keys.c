/*
 * tests/unit/test_keys.c - white-box tests of the queue-name encoding in
 * lib/ops.c (dq__core_keys): keys are "<ns>:{<encoded>}:<kind>", the
 * encoding is injective (distinct names -> distinct keys, decodable back to
 * the name), and the hash tag never holds a raw '{' or '}'.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* Check's ck_assert* report each passing assertion to the runner (a write
 * per call in fork mode); these checks run millions of times, so they only
 * call into Check when they fail. */
#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond))                                                          \
            ck_abort_msg(__VA_ARGS__);                                        \
    } while (0)

static const char *const kinds[DQ_NKEYS] = {"due",  "lease", "jobs",
                                            "dead", "done",  "idle",
                                            "conf", "rate",  "counts"};

/* Decodes the tag of key (between the first '{' and the next '}') back
 * into a name; fails the test if the tag is malformed. */
static void decode_tag(const char *key, char *out) {
    const char *open = strchr(key, '{');
    CHECK(open != NULL, "no { in %s", key);
    const char *close = strchr(open, '}');
    CHECK(close != NULL, "no } in %s", key);
    size_t o = 0;
    for (const char *p = open + 1; p < close; p++) {
        unsigned char ch = (unsigned char)*p;
        CHECK(ch != '{', "raw '{' inside the tag of %s", key);
        if (ch == '%') {
            CHECK(p + 2 < close, "truncated escape in %s", key);
            unsigned v;
            char hex[3] = {p[1], p[2], '\0'};
            CHECK(strspn(hex, "0123456789ABCDEF") == 2,
                          "bad escape in %s", key);
            sscanf(hex, "%2x", &v);
            /* only bytes that needed escaping are escaped (canonical) */
            CHECK(!((v >= 'a' && v <= 'z') || (v >= 'A' && v <= 'Z') ||
                            (v >= '0' && v <= '9') || v == '.' || v == '_' ||
                            v == '-'),
                          "needless escape in %s", key);
            out[o++] = (char)v;
            p += 2;
        } else {
            CHECK((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                              (ch >= '0' && ch <= '9') || ch == '.' ||
                              ch == '_' || ch == '-',
                          "unescaped byte 0x%02x in %s", ch, key);
            out[o++] = (char)ch;
        }
    }
    out[o] = '\0';
}

/* Builds the keys of name and checks their shape; returns the due key. */
static const char *keys_of(dq__core *core, const char *name, const char *ns) {
    dq__core_keys(core, name);
    const dq__keys *k = &core->keys;
    char decoded[DQ_QUEUE_MAX + 1];
    for (int i = 0; i < DQ_NKEYS; i++) {
        const char *key = k->key[i];
        CHECK(strlen(key) == k->len[i], "length of %s", key);
        CHECK(k->len[i] < DQ_KEY_MAX, "%s too long", key);
        /* prefix "<ns>:{", suffix "}:<kind>" */
        CHECK(strncmp(key, ns, strlen(ns)) == 0, "%s: namespace", key);
        CHECK(strncmp(key + strlen(ns), ":{", 2) == 0, "%s: no tag after the namespace", key);
        char suffix[16];
        snprintf(suffix, sizeof(suffix), "}:%s", kinds[i]);
        CHECK(strcmp(key + k->len[i] - strlen(suffix), suffix) == 0, "%s: suffix", key);
        /* exactly one '{' and one '}' in the whole key */
        CHECK(strchr(key, '{') == strrchr(key, '{'), "%s: two {", key);
        CHECK(strchr(key, '}') == strrchr(key, '}'), "%s: two }", key);
        decode_tag(key, decoded);
        CHECK(strcmp(decoded, name) == 0, "key %s does not decode to "
                      "its name", key);
    }
    return k->key[0];
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

START_TEST(shape_and_examples) {
    dq__core core;
    ck_assert_int_eq(dq__core_init(&core, NULL), DQ_OK);
    ck_assert_str_eq(keys_of(&core, "orders", "dq"), "dq:{orders}:due");
    ck_assert_str_eq(core.keys.key[4], "dq:{orders}:done");
    ck_assert_str_eq(core.keys.key[DQ_NKEYS - 1], "dq:{orders}:counts");
    /* The wake-up channel names the database: pub/sub crosses them. */
    ck_assert_str_eq(core.keys.chan, "dq:{orders}:wake:0");
    core.db = 3;
    dq__core_keys(&core, "orders");
    ck_assert_str_eq(core.keys.chan, "dq:{orders}:wake:3");
    ck_assert_str_eq(core.keys.key[0], "dq:{orders}:due");
    core.db = 0;
    ck_assert_str_eq(keys_of(&core, "a}:due", "dq"), "dq:{a%7D%3Adue}:due");
    ck_assert_str_eq(keys_of(&core, "{x}", "dq"), "dq:{%7Bx%7D}:due");
    ck_assert_str_eq(keys_of(&core, "a b%", "dq"), "dq:{a%20b%25}:due");
    ck_assert_str_eq(keys_of(&core, "caf\xc3\xa9", "dq"), "dq:{caf%C3%A9}:due");
    ck_assert_str_eq(keys_of(&core, "A-z_0.9", "dq"), "dq:{A-z_0.9}:due");
    dq__core_clear(&core);
}
END_TEST

/* Every byte alone, every pair of a set of tricky bytes, and random names:
 * all distinct names give distinct keys. */
START_TEST(injective) {
    dq__core core;
    ck_assert_int_eq(dq__core_init(&core, NULL), DQ_OK);
    enum { MAXN = 20000 };
    char **names = calloc(MAXN, sizeof(char *));
    size_t n = 0;
    for (int b = 1; b < 256; b++) {
        names[n] = calloc(2, 1);
        names[n++][0] = (char)b;
    }
    const char tricky[] = "{}:%%7Dda}{ \x01\xff.-_";
    for (size_t i = 0; i < sizeof(tricky) - 1; i++)
        for (size_t j = 0; j < sizeof(tricky) - 1; j++) {
            names[n] = calloc(3, 1);
            names[n][0] = tricky[i];
            names[n][1] = tricky[j];
            n++;
        }
    const char *fixed[] = {"a", "a}", "a%7D", "a%7d", "a%257D", "a}:due",
                           "a:due", "%", "%25", "%2525", "{", "%7B"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        names[n++] = strdup(fixed[i]);
    unsigned seed = 12345;
    while (n < MAXN) {
        seed = seed * 1103515245u + 12345u;
        size_t len = 1 + (seed >> 16) % 12;
        char *s = calloc(len + 1, 1);
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            s[i] = (char)(1 + (seed >> 16) % 255);
        }
        names[n++] = s;
    }
    /* distinct names only */
    qsort(names, n, sizeof(char *), cmp_str);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && strcmp(names[m - 1], names[i]) == 0) {
            free(names[i]);
            continue;
        }
        names[m++] = names[i];
    }
    char **keys = calloc(m, sizeof(char *));
    for (size_t i = 0; i < m; i++)
        keys[i] = strdup(keys_of(&core, names[i], "dq"));
    qsort(keys, m, sizeof(char *), cmp_str);
    for (size_t i = 1; i < m; i++)
        CHECK(strcmp(keys[i - 1], keys[i]) != 0,
                      "two names share the key %s", keys[i]);
    for (size_t i = 0; i < m; i++) {
        free(keys[i]);
        free(names[i]);
    }
    free(keys);
    free(names);
    dq__core_clear(&core);
}
END_TEST

START_TEST(longest_name) {
    dq__core core;
    ck_assert_int_eq(dq__core_init(&core, NULL), DQ_OK);
    char name[DQ_QUEUE_MAX + 1];
    memset(name, '\xff', DQ_QUEUE_MAX);
    name[DQ_QUEUE_MAX] = '\0';
    const char *due = keys_of(&core, name, "dq");
    ck_assert_uint_eq(strlen(due), 2 + 2 + 3 * DQ_QUEUE_MAX + 5);
    memset(name, '}', DQ_QUEUE_MAX);
    keys_of(&core, name, "dq");
    dq__core_clear(&core);
    /* with the longest namespace too */
    dq_options *o = dq_options_new();
    char ns[65];
    memset(ns, 'n', 64);
    ns[64] = '\0';
    ck_assert_int_eq(dq_options_set_str(o, DQ_OPT_NAMESPACE, ns), 0);
    ck_assert_int_eq(dq__core_init(&core, o), DQ_OK);
    dq_options_free(o);
    keys_of(&core, name, ns);
    ck_assert_uint_eq(core.keys.len[1], 64 + 2 + 3 * DQ_QUEUE_MAX + 7);
    dq__core_clear(&core);
}
END_TEST

/* The cached keys follow the queue and the namespace. */
START_TEST(cache_follows_queue) {
    dq__core core;
    ck_assert_int_eq(dq__core_init(&core, NULL), DQ_OK);
    ck_assert_str_eq(keys_of(&core, "one", "dq"), "dq:{one}:due");
    ck_assert_str_eq(keys_of(&core, "two", "dq"), "dq:{two}:due");
    ck_assert_str_eq(keys_of(&core, "one", "dq"), "dq:{one}:due");
    /* a name that is a prefix of the previous one */
    ck_assert_str_eq(keys_of(&core, "on", "dq"), "dq:{on}:due");
    free(core.opts.ns);
    core.opts.ns = strdup("other:ns");
    ck_assert_str_eq(keys_of(&core, "on", "other:ns"), "other:ns:{on}:due");
    dq__core_clear(&core);
}
END_TEST

static Suite *keys_suite(void) {
    Suite *s = suite_create("keys");
    struct {
        const char *name;
        const TTest *test;
    } tests[] = {
        {"shape", shape_and_examples},
        {"injective", injective},
        {"longest", longest_name},
        {"cache", cache_follows_queue},
    };
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        TCase *tc = tcase_create(tests[i].name);
        tcase_set_timeout(tc, 30);
        tcase_add_test(tc, tests[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(keys_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
