/*
 * route.c - the Redis Cluster slot map (see route.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "route.h"

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as the Cluster
 * specification defines the key hash; table-driven. */
static unsigned short crc16(const char *buf, size_t len) {
    static unsigned short table[256];
    static int ready;
    if (!ready) {
        /* Computing it twice from two threads writes the same values. */
        for (int i = 0; i < 256; i++) {
            unsigned short c = (unsigned short)(i << 8);
            for (int b = 0; b < 8; b++)
                c = (unsigned short)((c & 0x8000) ? (c << 1) ^ 0x1021 : c << 1);
            table[i] = c;
        }
        ready = 1;
    }
    unsigned short crc = 0;
    for (size_t i = 0; i < len; i++)
        crc = (unsigned short)((crc << 8) ^
                               table[((crc >> 8) ^ (unsigned char)buf[i]) & 0xff]);
    return crc;
}

int dq__key_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close != NULL && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & (DQ_SLOTS - 1);
    }
    return crc16(key, len) & (DQ_SLOTS - 1);
}

void dq__slotmap_init(dq__slotmap *m, int tls) {
    free(m->nodes);
    memset(m, 0, sizeof(*m));
    m->tls = tls;
    for (int i = 0; i < DQ_SLOTS; i++)
        m->owner[i] = -1;
}

void dq__slotmap_clear(dq__slotmap *m) {
    free(m->nodes);
    m->nodes = NULL;
    m->nnodes = m->cap = 0;
}

int dq__slotmap_node(dq__slotmap *m, const char *host, int port) {
    for (int i = 0; i < m->nnodes; i++)
        if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0)
            return i;
    if (m->nnodes >= DQ_MAX_NODES || strlen(host) >= sizeof(m->nodes[0].host))
        return -1;
    if (m->nnodes == m->cap) {
        int cap = m->cap ? m->cap * 2 : 8;
        dq__node_addr *n = realloc(m->nodes, sizeof(*n) * (size_t)cap);
        if (n == NULL)
            return -1;
        m->nodes = n;
        m->cap = cap;
    }
    dq__node_addr *a = &m->nodes[m->nnodes];
    strcpy(a->host, host);
    a->port = port;
    m->version++;
    return m->nnodes++;
}

int dq__slotmap_moved(dq__slotmap *m, int slot, const char *host, int port) {
    int i = dq__slotmap_node(m, host, port);
    if (i < 0)
        return DQ_ENOMEM;
    if (slot >= 0 && slot < DQ_SLOTS && m->owner[slot] != i) {
        m->owner[slot] = (short)i;
        m->version++;
    }
    return DQ_OK;
}

int dq__slotmap_covered(const dq__slotmap *m) {
    int n = 0;
    for (int i = 0; i < DQ_SLOTS; i++)
        n += m->owner[i] >= 0;
    return n;
}

/* ---- Parsing the listings ---- */

