/*
 * uri.h - parsing of Redis URIs (a fuzz target: no I/O, no globals).
 */
#ifndef DQ_URI_H
#define DQ_URI_H

#include "internal.h"

enum dq__uri_kind {
    DQ_URI_TCP = 1,     /* one node */
    DQ_URI_UNIX = 2,    /* one node over a unix socket */
    DQ_URI_CLUSTER = 3, /* a Redis Cluster, reached through seeds */
    DQ_URI_SENTINEL = 4 /* the primary that seeds (Sentinels) name */
};

#define DQ_URI_MAX_SEEDS 16

typedef struct dq__seed {
    char *host;
    int port;
} dq__seed;

typedef struct dq__uri {
    int kind;       /* DQ_URI_* */
    int tls;        /* 1 for rediss:// */
    char *host;     /* TCP host (brackets of an IPv6 literal removed) */
    int port;       /* TCP port, default 6379 */
    char *path;     /* unix socket path */
    int db;         /* database number, default 0 */
    char *user;     /* ACL user, NULL if none (percent-decoded) */
    char *password; /* password, NULL if none (percent-decoded) */
    int nseeds;     /* cluster nodes / Sentinels listed (host, port: the
                       first of them) */
    dq__seed seeds[DQ_URI_MAX_SEEDS];
    char *master;   /* Sentinel: the monitored primary's name */
    int partitions; /* ?partitions=N, 0 when not given */
    int layout;     /* ?layout=default|compact|compact-push: DQ_LAYOUT_*
                       (0 unless given) */
} dq__uri;

/*
 * Parses
 *   redis://[[user][:password]@]host[:port][/db][?partitions=N]
 *   rediss://... (TLS)
 *   unix://path[?db=N][&user=U][&password=P][&partitions=N]
 *   redis+cluster://[[user][:password]@]h1[:p1][,h2[:p2]...][/][?partitions=N]
 *   redis+sentinel://[[user][:password]@]s1[:p1][,...]/master[/db][?...]
 *   rediss+cluster://, rediss+sentinel:// (TLS to every node)
 * (default port 6379, 26379 for Sentinels; user and password are the data
 * nodes' credentials, not the Sentinels')
 * into u (zeroed first).  Returns DQ_OK, or DQ_EURI / DQ_ENOMEM with err set;
 * on failure u holds nothing to free.
 */
int dq__uri_parse(const char *s, dq__uri *u, dq__err *err);
/* Frees what dq__uri_parse allocated; u may be zeroed or parsed. */
void dq__uri_clear(dq__uri *u);
/* Fills *node as the URI of one node host:port of u (same TLS, database
 * and credentials).  node borrows u's strings and host: it is not to be
 * cleared, and lives as long as they do. */
void dq__uri_node(const dq__uri *u, const char *host, int port, dq__uri *node);

/* Copies s[0..n) percent-decoded into a new string.  NULL on a bad escape
 * or an escaped NUL (*bad = 1) or on ENOMEM (*bad = 0).  Also decodes the
 * queue names in key names (dq_queues). */
char *dq__pct_decode(const char *s, size_t n, int *bad);

#endif
