/*
 * delayq - the command-line tool of libdelayq.
 *
 * Pushes, inspects and consumes delayed jobs.  It uses only the public API
 * of <delayq.h>, like any other program would: whatever it can do, a C,
 * Python or Go program can do too.  `delayq --help` lists the commands;
 * every command has its own `--help`.
 *
 * Exit codes (also in the help text): 0 ok, 1 operation failed / not found,
 * 2 usage error, 3 cannot connect, 4 stale lease token.
 */
#include <delayq.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ---- Exit codes --------------------------------------------------------- */

enum {
    EXIT_OKAY = 0,    /* success */
    EXIT_FAILED = 1,  /* the operation failed, or no such job */
    EXIT_USAGE = 2,   /* bad option, argument or value */
    EXIT_CONNECT = 3, /* cannot connect to Redis, or connection lost */
    EXIT_STALE = 4    /* stale lease token */
};

#define DEFAULT_URI "redis://127.0.0.1:6379"

/* ---- Help texts ---------------------------------------------------------- */

static const char help_main[] =
    "Usage: delayq [GLOBAL OPTIONS] COMMAND [OPTIONS] [ARGS]\n"
    "\n"
    "Delayed-job queues in Redis, from the shell (libdelayq %s).\n"
    "\n"
    "Commands:\n"
    "  push      push a job to run after a delay or at a time\n"
    "  cancel    cancel jobs that have not been delivered yet\n"
    "  poll      claim due jobs under a lease (for scripts that poll by hand)\n"
    "  ack       finish a job you hold\n"
    "  nack      release a job you hold for a retry, or dead-letter it\n"
    "  extend    extend the lease of a job you hold\n"
    "  list      list scheduled, in-flight or dead jobs (alias: peek)\n"
    "  stats     queue counts: table, --json, --prometheus, --watch\n"
    "  dead      requeue, purge or list dead-lettered jobs\n"
    "  consume   run a command for every job that comes due (a worker)\n"
    "  help      show the help of a command (same as COMMAND --help)\n"
    "\n"
    "Global options (before or after the command):\n"
    "  -u, --uri URI        Redis to use; default $DELAYQ_URI, else\n"
    "                       " DEFAULT_URI "\n"
    "                       redis://[user[:password]@]host[:port][/db]\n"
    "                       rediss://... (TLS), unix:///path/to/socket[?db=N]\n"
    "  -q, --queue NAME     queue to work on; default $DELAYQ_QUEUE\n"
    "  -n, --namespace NS   key prefix; default $DELAYQ_NAMESPACE, else \"dq\"\n"
    "  -h, --help           show help; every command has its own\n"
    "      --version        print the tool's and the library's versions\n"
    "\n"
    "Durations (DUR) are numbers with a unit, which may be combined:\n"
    "  250ms, 30s, 5m, 2h, 14d, 1h30m; a bare 0 means zero.\n"
    "Times (TIME) are ISO-8601, e.g. 2026-12-01T09:00:00Z or\n"
    "  2026-12-01T10:00:00+01:00, or Unix epoch milliseconds.\n"
    "Times are measured by the Redis server's clock.\n"
    "\n"
    "Exit codes:\n"
    "  0  success\n"
    "  1  the operation failed, or the job was not found / not in that state\n"
    "  2  usage error: bad option, argument or value\n"
    "  3  cannot connect to Redis (or the connection was lost)\n"
    "  4  stale lease token: the job is no longer yours\n"
    "\n"
    "Errors are written to stderr as \"delayq COMMAND: message (ECODE)\".\n";

static const char help_push[] =
    "Usage: delayq push [PAYLOAD] [--in DUR | --at TIME] [--id ID]\n"
    "                   [--replace | --keep] [--json]\n"
    "\n"
    "Pushes one job.  The payload is PAYLOAD, or standard input when PAYLOAD\n"
    "is missing or \"-\" (binary-safe).  Prints the outcome and the job id:\n"
    "  pushed ID      a new job was created\n"
    "  kept ID        a job with that id existed and was left alone (--keep)\n"
    "  replaced ID    a job with that id existed and was replaced (--replace)\n"
    "  done ID        a job with that id was acked a short while ago (--keep;\n"
    "                 a retried push that already ran): nothing was written\n"
    "\n"
    "Options:\n"
    "  --in DUR       run after DUR (default 0: due now)\n"
    "  --at TIME      run at TIME (ISO-8601 or epoch ms; past = due now)\n"
    "  --id ID        job id (1..128 bytes); default: a generated unique id\n"
    "  --replace      if the id exists, replace payload and due time\n"
    "  --keep         if the id exists, leave it alone (the default)\n"
    "  --json         print {\"id\":...,\"outcome\":...}\n";

static const char help_cancel[] =
    "Usage: delayq cancel ID... [--inflight]\n"
    "\n"
    "Cancels jobs that have not been delivered yet.  A job that is in flight\n"
    "(its handler is running) is left alone unless --inflight is given; then\n"
    "it is deleted and its holder's ack/nack/extend find no job.  Dead jobs\n"
    "are not touched (see `delayq dead purge`).\n"
    "Prints \"canceled ID\" per job; exits 1 if any job was not found or was\n"
    "in flight without --inflight.\n"
    "\n"
    "Options:\n"
    "  --inflight     also remove jobs that are in flight\n";

static const char help_poll[] =
    "Usage: delayq poll [--max N] [--lease DUR] [--wait DUR] [--json]\n"
    "\n"
    "Claims up to N due jobs and leases them to you: finish each with\n"
    "`delayq ack ID TOKEN` (or nack/extend) before the lease runs out, or it\n"
    "is delivered again.  Prints one line per job, tab-separated:\n"
    "  ID <TAB> ATTEMPT <TAB> TOKEN <TAB> PAYLOAD\n"
    "with the payload escaped (\\n, \\t, \\\\, \\xHH); nothing when no job was\n"
    "due.  With --json: an array of objects with id, attempt, token, due_ms,\n"
    "lease_deadline_ms and payload (or payload_base64 if it is not UTF-8).\n"
    "\n"
    "Options:\n"
    "  --max N        jobs to claim at most, 1..1000 (default 1)\n"
    "  --lease DUR    lease length (default 30s)\n"
    "  --wait DUR     when nothing is due, wait up to DUR for a job (default 0)\n"
    "  --json         JSON output\n";

static const char help_ack[] =
    "Usage: delayq ack ID TOKEN\n"
    "\n"
    "Finishes a job you hold (as `delayq poll` printed it) and deletes it.\n"
    "Exits 4 if TOKEN is stale (the lease ran out and the job was claimed\n"
    "again, or it was nacked, replaced or cancelled), 1 if there is no such\n"
    "job.\n";

static const char help_nack[] =
    "Usage: delayq nack ID TOKEN [--in DUR] [--dead]\n"
    "\n"
    "Releases a job you hold: due again after DUR (default 0) with its\n"
    "attempt count kept, or moved to the dead set with --dead.  Prints\n"
    "\"requeued ID\" or \"dead ID\".  Exits 4 if TOKEN is stale, 1 if there is\n"
    "no such job.\n"
    "\n"
    "Options:\n"
    "  --in DUR       delay before the job is due again (default 0)\n"
    "  --dead         give up: dead-letter the job now\n";

static const char help_extend[] =
    "Usage: delayq extend ID TOKEN [--lease DUR]\n"
    "\n"
    "Sets the lease of a job you hold to DUR from now (default 30s) and\n"
    "prints the new deadline.  Exits 4 if TOKEN is stale, 1 if there is no\n"
    "such job.\n"
    "\n"
    "Options:\n"
    "  --lease DUR    new lease length from now (default 30s)\n";

static const char help_list[] =
    "Usage: delayq list [scheduled|inflight|dead|all] [--offset N]\n"
    "                   [--limit N] [--json]\n"
    "       delayq peek ...   (the same)\n"
    "\n"
    "Lists the jobs of a queue in one state, in time order, with their ids,\n"
    "attempts, a payload preview and their times in human form (\"in 29m 58s\",\n"
    "\"3s ago\"):\n"
    "  scheduled   pending jobs, by due time (those due now included)\n"
    "  inflight    jobs leased to a consumer, by lease deadline\n"
    "  dead        dead-lettered jobs, by time of death\n"
    "  all         the three, one after the other (the default)\n"
    "Listing scheduled and in-flight jobs needs a libdelayq with dq_list;\n"
    "without it only dead jobs can be listed.\n"
    "\n"
    "Options:\n"
    "  --offset N     skip the first N jobs of each state (default 0)\n"
    "  --limit N      show at most N jobs of each state, 1..1000 (default 50)\n"
    "  --json         JSON: {\"queue\", \"now_ms\", \"jobs\": [{\"state\", \"id\",\n"
    "                 \"attempt\", \"due_ms\" | \"lease_deadline_ms\" |\n"
    "                 \"died_ms\", \"payload\" | \"payload_base64\"}]}\n";

static const char help_stats[] =
    "Usage: delayq stats [QUEUE...] [--json | --prometheus]\n"
    "                    [--watch [INTERVAL]] [--count N]\n"
    "\n"
    "Shows the counts of one or more queues (default: --queue), read\n"
    "atomically per queue:\n"
    "  scheduled   pending jobs not yet due\n"
    "  due         pending jobs due now (including expired leases)\n"
    "  inflight    jobs leased to a consumer\n"
    "  dead        dead-lettered jobs\n"
    "  next due    time until the earliest pending job is due\n"
    "\n"
    "Options:\n"
    "  --json              one JSON object per queue and line\n"
    "  --prometheus        Prometheus text exposition format:\n"
    "                      delayq_jobs{queue=\"Q\",state=\"scheduled\"} N, ...\n"
    "                      delayq_next_due_seconds{queue=\"Q\"} S (-1: none)\n"
    "  --watch [INTERVAL]  refresh every INTERVAL (default 2s) until Ctrl-C\n"
    "  --count N           with --watch: stop after N refreshes\n";

