/*
 * delayq_args.c - the command line: options and positional arguments of
 * the tool and its commands, and the values they take (durations such as
 * 1h30m, times in ISO-8601 or epoch ms, integers in a range).
 */
#include "delayq_tool.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const dqt_optspec dqt_no_opts[] = {{NULL, 0, 0, 0}};

/* ---- Command line parsing ------------------------------------------------ */

/* Global options, accepted before and after the command. */
static const dqt_optspec global_opts[] = {
    {"help", 'h', 0, DQT_O_HELP},     {"uri", 'u', 1, DQT_O_URI},
    {"queue", 'q', 1, DQT_O_QUEUE},   {"namespace", 'n', 1, DQT_O_NS},
    {"version", 0, 0, DQT_O_VERSION}, {"counters", 0, 0, DQT_O_COUNTERS},
    {NULL, 0, 0, 0}};

void dqt_args_free(dqt_args *a) {
    free(a->opts);
    free(a->pos);
    memset(a, 0, sizeof(*a));
}

/* The option called name (nlen bytes) or short_name in the tables. */
static const dqt_optspec *find_opt(const dqt_optspec *const *tables,
                                   const char *name, size_t nlen,
                                   char short_name) {
    for (int t = 0; tables[t] != NULL; t++)
        for (const dqt_optspec *o = tables[t]; o->name != NULL; o++) {
            if (short_name ? o->short_name == short_name
                           : (strlen(o->name) == nlen &&
                              strncmp(o->name, name, nlen) == 0))
                return o;
        }
    return NULL;
}

/* Prints a usage error and returns DQT_EXIT_USAGE. */
int dqt_usage_error(const dqt_cli *g, const char *fmt, const char *arg) {
    fprintf(stderr, "delayq%s%s: ", g->cmd ? " " : "", g->cmd ? g->cmd : "");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'delayq %s%s--help'.\n", g->cmd ? g->cmd : "",
            g->cmd ? " " : "");
    return DQT_EXIT_USAGE;
}

/* Parses argv[0..argc) against the command's options and the global ones.
 * With stop_at_pos, parsing stops at the first positional argument (which
 * is left in a->rest), as used before the command name. */
int dqt_parse_args(dqt_cli *g, int argc, char **argv, const dqt_optspec *specs,
                   int stop_at_pos, dqt_args *a) {
    const dqt_optspec *tables[3] = {global_opts, specs, NULL};
    memset(a, 0, sizeof(*a));
    a->opts = calloc((size_t)argc + 1, sizeof(*a->opts));
    a->pos = calloc((size_t)argc + 1, sizeof(*a->pos));
    if (a->opts == NULL || a->pos == NULL) {
        fprintf(stderr, "delayq: out of memory\n");
        return DQT_EXIT_FAILED;
    }
    for (int i = 0; i < argc; i++) {
        char *s = argv[i];
        if (strcmp(s, "--") == 0) {
            a->rest = argv + i + 1;
            a->nrest = argc - i - 1;
            break;
        }
        if (s[0] != '-' || s[1] == '\0') {
            if (stop_at_pos) {
                a->rest = argv + i;
                a->nrest = argc - i;
                break;
            }
            a->pos[a->npos++] = s;
            continue;
        }
        const dqt_optspec *o;
        const char *val = NULL;
        if (s[1] == '-') {
            const char *name = s + 2, *eq = strchr(name, '=');
            size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
            o = find_opt(tables, name, nlen, 0);
            if (o == NULL)
                return dqt_usage_error(g, "unknown option '%s'", s);
            if (eq != NULL) {
                if (o->arg == 0)
                    return dqt_usage_error(g, "option '--%s' takes no value",
                                           o->name);
                val = eq + 1;
            }
        } else {
            if (s[2] != '\0')
                return dqt_usage_error(g,
                                       "unknown option '%s' (long options "
                                       "start with --)",
                                       s);
            o = find_opt(tables, NULL, 0, s[1]);
            if (o == NULL)
                return dqt_usage_error(g, "unknown option '%s'", s);
        }
        if (val == NULL && o->arg == 1) {
            if (i + 1 >= argc)
                return dqt_usage_error(g, "option '%s' needs a value", s);
            val = argv[++i];
        } else if (val == NULL && o->arg == 2 && i + 1 < argc) {
            int64_t ms;
            if (dqt_parse_duration(argv[i + 1], &ms) == 0)
                val = argv[++i];
        }
        dqt_optval *ov = &a->opts[a->nopts++];
        ov->id = o->id;
        ov->name = o->name;
        ov->val = val;
        switch (o->id) {
        case DQT_O_HELP:
            g->help = 1;
            break;
        case DQT_O_VERSION:
            g->version = 1;
            break;
        case DQT_O_URI:
            g->uri = val;
            break;
        case DQT_O_QUEUE:
            g->queue = val;
            break;
        case DQT_O_NS:
            g->ns = val;
            break;
        case DQT_O_COUNTERS:
            g->counters = 1;
            break;
        default:
            break;
        }
    }
    return DQT_EXIT_OKAY;
}

/* Value parsers for options: each returns 0 or a usage error exit code. */
int dqt_opt_duration(const dqt_cli *g, const dqt_optval *o, int64_t *ms) {
    if (o->val == NULL || dqt_parse_duration(o->val, ms) != 0) {
        fprintf(stderr,
                "delayq %s: --%s: '%s' is not a duration; use a number with "
                "a unit (250ms, 30s, 5m, 2h, 14d, 1h30m)\n",
                g->cmd, o->name, o->val ? o->val : "");
        return DQT_EXIT_USAGE;
    }
    return 0;
}

