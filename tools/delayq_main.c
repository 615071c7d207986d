/*
 * delayq - the command-line tool of libdelayq.
 *
 * Pushes, inspects and consumes delayed jobs.  It uses only the public API
 * of <delayq.h> (and <delayq-event.h> for consume), like any other program
 * would: whatever it can do, a C, Python or Go program can do too.
 * `delayq --help` lists the commands; every command has its own `--help`.
 *
 * This file has main, the global options, the dispatch to the commands and
 * the client and error handling they share; delayq_tool.h lists the others.
 *
 * Exit codes (also in the help text): 0 ok, 1 operation failed / not found,
 * 2 usage error, 3 cannot connect, 4 stale lease token.
 */
#include "delayq_tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- Client and errors --------------------------------------------------- */

/* Maps a library error code to the tool's exit code. */
int dqt_exit_for(int rc) {
    switch (rc) {
    case DQ_ESTALE:
        return DQT_EXIT_STALE;
    case DQ_EIO:
    case DQ_ETIMEDOUT:
    case DQ_EAUTH:
        return DQT_EXIT_CONNECT;
    case DQ_ENULL:
    case DQ_EINVAL:
    case DQ_EQUEUE:
    case DQ_EID:
    case DQ_EDELAY:
    case DQ_ELEASE:
    case DQ_ETOOBIG:
    case DQ_EURI:
        return DQT_EXIT_USAGE;
    default:
        return DQT_EXIT_FAILED;
    }
}

/* Reports a failed library call on stderr; returns the exit code. */
int dqt_report(const dqt_cli *g, int rc) {
    const char *msg = g->c ? dq_errmsg(g->c) : "";
    if (msg == NULL || *msg == '\0')
        msg = dq_strerror(rc);
    fprintf(stderr, "delayq %s: %s (%s)\n", g->cmd, msg, dq_errname(rc));
    return dqt_exit_for(rc);
}

/* The queue of the command, or NULL after a usage message. */
const char *dqt_need_queue(const dqt_cli *g) {
    if (g->queue == NULL || *g->queue == '\0') {
        fprintf(stderr,
                "delayq %s: no queue: use --queue NAME or set DELAYQ_QUEUE\n",
                g->cmd);
        return NULL;
    }
    return g->queue;
}

/* 1 if the clients count deliveries, acks, retries and failures
 * (DQ_OPT_COUNTERS): --counters or DELAYQ_COUNTERS=1; 0 for 0 or unset; -1
 * after a message for another value. */
static int want_counters(const dqt_cli *g) {
    if (g->counters)
        return 1;
    const char *e = getenv("DELAYQ_COUNTERS");
    if (e == NULL || *e == '\0' || strcmp(e, "0") == 0)
        return 0;
    if (strcmp(e, "1") == 0)
        return 1;
    fprintf(stderr, "delayq %s: DELAYQ_COUNTERS: '%s' is not 0 or 1\n",
            g->cmd ? g->cmd : "", e);
    return -1;
}

/* Options for the command's clients (namespace, counters), or NULL after a
 * message with *exit_code set. */
dq_options *dqt_client_options(const dqt_cli *g, int *exit_code) {
    dq_options *o = dq_options_new();
    if (o == NULL) {
        fprintf(stderr, "delayq %s: out of memory\n", g->cmd);
        *exit_code = DQT_EXIT_FAILED;
        return NULL;
    }
    if (g->ns != NULL && dq_options_set_str(o, DQ_OPT_NAMESPACE, g->ns) != 0) {
        fprintf(stderr,
                "delayq %s: --namespace: '%s' is not a valid namespace "
                "(1..64 of [A-Za-z0-9._:-])\n",
                g->cmd, g->ns);
        dq_options_free(o);
        *exit_code = DQT_EXIT_USAGE;
        return NULL;
    }
    int counters = want_counters(g);
    if (counters < 0) {
        dq_options_free(o);
        *exit_code = DQT_EXIT_USAGE;
        return NULL;
    }
    if (counters && dq_options_set_int(o, DQ_OPT_COUNTERS, 1) != 0) {
        fprintf(stderr, "delayq %s: this libdelayq cannot count "
                        "(DQ_OPT_COUNTERS)\n", g->cmd);
        dq_options_free(o);
        *exit_code = DQT_EXIT_FAILED;
        return NULL;
    }
    return o;
}