static const char help_dead[] =
    "Usage: delayq dead requeue (ID... | --all) [--in DUR]\n"
    "       delayq dead purge (ID... | --all)\n"
    "       delayq dead list [--offset N] [--limit N] [--json]\n"
    "\n"
    "  requeue   moves dead jobs back to pending, due after DUR (default 0),\n"
    "            attempts reset to 0\n"
    "  purge     deletes dead jobs for good\n"
    "  list      lists dead jobs (same as `delayq list dead`)\n"
    "Prints how many jobs were requeued or purged; exits 1 if a given ID was\n"
    "not a dead job.\n"
    "\n"
    "Options:\n"
    "  --all          every dead job (in batches of 1000 until none is left)\n"
    "  --in DUR       requeue: delay before the jobs are due (default 0)\n";

static const char help_consume[] =
    "Usage: delayq consume [OPTIONS] -- COMMAND [ARG...]\n"
    "\n"
    "Runs COMMAND for every job of the queue as it comes due (execvp, no\n"
    "shell: use `sh -c '...'` for one), with the payload on its standard\n"
    "input and in its environment:\n"
    "  DELAYQ_JOB_ID     the job id\n"
    "  DELAYQ_ATTEMPT    the delivery number, 1 on the first delivery\n"
    "  DELAYQ_QUEUE      the queue name\n"
    "Exit status 0 acks the job.  Any other status (or a signal) nacks it:\n"
    "it runs again after --backoff * 2^(attempt-1), capped at --max-backoff,\n"
    "and after --max-attempts deliveries it is dead-lettered.  Up to N\n"
    "commands run at once; leases of long-running ones are extended every\n"
    "half lease.  SIGINT/SIGTERM stop gracefully: no new jobs are taken,\n"
    "running commands get --grace to finish, the rest are killed (SIGTERM,\n"
    "then SIGKILL) and their jobs released for another consumer; exit 0.\n"
    "Each command runs in its own process group; its stdout/stderr are the\n"
    "consumer's.  One line per job is logged to stderr.\n"
    "\n"
    "Options:\n"
    "  --concurrency N    commands running at once, 1..1000 (default 1)\n"
    "  --lease DUR        lease per job (default 30s)\n"
    "  --max-attempts N   deliveries before a job is dead-lettered\n"
    "                     (default 5; 0 = retry forever)\n"
    "  --backoff DUR      first retry delay (default 1s)\n"
    "  --max-backoff DUR  longest retry delay (default 10m)\n"
    "  --grace DUR        time running commands get at a stop (default 30s)\n"
    "  --max-jobs N       stop after N jobs were taken (default: no limit)\n"
    "  --quiet            do not log one line per job\n";

/* ---- Small utilities ------------------------------------------------------ */

/* Monotonic clock in ms. */
static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* This machine's wall clock in epoch ms (only for display). */
static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms) {
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* a signal ends it early, on purpose */
}

/* A growable byte buffer. */
typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static int buf_reserve(buf *b, size_t more) {
    if (b->len + more + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more + 1) {
        if (cap > SIZE_MAX / 2)
            return -1;
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Reads all of fd into b.  0 or -1 (errno set). */
static int read_all(int fd, buf *b) {
    for (;;) {
        if (buf_reserve(b, 65536) != 0) {
            errno = ENOMEM;
            return -1;
        }
        ssize_t n = read(fd, b->p + b->len, b->cap - b->len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        b->len += (size_t)n;
    }
}

/* ---- Durations and times -------------------------------------------------- */

/* Parses "250ms", "30s", "5m", "2h", "14d", combinations ("1h30m") and a
 * bare "0".  Returns 0 and *ms, or -1. */
static int parse_duration(const char *s, int64_t *ms) {
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
static int parse_time(const char *s, int64_t *ms) {
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

/* Formats epoch ms as ISO-8601 UTC to the second. */
static const char *fmt_iso(int64_t ms, char *out, size_t n) {
    time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || strftime(out, n, "%Y-%m-%dT%H:%M:%SZ",
                                               &tm) == 0)
        snprintf(out, n, "%" PRId64, ms);
    return out;
}

/* Formats a duration as its two largest units: "2d 3h", "29m 58s", "3s",
 * "250ms". */
static const char *fmt_dur(int64_t ms, char *out, size_t n) {
    if (ms < 0)
        ms = -ms;
    if (ms < 1000) {
        snprintf(out, n, "%" PRId64 "ms", ms);
        return out;
    }
    int64_t s = ms / 1000;
    static const struct {
        int64_t secs;
        const char *unit;
    } units[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
    size_t o = 0;
    int shown = 0;
    out[0] = '\0';
    for (size_t i = 0; i < 4 && shown < 2; i++) {
        int64_t v = s / units[i].secs;
        s %= units[i].secs;
        if (v == 0) {
            if (shown)
                break; /* "2h" rather than "2h 0m" */
            continue;
        }
        int w = snprintf(out + o, n - o, "%s%" PRId64 "%s", shown ? " " : "",
                         v, units[i].unit);
        if (w < 0 || (size_t)w >= n - o)
            break;
        o += (size_t)w;
        shown++;
    }
    return out;
}

/* "in 29m 58s", "3s ago" or "now" for a time relative to now. */
static const char *fmt_rel(int64_t at_ms, int64_t now_ms, char *out,
                           size_t n) {
    char d[48];
    int64_t delta = at_ms - now_ms;
    if (delta > -1000 && delta < 1000)
        snprintf(out, n, "now");
    else if (delta > 0)
        snprintf(out, n, "in %s", fmt_dur(delta, d, sizeof(d)));
    else
        snprintf(out, n, "%s ago", fmt_dur(delta, d, sizeof(d)));
    return out;
}

/* ---- Text and JSON output ------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n) {
    unsigned char c = p[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

static int is_utf8(const void *s, size_t n) {
    const unsigned char *p = s;
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len(p + i, n - i);
        if (l == 0)
            return 0;
        i += l;
    }
    return 1;
}

/* Writes a JSON string; bytes that are not valid UTF-8 become U+FFFD. */
static void json_str(FILE *f, const void *s, size_t n) {
    const unsigned char *p = s;
    putc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t l = utf8_len(p + i, n - i);
        if (l == 0) {
            fputs("\\ufffd", f);
            i++;
            continue;
        }
        if (c == '"' || c == '\\') {
            putc('\\', f);
            putc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c == '\r') {
            fputs("\\r", f);
        } else if (c < 0x20 || c == 0x7F) {
            fprintf(f, "\\u%04x", c);
        } else {
            fwrite(p + i, 1, l, f);
        }
        i += l;
    }
    putc('"', f);
}

static void json_cstr(FILE *f, const char *s) { json_str(f, s, strlen(s)); }

static void base64(FILE *f, const unsigned char *p, size_t n) {
    static const char tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        putc(tab[(v >> 18) & 63], f);
        putc(tab[(v >> 12) & 63], f);
        putc(i + 1 < n ? tab[(v >> 6) & 63] : '=', f);
        putc(i + 2 < n ? tab[v & 63] : '=', f);
    }
}

/* ,"payload":"..." for UTF-8 payloads, else ,"payload_base64":"...". */
static void json_payload(FILE *f, const void *p, size_t n) {
    if (is_utf8(p, n)) {
        fputs(",\"payload\":", f);
        json_str(f, p, n);
    } else {
        fputs(",\"payload_base64\":\"", f);
        base64(f, p, n);
        putc('"', f);
    }
}

/* The escape of byte c for one-line output, in tmp (8 bytes). */
static const char *esc_byte(unsigned char c, char *tmp) {
    if (c == '\n')
        return "\\n";
    if (c == '\t')
        return "\\t";
    if (c == '\r')
        return "\\r";
    if (c == '\\')
        return "\\\\";
    if (c < 0x20 || c == 0x7F) {
        snprintf(tmp, 8, "\\x%02x", c);
        return tmp;
    }
    tmp[0] = (char)c;
    tmp[1] = '\0';
    return tmp;
}

/* Writes bytes with C-style escapes so that they fit on one line; at most
 * max output characters (0 = no limit), ending in "..." when cut. */
static void escaped(FILE *f, const void *s, size_t n, size_t max) {
    const unsigned char *p = s;
    char tmp[8];
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += strlen(esc_byte(p[i], tmp));
    size_t room = max == 0 || total <= max ? total : (max > 3 ? max - 3 : 0);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = esc_byte(p[i], tmp);
        size_t l = strlen(e);
        if (out + l > room)
            break;
        fputs(e, f);
        out += l;
    }
    if (room < total)
        fputs("...", f);
}

/* Width of escaped(s) without a limit. */
static size_t escaped_width(const char *s) {
    char tmp[8];
    size_t total = 0;
    for (; *s; s++)
        total += strlen(esc_byte((unsigned char)*s, tmp));
    return total;
}

/* ---- Command line parsing ------------------------------------------------- */

/* Option ids: global ones first. */
enum {
    O_HELP = 1, O_URI, O_QUEUE, O_NS, O_VERSION,
    O_IN, O_AT, O_ID, O_REPLACE, O_KEEP, O_JSON, O_INFLIGHT, O_MAX,
    O_LEASE, O_WAIT, O_DEAD, O_OFFSET, O_LIMIT, O_PROM, O_WATCH, O_COUNT,
    O_ALL, O_CONC, O_MAXATT, O_BACKOFF, O_MAXBACK, O_GRACE, O_MAXJOBS,
    O_QUIET
};

/* arg: 0 none, 1 required, 2 optional (taken only when it is a duration). */
typedef struct optspec {
    const char *name;
    char short_name;
    int arg;
    int id;
} optspec;

static const optspec global_opts[] = {
    {"help", 'h', 0, O_HELP},
    {"uri", 'u', 1, O_URI},
    {"queue", 'q', 1, O_QUEUE},
    {"namespace", 'n', 1, O_NS},
    {"version", 0, 0, O_VERSION},
    {NULL, 0, 0, 0}};

typedef struct optval {
    int id;
    const char *name; /* as given, for messages */
    const char *val;  /* NULL when none */
} optval;

typedef struct args {
    optval *opts;  /* options in order */
    int nopts;
    char **pos;    /* positional arguments */
    int npos;
    char **rest;   /* after "--" (consume's command) */
    int nrest;
} args;

/* The state of one run. */
typedef struct cli {
    const char *cmd;   /* command name, for messages ("push") */
    const char *uri;   /* --uri / DELAYQ_URI / default */
    const char *queue; /* --queue / DELAYQ_QUEUE, may be NULL */
    const char *ns;    /* --namespace / DELAYQ_NAMESPACE, may be NULL */
    int help;          /* --help seen */
    int version;       /* --version seen */
    dq_client *c;      /* open client or NULL */
    args a;            /* parsed command line of the command */
} cli;

static void args_free(args *a) {
    free(a->opts);
    free(a->pos);
    memset(a, 0, sizeof(*a));
}

static const optspec *find_opt(const optspec *const *tables, const char *name,
                               size_t nlen, char short_name) {
    for (int t = 0; tables[t] != NULL; t++)
        for (const optspec *o = tables[t]; o->name != NULL; o++) {
            if (short_name ? o->short_name == short_name
                           : (strlen(o->name) == nlen &&
                              strncmp(o->name, name, nlen) == 0))
                return o;
        }
    return NULL;
}

/* Prints a usage error and returns EXIT_USAGE. */
static int usage_error(const cli *g, const char *fmt, const char *arg) {
    fprintf(stderr, "delayq%s%s: ", g->cmd ? " " : "", g->cmd ? g->cmd : "");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'delayq %s%s--help'.\n", g->cmd ? g->cmd : "",
            g->cmd ? " " : "");
    return EXIT_USAGE;
}

/* Parses argv[0..argc) against the command's options and the global ones.
 * With stop_at_pos, parsing stops at the first positional argument (which
 * is left in a->rest), as used before the command name. */
static int parse_args(cli *g, int argc, char **argv, const optspec *specs,
                      int stop_at_pos, args *a) {
    const optspec *tables[3] = {global_opts, specs, NULL};
    memset(a, 0, sizeof(*a));
    a->opts = calloc((size_t)argc + 1, sizeof(*a->opts));
    a->pos = calloc((size_t)argc + 1, sizeof(*a->pos));
    if (a->opts == NULL || a->pos == NULL) {
        fprintf(stderr, "delayq: out of memory\n");
        return EXIT_FAILED;
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
        const optspec *o;
        const char *val = NULL;
        if (s[1] == '-') {
            const char *name = s + 2, *eq = strchr(name, '=');
            size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
            o = find_opt(tables, name, nlen, 0);
            if (o == NULL)
                return usage_error(g, "unknown option '%s'", s);
            if (eq != NULL) {
                if (o->arg == 0)
                    return usage_error(g, "option '--%s' takes no value",
                                       o->name);
                val = eq + 1;
            }
        } else {
            if (s[2] != '\0')
                return usage_error(g, "unknown option '%s' (long options "
                                      "start with --)", s);
            o = find_opt(tables, NULL, 0, s[1]);
            if (o == NULL)
                return usage_error(g, "unknown option '%s'", s);
        }
        if (val == NULL && o->arg == 1) {
            if (i + 1 >= argc)
                return usage_error(g, "option '%s' needs a value", s);
            val = argv[++i];
        } else if (val == NULL && o->arg == 2 && i + 1 < argc) {
            int64_t ms;
            if (parse_duration(argv[i + 1], &ms) == 0)
                val = argv[++i];
        }
        optval *ov = &a->opts[a->nopts++];
        ov->id = o->id;
        ov->name = o->name;
        ov->val = val;
        switch (o->id) {
        case O_HELP:
            g->help = 1;
            break;
        case O_VERSION:
            g->version = 1;
            break;
        case O_URI:
            g->uri = val;
            break;
        case O_QUEUE:
            g->queue = val;
            break;
        case O_NS:
            g->ns = val;
            break;
        default:
            break;
        }
    }
    return EXIT_OKAY;
}

/* Value parsers for options: each returns 0 or a usage error exit code. */
static int opt_duration(const cli *g, const optval *o, int64_t *ms) {
    if (o->val == NULL || parse_duration(o->val, ms) != 0) {
        fprintf(stderr,
                "delayq %s: --%s: '%s' is not a duration; use a number with "
                "a unit (250ms, 30s, 5m, 2h, 14d, 1h30m)\n",
                g->cmd, o->name, o->val ? o->val : "");
        return EXIT_USAGE;
    }
    return 0;
}

static int opt_int(const cli *g, const optval *o, int64_t lo, int64_t hi,
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
        return EXIT_USAGE;
    }
    *v = x;
    return 0;
}

