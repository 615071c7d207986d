/*
 * delayq_web.c - `delayq web`: the operator dashboard, an HTTP server on
 * libevent's evhttp that serves one embedded page (delayq_web_assets.c,
 * made from tools/web/ at build time) and the JSON API it uses
 * (docs/WEB.md), plus /metrics in Prometheus text.
 *
 * The library's sync client blocks, so requests are served one at a time
 * on the event loop, and every Redis call is bounded by
 * DQ_OPT_COMMAND_TIMEOUT_MS.  evhttp reads requests without blocking, so a
 * slow client never holds up another one: only the handlers run in turn.
 *
 * Everything goes through the public API of <delayq.h>: queues are found
 * with dq_queues, on every topology the URI can name.
 */
#include "delayq_tool.h"

const char dqt_help_web[] =
    "Usage: delayq web [--listen HOST:PORT] [--token T] [--read-only]\n"
    "\n"
    "Serves the operator dashboard: one page that lists the queues of the\n"
    "namespace with their counts, shows when scheduled jobs fall due, lists\n"
    "and looks up jobs, runs scheduled jobs now or cancels them, requeues or\n"
    "purges dead ones; plus a JSON API (docs/WEB.md) and /metrics (the\n"
    "series of `delayq stats --prometheus`, for every queue).  Everything\n"
    "is embedded in the binary: nothing is fetched from elsewhere.  Prints\n"
    "\"listening on URL\" as its first line, then serves until SIGINT or\n"
    "SIGTERM.\n"
    "\n"
    "Options:\n"
    "  --listen HOST:PORT  address to listen on (default 127.0.0.1:8080; a\n"
    "                      numeric address, [::1]:PORT for IPv6; port 0 picks\n"
    "                      a free port).  An address that is not loopback\n"
    "                      needs a token: without one the server refuses to\n"
    "                      start.\n"
    "  --token T           require T (default $DELAYQ_WEB_TOKEN): as header\n"
    "                      \"Authorization: Bearer T\", or typed once into the\n"
    "                      page's login form (an HttpOnly, SameSite=Strict\n"
    "                      cookie).  Without a token (loopback only) no login\n"
    "                      is asked, and requests must name a loopback Host.\n"
    "  --read-only         answer every POST of the API with 403: no run now,\n"
    "                      cancel, requeue or purge.\n"
    "\n"
    "Use the URI of the queues' clients, with ?partitions=N for partitioned\n"
    "queues.  The queues are found on every primary of a cluster, and on\n"
    "the primary that Sentinels name.\n";

#ifndef DQT_HAVE_EVHTTP

const dqt_optspec dqt_web_opts[] = {{"listen", 0, 1, DQT_O_LISTEN},
                                    {"token", 0, 1, DQT_O_TOKEN},
                                    {"read-only", 0, 0, DQT_O_READONLY},
                                    {NULL, 0, 0, 0}};

int dqt_cmd_web(dqt_cli *g) {
    (void)g;
    fprintf(stderr, "delayq web: this delayq was built without libevent's "
                    "evhttp (ENOTSUP)\n");
    return DQT_EXIT_FAILED;
}

#else

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/socket.h>

/* The embedded assets (delayq_web_assets.c, generated). */
extern const unsigned char dqt_web_index_html[], dqt_web_app_js[],
    dqt_web_app_css[];
extern const size_t dqt_web_index_html_len, dqt_web_app_js_len,
    dqt_web_app_css_len;

const dqt_optspec dqt_web_opts[] = {{"listen", 0, 1, DQT_O_LISTEN},
                                    {"token", 0, 1, DQT_O_TOKEN},
                                    {"read-only", 0, 0, DQT_O_READONLY},
                                    {NULL, 0, 0, 0}};

/* ---- Limits ---------------------------------------------------------- */

#define W_TIMEOUT_S 10              /* evhttp read/write timeout */
#define W_MAX_HEADERS (16 * 1024)   /* bytes of request headers */
#define W_MAX_BODY (64 * 1024)      /* bytes of a request body */
#define W_CMD_TIMEOUT_MS 2000       /* each Redis call */
#define W_MAX_QUEUES 1000           /* queues per listing */
#define W_LIST_PAGE_MAX 200         /* jobs per page of the API */
#define W_PAYLOAD_SHORT 256         /* payload bytes shown in lists */
#define W_PAYLOAD_FULL (1024 * 1024) /* payload bytes shown on a job */
#define W_SAMPLES 120               /* stats samples kept per queue */
#define W_SAMPLE_EVERY_MS 5000      /* at most one sample per queue per */
#define W_SAMPLE_QUEUES 256         /* queues with samples */
#define W_WATCH_MS (10 * 60 * 1000) /* sampled in the background after a view */
#define W_GROUPS 10 /* tenant groups shown on a queue's page */
#define W_NV 9 /* values read per queue: 5 of dq_stats, 4 of dq_counters */

/* Appends a string literal. */
#define W_ADD(b, lit) evbuffer_add((b), (lit), sizeof(lit) - 1)

/* ---- State ----------------------------------------------------------- */

/* A sample: the counts of dq_stats and the totals of dq_counters. */
typedef struct sample {
    int64_t t; /* wall ms */
    int64_t v[4]; /* scheduled, due, inflight, dead */
    int64_t k[4]; /* delivered, acked, retried, failed */
} sample;

typedef struct qsamples {
    char *name;
    int64_t viewed_ms; /* mono */
    int n, head;       /* ring of W_SAMPLES */
    sample s[W_SAMPLES];
} qsamples;

typedef struct web {
    dqt_cli *g;
    dq_client *c;        /* NULL until connected */
    int last_rc;         /* last dq_open failure */
    char last_err[512];
    const char *token;   /* NULL: no auth */
    int read_only;
    int check_host;      /* no token: Host must be loopback */
    char csrf[33];       /* random per start */
    char session[33];    /* cookie value after a login */
    const char *ns;
    qsamples *q[W_SAMPLE_QUEUES];
    int nq;
    struct event_base *base;
} web;

/* ---- Small helpers --------------------------------------------------- */

/* Constant-time comparison of a secret with what a client sent. */
static int secret_eq(const char *secret, const char *given, size_t glen) {
    size_t slen = strlen(secret);
    unsigned char d = (unsigned char)(slen != glen);
    for (size_t i = 0; i < glen; i++)
        d |= (unsigned char)(given[i] ^ secret[i % (slen ? slen : 1)]);
    return d == 0 && slen > 0;
}

/* 128 random bits as 32 hex digits. */
static int random_hex(char out[33]) {
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof(b)) {
        ssize_t r = getrandom(b + got, sizeof(b) - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)r;
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) (evhttp_uridecode) into a new NUL-terminated
 * string; NULL on a bad escape or a decoded NUL (names and ids never hold
 * one). */
static char *pct_decode(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\0' ||
            (s[i] == '%' &&
             (i + 2 >= n || hexval(s[i + 1]) < 0 ||
              hexval(s[i + 2]) < 0)))
            return NULL;
    char *raw = strndup(s, n), *o = NULL;
    size_t len = 0;
    if (raw != NULL && (o = evhttp_uridecode(raw, 0, &len)) != NULL &&
        strlen(o) != len) {
        free(o);
        o = NULL;
    }
    free(raw);
    return o;
}

/* Decodes one raw path segment: "~x<hex>" is the bytes in hex (for names
 * that no URL path can carry, such as ".."), else percent-decoding. */
static char *seg_decode(const char *s, size_t n) {
    if (n >= 2 && s[0] == '~' && s[1] == 'x') {
        if ((n - 2) % 2 != 0 || n == 2)
            return NULL;
        char *o = malloc((n - 2) / 2 + 1);
        if (o == NULL)
            return NULL;
        size_t k = 0;
        for (size_t i = 2; i < n; i += 2) {
            int h = hexval(s[i]), l = hexval(s[i + 1]);
            if (h < 0 || l < 0 || (h == 0 && l == 0)) {
                free(o);
                return NULL;
            }
            o[k++] = (char)(h * 16 + l);
        }
        o[k] = '\0';
        return o;
    }
    return pct_decode(s, n);
}

