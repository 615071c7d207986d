/*
 * tests/cluster_harness.c - Redis Cluster and Sentinel topologies for tests
 * (see cluster_harness.h).
 *
 * Data nodes are th_redis servers (harness.c); redis-cli and the sentinels
 * run through harness.c's process helpers (th_spawn, th_serve: fork/exec,
 * PDEATHSIG, wait for PING).  Linux only; builds with -std=c11 (defines
 * _GNU_SOURCE itself); hiredis 0.14 or 1.x.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "cluster_harness.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define THC_START_TIMEOUT_MS 30000  /* cluster / sentinel setup, all included */
#define THC_SETTLE_TIMEOUT_MS 30000 /* agreement after a migration */
#define THC_MIGRATE_TIMEOUT_MS 60000
#define THC_POLL_MS 50
#define THC_PORT_ATTEMPTS 5
#define THC_SENTINEL_MARK "/dq-sentinel-"

/* Config of every data node (cluster and sentinel setups): replicas sync at
 * once instead of after the default 5 s diskless-sync delay. */
#define THC_DATA_CONF "repl-diskless-sync-delay 0\n"

static void thc_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void thc_err(const char *fmt, ...)
{
    va_list ap;
    char buf[1024];

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "thc: %s\n", buf);
    fflush(stderr);
}

/* Appends to buf (of size n, holding a string); -1 on truncation. */
static int thc_cat(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int thc_cat(char *buf, size_t n, const char *fmt, ...)
{
    size_t used = strlen(buf);
    va_list ap;
    int len;

    if (used >= n)
        return -1;
    va_start(ap, fmt);
    len = vsnprintf(buf + used, n - used, fmt, ap);
    va_end(ap);
    return (len < 0 || (size_t)len >= n - used) ? -1 : 0;
}

/* ---- hiredis --------------------------------------------------------------- */

static redisContext *thc_connect_quiet(int port, char *why, size_t n)
{
    struct timeval tv = { 5, 0 };
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, tv);

    if (!ctx) {
        th_fmt(why, n, "connect to 127.0.0.1:%d: out of memory", port);
        return NULL;
    }
    if (ctx->err || redisSetTimeout(ctx, tv) != REDIS_OK) {
        th_fmt(why, n, "connect to 127.0.0.1:%d: %s", port, ctx->errstr);
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

redisContext *thc_connect(int port)
{
    char why[256];
    redisContext *ctx = thc_connect_quiet(port, why, sizeof why);

    if (!ctx)
        thc_err("%s", why);
    return ctx;
}

/*
 * Runs argv on the cached connection *ctxp to 127.0.0.1:port (connecting
 * first if needed; dropped after an I/O error).  Returns the reply, or NULL
 * with why set (an error reply is returned, not NULL).
 */
static redisReply *thc_argv(redisContext **ctxp, int port, int argc, const char **argv,
                            const size_t *lens, char *why, size_t n)
{
    redisReply *rep;

    if (!*ctxp && !(*ctxp = thc_connect_quiet(port, why, n)))
        return NULL;
    rep = redisCommandArgv(*ctxp, argc, argv, lens);
    if (!rep) {
        th_fmt(why, n, "%s on 127.0.0.1:%d: %s", argv[0], port,
                (*ctxp)->errstr[0] ? (*ctxp)->errstr : "no reply");
        redisFree(*ctxp);
        *ctxp = NULL;
    }
    return rep;
}

/* thc_argv with the command as space-separated words (no quoting). */
static redisReply *thc_cmd(redisContext **ctxp, int port, char *why, size_t n, const char *fmt,
                           ...) __attribute__((format(printf, 5, 6)));

static redisReply *thc_cmd(redisContext **ctxp, int port, char *why, size_t n, const char *fmt,
                           ...)
{
    char line[1024], *save = NULL, *w;
    const char *argv[32];
    int argc = 0;
    va_list ap;
    int len;

    va_start(ap, fmt);
    len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof line) {
        th_fmt(why, n, "command too long");
        return NULL;
    }
    while ((w = strtok_r(argc ? NULL : line, " ", &save)) != NULL) {
        if (argc == 32) {
            th_fmt(why, n, "command of more than 32 words");
            return NULL;
        }
        argv[argc++] = w;
    }
    if (argc == 0) {
        th_fmt(why, n, "empty command");
        return NULL;
    }
    return thc_argv(ctxp, port, argc, argv, NULL, why, n);
}

/* thc_cmd that expects +OK (or the given status); prints and returns -1 else. */
static int thc_cmd_ok(redisContext **ctxp, int port, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int thc_cmd_ok(redisContext **ctxp, int port, const char *what, const char *fmt, ...)
{
    char line[1024], why[512];
    redisReply *rep;
    va_list ap;
    int len, rc = -1;

    va_start(ap, fmt);
    len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof line) {
        thc_err("%s: command too long", what);
        return -1;
    }
    rep = thc_cmd(ctxp, port, why, sizeof why, "%s", line);
    if (!rep)
        thc_err("%s: %s", what, why);
    else if (rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "OK") == 0)
        rc = 0;
    else if (rep->type == REDIS_REPLY_ERROR || rep->type == REDIS_REPLY_STATUS ||
             rep->type == REDIS_REPLY_STRING)
        thc_err("%s: \"%s\" on 127.0.0.1:%d answered \"%s\"", what, line, port, rep->str);
    else
        thc_err("%s: \"%s\" on 127.0.0.1:%d: reply of hiredis type %d", what, line, port,
                rep->type);
    if (rep)
        freeReplyObject(rep);
    return rc;
}

/* Text reply (INFO, CLUSTER NODES...) or NULL with why set. */
static redisReply *thc_text(redisContext **ctxp, int port, char *why, size_t n, const char *cmd)
{
    redisReply *rep = thc_cmd(ctxp, port, why, n, "%s", cmd);

    if (rep && rep->type != REDIS_REPLY_STRING && rep->type != REDIS_REPLY_STATUS) {
        th_fmt(why, n, "%s on 127.0.0.1:%d: %s%s", cmd, port,
                rep->type == REDIS_REPLY_ERROR ? "error " : "unexpected reply type",
                rep->type == REDIS_REPLY_ERROR ? rep->str : "");
        freeReplyObject(rep);
        rep = NULL;
    }
    return rep;
}

/* Value of "field:" in INFO-style text into out; 0 if found. */
static int thc_info_field(const char *text, const char *field, char *out, size_t n)
{
    size_t flen = strlen(field);
    const char *p = text;

    while ((p = strstr(p, field)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[flen] == ':') {
            const char *v = p + flen + 1;
            size_t len = strcspn(v, "\r\n");

            if (len >= n)
                len = n - 1;
            memcpy(out, v, len);
            out[len] = '\0';
            return 0;
        }
        p += flen;
    }
    return -1;
}

/*
 * 1 if the replica on rport is in sync with the primary on pport: its link
 * is up with no sync in progress, the primary lists it as state=online and,
 * if want_offset, its replication offset has reached the primary's (read
 * first).  0 with why set otherwise.
 */
