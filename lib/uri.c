/*
 * uri.c - Redis URI parser.
 */
#include <stdlib.h>
#include <string.h>

#include "uri.h"

/* The value of hex digit c, or -1. */
static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *dq__pct_decode(const char *s, size_t n, int *bad) {
    *bad = 0;
    char *out = malloc(n + 1), *o = out;
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            *o++ = s[i];
            continue;
        }
        int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
        int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            free(out);
            *bad = 1;
            return NULL;
        }
        *o++ = (char)(hi * 16 + lo);
        i += 2;
    }
    *o = '\0';
    return out;
}

/* Parses a decimal integer in s[0..n) within [lo, hi]; -1 if not one. */
static long parse_num(const char *s, size_t n, long lo, long hi) {
    if (n == 0 || n > 9)
        return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return (v < lo || v > hi) ? -1 : v;
}

/* Replaces *slot with s[0..n) percent-decoded; what names the part in the
 * error. */
static int set_decoded(char **slot, const char *s, size_t n, const char *what,
                       dq__err *err) {
    int bad;
    free(*slot);
    *slot = dq__pct_decode(s, n, &bad);
    if (*slot != NULL)
        return DQ_OK;
    if (bad)
        return dq__err_set(err, DQ_EURI, "URI: bad percent-escape in %s",
                          what);
    return dq__err_set(err, DQ_ENOMEM, "out of memory parsing the URI");
}

/* Parses the query string q ("k=v&k=v", after the '?'); db, user and
 * password are taken only where the URI has no other place for them
 * (unix://). */
static int parse_query(const char *q, dq__uri *u, int unix_keys,
                       dq__err *err) {
    int rc;
    while (q != NULL) {
        const char *p = q;
        q = strchr(p, '&');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (q != NULL)
            q++;
        const char *eq = memchr(p, '=', n);
        if (eq == NULL)
            return dq__err_set(err, DQ_EURI,
                              "URI: query parameter without '=': %.*s",
                              (int)(n > 64 ? 64 : n), p);
        size_t kl = (size_t)(eq - p), vl = n - kl - 1;
        if (kl == 10 && memcmp(p, "partitions", 10) == 0) {
            long v = parse_num(eq + 1, vl, 1, 1024);
            if (v < 0)
                return dq__err_set(err, DQ_EURI,
                                  "URI: partitions must be a number 1..1024");
            u->partitions = (int)v;
        } else if (kl == 6 && memcmp(p, "layout", 6) == 0) {
            if (vl == 7 && memcmp(eq + 1, "default", 7) == 0)
                u->layout = DQ_LAYOUT_DEFAULT;
            else if (vl == 7 && memcmp(eq + 1, "compact", 7) == 0)
                u->layout = DQ_LAYOUT_COMPACT;
            else if (vl == 12 && memcmp(eq + 1, "compact-push", 12) == 0)
                u->layout = DQ_LAYOUT_COMPACT_PUSH;
            else
                return dq__err_set(err, DQ_EURI,
                                  "URI: layout must be default, compact or "
                                  "compact-push");
        } else if (unix_keys && kl == 2 && memcmp(p, "db", 2) == 0) {
            long db = parse_num(eq + 1, vl, 0, 1000000);
            if (db < 0)
                return dq__err_set(err, DQ_EURI,
                                  "URI: db must be a number 0..1000000");
            u->db = (int)db;
        } else if (unix_keys && kl == 4 && memcmp(p, "user", 4) == 0) {
            if ((rc = set_decoded(&u->user, eq + 1, vl, "user", err)))
                return rc;
        } else if (unix_keys && kl == 8 && memcmp(p, "password", 8) == 0) {
            if ((rc = set_decoded(&u->password, eq + 1, vl, "password", err)))
                return rc;
        } else {
            return dq__err_set(err, DQ_EURI,
                              "URI: unknown query parameter '%.*s' (known: "
                              "%spartitions, layout)",
                              (int)(kl > 64 ? 64 : kl), p,
                              unix_keys ? "db, user, password, " : "");
        }
    }
    return DQ_OK;
}