/* Valid UTF-8 without control characters other than tab, LF and CR. */
static int is_printable(const void *s, size_t n) {
    const unsigned char *p = s;
    for (size_t i = 0; i < n; i++)
        if ((p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r') ||
            p[i] == 0x7F)
            return 0;
    return dqt_is_utf8(s, n);
}

/* ---- JSON ------------------------------------------------------------ */

/* A JSON string.  Besides quotes, backslash and every control character
 * (NUL as \u0000), <, >, &, ' and U+2028/9 are escaped too, so the text is
 * inert wherever it lands.  Bytes that are not UTF-8 become U+FFFD (names
 * and ids that are not UTF-8 also get a *_hex twin: see j_name). */
static void j_str(struct evbuffer *b, const void *s, size_t n) {
    const unsigned char *p = s;
    char tmp[8];
    size_t run = 0; /* start of a run of bytes copied as they are */
    W_ADD(b, "\"");
    size_t i = 0;
    run = 0;
    while (i < n) {
        unsigned char c = p[i];
        size_t l = dqt_utf8_len(p + i, n - i);
        const char *esc = NULL;
        if (l == 0)
            esc = "\\ufffd";
        else if (c == '"')
            esc = "\\\"";
        else if (c == '\\')
            esc = "\\\\";
        else if (c == '\n')
            esc = "\\n";
        else if (c == '\t')
            esc = "\\t";
        else if (c == '\r')
            esc = "\\r";
        else if (c < 0x20 || c == 0x7F || c == '<' || c == '>' || c == '&' ||
                 c == '\'') {
            snprintf(tmp, sizeof(tmp), "\\u%04x", c);
            esc = tmp;
        } else if (l == 3 && c == 0xE2 && p[i + 1] == 0x80 &&
                   (p[i + 2] == 0xA8 || p[i + 2] == 0xA9)) {
            esc = p[i + 2] == 0xA8 ? "\\u2028" : "\\u2029";
        }
        if (esc != NULL) {
            if (i > run)
                evbuffer_add(b, p + run, i - run);
            evbuffer_add(b, esc, strlen(esc));
            i += l ? l : 1;
            run = i;
        } else {
            i += l;
        }
    }
    if (n > run)
        evbuffer_add(b, p + run, n - run);
    W_ADD(b, "\"");
}

static void j_cstr(struct evbuffer *b, const char *s) {
    j_str(b, s, strlen(s));
}

static void j_hex(struct evbuffer *b, const void *s, size_t n) {
    static const char hx[] = "0123456789abcdef";
    const unsigned char *p = s;
    char chunk[512];
    size_t k = 0;
    W_ADD(b, "\"");
    for (size_t i = 0; i < n; i++) {
        chunk[k++] = hx[p[i] >> 4];
        chunk[k++] = hx[p[i] & 15];
        if (k == sizeof(chunk)) {
            evbuffer_add(b, chunk, k);
            k = 0;
        }
    }
    evbuffer_add(b, chunk, k);
    W_ADD(b, "\"");
}

/* "key":"name" and, when name is not UTF-8, "key_hex":"...". */
static void j_name(struct evbuffer *b, const char *key, const char *s) {
    evbuffer_add_printf(b, "\"%s\":", key);
    j_cstr(b, s);
    if (!dqt_is_utf8(s, strlen(s))) {
        evbuffer_add_printf(b, ",\"%s_hex\":", key);
        j_hex(b, s, strlen(s));
    }
}

/* "key":{"text"|"hex":...} of the first max bytes of p (text when they
 * are printable UTF-8, cut at a character); returns how many it showed. */
static size_t j_bytes(struct evbuffer *b, const char *key, const void *p,
                      size_t n, size_t max) {
    size_t show = n > max ? max : n;
    int text = is_printable(p, show);
    if (!text && show < n) {
        /* cut inside a UTF-8 sequence? back up to its start */
        size_t cut = show;
        while (cut > 0 && cut > show - 4 &&
               (((const unsigned char *)p)[cut] & 0xC0) == 0x80)
            cut--;
        if (is_printable(p, cut)) {
            show = cut;
            text = 1;
        }
    }
    evbuffer_add_printf(b, "\"%s\":{\"%s\":", key, text ? "text" : "hex");
    if (text)
        j_str(b, p, show);
    else
        j_hex(b, p, show);
    W_ADD(b, "}");
    return show;
}

/* "payload":{"text"|"hex":...},"size":n,"truncated":bool */
static void j_payload(struct evbuffer *b, const void *p, size_t n,
                      size_t max) {
    size_t show = j_bytes(b, "payload", p, n, max);
    evbuffer_add_printf(b, ",\"size\":%zu,\"truncated\":%s", n,
                        show < n ? "true" : "false");
}

static const char *const state_names[3] = {"scheduled", "inflight", "dead"};
static const int state_which[3] = {DQ_LIST_SCHEDULED, DQ_LIST_INFLIGHT,
                                   DQ_LIST_DEAD};

/* A job's fields as listings and the job page write them: "id", "state",
 * "attempt", "due_ms", "lease_deadline_ms", the payload (at most max bytes
 * shown) and, when known, why it last failed ("last_error", "failed_ms");
 * without the braces around them. */
static void j_job_fields(struct evbuffer *b, const char *id,
                         const char *state, int64_t attempt, int64_t due_ms,
                         int64_t lease_ms, const void *p, size_t len,
                         size_t max, const void *e, size_t elen,
                         int64_t failed_ms) {
    j_name(b, "id", id);
    evbuffer_add_printf(b,
                        ",\"state\":\"%s\",\"attempt\":%" PRId64
                        ",\"due_ms\":%" PRId64 ",\"lease_deadline_ms\":%" PRId64
                        ",",
                        state, attempt, due_ms, lease_ms);
    j_payload(b, p, len, max);
    /* why it last failed (a nack's reason, "max attempts"), when known */
    if (e != NULL) {
        W_ADD(b, ",");
        j_bytes(b, "last_error", e, elen, elen);
        evbuffer_add_printf(b, ",\"failed_ms\":%" PRId64, failed_ms);
    }
}

/* ,"group":"name" (null when none; a _hex twin as j_name),"priority":n. */
static void j_fair(struct evbuffer *b, const char *group, int priority) {
    W_ADD(b, ",");
    if (group != NULL)
        j_name(b, "group", group);
    else
        W_ADD(b, "\"group\":null");
    evbuffer_add_printf(b, ",\"priority\":%d", priority);
}

static void j_job(struct evbuffer *b, int st, const dq_job *j, size_t max) {
    size_t len, elen;
    const void *p = dq_job_payload(j, &len);
    const void *e = dq_job_last_error(j, &elen);
    W_ADD(b, "{");
    j_job_fields(b, dq_job_id(j), state_names[st], dq_job_attempt(j),
                 dq_job_due_ms(j), dq_job_lease_deadline_ms(j), p, len, max, e,
                 elen, dq_job_failed_ms(j));
    j_fair(b, dq_job_group(j), dq_job_priority(j));
    W_ADD(b, "}");
}

/* ---- Responses ------------------------------------------------------- */

static void common_headers(struct evhttp_request *req, const char *ctype) {
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", ctype);
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
    evhttp_add_header(h, "X-Frame-Options", "DENY");
    evhttp_add_header(h, "Referrer-Policy", "no-referrer");
    evhttp_add_header(h, "Cache-Control", "no-store");
    evhttp_add_header(h, "Content-Security-Policy",
                      "default-src 'none'; script-src 'self'; style-src "
                      "'self'; img-src 'self' data:; connect-src 'self'; "
                      "form-action 'self'; frame-ancestors 'none'; "
                      "base-uri 'none'");
}

static const char *reason(int code) {
    switch (code) {
    case 200: return "OK";
    case 204: return "No Content";
    case 303: return "See Other";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    default: return "Error";
    }
}

static void send_buf(struct evhttp_request *req, int code, const char *ctype,
                     struct evbuffer *b) {
    common_headers(req, ctype);
    evhttp_send_reply(req, code, reason(code), b);
}

static void send_json(struct evhttp_request *req, int code,
                      struct evbuffer *b) {
    W_ADD(b, "\n");
    send_buf(req, code, "application/json; charset=utf-8", b);
}

static void send_error(struct evhttp_request *req, int http, const char *code,
                       const char *msg) {
    struct evbuffer *b = evbuffer_new();
    if (b == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    W_ADD(b, "{\"error\":");
    j_cstr(b, msg);
    W_ADD(b, ",\"code\":");
    j_cstr(b, code);
    W_ADD(b, "}");
    if (http == 401)
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "WWW-Authenticate", "Bearer realm=\"delayq\"");
    send_json(req, http, b);
    evbuffer_free(b);
}

/* HTTP status of a library error. */
static int http_for(int rc) {
    switch (rc) {
    case DQ_EIO:
    case DQ_ETIMEDOUT:
    case DQ_ECLOSED:
    case DQ_ENOMEM:
        return 503;
    case DQ_EINVAL:
    case DQ_EQUEUE:
    case DQ_EID:
    case DQ_EDELAY:
        return 400;
    case DQ_ENOTFOUND:
        return 404;
    default:
        return 502;
    }
}

static void send_dq_error(web *w, struct evhttp_request *req, int rc) {
    const char *msg = w->c ? dq_errmsg(w->c) : w->last_err;
    if (msg == NULL || *msg == '\0')
        msg = dq_strerror(rc);
    send_error(req, http_for(rc), dq_errname(rc), msg);
}

/* ---- Redis ----------------------------------------------------------- */

/* The client, connected now if it was not; 0 or a code (the reason in
 * w->last_err).  A connected client reconnects by itself on its next call
 * after a break, so it is kept. */
static int client(web *w) {
    if (w->c != NULL)
        return 0;
    int ex;
    dq_options *o = dqt_client_options(w->g, &ex);
    if (o == NULL)
        return DQ_ENOMEM;
    dq_options_set_int(o, DQ_OPT_COMMAND_TIMEOUT_MS, W_CMD_TIMEOUT_MS);
    dq_options_set_int(o, DQ_OPT_CONNECT_TIMEOUT_MS, W_CMD_TIMEOUT_MS);
    dq_client *c = NULL;
    int rc = dq_open(w->g->uri, o, &c);
    dq_options_free(o);
    if (rc != 0) {
        snprintf(w->last_err, sizeof(w->last_err), "cannot connect to Redis: %s",
                 c && *dq_errmsg(c) ? dq_errmsg(c) : dq_strerror(rc));
        w->last_rc = rc;
        dq_close(c);
        return rc;
    }
    w->c = c;
    return 0;
}

/* A queue found by dq_queues. */
typedef struct qname {
    char *name;
    int partitioned;
} qname;

/* The queues of the namespace (dq_queues), sorted; *complete = 0 when
 * the listing's bounds cut it short.  Returns the count, or a code. */
static int discover(web *w, qname **out, int *complete) {
    dq_queue_list *l = NULL;
    int n = dq_queues(w->c, W_MAX_QUEUES, &l);
    *out = NULL;
    if (n < 0)
        return n;
    qname *qs = calloc((size_t)n + 1, sizeof(*qs));
    for (int i = 0; qs != NULL && i < n; i++) {
        qs[i].partitioned = dq_queue_list_partitioned(l, (size_t)i);
        if ((qs[i].name = strdup(dq_queue_list_name(l, (size_t)i))) == NULL) {
            while (i-- > 0)
                free(qs[i].name);
            free(qs);
            qs = NULL;
        }
    }
    *complete = dq_queue_list_complete(l);
    dq_queue_list_free(l);
    if (qs == NULL)
        return DQ_ENOMEM;
    *out = qs;
    return n;
}

static void qnames_free(qname *qs, int n) {
    for (int j = 0; j < n; j++)
        free(qs[j].name);
    free(qs);
}

/* ---- Samples (rates) ------------------------------------------------- */

static qsamples *samples_for(web *w, const char *queue, int create) {
    for (int i = 0; i < w->nq; i++)
        if (strcmp(w->q[i]->name, queue) == 0)
            return w->q[i];
    if (!create)
        return NULL;
    int slot = w->nq;
    if (slot == W_SAMPLE_QUEUES) { /* drop the least recently viewed */
        slot = 0;
        for (int i = 1; i < w->nq; i++)
            if (w->q[i]->viewed_ms < w->q[slot]->viewed_ms)
                slot = i;
        free(w->q[slot]->name);
        free(w->q[slot]);
    } else {
        w->nq++;
    }
    qsamples *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->name = strdup(queue)) == NULL) {
        free(s);
        w->q[slot] = w->q[--w->nq];
        return NULL;
    }
    w->q[slot] = s;
    return s;
}

