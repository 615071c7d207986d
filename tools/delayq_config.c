/*
 * delayq_config.c - `delayq config`: shows and changes a queue's settings
 * stored in Redis (dq_config_get / dq_config_set), by the names
 * dq_setting_name gives them.
 */
#include "delayq_tool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char dqt_help_config[] =
    "Usage: delayq config QUEUE [NAME[=VALUE] ...] [--unset NAME] [--json]\n"
    "\n"
    "Shows or changes the settings of a queue, stored in Redis beside its\n"
    "jobs: every client and consumer of the queue follows them.  Without a\n"
    "NAME it shows all settings (\"-\" for one not set: the client's option\n"
    "or the default holds).  NAME shows that setting; NAME=VALUE sets it;\n"
    "--unset NAME (repeatable) removes it.  All changes of one call are\n"
    "made in one step (per partition); a bad name or value changes nothing.\n"
    "QUEUE may be left out when --queue (or $DELAYQ_QUEUE) names the\n"
    "queue: then a first argument that is a setting is taken for one.\n"
    "\n"
    "Settings:\n"
    "  max_attempts     deliveries before a job is dead-lettered, 0..1000000\n"
    "                   (0 = unlimited); a job's own comes first\n"
    "  lease_ms         lease of polls that ask for none (DUR or ms)\n"
    "  backoff          retry delay of consumers: fixed | exponential\n"
    "  backoff_base_ms  the fixed delay, or the first doubling one (DUR/ms)\n"
    "  backoff_cap_ms   the longest retry delay (DUR or ms)\n"
    "  backoff_jitter   0..100: up to this percent of a delay is taken off\n"
    "  dead_max         keep at most this many dead jobs (oldest go first)\n"
    "  dead_ttl_ms      keep a dead job at most this long (DUR or ms)\n"
    "  expired          what becomes of an expired job: dead | drop\n"
    "  rate_max         at most this many deliveries per rate_window_ms,\n"
    "                   over all consumers (set or unset both together)\n"
    "  rate_window_ms   the rate limit's window (DUR or ms)\n"
    "  layout           how pending jobs are stored: default | compact |\n"
    "                   compact-push (small jobs of huge backlogs in about\n"
    "                   100 B each, moved there by idle polls, or by\n"
    "                   pushes: slower pushes, compact at once)\n"
    "  inflight_max     at most this many jobs leased at once, over all\n"
    "                   consumers (a lease that ends frees its slot)\n"
    "  group_inflight_max  at most this many jobs of one group leased\n"
    "                   at once (a group at it waits, others are served)\n"
    "\n"
    "Options:\n"
    "  --unset NAME   remove a setting (repeatable)\n"
    "  --json         print {\"queue\": Q, \"settings\": {NAME: VALUE|null}}\n"
    "\n"
    "Examples:\n"
    "  delayq config emails\n"
    "  delayq config emails max_attempts=5 backoff=exponential "
    "backoff_base_ms=2s\n"
    "  delayq config emails rate_max=100 rate_window_ms=1s\n"
    "  delayq config emails --unset rate_max --unset rate_window_ms\n";

const dqt_optspec dqt_config_opts[] = {{"unset", 0, 1, DQT_O_UNSET},
                                       {"json", 0, 0, DQT_O_JSON},
                                       {NULL, 0, 0, 0}};

const char *dqt_setting_word(int s, int64_t v) {
    if (s == DQ_SET_BACKOFF)
        return v == DQ_BACKOFF_FIXED         ? "fixed"
               : v == DQ_BACKOFF_EXPONENTIAL ? "exponential"
                                             : NULL;
    if (s == DQ_SET_EXPIRED)
        return v == DQ_EXPIRED_DEAD ? "dead" : v == DQ_EXPIRED_DROP ? "drop"
                                                                    : NULL;
    if (s == DQ_SET_LAYOUT)
        return v == DQ_LAYOUT_DEFAULT        ? "default"
               : v == DQ_LAYOUT_COMPACT      ? "compact"
               : v == DQ_LAYOUT_COMPACT_PUSH ? "compact-push"
                                             : NULL;
    return NULL;
}

/* The setting called name, or 0 after a usage message. */
static int setting_of(const dqt_cli *g, const char *name) {
    int s = dq_setting_by_name(name);
    if (s > 0)
        return s;
    fprintf(stderr, "delayq config: unknown setting '%s' (known:", name);
    for (int i = 1; i <= DQ_SET__COUNT; i++)
        fprintf(stderr, " %s", dq_setting_name(i));
    fprintf(stderr, ")\nTry 'delayq %s --help'.\n", g->cmd);
    return 0;
}

/* Parses the value of setting s: the words of backoff, expired and layout, an
 * integer, or for a *_ms setting a duration.  0, or DQT_EXIT_USAGE after
 * a message.  The range is the library's to check. */
