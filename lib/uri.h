/*
 * uri.h - parsing of Redis URIs (a fuzz target: no I/O, no globals).
 */
#ifndef DQ_URI_H
#define DQ_URI_H

#include "internal.h"

enum dq__uri_kind { DQ_URI_TCP = 1, DQ_URI_UNIX = 2 };

typedef struct dq__uri {
    int kind;       /* DQ_URI_TCP or DQ_URI_UNIX */
    int tls;        /* 1 for rediss:// */
    char *host;     /* TCP host (brackets of an IPv6 literal removed) */
    int port;       /* TCP port, default 6379 */
    char *path;     /* unix socket path */
    int db;         /* database number, default 0 */
    char *user;     /* ACL user, NULL if none (percent-decoded) */
    char *password; /* password, NULL if none (percent-decoded) */
} dq__uri;

/*
 * Parses
 *   redis://[[user][:password]@]host[:port][/db]
 *   rediss://... (TLS)
 *   unix://path[?db=N][&user=U][&password=P]
 * into u (zeroed first).  Returns DQ_OK, or DQ_EURI / DQ_ENOMEM with err set;
 * on failure u holds nothing to free.
 */
int dq__uri_parse(const char *s, dq__uri *u, dq__err *err);
/* Frees what dq__uri_parse allocated; u may be zeroed or parsed. */
void dq__uri_clear(dq__uri *u);

#endif
