/*
 * delayq_inspect.c - the commands that look at a queue as a whole: list
 * (peek), stats (with --watch) and dead (requeue, purge, list).
 */
#include "delayq_tool.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- list ---------------------------------------------------------------- */

const dqt_optspec dqt_list_opts[] = {{"offset", 0, 1, DQT_O_OFFSET},
                                     {"limit", 0, 1, DQT_O_LIMIT},
                                     {"json", 0, 0, DQT_O_JSON},
                                     {NULL, 0, 0, 0}};

/* Fetches one page of jobs in state st; *now_ms receives the server's time
 * when known (dq_list), else this machine's.  Returns count or a code. */
static int fetch_state(dqt_cli *g, const char *queue, int st, int64_t offset,
                       int limit, dq_jobs **jobs, int64_t *now_ms) {
#ifdef DQ_HAVE_LIST
    static const int which[3] = {DQ_LIST_SCHEDULED, DQ_LIST_INFLIGHT,
                                 DQ_LIST_DEAD};
    return dq_list(g->c, queue, which[st], offset, limit, jobs, now_ms);
#else
    *now_ms = dqt_wall_ms();
    if (st != DQT_ST_DEAD) {
        *jobs = NULL;
        return DQ_ENOTSUP;
    }
    return dq_dead_list(g->c, queue, offset, limit, jobs);
#endif
}

/* 1 if this libdelayq can list scheduled and in-flight jobs. */
static int have_list(void) {
#ifdef DQ_HAVE_LIST
    return 1;
#else
    return 0;
#endif
}

/* Lists the states in mask (bit per DQT_ST_*). */
static int list_states(dqt_cli *g, unsigned mask, int explicit_state) {
    int64_t offset = 0, limit = 50;
    int json = 0, rc;
    for (int i = 0; i < g->a.nopts; i++) {
        const dqt_optval *o = &g->a.opts[i];
        rc = 0;
        if (o->id == DQT_O_OFFSET)
            rc = dqt_opt_int(g, o, 0, INT32_MAX, &offset);
        else if (o->id == DQT_O_LIMIT)
            rc = dqt_opt_int(g, o, 1, DQ_POLL_MAX, &limit);
        else if (o->id == DQT_O_JSON)
            json = 1;
        if (rc)
            return rc;
    }
    if (!have_list()) {
        if (explicit_state && (mask & ~(1u << DQT_ST_DEAD))) {
            fprintf(stderr,
                    "delayq %s: listing scheduled or in-flight jobs needs a "
                    "libdelayq with dq_list (this one has only dead-letter "
                    "listing) (ENOTSUP)\n",
                    g->cmd);
            return DQT_EXIT_FAILED;
        }
        if (mask != (1u << DQT_ST_DEAD))
            fprintf(stderr,
                    "delayq %s: note: this libdelayq lists dead jobs only "
                    "(no dq_list)\n",
                    g->cmd);
        mask = 1u << DQT_ST_DEAD;
    }
    const char *queue;
    if ((rc = dqt_start(g, &queue)))
        return rc;
    dq_jobs *got[3] = {NULL, NULL, NULL};
    int64_t now = 0;
    for (int st = 0; st < 3; st++) {
        if (!(mask & (1u << st)))
            continue;
        rc = fetch_state(g, queue, st, offset, (int)limit, &got[st], &now);
        if (rc < 0) {
            for (int k = 0; k < 3; k++)
                dq_jobs_free(got[k]);
            return dqt_report(g, rc);
        }
    }
    if (json) {
        fputs("{\"queue\":", stdout);
        dqt_json_cstr(stdout, queue);
        printf(",\"now_ms\":%" PRId64 ",\"offset\":%" PRId64 ",\"jobs\":[", now,
               offset);
        int first = 1;
        for (int st = 0; st < 3; st++)
            if (mask & (1u << st))
                dqt_print_jobs_json(st, got[st], &first);
        puts("]}");
    } else {
        int shown = 0;
        for (int st = 0; st < 3; st++) {
            if (!(mask & (1u << st)))
                continue;
            if (shown++)
                putchar('\n');
            dqt_print_jobs_table(st, got[st], now, offset);
            if ((int64_t)dq_jobs_count(got[st]) == limit)
                printf("  (more may follow: --offset %" PRId64 ")\n",
                       offset + limit);
        }
    }
    for (int st = 0; st < 3; st++)
        dq_jobs_free(got[st]);
    return DQT_EXIT_OKAY;
}