static int parse_value(int s, const char *val, int64_t *v) {
    const char *name = dq_setting_name(s);
    if (s == DQ_SET_BACKOFF || s == DQ_SET_EXPIRED || s == DQ_SET_LAYOUT) {
        for (int64_t k = 0; k <= 2; k++) {
            const char *w = dqt_setting_word(s, k);
            if (w != NULL && strcmp(val, w) == 0) {
                *v = k;
                return 0;
            }
        }
        fprintf(stderr, "delayq config: %s: '%s' is not %s\n", name, val,
                s == DQ_SET_BACKOFF   ? "fixed or exponential"
                : s == DQ_SET_EXPIRED ? "dead or drop"
                                      : "default, compact or compact-push");
        return DQT_EXIT_USAGE;
    }
    char *end;
    errno = 0;
    long long x = strtoll(val, &end, 10);
    if (*val != '\0' && *end == '\0' && errno == 0) {
        *v = x;
        return 0;
    }
    size_t n = strlen(name);
    if (n > 3 && strcmp(name + n - 3, "_ms") == 0 &&
        dqt_parse_duration(val, v) == 0)
        return 0;
    fprintf(stderr, "delayq config: %s: '%s' is not %s\n", name, val,
            n > 3 && strcmp(name + n - 3, "_ms") == 0
                ? "a number of ms or a duration (250ms, 30s, 5m...)"
                : "an integer");
    return DQT_EXIT_USAGE;
}

/* Prints settings s[0..n) with their values v. */
static void print_settings(const char *queue, int n, const int *s,
                           const int64_t *v, int json) {
    if (json) {
        fputs("{\"queue\":", stdout);
        dqt_json_cstr(stdout, queue);
        fputs(",\"settings\":{", stdout);
    }
    for (int i = 0; i < n; i++) {
        const char *name = dq_setting_name(s[i]);
        const char *w =
            v[i] == DQ_UNSET ? NULL : dqt_setting_word(s[i], v[i]);
        if (json) {
            printf("%s\"%s\":", i ? "," : "", name);
            if (v[i] == DQ_UNSET)
                fputs("null", stdout);
            else if (w != NULL)
                printf("\"%s\"", w);
            else
                printf("%" PRId64, v[i]);
        } else if (v[i] == DQ_UNSET) {
            printf("%-16s -\n", name);
        } else if (w != NULL) {
            printf("%-16s %s\n", name, w);
        } else {
            printf("%-16s %" PRId64 "\n", name, v[i]);
        }
    }
    if (json)
        fputs("}}\n", stdout);
}

/* Whether setting s is among the n of list. */
static int listed(const int *list, int n, int s) {
    for (int i = 0; i < n; i++)
        if (list[i] == s)
            return 1;
    return 0;
}

/* Whether arg is NAME or NAME=VALUE of a setting. */
static int names_setting(const char *arg) {
    size_t n = strcspn(arg, "=");
    for (int i = 1; i <= DQ_SET__COUNT; i++) {
        const char *name = dq_setting_name(i);
        if (strlen(name) == n && strncmp(arg, name, n) == 0)
            return 1;
    }
    return 0;
}

/* delayq config: show or change a queue's settings. */
int dqt_cmd_config(dqt_cli *g) {
    int json = 0, rc;
    /* every setting at most once to change, and once to show */
    int set_s[DQ_SET__COUNT], show_s[DQ_SET__COUNT];
    int64_t set_v[DQ_SET__COUNT], show_v[DQ_SET__COUNT];
    int nset = 0, nshow = 0;
    for (int i = 0; i < g->a.nopts; i++) {
        const dqt_optval *o = &g->a.opts[i];
        if (o->id == DQT_O_JSON) {
            json = 1;
        } else if (o->id == DQT_O_UNSET) {
            int s = setting_of(g, o->val);
            if (s == 0)
                return DQT_EXIT_USAGE;
            if (listed(set_s, nset, s))
                return dqt_usage_error(g, "setting '%s' is given twice",
                                       o->val);
            set_s[nset] = s;
            set_v[nset++] = DQ_UNSET;
        }
    }
    const char *queue;
    int first = 1; /* positional arguments after the queue */
    if (g->a.npos > 0 && g->queue != NULL && *g->queue != '\0' &&
        names_setting(g->a.pos[0])) {
        queue = g->queue; /* --queue names it, the settings follow */
        first = 0;
    } else if (g->a.npos > 0) {
        queue = g->a.pos[0];
    } else if (nset > 0) {
        return dqt_usage_error(g, "missing QUEUE%s", "");
    } else if ((queue = dqt_need_queue(g)) == NULL) {
        return DQT_EXIT_USAGE;
    }
    for (int i = first; i < g->a.npos; i++) {
        char *arg = g->a.pos[i], *eq = strchr(arg, '=');
        if (eq != NULL)
            *eq = '\0';
        int s = setting_of(g, arg);
        if (eq != NULL)
            *eq = '=';
        if (s == 0)
            return DQT_EXIT_USAGE;
        if (eq == NULL) {
            if (!listed(show_s, nshow, s))
                show_s[nshow++] = s;
            continue;
        }
        if (listed(set_s, nset, s))
            return dqt_usage_error(g, "setting '%s' is given twice",
                                   dq_setting_name(s));
        set_s[nset] = s;
        if ((rc = parse_value(s, eq + 1, &set_v[nset])))
            return rc;
        nset++;
    }
    if (nset == 0 && nshow == 0) { /* show all */
        for (int s = 1; s <= DQ_SET__COUNT; s++)
            show_s[nshow++] = s;
    }
    if ((rc = dqt_open_client(g)))
        return rc;
    if (nset > 0 &&
        (rc = dq_config_set(g->c, queue, (size_t)nset, set_s, set_v)) != 0)
        return dqt_report(g, rc);
    if (nshow == 0) /* changes only */
        return DQT_EXIT_OKAY;
    if ((rc = dq_config_get(g->c, queue, (size_t)nshow, show_s, show_v)) != 0)
        return dqt_report(g, rc);
    print_settings(queue, nshow, show_s, show_v, json);
    return DQT_EXIT_OKAY;
}