/* v: the W_NV values of stats(). */
static void sample_add(qsamples *s, const int64_t v[W_NV]) {
    int64_t now = dqt_wall_ms();
    if (s->n > 0) {
        const sample *last = &s->s[(s->head + W_SAMPLES - 1) % W_SAMPLES];
        if (now - last->t < W_SAMPLE_EVERY_MS)
            return;
    }
    sample *x = &s->s[s->head];
    x->t = now;
    memcpy(x->v, v, sizeof(x->v));
    memcpy(x->k, v + 5, sizeof(x->k));
    s->head = (s->head + 1) % W_SAMPLES;
    if (s->n < W_SAMPLES)
        s->n++;
}

/* Stats and counters of a queue into v (scheduled, due, inflight, dead,
 * next_due_ms, delivered, acked, retried, failed).  0 or a code. */
static int read_queue(web *w, const char *queue, int64_t v[W_NV]) {
    int rc = dq_stats(w->c, queue, &v[0], &v[1], &v[2], &v[3], &v[4]);
    if (rc < 0)
        return rc;
    rc = dq_counters(w->c, queue, &v[5], &v[6], &v[7], &v[8]);
    return rc < 0 ? rc : 0;
}

/* Stats and counters of a queue, recorded as a sample.  0 or a code. */
static int stats(web *w, const char *queue, int64_t v[W_NV], int viewed) {
    int rc = read_queue(w, queue, v);
    if (rc < 0)
        return rc;
    qsamples *s = samples_for(w, queue, viewed);
    if (s != NULL) {
        if (viewed)
            s->viewed_ms = dqt_mono_ms();
        sample_add(s, v);
    }
    return 0;
}

/* Background sampling of the queues viewed lately. */
static void on_tick(evutil_socket_t fd, short ev, void *arg) {
    web *w = arg;
    (void)fd;
    (void)ev;
    if (w->c == NULL)
        return;
    int64_t now = dqt_mono_ms();
    for (int i = 0; i < w->nq; i++) {
        if (now - w->q[i]->viewed_ms > W_WATCH_MS)
            continue;
        int64_t v[W_NV];
        if (read_queue(w, w->q[i]->name, v) < 0)
            return;
        sample_add(w->q[i], v);
    }
}

/* ---- Handlers -------------------------------------------------------- */

static const char *const count_names[4] = {"scheduled", "due", "inflight",
                                           "dead"};

static const char *const counter_names[4] = {"delivered", "acked",
                                             "retried", "failed"};