/* delayq list / peek: jobs of one state or all three. */
int dqt_cmd_list(dqt_cli *g) {
    unsigned mask = 7;
    int explicit_state = 0, rc;
    if ((rc = dqt_npos_check(g, 0, 1, "")))
        return rc;
    if (g->a.npos == 1) {
        const char *w = g->a.pos[0];
        explicit_state = 1;
        if (strcmp(w, "scheduled") == 0 || strcmp(w, "pending") == 0)
            mask = 1u << DQT_ST_SCHEDULED;
        else if (strcmp(w, "inflight") == 0 || strcmp(w, "in-flight") == 0)
            mask = 1u << DQT_ST_INFLIGHT;
        else if (strcmp(w, "dead") == 0)
            mask = 1u << DQT_ST_DEAD;
        else if (strcmp(w, "all") == 0)
            explicit_state = 0;
        else
            return dqt_usage_error(g,
                                   "unknown state '%s' (use scheduled, "
                                   "inflight, dead or all)",
                                   w);
    }
    return list_states(g, mask, explicit_state);
}

/* ---- stats --------------------------------------------------------------- */

const dqt_optspec dqt_stats_opts[] = {{"json", 0, 0, DQT_O_JSON},
                                      {"prometheus", 0, 0, DQT_O_PROM},
                                      {"watch", 0, 2, DQT_O_WATCH},
                                      {"count", 0, 1, DQT_O_COUNT},
                                      {NULL, 0, 0, 0}};

#define DQT_STATS_QUEUES 10000 /* queues shown without names given */

static volatile sig_atomic_t got_stop; /* SIGINT/SIGTERM count */

/* Signal handler of SIGINT and SIGTERM during stats --watch. */
static void on_stop(int sig) {
    (void)sig;
    got_stop++;
}

/* Installs on_stop for SIGINT and SIGTERM, without SA_RESTART so that
 * sleeps end early. */