/* unix://path[?db=N][&user=U][&password=P][&partitions=N] */
static int parse_unix(const char *s, dq__uri *u, dq__err *err) {
    u->kind = DQ_URI_UNIX;
    const char *q = strchr(s, '?');
    size_t plen = q ? (size_t)(q - s) : strlen(s);
    if (plen == 0)
        return dq__err_set(err, DQ_EURI, "URI: unix:// needs a socket path");
    if (plen > 107)
        return dq__err_set(err, DQ_EURI,
                          "URI: unix socket path longer than 107 bytes");
    int rc = set_decoded(&u->path, s, plen, "the socket path", err);
    if (rc != DQ_OK)
        return rc;
    return parse_query(q ? q + 1 : NULL, u, 1, err);
}

/* One host[:port] of s[0..n) (an IPv6 literal in brackets) into seed. */
static int parse_host(const char *s, size_t n, int defport, dq__seed *seed,
                      dq__err *err) {
    const char *host = s, *port = NULL;
    size_t host_len, port_len = 0;
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (close == NULL)
            return dq__err_set(err, DQ_EURI, "URI: unclosed '[' in host");
        host = s + 1;
        host_len = (size_t)(close - s - 1);
        if (close + 1 < s + n) {
            if (close[1] != ':')
                return dq__err_set(err, DQ_EURI,
                                  "URI: junk after ']' in host");
            port = close + 2;
            port_len = (size_t)(s + n - port);
        }
    } else {
        const char *colon = memchr(s, ':', n);
        host_len = colon ? (size_t)(colon - s) : n;
        if (colon != NULL) {
            port = colon + 1;
            port_len = (size_t)(s + n - port);
        }
    }
    if (host_len == 0)
        return dq__err_set(err, DQ_EURI, "URI: missing host");
    if (host_len > 255)
        return dq__err_set(err, DQ_EURI, "URI: host longer than 255 bytes");
    for (size_t i = 0; i < host_len; i++)
        if ((unsigned char)host[i] <= ' ' || host[i] == '%' ||
            host[i] == '?' || host[i] == '#' || host[i] == ',')
            return dq__err_set(err, DQ_EURI, "URI: bad character in host");
    seed->port = defport;
    if (port != NULL) {
        long p = parse_num(port, port_len, 1, 65535);
        if (p < 0)
            return dq__err_set(err, DQ_EURI,
                              "URI: port must be a number 1..65535");
        seed->port = (int)p;
    }
    if ((seed->host = malloc(host_len + 1)) == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory parsing the URI");
    memcpy(seed->host, host, host_len);
    seed->host[host_len] = '\0';
    return DQ_OK;
}

/* A database number s[0..n) into u->db. */
static int parse_db(const char *s, size_t n, dq__uri *u, dq__err *err) {
    long db = parse_num(s, n, 0, 1000000);
    if (db < 0)
        return dq__err_set(err, DQ_EURI,
                          "URI: database after '/' must be a number "
                          "0..1000000");
    u->db = (int)db;
    return DQ_OK;
}

/* What follows the hosts: "" or "/" (cluster), "/db" (one node),
 * "/master[/db]" (Sentinel). */
static int parse_path(const char *s, size_t n, dq__uri *u, dq__err *err) {
    if (n > 0 && s[0] == '/') {
        s++;
        n--;
    } else if (n > 0) {
        return dq__err_set(err, DQ_EURI, "URI: junk after the host");
    }
    if (u->kind == DQ_URI_SENTINEL) {
        const char *slash = memchr(s, '/', n);
        size_t ml = slash ? (size_t)(slash - s) : n;
        if (ml == 0)
            return dq__err_set(err, DQ_EURI,
                              "URI: redis+sentinel:// needs the primary's "
                              "name after the hosts: .../mymaster");
        int rc = set_decoded(&u->master, s, ml, "the primary's name", err);
        if (rc != DQ_OK || slash == NULL || slash + 1 == s + n)
            return rc;
        return parse_db(slash + 1, (size_t)(s + n - slash - 1), u, err);
    }
    if (n == 0)
        return DQ_OK;
    int rc = parse_db(s, n, u, err);
    if (rc == DQ_OK && u->kind == DQ_URI_CLUSTER && u->db != 0)
        return dq__err_set(err, DQ_EURI,
                          "URI: a Redis Cluster has only database 0");
    return rc;
}

