/*
 * tests/unit/test_cron.c - white-box tests of the cron parser (lib/cron.c)
 * and of the repeat options on dq_push_opts: every accepted form gives the
 * value sets it should, every bad form is refused with DQ_EINVAL and a
 * message (and leaves the options unchanged), expressions that can never
 * fire are refused, and the rule string push.lua gets lists values only.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "ops.h"
#include "pushopts.h"

/* Bits lo..hi set, every step-th. */
static uint64_t span(int lo, int hi, int step) {
    uint64_t b = 0;
    for (int v = lo; v <= hi; v += step)
        b |= UINT64_C(1) << v;
    return b;
}

/* Parses text, which must succeed. */
static dq__cron ok(const char *text) {
    dq__cron c;
    dq__err err;
    dq__err_clear(&err);
    int rc = dq__cron_parse(text, &c, &err);
    ck_assert_msg(rc == DQ_OK, "'%s': %d %s", text, rc, err.msg);
    return c;
}

START_TEST(cron_forms) {
    dq__cron c = ok("* * * * *");
    ck_assert(c.min == span(0, 59, 1) && c.hour == span(0, 23, 1) &&
              c.dom == span(1, 31, 1) && c.mon == span(1, 12, 1) &&
              c.dow == span(0, 6, 1) && !c.day_or);
    c = ok("*/2 * * * *");
    ck_assert(c.min == span(0, 59, 2));
    c = ok("30 9 * * 1-5");
    ck_assert(c.min == span(30, 30, 1) && c.hour == span(9, 9, 1) &&
              c.dow == span(1, 5, 1) && !c.day_or);
    c = ok("  0,15,30-40/5   0-23/6 1,15 JAN-mar,Dec sun,Sat ");
    ck_assert(c.min == (span(0, 0, 1) | span(15, 15, 1) | span(30, 40, 5)));
    ck_assert(c.hour == span(0, 23, 6));
    ck_assert(c.dom == (span(1, 1, 1) | span(15, 15, 1)));
    ck_assert(c.mon == (span(1, 3, 1) | span(12, 12, 1)));
    ck_assert(c.dow == (span(0, 0, 1) | span(6, 6, 1)));
    ck_assert(c.day_or); /* both day fields restricted */
    c = ok("0 0 * * 7");
    ck_assert(c.dow == span(0, 0, 1));
    c = ok("0 0 * * 5-7");
    ck_assert(c.dow == (span(5, 6, 1) | span(0, 0, 1)));
    c = ok("0 0 */2 * mon");
    ck_assert(!c.day_or); /* dom starts with '*': both must match */
    c = ok("0 0 29 2 *"); /* fires in leap years */
    ck_assert(c.dom == span(29, 29, 1) && c.mon == span(2, 2, 1));
    c = ok("0 0 31 4,6,9,11 1"); /* dom or dow: Mondays of those months */
    ck_assert(c.day_or);
    c = ok("59 23 31 12 *");
    c = ok("*/60 * * * *");
    ck_assert(c.min == 1);
    c = ok("0\t12\t*\t*\tTUE");
    ck_assert(c.dow == span(2, 2, 1));
}
END_TEST

static const char *const bad[] = {
    "", "   ", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *",
    "* * 0 * *", "* * 32 * *", "* * * 0 *", "* * * 13 *", "* * * * 8",
    "-1 * * * *", "*/0 * * * *", "*/61 * * * *", "*/ * * * *",
    "5-1 * * * *", "1/5 * * * *", "1- * * * *", "-5 * * * *",
    "1,,2 * * * *", ",1 * * * *", "1, * * * *", "** * * * *",
    "a * * * *", "* * * foo *", "* * * * funday", "* * * jan1 *",
    "* * * * mo", "1-2-3 * * * *", "*-5 * * * *", "99999999999 * * * *",
    "0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2-4/2 *", "0 0 30,31 feb *",
    "* * * * * ;", "0 0 1 1 1;", "0@ * * * *", "0 0 1 sun *",
    "0 0 * jan-dec/0 *", "1-5/2/2 * * * *", "0 0 * * mon-",
};