static void j_counts(struct evbuffer *b, const int64_t v[5]) {
    for (int k = 0; k < 4; k++)
        evbuffer_add_printf(b, "\"%s\":%" PRId64 ",", count_names[k], v[k]);
    evbuffer_add_printf(b, "\"next_due_ms\":%" PRId64, v[4]);
}

/* The totals of dq_counters: k[0..3]. */
static void j_counters(struct evbuffer *b, const int64_t k[4]) {
    for (int i = 0; i < 4; i++)
        evbuffer_add_printf(b, "%s\"%s\":%" PRId64, i ? "," : "",
                            counter_names[i], k[i]);
}

/* How much a counter grew from a to c: a total lower than before means the
 * counts were reset (their key deleted), so all of c is new. */
static int64_t grown(int64_t a, int64_t c) {
    return c >= a ? c - a : c;
}

static void h_session(web *w, struct evhttp_request *req) {
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "{\"csrf\":\"%s\",\"read_only\":%s,\"auth\":\"%s\","
                           "\"namespace\":",
                        w->csrf, w->read_only ? "true" : "false",
                        w->token ? "token" : "none");
    j_cstr(b, w->ns);
    evbuffer_add_printf(b, ",\"discovery\":true,\"version\":\"%s\"}",
                        dq_version_string());
    send_json(req, 200, b);
    evbuffer_free(b);
}

/* The client and the queues of the namespace, for a listing; -1 after an
 * error answer was sent. */
static int queues_for(web *w, struct evhttp_request *req, qname **qs,
                      int *complete) {
    int rc = client(w);
    int n = rc != 0 ? rc : discover(w, qs, complete);
    if (n < 0)
        send_dq_error(w, req, n);
    return n < 0 ? -1 : n;
}

static void h_queues(web *w, struct evhttp_request *req) {
    qname *qs;
    int complete, rc;
    int n = queues_for(w, req, &qs, &complete);
    if (n < 0)
        return;
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "{\"complete\":%s,\"time_ms\":%" PRId64
                           ",\"queues\":[",
                        complete ? "true" : "false", dqt_wall_ms());
    for (int i = 0; i < n; i++) {
        int64_t v[W_NV];
        if ((rc = stats(w, qs[i].name, v, 0)) < 0 && http_for(rc) != 400) {
            evbuffer_free(b);
            qnames_free(qs, n);
            send_dq_error(w, req, rc);
            return;
        }
        evbuffer_add_printf(b, "%s{", i ? "," : "");
        j_name(b, "name", qs[i].name);
        evbuffer_add_printf(b, ",\"partitioned\":%s,",
                            qs[i].partitioned ? "true" : "false");
        if (rc < 0) { /* e.g. partitioned with another count than ours */
            W_ADD(b, "\"error\":");
            j_cstr(b, dq_errmsg(w->c));
            evbuffer_add_printf(b, ",\"code\":\"%s\"", dq_errname(rc));
            for (int k = 0; k < 4; k++)
                evbuffer_add_printf(b, ",\"%s\":0", count_names[k]);
            evbuffer_add_printf(b, ",\"next_due_ms\":-1");
        } else {
            j_counts(b, v);
        }
        W_ADD(b, "}");
    }
    W_ADD(b, "]}");
    qnames_free(qs, n);
    send_json(req, 200, b);
    evbuffer_free(b);
}

/* Histogram buckets: upper bounds in ms from now (the last is open). */
static const struct {
    int64_t upto;
    const char *label;
} hist_b[] = {{0, "due"},           {60000, "<1m"},       {300000, "1-5m"},
              {900000, "5-15m"},    {3600000, "15-60m"},  {21600000, "1-6h"},
              {86400000, "6-24h"},  {604800000, "1-7d"},  {INT64_MAX, ">7d"}};
#define W_NHIST (sizeof(hist_b) / sizeof(hist_b[0]))

/* "settings":{...} of dq_config_get: every setting by its name, null when
 * the queue has none (the clients' options or no limit apply), the backoff
 * and expiry handling by name.  Totals for a partitioned queue. */
static int j_settings(web *w, struct evbuffer *b, const char *q) {
    int keys[DQ_SET__COUNT];
    int64_t vals[DQ_SET__COUNT];
    for (int i = 0; i < DQ_SET__COUNT; i++)
        keys[i] = i + 1;
    int rc = dq_config_get(w->c, q, DQ_SET__COUNT, keys, vals);
    if (rc < 0)
        return rc;
    W_ADD(b, "\"settings\":{");
    for (int i = 0; i < DQ_SET__COUNT; i++) {
        const char *name = dq_setting_name(keys[i]);
        evbuffer_add_printf(b, "%s\"%s\":", i ? "," : "", name ? name : "?");
        const char *word = dqt_setting_word(keys[i], vals[i]);
        if (vals[i] == DQ_UNSET)
            W_ADD(b, "null");
        else if (word != NULL)
            evbuffer_add_printf(b, "\"%s\"", word);
        else
            evbuffer_add_printf(b, "%" PRId64, vals[i]);
    }
    W_ADD(b, "}");
    return 0;
}

/* ,"groups":[{"group","due","later","inflight"}...]: the first W_GROUPS
 * tenant groups in turn order (dq_group_stats; summed over partitions). */
static int j_groups(web *w, struct evbuffer *b, const char *q) {
    dq_group_list *l = NULL;
    int rc = dq_group_stats(w->c, q, W_GROUPS, &l);
    if (rc < 0)
        return rc;
    W_ADD(b, ",\"groups\":[");
    for (size_t i = 0; i < dq_group_list_count(l); i++) {
        evbuffer_add_printf(b, "%s{", i ? "," : "");
        j_name(b, "group", dq_group_list_name(l, i));
        evbuffer_add_printf(b, ",\"due\":%" PRId64 ",\"later\":%" PRId64
                               ",\"inflight\":%" PRId64 "}",
                            dq_group_list_due(l, i), dq_group_list_later(l, i),
                            dq_group_list_inflight(l, i));
    }
    W_ADD(b, "]");
    dq_group_list_free(l);
    return 0;
}