static int thc_replica_synced(redisContext **pctx, int pport, redisContext **rctx, int rport,
                              int want_offset, char *why, size_t n)
{
    char pat[48], v[64];
    const char *p;
    long long poff = 0;
    redisReply *rep;
    int ok = 1;

    rep = thc_text(pctx, pport, why, n, "INFO replication");
    if (!rep)
        return 0;
    snprintf(pat, sizeof pat, ",port=%d,state=", rport);
    p = strstr(rep->str, pat);
    if (!p || strncmp(p + strlen(pat), "online", 6) != 0) {
        th_fmt(why, n, "primary 127.0.0.1:%d does not list replica 127.0.0.1:%d as online", pport,
                rport);
        ok = 0;
    } else if (thc_info_field(rep->str, "master_repl_offset", v, sizeof v) == 0) {
        poff = atoll(v);
    }
    freeReplyObject(rep);
    if (!ok)
        return 0;
    rep = thc_text(rctx, rport, why, n, "INFO replication");
    if (!rep)
        return 0;
    if (thc_info_field(rep->str, "master_link_status", v, sizeof v) != 0 || strcmp(v, "up") != 0) {
        th_fmt(why, n, "replica 127.0.0.1:%d: master_link_status:%s", rport, v);
        ok = 0;
    } else if (thc_info_field(rep->str, "master_sync_in_progress", v, sizeof v) == 0 &&
               strcmp(v, "0") != 0) {
        th_fmt(why, n, "replica 127.0.0.1:%d: master_sync_in_progress:%s", rport, v);
        ok = 0;
    } else if (want_offset &&
               (thc_info_field(rep->str, "slave_repl_offset", v, sizeof v) != 0 ||
                atoll(v) < poff)) {
        th_fmt(why, n, "replica 127.0.0.1:%d: offset %s, primary's %lld", rport, v, poff);
        ok = 0;
    }
    freeReplyObject(rep);
    return ok;
}

/* ---- cluster: views ---------------------------------------------------------- */

static int thc_index_of_id(const thc_cluster *c, const char *id, size_t len)
{
    int i;

    for (i = 0; i < c->count; i++)
        if (strlen(c->nodes[i].id) == len && memcmp(c->nodes[i].id, id, len) == 0)
            return i;
    return -1;
}

static int thc_index_of_port(const thc_cluster *c, int port)
{
    int i;

    for (i = 0; i < c->count; i++)
        if (c->nodes[i].r.port == port)
            return i;
    return -1;
}

static int thc_live(const thc_cluster *c, int i)
{
    return i >= 0 && i < c->count && c->nodes[i].r.pid > 0;
}

static void thc_drop_admin(thc_node *n)
{
    if (n->admin)
        redisFree(n->admin);
    n->admin = NULL;
}

/* One node's view, from its CLUSTER NODES. */
typedef struct thc_view {
    short owner[THC_SLOTS]; /* node index, -1 unassigned */
    int self_role;          /* THC_PRIMARY / THC_REPLICA */
    int self_primary;       /* index, -1 */
    char failed[THC_MAX_NODES]; /* flagged fail / fail? in this view */
} thc_view;

/* 1 if the comma-separated flags hold name ("fail" is not "nofailover"). */
static int thc_flag(const char *flags, const char *name)
{
    size_t len = strlen(name);
    const char *p = flags;

    for (;;) {
        size_t w = strcspn(p, ",");

        if (w == len && memcmp(p, name, len) == 0)
            return 1;
        if (!p[w])
            return 0;
        p += w + 1;
    }
}

/* Parses node i's CLUSTER NODES into *v.  0, or -1 with why. */
static int thc_read_view(thc_cluster *c, int i, thc_view *v, char *why, size_t n)
{
    thc_node *nd = &c->nodes[i];
    redisReply *rep = thc_text(&nd->admin, nd->r.port, why, n, "CLUSTER NODES");
    char *line, *lsave = NULL;
    int have_self = 0;

    if (!rep)
        return -1;
    memset(v->owner, 0xff, sizeof v->owner); /* -1 */
    memset(v->failed, 0, sizeof v->failed);
    v->self_role = THC_PRIMARY;
    v->self_primary = -1;
    for (line = strtok_r(rep->str, "\n", &lsave); line; line = strtok_r(NULL, "\n", &lsave)) {
        char *tok[8], *save = NULL, *w, *slot;
        int k = 0, idx, self, master, fail;

        /* Not a for loop: one strtok_r too many would eat the first slot. */
        while (k < 8 && (w = strtok_r(k ? NULL : line, " \r", &save)) != NULL)
            tok[k++] = w;
        if (k < 8)
            continue;
        idx = thc_index_of_id(c, tok[0], strlen(tok[0]));
        if (idx < 0) {
            th_fmt(why, n, "node %d (127.0.0.1:%d) knows node %s which is not ours", i,
                    nd->r.port, tok[0]);
            freeReplyObject(rep);
            return -1;
        }
        self = thc_flag(tok[2], "myself");
        master = thc_flag(tok[2], "master");
        fail = thc_flag(tok[2], "fail") || thc_flag(tok[2], "fail?");
        v->failed[idx] = (char)fail;
        if (self) {
            have_self = 1;
            v->self_role = master ? THC_PRIMARY : THC_REPLICA;
            v->self_primary = strcmp(tok[3], "-") ? thc_index_of_id(c, tok[3], strlen(tok[3])) : -1;
        }
        for (slot = strtok_r(NULL, " \r", &save); slot; slot = strtok_r(NULL, " \r", &save)) {
            long a, b;
            char *end;

            if (slot[0] == '[')
                continue; /* [slot->-importing] / [slot-<-migrating] */
            a = strtol(slot, &end, 10);
            b = *end == '-' ? strtol(end + 1, &end, 10) : a;
            if (*end || a < 0 || b >= THC_SLOTS || a > b)
                continue;
            for (; a <= b; a++)
                v->owner[a] = (short)idx;
        }
    }
    freeReplyObject(rep);
    if (!have_self) {
        th_fmt(why, n, "node %d (127.0.0.1:%d): no myself line in CLUSTER NODES", i,
                nd->r.port);
        return -1;
    }
    return 0;
}

/*
 * One look at the whole cluster: 1 if thc_wait_ok's conditions hold (and
 * then agreed[] holds the owners and the roles are refreshed), 0 if not yet
 * (why says what), -1 on a hard error.
 */