/* ---- Client --------------------------------------------------------------- */

/* Maps a library error code to the tool's exit code. */
static int exit_for(int rc) {
    switch (rc) {
    case DQ_ESTALE:
        return EXIT_STALE;
    case DQ_EIO:
    case DQ_ETIMEDOUT:
    case DQ_EAUTH:
        return EXIT_CONNECT;
    case DQ_ENULL:
    case DQ_EINVAL:
    case DQ_EQUEUE:
    case DQ_EID:
    case DQ_EDELAY:
    case DQ_ELEASE:
    case DQ_ETOOBIG:
    case DQ_EURI:
        return EXIT_USAGE;
    default:
        return EXIT_FAILED;
    }
}

/* Reports a failed library call on stderr; returns the exit code. */
static int report(const cli *g, int rc) {
    const char *msg = g->c ? dq_errmsg(g->c) : "";
    if (msg == NULL || *msg == '\0')
        msg = dq_strerror(rc);
    fprintf(stderr, "delayq %s: %s (%s)\n", g->cmd, msg, dq_errname(rc));
    return exit_for(rc);
}

/* The queue of the command, or NULL after a usage message. */
static const char *need_queue(const cli *g) {
    if (g->queue == NULL || *g->queue == '\0') {
        fprintf(stderr,
                "delayq %s: no queue: use --queue NAME or set DELAYQ_QUEUE\n",
                g->cmd);
        return NULL;
    }
    return g->queue;
}

/* Opens the client.  max_attempts > 0 sets DQ_OPT_MAX_ATTEMPTS. */
static int open_client(cli *g, int64_t max_attempts) {
    dq_options *o = dq_options_new();
    if (o == NULL) {
        fprintf(stderr, "delayq %s: out of memory\n", g->cmd);
        return EXIT_FAILED;
    }
    int rc = 0;
    if (g->ns != NULL && (rc = dq_options_set_str(o, DQ_OPT_NAMESPACE,
                                                  g->ns)) != 0) {
        fprintf(stderr,
                "delayq %s: --namespace: '%s' is not a valid namespace "
                "(1..64 of [A-Za-z0-9._:-])\n",
                g->cmd, g->ns);
        dq_options_free(o);
        return EXIT_USAGE;
    }
    if (max_attempts > 0)
        rc = dq_options_set_int(o, DQ_OPT_MAX_ATTEMPTS, max_attempts);
    if (rc == 0)
        rc = dq_open(g->uri, o, &g->c);
    dq_options_free(o);
    if (rc != 0) {
        const char *msg = g->c ? dq_errmsg(g->c) : dq_strerror(rc);
        if (msg == NULL || *msg == '\0')
            msg = dq_strerror(rc);
        if (rc == DQ_EURI) {
            fprintf(stderr, "delayq %s: bad --uri: %s (%s)\n", g->cmd, msg,
                    dq_errname(rc));
            return EXIT_USAGE;
        }
        fprintf(stderr, "delayq %s: cannot connect to Redis: %s (%s)\n",
                g->cmd, msg, dq_errname(rc));
        return rc == DQ_ENOMEM ? EXIT_FAILED : EXIT_CONNECT;
    }
    const char *w = dq_warnings(g->c);
    if (w != NULL && *w != '\0')
        fprintf(stderr, "delayq %s: warning: %s\n", g->cmd, w);
    return EXIT_OKAY;
}

/* Common start of a command that needs a queue and a connection. */
static int start(cli *g, const char **queue) {
    if ((*queue = need_queue(g)) == NULL)
        return EXIT_USAGE;
    return open_client(g, 0);
}

/* Fails unless the command got between lo and hi positional arguments. */
static int npos_check(const cli *g, int lo, int hi, const char *what) {
    if (g->a.npos < lo) {
        fprintf(stderr, "delayq %s: missing %s\nTry 'delayq %s --help'.\n",
                g->cmd, what, g->cmd);
        return EXIT_USAGE;
    }
    if (hi >= 0 && g->a.npos > hi)
        return usage_error(g, "unexpected argument '%s'", g->a.pos[hi]);
    return 0;
}

/* ---- push ----------------------------------------------------------------- */

static const optspec push_opts[] = {
    {"in", 0, 1, O_IN},          {"at", 0, 1, O_AT},
    {"id", 0, 1, O_ID},          {"replace", 0, 0, O_REPLACE},
    {"keep", 0, 0, O_KEEP},      {"json", 0, 0, O_JSON},
    {NULL, 0, 0, 0}};