static void h_queue(web *w, struct evhttp_request *req, const char *q) {
    int64_t v[W_NV];
    int rc;
    if ((rc = client(w)) != 0 || (rc = stats(w, q, v, 1)) < 0) {
        send_dq_error(w, req, rc);
        return;
    }
    /* the histogram: pending jobs per window, counted in Redis
     * (dq_count_due: a ZCOUNT per window, no job read) */
    int64_t bounds[W_NHIST - 1], hist[W_NHIST] = {0}, seen = 0, now = 0;
    for (size_t k = 0; k + 1 < W_NHIST; k++)
        bounds[k] = hist_b[k].upto;
    if ((rc = dq_count_due(w->c, q, bounds, (int)W_NHIST - 1, hist, &now)) <
        0) {
        send_dq_error(w, req, rc);
        return;
    }
    for (size_t k = 0; k < W_NHIST; k++)
        seen += hist[k];
    int complete = 1; /* every pending job is counted */
    struct evbuffer *b = evbuffer_new();
    W_ADD(b, "{");
    j_name(b, "name", q);
    W_ADD(b, ",\"stats\":{");
    j_counts(b, v);
    W_ADD(b, "},\"counters\":{");
    j_counters(b, v + 5);
    W_ADD(b, "},");
    if ((rc = j_settings(w, b, q)) < 0 || (rc = j_groups(w, b, q)) < 0) {
        evbuffer_free(b);
        send_dq_error(w, req, rc);
        return;
    }
    evbuffer_add_printf(b, ",\"now_ms\":%" PRId64 ",\"histogram\":{\"jobs\":%"
                           PRId64 ",\"complete\":%s,\"buckets\":[",
                        now, seen, complete ? "true" : "false");
    for (size_t k = 0; k < W_NHIST; k++)
        evbuffer_add_printf(b, "%s{\"label\":\"%s\",\"upto_ms\":%" PRId64
                               ",\"jobs\":%" PRId64 "}",
                            k ? "," : "", hist_b[k].label,
                            hist_b[k].upto == INT64_MAX ? -1 : hist_b[k].upto,
                            hist[k]);
    W_ADD(b, "]},\"samples\":[");
    qsamples *s = samples_for(w, q, 0);
    const sample *first = NULL, *last = NULL;
    for (int i = 0; s != NULL && i < s->n; i++) {
        const sample *x =
            &s->s[(s->head + W_SAMPLES - s->n + i) % W_SAMPLES];
        evbuffer_add_printf(b, "%s[%" PRId64 ",%" PRId64 ",%" PRId64
                               ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
                               ",%" PRId64 ",%" PRId64 "]",
                            i ? "," : "", x->t, x->v[0], x->v[1], x->v[2],
                            x->v[3], x->k[0], x->k[1], x->k[2], x->k[3]);
        if (x->t >= dqt_wall_ms() - 5 * 60000 && first == NULL)
            first = x;
        last = x;
    }
    W_ADD(b, "],\"rates\":{");
    /* over the last 5 minutes: the net change per minute of each count,
     * the jobs that died (increases of dead), and the growth per minute of
     * each counter */
    if (first != NULL && last != NULL && last->t - first->t >= 1000) {
        double mins = (double)(last->t - first->t) / 60000.0;
        int64_t died = 0;
        for (int i = 1; i < s->n; i++) {
            const sample *a = &s->s[(s->head + W_SAMPLES - s->n + i - 1) %
                                    W_SAMPLES];
            const sample *c = &s->s[(s->head + W_SAMPLES - s->n + i) %
                                    W_SAMPLES];
            if (a->t >= first->t && c->v[3] > a->v[3])
                died += c->v[3] - a->v[3];
        }
        evbuffer_add_printf(b, "\"window_ms\":%" PRId64, last->t - first->t);
        for (int k = 0; k < 4; k++)
            evbuffer_add_printf(b, ",\"%s_per_min\":%.2f", count_names[k],
                                (double)(last->v[k] - first->v[k]) / mins);
        evbuffer_add_printf(b, ",\"died_per_min\":%.2f", (double)died / mins);
        for (int k = 0; k < 4; k++)
            evbuffer_add_printf(b, ",\"%s_per_min\":%.2f", counter_names[k],
                                (double)grown(first->k[k], last->k[k]) / mins);
    } else {
        W_ADD(b, "\"window_ms\":0");
    }
    /* the counters' growth per minute at each sample after the first,
     * over the minute before it (or the samples there are, back to the
     * one before): [t, delivered, acked, retried, failed] */
    W_ADD(b, ",\"series\":[");
#define W_AT(i) (&s->s[(s->head + W_SAMPLES - s->n + (i)) % W_SAMPLES])
    for (int i = 1; s != NULL && i < s->n; i++) {
        const sample *c = W_AT(i);
        int j = i - 1;
        while (j > 0 && c->t - W_AT(j - 1)->t <= 60000)
            j--;
        int64_t sum[4] = {0, 0, 0, 0}, dt = c->t - W_AT(j)->t;
        for (int m = j + 1; m <= i; m++)
            for (int k = 0; k < 4; k++)
                sum[k] += grown(W_AT(m - 1)->k[k], W_AT(m)->k[k]);
        evbuffer_add_printf(b, "%s[%" PRId64, i > 1 ? "," : "", c->t);
        for (int k = 0; k < 4; k++)
            evbuffer_add_printf(b, ",%.2f",
                                dt > 0 ? (double)sum[k] * 60000.0 / (double)dt
                                       : 0.0);
        W_ADD(b, "]");
    }
#undef W_AT
    W_ADD(b, "]}}");
    send_json(req, 200, b);
    evbuffer_free(b);
}