static int thc_check(thc_cluster *c, short *agreed, char *why, size_t n)
{
    thc_view *v = malloc(sizeof *v);
    int roles[THC_MAX_NODES], prim[THC_MAX_NODES];
    int i, first = -1, s, ok = 1;

    if (!v) {
        th_fmt(why, n, "out of memory");
        return -1;
    }
    for (i = 0; i < c->count && ok; i++) {
        thc_node *nd = &c->nodes[i];
        redisReply *rep;
        char state[32];

        roles[i] = nd->role;
        prim[i] = nd->primary;
        if (!thc_live(c, i))
            continue;
        rep = thc_text(&nd->admin, nd->r.port, why, n, "CLUSTER INFO");
        if (!rep) {
            ok = 0;
            break;
        }
        if (thc_info_field(rep->str, "cluster_state", state, sizeof state) != 0 ||
            strcmp(state, "ok") != 0) {
            th_fmt(why, n, "node %d (127.0.0.1:%d) reports cluster_state:%s", i, nd->r.port,
                    state);
            ok = 0;
        }
        freeReplyObject(rep);
        if (!ok || thc_read_view(c, i, v, why, n) != 0) {
            ok = 0;
            break;
        }
        roles[i] = v->self_role;
        prim[i] = v->self_primary;
        for (s = 0; s < THC_SLOTS && ok; s++) {
            int o = v->owner[s];

            if (o < 0) {
                th_fmt(why, n, "node %d (127.0.0.1:%d) sees slot %d unassigned", i,
                        nd->r.port, s);
                ok = 0;
            } else if (!thc_live(c, o) || v->failed[o]) {
                th_fmt(why, n, "node %d (127.0.0.1:%d) sees slot %d owned by node %d, which "
                        "is %s", i, nd->r.port, s, o, thc_live(c, o) ? "flagged failing" : "dead");
                ok = 0;
            } else if (first >= 0 && agreed[s] != o) {
                th_fmt(why, n, "node %d sees slot %d owned by node %d, node %d by node %d", first,
                        s, agreed[s], i, o);
                ok = 0;
            } else if (first < 0) {
                agreed[s] = (short)o;
            }
        }
        if (first < 0)
            first = i;
        if (ok && v->self_role == THC_REPLICA) {
            thc_node *pn;

            if (!thc_live(c, v->self_primary)) {
                th_fmt(why, n, "node %d (127.0.0.1:%d) replicates node %d, which is not live", i,
                        nd->r.port, v->self_primary);
                ok = 0;
                break;
            }
            pn = &c->nodes[v->self_primary];
            if (!thc_replica_synced(&pn->admin, pn->r.port, &nd->admin, nd->r.port, 0, why, n))
                ok = 0;
        }
    }
    free(v);
    if (ok && first < 0) {
        th_fmt(why, n, "no live node");
        return -1;
    }
    if (ok) {
        for (i = 0; i < c->count; i++) {
            c->nodes[i].role = (thc_role)roles[i];
            c->nodes[i].primary = roles[i] == THC_REPLICA ? prim[i] : -1;
        }
    }
    return ok;
}

/* thc_wait_ok until an absolute deadline; agreed may be NULL. */
static int thc_wait_until(thc_cluster *c, int64_t deadline, short *agreed, const char *what)
{
    short *own = agreed ? NULL : malloc(THC_SLOTS * sizeof *own);
    char why[512] = "not checked";
    int rc;

    if (!agreed && !own) {
        thc_err("%s: out of memory", what);
        return -1;
    }
    for (;;) {
        rc = thc_check(c, agreed ? agreed : own, why, sizeof why);
        if (rc != 0 || th_mono_ms() >= deadline)
            break;
        th_sleep_ms(THC_POLL_MS);
    }
    free(own);
    if (rc == 1)
        return 0;
    thc_err("%s: %s: %s", what, rc < 0 ? "failed" : "cluster not ok in time", why);
    return -1;
}

int thc_wait_ok(thc_cluster *c, int64_t timeout_ms)
{
    if (!c || c->count <= 0) {
        thc_err("thc_wait_ok: no cluster");
        return -1;
    }
    return thc_wait_until(c, th_mono_ms() + timeout_ms, NULL, "thc_wait_ok");
}

int thc_refresh_roles(thc_cluster *c)
{
    thc_view *v;
    char why[512];
    int i;

    if (!c || c->count <= 0) {
        thc_err("thc_refresh_roles: no cluster");
        return -1;
    }
    if (!(v = malloc(sizeof *v))) {
        thc_err("thc_refresh_roles: out of memory");
        return -1;
    }
    for (i = 0; i < c->count; i++) {
        if (!thc_live(c, i))
            continue;
        if (thc_read_view(c, i, v, why, sizeof why) != 0) {
            thc_err("thc_refresh_roles: %s", why);
            free(v);
            return -1;
        }
        c->nodes[i].role = (thc_role)v->self_role;
        c->nodes[i].primary = v->self_role == THC_REPLICA ? v->self_primary : -1;
    }
    free(v);
    return 0;
}

/* ---- cluster: start / stop ------------------------------------------------------ */

/* Runs argv (argv[0] a path) with output to outpath, up to timeout_ms. */
static int thc_run_tool(char *const argv[], const char *outpath, int64_t timeout_ms)
{
    int status = 0;
    pid_t pid = th_spawn(argv, outpath);

    if (pid <= 0)
        return -1;
    if (!th_proc_wait(pid, timeout_ms > 0 ? timeout_ms : 1, &status)) {
        thc_err("%s did not finish within %lld ms: killing it", argv[0], (long long)timeout_ms);
        th_proc_stop(pid, SIGKILL);
        th_print_tail(outpath, 0, 30);
        return -1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status))
        thc_err("%s exited with status %d", argv[0], WEXITSTATUS(status));
    else
        thc_err("%s died of signal %d", argv[0], WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    th_print_tail(outpath, 0, 30);
    return -1;
}

