/*
 * tests/fuzz/replay.c - main() for the fuzz targets in builds without
 * libFuzzer: runs LLVMFuzzerTestOneInput on every file named on the
 * command line, or on every file of the directories named there (sorted,
 * so runs are repeatable).  The corpora in tests/fuzz/corpus, including
 * every input that once found a bug (regress-*), run this way in every
 * build as plain tests: a finding that comes back aborts.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static long runs;

static void run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        exit(1);
    }
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (buf == NULL) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        exit(1);
    }
    /* An exact-size copy, so ASan sees reads past the input. */
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    runs++;
}

static int not_hidden(const struct dirent *e) { return e->d_name[0] != '.'; }

int main(int argc, char **argv) {
    if (LLVMFuzzerInitialize != NULL)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such file or directory: %s\n",
                    argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            run_file(argv[i]);
            continue;
        }
        struct dirent **list;
        int n = scandir(argv[i], &list, not_hidden, alphasort);
        if (n < 0) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            return 1;
        }
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], list[k]->d_name);
            run_file(path);
            free(list[k]);
        }
        free(list);
    }
    printf("replay: %ld inputs ran clean\n", runs);
    return runs > 0 ? 0 : 1;
}
