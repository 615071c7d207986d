/*
 * delayq_out.c - what the tool writes: times and durations for humans,
 * payloads escaped onto one line, JSON strings (base64 for binary
 * payloads), job tables and JSON, and queue counts as a table, JSON or
 * Prometheus text.
 */
#include "delayq_tool.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

static const char *const state_names[3] = {"scheduled", "inflight", "dead"};

/* ---- Times and durations ------------------------------------------------- */

/* Formats epoch ms as ISO-8601 UTC to the second. */
const char *dqt_fmt_iso(int64_t ms, char *out, size_t n) {
    time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || strftime(out, n, "%Y-%m-%dT%H:%M:%SZ",
                                               &tm) == 0)
        snprintf(out, n, "%" PRId64, ms);
    return out;
}

/* Formats a duration as its two largest units: "2d 3h", "29m 58s", "3s",
 * "250ms". */
const char *dqt_fmt_dur(int64_t ms, char *out, size_t n) {
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
const char *dqt_fmt_rel(int64_t at_ms, int64_t now_ms, char *out, size_t n) {
    char d[48];
    int64_t delta = at_ms - now_ms;
    if (delta > -1000 && delta < 1000)
        snprintf(out, n, "now");
    else if (delta > 0)
        snprintf(out, n, "in %s", dqt_fmt_dur(delta, d, sizeof(d)));
    else
        snprintf(out, n, "%s ago", dqt_fmt_dur(delta, d, sizeof(d)));
    return out;
}

/* ---- Text and JSON output ------------------------------------------------ */

/* The name of a DQ_JOB_* state (dq_job_info_state), as `delayq get` and
 * `delayq web` spell it. */
const char *dqt_job_state_name(int st) {
    switch (st) {
    case DQ_JOB_SCHEDULED:
        return "scheduled";
    case DQ_JOB_DUE:
        return "due";
    case DQ_JOB_INFLIGHT:
        return "inflight";
    case DQ_JOB_DEAD:
        return "dead";
    default:
        return "unknown";
    }
}

size_t dqt_utf8_len(const unsigned char *p, size_t n) {
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

int dqt_is_utf8(const void *s, size_t n) {
    const unsigned char *p = s;
    for (size_t i = 0; i < n;) {
        size_t l = dqt_utf8_len(p + i, n - i);
        if (l == 0)
            return 0;
        i += l;
    }
    return 1;
}

/* Writes a JSON string; bytes that are not valid UTF-8 become U+FFFD. */
void dqt_json_str(FILE *f, const void *s, size_t n) {
    const unsigned char *p = s;
    putc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t l = dqt_utf8_len(p + i, n - i);
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

/* Writes a C string as a JSON string. */
void dqt_json_cstr(FILE *f, const char *s) { dqt_json_str(f, s, strlen(s)); }

/* Writes n bytes as standard base64 with padding. */
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

/* ,"KEY":"..." for UTF-8 bytes, else ,"KEY_base64":"...". */
void dqt_json_bytes(FILE *f, const char *key, const void *p, size_t n) {
    if (dqt_is_utf8(p, n)) {
        fprintf(f, ",\"%s\":", key);
        dqt_json_str(f, p, n);
    } else {
        fprintf(f, ",\"%s_base64\":\"", key);
        base64(f, p, n);
        putc('"', f);
    }
}

/* ,"payload":"..." for UTF-8 payloads, else ,"payload_base64":"...". */
void dqt_json_payload(FILE *f, const void *p, size_t n) {
    dqt_json_bytes(f, "payload", p, n);
}

/* ,"last_error":"..." (or "last_error_base64") and ,"failed_ms":N for a
 * job's last failure reason; nothing when it has none (reason NULL). */
void dqt_json_reason(FILE *f, const void *reason, size_t n, int64_t at_ms) {
    if (reason == NULL)
        return;
    dqt_json_bytes(f, "last_error", reason, n);
    fprintf(f, ",\"failed_ms\":%" PRId64, at_ms);
}

/* "failed 3s ago: <reason, escaped, at most max characters>" for a job's
 * last failure reason; nothing when it has none (reason NULL). */
void dqt_print_reason(const void *reason, size_t n, int64_t at_ms,
                      int64_t now, size_t max) {
    if (reason == NULL)
        return;
    char rel[64];
    printf("failed %s: ", dqt_fmt_rel(at_ms, now, rel, sizeof(rel)));
    dqt_escaped(stdout, reason, n, max);
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
void dqt_escaped(FILE *f, const void *s, size_t n, size_t max) {
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

/* Width of dqt_escaped(s) without a limit. */
size_t dqt_escaped_width(const char *s) {
    char tmp[8];
    size_t total = 0;
    for (; *s; s++)
        total += strlen(esc_byte((unsigned char)*s, tmp));
    return total;
}

/* ---- Jobs and counts ----------------------------------------------------- */

/* A listed job's group ("" when none). */
const char *dqt_job_group(const dq_job *j) {
    const char *g = dq_job_group(j);
    return g != NULL ? g : "";
}

/* The width of a column of text of jobs (each job's text by get, escaped):
 * the widest, at least min and at most max. */
static size_t col_width(const dq_jobs *jobs, const char *(*get)(const dq_job *),
                        size_t min, size_t max) {
    size_t w = min;
    for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
        size_t l = dqt_escaped_width(get(dq_jobs_at(jobs, i)));
        if (l > w)
            w = l;
    }
    return w > max ? max : w;
}

/* Writes s escaped in a column of width w (cut with "..." when longer). */
static void print_col(const char *s, size_t w) {
    dqt_escaped(stdout, s, strlen(s), w);
    size_t l = dqt_escaped_width(s);
    printf("%*s", l >= w ? 0 : (int)(w - l), "");
}

/* Prints one state's page of jobs as a table with a heading.  PRIO and
 * GROUP are blank for a job without them. */
void dqt_print_jobs_table(int st, const dq_jobs *jobs, int64_t now,
                          int64_t offset) {
    static const char *const when[3] = {"DUE", "LEASE ENDS", "DIED"};
    size_t n = dq_jobs_count(jobs);
    size_t idw = col_width(jobs, dq_job_id, 2, 40);
    size_t gw = col_width(jobs, dqt_job_group, 5, 24);
    printf("%s jobs (from %" PRId64 "): %zu\n", state_names[st], offset, n);
    if (n == 0)
        return;
    printf("  %-*s  %-14s  %-20s  %7s  %4s  %-*s  %s\n", (int)idw, "ID",
           when[st], "AT (UTC)", "ATTEMPT", "PRIO", (int)gw, "GROUP",
           "PAYLOAD");
    for (size_t i = 0; i < n; i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        int64_t t = st == DQT_ST_INFLIGHT && dq_job_lease_deadline_ms(j)
                        ? dq_job_lease_deadline_ms(j)
                        : dq_job_due_ms(j);
        char rel[64], iso[40], prio[8] = "";
        size_t len;
        const void *p = dq_job_payload(j, &len);
        if (dq_job_priority(j) > 0)
            snprintf(prio, sizeof(prio), "%d", dq_job_priority(j));
        printf("  ");
        print_col(dq_job_id(j), idw);
        printf("  %-14s  %-20s  %7" PRId64 "  %4s  ",
               dqt_fmt_rel(t, now, rel, sizeof(rel)),
               dqt_fmt_iso(t, iso, sizeof(iso)), dq_job_attempt(j), prio);
        print_col(dqt_job_group(j), gw);
        printf("  ");
        dqt_escaped(stdout, p, len, 48);
        putchar('\n');
        size_t rlen;
        const void *reason = dq_job_last_error(j, &rlen);
        if (reason != NULL) {
            printf("  %*s  ", (int)idw, "");
            dqt_print_reason(reason, rlen, dq_job_failed_ms(j), now, 72);
            putchar('\n');
        }
    }
}

/* ,"group":<name or null>,"priority":<n> of a job, as the listings give
 * them. */
void dqt_json_group(FILE *f, const char *group, int priority) {
    fputs(",\"group\":", f);
    if (group != NULL && group[0] != '\0')
        dqt_json_cstr(f, group);
    else
        fputs("null", f);
    fprintf(f, ",\"priority\":%d", priority);
}

/* Prints jobs as JSON objects of an array (first: none printed yet). */
void dqt_print_jobs_json(int st, const dq_jobs *jobs, int *first) {
    static const char *const tkey[3] = {"due_ms", "lease_deadline_ms",
                                        "died_ms"};
    for (size_t i = 0; i < dq_jobs_count(jobs); i++) {
        const dq_job *j = dq_jobs_at(jobs, i);
        int64_t t = st == DQT_ST_INFLIGHT && dq_job_lease_deadline_ms(j)
                        ? dq_job_lease_deadline_ms(j)
                        : dq_job_due_ms(j);
        size_t len;
        const void *p = dq_job_payload(j, &len);
        printf("%s{\"state\":\"%s\",\"id\":", *first ? "" : ",",
               state_names[st]);
        dqt_json_cstr(stdout, dq_job_id(j));
        printf(",\"attempt\":%" PRId64 ",\"%s\":%" PRId64, dq_job_attempt(j),
               tkey[st], t);
        dqt_json_payload(stdout, p, len);
        size_t rlen;
        const void *reason = dq_job_last_error(j, &rlen);
        dqt_json_reason(stdout, reason, rlen, dq_job_failed_ms(j));
        dqt_json_group(stdout, dqt_job_group(j), dq_job_priority(j));
        putchar('}');
        *first = 0;
    }
}

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

/* The totals of dq_counters, in its order, and what each counts. */
static const char *const counter_names[4] = {"delivered", "acked", "retried",
                                             "failed"};
static const char *const counter_help[4] = {
    "Jobs handed out by polls (retries included)", "Jobs acked",
    "Jobs nacked for a retry", "Jobs dead-lettered"};

/* Prints the counts and totals of queues as tables (the counts, then the
 * totals), JSON lines (mode DQT_O_JSON) or Prometheus text (DQT_O_PROM, the
 * series of `delayq web`'s /metrics). */
void dqt_print_stats(char **queues, int nq, const dqt_qstats *st, int mode,
                     int64_t now) {
    static const char *const names[4] = {"scheduled", "due", "inflight",
                                         "dead"};
    if (mode == DQT_O_JSON) {
        for (int i = 0; i < nq; i++) {
            fputs("{\"queue\":", stdout);
            dqt_json_cstr(stdout, queues[i]);
            for (int k = 0; k < 4; k++)
                printf(",\"%s\":%" PRId64, names[k], st[i].v[k]);
            printf(",\"next_due_ms\":%" PRId64, st[i].v[4]);
            for (int k = 0; k < 4; k++)
                printf(",\"%s\":%" PRId64, counter_names[k], st[i].k[k]);
            printf(",\"time_ms\":%" PRId64 "}\n", now);
        }
    } else if (mode == DQT_O_PROM) {
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
        for (int k = 0; k < 4; k++) {
            printf("# HELP delayq_jobs_%s_total %s, counted by the clients "
                   "with DQ_OPT_COUNTERS.\n# TYPE delayq_jobs_%s_total "
                   "counter\n",
                   counter_names[k], counter_help[k], counter_names[k]);
            for (int i = 0; i < nq; i++) {
                printf("delayq_jobs_%s_total{queue=\"", counter_names[k]);
                prom_label(queues[i]);
                printf("\"} %" PRId64 "\n", st[i].k[k]);
            }
        }
    } else {
        int qw = 5;
        for (int i = 0; i < nq; i++)
            if ((int)dqt_escaped_width(queues[i]) > qw)
                qw = (int)dqt_escaped_width(queues[i]);
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
                dqt_fmt_rel(st[i].v[4], 0, rel, sizeof(rel));
            dqt_escaped(stdout, queues[i], strlen(queues[i]), (size_t)qw);
            int pad = qw - (int)dqt_escaped_width(queues[i]);
            printf("%*s  %10" PRId64 "  %10" PRId64 "  %10" PRId64
                   "  %10" PRId64 "  %s\n",
                   pad > 0 ? pad : 0, "", st[i].v[0], st[i].v[1], st[i].v[2],
                   st[i].v[3], rel);
        }
        printf("\n%-*s  %10s  %10s  %10s  %10s\n", qw, "TOTALS", "DELIVERED",
               "ACKED", "RETRIED", "FAILED");
        for (int i = 0; i < nq; i++) {
            dqt_escaped(stdout, queues[i], strlen(queues[i]), (size_t)qw);
            int pad = qw - (int)dqt_escaped_width(queues[i]);
            printf("%*s  %10" PRId64 "  %10" PRId64 "  %10" PRId64
                   "  %10" PRId64 "\n",
                   pad > 0 ? pad : 0, "", st[i].k[0], st[i].k[1], st[i].k[2],
                   st[i].k[3]);
        }
    }
}