/* Starts node i with its own cluster bus port and reads its id. */
static int thc_start_node(thc_node *nd, const char *extra_conf)
{
    size_t extra_len = extra_conf ? strlen(extra_conf) : 0;
    size_t len = 512 + extra_len;
    char *conf = malloc(len);
    char why[512];
    redisReply *rep;
    int attempt, rc = -1;

    if (!conf) {
        thc_err("out of memory");
        return -1;
    }
    for (attempt = 0; attempt < 3 && rc != 0; attempt++) {
        /* cluster-port: the default (port + 10000) overflows for high ports. */
        if ((nd->bus_port = th_free_port()) <= 0)
            break;
        snprintf(conf, len,
                 THC_DATA_CONF "cluster-enabled yes\ncluster-config-file nodes.conf\n"
                 "cluster-node-timeout 2000\ncluster-allow-replica-migration no\n"
                 "cluster-port %d\n%s",
                 nd->bus_port, extra_conf ? extra_conf : "");
        rc = th_redis_start(&nd->r, 1, conf);
    }
    free(conf);
    if (rc != 0) {
        thc_err("cannot start a cluster node");
        return -1;
    }
    nd->primary = -1;
    rep = thc_cmd(&nd->admin, nd->r.port, why, sizeof why, "CLUSTER MYID");
    if (!rep || rep->type != REDIS_REPLY_STRING || rep->len == 0 ||
        (size_t)rep->len >= sizeof nd->id) {
        thc_err("CLUSTER MYID on 127.0.0.1:%d: %s", nd->r.port,
                !rep ? why : rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
        if (rep)
            freeReplyObject(rep);
        return -1;
    }
    memcpy(nd->id, rep->str, rep->len);
    nd->id[rep->len] = '\0';
    freeReplyObject(rep);
    return 0;
}

static int thc_start_node_tls(thc_node *nd, const char *extra_conf, const char *cert_dir,
                              int *tls_port);

/* Starts the nodes (with a tls-port each when cert_dir is set, their
 * ports in tls_ports), creates the cluster over their plain ports with
 * redis-cli --cluster create and waits until it is ok; what names the
 * caller in messages.  0, or -1 with nothing left running. */
static int cluster_start(thc_cluster *c, int primaries, int replicas_per_primary,
                         const char *extra_conf, const char *cert_dir, int *tls_ports,
                         const char *what)
{
    char cli[PATH_MAX], outpath[512], reps[16];
    char *argv[THC_MAX_NODES + 8];
    char addrs[THC_MAX_NODES][32];
    int64_t deadline = th_mono_ms() + THC_START_TIMEOUT_MS;
    int i, argc = 0, nprim = 0, total;

    if (!c)
        return -1;
    memset(c, 0, sizeof *c);
    total = primaries * (1 + replicas_per_primary);
    if (primaries < 3 || replicas_per_primary < 0 || total > THC_MAX_NODES) {
        thc_err("%s: %d primaries with %d replicas each: need 3 primaries at "
                "least (redis-cli --cluster create) and %d nodes at most", what, primaries,
                replicas_per_primary, THC_MAX_NODES);
        return -1;
    }
    /* Both binaries first: a missing one fails at once, with one message. */
    if (th_find_bin("DQ_REDIS_SERVER", "redis-server", "/usr/bin/redis-server", cli,
                     sizeof cli) != 0 ||
        th_find_bin("DQ_REDIS_CLI", "redis-cli", "/usr/bin/redis-cli", cli, sizeof cli) != 0)
        return -1;
    for (i = 0; i < total; i++) {
        if (!cert_dir) {
            if (thc_start_node(&c->nodes[i], extra_conf) != 0)
                goto fail;
        } else if (thc_start_node_tls(&c->nodes[i], extra_conf, cert_dir, &tls_ports[i]) != 0) {
            thc_err("%s: node %d did not start with a tls-port (is the server built with "
                    "TLS? see its log above)", what, i);
            goto fail;
        }
        c->count = i + 1;
        snprintf(addrs[i], sizeof addrs[i], "127.0.0.1:%d", c->nodes[i].r.port);
    }

    /* redis-cli --cluster create: assigns slots and replicas, meets the
     * nodes and waits until they agree (it may wait forever: bounded here).
     * Always over the plain ports: with TLS, redis-cli then meets the nodes
     * on the bus ports they report, and the bus itself runs TLS
     * (tls-cluster). */
    snprintf(reps, sizeof reps, "%d", replicas_per_primary);
    argv[argc++] = cli;
    argv[argc++] = (char *)"--cluster";
    argv[argc++] = (char *)"create";
    for (i = 0; i < total; i++)
        argv[argc++] = addrs[i];
    argv[argc++] = (char *)"--cluster-replicas";
    argv[argc++] = reps;
    argv[argc++] = (char *)"--cluster-yes";
    argv[argc] = NULL;
    if (th_fmt(outpath, sizeof outpath, "%s/cluster-create.out", c->nodes[0].r.dir) != 0 ||
        thc_run_tool(argv, outpath, deadline - th_mono_ms()) != 0) {
        thc_err("%s --cluster create failed (its output is above)", cli);
        goto fail;
    }
    if (thc_wait_until(c, deadline, NULL, what) != 0)
        goto fail;
    for (i = 0; i < total; i++)
        nprim += c->nodes[i].role == THC_PRIMARY;
    if (nprim != primaries) {
        thc_err("%s: %d primaries after create, wanted %d", what, nprim, primaries);
        goto fail;
    }
    return 0;

fail:
    thc_cluster_stop(c);
    return -1;
}

int thc_cluster_start(thc_cluster *c, int primaries, int replicas_per_primary,
                      const char *extra_conf)
{
    return cluster_start(c, primaries, replicas_per_primary, extra_conf, NULL, NULL,
                         "thc_cluster_start");
}

void thc_cluster_stop(thc_cluster *c)
{
    int i;

    if (!c)
        return;
    for (i = 0; i < c->count && i < THC_MAX_NODES; i++) {
        thc_drop_admin(&c->nodes[i]);
        th_redis_stop(&c->nodes[i].r);
    }
    memset(c, 0, sizeof *c);
}

const char *thc_cluster_uri(const thc_cluster *c, char *buf, size_t n)
{
    int i, any = 0;

    if (!buf || n == 0)
        return buf;
    if (th_fmt(buf, n, "redis+cluster://") != 0) {
        buf[0] = '\0';
        return buf;
    }
    for (i = 0; c && i < c->count; i++) {
        if (!thc_live(c, i) || c->nodes[i].role != THC_PRIMARY)
            continue;
        if (thc_cat(buf, n, "%s127.0.0.1:%d", any ? "," : "", c->nodes[i].r.port) != 0) {
            thc_err("thc_cluster_uri: buffer of %zu bytes is too small", n);
            buf[0] = '\0';
            return buf;
        }
        any = 1;
    }
    return buf;
}

/* ---- slots ------------------------------------------------------------------------ */

/* CRC16-CCITT (XMODEM): poly 0x1021, init 0, no reflection. */
static unsigned thc_crc16(const unsigned char *p, size_t len)
{
    unsigned crc = 0;
    size_t i;
    int b;

    for (i = 0; i < len; i++) {
        crc ^= (unsigned)p[i] << 8;
        for (b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc;
}

int thc_slot_of_len(const char *key, size_t len)
{
    size_t lb, rb;

    /* The tag is what lies between the first '{' and the first '}' after it,
     * if that is not empty; else the whole key. */
    for (lb = 0; lb < len && key[lb] != '{'; lb++) {
    }
    if (lb < len) {
        for (rb = lb + 1; rb < len && key[rb] != '}'; rb++) {
        }
        if (rb < len && rb != lb + 1)
            return (int)(thc_crc16((const unsigned char *)key + lb + 1, rb - lb - 1) &
                         (THC_SLOTS - 1));
    }
    return (int)(thc_crc16((const unsigned char *)key, len) & (THC_SLOTS - 1));
}

int thc_slot_of(const char *key)
{
    return thc_slot_of_len(key, strlen(key));
}

int thc_owner(thc_cluster *c, int slot)
{
    char why[512] = "no live node";
    int i, k;

    if (!c || slot < 0 || slot >= THC_SLOTS) {
        thc_err("thc_owner: bad cluster or slot %d", slot);
        return -1;
    }
    for (i = 0; i < c->count; i++) {
        redisReply *rep;

        if (!thc_live(c, i))
            continue;
        rep = thc_cmd(&c->nodes[i].admin, c->nodes[i].r.port, why, sizeof why, "CLUSTER SLOTS");
        if (!rep)
            continue; /* try another node */
        if (rep->type != REDIS_REPLY_ARRAY) {
            th_fmt(why, sizeof why, "CLUSTER SLOTS on 127.0.0.1:%d: %s", c->nodes[i].r.port,
                    rep->type == REDIS_REPLY_ERROR ? rep->str : "not an array");
            freeReplyObject(rep);
            continue;
        }
        for (k = 0; k < (int)rep->elements; k++) {
            redisReply *e = rep->element[k], *m;

            if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
                e->element[0]->type != REDIS_REPLY_INTEGER ||
                e->element[1]->type != REDIS_REPLY_INTEGER)
                continue;
            if (slot < e->element[0]->integer || slot > e->element[1]->integer)
                continue;
            m = e->element[2];
            if (m->type == REDIS_REPLY_ARRAY && m->elements >= 2 &&
                m->element[1]->type == REDIS_REPLY_INTEGER) {
                int idx = thc_index_of_port(c, (int)m->element[1]->integer);

                freeReplyObject(rep);
                if (idx < 0)
                    thc_err("thc_owner: slot %d is owned by port %lld, not a node of ours",
                            slot, (long long)m->element[1]->integer);
                return idx;
            }
        }
        freeReplyObject(rep);
        thc_err("thc_owner: node %d (127.0.0.1:%d) sees slot %d unassigned", i,
                c->nodes[i].r.port, slot);
        return -1;
    }
    thc_err("thc_owner: %s", why);
    return -1;
}

/* ---- slot migration ---------------------------------------------------------------- */

/* MIGRATE of the keys in rep (a GETKEYSINSLOT reply) from src to dst. */
static int thc_migrate_keys(thc_cluster *c, int src, int dst, redisReply *keys)
{
    size_t n = keys->elements, i;
    const char **argv = calloc(n + 7, sizeof *argv);
    size_t *lens = calloc(n + 7, sizeof *lens);
    char port[16], why[512];
    redisReply *rep = NULL;
    int rc = -1;

    if (!argv || !lens) {
        thc_err("thc_migrate_slot: out of memory");
        goto out;
    }
    snprintf(port, sizeof port, "%d", c->nodes[dst].r.port);
    argv[0] = "MIGRATE";
    argv[1] = "127.0.0.1";
    argv[2] = port;
    argv[3] = "";
    argv[4] = "0";
    argv[5] = "5000";
    argv[6] = "KEYS";
    for (i = 0; i < 7; i++)
        lens[i] = strlen(argv[i]);
    for (i = 0; i < n; i++) {
        if (keys->element[i]->type != REDIS_REPLY_STRING) {
            thc_err("thc_migrate_slot: GETKEYSINSLOT returned a non-string");
            goto out;
        }
        argv[7 + i] = keys->element[i]->str;
        lens[7 + i] = keys->element[i]->len;
    }
    rep = thc_argv(&c->nodes[src].admin, c->nodes[src].r.port, (int)(n + 7), argv, lens, why,
                   sizeof why);
    if (!rep)
        thc_err("thc_migrate_slot: %s", why);
    else if (rep->type == REDIS_REPLY_STATUS &&
             (!strcmp(rep->str, "OK") || !strcmp(rep->str, "NOKEY")))
        rc = 0;
    else
        thc_err("thc_migrate_slot: MIGRATE of %zu keys from 127.0.0.1:%d to 127.0.0.1:%d: %s", n,
                c->nodes[src].r.port, c->nodes[dst].r.port,
                rep->type == REDIS_REPLY_ERROR || rep->type == REDIS_REPLY_STATUS ? rep->str
                                                                                   : "odd reply");
out:
    if (rep)
        freeReplyObject(rep);
    free(argv);
    free(lens);
    return rc;
}

int thc_migrate_slot(thc_cluster *c, int slot, int to_node, int keys_per_step,
                     void (*between)(void *), void *arg)
{
    short *agreed = NULL;
    int64_t deadline = th_mono_ms() + THC_MIGRATE_TIMEOUT_MS;
    int src, i, steps = 0, rc = -1;
    char why[512];

    if (!c || slot < 0 || slot >= THC_SLOTS || keys_per_step <= 0 || !thc_live(c, to_node)) {
        thc_err("thc_migrate_slot: bad arguments (slot %d, node %d, %d keys a step)", slot,
                to_node, keys_per_step);
        return -1;
    }
    if (!(agreed = malloc(THC_SLOTS * sizeof *agreed))) {
        thc_err("thc_migrate_slot: out of memory");
        return -1;
    }
    /* Start from a settled cluster: one agreed owner. */
    if (thc_wait_until(c, th_mono_ms() + 10000, agreed, "thc_migrate_slot (before)") != 0)
        goto out;
    src = agreed[slot];
    if (c->nodes[to_node].role != THC_PRIMARY) {
        thc_err("thc_migrate_slot: node %d is not a primary", to_node);
        goto out;
    }
    if (src == to_node) {
        thc_err("thc_migrate_slot: node %d already owns slot %d", to_node, slot);
        goto out;
    }
    if (thc_cmd_ok(&c->nodes[to_node].admin, c->nodes[to_node].r.port, "thc_migrate_slot",
                   "CLUSTER SETSLOT %d IMPORTING %s", slot, c->nodes[src].id) != 0 ||
        thc_cmd_ok(&c->nodes[src].admin, c->nodes[src].r.port, "thc_migrate_slot",
                   "CLUSTER SETSLOT %d MIGRATING %s", slot, c->nodes[to_node].id) != 0)
        goto out;

    for (;;) {
        redisReply *keys;
        int64_t t0;
        size_t nkeys;

        if (th_mono_ms() >= deadline) {
            thc_err("thc_migrate_slot: slot %d still has keys on node %d after %d steps and "
                    "%d ms", slot, src, steps, THC_MIGRATE_TIMEOUT_MS);
            goto out;
        }
        keys = thc_cmd(&c->nodes[src].admin, c->nodes[src].r.port, why, sizeof why,
                       "CLUSTER GETKEYSINSLOT %d %d", slot, keys_per_step);
        if (!keys || keys->type != REDIS_REPLY_ARRAY) {
            thc_err("thc_migrate_slot: GETKEYSINSLOT on node %d: %s", src,
                    !keys ? why : keys->type == REDIS_REPLY_ERROR ? keys->str : "odd reply");
            if (keys)
                freeReplyObject(keys);
            goto out;
        }
        nkeys = keys->elements;
        if (nkeys > 0 && thc_migrate_keys(c, src, to_node, keys) != 0) {
            freeReplyObject(keys);
            goto out;
        }
        freeReplyObject(keys);
        if (nkeys == 0 && steps > 0)
            break;
        steps++;
        if (between) {
            t0 = th_mono_ms();
            between(arg);
            deadline += th_mono_ms() - t0; /* the test's time is its own */
        }
    }

    /* Target first (it must own the slot before the source stops
     * redirecting with ASK), then the source, then everyone else. */
    if (thc_cmd_ok(&c->nodes[to_node].admin, c->nodes[to_node].r.port, "thc_migrate_slot",
                   "CLUSTER SETSLOT %d NODE %s", slot, c->nodes[to_node].id) != 0 ||
        thc_cmd_ok(&c->nodes[src].admin, c->nodes[src].r.port, "thc_migrate_slot",
                   "CLUSTER SETSLOT %d NODE %s", slot, c->nodes[to_node].id) != 0)
        goto out;
    for (i = 0; i < c->count; i++) {
        if (i == src || i == to_node || !thc_live(c, i) || c->nodes[i].role != THC_PRIMARY)
            continue;
        if (thc_cmd_ok(&c->nodes[i].admin, c->nodes[i].r.port, "thc_migrate_slot",
                       "CLUSTER SETSLOT %d NODE %s", slot, c->nodes[to_node].id) != 0)
            goto out;
    }
    if (thc_wait_until(c, th_mono_ms() + THC_SETTLE_TIMEOUT_MS, agreed,
                       "thc_migrate_slot (after)") != 0)
        goto out;
    if (agreed[slot] != to_node) {
        thc_err("thc_migrate_slot: slot %d is owned by node %d after the move, not node %d",
                slot, agreed[slot], to_node);
        goto out;
    }
    rc = 0;
out:
    free(agreed);
    return rc;
}

/* ---- failover ------------------------------------------------------------------------ */

int thc_kill_primary(thc_cluster *c, int node, int64_t timeout_ms)
{
    int64_t deadline = th_mono_ms() + timeout_ms;
    short *agreed;
    char why[512] = "not checked";
    int i, s, slot = -1, synced = 0, nrep = 0, rc = -1, st;

    if (!c || !thc_live(c, node)) {
        thc_err("thc_kill_primary: node %d is not a live node", node);
        return -1;
    }
    if (!(agreed = malloc(THC_SLOTS * sizeof *agreed))) {
        thc_err("thc_kill_primary: out of memory");
        return -1;
    }
    if (thc_wait_until(c, deadline, agreed, "thc_kill_primary (before)") != 0)
        goto out;
    if (c->nodes[node].role != THC_PRIMARY) {
        thc_err("thc_kill_primary: node %d is a replica", node);
        goto out;
    }
    for (s = 0; s < THC_SLOTS && slot < 0; s++)
        if (agreed[s] == node)
            slot = s;
    for (i = 0; i < c->count; i++)
        nrep += thc_live(c, i) && c->nodes[i].role == THC_REPLICA && c->nodes[i].primary == node;
    if (slot < 0 || nrep == 0) {
        thc_err("thc_kill_primary: node %d has %s: no replica would take over", node,
                slot < 0 ? "no slots" : "no replica");
        goto out;
    }
    /* Everything written before this call is on a replica: a test's data
     * survives the failover (what is written meanwhile may not). */
    while (!synced && th_mono_ms() < deadline) {
        for (i = 0; i < c->count && !synced; i++)
            if (thc_live(c, i) && c->nodes[i].role == THC_REPLICA && c->nodes[i].primary == node)
                synced = thc_replica_synced(&c->nodes[node].admin, c->nodes[node].r.port,
                                            &c->nodes[i].admin, c->nodes[i].r.port, 1, why,
                                            sizeof why);
        if (!synced)
            th_sleep_ms(THC_POLL_MS);
    }
    if (!synced) {
        thc_err("thc_kill_primary: no replica of node %d caught up in time: %s", node, why);
        goto out;
    }
    thc_drop_admin(&c->nodes[node]);
    th_redis_kill(&c->nodes[node].r);

    for (;;) {
        st = thc_check(c, agreed, why, sizeof why);
        if (st < 0)
            break;
        if (st == 1) {
            int np = agreed[slot];

            if (np != node && c->nodes[np].role == THC_PRIMARY) {
                rc = np;
                break;
            }
            th_fmt(why, sizeof why, "slot %d is still owned by node %d", slot, np);
        }
        if (th_mono_ms() >= deadline)
            break;
        th_sleep_ms(THC_POLL_MS);
    }
    if (rc < 0)
        thc_err("thc_kill_primary: no failover of node %d within %lld ms: %s", node,
                (long long)timeout_ms, why);
out:
    free(agreed);
    return rc;
}

/* ---- sentinel ------------------------------------------------------------------------ */

static int thc_sentinel_conf(const thc_sentinel_proc *p, const char *name, int mport, int quorum)
{
    char path[512];
    FILE *f;
    int bad;

    if (th_fmt(path, sizeof path, "%s/sentinel.conf", p->dir) != 0)
        return -1;
    f = fopen(path, "w");
    if (!f) {
        thc_err("cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    /* The dir has no quotes or spaces (mkdtemp under $TMPDIR or /tmp). */
    fprintf(f,
            "# written by tests/cluster_harness.c (and rewritten by the sentinel)\n"
            "daemonize no\nbind 127.0.0.1\nport %d\ndir \"%s\"\n"
            "logfile \"%s/sentinel.log\"\npidfile \"%s/sentinel.pid\"\n"
            "sentinel resolve-hostnames no\n"
            "sentinel monitor %s 127.0.0.1 %d %d\n"
            "sentinel down-after-milliseconds %s 1000\n"
            "sentinel failover-timeout %s 5000\n",
            p->port, p->dir, p->dir, p->dir, name, mport, quorum, name, name);
    bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        thc_err("cannot write %s", path);
        return -1;
    }
    return 0;
}

/* Makes p's dir, writes its config, runs the sentinel, waits for PING. */
static int thc_sentinel_launch(thc_sentinel_proc *p, const char *bin, const char *name,
                               int mport, int quorum)
{
    const char *tmp = getenv("TMPDIR");
    char tmpl[PATH_MAX], conf[512], out[512], logp[512];
    char *argv[4];
    int attempt;

    memset(p, 0, sizeof *p);
    if (!tmp || tmp[0] != '/' || strlen(tmp) > 128)
        tmp = "/tmp";
    if (th_fmt(tmpl, sizeof tmpl, "%s" THC_SENTINEL_MARK "XXXXXX", tmp) != 0 || !mkdtemp(tmpl) ||
        !realpath(tmpl, p->dir) || strpbrk(p->dir, "\" \\")) {
        thc_err("cannot create a sentinel temp dir under %s: %s", tmp, strerror(errno));
        return -1;
    }
    if (th_fmt(conf, sizeof conf, "%s/sentinel.conf", p->dir) != 0 ||
        th_fmt(out, sizeof out, "%s/sentinel.out", p->dir) != 0 ||
        th_fmt(logp, sizeof logp, "%s/sentinel.log", p->dir) != 0)
        return -1;
    argv[0] = (char *)bin;
    argv[1] = conf;
    argv[2] = (char *)"--sentinel";
    argv[3] = NULL;
    for (attempt = 0; attempt < THC_PORT_ATTEMPTS; attempt++) {
        int rc;

        if ((p->port = th_free_port()) <= 0 || thc_sentinel_conf(p, name, mport, quorum) != 0)
            return -1;
        rc = th_serve(argv, out, logp, NULL, p->port, &p->pid);
        if (rc <= 0)
            return rc;
        /* 1: the port was taken meanwhile: another one */
    }
    thc_err("sentinel: no free TCP port on 127.0.0.1 after %d attempts", THC_PORT_ATTEMPTS);
    return -1;
}

static redisContext **thc_sadmin(thc_sentinel *s, int sentinel)
{
    return &s->admin[THC_MAX_NODES + sentinel];
}

/* Port of the primary that sentinel k reports, or -1 (why set). */
static int thc_sentinel_master_port(thc_sentinel *s, int k, char *why, size_t n)
{
    redisReply *rep = thc_cmd(thc_sadmin(s, k), s->sentinels[k].port, why, n,
                              "SENTINEL GET-MASTER-ADDR-BY-NAME %s", s->master_name);
    int port = -1;

    if (!rep)
        return -1;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_STRING)
        port = atoi(rep->element[1]->str);
    else
        th_fmt(why, n, "sentinel %d: GET-MASTER-ADDR-BY-NAME %s: %s", k, s->master_name,
                rep->type == REDIS_REPLY_ERROR ? rep->str : "no address");
    freeReplyObject(rep);
    return port;
}

/* Number of entries of SENTINEL <what> <name> on sentinel k whose flags
 * contain none of the bad ones; -1 on error (why set). */
static int thc_sentinel_count(thc_sentinel *s, int k, const char *what, char *why, size_t n)
{
    redisReply *rep = thc_cmd(thc_sadmin(s, k), s->sentinels[k].port, why, n, "SENTINEL %s %s",
                              what, s->master_name);
    size_t i, j;
    int count = 0;

    if (!rep)
        return -1;
    if (rep->type != REDIS_REPLY_ARRAY) {
        th_fmt(why, n, "sentinel %d: SENTINEL %s: %s", k, what,
                rep->type == REDIS_REPLY_ERROR ? rep->str : "not an array");
        freeReplyObject(rep);
        return -1;
    }
    for (i = 0; i < rep->elements; i++) {
        redisReply *e = rep->element[i];
        int good = 1;

        for (j = 0; e->type == REDIS_REPLY_ARRAY && j + 1 < e->elements; j += 2) {
            if (e->element[j]->type == REDIS_REPLY_STRING && !strcmp(e->element[j]->str, "flags") &&
                e->element[j + 1]->type == REDIS_REPLY_STRING &&
                (strstr(e->element[j + 1]->str, "s_down") ||
                 strstr(e->element[j + 1]->str, "disconnected")))
                good = 0;
        }
        count += good;
    }
    freeReplyObject(rep);
    return count;
}

/* 1 when every live replica is in sync with data[primary], 0 if not yet. */
static int thc_replicas_online(thc_sentinel *s, int want_offset, char *why, size_t n)
{
    int i, p = s->primary;

    for (i = 0; i < s->ndata; i++) {
        if (i == p || s->data[i].pid <= 0)
            continue;
        if (!thc_replica_synced(&s->admin[p], s->data[p].port, &s->admin[i], s->data[i].port,
                                want_offset, why, n))
            return 0;
    }
    return 1;
}

int thc_sentinel_start(thc_sentinel *s, int replicas, int sentinels, const char *master_name)
{
    int64_t deadline = th_mono_ms() + THC_START_TIMEOUT_MS;
    char bin[PATH_MAX], conf[256], why[512] = "not checked";
    int i, k, ok = 0;

    if (!s)
        return -1;
    memset(s, 0, sizeof *s);
    if (replicas < 1 || replicas + 1 > THC_MAX_NODES || sentinels < 1 ||
        sentinels > THC_MAX_SENTINELS || !master_name || !master_name[0] ||
        strlen(master_name) >= sizeof s->master_name ||
        strspn(master_name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
            strlen(master_name)) {
        thc_err("thc_sentinel_start: bad arguments (%d replicas: 1..%d, %d sentinels: 1..%d, "
                "name of [A-Za-z0-9._-])", replicas, THC_MAX_NODES - 1, sentinels,
                THC_MAX_SENTINELS);
        return -1;
    }
    memcpy(s->master_name, master_name, strlen(master_name) + 1);
    if (th_find_bin("DQ_REDIS_SERVER", "redis-server", "/usr/bin/redis-server", bin,
                     sizeof bin) != 0)
        return -1;

    if (th_redis_start(&s->data[0], 1, THC_DATA_CONF) != 0)
        goto fail;
    s->ndata = 1;
    s->primary = 0;
    snprintf(conf, sizeof conf, THC_DATA_CONF "replicaof 127.0.0.1 %d\n", s->data[0].port);
    for (i = 1; i <= replicas; i++) {
        if (th_redis_start(&s->data[i], 1, conf) != 0)
            goto fail;
        s->ndata = i + 1;
    }
    /* Online before the sentinels start: their first INFO of the primary
     * then lists the replicas (the next comes 10 s later). */
    while (!(ok = thc_replicas_online(s, 0, why, sizeof why)) && th_mono_ms() < deadline)
        th_sleep_ms(THC_POLL_MS);
    if (!ok) {
        thc_err("thc_sentinel_start: replicas not in sync in time: %s", why);
        goto fail;
    }

    for (k = 0; k < sentinels; k++) {
        if (thc_sentinel_launch(&s->sentinels[k], bin, s->master_name, s->data[0].port,
                                sentinels >= 2 ? 2 : 1) != 0)
            goto fail;
        s->nsentinels = k + 1;
    }
    for (;;) {
        ok = 1;
        for (k = 0; k < sentinels && ok; k++) {
            int port = thc_sentinel_master_port(s, k, why, sizeof why), nr, ns;

            if (port != s->data[0].port) {
                if (port > 0)
                    th_fmt(why, sizeof why, "sentinel %d reports primary port %d", k, port);
                ok = 0;
            } else if ((nr = thc_sentinel_count(s, k, "REPLICAS", why, sizeof why)) != replicas) {
                if (nr >= 0)
                    th_fmt(why, sizeof why, "sentinel %d knows %d good replicas of %d", k, nr,
                            replicas);
                ok = 0;
            } else if ((ns = thc_sentinel_count(s, k, "SENTINELS", why, sizeof why)) !=
                       sentinels - 1) {
                if (ns >= 0)
                    th_fmt(why, sizeof why, "sentinel %d knows %d other sentinels of %d", k, ns,
                            sentinels - 1);
                ok = 0;
            }
        }
        if (ok || th_mono_ms() >= deadline)
            break;
        th_sleep_ms(THC_POLL_MS);
    }
    if (!ok) {
        thc_err("thc_sentinel_start: sentinels not ready within %d ms: %s", THC_START_TIMEOUT_MS,
                why);
        goto fail;
    }
    return 0;

fail:
    thc_sentinel_stop(s);
    return -1;
}

void thc_sentinel_stop(thc_sentinel *s)
{
    int i;

    if (!s)
        return;
    for (i = 0; i < THC_MAX_NODES + THC_MAX_SENTINELS; i++) {
        if (s->admin[i])
            redisFree(s->admin[i]);
        s->admin[i] = NULL;
    }
    for (i = 0; i < s->nsentinels && i < THC_MAX_SENTINELS; i++) {
        th_proc_stop(s->sentinels[i].pid, SIGTERM);
        s->sentinels[i].pid = 0;
        if (s->sentinels[i].dir[0])
            th_rm_tree(s->sentinels[i].dir, THC_SENTINEL_MARK);
    }
    for (i = 0; i < s->ndata && i < THC_MAX_NODES; i++)
        th_redis_stop(&s->data[i]);
    memset(s, 0, sizeof *s);
}

const char *thc_sentinel_uri(const thc_sentinel *s, char *buf, size_t n)
{
    int k;

    if (!buf || n == 0)
        return buf;
    if (th_fmt(buf, n, "redis+sentinel://") != 0)
        goto small;
    for (k = 0; s && k < s->nsentinels; k++)
        if (thc_cat(buf, n, "%s127.0.0.1:%d", k ? "," : "", s->sentinels[k].port) != 0)
            goto small;
    if (thc_cat(buf, n, "/%s", s ? s->master_name : "") != 0)
        goto small;
    return buf;
small:
    thc_err("thc_sentinel_uri: buffer of %zu bytes is too small", n);
    buf[0] = '\0';
    return buf;
}

/* 1 if data node i answers ROLE with "master". */
static int thc_is_master(thc_sentinel *s, int i, char *why, size_t n)
{
    redisReply *rep = thc_cmd(&s->admin[i], s->data[i].port, why, n, "ROLE");
    int yes;

    if (!rep)
        return 0;
    yes = rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
          rep->element[0]->type == REDIS_REPLY_STRING && !strcmp(rep->element[0]->str, "master");
    if (!yes)
        th_fmt(why, n, "data node %d (127.0.0.1:%d) answers ROLE %s", i, s->data[i].port,
                rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
                        rep->element[0]->type == REDIS_REPLY_STRING
                    ? rep->element[0]->str
                    : "?");
    freeReplyObject(rep);
    return yes;
}

int thc_sentinel_failover(thc_sentinel *s, int by_kill, int64_t timeout_ms)
{
    int64_t deadline = th_mono_ms() + timeout_ms;
    char why[512] = "not checked";
    int old, oldport, k, i;

    if (!s || s->nsentinels <= 0 || s->primary < 0 || s->primary >= s->ndata ||
        s->data[s->primary].pid <= 0) {
        thc_err("thc_sentinel_failover: no live primary");
        return -1;
    }
    old = s->primary;
    oldport = s->data[old].port;
    if (by_kill) {
        /* The replicas have all that was written before this call. */
        while (!thc_replicas_online(s, 1, why, sizeof why)) {
            if (th_mono_ms() >= deadline) {
                thc_err("thc_sentinel_failover: replicas not in sync: %s", why);
                return -1;
            }
            th_sleep_ms(THC_POLL_MS);
        }
        if (s->admin[old])
            redisFree(s->admin[old]);
        s->admin[old] = NULL;
        th_redis_kill(&s->data[old]);
    } else {
        /* A sentinel may not yet see a replica it can promote: retry. */
        for (;;) {
            redisReply *rep = thc_cmd(thc_sadmin(s, 0), s->sentinels[0].port, why, sizeof why,
                                      "SENTINEL FAILOVER %s", s->master_name);
            int done = rep && rep->type == REDIS_REPLY_STATUS && !strcmp(rep->str, "OK");

            if (rep && !done)
                th_fmt(why, sizeof why, "SENTINEL FAILOVER %s: %s", s->master_name,
                        rep->type == REDIS_REPLY_ERROR ? rep->str : "odd reply");
            if (rep)
                freeReplyObject(rep);
            if (done)
                break;
            if (th_mono_ms() >= deadline) {
                thc_err("thc_sentinel_failover: %s", why);
                return -1;
            }
            th_sleep_ms(200);
        }
    }
    for (;;) {
        int port = -1, agree = 1;

        for (k = 0; k < s->nsentinels && agree; k++) {
            int p;

            if (s->sentinels[k].pid <= 0)
                continue;
            p = thc_sentinel_master_port(s, k, why, sizeof why);
            if (p <= 0) {
                agree = 0;
            } else if (p == oldport) {
                th_fmt(why, sizeof why, "sentinel %d still reports the old primary", k);
                agree = 0;
            } else if (port > 0 && p != port) {
                th_fmt(why, sizeof why, "sentinels report primaries on ports %d and %d", port, p);
                agree = 0;
            }
            port = p;
        }
        if (agree && port > 0) {
            for (i = 0; i < s->ndata && s->data[i].port != port; i++) {
            }
            if (i == s->ndata) {
                thc_err("thc_sentinel_failover: sentinels report port %d, not a node of ours",
                        port);
                return -1;
            }
            if (thc_is_master(s, i, why, sizeof why)) {
                s->primary = i;
                return i;
            }
        }
        if (th_mono_ms() >= deadline)
            break;
        th_sleep_ms(THC_POLL_MS);
    }
    thc_err("thc_sentinel_failover: no new primary within %lld ms: %s", (long long)timeout_ms,
            why);
    return -1;
}

/* ---- cluster over TLS ------------------------------------------------------------ */

/* thc_start_node with a free tls-port of its own (retried if taken). */
static int thc_start_node_tls(thc_node *nd, const char *extra_conf, const char *cert_dir,
                              int *tls_port)
{
    size_t len = 1024 + 3 * strlen(cert_dir) + (extra_conf ? strlen(extra_conf) : 0);
    char *conf = malloc(len);
    int attempt, rc = -1;

    if (!conf) {
        thc_err("out of memory");
        return -1;
    }
    for (attempt = 0; attempt < THC_PORT_ATTEMPTS && rc != 0; attempt++) {
        if ((*tls_port = th_free_port()) <= 0)
            break;
        snprintf(conf, len,
                 "tls-port %d\ntls-cert-file %s/server.crt\ntls-key-file %s/server.key\n"
                 "tls-ca-cert-file %s/ca.crt\ntls-cluster yes\ntls-replication yes\n%s",
                 *tls_port, cert_dir, cert_dir, cert_dir, extra_conf ? extra_conf : "");
        rc = thc_start_node(nd, conf);
        /* With tls-replication a replica announces its tls-port to its
         * primary: announce the plain one, which thc_wait_ok looks for in
         * the primary's INFO replication. */
        if (rc == 0)
            rc = thc_cmd_ok(&nd->admin, nd->r.port, "thc_cluster_start_tls",
                            "CONFIG SET replica-announce-port %d", nd->r.port);
        if (rc != 0) {
            thc_drop_admin(nd);
            th_redis_stop(&nd->r);
        }
    }
    free(conf);
    if (rc != 0)
        *tls_port = 0;
    return rc;
}

int thc_cluster_start_tls(thc_cluster *c, int primaries, int replicas_per_primary,
                          const char *extra_conf, const char *cert_dir, int *tls_ports)
{
    if (!cert_dir || !cert_dir[0] || strpbrk(cert_dir, "\" \\\n") || !tls_ports) {
        thc_err("thc_cluster_start_tls: a cert dir without quotes, spaces or backslashes "
                "and tls_ports are needed");
        return -1;
    }
    for (int i = 0; i < THC_MAX_NODES; i++)
        tls_ports[i] = 0;
    if (cluster_start(c, primaries, replicas_per_primary, extra_conf, cert_dir, tls_ports,
                      "thc_cluster_start_tls") == 0)
        return 0;
    for (int i = 0; i < THC_MAX_NODES; i++)
        tls_ports[i] = 0;
    return -1;
}

const char *thc_cluster_tls_uri(const thc_cluster *c, const int *tls_ports, char *buf, size_t n)
{
    int i, any = 0;

    if (!buf || n == 0)
        return buf;
    if (th_fmt(buf, n, "rediss+cluster://") != 0) {
        buf[0] = '\0';
        return buf;
    }
    for (i = 0; c && tls_ports && i < c->count; i++) {
        if (!thc_live(c, i) || c->nodes[i].role != THC_PRIMARY || tls_ports[i] <= 0)
            continue;
        if (thc_cat(buf, n, "%s127.0.0.1:%d", any ? "," : "", tls_ports[i]) != 0) {
            thc_err("thc_cluster_tls_uri: buffer of %zu bytes is too small", n);
            buf[0] = '\0';
            return buf;
        }
        any = 1;
    }
    return buf;
}

int thc_primaries(const thc_cluster *c, int *out)
{
    int n = 0;
    for (int i = 0; i < c->count; i++)
        if (c->nodes[i].r.pid > 0 && c->nodes[i].role == THC_PRIMARY)
            out[n++] = i;
    return n;
}

void thc_part_tag(const char *q, int p, char *buf, size_t n)
{
    if (p < 0)
        snprintf(buf, n, "%s", q);
    else
        snprintf(buf, n, "%s#%d", q, p);
}
