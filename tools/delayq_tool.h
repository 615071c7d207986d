/*
 * delayq_tool.h - what the files of the delayq command-line tool share.
 *
 * Not installed and not part of libdelayq: the tool is a user of the public
 * API only.  Every name declared here starts with dqt_ (DQT_ for constants)
 * so that it never collides with the library's dq_ / dq__ names.
 *
 * The files, by job (like curl's src/tool_*.c):
 *   delayq_main.c     main, global options, dispatch, the client and errors
 *   delayq_args.c     option parsing, durations, times, clocks
 *   delayq_help.c     help texts
 *   delayq_out.c      output: text escaping, JSON, Prometheus, tables
 *   delayq_jobs.c     push, cancel, poll, ack, nack, extend, get
 *   delayq_inspect.c  list, stats (--watch), dead requeue/purge/list, groups
 *   delayq_consume.c  consume (on the library's libevent consumer)
 *   delayq_config.c   config: a queue's settings stored in Redis
 *   delayq_web.c      web: the operator dashboard (libevent's evhttp)
 */
#ifndef DELAYQ_TOOL_H
#define DELAYQ_TOOL_H

#include <delayq.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- Exit codes (also in the help text) -------------------------------- */

enum {
    DQT_EXIT_OKAY = 0,    /* success */
    DQT_EXIT_FAILED = 1,  /* the operation failed, or no such job */
    DQT_EXIT_USAGE = 2,   /* bad option, argument or value */
    DQT_EXIT_CONNECT = 3, /* cannot connect to Redis, or connection lost */
    DQT_EXIT_STALE = 4    /* stale lease token */
};

#define DQT_DEFAULT_URI "redis://127.0.0.1:6379"

/* ---- Command line ------------------------------------------------------- */

/* Option ids: global ones first. */
enum {
    DQT_O_HELP = 1, DQT_O_URI, DQT_O_QUEUE, DQT_O_NS, DQT_O_VERSION,
    DQT_O_IN, DQT_O_AT, DQT_O_ID, DQT_O_REPLACE, DQT_O_KEEP, DQT_O_JSON,
    DQT_O_INFLIGHT, DQT_O_MAX, DQT_O_LEASE, DQT_O_WAIT, DQT_O_DEAD,
    DQT_O_OFFSET, DQT_O_LIMIT, DQT_O_PROM, DQT_O_WATCH, DQT_O_COUNT,
    DQT_O_ALL, DQT_O_CONC, DQT_O_MAXATT, DQT_O_BACKOFF, DQT_O_MAXBACK,
    DQT_O_GRACE, DQT_O_MAXJOBS, DQT_O_QUIET, DQT_O_JITTER,
    DQT_O_LISTEN, DQT_O_TOKEN, DQT_O_READONLY, DQT_O_COUNTERS, DQT_O_REASON,
    DQT_O_STRICT,
    DQT_O_EVERY, DQT_O_CRON, DQT_O_TZ, DQT_O_EXPIN, DQT_O_EXPAT,
    DQT_O_REVIVE, DQT_O_DEBOUNCE, DQT_O_MAXWAIT, DQT_O_GROUP,
    DQT_O_PRIORITY
};

/* One option a command accepts.  arg: 0 none, 1 required, 2 optional
 * (taken only when it is a duration). */
typedef struct dqt_optspec {
    const char *name;
    char short_name;
    int arg;
    int id;
} dqt_optspec;

/* One option as given on the command line. */
typedef struct dqt_optval {
    int id;
    const char *name; /* as given, for messages */
    const char *val;  /* NULL when none */
} dqt_optval;

/* The parsed command line of a command. */
typedef struct dqt_args {
    dqt_optval *opts; /* options in order */
    int nopts;
    char **pos;       /* positional arguments */
    int npos;
    char **rest;      /* after "--" (consume's command) */
    int nrest;
} dqt_args;

/* The state of one run. */
typedef struct dqt_cli {
    const char *cmd;   /* command name, for messages ("push") */
    const char *uri;   /* --uri / DELAYQ_URI / default */
    const char *queue; /* --queue / DELAYQ_QUEUE, may be NULL */
    const char *ns;    /* --namespace / DELAYQ_NAMESPACE, may be NULL */
    int help;          /* --help seen */
    int version;       /* --version seen */
    int counters;      /* --counters seen */
    dq_client *c;      /* open client or NULL */
    dqt_args a;        /* parsed command line of the command */
} dqt_cli;

/* delayq_args.c */
extern const dqt_optspec dqt_no_opts[];
int dqt_parse_args(dqt_cli *g, int argc, char **argv,
                   const dqt_optspec *specs, int stop_at_pos, dqt_args *a);
void dqt_args_free(dqt_args *a);
int dqt_usage_error(const dqt_cli *g, const char *fmt, const char *arg);
int dqt_npos_check(const dqt_cli *g, int lo, int hi, const char *what);
int dqt_opt_duration(const dqt_cli *g, const dqt_optval *o, int64_t *ms);
int dqt_opt_int(const dqt_cli *g, const dqt_optval *o, int64_t lo,
                int64_t hi, int64_t *v);
int dqt_parse_duration(const char *s, int64_t *ms);
int dqt_parse_time(const char *s, int64_t *ms);
int64_t dqt_mono_ms(void);
int64_t dqt_wall_ms(void);
void dqt_sleep_ms(int64_t ms);

/* ---- Client and errors (delayq_main.c) --------------------------------- */