/* An integer given as an integer or a decimal string; -1 if neither. */
static long long num(const dq__reply *r) {
    if (r == NULL)
        return -1;
    if (dq__reply_type(r) == DQ_R_INTEGER)
        return dq__reply_int(r);
    if (dq__reply_type(r) != DQ_R_STRING && dq__reply_type(r) != DQ_R_STATUS)
        return -1;
    size_t len;
    const char *s = dq__reply_str(r, &len);
    if (len == 0 || len > 9)
        return -1;
    long long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* 1 if r is a string equal to s. */
static int is_str(const dq__reply *r, const char *s) {
    if (r == NULL || (dq__reply_type(r) != DQ_R_STRING &&
                      dq__reply_type(r) != DQ_R_STATUS))
        return 0;
    size_t len;
    const char *v = dq__reply_str(r, &len);
    return len == strlen(s) && memcmp(v, s, len) == 0;
}

/* Copies a usable host out of r into buf: the asked node's host stands in
 * for "" and "?" (an endpoint the node does not know). */
static void host_of(const dq__reply *r, const char *asked, char *buf,
                    size_t size) {
    size_t len = 0;
    const char *s = NULL;
    if (r != NULL && (dq__reply_type(r) == DQ_R_STRING ||
                      dq__reply_type(r) == DQ_R_STATUS))
        s = dq__reply_str(r, &len);
    if (s == NULL || len == 0 || len >= size || (len == 1 && s[0] == '?')) {
        s = asked;
        len = strlen(asked);
        if (len >= size)
            len = size - 1;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
}

/* The value after key in a flat key/value array (RESP2 map), or NULL. */
static const dq__reply *field(const dq__reply *r, const char *key) {
    if (dq__reply_type(r) != DQ_R_ARRAY)
        return NULL;
    size_t n = dq__reply_len(r);
    for (size_t i = 0; i + 1 < n; i += 2)
        if (is_str(dq__reply_at(r, i), key))
            return dq__reply_at(r, i + 1);
    return NULL;
}

/* Sets slots lo..hi of owner (a scratch table) to host:port. */
static int assign(dq__slotmap *m, short *owner, long long lo, long long hi,
                  const char *host, long long port) {
    if (lo < 0 || hi >= DQ_SLOTS || lo > hi || port <= 0 || port > 65535)
        return DQ_EREDIS;
    int i = dq__slotmap_node(m, host, (int)port);
    if (i < 0)
        return DQ_ENOMEM;
    for (long long s = lo; s <= hi; s++)
        owner[s] = (short)i;
    return DQ_OK;
}

/* One shard of CLUSTER SHARDS: its primary's address and slot ranges. */
static int load_shard(dq__slotmap *m, short *owner, const dq__reply *shard,
                      const char *asked) {
    const dq__reply *slots = field(shard, "slots");
    const dq__reply *nodes = field(shard, "nodes");
    if (slots == NULL || nodes == NULL || dq__reply_type(slots) != DQ_R_ARRAY ||
        dq__reply_type(nodes) != DQ_R_ARRAY)
        return DQ_EREDIS;
    if (dq__reply_len(slots) == 0)
        return DQ_OK; /* a shard without slots (an empty primary) */
    /* The primary: the one that is online (Valkey 8 lists a failed old
     * primary in its shard next to - and before - the promoted replica),
     * else the first one listed. */
    const dq__reply *primary = NULL;
    for (size_t i = 0; i < dq__reply_len(nodes); i++) {
        const dq__reply *node = dq__reply_at(nodes, i);
        if (!is_str(field(node, "role"), "master"))
            continue;
        int online = is_str(field(node, "health"), "online");
        if (primary == NULL || online)
            primary = node;
        if (online)
            break;
    }
    if (primary != NULL) {
        char host[256];
        const dq__reply *ep = field(primary, "endpoint");
        host_of(ep ? ep : field(primary, "ip"), asked, host, sizeof(host));
        long long port = num(field(primary, m->tls ? "tls-port" : "port"));
        if (port <= 0)
            port = num(field(primary, "port"));
        for (size_t j = 0; j + 1 < dq__reply_len(slots); j += 2) {
            int rc = assign(m, owner, num(dq__reply_at(slots, j)),
                            num(dq__reply_at(slots, j + 1)), host, port);
            if (rc != DQ_OK)
                return rc;
        }
    }
    return DQ_OK; /* no primary listed: its slots stay unknown */
}

/* One range of CLUSTER SLOTS: start, end, [host, port, id...], replicas. */
static int load_range(dq__slotmap *m, short *owner, const dq__reply *e,
                      const char *asked) {
    if (dq__reply_type(e) != DQ_R_ARRAY || dq__reply_len(e) < 3)
        return DQ_EREDIS;
    const dq__reply *p = dq__reply_at(e, 2);
    if (dq__reply_type(p) != DQ_R_ARRAY || dq__reply_len(p) < 2)
        return DQ_EREDIS;
    char host[256];
    host_of(dq__reply_at(p, 0), asked, host, sizeof(host));
    return assign(m, owner, num(dq__reply_at(e, 0)), num(dq__reply_at(e, 1)),
                  host, num(dq__reply_at(p, 1)));
}

int dq__slotmap_load(dq__slotmap *m, const dq__reply *r, int shards,
                     const char *asked_host, dq__err *err) {
    const char *what = shards ? "CLUSTER SHARDS" : "CLUSTER SLOTS";
    if (dq__reply_type(r) == DQ_R_ERROR)
        return dq__reply_error(r, what, err);
    if (dq__reply_type(r) != DQ_R_ARRAY)
        return dq__err_set(err, DQ_EREDIS, "%s: unexpected reply", what);
    short *owner = malloc(sizeof(short) * DQ_SLOTS);
    if (owner == NULL)
        return dq__err_set(err, DQ_ENOMEM, "%s: out of memory", what);
    for (int i = 0; i < DQ_SLOTS; i++)
        owner[i] = -1;
    int rc = DQ_OK;
    for (size_t i = 0; rc == DQ_OK && i < dq__reply_len(r); i++)
        rc = shards ? load_shard(m, owner, dq__reply_at(r, i), asked_host)
                    : load_range(m, owner, dq__reply_at(r, i), asked_host);
    if (rc == DQ_OK) {
        if (memcmp(owner, m->owner, sizeof(m->owner)) != 0) {
            memcpy(m->owner, owner, sizeof(m->owner));
            m->version++;
        }
    } else if (rc == DQ_ENOMEM) {
        dq__err_set(err, DQ_ENOMEM, "%s: out of memory (or more than %d nodes)",
                   what, DQ_MAX_NODES);
    } else {
        dq__err_set(err, DQ_EREDIS, "%s: malformed reply", what);
    }
    free(owner);
    return rc;
}