static int cmd_push(cli *g) {
    int64_t delay = 0, at = -1;
    const char *id = NULL;
    int flags = DQ_PUSH_KEEP, json = 0, rc, have_in = 0;
    for (int i = 0; i < g->a.nopts; i++) {
        const optval *o = &g->a.opts[i];
        switch (o->id) {
        case O_IN:
            if ((rc = opt_duration(g, o, &delay)))
                return rc;
            have_in = 1;
            break;
        case O_AT:
            if (parse_time(o->val, &at) != 0) {
                fprintf(stderr,
                        "delayq push: --at: '%s' is not a time; use ISO-8601 "
                        "UTC like 2026-12-01T09:00:00Z or epoch ms\n",
                        o->val);
                return EXIT_USAGE;
            }
            break;
        case O_ID:
            id = o->val;
            break;
        case O_REPLACE:
            flags = DQ_PUSH_REPLACE;
            break;
        case O_KEEP:
            flags = DQ_PUSH_KEEP;
            break;
        case O_JSON:
            json = 1;
            break;
        }
    }
    if (have_in && at >= 0)
        return usage_error(g, "use either --in or --at, not both%s", "");
    if ((rc = npos_check(g, 0, 1, "payload")))
        return rc;
    const char *queue;
    buf payload = {0};
    const char *data;
    size_t len;
    if (g->a.npos == 1 && strcmp(g->a.pos[0], "-") != 0) {
        data = g->a.pos[0];
        len = strlen(data);
    } else {
        if (read_all(0, &payload) != 0) {
            fprintf(stderr, "delayq push: reading the payload from stdin: %s\n",
                    strerror(errno));
            free(payload.p);
            return EXIT_FAILED;
        }
        data = payload.p ? payload.p : "";
        len = payload.len;
    }
    if ((rc = start(g, &queue))) {
        free(payload.p);
        return rc;
    }
    char idbuf[DQ_ID_BUF];
    int outcome = 0;
    if (at >= 0)
        rc = dq_push_at(g->c, queue, data, len, at, id, flags, idbuf,
                        sizeof(idbuf), &outcome);
    else
        rc = dq_push(g->c, queue, data, len, delay, id, flags, idbuf,
                     sizeof(idbuf), &outcome);
    free(payload.p);
    if (rc < 0)
        return report(g, rc);
    const char *what = outcome == DQ_PUSHED   ? "pushed"
                       : outcome == DQ_KEPT   ? "kept"
                       : outcome == DQ_REPLACED ? "replaced"
                       : outcome == DQ_DONE     ? "done"
                                              : "unknown";
    if (json) {
        fputs("{\"id\":", stdout);
        json_cstr(stdout, idbuf);
        printf(",\"outcome\":\"%s\"}\n", what);
    } else {
        printf("%s %s\n", what, idbuf);
    }
    return EXIT_OKAY;
}

/* ---- cancel --------------------------------------------------------------- */

static const optspec cancel_opts[] = {{"inflight", 0, 0, O_INFLIGHT},
                                      {NULL, 0, 0, 0}};

static int cmd_cancel(cli *g) {
    int flags = 0, rc, ret = EXIT_OKAY;
    for (int i = 0; i < g->a.nopts; i++)
        if (g->a.opts[i].id == O_INFLIGHT)
            flags = DQ_CANCEL_INFLIGHT;
    const char *queue;
    if ((rc = npos_check(g, 1, -1, "job id")) || (rc = start(g, &queue)))
        return rc;
    for (int i = 0; i < g->a.npos; i++) {
        const char *id = g->a.pos[i];
        rc = dq_cancel(g->c, queue, id, flags);
        if (rc < 0)
            return report(g, rc);
        if (rc == DQ_CANCELED_PENDING) {
            printf("canceled %s\n", id);
        } else if (rc == DQ_CANCELED_INFLIGHT) {
            printf("canceled %s (was in flight)\n", id);
        } else if (rc == DQ_CANCEL_BUSY) {
            fprintf(stderr,
                    "delayq cancel: job '%s' is in flight: left alone (use "
                    "--inflight to remove it)\n",
                    id);
            ret = EXIT_FAILED;
        } else {
            fprintf(stderr,
                    "delayq cancel: no pending or in-flight job '%s'\n", id);
            ret = EXIT_FAILED;
        }
    }
    return ret;
}

/* ---- poll ----------------------------------------------------------------- */

static const optspec poll_opts[] = {
    {"max", 0, 1, O_MAX},   {"lease", 0, 1, O_LEASE},
    {"wait", 0, 1, O_WAIT}, {"json", 0, 0, O_JSON},
    {NULL, 0, 0, 0}};

static int cmd_poll(cli *g) {
    int64_t max = 1, lease = 30000, wait = 0;
    int json = 0, rc;
    for (int i = 0; i < g->a.nopts; i++) {
        const optval *o = &g->a.opts[i];
        rc = 0;
        if (o->id == O_MAX)
            rc = opt_int(g, o, 1, DQ_POLL_MAX, &max);
        else if (o->id == O_LEASE)
            rc = opt_duration(g, o, &lease);
        else if (o->id == O_WAIT)
            rc = opt_duration(g, o, &wait);
        else if (o->id == O_JSON)
            json = 1;
        if (rc)
            return rc;
    }
    const char *queue;
    if ((rc = npos_check(g, 0, 0, "")) || (rc = start(g, &queue)))
        return rc;
    dq_jobs *jobs = NULL;
    if (wait > 0)
        rc = dq_poll_wait(g->c, queue, (int)max, lease, wait, &jobs);
    else
        rc = dq_poll(g->c, queue, (int)max, lease, &jobs, NULL);
    if (rc < 0)
        return report(g, rc);
    size_t n = dq_jobs_count(jobs);
    if (json)
        putchar('[');
    for (size_t i = 0; i < n; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        size_t len;
        const void *p = dq_job_payload(j, &len);
        if (json) {
            fputs(i ? ",{\"id\":" : "{\"id\":", stdout);
            json_cstr(stdout, dq_job_id(j));
            printf(",\"attempt\":%" PRId64 ",\"token\":\"%s\",\"due_ms\":%" PRId64
                   ",\"lease_deadline_ms\":%" PRId64,
                   dq_job_attempt(j), dq_job_token(j), dq_job_due_ms(j),
                   dq_job_lease_deadline_ms(j));
            json_payload(stdout, p, len);
            putchar('}');
        } else {
            escaped(stdout, dq_job_id(j), strlen(dq_job_id(j)), 0);
            printf("\t%" PRId64 "\t%s\t", dq_job_attempt(j), dq_job_token(j));
            escaped(stdout, p, len, 0);
            putchar('\n');
        }
    }
    if (json)
        puts("]");
    dq_jobs_free(jobs);
    return EXIT_OKAY;
}

/* ---- ack / nack / extend -------------------------------------------------- */

static int cmd_ack(cli *g) {
    const char *queue;
    int rc;
    if ((rc = npos_check(g, 2, 2, "job id and token")) ||
        (rc = start(g, &queue)))
        return rc;
    if ((rc = dq_ack(g->c, queue, g->a.pos[0], g->a.pos[1])) < 0)
        return report(g, rc);
    printf("acked %s\n", g->a.pos[0]);
    return EXIT_OKAY;
}

static const optspec nack_opts[] = {
    {"in", 0, 1, O_IN}, {"dead", 0, 0, O_DEAD}, {NULL, 0, 0, 0}};

static int cmd_nack(cli *g) {
    int64_t delay = 0;
    int flags = 0, rc;
    for (int i = 0; i < g->a.nopts; i++) {
        const optval *o = &g->a.opts[i];
        if (o->id == O_IN && (rc = opt_duration(g, o, &delay)))
            return rc;
        if (o->id == O_DEAD)
            flags = DQ_NACK_DEAD;
    }
    const char *queue;
    if ((rc = npos_check(g, 2, 2, "job id and token")) ||
        (rc = start(g, &queue)))
        return rc;
    rc = dq_nack(g->c, queue, g->a.pos[0], g->a.pos[1], delay, flags);
    if (rc < 0)
        return report(g, rc);
    printf("%s %s\n", rc == 1 ? "dead" : "requeued", g->a.pos[0]);
    return EXIT_OKAY;
}

static const optspec extend_opts[] = {{"lease", 0, 1, O_LEASE},
                                      {NULL, 0, 0, 0}};

static int cmd_extend(cli *g) {
    int64_t lease = 30000, deadline = 0;
    int rc;
    for (int i = 0; i < g->a.nopts; i++)
        if (g->a.opts[i].id == O_LEASE &&
            (rc = opt_duration(g, &g->a.opts[i], &lease)))
            return rc;
    const char *queue;
    if ((rc = npos_check(g, 2, 2, "job id and token")) ||
        (rc = start(g, &queue)))
        return rc;
    rc = dq_extend(g->c, queue, g->a.pos[0], g->a.pos[1], lease, &deadline);
    if (rc < 0)
        return report(g, rc);
    char iso[40], d[48];
    printf("extended %s until %s (%s from now)\n", g->a.pos[0],
           fmt_iso(deadline, iso, sizeof(iso)), fmt_dur(lease, d, sizeof(d)));
    return EXIT_OKAY;
}

/* ---- list ----------------------------------------------------------------- */

enum { ST_SCHEDULED = 0, ST_INFLIGHT = 1, ST_DEAD = 2 };
static const char *const state_names[3] = {"scheduled", "inflight", "dead"};

static const optspec list_opts[] = {
    {"offset", 0, 1, O_OFFSET}, {"limit", 0, 1, O_LIMIT},
    {"json", 0, 0, O_JSON},     {NULL, 0, 0, 0}};

/* Fetches one page of jobs in state st; *now_ms receives the server's time
 * when known (dq_list), else this machine's.  Returns count or a code. */