int dqt_exit_for(int rc);
int dqt_report(const dqt_cli *g, int rc);
const char *dqt_need_queue(const dqt_cli *g);
dq_options *dqt_client_options(const dqt_cli *g, int *exit_code);
int dqt_open_client(dqt_cli *g);
int dqt_start(dqt_cli *g, const char **queue);

/* ---- Help texts (delayq_help.c) ---------------------------------------- */

extern const char dqt_help_main[]; /* a printf format: %s = lib version */
extern const char dqt_help_push[], dqt_help_cancel[], dqt_help_poll[],
    dqt_help_ack[], dqt_help_nack[], dqt_help_extend[], dqt_help_list[],
    dqt_help_stats[], dqt_help_dead[], dqt_help_consume[], dqt_help_get[];
extern const char dqt_help_reschedule[], dqt_help_promote[];

/* ---- Output (delayq_out.c) --------------------------------------------- */

/* Job states as listed. */
enum { DQT_ST_SCHEDULED = 0, DQT_ST_INFLIGHT = 1, DQT_ST_DEAD = 2 };

/* Counts of one queue: scheduled, due, inflight, dead, next_due_ms; and
 * its totals (dq_counters): delivered, acked, retried, failed. */
typedef struct dqt_qstats {
    int64_t v[5];
    int64_t k[4];
} dqt_qstats;

const char *dqt_fmt_iso(int64_t ms, char *out, size_t n);
const char *dqt_fmt_dur(int64_t ms, char *out, size_t n);
const char *dqt_fmt_rel(int64_t at_ms, int64_t now_ms, char *out, size_t n);
/* The name of a DQ_JOB_* state: "scheduled", "due", "inflight", "dead" or
 * "unknown". */
const char *dqt_job_state_name(int st);
/* Length of the valid UTF-8 sequence at p (n bytes left), or 0. */
size_t dqt_utf8_len(const unsigned char *p, size_t n);
/* 1 if the n bytes at s are valid UTF-8. */
int dqt_is_utf8(const void *s, size_t n);
void dqt_json_str(FILE *f, const void *s, size_t n);
void dqt_json_cstr(FILE *f, const char *s);
void dqt_json_payload(FILE *f, const void *p, size_t n);
void dqt_json_bytes(FILE *f, const char *key, const void *p, size_t n);
void dqt_json_reason(FILE *f, const void *reason, size_t n, int64_t at_ms);
void dqt_print_reason(const void *reason, size_t n, int64_t at_ms,
                      int64_t now, size_t max);
void dqt_escaped(FILE *f, const void *s, size_t n, size_t max);
size_t dqt_escaped_width(const char *s);
void dqt_print_jobs_table(int st, const dq_jobs *jobs, int64_t now,
                          int64_t offset);
void dqt_print_jobs_json(int st, const dq_jobs *jobs, int *first);
/* A listed job's group ("" none), for the tables. */
const char *dqt_job_group(const dq_job *j);
/* Writes ,"group":<name or null>,"priority":<n> (group NULL or "": null). */
void dqt_json_group(FILE *f, const char *group, int priority);
void dqt_print_stats(char **queues, int nq, const dqt_qstats *st, int mode,
                     int64_t now);

/* ---- Commands ----------------------------------------------------------- */

/* delayq_jobs.c */
extern const dqt_optspec dqt_push_opts[], dqt_cancel_opts[], dqt_poll_opts[],
    dqt_nack_opts[], dqt_extend_opts[], dqt_get_opts[];
int dqt_cmd_push(dqt_cli *g);
int dqt_cmd_cancel(dqt_cli *g);
int dqt_cmd_poll(dqt_cli *g);
int dqt_cmd_ack(dqt_cli *g);
int dqt_cmd_nack(dqt_cli *g);
int dqt_cmd_extend(dqt_cli *g);
int dqt_cmd_get(dqt_cli *g);
extern const dqt_optspec dqt_reschedule_opts[], dqt_promote_opts[];
int dqt_cmd_reschedule(dqt_cli *g);
int dqt_cmd_promote(dqt_cli *g);

/* delayq_inspect.c */
extern const dqt_optspec dqt_list_opts[], dqt_stats_opts[], dqt_dead_opts[];
int dqt_cmd_list(dqt_cli *g);
int dqt_cmd_stats(dqt_cli *g);
int dqt_cmd_dead(dqt_cli *g);
extern const dqt_optspec dqt_groups_opts[];
extern const char dqt_help_groups[];
int dqt_cmd_groups(dqt_cli *g);

/* delayq_consume.c */
extern const dqt_optspec dqt_consume_opts[];
int dqt_cmd_consume(dqt_cli *g);

/* delayq_config.c (its option id apart from the list above) */
enum { DQT_O_UNSET = 200 };
extern const char dqt_help_config[];
extern const dqt_optspec dqt_config_opts[];
int dqt_cmd_config(dqt_cli *g);
/* The word of value v of setting s when s takes words (backoff, expired,
 * layout: "exponential", "drop", "compact-push", ...), else NULL (a
 * number, or a value without a word); the config command and the web
 * settings card both show settings with it. */
const char *dqt_setting_word(int s, int64_t v);

/* delayq_web.c */
extern const char dqt_help_web[];
extern const dqt_optspec dqt_web_opts[];
int dqt_cmd_web(dqt_cli *g);

#endif /* DELAYQ_TOOL_H */
