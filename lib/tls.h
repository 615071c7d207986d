/*
 * tls.h - the OpenSSL side of TLS: a client SSL object that verifies the
 * server's certificate chain AND its name.  Built only with TLS (hiredis
 * >= 1.0 with hiredis_ssl); conn.c attaches the object to a hiredis
 * context (dq__tls_attach), for the sync and the async link alike.
 */
#ifndef DQ_TLS_H
#define DQ_TLS_H

#include <openssl/ssl.h>

#include "internal.h"
#include "uri.h"

/* The SSL object of one connection to u with options o; *ctx_out receives
 * its SSL_CTX, to free after the connection.  NULL with err set. */
SSL *dq__tls_new(const dq_options *o, const dq__uri *u, SSL_CTX **ctx_out,
                 dq__err *err);
/* " (why the certificate was refused)", or "" when it was not. */
void dq__tls_verify_result(SSL *ssl, char *out, size_t size);

#endif