/* Parses an integer query parameter in lo..hi; def when absent. */
static int qparam(struct evkeyvalq *qs, const char *name, int64_t lo,
                  int64_t hi, int64_t def, int64_t *out) {
    const char *s = evhttp_find_header(qs, name);
    if (s == NULL) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

static void h_jobs(web *w, struct evhttp_request *req, const char *q) {
    struct evkeyvalq qs;
    TAILQ_INIT(&qs);
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    if (query != NULL && evhttp_parse_query_str(query, &qs) != 0) {
        evhttp_clear_headers(&qs);
        send_error(req, 400, "EINVAL", "malformed query string");
        return;
    }
    const char *state = evhttp_find_header(&qs, "state");
    int st = -1;
    for (int k = 0; k < 3; k++)
        if (state == NULL ? k == 0 : strcmp(state, state_names[k]) == 0)
            st = k;
    int64_t offset, count;
    if (st < 0 || qparam(&qs, "offset", 0, INT32_MAX, 0, &offset) ||
        qparam(&qs, "count", 1, W_LIST_PAGE_MAX, 50, &count)) {
        evhttp_clear_headers(&qs);
        send_error(req, 400, "EINVAL",
                   "use state=scheduled|inflight|dead, offset=0.., "
                   "count=1..200");
        return;
    }
    evhttp_clear_headers(&qs);
    int rc;
    int64_t v[W_NV], now = 0;
    dq_jobs *jobs = NULL;
    if ((rc = client(w)) != 0 || (rc = stats(w, q, v, 1)) < 0 ||
        (rc = dq_list(w->c, q, state_which[st], offset, (int)count, &jobs,
                      &now)) < 0) {
        send_dq_error(w, req, rc);
        return;
    }
    int64_t total = st == 0 ? v[0] + v[1] : st == 1 ? v[2] : v[3];
    struct evbuffer *b = evbuffer_new();
    W_ADD(b, "{");
    j_name(b, "queue", q);
    evbuffer_add_printf(b, ",\"state\":\"%s\",\"offset\":%" PRId64
                           ",\"count\":%d,\"total\":%" PRId64
                           ",\"now_ms\":%" PRId64 ",\"jobs\":[",
                        state_names[st], offset, rc, total, now);
    for (int i = 0; i < rc; i++) {
        if (i)
            W_ADD(b, ",");
        j_job(b, st, dq_jobs_at(jobs, (size_t)i), W_PAYLOAD_SHORT);
    }
    evbuffer_add_printf(b, "],\"more\":%s}",
                        offset + rc < total || rc == count ? "true" : "false");
    dq_jobs_free(jobs);
    send_json(req, 200, b);
    evbuffer_free(b);
}

/* One job by id: dq_get, one round trip at any depth of any state. */
static void h_job(web *w, struct evhttp_request *req, const char *q,
                  const char *id) {
    int rc;
    dq_job_info *info = NULL;
    if ((rc = client(w)) != 0 || (rc = dq_get(w->c, q, id, &info)) < 0) {
        send_dq_error(w, req, rc);
        return;
    }
    if (rc == 0) {
        send_error(req, 404, "ENOTFOUND",
                   "no pending, in-flight or dead job with that id");
        return;
    }
    size_t len;
    const void *p = dq_job_info_payload(info, &len);
    struct evbuffer *b = evbuffer_new();
    W_ADD(b, "{");
    j_name(b, "queue", q);
    evbuffer_add_printf(b, ",\"now_ms\":%" PRId64 ",\"job\":{",
                        dq_job_info_now_ms(info));
    size_t elen;
    const void *e = dq_job_info_last_error(info, &elen);
    j_job_fields(b, dq_job_info_id(info),
                 dqt_job_state_name(dq_job_info_state(info)),
                 dq_job_info_attempts(info), dq_job_info_due_ms(info),
                 dq_job_info_lease_deadline_ms(info), p, len, W_PAYLOAD_FULL,
                 e, elen, dq_job_info_failed_ms(info));
    const char *rule = dq_job_info_repeat(info);
    W_ADD(b, ",\"repeat\":");
    if (rule != NULL)
        j_cstr(b, rule);
    else
        W_ADD(b, "null");
    evbuffer_add_printf(b, ",\"followup_ms\":%" PRId64,
                        dq_job_info_followup_ms(info));
    j_fair(b, dq_job_info_group(info), dq_job_info_priority(info));
    W_ADD(b, "}}");
    dq_job_info_free(info);
    send_json(req, 200, b);
    evbuffer_free(b);
}

/* The POST actions: each one library call. */
enum { A_CANCEL, A_REQUEUE, A_PURGE, A_REQUEUE_ALL, A_PURGE_ALL };

static void h_action(web *w, struct evhttp_request *req, const char *q,
                     const char *id, int action) {
    int rc;
    if ((rc = client(w)) != 0) {
        send_dq_error(w, req, rc);
        return;
    }
    switch (action) {
    case A_CANCEL:
        rc = dq_cancel(w->c, q, id, 0);
        break;
    case A_REQUEUE:
    case A_REQUEUE_ALL:
        rc = dq_dead_requeue(w->c, q, id, 0);
        break;
    default:
        rc = dq_dead_purge(w->c, q, id);
        break;
    }
    if (rc < 0) {
        send_dq_error(w, req, rc);
        return;
    }
    if (action == A_CANCEL && rc == DQ_CANCEL_BUSY) {
        send_error(req, 409, "BUSY",
                   "the job is in flight: its handler is running; only its "
                   "holder can finish it");
        return;
    }
    if (rc == 0 && (action == A_CANCEL || action == A_REQUEUE ||
                    action == A_PURGE)) {
        send_error(req, 404, "ENOTFOUND",
                   action == A_CANCEL ? "no scheduled job with that id"
                                      : "no dead job with that id");
        return;
    }
    /* A requeue/purge-all moves at most 1000 jobs: say how many dead ones
     * are left, so the operator knows to go again.  Counted after the call
     * (dq_stats); if that read fails, a full batch means there may be. */
    int64_t left = -1;
    if (action >= A_REQUEUE_ALL &&
        dq_stats(w->c, q, NULL, NULL, NULL, &left, NULL) != 0)
        left = -1;
    int more = action >= A_REQUEUE_ALL && (left < 0 ? rc >= 1000 : left > 0);
    struct evbuffer *b = evbuffer_new();
    static const char *const what[] = {"canceled", "requeued", "purged",
                                       "requeued", "purged"};
    evbuffer_add_printf(b, "{\"%s\":%d,\"more\":%s", what[action], rc,
                        more ? "true" : "false");
    if (action >= A_REQUEUE_ALL && left >= 0)
        evbuffer_add_printf(b, ",\"dead_left\":%" PRId64, left);
    W_ADD(b, "}");
    send_json(req, 200, b);
    evbuffer_free(b);
}

/* POST .../jobs/ID/promote: the dashboard's "run now" (dq_promote): a
 * pending job is due now, keeping everything else; one in flight or dead
 * is left alone (409), an unknown one is 404. */
static void h_promote(web *w, struct evhttp_request *req, const char *q,
                      const char *id) {
    int rc = client(w);
    if (rc == 0)
        rc = dq_promote(w->c, q, id, 0);
    if (rc < 0) {
        send_dq_error(w, req, rc);
    } else if (rc == DQ_RESCHED_INFLIGHT) {
        send_error(req, 409, "BUSY",
                   "the job is in flight: its handler is running already");
    } else if (rc == DQ_RESCHED_DEAD) {
        send_error(req, 409, "DEAD",
                   "the job is dead: requeue it from the dead jobs");
    } else if (rc != DQ_RESCHED_MOVED) {
        send_error(req, 404, "ENOTFOUND", "no scheduled job with that id");
    } else {
        struct evbuffer *b = evbuffer_new();
        W_ADD(b, "{\"promoted\":1}");
        send_json(req, 200, b);
        evbuffer_free(b);
    }
}

/* A label value: \\ " and newline escaped, bytes that are not UTF-8 as
 * U+FFFD (Prometheus text is UTF-8). */
static void prom_label(struct evbuffer *b, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t l = dqt_utf8_len((const unsigned char *)s + i, n - i);
        if (l == 0) {
            W_ADD(b, "\xEF\xBF\xBD");
            i++;
            continue;
        }
        if (s[i] == '\\' || s[i] == '"')
            evbuffer_add_printf(b, "\\%c", s[i]);
        else if (s[i] == '\n')
            W_ADD(b, "\\n");
        else
            evbuffer_add(b, s + i, l);
        i += l;
    }
}

static void h_metrics(web *w, struct evhttp_request *req) {
    qname *qs;
    int complete, rc;
    int n = queues_for(w, req, &qs, &complete);
    if (n < 0)
        return;
    int64_t(*v)[W_NV] = calloc((size_t)n + 1, sizeof(*v));
    char *skip = calloc((size_t)n + 1, 1);
    for (int i = 0; i < n && v != NULL && skip != NULL; i++)
        if ((rc = stats(w, qs[i].name, v[i], 0)) < 0 && http_for(rc) == 400)
            skip[i] = 1; /* a queue this client cannot read: left out */
        else if (rc < 0) {
            free(skip);
            free(v);
            qnames_free(qs, n);
            send_dq_error(w, req, rc);
            return;
        }
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "# HELP delayq_jobs Jobs in a delayq queue, by "
                           "state.\n# TYPE delayq_jobs gauge\n");
    for (int i = 0; i < n && v && skip; i++)
        for (int k = 0; k < 4 && !skip[i]; k++) {
            evbuffer_add_printf(b, "delayq_jobs{queue=\"");
            prom_label(b, qs[i].name);
            evbuffer_add_printf(b, "\",state=\"%s\"} %" PRId64 "\n",
                                count_names[k], v[i][k]);
        }
    evbuffer_add_printf(b, "# HELP delayq_next_due_seconds Seconds until the "
                           "earliest pending job of a queue is due (0: one is "
                           "due now, -1: none is pending).\n# TYPE "
                           "delayq_next_due_seconds gauge\n");
    for (int i = 0; i < n && v && skip; i++) {
        if (skip[i])
            continue;
        evbuffer_add_printf(b, "delayq_next_due_seconds{queue=\"");
        prom_label(b, qs[i].name);
        if (v[i][4] < 0)
            evbuffer_add_printf(b, "\"} -1\n");
        else
            evbuffer_add_printf(b, "\"} %" PRId64 ".%03d\n", v[i][4] / 1000,
                                (int)(v[i][4] % 1000));
    }
    static const char *const counter_help[4] = {
        "Jobs handed out by polls (retries included)", "Jobs acked",
        "Jobs nacked for a retry", "Jobs dead-lettered"};
    for (int k = 0; k < 4; k++) {
        evbuffer_add_printf(b, "# HELP delayq_jobs_%s_total %s, counted by "
                               "the clients with DQ_OPT_COUNTERS.\n# TYPE "
                               "delayq_jobs_%s_total counter\n",
                            counter_names[k], counter_help[k],
                            counter_names[k]);
        for (int i = 0; i < n && v && skip; i++) {
            if (skip[i])
                continue;
            evbuffer_add_printf(b, "delayq_jobs_%s_total{queue=\"",
                                counter_names[k]);
            prom_label(b, qs[i].name);
            evbuffer_add_printf(b, "\"} %" PRId64 "\n", v[i][5 + k]);
        }
    }
    free(v);
    free(skip);
    qnames_free(qs, n);
    send_buf(req, 200, "text/plain; version=0.0.4; charset=utf-8", b);
    evbuffer_free(b);
}