/* [[user][:password]@]host[:port][,host[:port]...][/path][?query] */
static int parse_tcp(const char *s, dq__uri *u, dq__err *err) {
    int rc;
    const char *q = strchr(s, '?');
    size_t len = q ? (size_t)(q - s) : strlen(s);
    const char *at = NULL;
    for (size_t i = len; i-- > 0;)
        if (s[i] == '@') {
            at = s + i;
            break;
        }
    if (at != NULL) {
        const char *colon = memchr(s, ':', (size_t)(at - s));
        size_t ul = colon ? (size_t)(colon - s) : (size_t)(at - s);
        if (ul > 0 && (rc = set_decoded(&u->user, s, ul, "user", err)))
            return rc;
        if (colon != NULL &&
            (rc = set_decoded(&u->password, colon + 1,
                              (size_t)(at - colon - 1), "password", err)))
            return rc;
        len -= (size_t)(at + 1 - s);
        s = at + 1;
    }
    const char *slash = memchr(s, '/', len);
    size_t hl = slash ? (size_t)(slash - s) : len;
    int many = u->kind != DQ_URI_TCP;
    int defport = u->kind == DQ_URI_SENTINEL ? 26379 : 6379;
    for (size_t i = 0; i <= hl;) {
        const char *comma = many ? memchr(s + i, ',', hl - i) : NULL;
        size_t n = comma ? (size_t)(comma - (s + i)) : hl - i;
        if (u->nseeds == DQ_URI_MAX_SEEDS)
            return dq__err_set(err, DQ_EURI, "URI: more than %d hosts",
                              DQ_URI_MAX_SEEDS);
        if ((rc = parse_host(s + i, n, defport, &u->seeds[u->nseeds], err)))
            return rc;
        u->nseeds++;
        i += n + 1;
    }
    u->host = u->seeds[0].host;
    u->port = u->seeds[0].port;
    if ((rc = parse_path(s + hl, len - hl, u, err)) != DQ_OK)
        return rc;
    return parse_query(q ? q + 1 : NULL, u, 0, err);
}

int dq__uri_parse(const char *s, dq__uri *u, dq__err *err) {
    static const struct {
        const char *prefix;
        int kind, tls;
    } schemes[] = {
        {"redis://", DQ_URI_TCP, 0},
        {"rediss://", DQ_URI_TCP, 1},
        {"redis+cluster://", DQ_URI_CLUSTER, 0},
        {"rediss+cluster://", DQ_URI_CLUSTER, 1},
        {"redis+sentinel://", DQ_URI_SENTINEL, 0},
        {"rediss+sentinel://", DQ_URI_SENTINEL, 1},
    };
    memset(u, 0, sizeof(*u));
    if (s == NULL)
        return dq__err_set(err, DQ_ENULL, "uri is NULL");
    if (strlen(s) > 4096)
        return dq__err_set(err, DQ_EURI, "URI longer than 4096 bytes");
    int rc = DQ_OK, known = 0;
    if (strncmp(s, "unix://", 7) == 0) {
        known = 1;
        rc = parse_unix(s + 7, u, err);
    }
    for (size_t i = 0; !known && i < sizeof(schemes) / sizeof(schemes[0]);
         i++) {
        size_t n = strlen(schemes[i].prefix);
        if (strncmp(s, schemes[i].prefix, n) == 0) {
            known = 1;
            u->kind = schemes[i].kind;
            u->tls = schemes[i].tls;
            rc = parse_tcp(s + n, u, err);
        }
    }
    if (!known)
        rc = dq__err_set(err, DQ_EURI,
                        "URI must start with redis://, rediss://, unix://, "
                        "redis+cluster://, rediss+cluster://, "
                        "redis+sentinel:// or rediss+sentinel://");
    if (rc != DQ_OK)
        dq__uri_clear(u);
    return rc;
}

void dq__uri_node(const dq__uri *u, const char *host, int port, dq__uri *node) {
    memset(node, 0, sizeof(*node));
    node->kind = DQ_URI_TCP;
    node->tls = u->tls;
    node->host = (char *)host;
    node->port = port;
    node->db = u->db;
    node->user = u->user;
    node->password = u->password;
    node->partitions = u->partitions;
    node->layout = u->layout;
}

void dq__uri_clear(dq__uri *u) {
    for (int i = 0; i < u->nseeds; i++)
        free(u->seeds[i].host);
    free(u->master);
    free(u->path);
    free(u->user);
    free(u->password);
    memset(u, 0, sizeof(*u));
}
