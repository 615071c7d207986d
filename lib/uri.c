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

/* Copies s[0..n) percent-decoded into a new string.  NULL on a bad escape
 * or an escaped NUL (*bad = 1) or on ENOMEM (*bad = 0). */
static char *pct_decode(const char *s, size_t n, int *bad) {
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
    *slot = pct_decode(s, n, &bad);
    if (*slot != NULL)
        return DQ_OK;
    if (bad)
        return dq__err_set(err, DQ_EURI, "URI: bad percent-escape in %s",
                          what);
    return dq__err_set(err, DQ_ENOMEM, "out of memory parsing the URI");
}

/* unix://path[?db=N][&user=U][&password=P] */
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
    while (q != NULL) {
        const char *p = q + 1;
        q = strchr(p, '&');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        if (eq == NULL)
            return dq__err_set(err, DQ_EURI,
                              "URI: query parameter without '=': %.*s",
                              (int)(n > 64 ? 64 : n), p);
        size_t kl = (size_t)(eq - p), vl = n - kl - 1;
        if (kl == 2 && memcmp(p, "db", 2) == 0) {
            long db = parse_num(eq + 1, vl, 0, 1000000);
            if (db < 0)
                return dq__err_set(err, DQ_EURI,
                                  "URI: db must be a number 0..1000000");
            u->db = (int)db;
        } else if (kl == 4 && memcmp(p, "user", 4) == 0) {
            if ((rc = set_decoded(&u->user, eq + 1, vl, "user", err)))
                return rc;
        } else if (kl == 8 && memcmp(p, "password", 8) == 0) {
            if ((rc = set_decoded(&u->password, eq + 1, vl, "password", err)))
                return rc;
        } else {
            return dq__err_set(err, DQ_EURI,
                              "URI: unknown query parameter '%.*s' (known: "
                              "db, user, password)",
                              (int)(kl > 64 ? 64 : kl), p);
        }
    }
    return DQ_OK;
}

/* [[user][:password]@]host[:port][/db] */
static int parse_tcp(const char *s, dq__uri *u, dq__err *err) {
    u->kind = DQ_URI_TCP;
    u->port = 6379;
    int rc;
    const char *at = strrchr(s, '@');
    if (at != NULL) {
        const char *colon = memchr(s, ':', (size_t)(at - s));
        size_t ul = colon ? (size_t)(colon - s) : (size_t)(at - s);
        if (ul > 0 && (rc = set_decoded(&u->user, s, ul, "user", err)))
            return rc;
        if (colon != NULL &&
            (rc = set_decoded(&u->password, colon + 1,
                              (size_t)(at - colon - 1), "password", err)))
            return rc;
        s = at + 1;
    }
    const char *slash = strchr(s, '/');
    size_t hl = slash ? (size_t)(slash - s) : strlen(s);
    const char *host = s, *port = NULL;
    size_t host_len, port_len = 0;
    if (hl > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', hl);
        if (close == NULL)
            return dq__err_set(err, DQ_EURI, "URI: unclosed '[' in host");
        host = s + 1;
        host_len = (size_t)(close - s - 1);
        if (close + 1 < s + hl) {
            if (close[1] != ':')
                return dq__err_set(err, DQ_EURI,
                                  "URI: junk after ']' in host");
            port = close + 2;
            port_len = (size_t)(s + hl - port);
        }
    } else {
        const char *colon = memchr(s, ':', hl);
        host_len = colon ? (size_t)(colon - s) : hl;
        if (colon != NULL) {
            port = colon + 1;
            port_len = (size_t)(s + hl - port);
        }
    }
    if (host_len == 0)
        return dq__err_set(err, DQ_EURI, "URI: missing host");
    if (host_len > 255)
        return dq__err_set(err, DQ_EURI, "URI: host longer than 255 bytes");
    for (size_t i = 0; i < host_len; i++)
        if ((unsigned char)host[i] <= ' ' || host[i] == '%' ||
            host[i] == '?' || host[i] == '#')
            return dq__err_set(err, DQ_EURI, "URI: bad character in host");
    if ((u->host = malloc(host_len + 1)) == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory parsing the URI");
    memcpy(u->host, host, host_len);
    u->host[host_len] = '\0';
    if (port != NULL) {
        long p = parse_num(port, port_len, 1, 65535);
        if (p < 0)
            return dq__err_set(err, DQ_EURI,
                              "URI: port must be a number 1..65535");
        u->port = (int)p;
    }
    if (slash != NULL && slash[1] != '\0') {
        long db = parse_num(slash + 1, strlen(slash + 1), 0, 1000000);
        if (db < 0)
            return dq__err_set(err, DQ_EURI,
                              "URI: database after '/' must be a number "
                              "0..1000000");
        u->db = (int)db;
    }
    return DQ_OK;
}

int dq__uri_parse(const char *s, dq__uri *u, dq__err *err) {
    memset(u, 0, sizeof(*u));
    if (s == NULL)
        return dq__err_set(err, DQ_ENULL, "uri is NULL");
    if (strlen(s) > 4096)
        return dq__err_set(err, DQ_EURI, "URI longer than 4096 bytes");
    int rc;
    if (strncmp(s, "redis://", 8) == 0) {
        rc = parse_tcp(s + 8, u, err);
    } else if (strncmp(s, "rediss://", 9) == 0) {
        u->tls = 1;
        rc = parse_tcp(s + 9, u, err);
    } else if (strncmp(s, "unix://", 7) == 0) {
        rc = parse_unix(s + 7, u, err);
    } else {
        rc = dq__err_set(err, DQ_EURI,
                        "URI must start with redis://, rediss:// or unix://");
    }
    if (rc != DQ_OK)
        dq__uri_clear(u);
    return rc;
}

void dq__uri_clear(dq__uri *u) {
    free(u->host);
    free(u->path);
    free(u->user);
    free(u->password);
    memset(u, 0, sizeof(*u));
}
