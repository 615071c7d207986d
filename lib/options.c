/*
 * options.c - the dq_options set: defaults, setters, copies.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void dq__options_defaults(dq_options *o) {
    memset(o, 0, sizeof(*o));
    o->connect_timeout_ms = 2000;
    o->command_timeout_ms = 5000;
    o->max_payload = DQ_DEFAULT_MAX_PAYLOAD;
    o->max_attempts = 0;
    o->wait_cap_ms = 1000;
    o->wait_replicas = 0;
    o->wait_replicas_timeout_ms = 1000;
    o->done_ttl_ms = 300000;
    o->lease_ms = 30000;
    o->layout = -1;
}

dq_options *dq_options_new(void) {
    dq_options *o = malloc(sizeof(*o));
    if (o != NULL)
        dq__options_defaults(o);
    return o;
}

void dq__options_clear(dq_options *o) {
    free(o->ns);
    free(o->user);
    free(o->password);
    free(o->tls_ca);
    free(o->tls_cert);
    free(o->tls_key);
    free(o->tls_sni);
    o->ns = o->user = o->password = NULL;
    o->tls_ca = o->tls_cert = o->tls_key = o->tls_sni = NULL;
}

void dq_options_free(dq_options *opts) {
    if (opts == NULL)
        return;
    dq__options_clear(opts);
    free(opts);
}

int dq_options_set_int(dq_options *o, int option, int64_t v) {
    if (o == NULL)
        return DQ_ENULL;
    int64_t lo = 0, hi = 0;
    int64_t *slot = NULL;
    switch (option) {
    case DQ_OPT_CONNECT_TIMEOUT_MS:
        slot = &o->connect_timeout_ms, hi = 3600000;
        break;
    case DQ_OPT_COMMAND_TIMEOUT_MS:
        slot = &o->command_timeout_ms, hi = 3600000;
        break;
    case DQ_OPT_MAX_PAYLOAD:
        slot = &o->max_payload, hi = 512LL * 1024 * 1024;
        break;
    case DQ_OPT_MAX_ATTEMPTS:
        slot = &o->max_attempts, hi = 1000000;
        break;
    case DQ_OPT_WAIT_CAP_MS:
        slot = &o->wait_cap_ms, lo = 10, hi = 60000;
        break;
    case DQ_OPT_WAIT_REPLICAS:
        slot = &o->wait_replicas, hi = 1000;
        break;
    case DQ_OPT_WAIT_REPLICAS_TIMEOUT_MS:
        slot = &o->wait_replicas_timeout_ms, hi = 3600000;
        break;
    case DQ_OPT_DONE_TTL_MS:
        slot = &o->done_ttl_ms, hi = DQ_LEASE_MAX;
        break;
    case DQ_OPT_PARTITIONS:
        slot = &o->partitions, hi = 1024;
        break;
    case DQ_OPT_COUNTERS:
        slot = &o->counters, hi = 1;
        break;
    case DQ_OPT_LEASE_MS:
        slot = &o->lease_ms, lo = DQ_LEASE_MIN, hi = DQ_LEASE_MAX;
        break;
    case DQ_OPT_LAYOUT:
        slot = &o->layout, hi = DQ_LAYOUT_COMPACT_PUSH;
        break;
    case DQ_OPT_DURABLE:
        slot = &o->durable, hi = 1;
        break;
    default:
        return DQ_EINVAL;
    }
    if (v < lo || v > hi)
        return DQ_EINVAL;
    *slot = v;
    return DQ_OK;
}

int dq__options_check(const dq_options *o, dq__err *err) {
    if (o->durable && o->wait_replicas < 1)
        return dq__err_set(err, DQ_EINVAL,
                          "DQ_OPT_DURABLE needs DQ_OPT_WAIT_REPLICAS of 1 "
                          "or more (every replica Sentinel may promote)");
    return DQ_OK;
}

/* A namespace is 1..64 bytes of [A-Za-z0-9._:-]: it prefixes every key and
 * must never contain the hash-tag braces. */
static int ns_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
              ch == ':' || ch == '-'))
            return 0;
    }
    return 1;
}

int dq_options_set_str(dq_options *o, int option, const char *v) {
    if (o == NULL)
        return DQ_ENULL;
    char **slot;
    switch (option) {
    case DQ_OPT_NAMESPACE:
        if (v != NULL && !ns_valid(v))
            return DQ_EINVAL;
        slot = &o->ns;
        break;
    case DQ_OPT_USERNAME:
        slot = &o->user;
        break;
    case DQ_OPT_PASSWORD:
        slot = &o->password;
        break;
    case DQ_OPT_TLS_CA_FILE:
        slot = &o->tls_ca;
        break;
    case DQ_OPT_TLS_CERT_FILE:
        slot = &o->tls_cert;
        break;
    case DQ_OPT_TLS_KEY_FILE:
        slot = &o->tls_key;
        break;
    case DQ_OPT_TLS_SERVER_NAME:
        slot = &o->tls_sni;
        break;
    default:
        return DQ_EINVAL;
    }
    char *copy = NULL;
    if (v != NULL && (copy = strdup(v)) == NULL)
        return DQ_ENOMEM;
    free(*slot);
    *slot = copy;
    return DQ_OK;
}

/* Copies src into *dst (NULL stays NULL); -1, with *dst NULL, when out of
 * memory. */
static int dup_str(char **dst, const char *src) {
    *dst = NULL;
    if (src == NULL)
        return 0;
    *dst = strdup(src);
    return *dst == NULL ? -1 : 0;
}

int dq__options_copy(dq_options *dst, const dq_options *src) {
    if (src == NULL) {
        dq__options_defaults(dst);
        return DQ_OK;
    }
    *dst = *src;
    if (dup_str(&dst->ns, src->ns) || dup_str(&dst->user, src->user) ||
        dup_str(&dst->password, src->password) ||
        dup_str(&dst->tls_ca, src->tls_ca) ||
        dup_str(&dst->tls_cert, src->tls_cert) ||
        dup_str(&dst->tls_key, src->tls_key) ||
        dup_str(&dst->tls_sni, src->tls_sni)) {
        /* dup_str NULLs its slot first, so every slot is ours or NULL up to
         * the failure; the rest still alias src and must not be freed. */
        dq_options tmp = *dst;
        dq__options_defaults(dst);
        char **mine[] = {&tmp.ns, &tmp.user, &tmp.password, &tmp.tls_ca,
                         &tmp.tls_cert, &tmp.tls_key, &tmp.tls_sni};
        char *theirs[] = {src->ns, src->user, src->password, src->tls_ca,
                          src->tls_cert, src->tls_key, src->tls_sni};
        for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); i++)
            if (*mine[i] != theirs[i])
                free(*mine[i]);
        return DQ_ENOMEM;
    }
    return DQ_OK;
}
