/*
 * delayq_consume.c - `delayq consume -- COMMAND`: a worker that runs a
 * command for every job of a queue (or of several: --queue NAME[:WEIGHT]
 * repeated, --strict for priority order) as it comes due.
 *
 * The loop is libdelayq's own libevent consumer (delayq-event.h): it claims
 * jobs, renews their leases while the commands run, retries failures with
 * its backoff (jitter included), dead-letters jobs at the max attempts and
 * stops gracefully.  This file only starts a command per job, notices when
 * it ends (SIGCHLD + waitpid) and tells the consumer how it went, so the
 * tool and a C program on the consumer follow one retry and renewal policy.
 *
 * Exit status 0 of the command is DQ_JOB_OK; anything else (or a signal)
 * is DQ_JOB_RETRY, which the consumer turns into a death once the job has
 * had its maximum number of attempts; the job's last error then says how
 * the command ended ("command exit 3", "command signal 9").
 */
#include "delayq_tool.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const dqt_optspec dqt_consume_opts[] = {
    {"concurrency", 'c', 1, DQT_O_CONC}, {"lease", 0, 1, DQT_O_LEASE},
    {"max-attempts", 0, 1, DQT_O_MAXATT}, {"backoff", 0, 1, DQT_O_BACKOFF},
    {"max-backoff", 0, 1, DQT_O_MAXBACK}, {"jitter", 0, 1, DQT_O_JITTER},
    {"grace", 0, 1, DQT_O_GRACE},         {"max-jobs", 0, 1, DQT_O_MAXJOBS},
    {"quiet", 0, 0, DQT_O_QUIET},         {"strict", 0, 0, DQT_O_STRICT},
    {NULL, 0, 0, 0}};

#ifndef DQT_HAVE_LIBEVENT

int dqt_cmd_consume(dqt_cli *g) {
    fprintf(stderr, "delayq %s: this delayq was built without libevent, "
                    "which the consumer needs (ENOTSUP)\n",
            g->cmd);
    return DQT_EXIT_FAILED;
}

#else /* DQT_HAVE_LIBEVENT */

#include <delayq-event.h>
#include <event2/event.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* One command started for a job. */
typedef struct dqt_run {
    struct dqt_run *prev, *next; /* the worker's list */
    const dq_job *job;  /* the consumer's; valid until the job is finished */
    char id[DQ_ID_BUF]; /* copies for log lines after that */
    int64_t attempt;
    pid_t pid;          /* > 0 while the command runs */
    int64_t started;    /* mono ms */
    char how[48];       /* "exit 1", "signal 9", "not started" */
    char took[48];      /* its run time, "1s" */
    int asked;          /* outcome given to dq_consumer_done, 0 = none yet */
    int64_t delay;      /* retry delay asked for with DQ_JOB_RETRY */
    int released;       /* the consumer gave the job up (stop deadline) */
    int killed;         /* we signalled the command to stop it */
} dqt_run;

/* The state of one `delayq consume`. */
typedef struct dqt_worker {
    dqt_cli *g;
    const char *queue;  /* the first queue */
    int nq;             /* queues consumed (--queue repeated) */
    char *qs[DQ_MULTI_MAX]; /* their names (copies) */
    int weights[DQ_MULTI_MAX];
    int strict;         /* --strict: DQ_PRIO_STRICT, else weighted */
    char **cmd;         /* COMMAND ARG... (NULL-terminated) */
    int64_t conc, lease, max_attempts, backoff, max_backoff, jitter, grace,
        max_jobs;
    int quiet;
    struct event_base *base;
    dq_async *a;
    dq_consumer *c;
    struct event *sig_ev[3]; /* SIGINT, SIGTERM, SIGCHLD */
    struct event *grace_ev;  /* our own grace deadline (see on_signal) */
    struct event *kill_ev;   /* SIGKILL, then give up waiting */
    int kill_phase;          /* 0 none, 1 SIGTERM sent, 2 SIGKILL sent */
    dqt_run *runs;           /* commands started, job not finished yet */
    int nrunning;            /* commands whose process runs */
    int64_t taken;           /* jobs handed to us */
    int signals;             /* SIGINT/SIGTERM seen */
    int stopping;            /* dq_consumer_stop was called */
    int stopped;             /* ... and its callback came */
    int grace_said;          /* "grace period over" was logged */
    int disconnected;        /* the client lost its connection */
    char **env;              /* environ minus DELAYQ_JOB_ID/ATTEMPT/QUEUE,
                                three slots left at the end for them */
    size_t nenv;             /* entries copied from environ */
} dqt_worker;