static int fetch_state(cli *g, const char *queue, int st, int64_t offset,
                       int limit, dq_jobs **jobs, int64_t *now_ms) {
#ifdef DQ_HAVE_LIST
    static const int which[3] = {DQ_LIST_SCHEDULED, DQ_LIST_INFLIGHT,
                                 DQ_LIST_DEAD};
    return dq_list(g->c, queue, which[st], offset, limit, jobs, now_ms);
#else
    *now_ms = wall_ms();
    if (st != ST_DEAD) {
        *jobs = NULL;
        return DQ_ENOTSUP;
    }
    return dq_dead_list(g->c, queue, offset, limit, jobs);
#endif
}

static int have_list(void) {
#ifdef DQ_HAVE_LIST
    return 1;
#else
    return 0;
#endif
}

static void print_table(int st, const dq_jobs *jobs, int64_t now,
                        int64_t offset) {
    static const char *const when[3] = {"DUE", "LEASE ENDS", "DIED"};
    size_t n = dq_jobs_count(jobs), idw = 2;
    for (size_t i = 0; i < n; i++) {
        size_t l = escaped_width(dq_job_id(dq_jobs_at(jobs, i)));
        if (l > idw)
            idw = l;
    }
    if (idw > 40)
        idw = 40;
    printf("%s jobs (from %" PRId64 "): %zu\n", state_names[st], offset, n);
    if (n == 0)
        return;
    printf("  %-*s  %-14s  %-20s  %7s  %s\n", (int)idw, "ID", when[st],
           "AT (UTC)", "ATTEMPT", "PAYLOAD");
    for (size_t i = 0; i < n; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        int64_t t = st == ST_INFLIGHT && dq_job_lease_deadline_ms(j)
                        ? dq_job_lease_deadline_ms(j)
                        : dq_job_due_ms(j);
        char rel[64], iso[40];
        size_t len;
        const void *p = dq_job_payload(j, &len);
        printf("  ");
        escaped(stdout, dq_job_id(j), strlen(dq_job_id(j)), idw);
        size_t w = escaped_width(dq_job_id(j));
        int pad = w >= idw ? 0 : (int)(idw - w);
        printf("%*s  %-14s  %-20s  %7" PRId64 "  ", pad > 0 ? pad : 0, "",
               fmt_rel(t, now, rel, sizeof(rel)),
               fmt_iso(t, iso, sizeof(iso)), dq_job_attempt(j));
        escaped(stdout, p, len, 48);
        putchar('\n');
    }
}

static void print_json_jobs(int st, const dq_jobs *jobs, int *first) {
    static const char *const tkey[3] = {"due_ms", "lease_deadline_ms",
                                        "died_ms"};
    for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        int64_t t = st == ST_INFLIGHT && dq_job_lease_deadline_ms(j)
                        ? dq_job_lease_deadline_ms(j)
                        : dq_job_due_ms(j);
        size_t len;
        const void *p = dq_job_payload(j, &len);
        printf("%s{\"state\":\"%s\",\"id\":", *first ? "" : ",",
               state_names[st]);
        json_cstr(stdout, dq_job_id(j));
        printf(",\"attempt\":%" PRId64 ",\"%s\":%" PRId64, dq_job_attempt(j),
               tkey[st], t);
        json_payload(stdout, p, len);
        putchar('}');
        *first = 0;
    }
}

/* Lists the states in mask (bit per ST_*). */
static int list_states(cli *g, unsigned mask, int explicit_state) {
    int64_t offset = 0, limit = 50;
    int json = 0, rc;
    for (int i = 0; i < g->a.nopts; i++) {
        const optval *o = &g->a.opts[i];
        rc = 0;
        if (o->id == O_OFFSET)
            rc = opt_int(g, o, 0, INT32_MAX, &offset);
        else if (o->id == O_LIMIT)
            rc = opt_int(g, o, 1, DQ_POLL_MAX, &limit);
        else if (o->id == O_JSON)
            json = 1;
        if (rc)
            return rc;
    }
    if (!have_list()) {
        if (explicit_state && (mask & ~(1u << ST_DEAD))) {
            fprintf(stderr,
                    "delayq %s: listing scheduled or in-flight jobs needs a "
                    "libdelayq with dq_list (this one has only dead-letter "
                    "listing) (ENOTSUP)\n",
                    g->cmd);
            return EXIT_FAILED;
        }
        if (mask != (1u << ST_DEAD))
            fprintf(stderr,
                    "delayq %s: note: this libdelayq lists dead jobs only "
                    "(no dq_list)\n",
                    g->cmd);
        mask = 1u << ST_DEAD;
    }
    const char *queue;
    if ((rc = start(g, &queue)))
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
            return report(g, rc);
        }
    }
    if (json) {
        fputs("{\"queue\":", stdout);
        json_cstr(stdout, queue);
        printf(",\"now_ms\":%" PRId64 ",\"offset\":%" PRId64 ",\"jobs\":[",
               now, offset);
        int first = 1;
        for (int st = 0; st < 3; st++)
            if (mask & (1u << st))
                print_json_jobs(st, got[st], &first);
        puts("]}");
    } else {
        int shown = 0;
        for (int st = 0; st < 3; st++) {
            if (!(mask & (1u << st)))
                continue;
            if (shown++)
                putchar('\n');
            print_table(st, got[st], now, offset);
            if ((int64_t)dq_jobs_count(got[st]) == limit)
                printf("  (more may follow: --offset %" PRId64 ")\n",
                       offset + limit);
        }
    }
    for (int st = 0; st < 3; st++)
        dq_jobs_free(got[st]);
    return EXIT_OKAY;
}

static int cmd_list(cli *g) {
    unsigned mask = 7;
    int explicit_state = 0, rc;
    if ((rc = npos_check(g, 0, 1, "")))
        return rc;
    if (g->a.npos == 1) {
        const char *w = g->a.pos[0];
        explicit_state = 1;
        if (strcmp(w, "scheduled") == 0 || strcmp(w, "pending") == 0)
            mask = 1u << ST_SCHEDULED;
        else if (strcmp(w, "inflight") == 0 || strcmp(w, "in-flight") == 0)
            mask = 1u << ST_INFLIGHT;
        else if (strcmp(w, "dead") == 0)
            mask = 1u << ST_DEAD;
        else if (strcmp(w, "all") == 0)
            explicit_state = 0;
        else
            return usage_error(g, "unknown state '%s' (use scheduled, "
                                  "inflight, dead or all)", w);
    }
    return list_states(g, mask, explicit_state);
}

/* ---- stats ---------------------------------------------------------------- */

static const optspec stats_opts[] = {
    {"json", 0, 0, O_JSON},   {"prometheus", 0, 0, O_PROM},
    {"watch", 0, 2, O_WATCH}, {"count", 0, 1, O_COUNT},
    {NULL, 0, 0, 0}};

static volatile sig_atomic_t got_stop; /* SIGINT/SIGTERM count */
static int wake_pipe[2] = {-1, -1};    /* self-pipe for consume */

static void on_stop(int sig) {
    (void)sig;
    int e = errno;
    got_stop++;
    if (wake_pipe[1] >= 0)
        (void)!write(wake_pipe[1], "s", 1);
    errno = e;
}

static void on_child(int sig) {
    (void)sig;
    int e = errno;
    if (wake_pipe[1] >= 0)
        (void)!write(wake_pipe[1], "c", 1);
    errno = e;
}

/* Installs handler for SIGINT and SIGTERM, without SA_RESTART so that
 * sleeps end early. */
static void catch_stop(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

typedef struct qstats {
    int64_t v[5]; /* scheduled, due, inflight, dead, next_due_ms */
} qstats;

/* Writes a Prometheus label value: \ " and newline escaped. */
static void prom_label(const char *s) {
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            printf("\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", stdout);
        else
            putchar(*s);
    }
}

static void print_stats(char **queues, int nq, const qstats *st, int mode,
                        int64_t now) {
    static const char *const names[4] = {"scheduled", "due", "inflight",
                                         "dead"};
    if (mode == O_JSON) {
        for (int i = 0; i < nq; i++) {
            fputs("{\"queue\":", stdout);
            json_cstr(stdout, queues[i]);
            for (int k = 0; k < 4; k++)
                printf(",\"%s\":%" PRId64, names[k], st[i].v[k]);
            printf(",\"next_due_ms\":%" PRId64 ",\"time_ms\":%" PRId64 "}\n",
                   st[i].v[4], now);
        }
    } else if (mode == O_PROM) {
        puts("# HELP delayq_jobs Jobs in a delayq queue, by state.");
        puts("# TYPE delayq_jobs gauge");
        for (int i = 0; i < nq; i++)
            for (int k = 0; k < 4; k++) {
                fputs("delayq_jobs{queue=\"", stdout);
                prom_label(queues[i]);
                printf("\",state=\"%s\"} %" PRId64 "\n", names[k],
                       st[i].v[k]);
            }
        puts("# HELP delayq_next_due_seconds Seconds until the earliest "
             "pending job of a queue is due (0: one is due now, -1: none is "
             "pending).");
        puts("# TYPE delayq_next_due_seconds gauge");
        for (int i = 0; i < nq; i++) {
            fputs("delayq_next_due_seconds{queue=\"", stdout);
            prom_label(queues[i]);
            if (st[i].v[4] < 0)
                puts("\"} -1");
            else
                printf("\"} %" PRId64 ".%03d\n", st[i].v[4] / 1000,
                       (int)(st[i].v[4] % 1000));
        }
    } else {
        int qw = 5;
        for (int i = 0; i < nq; i++)
            if ((int)escaped_width(queues[i]) > qw)
                qw = (int)escaped_width(queues[i]);
        if (qw > 40)
            qw = 40;
        printf("%-*s  %10s  %10s  %10s  %10s  %s\n", qw, "QUEUE", "SCHEDULED",
               "DUE", "INFLIGHT", "DEAD", "NEXT DUE");
        for (int i = 0; i < nq; i++) {
            char rel[64];
            if (st[i].v[4] < 0)
                snprintf(rel, sizeof(rel), "-");
            else if (st[i].v[4] == 0)
                snprintf(rel, sizeof(rel), "now");
            else
                fmt_rel(st[i].v[4], 0, rel, sizeof(rel));
            escaped(stdout, queues[i], strlen(queues[i]), (size_t)qw);
            int pad = qw - (int)escaped_width(queues[i]);
            printf("%*s  %10" PRId64 "  %10" PRId64 "  %10" PRId64
                   "  %10" PRId64 "  %s\n",
                   pad > 0 ? pad : 0, "", st[i].v[0], st[i].v[1], st[i].v[2],
                   st[i].v[3], rel);
        }
    }
}