static void catch_stop(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* The options of delayq stats into *mode, *watch, *interval, *count;
 * 0 or an exit code after a message. */
static int stats_opts(dqt_cli *g, int *mode, int *watch, int64_t *interval,
                      int64_t *count) {
    for (int i = 0; i < g->a.nopts; i++) {
        const dqt_optval *o = &g->a.opts[i];
        int rc = 0;
        if (o->id == DQT_O_JSON || o->id == DQT_O_PROM) {
            if (*mode != 0 && *mode != o->id)
                return dqt_usage_error(g, "use either --json or --prometheus%s",
                                       "");
            *mode = o->id;
        } else if (o->id == DQT_O_WATCH) {
            *watch = 1;
            if (o->val != NULL &&
                (rc = dqt_opt_duration(g, o, interval)) == 0 &&
                *interval < 100) {
                fprintf(stderr, "delayq stats: --watch: the interval must "
                                "be at least 100ms\n");
                return DQT_EXIT_USAGE;
            }
        } else if (o->id == DQT_O_COUNT) {
            rc = dqt_opt_int(g, o, 1, INT32_MAX, count);
        }
        if (rc)
            return rc;
    }
    if (*count > 0 && !*watch)
        return dqt_usage_error(g, "--count needs --watch%s", "");
    return 0;
}

/* The queues a round of delayq stats shows: those named (arguments, else
 * --queue), or with neither every queue of the namespace (dq_queues, read
 * again each round: *list holds their names).  The count, or a negative
 * exit code after a message. */
static int stats_queues(dqt_cli *g, dq_queue_list **list, char ***queues) {
    if (g->a.npos > 0 || (g->queue != NULL && *g->queue)) {
        *queues = g->a.npos > 0 ? g->a.pos : (char **)&g->queue;
        return g->a.npos > 0 ? g->a.npos : 1;
    }
    dq_queue_list_free(*list);
    free(*queues);
    *queues = NULL;
    int n = dq_queues(g->c, DQT_STATS_QUEUES, list);
    if (n < 0)
        return -dqt_report(g, n);
    if (!dq_queue_list_complete(*list))
        fprintf(stderr, "delayq stats: only the first %d queues found are "
                        "shown (the listing's bounds); name others\n", n);
    if ((*queues = calloc((size_t)n + 1, sizeof(char *))) == NULL) {
        fprintf(stderr, "delayq stats: out of memory\n");
        return -DQT_EXIT_FAILED;
    }
    for (int i = 0; i < n; i++)
        (*queues)[i] = (char *)dq_queue_list_name(*list, (size_t)i);
    return n;
}

/* Reads the counts of *nq queues into st; 0 or an exit code.  all: the
 * queues were found, not named: one whose partition count is not the
 * client's (DQ_EINVAL) is named on stderr and left out (*nq less). */
static int stats_read(dqt_cli *g, char **queues, int *nq, dqt_qstats *st,
                      int all) {
    for (int i = 0; i < *nq; i++) {
        int rc = dq_stats(g->c, queues[i], &st[i].v[0], &st[i].v[1],
                          &st[i].v[2], &st[i].v[3], &st[i].v[4]);
        if (rc >= 0)
            rc = dq_counters(g->c, queues[i], &st[i].k[0], &st[i].k[1],
                             &st[i].k[2], &st[i].k[3]);
        if (rc == DQ_EINVAL && all) {
            fprintf(stderr, "delayq stats: %s: %s (EINVAL)\n", queues[i],
                    dq_errmsg(g->c));
            memmove(queues + i, queues + i + 1,
                    sizeof(*queues) * (size_t)(*nq - i - 1));
            (*nq)--;
            i--;
        } else if (rc < 0) {
            return got_stop ? DQT_EXIT_OKAY : dqt_report(g, rc);
        }
    }
    return DQT_EXIT_OKAY;
}

/* One round of delayq stats: finds the queues, reads and prints them. */
static int stats_round(dqt_cli *g, dq_queue_list **list, char ***queues,
                       int mode, int head, int64_t interval, int64_t round) {
    int nq = stats_queues(g, list, queues);
    if (nq < 0)
        return -nq;
    dqt_qstats *st = calloc((size_t)nq + 1, sizeof(*st));
    if (st == NULL) {
        fprintf(stderr, "delayq stats: out of memory\n");
        return DQT_EXIT_FAILED;
    }
    int ret = stats_read(g, *queues, &nq, st, *list != NULL);
    if (ret == DQT_EXIT_OKAY && !got_stop) {
        if (head) {
            char iso[40], d[48];
            if (isatty(1))
                fputs("\033[H\033[2J", stdout);
            else if (round > 0)
                putchar('\n');
            printf("delayq stats every %s at %s (Ctrl-C to stop)\n\n",
                   dqt_fmt_dur(interval, d, sizeof(d)),
                   dqt_fmt_iso(dqt_wall_ms(), iso, sizeof(iso)));
        }
        dqt_print_stats(*queues, nq, st, mode, dqt_wall_ms());
        fflush(stdout);
    }
    free(st);
    return ret;
}

/* delayq stats: counts of queues (those named, else every queue of the
 * namespace), once or --watch. */
int dqt_cmd_stats(dqt_cli *g) {
    int mode = 0, watch = 0, rc;
    int64_t interval = 2000, count = 0;
    if ((rc = stats_opts(g, &mode, &watch, &interval, &count)) ||
        (rc = dqt_open_client(g)))
        return rc;
    if (watch)
        catch_stop();
    dq_queue_list *list = NULL;
    char **found = NULL; /* names of list (or borrowed: not freed) */
    int ret = DQT_EXIT_OKAY;
    for (int64_t round = 0; !got_stop && ret == DQT_EXIT_OKAY; round++) {
        int64_t t0 = dqt_mono_ms();
        char **queues = found;
        ret = stats_round(g, &list, &queues, mode, watch && mode == 0,
                          interval, round);
        found = list != NULL ? queues : NULL;
        if (ret != DQT_EXIT_OKAY || !watch ||
            (count > 0 && round + 1 >= count))
            break;
        int64_t left = interval - (dqt_mono_ms() - t0);
        while (left > 0 && !got_stop) {
            dqt_sleep_ms(left);
            left = interval - (dqt_mono_ms() - t0);
        }
    }
    free(found);
    dq_queue_list_free(list);
    return ret;
}

/* ---- groups -------------------------------------------------------------- */

const dqt_optspec dqt_groups_opts[] = {{"json", 0, 0, DQT_O_JSON},
                                       {"max", 0, 1, DQT_O_MAX},
                                       {NULL, 0, 0, 0}};

/* The list of delayq groups, as a table or JSON. */
static void print_groups(const char *queue, const dq_group_list *l,
                         int json) {
    size_t n = dq_group_list_count(l);
    if (json) {
        fputs("{\"queue\":", stdout);
        dqt_json_cstr(stdout, queue);
        fputs(",\"groups\":[", stdout);
    } else {
        printf("%-24s %10s %10s %10s\n", "GROUP", "DUE", "LATER",
               "INFLIGHT");
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = dq_group_list_name(l, i);
        int64_t v[3] = {dq_group_list_due(l, i), dq_group_list_later(l, i),
                        dq_group_list_inflight(l, i)};
        if (json) {
            printf("%s{\"group\":", i ? "," : "");
            dqt_json_cstr(stdout, name);
            printf(",\"due\":%" PRId64 ",\"later\":%" PRId64
                   ",\"inflight\":%" PRId64 "}", v[0], v[1], v[2]);
        } else {
            printf("%-24s %10" PRId64 " %10" PRId64 " %10" PRId64 "\n",
                   *name ? name : "(none)", v[0], v[1], v[2]);
        }
    }
    if (json)
        puts("]}");
}

/* delayq groups: the counts of a queue's tenant groups. */
int dqt_cmd_groups(dqt_cli *g) {
    int json = 0, rc;
    int64_t max = 20;
    for (int i = 0; i < g->a.nopts; i++) {
        const dqt_optval *o = &g->a.opts[i];
        if (o->id == DQT_O_JSON)
            json = 1;
        else if (o->id == DQT_O_MAX &&
                 (rc = dqt_opt_int(g, o, 1, DQ_GROUP_STATS_MAX, &max)))
            return rc;
    }
    if ((rc = dqt_npos_check(g, 0, 1, "queue")))
        return rc;
    if (g->a.npos == 1)
        g->queue = g->a.pos[0];
    const char *queue;
    if ((rc = dqt_start(g, &queue)))
        return rc;
    dq_group_list *l = NULL;
    rc = dq_group_stats(g->c, queue, (int)max, &l);
    if (rc < 0)
        return dqt_report(g, rc);
    print_groups(queue, l, json);
    dq_group_list_free(l);
    return DQT_EXIT_OKAY;
}

/* ---- dead ---------------------------------------------------------------- */

const dqt_optspec dqt_dead_opts[] = {
    {"all", 0, 0, DQT_O_ALL},       {"in", 0, 1, DQT_O_IN},
    {"offset", 0, 1, DQT_O_OFFSET}, {"limit", 0, 1, DQT_O_LIMIT},
    {"json", 0, 0, DQT_O_JSON},     {NULL, 0, 0, 0}};

/* delayq dead: requeue, purge or list dead jobs. */
int dqt_cmd_dead(dqt_cli *g) {
    int rc, all = 0;
    int64_t delay = 0;
    if (g->a.npos < 1) {
        fprintf(stderr, "delayq dead: missing action (requeue, purge or "
                        "list)\nTry 'delayq dead --help'.\n");
        return DQT_EXIT_USAGE;
    }
    const char *action = g->a.pos[0];
    int requeue = strcmp(action, "requeue") == 0;
    if (strcmp(action, "list") == 0) {
        if (g->a.npos > 1)
            return dqt_usage_error(g, "unexpected argument '%s'", g->a.pos[1]);
        for (int i = 0; i < g->a.nopts; i++)
            if (g->a.opts[i].id == DQT_O_ALL || g->a.opts[i].id == DQT_O_IN)
                return dqt_usage_error(g,
                                       "option '--%s' is for requeue and purge",
                                       g->a.opts[i].name);
        return list_states(g, 1u << DQT_ST_DEAD, 1);
    }
    if (!requeue && strcmp(action, "purge") != 0)
        return dqt_usage_error(g,
                               "unknown action '%s' (use requeue, purge or "
                               "list)",
                               action);
    for (int i = 0; i < g->a.nopts; i++) {
        const dqt_optval *o = &g->a.opts[i];
        if (o->id == DQT_O_ALL) {
            all = 1;
        } else if (o->id == DQT_O_IN) {
            if (!requeue)
                return dqt_usage_error(g, "--in is for requeue%s", "");
            if ((rc = dqt_opt_duration(g, o, &delay)))
                return rc;
        } else if (o->id == DQT_O_OFFSET || o->id == DQT_O_LIMIT ||
                   o->id == DQT_O_JSON) {
            return dqt_usage_error(g, "option '--%s' is for list", o->name);
        }
    }
    if (all == (g->a.npos > 1))
        return dqt_usage_error(g, "give job ids or --all (one of the two)%s",
                               "");
    const char *queue;
    if ((rc = dqt_start(g, &queue)))
        return rc;
    int64_t done = 0;
    int ret = DQT_EXIT_OKAY;
    if (all) {
        /* Each call handles up to 1000 of the oldest.  Bounded by the
         * count seen at the start, so jobs that keep dying meanwhile (a
         * requeue to a failing consumer) cannot keep us looping. */
        int64_t dead0 = 0;
        if ((rc = dq_stats(g->c, queue, NULL, NULL, NULL, &dead0, NULL)) < 0)
            return dqt_report(g, rc);
        for (int64_t round = 0; round <= dead0 / 1000 + 1; round++) {
            rc = requeue ? dq_dead_requeue(g->c, queue, NULL, delay)
                         : dq_dead_purge(g->c, queue, NULL);
            if (rc < 0)
                return dqt_report(g, rc);
            if (rc == 0)
                break;
            done += rc;
        }
    } else {
        for (int i = 1; i < g->a.npos; i++) {
            const char *id = g->a.pos[i];
            rc = requeue ? dq_dead_requeue(g->c, queue, id, delay)
                         : dq_dead_purge(g->c, queue, id);
            if (rc < 0)
                return dqt_report(g, rc);
            if (rc == 0) {
                fprintf(stderr, "delayq dead %s: no dead job '%s'\n", action,
                        id);
                ret = DQT_EXIT_FAILED;
            }
            done += rc;
        }
    }
    printf("%s %" PRId64 "\n", requeue ? "requeued" : "purged", done);
    return ret;
}