static void say(const dqt_worker *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Logs one line on stderr, prefixed "delayq consume: ". */
static void say(const dqt_worker *w, const char *fmt, ...) {
    (void)w;
    va_list ap;
    va_start(ap, fmt);
    fputs("delayq consume: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- Commands ------------------------------------------------------------ */

/* Copies environ without our three variables, with room for them. */
static int build_env(dqt_worker *w) {
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    w->env = calloc(n + 4, sizeof(char *));
    if (w->env == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *e = environ[i];
        if (strncmp(e, "DELAYQ_JOB_ID=", 14) == 0 ||
            strncmp(e, "DELAYQ_ATTEMPT=", 15) == 0 ||
            strncmp(e, "DELAYQ_QUEUE=", 13) == 0)
            continue;
        w->env[w->nenv++] = environ[i];
    }
    return 0;
}

/* Closes every fd >= 3 in the child, so commands hold no Redis socket. */
static void close_from_3(void) {
    /* One call instead of a close() per possible descriptor: with a limit
     * of 20000 open files the loop alone cost about 85 ms per job. */
    if (close_range(3, ~0U, 0) == 0)
        return;
    long max = sysconf(_SC_OPEN_MAX); /* a kernel before 5.9: ENOSYS */
    if (max < 0 || max > 65536)
        max = 65536;
    for (int fd = 3; fd < max; fd++)
        close(fd);
}

/* Starts the command for r's job.  0, or -1 (logged). */
static int start_child(dqt_worker *w, dqt_run *r) {
    const dq_job *j = r->job;
    size_t len;
    const void *p = dq_job_payload(j, &len);
    int fd = memfd_create("delayq-payload", MFD_CLOEXEC);
    if (fd < 0) {
        say(w, "job %s: memfd_create: %s", r->id, strerror(errno));
        return -1;
    }
    for (size_t off = 0; off < len;) {
        ssize_t n = write(fd, (const char *)p + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            say(w, "job %s: writing the payload: %s", r->id, strerror(errno));
            close(fd);
            return -1;
        }
        off += (size_t)n;
    }
    lseek(fd, 0, SEEK_SET);
    char *e_id = NULL, *e_att = NULL, *e_q = NULL;
    if (asprintf(&e_id, "DELAYQ_JOB_ID=%s", r->id) < 0)
        e_id = NULL;
    if (asprintf(&e_att, "DELAYQ_ATTEMPT=%" PRId64, r->attempt) < 0)
        e_att = NULL;
    const char *jq = dq_consumer_job_queue(w->c, r->job);
    if (asprintf(&e_q, "DELAYQ_QUEUE=%s", jq ? jq : w->queue) < 0)
        e_q = NULL;
    if (e_id == NULL || e_att == NULL || e_q == NULL) {
        free(e_id);
        free(e_att);
        free(e_q);
        close(fd);
        say(w, "out of memory");
        return -1;
    }
    w->env[w->nenv] = e_id;
    w->env[w->nenv + 1] = e_att;
    w->env[w->nenv + 2] = e_q;
    w->env[w->nenv + 3] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* Child: own process group (a Ctrl-C at the terminal is for the
         * consumer, which decides when to stop its commands), default
         * signals, payload on stdin. */
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGCHLD, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        if (dup2(fd, 0) < 0)
            _exit(126);
        close_from_3();
        execvpe(w->cmd[0], w->cmd, w->env);
        int e = errno;
        dprintf(2, "delayq consume: cannot run '%s': %s\n", w->cmd[0],
                strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    int fork_errno = errno;
    w->env[w->nenv] = NULL;
    free(e_id);
    free(e_att);
    free(e_q);
    close(fd);
    if (pid < 0) {
        say(w, "job %s: fork: %s", r->id, strerror(fork_errno));
        return -1;
    }
    setpgid(pid, pid); /* also here: no race with a kill right after */
    r->pid = pid;
    r->started = dqt_mono_ms();
    w->nrunning++;
    return 0;
}

/* Sends sig to the process group of every running command (released_only:
 * only those whose job the consumer gave up). */
static void signal_commands(dqt_worker *w, int sig, int released_only) {
    for (dqt_run *r = w->runs; r != NULL; r = r->next)
        if (r->pid > 0 && (!released_only || r->released)) {
            r->killed = 1;
            kill(-r->pid, sig);
        }
}

/* Arms the escalation after a SIGTERM: SIGKILL 2 s later, then at most 5 s
 * more of waiting. */
static void arm_kill(dqt_worker *w) {
    if (w->kill_phase != 0)
        return;
    w->kill_phase = 1;
    struct timeval tv = {2, 0};
    evtimer_add(w->kill_ev, &tv);
}

/* The kill timer: SIGKILL what still runs, and later stop waiting. */
static void on_kill_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    dqt_worker *w = arg;
    if (w->kill_phase == 1 && w->nrunning > 0) {
        w->kill_phase = 2;
        signal_commands(w, SIGKILL, 0);
        struct timeval tv = {5, 0};
        evtimer_add(w->kill_ev, &tv);
        return;
    }
    if (w->nrunning > 0)
        say(w, "%d command(s) did not end after SIGKILL; not waiting",
            w->nrunning);
    event_base_loopexit(w->base, NULL);
}

/* Logs "grace period over" once, with the commands still running. */
static void say_grace_over(dqt_worker *w) {
    if (w->grace_said || w->nrunning == 0)
        return;
    w->grace_said = 1;
    say(w, "grace period over: stopping %d command(s)", w->nrunning);
}

/* Stops every running command now (a second signal, or our own grace
 * deadline when the consumer's stop had none): SIGTERM, then SIGKILL.
 * Their jobs are reported as retries without delay when they end. */
static void stop_commands_now(dqt_worker *w) {
    say_grace_over(w);
    signal_commands(w, SIGTERM, 0);
    if (w->nrunning > 0)
        arm_kill(w);
}

/* ---- Runs ---------------------------------------------------------------- */

/* The run of a job handed to us, or NULL. */
static dqt_run *find_run(dqt_worker *w, const dq_job *job) {
    for (dqt_run *r = w->runs; r != NULL; r = r->next)
        if (r->job == job)
            return r;
    return NULL;
}

/* Unlinks and frees a run. */
static void drop_run(dqt_worker *w, dqt_run *r) {
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        w->runs = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    free(r);
}

/* Ends the loop once the consumer has stopped and no command runs. */
static void maybe_exit(dqt_worker *w) {
    if (w->stopped && w->nrunning == 0)
        event_base_loopexit(w->base, NULL);
}

/* Tells the consumer how r's command went: 0 acks; anything else is a
 * retry after the consumer's backoff (a death at the max attempts), or at
 * once when we stopped the command ourselves. */
static void report_run(dqt_worker *w, dqt_run *r, int ok) {
    r->asked = ok ? DQ_JOB_OK : DQ_JOB_RETRY;
    r->delay = 0;
    if (!ok && !r->killed) {
        r->delay = dq_consumer_backoff_ms(w->c, r->attempt);
        char why[64];
        int n = snprintf(why, sizeof(why), "command %s", r->how);
        if (n > 0 && (size_t)n < sizeof(why))
            dq_consumer_set_reason(w->c, r->job, why, (size_t)n);
    }
    /* The outcome callback logs and frees r, maybe from inside this call. */
    int rc = dq_consumer_done(w->c, r->job, r->asked, ok ? -1 : r->delay);
    if (rc != 0) {
        if (rc != DQ_ESTALE)
            say(w, "job %s: %s (%s)", r->id, dq_consumer_errmsg(w->c),
                dq_errname(rc));
        drop_run(w, r);
    }
}

/* A command ended with status: report its job (or, if the consumer gave
 * the job up already, just forget it). */
static void command_ended(dqt_worker *w, dqt_run *r, int status) {
    r->pid = 0;
    w->nrunning--;
    dqt_fmt_dur(dqt_mono_ms() - r->started, r->took, sizeof(r->took));
    if (WIFEXITED(status))
        snprintf(r->how, sizeof(r->how), "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(r->how, sizeof(r->how), "signal %d", WTERMSIG(status));
    else
        snprintf(r->how, sizeof(r->how), "status %d", status);
    if (r->released) {
        /* Released already: the consumer answers DQ_ESTALE and lets go. */
        dq_consumer_done(w->c, r->job, DQ_JOB_RETRY, 0);
        drop_run(w, r);
    } else {
        report_run(w, r, WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

/* SIGCHLD: reaps every command that ended. */
static void on_sigchld(dqt_worker *w) {
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            break;
        dqt_run *r = w->runs;
        while (r != NULL && r->pid != pid)
            r = r->next;
        if (r != NULL)
            command_ended(w, r, status);
    }
    maybe_exit(w);
}

/* ---- Consumer callbacks -------------------------------------------------- */

/* The consumer's graceful stop has finished. */
static void on_stopped(dq_consumer *c, int released, void *ud) {
    (void)c;
    (void)released;
    dqt_worker *w = ud;
    w->stopped = 1;
    maybe_exit(w);
}

/* Stops taking jobs; running ones get timeout_ms before the consumer
 * releases them.  Returns 0 or -1 (logged, loop ended). */
static int begin_stop(dqt_worker *w, int64_t timeout_ms) {
    if (w->stopping)
        return 0;
    w->stopping = 1;
    int rc = dq_consumer_stop(w->c, timeout_ms, on_stopped, w);
    if (rc < 0) {
        say(w, "stop failed: %s (%s)", dq_consumer_errmsg(w->c),
            dq_errname(rc));
        event_base_loopexit(w->base, NULL);
        return -1;
    }
    return 0;
}

/* The handler: starts the command of one job and returns DQ_JOB_ASYNC;
 * the job is finished when the command ends (on_sigchld). */
static int on_job(dq_consumer *c, const dq_job *job, void *ud) {
    (void)c;
    dqt_worker *w = ud;
    w->taken++;
    if (w->max_jobs > 0 && w->taken >= w->max_jobs) {
        /* The last job: take no more, wait for the running ones. */
        if (begin_stop(w, DQ_DELAY_MAX) != 0)
            return DQ_JOB_RETRY;
    }
    dqt_run *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        say(w, "out of memory");
        return DQ_JOB_RETRY;
    }
    r->job = job;
    snprintf(r->id, sizeof(r->id), "%s", dq_job_id(job));
    r->attempt = dq_job_attempt(job);
    r->next = w->runs;
    if (w->runs != NULL)
        w->runs->prev = r;
    w->runs = r;
    if (start_child(w, r) != 0) {
        /* Counts as a failed attempt, with the consumer's backoff. */
        snprintf(r->how, sizeof(r->how), "not started");
        snprintf(r->took, sizeof(r->took), "0ms");
        report_run(w, r, 0);
    }
    return DQ_JOB_ASYNC;
}

/* The consumer finished a job in Redis (acked, requeued, dead-lettered),
 * or gave it up at the stop deadline: one log line per job. */
static void on_outcome(dq_consumer *c, const dq_job *job, int outcome,
                       int status, void *ud) {
    dqt_worker *w = ud;
    dqt_run *r = find_run(w, job);
    const char *id = r != NULL ? r->id : dq_job_id(job);
    int64_t att = r != NULL ? r->attempt : dq_job_attempt(job);
    if (status < 0) {
        if (status == DQ_ESTALE || status == DQ_ENOTFOUND)
            say(w, "job %s attempt %" PRId64 ": %s, but the lease was lost "
                   "(%s: delivered again elsewhere, or cancelled): result "
                   "dropped",
                id, att, r != NULL && r->asked ? r->how : "released",
                dq_errname(status));
        else
            say(w, "job %s: %s failed: %s (%s)", id,
                outcome == DQ_JOB_OK ? "ack" : "nack",
                dq_consumer_errmsg(c), dq_errname(status));
    }
    if (r == NULL) {
        /* Never handed to us: over the max attempts already, or claimed
         * while the stop began. */
        if (status == 0 && !w->quiet)
            say(w, "job %s attempt %" PRId64 ": %s -> %s", id, att,
                outcome == DQ_JOB_FAIL ? "over --max-attempts"
                                       : "not started (stopping)",
                outcome == DQ_JOB_FAIL ? "dead-lettered" : "released");
        return;
    }
    if (!r->asked) {
        /* The stop deadline passed: the consumer released the job; now
         * stop its command (its end is then only reaped). */
        r->released = 1;
        say_grace_over(w);
        if (status == 0 && !w->quiet)
            say(w, "job %s attempt %" PRId64 ": stopped at shutdown -> %s",
                id, att,
                outcome == DQ_JOB_FAIL ? "dead-lettered" : "released");
        signal_commands(w, SIGTERM, 1);
        arm_kill(w);
        return;
    }
    if (status == 0 && !w->quiet) {
        char d[48];
        if (outcome == DQ_JOB_OK)
            say(w, "job %s attempt %" PRId64 ": %s after %s -> acked", id,
                att, r->how, r->took);
        else if (r->killed)
            say(w, "job %s attempt %" PRId64 ": stopped at shutdown -> %s",
                id, att,
                outcome == DQ_JOB_FAIL ? "dead-lettered" : "released");
        else if (outcome == DQ_JOB_RETRY)
            say(w, "job %s attempt %" PRId64 ": %s after %s -> retry in %s",
                id, att, r->how, r->took,
                dqt_fmt_dur(r->delay, d, sizeof(d)));
        else
            say(w, "job %s attempt %" PRId64 ": %s after %s -> "
                   "dead-lettered (%" PRId64 " attempts)",
                id, att, r->how, r->took, att);
    }
    drop_run(w, r);
}

/* Connection changes of the client: logged (it reconnects by itself). */
static void on_state(dq_async *a, int state, int status, const char *reason,
                     void *ud) {
    (void)a;
    dqt_worker *w = ud;
    if (state == DQ_DISCONNECTED && !w->disconnected) {
        w->disconnected = 1;
        say(w, "connection lost: %s (%s); reconnecting",
            reason != NULL && *reason ? reason : dq_strerror(status),
            dq_errname(status));
    } else if (state == DQ_CONNECTED && w->disconnected) {
        w->disconnected = 0;
        say(w, "reconnected");
    }
}

/* Our own grace deadline, for a signal during a --max-jobs drain (the
 * consumer's stop has begun already, without a deadline). */
static void on_grace_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd;
    (void)what;
    stop_commands_now(arg);
}

/* SIGINT, SIGTERM and SIGCHLD, delivered by the event loop. */
static void on_signal(evutil_socket_t sig, short what, void *arg) {
    (void)what;
    dqt_worker *w = arg;
    if (sig == SIGCHLD) {
        on_sigchld(w);
        return;
    }
    if (++w->signals > 1) { /* a second Ctrl-C: stop the commands now */
        stop_commands_now(w);
        return;
    }
    if (w->nrunning > 0) {
        char d[48];
        say(w, "stopping: waiting up to %s for %d running command(s)",
            dqt_fmt_dur(w->grace, d, sizeof(d)), w->nrunning);
    }
    if (!w->stopping) {
        begin_stop(w, w->grace);
    } else if (w->grace_ev != NULL) {
        struct timeval tv = {(time_t)(w->grace / 1000),
                             (suseconds_t)(w->grace % 1000) * 1000};
        evtimer_add(w->grace_ev, &tv);
    }
}

/* ---- The command --------------------------------------------------------- */

/* Reads consume's options into w.  0 or an exit code. */
static int consume_options(dqt_cli *g, dqt_worker *w) {
    int rc;
    for (int i = 0; i < g->a.nopts; i++) {
        const dqt_optval *o = &g->a.opts[i];
        rc = 0;
        switch (o->id) {
        case DQT_O_CONC:
            rc = dqt_opt_int(g, o, 1, 1000, &w->conc);
            break;
        case DQT_O_LEASE:
            rc = dqt_opt_duration(g, o, &w->lease);
            if (rc == 0 && (w->lease < 2 || w->lease > DQ_LEASE_MAX)) {
                fprintf(stderr, "delayq consume: --lease must be 2ms..7d\n");
                rc = DQT_EXIT_USAGE;
            }
            break;
        case DQT_O_MAXATT:
            rc = dqt_opt_int(g, o, 0, INT32_MAX, &w->max_attempts);
            break;
        case DQT_O_BACKOFF:
            rc = dqt_opt_duration(g, o, &w->backoff);
            break;
        case DQT_O_MAXBACK:
            rc = dqt_opt_duration(g, o, &w->max_backoff);
            break;
        case DQT_O_JITTER: {
            /* "20" or "20%" */
            char v[24];
            dqt_optval pct = *o;
            size_t n = o->val ? strlen(o->val) : 0;
            if (n > 1 && n < sizeof(v) && o->val[n - 1] == '%') {
                memcpy(v, o->val, n - 1);
                v[n - 1] = '\0';
                pct.val = v;
            }
            rc = dqt_opt_int(g, &pct, 0, 100, &w->jitter);
            break;
        }
        case DQT_O_GRACE:
            rc = dqt_opt_duration(g, o, &w->grace);
            break;
        case DQT_O_STRICT:
            w->strict = 1;
            break;
        case DQT_O_MAXJOBS:
            rc = dqt_opt_int(g, o, 1, INT64_MAX, &w->max_jobs);
            break;
        case DQT_O_QUIET:
            w->quiet = 1;
            break;
        }
        if (rc)
            return rc;
    }
    if (w->max_backoff > DQ_DELAY_MAX)
        w->max_backoff = DQ_DELAY_MAX;
    if (w->backoff > w->max_backoff)
        w->backoff = w->max_backoff;
    if (w->grace > DQ_DELAY_MAX)
        w->grace = DQ_DELAY_MAX;
    return 0;
}

/* Creates the client, the consumer with the tool's policy, and the
 * events.  0 or an exit code (reported). */
static int consume_setup(dqt_worker *w) {
    dqt_cli *g = w->g;
    int rc;
    dq_options *o = dqt_client_options(g, &rc);
    if (o == NULL)
        return rc;
    rc = dq_async_open(w->base, g->uri, o, &w->a);
    dq_options_free(o);
    if (rc != 0) {
        fprintf(stderr, "delayq consume: %s (%s)\n",
                w->a ? dq_async_errmsg(w->a) : dq_strerror(rc),
                dq_errname(rc));
        return dqt_exit_for(rc);
    }
    dq_async_set_state_cb(w->a, on_state, w);
    rc = dq_consumer_new(w->a, w->queue, on_job, w, &w->c);
    if (rc != 0) {
        fprintf(stderr, "delayq consume: %s (%s)\n", dq_strerror(rc),
                dq_errname(rc));
        return dqt_exit_for(rc);
    }
    for (int i = 0; i < w->nq; i++)
        if ((rc = dq_consumer_add_queue(w->c, w->qs[i], w->weights[i])) < 0) {
            fprintf(stderr, "delayq consume: %s (%s)\n",
                    dq_consumer_errmsg(w->c), dq_errname(rc));
            return dqt_exit_for(rc);
        }
    int64_t conc = w->conc;
    if (w->max_jobs > 0 && w->max_jobs < conc)
        conc = w->max_jobs; /* never claim jobs we would not run */
    const int64_t copts[][2] = {
        {DQ_COPT_CONCURRENCY, conc},
        {DQ_COPT_LEASE_MS, w->lease},
        {DQ_COPT_EXTEND, 1},
        {DQ_COPT_RETRY_BACKOFF, DQ_BACKOFF_EXPONENTIAL},
        {DQ_COPT_RETRY_BASE_MS, w->backoff},
        {DQ_COPT_RETRY_MAX_MS, w->max_backoff},
        {DQ_COPT_RETRY_JITTER, w->jitter},
        {DQ_COPT_MAX_ATTEMPTS, w->max_attempts},
        {DQ_COPT_PRIORITY, w->strict ? DQ_PRIO_STRICT : DQ_PRIO_WEIGHTED}};
    for (size_t i = 0; i < sizeof(copts) / sizeof(copts[0]); i++)
        if ((rc = dq_consumer_set_int(w->c, (int)copts[i][0],
                                      copts[i][1])) != 0) {
            fprintf(stderr, "delayq consume: %s (%s)\n",
                    dq_consumer_errmsg(w->c), dq_errname(rc));
            return dqt_exit_for(rc);
        }
    dq_consumer_set_outcome_cb(w->c, on_outcome, w);
    static const int sigs[3] = {SIGINT, SIGTERM, SIGCHLD};
    for (int i = 0; i < 3; i++) {
        w->sig_ev[i] = evsignal_new(w->base, sigs[i], on_signal, w);
        if (w->sig_ev[i] == NULL || evsignal_add(w->sig_ev[i], NULL) != 0) {
            fprintf(stderr, "delayq consume: setup failed: cannot watch "
                            "signal %d\n", sigs[i]);
            return DQT_EXIT_FAILED;
        }
    }
    w->kill_ev = evtimer_new(w->base, on_kill_timer, w);
    w->grace_ev = evtimer_new(w->base, on_grace_timer, w);
    if (w->kill_ev == NULL || w->grace_ev == NULL) {
        fprintf(stderr, "delayq consume: setup failed: out of memory\n");
        return DQT_EXIT_FAILED;
    }
    if ((rc = dq_consumer_start(w->c)) != 0) {
        fprintf(stderr, "delayq consume: %s (%s)\n", dq_consumer_errmsg(w->c),
                dq_errname(rc));
        return dqt_exit_for(rc);
    }
    return 0;
}

/* Frees what consume_setup made (the consumer goes with its client). */
static void consume_teardown(dqt_worker *w) {
    for (int i = 0; i < 3; i++)
        if (w->sig_ev[i] != NULL)
            event_free(w->sig_ev[i]);
    if (w->kill_ev != NULL)
        event_free(w->kill_ev);
    if (w->grace_ev != NULL)
        event_free(w->grace_ev);
    dq_consumer_free(w->c); /* jobs still held are abandoned */
    dq_async_free(w->a);
    while (w->runs != NULL)
        drop_run(w, w->runs);
    if (w->base != NULL)
        event_base_free(w->base);
    free(w->env);
    for (int i = 0; i < w->nq; i++)
        free(w->qs[i]);
    w->nq = 0;
}

/* The queues to consume: every --queue NAME[:WEIGHT] given after the
 * command, in order (a trailing ":N", N in 1..DQ_WEIGHT_MAX, is the
 * weight, default 1), else the one queue of --queue before the command or
 * $DELAYQ_QUEUE.  0 or a usage exit code (reported). */
static int consume_queues(dqt_cli *g, dqt_worker *w) {
    for (int i = 0; i < g->a.nopts; i++) {
        const dqt_optval *o = &g->a.opts[i];
        if (o->id != DQT_O_QUEUE)
            continue;
        if (w->nq == DQ_MULTI_MAX) {
            fprintf(stderr, "delayq consume: at most %d queues\n",
                    DQ_MULTI_MAX);
            return DQT_EXIT_USAGE;
        }
        const char *v = o->val ? o->val : "";
        const char *colon = strrchr(v, ':');
        size_t len = strlen(v);
        long weight = 1;
        if (colon != NULL && colon[1] != '\0' &&
            strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
            weight = strlen(colon + 1) > 5 ? 0 : strtol(colon + 1, NULL, 10);
            if (weight < 1 || weight > DQ_WEIGHT_MAX) {
                fprintf(stderr, "delayq consume: --queue %s: the weight must "
                                "be 1..%d\n",
                        v, DQ_WEIGHT_MAX);
                return DQT_EXIT_USAGE;
            }
            len = (size_t)(colon - v);
        }
        if (len == 0 || len > DQ_QUEUE_MAX) {
            fprintf(stderr, "delayq consume: --queue '%s': a queue name is "
                            "1..%d bytes\n",
                    v, DQ_QUEUE_MAX);
            return DQT_EXIT_USAGE;
        }
        char *name = strndup(v, len);
        if (name == NULL) {
            fprintf(stderr, "delayq consume: out of memory\n");
            return DQT_EXIT_FAILED;
        }
        for (int k = 0; k < w->nq; k++)
            if (strcmp(w->qs[k], name) == 0) {
                fprintf(stderr, "delayq consume: queue '%s' given twice\n",
                        name);
                free(name);
                return DQT_EXIT_USAGE;
            }
        w->qs[w->nq] = name;
        w->weights[w->nq++] = (int)weight;
    }
    if (w->nq == 0) {
        const char *q = dqt_need_queue(g);
        if (q == NULL || (w->qs[0] = strdup(q)) == NULL)
            return q == NULL ? DQT_EXIT_USAGE : DQT_EXIT_FAILED;
        w->weights[0] = 1;
        w->nq = 1;
    }
    w->queue = w->qs[0];
    return 0;
}

/* delayq consume: the worker. */
int dqt_cmd_consume(dqt_cli *g) {
    dqt_worker w;
    memset(&w, 0, sizeof(w));
    w.g = g;
    w.conc = 1;
    w.lease = 30000;
    w.max_attempts = 5;
    w.backoff = 1000;
    w.max_backoff = 600000;
    w.jitter = 20;
    w.grace = 30000;
    int rc = consume_options(g, &w);
    if (rc)
        return rc;
    if (g->a.npos > 0)
        return dqt_usage_error(g, "unexpected argument '%s' (put the command "
                                  "after --)", g->a.pos[0]);
    if (g->a.nrest == 0 || g->a.rest[0][0] == '\0') {
        fprintf(stderr, "delayq consume: missing command after --\nTry "
                        "'delayq consume --help'.\n");
        return DQT_EXIT_USAGE;
    }
    w.cmd = g->a.rest; /* argv is NULL-terminated after the last entry */
    if ((rc = consume_queues(g, &w)) != 0) {
        consume_teardown(&w);
        return rc;
    }
    /* Connect once with the sync client first: a wrong URI or an
     * unreachable server is an error now, not a reconnect loop. */
    if ((rc = dqt_open_client(g))) {
        consume_teardown(&w);
        return rc;
    }
    dq_close(g->c);
    g->c = NULL;
    if (build_env(&w) != 0 || (w.base = event_base_new()) == NULL) {
        fprintf(stderr, "delayq consume: setup failed: %s\n",
                strerror(errno));
        consume_teardown(&w);
        return DQT_EXIT_FAILED;
    }
    if ((rc = consume_setup(&w)) != 0) {
        consume_teardown(&w);
        return rc;
    }
    if (!w.quiet) {
        char d[48];
        char list[512] = "";
        size_t used = 0;
        for (int i = 0; i < w.nq && used < sizeof(list); i++) {
            int n = w.nq == 1 ? snprintf(list, sizeof(list), "'%s'", w.qs[i])
                              : snprintf(list + used, sizeof(list) - used,
                                         "%s'%s' (weight %d)",
                                         i ? ", " : "", w.qs[i],
                                         w.weights[i]);
            used += n > 0 ? (size_t)n : 0;
        }
        say(&w, "consuming %s%s with concurrency %d, lease %s", list,
            w.nq > 1 ? (w.strict ? " in strict order" : " by weight") : "",
            (int)w.conc, dqt_fmt_dur(w.lease, d, sizeof(d)));
    }
    event_base_dispatch(w.base);
    if (!w.quiet)
        say(&w, "stopped after %" PRId64 " job(s)", w.taken);
    consume_teardown(&w);
    return DQT_EXIT_OKAY;
}

#endif /* DQT_HAVE_LIBEVENT */
