/*
 * test_version.c - the compile-time version macros of delayq.h agree with
 * each other, with the library loaded at run time and with meson's project
 * version (argv[1]).  Prints each check; exits 1 on any mismatch.
 */
#include <delayq.h>

#include <stdio.h>
#include <string.h>

static int failures;

static void check(int ok, const char *what) {
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    if (!ok)
        failures++;
}

int main(int argc, char **argv) {
    char buf[64];
    if (argc != 2) {
        fprintf(stderr, "usage: test_version MESON_PROJECT_VERSION\n");
        return 2;
    }
    snprintf(buf, sizeof(buf), "%d.%d.%d", DQ_VERSION_MAJOR, DQ_VERSION_MINOR,
             DQ_VERSION_PATCH);
    printf("header %s (%d), library %s (%d), meson %s\n", DQ_VERSION_STRING,
           DQ_VERSION_NUMBER, dq_version_string(), dq_version_number(),
           argv[1]);
    check(strcmp(buf, DQ_VERSION_STRING) == 0,
          "DQ_VERSION_STRING == MAJOR.MINOR.PATCH");
    check(DQ_VERSION_NUMBER == DQ_VERSION_MAJOR * 10000 +
                                   DQ_VERSION_MINOR * 100 + DQ_VERSION_PATCH,
          "DQ_VERSION_NUMBER == MAJOR*10000 + MINOR*100 + PATCH");
    check(DQ_VERSION_MINOR < 100 && DQ_VERSION_PATCH < 100,
          "MINOR and PATCH fit their two digits");
    check(strcmp(DQ_VERSION_STRING, argv[1]) == 0,
          "DQ_VERSION_STRING == meson project version");
    check(dq_version_number() == DQ_VERSION_NUMBER,
          "dq_version_number() == DQ_VERSION_NUMBER");
    check(dq_version_string() != NULL &&
              strcmp(dq_version_string(), DQ_VERSION_STRING) == 0,
          "dq_version_string() == DQ_VERSION_STRING");
    check(DQ_AT_LEAST_VERSION(DQ_VERSION_MAJOR, DQ_VERSION_MINOR,
                              DQ_VERSION_PATCH),
          "DQ_AT_LEAST_VERSION(current) is true");
    check(DQ_AT_LEAST_VERSION(0, 0, 0), "DQ_AT_LEAST_VERSION(0,0,0) is true");
    check(!DQ_AT_LEAST_VERSION(DQ_VERSION_MAJOR + 1, 0, 0),
          "DQ_AT_LEAST_VERSION(next major) is false");
    check(!DQ_AT_LEAST_VERSION(DQ_VERSION_MAJOR, DQ_VERSION_MINOR,
                               DQ_VERSION_PATCH + 1),
          "DQ_AT_LEAST_VERSION(next patch) is false");
    return failures ? 1 : 0;
}