static void h_static(struct evhttp_request *req, const void *p, size_t n,
                     const char *ctype) {
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_reference(b, p, n, NULL, NULL);
    send_buf(req, 200, ctype, b);
    evbuffer_free(b);
}

/* ---- Auth ------------------------------------------------------------ */

/* 1 if the Host header names a loopback address (DNS rebinding guard when
 * there is no token). */
static int host_is_loopback(const char *host) {
    if (host == NULL)
        return 0;
    char h[256];
    size_t n = strlen(host);
    if (n == 0 || n >= sizeof(h))
        return 0;
    memcpy(h, host, n + 1);
    if (h[0] == '[') {
        char *e = strchr(h, ']');
        if (e == NULL)
            return 0;
        *e = '\0';
        return strcmp(h + 1, "::1") == 0;
    }
    char *colon = strchr(h, ':');
    if (colon != NULL)
        *colon = '\0';
    if (strcmp(h, "localhost") == 0)
        return 1;
    struct in_addr a;
    return inet_pton(AF_INET, h, &a) == 1 &&
           (ntohl(a.s_addr) >> 24) == 127;
}

/* 1 if the request carries the token (bearer) or the session cookie. */
static int authorized(web *w, struct evhttp_request *req) {
    if (w->token == NULL)
        return 1;
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *a = evhttp_find_header(h, "Authorization");
    if (a != NULL && strncasecmp(a, "Bearer ", 7) == 0)
        return secret_eq(w->token, a + 7, strlen(a + 7));
    const char *c = evhttp_find_header(h, "Cookie");
    while (c != NULL && *c) {
        while (*c == ' ' || *c == ';')
            c++;
        size_t l = strcspn(c, ";");
        if (l > 14 && strncmp(c, "delayq_session=", 15) == 0)
            if (secret_eq(w->session, c + 15, l - 15))
                return 1;
        c += l;
    }
    return 0;
}

/* POST /login with a form field token=T: sets the session cookie. */
static void h_login(web *w, struct evhttp_request *req) {
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    char *body = malloc(n + 1);
    struct evkeyvalq form;
    TAILQ_INIT(&form);
    int ok = 0;
    if (body != NULL) {
        evbuffer_copyout(in, body, n);
        body[n] = '\0';
        if (w->token != NULL && strlen(body) == n &&
            evhttp_parse_query_str(body, &form) == 0) {
            const char *t = evhttp_find_header(&form, "token");
            ok = t != NULL && secret_eq(w->token, t, strlen(t));
        }
    }
    evhttp_clear_headers(&form);
    free(body);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    struct evbuffer *b = evbuffer_new();
    if (ok) {
        char cookie[128];
        snprintf(cookie, sizeof(cookie),
                 "delayq_session=%s; Path=/; HttpOnly; SameSite=Strict",
                 w->session);
        evhttp_add_header(h, "Set-Cookie", cookie);
        evhttp_add_header(h, "Location", "/");
        send_buf(req, 303, "text/plain; charset=utf-8", b);
    } else {
        evhttp_add_header(h, "Location", "/#login-failed");
        send_buf(req, 303, "text/plain; charset=utf-8", b);
    }
    evbuffer_free(b);
}

/* ---- Dispatch -------------------------------------------------------- */

#define W_MAX_SEGS 8

static void on_request(struct evhttp_request *req, void *arg) {
    web *w = arg;
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    int get = m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD;
    int post = m == EVHTTP_REQ_POST;
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    if (path == NULL || path[0] != '/') {
        send_error(req, 400, "EINVAL", "malformed request path");
        return;
    }
    if (w->check_host &&
        !host_is_loopback(evhttp_find_header(
            evhttp_request_get_input_headers(req), "Host"))) {
        send_error(req, 403, "EHOST",
                   "without a token only a loopback Host is served");
        return;
    }
    if (!get && !post) {
        send_error(req, 405, "EMETHOD", "use GET or POST");
        return;
    }
    /* static assets and the login form: no auth */
    if (strcmp(path, "/") == 0 || strcmp(path, "/index.html") == 0) {
        if (!get)
            goto method;
        h_static(req, dqt_web_index_html, dqt_web_index_html_len,
                 "text/html; charset=utf-8");
        return;
    }
    if (strcmp(path, "/app.js") == 0 || strcmp(path, "/app.css") == 0) {
        if (!get)
            goto method;
        if (path[5] == 'j')
            h_static(req, dqt_web_app_js, dqt_web_app_js_len,
                     "text/javascript; charset=utf-8");
        else
            h_static(req, dqt_web_app_css, dqt_web_app_css_len,
                     "text/css; charset=utf-8");
        return;
    }
    if (strcmp(path, "/favicon.ico") == 0) {
        struct evbuffer *b = evbuffer_new();
        send_buf(req, 204, "image/x-icon", b);
        evbuffer_free(b);
        return;
    }
    if (strcmp(path, "/login") == 0) {
        if (!post)
            goto method;
        h_login(w, req);
        return;
    }
    int is_api = strncmp(path, "/api/", 5) == 0;
    if (!is_api && strcmp(path, "/metrics") != 0) {
        send_error(req, 404, "ENOTFOUND", "no such page");
        return;
    }
    if (!authorized(w, req)) {
        send_error(req, 401, "EAUTH",
                   "a token is required: Authorization: Bearer T, or log in");
        return;
    }
    if (strcmp(path, "/metrics") == 0) {
        if (!get)
            goto method;
        h_metrics(w, req);
        return;
    }
    if (post) {
        if (w->read_only) {
            send_error(req, 403, "EREADONLY", "the server is read-only");
            return;
        }
        const char *t = evhttp_find_header(evhttp_request_get_input_headers(req),
                                           "X-CSRF-Token");
        if (t == NULL || !secret_eq(w->csrf, t, strlen(t))) {
            send_error(req, 403, "ECSRF",
                       "missing or wrong X-CSRF-Token (see GET /api/session)");
            return;
        }
    }
    /* split /api/... into raw segments, decode each on its own */
    char *seg[W_MAX_SEGS] = {0};
    int ns = 0;
    const char *p = path + 5;
    int bad = 0;
    while (*p && !bad) {
        size_t l = strcspn(p, "/");
        if (ns == W_MAX_SEGS || l == 0) {
            bad = 1;
            break;
        }
        if ((seg[ns] = seg_decode(p, l)) == NULL)
            bad = 1;
        ns++;
        p += l;
        if (*p == '/') {
            p++;
            if (*p == '\0')
                bad = 1;
        }
    }
    if (bad) {
        send_error(req, 400, "EINVAL",
                   "malformed path (empty segment, bad %-escape, or NUL)");
        goto out;
    }
    if (ns == 1 && strcmp(seg[0], "session") == 0) {
        if (!get)
            goto method_free;
        h_session(w, req);
        goto out;
    }
    if (ns < 1 || strcmp(seg[0], "queues") != 0) {
        send_error(req, 404, "ENOTFOUND", "no such API path");
        goto out;
    }
    const char *q = ns > 1 ? seg[1] : NULL;
    if (q != NULL && strlen(q) > DQ_QUEUE_MAX) {
        send_error(req, 400, "EQUEUE", "queue name longer than 200 bytes");
        goto out;
    }
    if (ns == 1 && get)
        h_queues(w, req);
    else if (ns == 2 && get)
        h_queue(w, req, q);
    else if (ns == 3 && get && strcmp(seg[2], "jobs") == 0)
        h_jobs(w, req, q);
    else if (ns == 4 && get && strcmp(seg[2], "jobs") == 0)
        h_job(w, req, q, seg[3]);
    else if (ns == 5 && post && strcmp(seg[2], "jobs") == 0 &&
             strcmp(seg[4], "cancel") == 0)
        h_action(w, req, q, seg[3], A_CANCEL);
    else if (ns == 5 && post && strcmp(seg[2], "jobs") == 0 &&
             strcmp(seg[4], "promote") == 0)
        h_promote(w, req, q, seg[3]);
    else if (ns == 5 && post && strcmp(seg[2], "dead") == 0 &&
             strcmp(seg[4], "requeue") == 0)
        h_action(w, req, q, seg[3], A_REQUEUE);
    else if (ns == 5 && post && strcmp(seg[2], "dead") == 0 &&
             strcmp(seg[4], "purge") == 0)
        h_action(w, req, q, seg[3], A_PURGE);
    else if (ns == 4 && post && strcmp(seg[2], "dead") == 0 &&
             strcmp(seg[3], "requeue-all") == 0)
        h_action(w, req, q, NULL, A_REQUEUE_ALL);
    else if (ns == 4 && post && strcmp(seg[2], "dead") == 0 &&
             strcmp(seg[3], "purge") == 0)
        h_action(w, req, q, NULL, A_PURGE_ALL);
    else
        send_error(req, get || post ? 404 : 405, "ENOTFOUND",
                   "no such API path (or wrong method)");
out:
    for (int i = 0; i < ns; i++)
        free(seg[i]);
    return;
method_free:
    for (int i = 0; i < ns; i++)
        free(seg[i]);
method:
    send_error(req, 405, "EMETHOD", "wrong method for this path");
}