START_TEST(cron_bad) {
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dq__cron c;
        memset(&c, 0x5a, sizeof(c));
        dq__cron before = c;
        dq__err err;
        dq__err_clear(&err);
        int rc = dq__cron_parse(bad[i], &c, &err);
        ck_assert_msg(rc == DQ_EINVAL, "'%s' accepted (%d)", bad[i], rc);
        ck_assert_msg(strncmp(err.msg, "cron: ", 6) == 0, "'%s': message '%s'",
                      bad[i], err.msg);
        ck_assert_msg(memcmp(&c, &before, sizeof(c)) == 0,
                      "'%s': out written", bad[i]);
    }
    /* too long */
    char longer[DQ_CRON_TEXT_MAX + 10];
    memset(longer, ' ', sizeof(longer));
    memcpy(longer, "* * * * *", 9);
    longer[sizeof(longer) - 1] = '\0';
    dq__cron c;
    dq__err err;
    ck_assert_int_eq(dq__cron_parse(longer, &c, &err), DQ_EINVAL);
    ck_assert_int_eq(dq__cron_parse(NULL, &c, &err), DQ_ENULL);
}
END_TEST

START_TEST(cron_never) {
    dq__cron c;
    dq__err err;
    dq__err_clear(&err);
    ck_assert_int_eq(dq__cron_parse("0 0 30 2 *", &c, &err), DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "never"));
}
END_TEST

START_TEST(rule_string) {
    char buf[DQ_CRON_RULE_MAX];
    dq__cron c = ok("30 9 * * 1-5");
    size_t n = dq__cron_rule(&c, 330, "30  9 * * 1-5", buf, sizeof(buf));
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_str_eq(buf, "c330;30;9;1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,"
                          "17,18,19,20,21,22,23,24,25,26,27,28,29,30,31;"
                          "1,2,3,4,5,6,7,8,9,10,11,12;1,2,3,4,5;a;"
                          "30 9 * * 1-5");
    /* the longest expression fits */
    c = ok("* * * * *");
    char text[DQ_CRON_TEXT_MAX + 1];
    memset(text, ' ', DQ_CRON_TEXT_MAX);
    memcpy(text, "* * * * *", 9);
    text[DQ_CRON_TEXT_MAX] = '\0';
    ck_assert_uint_gt(dq__cron_rule(&c, -840, text, buf, sizeof(buf)), 0);
    char human[256];
    dq__repeat_text(buf, strlen(buf), human, sizeof(human));
    ck_assert_str_eq(human, "cron * * * * * tz -840");
    char small[40];
    ck_assert_uint_eq(dq__cron_rule(&c, 0, text, small, sizeof(small)), 0);
    dq__repeat_text("e5000;1700000000000", 19, human, sizeof(human));
    ck_assert_str_eq(human, "every 5000 ms from 1700000000000");
    dq__repeat_text("zz", 2, human, sizeof(human));
    ck_assert_str_eq(human, "");
}
END_TEST

START_TEST(opts_repeat) {
    dq_push_opts *o = dq_push_opts_new();
    ck_assert_ptr_nonnull(o);
    char ext[DQ_PUSH_OPTS_STR], rule[DQ_PUSH_RULE_STR];
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, 9), DQ_EINVAL);
    ck_assert_str_ne(dq_push_opts_errmsg(o), "");
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, -1), DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS,
                                      DQ_DELAY_MAX + 1), DQ_EINVAL);
    ck_assert_int_eq(dq__push_rule_str(o, rule, sizeof(rule)), 0);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, 10), DQ_OK);
    ck_assert_str_eq(dq_push_opts_errmsg(o), "");
    dq__push_rule_str(o, rule, sizeof(rule));
    ck_assert_str_eq(rule, "e10");
    dq__push_opts_str(o, ext, sizeof(ext));
    ck_assert_str_eq(ext, "|r");
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_TZ_OFFSET_MIN, 841),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_TZ_OFFSET_MIN, -841),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_TZ_OFFSET_MIN, -300),
                     DQ_OK);
    /* wrong kinds of option */
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_CRON, 1), DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_EVERY_MS, "5"),
                     DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set_str(o, 99, "* * * * *"), DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set_str(NULL, DQ_PUSHOPT_CRON, "* * * * *"),
                     DQ_ENULL);
    /* a bad cron leaves the every in place */
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_CRON, "0 0 30 2 *"),
                     DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(dq_push_opts_errmsg(o), "never"));
    dq__push_rule_str(o, rule, sizeof(rule));
    ck_assert_str_eq(rule, "e10");
    /* cron replaces every, and every replaces cron */
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_CRON, "*/2 * * * *"),
                     DQ_OK);
    dq__push_rule_str(o, rule, sizeof(rule));
    ck_assert_msg(strncmp(rule, "c-300;0,2,4,", 12) == 0, "%s", rule);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, 1000), DQ_OK);
    dq__push_rule_str(o, rule, sizeof(rule));
    ck_assert_str_eq(rule, "e1000");
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_CRON, "0 * * * *"),
                     DQ_OK);
    ck_assert_int_eq(dq_push_opts_set_str(o, DQ_PUSHOPT_CRON, NULL), DQ_OK);
    ck_assert_int_eq(dq__push_rule_str(o, rule, sizeof(rule)), 0);
    /* checks at push time: an id, no expiry */
    const char *ids[2] = {"a", NULL};
    int64_t t[2] = {0, 0};
    dq__err err;
    dq__err_clear(&err);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EVERY_MS, 1000), DQ_OK);
    ck_assert_int_eq(dq__check_push_opts(o, 1, t, 0, ids, &err), DQ_OK);
    ck_assert_int_eq(dq__check_push_opts(o, 2, t, 0, ids, &err), DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "id"));
    ck_assert_int_eq(dq__check_push_opts(o, 1, t, 0, NULL, &err), DQ_EINVAL);
    ck_assert_int_eq(dq_push_opts_set(o, DQ_PUSHOPT_EXPIRE_IN_MS, 5000), DQ_OK);
    ck_assert_int_eq(dq__check_push_opts(o, 1, t, 0, ids, &err), DQ_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "expire"));
    dq_push_opts_free(o);
    dq_push_opts_free(NULL);
    ck_assert_str_eq(dq_push_opts_errmsg(NULL), "");
}
END_TEST

