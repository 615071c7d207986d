/*
 * tests/cluster_harness.h - private Redis Cluster and Sentinel topologies for
 * tests, built on tests/harness.h (one th_redis per data node).
 *
 * Every process listens on 127.0.0.1 only (data nodes also on a unix socket,
 * see th_redis) and lives in its own temp dir; servers get PDEATHSIG like
 * th_redis_start's, so a crashed test leaves no process behind.  The server
 * binary is $DQ_REDIS_SERVER, else redis-server (sentinels are the same binary
 * run with --sentinel); the cluster is created with $DQ_REDIS_CLI, else
 * redis-cli on PATH (valkey-server / valkey-cli work too).  A missing binary
 * is a failure (-1), never a skip.
 *
 * Every call is bounded in time; every failure prints why to stderr, prefixed
 * "thc: ".  Admin commands use hiredis (0.14 or 1.x) over TCP to 127.0.0.1.
 * Single-threaded use: one thread starts, changes and stops a topology (the
 * servers die with the thread that started them).
 */
#ifndef DQ_TESTS_CLUSTER_HARNESS_H
#define DQ_TESTS_CLUSTER_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

#ifdef __cplusplus
extern "C" {
#endif

#define THC_SLOTS 16384
#define THC_MAX_NODES 32     /* data nodes of one cluster or sentinel setup */
#define THC_MAX_SENTINELS 9

typedef enum { THC_PRIMARY = 0, THC_REPLICA = 1 } thc_role;

/* One cluster node.  r.pid is 0 once the node was killed (thc_kill_primary). */
typedef struct thc_node {
    th_redis r;          /* r.port: its port on 127.0.0.1; r.sock also works */
    int bus_port;        /* cluster bus port (cluster-port), on 127.0.0.1 */
    char id[48];         /* node id (CLUSTER MYID) */
    thc_role role;       /* as the node itself last reported it */
    int primary;         /* THC_REPLICA: index of the node it replicates, else -1 */
    redisContext *admin; /* the harness's cached admin connection (internal) */
} thc_node;

/* About 34 KB: make it static or malloc it rather than a local variable. */
typedef struct thc_cluster {
    thc_node nodes[THC_MAX_NODES];
    int count; /* primaries * (1 + replicas_per_primary) */
} thc_cluster;

/*
 * Starts primaries * (1 + replicas_per_primary) nodes (cluster-enabled yes,
 * nodes.conf in each dir, cluster-node-timeout 2000,
 * cluster-allow-replica-migration no, repl-diskless-sync-delay 0, then
 * extra_conf, which may be NULL and overrides), creates the cluster with
 * "<cli> --cluster create ... --cluster-replicas R --cluster-yes" (which needs
 * primaries >= 3), then waits (30 s at most) as thc_wait_ok does.  Which node
 * became primary or replica: nodes[i].role / .primary.  *c is overwritten.
 * Returns 0, or -1 after printing why (nothing left running, dirs removed).
 */
int thc_cluster_start(thc_cluster *c, int primaries, int replicas_per_primary,
                      const char *extra_conf);

/* Stops every node (by pid), removes their dirs.  Safe twice / on zeroes. */
void thc_cluster_stop(thc_cluster *c);

/*
 * "redis+cluster://127.0.0.1:p1,127.0.0.1:p2,..." with the ports of the live
 * primaries (by the roles last seen).  Returns buf ("" if n is too small).
 */
const char *thc_cluster_uri(const thc_cluster *c, char *buf, size_t n);

/* Hash slot of key (CRC16-XMODEM of its hash tag, mod 16384), the spec's. */
int thc_slot_of(const char *key);
int thc_slot_of_len(const char *key, size_t len);

/* Indexes of the live primaries (by the roles last seen), in node order,
 * into out (THC_MAX_NODES entries); returns how many. */
int thc_primaries(const thc_cluster *c, int *out);

/* The hash tag of queue q (a name that needs no percent-encoding), or of
 * its partition p when p >= 0 ("q#p"), into buf. */
void thc_part_tag(const char *q, int p, char *buf, size_t n);

/* Index of the node owning slot, per CLUSTER SLOTS of a live node; -1 if none. */
int thc_owner(thc_cluster *c, int slot);

/*
 * Moves slot from its owner to node to_node (a live primary), live:
 * SETSLOT IMPORTING on the target, MIGRATING on the source, then steps of
 * GETKEYSINSLOT + MIGRATE ... KEYS (keys_per_step keys a step), calling
 * between(arg) (may be NULL) after every step -- at least once, even for an
 * empty slot -- while the slot is migrating (clients get ASK), then
 * SETSLOT NODE on the target, the source and the other primaries, and waits
 * until every node agrees (thc_wait_ok, 30 s).  The harness's own time is
 * bounded (60 s, not counting between()).  Returns 0 or -1.
 */
int thc_migrate_slot(thc_cluster *c, int slot, int to_node, int keys_per_step,
                     void (*between)(void *), void *arg);

/*
 * Waits until a replica of primary node has all its writes (replication
 * offset), SIGKILLs node (th_redis_kill: its dir and nodes.conf stay), then
 * waits until a replica of it is promoted and thc_wait_ok holds.  Returns the
 * index of the new primary, or -1 (timeout_ms bounds the whole call).  The
 * killed node can come back with th_redis_restart(&c->nodes[node].r): it
 * rejoins as a replica of the new primary (see thc_wait_ok).
 */
int thc_kill_primary(thc_cluster *c, int node, int64_t timeout_ms);

/*
 * Waits until every live node reports cluster_state:ok, all live nodes agree
 * (CLUSTER NODES) on the owner of all 16384 slots, every owner is live and
 * not flagged failing, and every live replica replicates a live node and is
 * in sync (link up, no sync in progress, listed online by its primary); then
 * refreshes nodes[].role / .primary.  Returns 0, or -1 after printing the
 * last thing that was not yet so.
 */
int thc_wait_ok(thc_cluster *c, int64_t timeout_ms);

/* Rereads nodes[].role / .primary from each live node.  0 or -1. */
int thc_refresh_roles(thc_cluster *c);

/* ---- sentinel ----------------------------------------------------------- */

typedef struct thc_sentinel_proc {
    pid_t pid;     /* 0 if not running */
    char dir[256]; /* its temp dir: sentinel.conf (rewritten by it), logs */
    int port;      /* on 127.0.0.1 */
} thc_sentinel_proc;

/* About 34 KB too. */
typedef struct thc_sentinel {
    th_redis data[THC_MAX_NODES]; /* data[0] is the first primary; pid 0 once killed */
    int ndata;                    /* 1 + replicas */
    int primary;                  /* index in data[] of the current primary */
    thc_sentinel_proc sentinels[THC_MAX_SENTINELS];
    int nsentinels;
    char master_name[64];
    redisContext *admin[THC_MAX_NODES + THC_MAX_SENTINELS]; /* internal */
} thc_sentinel;

/*
 * A primary, `replicas` replicas (replicaof, waited until online) and
 * `sentinels` sentinels (the server binary with --sentinel; sentinel monitor
 * <master_name> 127.0.0.1 <port> 2 -- quorum 1 if there is one sentinel --,
 * down-after-milliseconds 1000, failover-timeout 5000, resolve-hostnames no),
 * then waits (30 s at most) until every sentinel reports that primary, all
 * the replicas and all the other sentinels.  Returns 0, or -1 after printing
 * why and cleaning up.
 */
int thc_sentinel_start(thc_sentinel *s, int replicas, int sentinels, const char *master_name);

/* Stops the sentinels and the data nodes, removes their dirs.  Safe twice. */
void thc_sentinel_stop(thc_sentinel *s);

/* "redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,.../<master_name>".  Returns buf. */
const char *thc_sentinel_uri(const thc_sentinel *s, char *buf, size_t n);

/*
 * by_kill != 0: waits until every live replica has all the primary's writes,
 * then SIGKILLs the primary (its dir stays until thc_sentinel_stop);
 * by_kill == 0: SENTINEL FAILOVER on the first sentinel.  Then waits until
 * every live sentinel reports the same new primary address and that node
 * answers ROLE master.  Returns the index in data[] of the new primary (also
 * stored in s->primary), or -1; timeout_ms bounds the whole call.  Without
 * kill, the old primary still answers ROLE master for about 10 s after that,
 * until a sentinel turns it into a replica.
 */
int thc_sentinel_failover(thc_sentinel *s, int by_kill, int64_t timeout_ms);

/* ---- cluster over TLS ------------------------------------------------------ */

/*
 * thc_cluster_start, with every node also serving TLS on its own free
 * tls-port on 127.0.0.1 (stored in tls_ports[i], in node order) and
 * "tls-cluster yes" + "tls-replication yes": the cluster bus and replication
 * run over TLS, and CLUSTER SHARDS lists each node's "tls-port" (Redis lists
 * it only with tls-cluster yes).  The plain port (nodes[i].r.port) stays, on
 * 127.0.0.1 only, for the harness's own admin connections and redis-cli; a
 * plain client sees plain ports in CLUSTER NODES / SLOTS / SHARDS' "port",
 * so every other call of this header works unchanged (each node announces
 * its plain port to its primary: replica-announce-port).  cert_dir holds
 * ca.crt, server.crt and server.key (PEM): tls-ca-cert-file,
 * tls-cert-file, tls-key-file (the nodes also present server.crt as a
 * client of each other's bus, so it must be valid for client use too).
 * tls-auth-clients keeps Redis's default (yes: clients need a certificate
 * of that CA); extra_conf (may be NULL) comes last and overrides.  The
 * server must be built with TLS.  tls_ports has room for THC_MAX_NODES.
 * Returns 0, or -1 after printing why (nothing left running).
 */
int thc_cluster_start_tls(thc_cluster *c, int primaries, int replicas_per_primary,
                          const char *extra_conf, const char *cert_dir, int *tls_ports);

/*
 * "rediss+cluster://127.0.0.1:t1,127.0.0.1:t2,..." with the TLS ports of the
 * live primaries (by the roles last seen), tls_ports as
 * thc_cluster_start_tls filled it.  Returns buf ("" if n is too small).
 */
const char *thc_cluster_tls_uri(const thc_cluster *c, const int *tls_ports, char *buf,
                                size_t n);

/* ---- helpers ------------------------------------------------------------ */

/* A hiredis connection to 127.0.0.1:port with 5 s timeouts, or NULL (printed). */
redisContext *thc_connect(int port);

#ifdef __cplusplus
}
#endif

#endif /* DQ_TESTS_CLUSTER_HARNESS_H */