/* ---- Startup --------------------------------------------------------- */

/* Splits HOST:PORT / [V6]:PORT; 0 or -1.  *loopback set. */
static int parse_listen(const char *s, char *host, size_t hsz, int *port,
                        int *loopback) {
    const char *colon;
    size_t hl;
    if (s[0] == '[') {
        const char *e = strchr(s, ']');
        if (e == NULL || e[1] != ':')
            return -1;
        hl = (size_t)(e - s - 1);
        if (hl == 0 || hl >= hsz)
            return -1;
        memcpy(host, s + 1, hl);
        colon = e + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            return -1;
        hl = (size_t)(colon - s);
        if (hl == 0 || hl >= hsz || memchr(s, ':', hl) != NULL)
            return -1;
        memcpy(host, s, hl);
    }
    host[hl] = '\0';
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || errno || p < 0 || p > 65535)
        return -1;
    *port = (int)p;
    if (strcmp(host, "localhost") == 0)
        snprintf(host, hsz, "127.0.0.1");
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        *loopback = (ntohl(a4.s_addr) >> 24) == 127;
    else if (inet_pton(AF_INET6, host, &a6) == 1)
        *loopback = IN6_IS_ADDR_LOOPBACK(&a6) ||
                    (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    else
        return -1;
    return 0;
}

static void on_signal(evutil_socket_t fd, short ev, void *arg) {
    (void)fd;
    (void)ev;
    event_base_loopexit(arg, NULL);
}

int dqt_cmd_web(dqt_cli *g) {
    const char *listen = "127.0.0.1:8080", *token = getenv("DELAYQ_WEB_TOKEN");
    int read_only = 0, rc;
    if ((rc = dqt_npos_check(g, 0, 0, "")))
        return rc;
    for (int i = 0; i < g->a.nopts; i++) {
        const dqt_optval *o = &g->a.opts[i];
        if (o->id == DQT_O_LISTEN)
            listen = o->val;
        else if (o->id == DQT_O_TOKEN)
            token = o->val;
        else if (o->id == DQT_O_READONLY)
            read_only = 1;
    }
    if (token != NULL && *token == '\0')
        token = NULL;
    char host[128];
    int port, loopback = 0;
    if (parse_listen(listen, host, sizeof(host), &port, &loopback) != 0)
        return dqt_usage_error(g,
                               "--listen: '%s' is not HOST:PORT with a "
                               "numeric address (or localhost)",
                               listen);
    if (!loopback && token == NULL) {
        fprintf(stderr,
                "delayq web: refusing to listen on %s, which is not a "
                "loopback address, without a token: give --token or set "
                "DELAYQ_WEB_TOKEN\n",
                host);
        return DQT_EXIT_USAGE;
    }
    if (token != NULL) {
        for (const char *t = token; *t; t++)
            if ((unsigned char)*t <= 0x20 || (unsigned char)*t == 0x7F) {
                fprintf(stderr, "delayq web: the token must not contain "
                                "spaces or control characters\n");
                return DQT_EXIT_USAGE;
            }
    }
    int ex;
    dq_options *probe = dqt_client_options(g, &ex);
    if (probe == NULL)
        return ex;
    dq_options_free(probe);

    web w;
    memset(&w, 0, sizeof(w));
    w.g = g;
    w.token = token;
    w.read_only = read_only;
    w.check_host = token == NULL;
    w.ns = g->ns ? g->ns : "dq";
    if (random_hex(w.csrf) != 0 || random_hex(w.session) != 0) {
        fprintf(stderr, "delayq web: getrandom: %s\n", strerror(errno));
        return DQT_EXIT_FAILED;
    }
    rc = client(&w);
    if (rc == DQ_EURI) {
        fprintf(stderr, "delayq web: bad --uri: %s (EURI)\n", w.last_err);
        return DQT_EXIT_USAGE;
    }
    if (rc != 0)
        fprintf(stderr, "delayq web: warning: %s (%s); will try again on "
                        "each request\n",
                w.last_err, dq_errname(rc));

    signal(SIGPIPE, SIG_IGN);
    int ret = DQT_EXIT_FAILED;
    struct event_base *base = event_base_new();
    struct evhttp *http = base ? evhttp_new(base) : NULL;
    struct event *sig_int = NULL, *sig_term = NULL, *tick = NULL;
    if (http == NULL) {
        fprintf(stderr, "delayq web: cannot set up libevent\n");
        goto done;
    }
    w.base = base;
    evhttp_set_timeout(http, W_TIMEOUT_S);
    evhttp_set_max_headers_size(http, W_MAX_HEADERS);
    evhttp_set_max_body_size(http, W_MAX_BODY);
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
                                         EVHTTP_REQ_HEAD);
    evhttp_set_gencb(http, on_request, &w);
    struct evhttp_bound_socket *bs =
        evhttp_bind_socket_with_handle(http, host, (ev_uint16_t)port);
    if (bs == NULL) {
        fprintf(stderr, "delayq web: cannot listen on %s: %s\n", listen,
                strerror(errno));
        goto done;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int bound = port;
    if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss,
                    &sl) == 0)
        bound = ss.ss_family == AF_INET6
                    ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                    : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    printf("listening on http://%s%s%s:%d/\n", strchr(host, ':') ? "[" : "",
           host, strchr(host, ':') ? "]" : "", bound);
    fflush(stdout);
    sig_int = evsignal_new(base, SIGINT, on_signal, base);
    sig_term = evsignal_new(base, SIGTERM, on_signal, base);
    tick = event_new(base, -1, EV_PERSIST, on_tick, &w);
    struct timeval every = {W_SAMPLE_EVERY_MS / 1000 * 2, 0};
    if (sig_int == NULL || sig_term == NULL || tick == NULL ||
        evsignal_add(sig_int, NULL) || evsignal_add(sig_term, NULL) ||
        event_add(tick, &every)) {
        fprintf(stderr, "delayq web: cannot set up libevent\n");
        goto done;
    }
    event_base_dispatch(base);
    ret = DQT_EXIT_OKAY;
done:
    if (tick)
        event_free(tick);
    if (sig_int)
        event_free(sig_int);
    if (sig_term)
        event_free(sig_term);
    if (http)
        evhttp_free(http);
    if (base)
        event_base_free(base);
    for (int i = 0; i < w.nq; i++) {
        free(w.q[i]->name);
        free(w.q[i]);
    }
    dq_close(w.c);
    return ret;
}

#endif /* DQT_HAVE_EVHTTP */