/* Opens the client g->c and connects it, or explains why not. */
int dqt_open_client(dqt_cli *g) {
    int rc;
    dq_options *o = dqt_client_options(g, &rc);
    if (o == NULL)
        return rc;
    rc = dq_open(g->uri, o, &g->c);
    dq_options_free(o);
    if (rc != 0) {
        const char *msg = g->c ? dq_errmsg(g->c) : dq_strerror(rc);
        if (msg == NULL || *msg == '\0')
            msg = dq_strerror(rc);
        if (rc == DQ_EURI) {
            fprintf(stderr, "delayq %s: bad --uri: %s (%s)\n", g->cmd, msg,
                    dq_errname(rc));
            return DQT_EXIT_USAGE;
        }
        fprintf(stderr, "delayq %s: cannot connect to Redis: %s (%s)\n",
                g->cmd, msg, dq_errname(rc));
        return rc == DQ_ENOMEM ? DQT_EXIT_FAILED : DQT_EXIT_CONNECT;
    }
    const char *w = dq_warnings(g->c);
    if (w != NULL && *w != '\0')
        fprintf(stderr, "delayq %s: warning: %s\n", g->cmd, w);
    return DQT_EXIT_OKAY;
}

/* Common start of a command that needs a queue and a connection. */
int dqt_start(dqt_cli *g, const char **queue) {
    if ((*queue = dqt_need_queue(g)) == NULL)
        return DQT_EXIT_USAGE;
    return dqt_open_client(g);
}

/* ---- Dispatch ------------------------------------------------------------ */

/* A command: its name, its function, help text and options. */
typedef struct command {
    const char *name;
    int (*fn)(dqt_cli *g);
    const char *help;
    const dqt_optspec *opts;
} command;

static const command commands[] = {
    {"push", dqt_cmd_push, dqt_help_push, dqt_push_opts},
    {"cancel", dqt_cmd_cancel, dqt_help_cancel, dqt_cancel_opts},
    {"reschedule", dqt_cmd_reschedule, dqt_help_reschedule,
     dqt_reschedule_opts},
    {"promote", dqt_cmd_promote, dqt_help_promote, dqt_promote_opts},
    {"poll", dqt_cmd_poll, dqt_help_poll, dqt_poll_opts},
    {"ack", dqt_cmd_ack, dqt_help_ack, dqt_no_opts},
    {"nack", dqt_cmd_nack, dqt_help_nack, dqt_nack_opts},
    {"extend", dqt_cmd_extend, dqt_help_extend, dqt_extend_opts},
    {"get", dqt_cmd_get, dqt_help_get, dqt_get_opts},
    {"list", dqt_cmd_list, dqt_help_list, dqt_list_opts},
    {"peek", dqt_cmd_list, dqt_help_list, dqt_list_opts},
    {"stats", dqt_cmd_stats, dqt_help_stats, dqt_stats_opts},
    {"dead", dqt_cmd_dead, dqt_help_dead, dqt_dead_opts},
    {"groups", dqt_cmd_groups, dqt_help_groups, dqt_groups_opts},
    {"config", dqt_cmd_config, dqt_help_config, dqt_config_opts},
    {"consume", dqt_cmd_consume, dqt_help_consume, dqt_consume_opts},
    {"web", dqt_cmd_web, dqt_help_web, dqt_web_opts},
    {NULL, NULL, NULL, NULL}};

