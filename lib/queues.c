/*
 * queues.c - the queues of a namespace (dq_queues): one SCAN cursor per
 * node that owns slots, every key name read back into its queue's name.
 *
 * A queue's keys are "<ns>:{<name>}:<suffix>", or "<ns>:{<name>#<p>}:..."
 * for partition p, the name percent-encoded (ops.c builds them; which
 * suffixes there are it says in dq__key_suffix_known).  The names are
 * kept in the key's encoded form while listing (an index by hash, so a
 * queue's many keys cost one lookup each) and decoded once per queue.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "queues.h"
#include "uri.h"

/* One queue found. */
typedef struct qent {
    char *name;   /* decoded */
    char *enc;    /* as in its keys (while listing) */
    size_t elen;
    int parted;   /* keys of a partition were seen */
} qent;

struct dq_queue_list {
    qent *q;
    size_t n, cap;
    size_t *index; /* while listing: q index + 1 by hash of enc, 0 empty */
    size_t icap;   /* a power of two, above 2 n */
    size_t max;
    int complete;
};

/* ---- Key names ---- */

/* 1 if s[0..n) is made of what an encoded name holds (ops.c). */
static int enc_chars(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!dq__name_plain((unsigned char)s[i]) && s[i] != '%')
            return 0;
    return n > 0;
}

/* 1 if s[0..n) is a decimal number (a partition). */
static int digits(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return n > 0;
}

/* The encoded name in key (klen bytes) if it is a queue's key of
 * namespace ns (nl bytes): *enc, *elen, and *parted for a partition's.
 * Returns 1 then, else 0. */
static int split_key(const char *ns, size_t nl, const char *key, size_t klen,
                     const char **enc, size_t *elen, int *parted) {
    if (klen < nl + 2 || memcmp(key, ns, nl) != 0 ||
        memcmp(key + nl, ":{", 2) != 0)
        return 0;
    const char *tag = key + nl + 2, *end = key + klen;
    const char *close = memchr(tag, '}', (size_t)(end - tag));
    if (close == NULL || end - close < 2 || close[1] != ':' ||
        !dq__key_suffix_known(close + 2, (size_t)(end - close - 2)))
        return 0;
    const char *hash = memchr(tag, '#', (size_t)(close - tag));
    const char *e = hash != NULL ? hash : close;
    if (hash != NULL && !digits(hash + 1, (size_t)(close - hash - 1)))
        return 0;
    if (!enc_chars(tag, (size_t)(e - tag)))
        return 0;
    *enc = tag;
    *elen = (size_t)(e - tag);
    *parted = hash != NULL;
    return 1;
}

/* ---- The list and its index ---- */

/* The index slot of enc: the one holding it, or the empty one where it
 * goes. */
static size_t *index_at(dq_queue_list *l, const char *enc, size_t elen) {
    size_t m = l->icap - 1;
    for (size_t i = dq__fnv1a(enc, elen) & m;; i = (i + 1) & m) {
        size_t *s = &l->index[i];
        if (*s == 0 || (l->q[*s - 1].elen == elen &&
                        memcmp(l->q[*s - 1].enc, enc, elen) == 0))
            return s;
    }
}

/* Room for one more queue (entries and index).  DQ_OK or DQ_ENOMEM. */
static int grow(dq_queue_list *l) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        qent *q = realloc(l->q, cap * sizeof(*q));
        if (q == NULL)
            return DQ_ENOMEM;
        l->q = q;
        l->cap = cap;
    }
    if ((l->n + 1) * 2 < l->icap)
        return DQ_OK;
    size_t icap = l->icap ? l->icap * 2 : 256;
    size_t *old = l->index;
    if ((l->index = calloc(icap, sizeof(size_t))) == NULL) {
        l->index = old;
        return DQ_ENOMEM;
    }
    l->icap = icap;
    for (size_t i = 0; i < l->n; i++)
        *index_at(l, l->q[i].enc, l->q[i].elen) = i + 1;
    free(old);
    return DQ_OK;
}

/* Notes the queue of one key: new ones are decoded and added while the
 * list has room.  DQ_OK or DQ_ENOMEM. */
static int take(dq_queue_list *l, const char *enc, size_t elen, int parted) {
    if (l->icap > 0) {
        size_t *s = index_at(l, enc, elen);
        if (*s != 0) {
            l->q[*s - 1].parted |= parted;
            return DQ_OK;
        }
    }
    if (l->n == l->max) {
        l->complete = 0;
        return DQ_OK;
    }
    int bad;
    char *name = dq__pct_decode(enc, elen, &bad);
    if (name == NULL)
        return bad ? DQ_OK : DQ_ENOMEM; /* a bad escape: no queue's key */
    int rc = strlen(name) > DQ_QUEUE_MAX ? DQ_EQUEUE : grow(l);
    if (rc != DQ_OK) {
        free(name);
        return rc == DQ_EQUEUE ? DQ_OK : rc; /* too long: no queue's */
    }
    qent *e = &l->q[l->n];
    if ((e->enc = malloc(elen)) == NULL) {
        free(name);
        return DQ_ENOMEM;
    }
    memcpy(e->enc, enc, elen);
    e->elen = elen;
    e->name = name;
    e->parted = parted;
    *index_at(l, enc, elen) = ++l->n;
    return DQ_OK;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const qent *)a)->name, ((const qent *)b)->name);
}