static int cmd_stats(cli *g) {
    int mode = 0, watch = 0, rc;
    int64_t interval = 2000, count = 0;
    for (int i = 0; i < g->a.nopts; i++) {
        const optval *o = &g->a.opts[i];
        rc = 0;
        if (o->id == O_JSON || o->id == O_PROM) {
            if (mode != 0 && mode != o->id)
                return usage_error(g, "use either --json or --prometheus%s",
                                   "");
            mode = o->id;
        } else if (o->id == O_WATCH) {
            watch = 1;
            if (o->val != NULL && (rc = opt_duration(g, o, &interval)) == 0 &&
                interval < 100) {
                fprintf(stderr, "delayq stats: --watch: the interval must "
                                "be at least 100ms\n");
                return EXIT_USAGE;
            }
        } else if (o->id == O_COUNT) {
            rc = opt_int(g, o, 1, INT32_MAX, &count);
        }
        if (rc)
            return rc;
    }
    if (count > 0 && !watch)
        return usage_error(g, "--count needs --watch%s", "");
    char *one[1];
    char **queues = g->a.pos;
    int nq = g->a.npos;
    if (nq == 0) {
        if ((one[0] = (char *)need_queue(g)) == NULL)
            return EXIT_USAGE;
        queues = one;
        nq = 1;
    }
    if ((rc = open_client(g, 0)))
        return rc;
    qstats *st = calloc((size_t)nq, sizeof(*st));
    if (st == NULL) {
        fprintf(stderr, "delayq stats: out of memory\n");
        return EXIT_FAILED;
    }
    if (watch)
        catch_stop();
    int tty = isatty(1);
    int ret = EXIT_OKAY;
    for (int64_t round = 0; !got_stop; round++) {
        int64_t t0 = mono_ms();
        for (int i = 0; i < nq && rc == 0; i++) {
            rc = dq_stats(g->c, queues[i], &st[i].v[0], &st[i].v[1],
                          &st[i].v[2], &st[i].v[3], &st[i].v[4]);
            if (rc < 0) {
                if (got_stop)
                    break;
                ret = report(g, rc);
            }
        }
        if (got_stop || ret != EXIT_OKAY)
            break;
        if (watch && mode == 0) {
            char iso[40], d[48];
            if (tty)
                fputs("\033[H\033[2J", stdout);
            else if (round > 0)
                putchar('\n');
            printf("delayq stats every %s at %s (Ctrl-C to stop)\n\n",
                   fmt_dur(interval, d, sizeof(d)),
                   fmt_iso(wall_ms(), iso, sizeof(iso)));
        }
        print_stats(queues, nq, st, mode, wall_ms());
        fflush(stdout);
        if (!watch || (count > 0 && round + 1 >= count))
            break;
        int64_t left = interval - (mono_ms() - t0);
        while (left > 0 && !got_stop) {
            sleep_ms(left);
            left = interval - (mono_ms() - t0);
        }
    }
    free(st);
    return ret;
}

/* ---- dead ----------------------------------------------------------------- */

static const optspec dead_opts[] = {
    {"all", 0, 0, O_ALL},       {"in", 0, 1, O_IN},
    {"offset", 0, 1, O_OFFSET}, {"limit", 0, 1, O_LIMIT},
    {"json", 0, 0, O_JSON},     {NULL, 0, 0, 0}};

static int cmd_dead(cli *g) {
    int rc, all = 0;
    int64_t delay = 0;
    if (g->a.npos < 1) {
        fprintf(stderr, "delayq dead: missing action (requeue, purge or "
                        "list)\nTry 'delayq dead --help'.\n");
        return EXIT_USAGE;
    }
    const char *action = g->a.pos[0];
    int requeue = strcmp(action, "requeue") == 0;
    if (strcmp(action, "list") == 0) {
        if (g->a.npos > 1)
            return usage_error(g, "unexpected argument '%s'", g->a.pos[1]);
        for (int i = 0; i < g->a.nopts; i++)
            if (g->a.opts[i].id == O_ALL || g->a.opts[i].id == O_IN)
                return usage_error(g, "option '--%s' is for requeue and purge",
                                   g->a.opts[i].name);
        return list_states(g, 1u << ST_DEAD, 1);
    }
    if (!requeue && strcmp(action, "purge") != 0)
        return usage_error(g, "unknown action '%s' (use requeue, purge or "
                              "list)", action);
    for (int i = 0; i < g->a.nopts; i++) {
        const optval *o = &g->a.opts[i];
        if (o->id == O_ALL) {
            all = 1;
        } else if (o->id == O_IN) {
            if (!requeue)
                return usage_error(g, "--in is for requeue%s", "");
            if ((rc = opt_duration(g, o, &delay)))
                return rc;
        } else if (o->id == O_OFFSET || o->id == O_LIMIT || o->id == O_JSON) {
            return usage_error(g, "option '--%s' is for list", o->name);
        }
    }
    if (all == (g->a.npos > 1))
        return usage_error(g, "give job ids or --all (one of the two)%s", "");
    const char *queue;
    if ((rc = start(g, &queue)))
        return rc;
    int64_t done = 0;
    int ret = EXIT_OKAY;
    if (all) {
        /* Each call handles up to 1000 of the oldest.  Bounded by the
         * count seen at the start, so jobs that keep dying meanwhile (a
         * requeue to a failing consumer) cannot keep us looping. */
        int64_t dead0 = 0;
        if ((rc = dq_stats(g->c, queue, NULL, NULL, NULL, &dead0, NULL)) < 0)
            return report(g, rc);
        for (int64_t round = 0; round <= dead0 / 1000 + 1; round++) {
            rc = requeue ? dq_dead_requeue(g->c, queue, NULL, delay)
                         : dq_dead_purge(g->c, queue, NULL);
            if (rc < 0)
                return report(g, rc);
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
                return report(g, rc);
            if (rc == 0) {
                fprintf(stderr, "delayq dead %s: no dead job '%s'\n", action,
                        id);
                ret = EXIT_FAILED;
            }
            done += rc;
        }
    }
    printf("%s %" PRId64 "\n", requeue ? "requeued" : "purged", done);
    return ret;
}

/* ---- consume -------------------------------------------------------------- */

static const optspec consume_opts[] = {
    {"concurrency", 'c', 1, O_CONC}, {"lease", 0, 1, O_LEASE},
    {"max-attempts", 0, 1, O_MAXATT}, {"backoff", 0, 1, O_BACKOFF},
    {"max-backoff", 0, 1, O_MAXBACK}, {"grace", 0, 1, O_GRACE},
    {"max-jobs", 0, 1, O_MAXJOBS},   {"quiet", 0, 0, O_QUIET},
    {NULL, 0, 0, 0}};

/* One running command. */
typedef struct slot {
    pid_t pid;             /* 0 = free */
    dq_job *job;           /* our copy of the job */
    int64_t started;       /* mono ms */
    int64_t next_extend;   /* mono ms of the next lease extension */
    int lost;              /* the lease was lost (extend said stale) */
    int killed;            /* we signalled it at the grace deadline */
} slot;

typedef struct consumer {
    cli *g;
    const char *queue;
    char **cmd;            /* COMMAND ARG... (NULL-terminated) */
    int conc;              /* slots */
    int64_t lease, max_attempts, backoff, max_backoff, grace, max_jobs;
    int quiet;
    slot *slots;
    int running;           /* busy slots */
    int64_t taken;         /* jobs taken so far */
    char **env;            /* environ minus DELAYQ_JOB_ID/ATTEMPT/QUEUE,
                              three slots left at the end for them */
    size_t nenv;           /* entries copied from environ */
} consumer;