/* The command called name, or NULL. */
static const command *find_command(const char *name) {
    for (const command *c = commands; c->name != NULL; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

/* Prints a command's help with the common footer. */
static void print_cmd_help(const command *c) {
    fputs(c->help, stdout);
    printf("\nGlobal options: --uri URI, --queue NAME, --namespace NS, "
           "--counters, --help.\nExit codes: 0 ok, 1 failed / not found, 2 usage, "
           "3 cannot connect, 4 stale token.\nSee 'delayq --help'.\n");
}

/* Parses the command line and runs the command; returns the exit code. */
static int run(int argc, char **argv) {
    dqt_cli g;
    memset(&g, 0, sizeof(g));
    g.uri = getenv("DELAYQ_URI");
    if (g.uri == NULL || *g.uri == '\0')
        g.uri = DQT_DEFAULT_URI;
    g.queue = getenv("DELAYQ_QUEUE");
    g.ns = getenv("DELAYQ_NAMESPACE");
    if (g.ns != NULL && *g.ns == '\0')
        g.ns = NULL;

    /* Global options before the command. */
    dqt_args pre;
    int rc = dqt_parse_args(&g, argc - 1, argv + 1, dqt_no_opts, 1, &pre);
    char **rest = pre.rest;
    int nrest = pre.nrest;
    dqt_args_free(&pre);
    if (rc)
        return rc;
    if (g.version) {
        printf("delayq %s (libdelayq %s, built with %s)\n", DQ_VERSION_STRING,
               dq_version_string(), DQ_VERSION_STRING);
        return DQT_EXIT_OKAY;
    }
    if (nrest == 0) {
        if (g.help) {
            printf(dqt_help_main, dq_version_string());
            return DQT_EXIT_OKAY;
        }
        fprintf(stderr, "delayq: missing command\nTry 'delayq --help'.\n");
        return DQT_EXIT_USAGE;
    }
    const char *name = rest[0];
    if (strcmp(name, "help") == 0) {
        if (nrest < 2) {
            printf(dqt_help_main, dq_version_string());
            return DQT_EXIT_OKAY;
        }
        const command *c = find_command(rest[1]);
        if (c == NULL) {
            fprintf(stderr, "delayq help: unknown command '%s'\nTry 'delayq "
                            "--help'.\n", rest[1]);
            return DQT_EXIT_USAGE;
        }
        print_cmd_help(c);
        return DQT_EXIT_OKAY;
    }
    const command *c = find_command(name);
    if (c == NULL) {
        fprintf(stderr, "delayq: unknown command '%s'\nTry 'delayq --help'.\n",
                name);
        return DQT_EXIT_USAGE;
    }
    g.cmd = c->name;
    if (g.help) { /* "delayq --help push" */
        print_cmd_help(c);
        return DQT_EXIT_OKAY;
    }
    if ((rc = dqt_parse_args(&g, nrest - 1, rest + 1, c->opts, 0, &g.a))) {
        dqt_args_free(&g.a);
        return rc;
    }
    if (g.help) {
        print_cmd_help(c);
        dqt_args_free(&g.a);
        return DQT_EXIT_OKAY;
    }
    if (g.a.rest != NULL && c->fn != dqt_cmd_consume) {
        rc = g.a.nrest > 0
                 ? dqt_usage_error(&g, "unexpected argument '%s'", g.a.rest[0])
                 : DQT_EXIT_OKAY;
        if (rc) {
            dqt_args_free(&g.a);
            return rc;
        }
    }
    rc = c->fn(&g);
    fflush(stdout);
    dq_close(g.c);
    dqt_args_free(&g.a);
    return rc;
}

int main(int argc, char **argv) {
    int rc = run(argc, argv);
    if (fflush(stdout) != 0 && rc == DQT_EXIT_OKAY) {
        fprintf(stderr, "delayq: writing the output: %s\n", strerror(errno));
        rc = DQT_EXIT_FAILED;
    }
    return rc;
}