/* Drops what only the listing needed and sorts by name. */
static void finish(dq_queue_list *l) {
    for (size_t i = 0; i < l->n; i++) {
        free(l->q[i].enc);
        l->q[i].enc = NULL;
    }
    free(l->index);
    l->index = NULL;
    l->icap = 0;
    if (l->n > 1)
        qsort(l->q, l->n, sizeof(*l->q), by_name);
}

void dq_queue_list_free(dq_queue_list *l) {
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->q[i].name);
        free(l->q[i].enc);
    }
    free(l->q);
    free(l->index);
    free(l);
}

size_t dq_queue_list_count(const dq_queue_list *l) {
    return l == NULL ? 0 : l->n;
}

const char *dq_queue_list_name(const dq_queue_list *l, size_t i) {
    return l == NULL || i >= l->n ? NULL : l->q[i].name;
}

int dq_queue_list_partitioned(const dq_queue_list *l, size_t i) {
    return l == NULL || i >= l->n ? 0 : l->q[i].parted;
}

int dq_queue_list_complete(const dq_queue_list *l) {
    return l == NULL ? 0 : l->complete;
}

/* ---- SCAN ---- */

/* Takes the keys of one SCAN reply's page; DQ_OK or DQ_ENOMEM. */
static int take_page(dq_queue_list *l, const char *ns, const dq__reply *keys) {
    size_t nl = strlen(ns);
    for (size_t i = 0; i < dq__reply_len(keys); i++) {
        size_t klen, elen;
        const char *key = dq__reply_str(dq__reply_at(keys, i), &klen), *enc;
        int parted, rc;
        if (key != NULL &&
            split_key(ns, nl, key, klen, &enc, &elen, &parted) &&
            (rc = take(l, enc, elen, parted)) != DQ_OK)
            return rc;
    }
    return DQ_OK;
}

/* One SCAN call at cursor (replaced by the next one) on conn. */
static int scan_once(dq__conn *conn, const char *ns, char cursor[32],
                     dq_queue_list *l, dq__err *err) {
    char pattern[80], count[16];
    /* A namespace holds no glob character ([A-Za-z0-9._:-]). */
    snprintf(pattern, sizeof(pattern), "%s:{*}:*", ns);
    snprintf(count, sizeof(count), "%d", DQ_QUEUES_SCAN_COUNT);
    const char *argv[6] = {"SCAN", cursor, "MATCH", pattern, "COUNT", count};
    dq__reply *r = NULL;
    int rc = dq__conn_call(conn, 6, argv, NULL, &r, err);
    if (rc != DQ_OK)
        return rc;
    size_t clen;
    const char *next = dq__reply_type(r) == DQ_R_ARRAY &&
                               dq__reply_len(r) == 2 &&
                               dq__reply_type(dq__reply_at(r, 1)) == DQ_R_ARRAY
                           ? dq__reply_str(dq__reply_at(r, 0), &clen)
                           : NULL;
    if (dq__reply_type(r) == DQ_R_ERROR)
        rc = dq__reply_error(r, "SCAN", err);
    else if (next == NULL || clen == 0 || clen >= 32)
        rc = dq__err_set(err, DQ_EPROTO, "SCAN: unexpected reply");
    else if ((rc = take_page(l, ns, dq__reply_at(r, 1))) != DQ_OK)
        dq__err_set(err, rc, "out of memory");
    else
        snprintf(cursor, 32, "%.*s", (int)clen, next);
    dq__reply_free(r);
    return rc;
}

/* 1 once the list is full and a queue was left out: no use going on. */
static int overflowed(const dq_queue_list *l) {
    return l->n == l->max && !l->complete;
}

/* Runs one SCAN cursor on conn, within DQ_QUEUES_ROUNDS calls. */
static int scan_node(dq__conn *conn, const char *ns, dq_queue_list *l,
                     dq__err *err) {
    char cursor[32] = "0";
    for (int round = 0; round < DQ_QUEUES_ROUNDS; round++) {
        int rc = scan_once(conn, ns, cursor, l, err);
        if (rc != DQ_OK || strcmp(cursor, "0") == 0 || overflowed(l))
            return rc;
    }
    l->complete = 0;
    return DQ_OK;
}

/* Scans every node of L that owns slots (the one node, the primary). */
static int scan_all(dq__links *L, const char *ns, dq_queue_list *l,
                    dq__err *err) {
    int slots[DQ_MAX_NODES];
    dq__conn *conn;
    int rc = dq__links_get(L, 0, &conn, err); /* learns the slot map */
    int n = 0;
    while (rc == DQ_OK && n < DQ_MAX_NODES &&
           (slots[n] = dq__links_node_slot(L, n)) >= 0)
        n++;
    for (int i = 0; rc == DQ_OK && i < n && !overflowed(l); i++)
        if ((rc = dq__links_get(L, slots[i], &conn, err)) == DQ_OK)
            rc = scan_node(conn, ns, l, err);
    return rc;
}

int dq__queues_scan(dq__links *L, const char *ns, int max,
                    dq_queue_list **out, dq__err *err) {
    *out = NULL;
    dq_queue_list *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return dq__err_set(err, DQ_ENOMEM, "out of memory");
    l->max = (size_t)max;
    l->complete = 1;
    int rc = scan_all(L, ns, l, err);
    if (rc != DQ_OK) {
        if (dq__links_routed(L))
            dq__links_stale(L); /* a node may have failed over */
        dq_queue_list_free(l);
        return rc;
    }
    finish(l);
    *out = l;
    return DQ_OK;
}