/* Parses an integer option value in lo..hi. */
int dqt_opt_int(const dqt_cli *g, const dqt_optval *o, int64_t lo, int64_t hi,
                int64_t *v) {
    char *end;
    errno = 0;
    long long x = o->val ? strtoll(o->val, &end, 10) : 0;
    if (o->val == NULL || *o->val == '\0' || *end != '\0' || errno != 0 ||
        x < lo || x > hi) {
        fprintf(stderr,
                "delayq %s: --%s: '%s' is not an integer in %" PRId64
                "..%" PRId64 "\n",
                g->cmd, o->name, o->val ? o->val : "", lo, hi);
        return DQT_EXIT_USAGE;
    }
    *v = x;
    return 0;
}

/* Fails unless the command got between lo and hi positional arguments. */
int dqt_npos_check(const dqt_cli *g, int lo, int hi, const char *what) {
    if (g->a.npos < lo) {
        fprintf(stderr, "delayq %s: missing %s\nTry 'delayq %s --help'.\n",
                g->cmd, what, g->cmd);
        return DQT_EXIT_USAGE;
    }
    if (hi >= 0 && g->a.npos > hi)
        return dqt_usage_error(g, "unexpected argument '%s'", g->a.pos[hi]);
    return 0;
}

/* ---- Durations, times and clocks ----------------------------------------- */

/* Parses "250ms", "30s", "5m", "2h", "14d", combinations ("1h30m") and a
 * bare "0".  Returns 0 and *ms, or -1. */
int dqt_parse_duration(const char *s, int64_t *ms) {
    if (s == NULL || *s == '\0')
        return -1;
    if (strcmp(s, "0") == 0) {
        *ms = 0;
        return 0;
    }
    int64_t total = 0;
    const char *p = s;
    while (*p) {
        if (!isdigit((unsigned char)*p))
            return -1;
        int64_t v = 0;
        while (isdigit((unsigned char)*p)) {
            if (v > (INT64_MAX - 9) / 10)
                return -1;
            v = v * 10 + (*p++ - '0');
        }
        int64_t unit;
        if (strncmp(p, "ms", 2) == 0) {
            unit = 1;
            p += 2;
        } else if (*p == 's') {
            unit = 1000;
            p++;
        } else if (*p == 'm') {
            unit = 60 * 1000;
            p++;
        } else if (*p == 'h') {
            unit = 3600 * 1000;
            p++;
        } else if (*p == 'd') {
            unit = 86400 * 1000;
            p++;
        } else {
            return -1; /* no unit */
        }
        if (v > (INT64_MAX - total) / unit)
            return -1;
        total += v * unit;
    }
    *ms = total;
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* Reads exactly n digits at *p into *v. */
static int digits(const char **p, int n, int *v) {
    int x = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return -1;
        x = x * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *v = x;
    return 0;
}

/* Parses an ISO-8601 time (YYYY-MM-DD[THH:MM[:SS[.fff]]](Z|+HH:MM|-HH:MM);
 * a date alone is midnight UTC) or all-digit epoch ms.  0 or -1. */
int dqt_parse_time(const char *s, int64_t *ms) {
    const char *p = s;
    if (*p == '\0')
        return -1;
    if (strspn(s, "0123456789") == strlen(s)) {
        if (strlen(s) > 18)
            return -1;
        *ms = strtoll(s, NULL, 10);
        return 0;
    }
    int y, mo, d, h = 0, mi = 0, se = 0, frac = 0;
    if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) ||
        *p++ != '-' || digits(&p, 2, &d))
        return -1;
    int64_t off_min = 0;
    if (*p != '\0') {
        if (*p != 'T' && *p != 't' && *p != ' ')
            return -1;
        p++;
        if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi))
            return -1;
        if (*p == ':') {
            p++;
            if (digits(&p, 2, &se))
                return -1;
            if (*p == '.' || *p == ',') {
                p++;
                int nd = 0;
                while (isdigit((unsigned char)*p)) {
                    if (nd < 3)
                        frac = frac * 10 + (*p - '0');
                    nd++;
                    p++;
                }
                if (nd == 0)
                    return -1;
                for (; nd < 3; nd++)
                    frac *= 10;
            }
        }
        if (*p == 'Z' || *p == 'z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int sign = *p++ == '-' ? -1 : 1, oh, om = 0;
            if (digits(&p, 2, &oh))
                return -1;
            if (*p == ':')
                p++;
            if (*p != '\0' && digits(&p, 2, &om))
                return -1;
            if (oh > 23 || om > 59)
                return -1;
            off_min = sign * (oh * 60 + om);
        } else {
            return -1; /* no zone: refuse to guess */
        }
        if (*p != '\0')
            return -1;
    }
    static const int mdays[12] = {31, 29, 31, 30, 31, 30,
                                  31, 31, 30, 31, 30, 31};
    if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 ||
        mi > 59 || se > 60)
        return -1;
    if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return -1;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 +
                   se - off_min * 60;
    *ms = secs * 1000 + frac;
    return 0;
}

/* Monotonic clock in ms. */
int64_t dqt_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* This machine's wall clock in epoch ms (only for display). */
int64_t dqt_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleeps ms; a signal ends the sleep early. */
void dqt_sleep_ms(int64_t ms) {
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* a signal ends it early, on purpose */
}
