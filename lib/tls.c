/*
 * tls.c - the OpenSSL side of TLS (see tls.h).  No hiredis here: conn.c
 * hands the SSL object to hiredis_ssl.
 */
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>

#include "tls.h"

/* Sets err from OpenSSL's error queue: "TLS setup: what arg: reason". */
static int tls_fail(dq__err *err, const char *what, const char *arg) {
    char buf[256] = "unknown error";
    unsigned long e = ERR_peek_last_error();
    if (e != 0)
        ERR_error_string_n(e, buf, sizeof(buf));
    ERR_clear_error();
    return dq__err_set(err, DQ_EIO, "TLS setup: %s%s%s: %s", what,
                      arg ? " " : "", arg ? arg : "", buf);
}

/* Makes the SSL object of one connection (see tls.h).  Not redisCreateSSLContext: that
 * verifies the server's certificate chain but not its NAME (hiredis only
 * sends the name as SNI), so any certificate the CA ever signed, for any
 * host, would be accepted.  Here the name the client connects to (the URI's
 * host, or DQ_OPT_TLS_SERVER_NAME) must match the certificate's SAN/CN: as
 * a DNS name, or as an IP address for an IP literal.  *ctx_out receives the
 * SSL_CTX, to free after the connection.  NULL with err set on failure.
 */
SSL *dq__tls_new(const dq_options *o, const dq__uri *u, SSL_CTX **ctx_out,
                 dq__err *err) {
    *ctx_out = NULL;
    SSL *ssl = NULL;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        tls_fail(err, "SSL_CTX_new", NULL);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if ((o->tls_ca ? SSL_CTX_load_verify_locations(ctx, o->tls_ca, NULL)
                   : SSL_CTX_set_default_verify_paths(ctx)) != 1) {
        tls_fail(err, "cannot load the CA file", o->tls_ca);
        goto fail;
    }
    if (o->tls_cert &&
        SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1) {
        tls_fail(err, "cannot load the client certificate", o->tls_cert);
        goto fail;
    }
    if (o->tls_key &&
        SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1) {
        tls_fail(err, "cannot load the client key", o->tls_key);
        goto fail;
    }
    if ((ssl = SSL_new(ctx)) == NULL) {
        tls_fail(err, "SSL_new", NULL);
        goto fail;
    }
    const char *name = o->tls_sni ? o->tls_sni
                                  : (u->kind == DQ_URI_TCP ? u->host : NULL);
    if (name != NULL) {
        unsigned char addr[16];
        X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
        int ip = inet_pton(AF_INET, name, addr) == 1 ||
                 inet_pton(AF_INET6, name, addr) == 1;
        /* An IP literal is checked against the certificate's IP SANs and
         * never sent as SNI (RFC 6066). */
        if (ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, name) != 1
               : (SSL_set_tlsext_host_name(ssl, name) != 1 ||
                  X509_VERIFY_PARAM_set1_host(vp, name, 0) != 1)) {
            tls_fail(err, "cannot set the server name", name);
            goto fail;
        }
    }
    *ctx_out = ctx;
    return ssl;
fail:
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    return NULL;
}


void dq__tls_verify_result(SSL *ssl, char *out, size_t size) {
    long v = SSL_get_verify_result(ssl);
    if (v == X509_V_OK)
        out[0] = '\0';
    else
        snprintf(out, size, " (%s)", X509_verify_cert_error_string(v));
}