/* Random texts shaped like cron (items of random values, ranges, steps
 * and names, sometimes a random byte of cron's alphabet in place): the
 * parser never reads past the text (ASan builds check), and whatever it
 * accepts has every field non-empty and a rule that fits. */
static unsigned rnd(unsigned *seed, unsigned n) {
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 16) % n;
}

START_TEST(cron_random_texts) {
    static const char alpha[] = "0123456789*-/, \tJanMonSUN";
    static const char *const names[] = {"jan", "DEC", "mon", "Sun", "sat"};
    unsigned seed = 12345;
    int accepted = 0, refused = 0;
    for (int i = 0; i < 100000; i++) {
        char text[160];
        size_t len = 0;
        int nf = 4 + (int)rnd(&seed, 3);
        for (int f = 0; f < nf; f++) {
            int items = 1 + (int)rnd(&seed, 3);
            for (int it = 0; it < items; it++) {
                int a = (int)rnd(&seed, 62), b = (int)rnd(&seed, 62);
                switch (rnd(&seed, 6)) {
                case 0:
                    len += (size_t)sprintf(text + len, "*");
                    break;
                case 1:
                    len += (size_t)sprintf(text + len, "%d", a % 32);
                    break;
                case 2:
                    len += (size_t)sprintf(text + len, "%d-%d", a % 13,
                                           b % 24);
                    break;
                case 3:
                    len += (size_t)sprintf(text + len, "*/%d", a);
                    break;
                case 4:
                    len += (size_t)sprintf(text + len, "%d-%d/%d", a % 7,
                                           a % 7 + b % 20, 1 + b % 9);
                    break;
                default:
                    len += (size_t)sprintf(text + len, "%s",
                                           names[rnd(&seed, 5)]);
                }
                if (it + 1 < items)
                    text[len++] = ',';
            }
            if (f + 1 < nf)
                text[len++] = ' ';
        }
        text[len] = '\0';
        if (len > 0 && rnd(&seed, 4) == 0)
            text[rnd(&seed, (unsigned)len)] =
                alpha[rnd(&seed, sizeof(alpha) - 1)];
        char *heap = malloc(len + 1); /* exact size: overreads show */
        memcpy(heap, text, len + 1);
        dq__cron c;
        dq__err err;
        if (dq__cron_parse(heap, &c, &err) == DQ_OK) {
            accepted++;
            ck_assert_msg(c.min && c.hour && c.dom && c.mon && c.dow,
                          "'%s': an empty field", heap);
            char rule[DQ_CRON_RULE_MAX];
            ck_assert_uint_gt(dq__cron_rule(&c, 0, heap, rule, sizeof(rule)),
                              0);
        } else {
            refused++;
            ck_assert_int_eq(err.code, DQ_EINVAL);
        }
        free(heap);
    }
    ck_assert_int_gt(accepted, 100);
    ck_assert_int_gt(refused, 100);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cron");
    TCase *tc = tcase_create("cron");
    tcase_add_test(tc, cron_forms);
    tcase_add_test(tc, cron_bad);
    tcase_add_test(tc, cron_never);
    tcase_add_test(tc, rule_string);
    tcase_add_test(tc, opts_repeat);
    tcase_add_test(tc, cron_random_texts);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