static void say(const consumer *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void say(const consumer *k, const char *fmt, ...) {
    (void)k;
    va_list ap;
    va_start(ap, fmt);
    fputs("delayq consume: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Copies environ without our three variables, with room for them. */
static int build_env(consumer *k) {
    size_t n = 0;
    while (environ[n] != NULL)
        n++;
    k->env = calloc(n + 4, sizeof(char *));
    if (k->env == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *e = environ[i];
        if (strncmp(e, "DELAYQ_JOB_ID=", 14) == 0 ||
            strncmp(e, "DELAYQ_ATTEMPT=", 15) == 0 ||
            strncmp(e, "DELAYQ_QUEUE=", 13) == 0)
            continue;
        k->env[k->nenv++] = environ[i];
    }
    return 0;
}

/* Closes every fd >= 3 in the child, so commands hold no Redis socket. */
static void close_from_3(void) {
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536)
        max = 65536;
    for (int fd = 3; fd < max; fd++)
        close(fd);
}

/* Starts the command for job j in slot s.  0, or -1 (logged). */
static int start_child(consumer *k, slot *s, const dq_job *j) {
    size_t len;
    const void *p = dq_job_payload(j, &len);
    int fd = memfd_create("delayq-payload", MFD_CLOEXEC);
    if (fd < 0) {
        say(k, "job %s: memfd_create: %s", dq_job_id(j), strerror(errno));
        return -1;
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, (const char *)p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            say(k, "job %s: writing the payload: %s", dq_job_id(j),
                 strerror(errno));
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    lseek(fd, 0, SEEK_SET);
    char *e_id = NULL, *e_att = NULL, *e_q = NULL;
    if (asprintf(&e_id, "DELAYQ_JOB_ID=%s", dq_job_id(j)) < 0)
        e_id = NULL;
    if (asprintf(&e_att, "DELAYQ_ATTEMPT=%" PRId64, dq_job_attempt(j)) < 0)
        e_att = NULL;
    if (asprintf(&e_q, "DELAYQ_QUEUE=%s", k->queue) < 0)
        e_q = NULL;
    if (e_id == NULL || e_att == NULL || e_q == NULL) {
        free(e_id);
        free(e_att);
        free(e_q);
        close(fd);
        say(k, "out of memory");
        return -1;
    }
    k->env[k->nenv] = e_id;
    k->env[k->nenv + 1] = e_att;
    k->env[k->nenv + 2] = e_q;
    k->env[k->nenv + 3] = NULL;
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
        execvpe(k->cmd[0], k->cmd, k->env);
        int e = errno;
        dprintf(2, "delayq consume: cannot run '%s': %s\n", k->cmd[0],
                strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    int fork_errno = errno;
    k->env[k->nenv] = NULL;
    free(e_id);
    free(e_att);
    free(e_q);
    close(fd);
    if (pid < 0) {
        say(k, "job %s: fork: %s", dq_job_id(j), strerror(fork_errno));
        return -1;
    }
    setpgid(pid, pid); /* also here: no race with a kill right after */
    s->pid = pid;
    s->started = mono_ms();
    s->next_extend = s->started + k->lease / 2;
    s->lost = 0;
    s->killed = 0;
    k->running++;
    return 0;
}

/* Retry delay after delivery `attempt` failed. */
static int64_t backoff_for(const consumer *k, int64_t attempt) {
    int64_t d = k->backoff;
    for (int64_t i = 1; i < attempt && d < k->max_backoff; i++)
        d = d > INT64_MAX / 2 ? INT64_MAX : d * 2;
    return d > k->max_backoff ? k->max_backoff : d;
}

/* Releases a job without running it (or after it was stopped). */
static void release_job(consumer *k, const dq_job *j, const char *why) {
    int rc = dq_nack(k->g->c, k->queue, dq_job_id(j), dq_job_token(j), 0, 0);
    if (rc < 0)
        say(k, "job %s: release failed: %s (%s)", dq_job_id(j),
             dq_errmsg(k->g->c), dq_errname(rc));
    else if (!k->quiet)
        say(k, "job %s attempt %" PRId64 ": %s -> %s", dq_job_id(j),
             dq_job_attempt(j), why, rc == 1 ? "dead-lettered" : "released");
}

/* A command ended: ack or nack its job, free the slot. */
static void finish(consumer *k, slot *s, int status) {
    const dq_job *j = s->job;
    const char *id = dq_job_id(j);
    int64_t att = dq_job_attempt(j);
    char d[48], how[64];
    fmt_dur(mono_ms() - s->started, d, sizeof(d));
    if (WIFEXITED(status))
        snprintf(how, sizeof(how), "exit %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(how, sizeof(how), "signal %d", WTERMSIG(status));
    else
        snprintf(how, sizeof(how), "status %d", status);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    int rc;
    if (ok) {
        rc = dq_ack(k->g->c, k->queue, id, dq_job_token(j));
        if (rc == 0 && !k->quiet)
            say(k, "job %s attempt %" PRId64 ": %s after %s -> acked", id,
                 att, how, d);
    } else if (s->killed) {
        release_job(k, j, "stopped at shutdown");
        rc = 0;
    } else if (k->max_attempts > 0 && att >= k->max_attempts) {
        rc = dq_nack(k->g->c, k->queue, id, dq_job_token(j), 0, DQ_NACK_DEAD);
        if (rc >= 0 && !k->quiet)
            say(k, "job %s attempt %" PRId64 ": %s after %s -> dead-lettered "
                    "(%" PRId64 " attempts)", id, att, how, d, att);
    } else {
        int64_t delay = backoff_for(k, att);
        char bd[48];
        rc = dq_nack(k->g->c, k->queue, id, dq_job_token(j), delay, 0);
        if (rc == 1 && !k->quiet)
            say(k, "job %s attempt %" PRId64 ": %s after %s -> dead-lettered",
                id, att, how, d);
        else if (rc == 0 && !k->quiet)
            say(k, "job %s attempt %" PRId64 ": %s after %s -> retry in %s",
                id, att, how, d, fmt_dur(delay, bd, sizeof(bd)));
    }
    if (rc < 0) {
        if (rc == DQ_ESTALE || rc == DQ_ENOTFOUND)
            say(k, "job %s attempt %" PRId64 ": %s, but the lease was lost "
                   "(%s: delivered again elsewhere, or cancelled): result "
                   "dropped", id, att, how, dq_errname(rc));
        else
            say(k, "job %s: %s failed: %s (%s)", id, ok ? "ack" : "nack",
                 dq_errmsg(k->g->c), dq_errname(rc));
    }
    dq_job_free(s->job);
    s->job = NULL;
    s->pid = 0;
    k->running--;
}

/* Reaps every command that ended. */
static void reap(consumer *k) {
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        for (int i = 0; i < k->conc; i++)
            if (k->slots[i].pid == pid) {
                finish(k, &k->slots[i], status);
                break;
            }
    }
}

/* Extends the leases that are at their half-life; returns the mono ms of
 * the next extension due (INT64_MAX if none). */
static int64_t extend_leases(consumer *k) {
    int64_t now = mono_ms(), next = INT64_MAX;
    for (int i = 0; i < k->conc; i++) {
        slot *s = &k->slots[i];
        if (s->pid == 0 || s->lost)
            continue;
        if (now >= s->next_extend) {
            int rc = dq_extend(k->g->c, k->queue, dq_job_id(s->job),
                               dq_job_token(s->job), k->lease, NULL);
            if (rc == DQ_ESTALE || rc == DQ_ENOTFOUND) {
                s->lost = 1;
                say(k, "job %s: lease lost (%s); its result will be "
                        "dropped", dq_job_id(s->job), dq_errname(rc));
                continue;
            }
            if (rc < 0)
                say(k, "job %s: extend failed: %s (%s); retrying",
                     dq_job_id(s->job), dq_errmsg(k->g->c), dq_errname(rc));
            /* After a failure try again soon, well before the deadline. */
            s->next_extend = now + (rc < 0 ? (k->lease / 8 > 0 ? k->lease / 8
                                                               : 1)
                                           : k->lease / 2);
        }
        if (s->next_extend < next)
            next = s->next_extend;
    }
    return next;
}

/* Waits up to ms for a signal (self-pipe), then drains the pipe. */
static void wait_event(int64_t ms) {
    if (ms < 0)
        ms = 0;
    if (ms > 1000)
        ms = 1000;
    struct pollfd p = {wake_pipe[0], POLLIN, 0};
    if (poll(&p, 1, (int)ms) > 0) {
        char tmp[64];
        while (read(wake_pipe[0], tmp, sizeof(tmp)) > 0) {
        }
    }
}

/* Stops every running command: SIGTERM to its process group, up to 2 s,
 * then SIGKILL; their jobs are released. */
static void stop_all(consumer *k) {
    for (int i = 0; i < k->conc; i++)
        if (k->slots[i].pid > 0) {
            k->slots[i].killed = 1;
            kill(-k->slots[i].pid, SIGTERM);
        }
    int64_t until = mono_ms() + 2000;
    while (k->running > 0 && mono_ms() < until) {
        reap(k);
        if (k->running > 0)
            wait_event(50);
    }
    for (int i = 0; i < k->conc; i++)
        if (k->slots[i].pid > 0)
            kill(-k->slots[i].pid, SIGKILL);
    until = mono_ms() + 5000;
    while (k->running > 0 && mono_ms() < until) {
        reap(k);
        if (k->running > 0)
            wait_event(20);
    }
}

static int consume_loop(consumer *k) {
    int stopping = 0;
    int64_t deadline = 0, error_pause = 0;
    for (;;) {
        reap(k);
        if (got_stop && !stopping) {
            stopping = 1;
            deadline = mono_ms() + (got_stop > 1 ? 0 : k->grace);
            if (k->running > 0) {
                char d[48];
                say(k, "stopping: waiting up to %s for %d running "
                        "command(s)", fmt_dur(k->grace, d, sizeof(d)),
                     k->running);
            }
        }
        if (got_stop > 1)
            deadline = 0; /* a second Ctrl-C: stop now */
        int done = k->max_jobs > 0 && k->taken >= k->max_jobs;
        if ((stopping || done) && k->running == 0)
            return EXIT_OKAY;
        int64_t next_extend = extend_leases(k);
        int64_t now = mono_ms();
        int64_t until_extend = next_extend == INT64_MAX ? 1000
                                                        : next_extend - now;
        if (stopping) {
            if (now >= deadline) {
                say(k, "grace period over: stopping %d command(s)",
                     k->running);
                stop_all(k);
                return EXIT_OKAY;
            }
            wait_event(deadline - now < until_extend ? deadline - now
                                                     : until_extend);
            continue;
        }
        int64_t free_slots = k->conc - k->running;
        if (k->max_jobs > 0 && free_slots > k->max_jobs - k->taken)
            free_slots = k->max_jobs - k->taken;
        if (free_slots <= 0 || error_pause > now) {
            int64_t w = until_extend;
            if (error_pause > now && error_pause - now < w)
                w = error_pause - now;
            wait_event(w);
            continue;
        }
        /* Poll for at most the free slots; while commands run, wake up
         * often enough to ack them promptly (poll_wait does not return on
         * a signal by itself). */
        int64_t timeout = k->running > 0 ? 200 : 1000;
        if (until_extend < timeout)
            timeout = until_extend > 0 ? until_extend : 0;
        dq_jobs *jobs = NULL;
        int rc = dq_poll_wait(k->g->c, k->queue, (int)free_slots, k->lease,
                              timeout, &jobs);
        if (rc < 0) {
            if (exit_for(rc) == EXIT_USAGE)
                return report(k->g, rc);
            say(k, "poll failed: %s (%s); retrying in 1s",
                 dq_errmsg(k->g->c), dq_errname(rc));
            error_pause = mono_ms() + 1000;
            continue;
        }
        for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
            const dq_job *j = dq_jobs_at(jobs, i);
            slot *s = NULL;
            for (int x = 0; x < k->conc && s == NULL; x++)
                if (k->slots[x].pid == 0 && k->slots[x].job == NULL)
                    s = &k->slots[x];
            if (got_stop || s == NULL) {
                release_job(k, j, "not started (stopping)");
                continue;
            }
            k->taken++;
            if ((s->job = dq_job_dup(j)) == NULL) {
                say(k, "out of memory");
                release_job(k, j, "not started (out of memory)");
                continue;
            }
            if (start_child(k, s, s->job) != 0) {
                /* Counts as a failed attempt, with backoff. */
                int64_t delay = backoff_for(k, dq_job_attempt(j));
                dq_nack(k->g->c, k->queue, dq_job_id(j), dq_job_token(j),
                        delay, 0);
                dq_job_free(s->job);
                s->job = NULL;
            }
        }
        dq_jobs_free(jobs);
    }
}

static int cmd_consume(cli *g) {
    consumer k;
    memset(&k, 0, sizeof(k));
    k.g = g;
    k.conc = 1;
    k.lease = 30000;
    k.max_attempts = 5;
    k.backoff = 1000;
    k.max_backoff = 600000;
    k.grace = 30000;
    int rc;
    for (int i = 0; i < g->a.nopts; i++) {
        const optval *o = &g->a.opts[i];
        int64_t v = 0;
        rc = 0;
        switch (o->id) {
        case O_CONC:
            rc = opt_int(g, o, 1, 1000, &v);
            k.conc = (int)v;
            break;
        case O_LEASE:
            rc = opt_duration(g, o, &k.lease);
            if (rc == 0 && (k.lease < 2 || k.lease > DQ_LEASE_MAX)) {
                fprintf(stderr, "delayq consume: --lease must be 2ms..7d\n");
                rc = EXIT_USAGE;
            }
            break;
        case O_MAXATT:
            rc = opt_int(g, o, 0, INT32_MAX, &k.max_attempts);
            break;
        case O_BACKOFF:
            rc = opt_duration(g, o, &k.backoff);
            break;
        case O_MAXBACK:
            rc = opt_duration(g, o, &k.max_backoff);
            break;
        case O_GRACE:
            rc = opt_duration(g, o, &k.grace);
            break;
        case O_MAXJOBS:
            rc = opt_int(g, o, 1, INT64_MAX, &k.max_jobs);
            break;
        case O_QUIET:
            k.quiet = 1;
            break;
        }
        if (rc)
            return rc;
    }
    if (k.max_backoff > DQ_DELAY_MAX)
        k.max_backoff = DQ_DELAY_MAX;
    if (k.backoff > k.max_backoff)
        k.backoff = k.max_backoff;
    if (g->a.npos > 0)
        return usage_error(g, "unexpected argument '%s' (put the command "
                              "after --)", g->a.pos[0]);
    if (g->a.nrest == 0 || g->a.rest[0][0] == '\0') {
        fprintf(stderr, "delayq consume: missing command after --\nTry "
                        "'delayq consume --help'.\n");
        return EXIT_USAGE;
    }
    k.cmd = g->a.rest; /* argv is NULL-terminated after the last entry */
    if ((k.queue = need_queue(g)) == NULL)
        return EXIT_USAGE;
    if ((rc = open_client(g, k.max_attempts)))
        return rc;
    k.slots = calloc((size_t)k.conc, sizeof(slot));
    if (k.slots == NULL || build_env(&k) != 0 ||
        pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "delayq consume: setup failed: %s\n",
                strerror(errno));
        free(k.slots);
        free(k.env);
        return EXIT_FAILED;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_child;
    sa.sa_flags = SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    catch_stop();
    if (!k.quiet) {
        char d[48];
        say(&k, "consuming '%s' with concurrency %d, lease %s", k.queue,
             k.conc, fmt_dur(k.lease, d, sizeof(d)));
    }
    rc = consume_loop(&k);
    if (!k.quiet)
        say(&k, "stopped after %" PRId64 " job(s)", k.taken);
    for (int i = 0; i < k.conc; i++)
        dq_job_free(k.slots[i].job);
    free(k.slots);
    free(k.env);
    close(wake_pipe[0]);
    close(wake_pipe[1]);
    wake_pipe[0] = wake_pipe[1] = -1;
    return rc;
}

/* ---- Dispatch ------------------------------------------------------------- */

typedef struct command {
    const char *name;
    int (*fn)(cli *g);
    const char *help;
    const optspec *opts;
} command;

static const optspec no_opts[] = {{NULL, 0, 0, 0}};

static const command commands[] = {
    {"push", cmd_push, help_push, push_opts},
    {"cancel", cmd_cancel, help_cancel, cancel_opts},
    {"poll", cmd_poll, help_poll, poll_opts},
    {"ack", cmd_ack, help_ack, no_opts},
    {"nack", cmd_nack, help_nack, nack_opts},
    {"extend", cmd_extend, help_extend, extend_opts},
    {"list", cmd_list, help_list, list_opts},
    {"peek", cmd_list, help_list, list_opts},
    {"stats", cmd_stats, help_stats, stats_opts},
    {"dead", cmd_dead, help_dead, dead_opts},
    {"consume", cmd_consume, help_consume, consume_opts},
    {NULL, NULL, NULL, NULL}};

static const command *find_command(const char *name) {
    for (const command *c = commands; c->name != NULL; c++)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

static void print_cmd_help(const command *c) {
    fputs(c->help, stdout);
    printf("\nGlobal options: --uri URI, --queue NAME, --namespace NS, "
           "--help.\nExit codes: 0 ok, 1 failed / not found, 2 usage, "
           "3 cannot connect, 4 stale token.\nSee 'delayq --help'.\n");
}

static int run(int argc, char **argv) {
    cli g;
    memset(&g, 0, sizeof(g));
    g.uri = getenv("DELAYQ_URI");
    if (g.uri == NULL || *g.uri == '\0')
        g.uri = DEFAULT_URI;
    g.queue = getenv("DELAYQ_QUEUE");
    g.ns = getenv("DELAYQ_NAMESPACE");
    if (g.ns != NULL && *g.ns == '\0')
        g.ns = NULL;

    /* Global options before the command. */
    args pre;
    int rc = parse_args(&g, argc - 1, argv + 1, no_opts, 1, &pre);
    char **rest = pre.rest;
    int nrest = pre.nrest;
    args_free(&pre);
    if (rc)
        return rc;
    if (g.version) {
        printf("delayq %s (libdelayq %s, built with %s)\n", DQ_VERSION_STRING,
               dq_version_string(), DQ_VERSION_STRING);
        return EXIT_OKAY;
    }
    if (nrest == 0) {
        if (g.help) {
            printf(help_main, dq_version_string());
            return EXIT_OKAY;
        }
        fprintf(stderr, "delayq: missing command\nTry 'delayq --help'.\n");
        return EXIT_USAGE;
    }
    const char *name = rest[0];
    if (strcmp(name, "help") == 0) {
        if (nrest < 2) {
            printf(help_main, dq_version_string());
            return EXIT_OKAY;
        }
        const command *c = find_command(rest[1]);
        if (c == NULL) {
            fprintf(stderr, "delayq help: unknown command '%s'\nTry 'delayq "
                            "--help'.\n", rest[1]);
            return EXIT_USAGE;
        }
        print_cmd_help(c);
        return EXIT_OKAY;
    }
    const command *c = find_command(name);
    if (c == NULL) {
        fprintf(stderr, "delayq: unknown command '%s'\nTry 'delayq --help'.\n",
                name);
        return EXIT_USAGE;
    }
    g.cmd = c->name;
    if (g.help) { /* "delayq --help push" */
        print_cmd_help(c);
        return EXIT_OKAY;
    }
    if ((rc = parse_args(&g, nrest - 1, rest + 1, c->opts, 0, &g.a))) {
        args_free(&g.a);
        return rc;
    }
    if (g.help) {
        print_cmd_help(c);
        args_free(&g.a);
        return EXIT_OKAY;
    }
    if (g.a.rest != NULL && c->fn != cmd_consume) {
        rc = g.a.nrest > 0
                 ? usage_error(&g, "unexpected argument '%s'", g.a.rest[0])
                 : EXIT_OKAY;
        if (rc) {
            args_free(&g.a);
            return rc;
        }
    }
    rc = c->fn(&g);
    fflush(stdout);
    dq_close(g.c);
    args_free(&g.a);
    return rc;
}

int main(int argc, char **argv) {
    int rc = run(argc, argv);
    if (fflush(stdout) != 0 && rc == EXIT_OKAY) {
        fprintf(stderr, "delayq: writing the output: %s\n", strerror(errno));
        rc = EXIT_FAILED;
    }
    return rc;
}
