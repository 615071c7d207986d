/*
 * delayq.h - libdelayq, a delayed-job queue over Redis.
 *
 * A producer pushes a payload "to run in N ms"; when it comes due, exactly one
 * consumer at a time receives it under a lease.  All state lives in Redis and
 * every state change is one Lua script timed by the Redis server's clock.
 *
 * Conventions (the same for every function in this header):
 *
 *  - Every function that can fail returns int: 0 (DQ_OK) or a positive count
 *    on success, a negative DQ_E* code on failure.  dq_strerror(code) gives a
 *    static text; dq_errmsg(client) gives the detailed message of the last
 *    failed call on that client (it names the bad argument, or carries Redis's
 *    own error text) and stays valid until the next call on the client.
 *  - Arguments are checked before any I/O: a call that fails with DQ_ENULL,
 *    DQ_EINVAL, DQ_EQUEUE, DQ_EID, DQ_EDELAY, DQ_ELEASE or DQ_ETOOBIG sent
 *    nothing to Redis and changed nothing.
 *  - Times are int64_t milliseconds.  Durations (delay, lease) are relative
 *    and measured by the Redis server's clock; absolute times (run-at, due
 *    time) are Unix epoch milliseconds as the Redis server's clock sees them.
 *  - Payloads are binary-safe (pointer + size_t length, may contain NUL).
 *    Queue names, job ids and tokens are NUL-terminated strings.
 *  - No public struct, no varargs, no callback in this header: every function
 *    can be called through an FFI (ctypes, cgo, bindgen) without a C shim.
 *  - Every *_free / dq_close accepts NULL and does nothing.
 *  - No function prints, exits or aborts.
 *
 * Thread safety: a dq_client is not thread-safe.  Use one client per thread,
 * or serialize calls on it; a client may move between threads between calls.
 * dq_jobs / dq_job objects are independent of the client once returned.
 * Functions without a client argument are thread-safe.
 */
#ifndef DELAYQ_H
#define DELAYQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define DQ_EXTERN __declspec(dllimport)
#elif defined(__GNUC__) && __GNUC__ >= 4
#define DQ_EXTERN __attribute__((visibility("default")))
#else
#define DQ_EXTERN
#endif

/* ---- Versions --------------------------------------------------------- */

#define DQ_VERSION_MAJOR 0
#define DQ_VERSION_MINOR 1
#define DQ_VERSION_PATCH 0
#define DQ_VERSION_STRING "0.1.0"
/* MAJOR*10000 + MINOR*100 + PATCH, comparable with dq_version_number(). */
#define DQ_VERSION_NUMBER \
    (DQ_VERSION_MAJOR * 10000 + DQ_VERSION_MINOR * 100 + DQ_VERSION_PATCH)
#define DQ_AT_LEAST_VERSION(maj, min, pat) \
    (DQ_VERSION_NUMBER >= ((maj) * 10000 + (min) * 100 + (pat)))

/* Version of the library actually loaded at run time. */
DQ_EXTERN int dq_version_number(void);
DQ_EXTERN const char *dq_version_string(void);

/* ---- Errors ----------------------------------------------------------- */

/* One table: XX(name, value, message).  Numbers are never reused. */
#define DQ_ERRNO_MAP(XX)                                                     \
    XX(ENULL, -1, "a required pointer argument is NULL")                     \
    XX(EINVAL, -2, "invalid argument")                                       \
    XX(EQUEUE, -3, "invalid queue name")                                     \
    XX(EID, -4, "invalid job id")                                            \
    XX(EDELAY, -5, "delay or time out of range")                             \
    XX(ELEASE, -6, "lease duration out of range")                            \
    XX(ETOOBIG, -7, "payload larger than the configured limit")              \
    XX(ENOMEM, -8, "out of memory")                                          \
    XX(EURI, -9, "malformed or unsupported Redis URI")                       \
    XX(EIO, -10, "connection to Redis failed or was lost")                   \
    XX(ETIMEDOUT, -11, "Redis did not answer in time")                       \
    XX(EAUTH, -12, "Redis refused the credentials")                          \
    XX(EREDIS, -13, "Redis returned an error")                               \
    XX(EPROTO, -14, "unexpected reply from Redis")                           \
    XX(EOOM, -15, "Redis is out of memory (maxmemory reached)")              \
    XX(ESTALE, -16, "lease token is stale: the job is no longer yours")      \
    XX(ENOTFOUND, -17, "no such job")                                        \
    XX(ENOTSUP, -18, "not supported by this build or server")                \
    XX(ECLOSED, -19, "client is closed or closing")                          \
    XX(ECANCELED, -20, "operation canceled")                                 \
    XX(EREPLICAS, -21, "not enough replicas acknowledged the write")

enum dq_error {
    DQ_OK = 0,
#define DQ_XX_ENUM(name, value, msg) DQ_##name = (value),
    DQ_ERRNO_MAP(DQ_XX_ENUM)
#undef DQ_XX_ENUM
    DQ_ERRNO_MIN = -21 /* lowest code in use; for range checks */
};

/* Static English text for a code ("unknown error" for unknown codes). */
DQ_EXTERN const char *dq_strerror(int code);
/* The code's name without prefix, e.g. "ESTALE"; "UNKNOWN" if unknown. */
DQ_EXTERN const char *dq_errname(int code);

/* ---- Limits ----------------------------------------------------------- */

#define DQ_QUEUE_MAX 200        /* bytes in a queue name (1..200) */
#define DQ_ID_MAX 128           /* bytes in a job id (1..128) */
#define DQ_ID_BUF (DQ_ID_MAX + 1)  /* buffer size that holds any id + NUL */
#define DQ_TOKEN_BUF 24         /* buffer size that holds any lease token */
#define DQ_DELAY_MAX INT64_C(3153600000000) /* 100 years, in ms */
#define DQ_AT_MAX INT64_C(253402300799999)  /* latest run-at: year 9999 */
#define DQ_LEASE_MIN 1          /* ms */
#define DQ_LEASE_MAX INT64_C(604800000)     /* 7 days, in ms */
#define DQ_BATCH_MAX 100000     /* jobs in one batch call */
#define DQ_POLL_MAX 1000        /* jobs in one poll */
#define DQ_MULTI_MAX 64         /* queues in one dq_poll_wait_multi */
#define DQ_WEIGHT_MAX 1000      /* a queue's weight (1..DQ_WEIGHT_MAX) */
#define DQ_DEFAULT_MAX_PAYLOAD (1024 * 1024) /* bytes; see DQ_OPT_MAX_PAYLOAD */
#define DQ_REASON_MAX 1024      /* bytes in a failure reason (dq_nack_reason) */

/* ---- Options ---------------------------------------------------------- */

typedef struct dq_options dq_options;

/* Option keys.  Integer options are set with dq_options_set_int, string
 * options with dq_options_set_str.  Values given in the URI override nothing:
 * options set here override the URI. */
enum dq_option {
    DQ_OPT_CONNECT_TIMEOUT_MS = 1, /* int, default 2000; 0 = none */
    DQ_OPT_COMMAND_TIMEOUT_MS = 2, /* int, default 5000; 0 = none */
    DQ_OPT_MAX_PAYLOAD = 3,        /* int, bytes, default 1 MiB, max 512 MiB */
    DQ_OPT_MAX_ATTEMPTS = 4,       /* int, default 0 = unlimited: after this
                                      many deliveries a job whose lease runs
                                      out or that is nacked goes to dead */
    DQ_OPT_WAIT_CAP_MS = 5,        /* int, default 1000 (10..60000): longest
                                      single sleep of dq_poll_wait before it
                                      checks the connection and polls again */
    DQ_OPT_WAIT_REPLICAS = 6,      /* int, default 0: push/push_batch wait
                                      (WAIT) until this many replicas have
                                      the jobs before returning success */
    DQ_OPT_WAIT_REPLICAS_TIMEOUT_MS = 7, /* int, default 1000 */
    DQ_OPT_DONE_TTL_MS = 8,        /* int, default 300000 (5 min), 0..7 days:
                                      how long, counted from the delivery
                                      that was acked, the queue remembers a
                                      job this client acked (its id and
                                      token), so a retried push with
                                      DQ_PUSH_KEEP answers DQ_DONE and a
                                      retried ack tells its own landed ack
                                      (0) from another holder's (DQ_ESTALE).
                                      0 = this client leaves no record (and
                                      counts the records of others as long as
                                      they are kept).  Costs one ZSET entry
                                      of Redis memory per job acked within
                                      the window (bench/RESULTS.md). */
    DQ_OPT_PARTITIONS = 9,         /* int, 1..1024, default 0 = as the URI's
                                      ?partitions=N says, else 1: every
                                      queue is spread over this many
                                      partitions (own keys and hash tag
                                      "{queue#i}", so over every primary
                                      of a Redis Cluster); a job lives in
                                      the partition its id hashes to.  The
                                      count is recorded in Redis the first
                                      time a partitioned client uses a
                                      queue; a partitioned client whose
                                      count differs gets DQ_EINVAL.
                                      See README "Partitioned queues". */
    DQ_OPT_COUNTERS = 10,          /* int, 0 or 1, default 0: the client's
                                      polls, acks and nacks also count, per
                                      queue and in Redis (a hash
                                      <ns>:{queue}:counts), the jobs
                                      delivered, acked, retried and failed
                                      (dead-lettered), for dq_counters, the
                                      dashboard and /metrics.  Costs two
                                      more commands in those scripts; give
                                      it to every producer and consumer of
                                      a queue whose counts you want. */
    DQ_OPT_LEASE_MS = 11,          /* int, default 30000 (DQ_LEASE_MIN..
                                      DQ_LEASE_MAX): the lease of a poll
                                      given lease_ms 0 in a queue without
                                      a DQ_SET_LEASE_MS setting */
    DQ_OPT_LAYOUT = 12,            /* int, DQ_LAYOUT_DEFAULT (default),
                                      DQ_LAYOUT_COMPACT or
                                      DQ_LAYOUT_COMPACT_PUSH: the layout
                                      of a queue without a DQ_SET_LAYOUT
                                      setting, for this client's pushes
                                      and polls (the URI's ?layout=compact
                                      or compact-push sets it too) */
    DQ_OPT_DURABLE = 13,           /* int, 0 or 1, default 0: the durable
                                      mode.  Every call that writes waits
                                      (WAIT) for DQ_OPT_WAIT_REPLICAS
                                      replicas (1 or more: dq_open fails
                                      with DQ_EINVAL without them) within
                                      DQ_OPT_WAIT_REPLICAS_TIMEOUT_MS: a
                                      poll hands out jobs only once their
                                      leases reached the replicas, and
                                      pushes, acks, nacks, extends,
                                      cancels, dead requeues / purges and
                                      setting changes answer DQ_EREPLICAS
                                      when their write is not confirmed.
                                      See "Durable mode" below. */
    DQ_OPT_NAMESPACE = 100,        /* str, default "dq": key prefix, 1..64 of
                                      [A-Za-z0-9._:-] */
    DQ_OPT_USERNAME = 101,         /* str: ACL user (overrides the URI's) */
    DQ_OPT_PASSWORD = 102,         /* str: password (overrides the URI's) */
    DQ_OPT_TLS_CA_FILE = 103,      /* str: CA bundle; setting any TLS option
                                      or using rediss:// enables TLS */
    DQ_OPT_TLS_CERT_FILE = 104,    /* str: client certificate (PEM) */
    DQ_OPT_TLS_KEY_FILE = 105,     /* str: client private key (PEM) */
    DQ_OPT_TLS_SERVER_NAME = 106   /* str: SNI / name to verify */
};

/* Returns a new option set with defaults, or NULL if out of memory. */
DQ_EXTERN dq_options *dq_options_new(void);
/* Frees an option set (NULL is a no-op).  Clients copy what they need, so
 * options may be freed right after dq_open. */
DQ_EXTERN void dq_options_free(dq_options *opts);
/* Sets an integer option.  Returns 0, DQ_ENULL, or DQ_EINVAL (unknown key,
 * string key, or value out of range; the set is left unchanged). */
DQ_EXTERN int dq_options_set_int(dq_options *opts, int option, int64_t value);
/* Sets a string option (copied; NULL resets it).  Returns 0, DQ_ENULL,
 * DQ_ENOMEM or DQ_EINVAL. */
DQ_EXTERN int dq_options_set_str(dq_options *opts, int option,
                                 const char *value);

/*
 * Durable mode (DQ_OPT_DURABLE = 1, with DQ_OPT_WAIT_REPLICAS = N >= 1 and
 * DQ_OPT_WAIT_REPLICAS_TIMEOUT_MS = T): after every call that writes, on
 * each connection the call wrote through, the client sends WAIT N T and
 * reports success only when N replicas acknowledged the writes.
 *
 *  - dq_poll, dq_poll_wait(_multi), dq_async_poll and the consumers: a
 *    poll that claimed jobs hands them out only once their leases reached
 *    N replicas.  When the WAIT falls short (or times out, or the link
 *    breaks) the call returns DQ_EREPLICAS and no jobs: they stay leased
 *    on the primary and are due again when that lease runs out (attempt
 *    + 1), so no lease is held on the strength of a write a failover can
 *    undo.  A poll that claimed nothing sends no WAIT.
 *  - Pushes, dq_ack / dq_ack_batch, dq_nack(_reason), dq_extend,
 *    dq_cancel, dq_dead_requeue / dq_dead_purge and dq_config_set (and
 *    their async twins): the write is made; DQ_EREPLICAS says it is not
 *    confirmed (it may or may not survive a failover).  dq_ack_batch and
 *    the push calls still fill in their results / ids / outcomes (as the
 *    primary answered); dq_extend leaves *deadline_ms alone (count on the
 *    old deadline).  A call that fails before or in its script (bad
 *    input, DQ_ESTALE, DQ_ENOTFOUND of a single job, ...) sends no WAIT
 *    and returns what it returns in the default mode.
 *  - N: every replica that Sentinel (or a Redis Cluster failover) may
 *    promote.  WAIT counts the replicas that have the write; a failover
 *    promotes one of them only if the write reached all of them (Sentinel
 *    picks by replica-priority, then replication offset, among the
 *    replicas it can reach: the one with a confirmed write may be cut
 *    off), and a primary cut off with a minority of its replicas could
 *    still confirm to fewer.  Losing one replica therefore makes durable
 *    writes fail with DQ_EREPLICAS until it is back: the mode trades
 *    availability for not losing confirmed work.
 *  - Server settings (dq_warnings names a missing or weak one at dq_open):
 *    min-replicas-to-write N and min-replicas-max-lag L (seconds) on the
 *    primary, with L below the Sentinels' down-after-milliseconds: a
 *    primary that lost a replica then refuses writes (NOREPLICAS, which
 *    is DQ_EREPLICAS with nothing written: a poll leases nothing) instead
 *    of making writes it cannot confirm, and an old primary cut off from
 *    the others stops taking writes before a replica is promoted.
 *  - Limits: WAIT confirms the replicas' memory, not their disks
 *    (WAITAOF needs Redis 7.2 and is not used); a primary restarted
 *    without persistence before a failover wipes its replicas.  Leases
 *    are server times: a clock jump on a promoted replica shortens or
 *    lengthens them.  A call retried after DQ_EIO that writes nothing (a
 *    DQ_KEPT push, an ack answered from the done record) is confirmed as
 *    far as the state it read: Redis 7.0 sets a connection's WAIT offset
 *    to the primary's after every command, so its WAIT also covers the
 *    first try's write when that reached this primary (a server that
 *    counted only the connection's own writes would not).
 */

/* ---- Client ----------------------------------------------------------- */

typedef struct dq_client dq_client;

/*
 * Opens a client and connects it to Redis.
 *
 * uri:  redis://[[user][:password]@]host[:port][/db]
 *       rediss://...                (TLS; needs a build with TLS)
 *       unix:///path/to/socket[?db=N][&user=U][&password=P]
 *       redis+cluster://[[user][:password]@]h1[:p1][,h2[:p2]...]
 *           a Redis Cluster (or Valkey cluster) reached through any of
 *           the listed nodes: each call goes to the node that owns its
 *           queue's hash slot; MOVED, ASK, TRYAGAIN, CLUSTERDOWN and
 *           failovers are followed within DQ_OPT_COMMAND_TIMEOUT_MS.
 *       redis+sentinel://[[user][:password]@]s1[:p1][,...]/master[/db]
 *           the primary that these Sentinels (default port 26379, asked
 *           without credentials) name for master; found again after a
 *           failover.
 *       rediss+cluster://, rediss+sentinel://   the same over TLS.
 *       Every form takes ?partitions=N (see DQ_OPT_PARTITIONS).
 *       User and password are percent-decoded.  Port defaults to 6379.
 * opts: may be NULL for defaults; copied.
 * out:  receives the client.  Even when the call fails, *out is set to a
 *       client that holds the error message (dq_errmsg) and must be passed to
 *       dq_close; *out is NULL only when out is NULL or memory ran out.
 *
 * Returns 0, DQ_EURI, DQ_EIO, DQ_ETIMEDOUT, DQ_EAUTH, DQ_EREDIS (e.g. SELECT
 * refused), DQ_ENOTSUP (TLS without TLS support), DQ_ENULL or DQ_ENOMEM.
 *
 * A client whose connection breaks later reconnects by itself on its next
 * call; the call that saw the break fails with DQ_EIO or DQ_ETIMEDOUT (and
 * may or may not have taken effect: pushes with a caller-chosen id and
 * DQ_PUSH_KEEP/REPLACE are safe to retry).  The read-only calls (dq_stats,
 * dq_list, dq_dead_list, dq_counters, dq_get, dq_count_due, dq_queues)
 * reconnect and try once more by themselves after a DQ_EIO.
 */
DQ_EXTERN int dq_open(const char *uri, const dq_options *opts,
                      dq_client **out);
/* Closes the connection(s) and frees the client.  NULL is a no-op. */
DQ_EXTERN void dq_close(dq_client *c);
/* Detailed message of the last failed call on c ("" after a success);
 * valid until the next call on c.  dq_errmsg(NULL) returns a static text. */
DQ_EXTERN const char *dq_errmsg(const dq_client *c);
/* Code of the last failed call on c (0 after a success). */
DQ_EXTERN int dq_errcode(const dq_client *c);
/* Non-fatal findings about the server made at connect time, "; " between
 * two: that its maxmemory-policy can evict queue keys, or that its
 * hash-max-listpack-entries / -value are below the 120 / 64 the compact
 * layout needs (its hashes would then cost more than the default layout);
 * "" when there are none, or when the server or ACL refuses CONFIG.  With
 * DQ_OPT_DURABLE also: min-replicas-to-write below DQ_OPT_WAIT_REPLICAS
 * (0: missing), min-replicas-max-lag 0, and a primary with more replicas
 * than DQ_OPT_WAIT_REPLICAS (a failover may promote one without the
 * confirmed writes) or fewer (durable writes fail until they are back).
 * Valid until the next call on c. */
DQ_EXTERN const char *dq_warnings(const dq_client *c);

/* ---- Jobs ------------------------------------------------------------- */

typedef struct dq_job dq_job;   /* one job: id, payload, attempt, ... */
typedef struct dq_jobs dq_jobs; /* a list of jobs returned by a call */

/* Number of jobs in the list (0 for NULL). */
DQ_EXTERN size_t dq_jobs_count(const dq_jobs *jobs);
/* The i-th job, owned by the list (NULL if out of range). */
DQ_EXTERN const dq_job *dq_jobs_at(const dq_jobs *jobs, size_t i);
/* Frees the list and every job in it.  NULL is a no-op. */
DQ_EXTERN void dq_jobs_free(dq_jobs *jobs);

/* Accessors: pointers stay valid as long as the list (or copy) lives.
 * All of them accept NULL and then return NULL / 0. */
DQ_EXTERN const char *dq_job_id(const dq_job *job);
/* Payload bytes (not NUL-terminated for binary payloads, but one NUL byte
 * always follows the last byte, so text payloads can be used as C strings);
 * *len (if len is not NULL) receives the length. */
DQ_EXTERN const void *dq_job_payload(const dq_job *job, size_t *len);
/* Delivery number, 1 on first delivery.  For dead jobs: deliveries made. */
DQ_EXTERN int64_t dq_job_attempt(const dq_job *job);
/* Due time, server epoch ms.  For dead jobs: the time it was dead-lettered. */
DQ_EXTERN int64_t dq_job_due_ms(const dq_job *job);
/* Lease deadline, server epoch ms (0 for jobs not leased to you). */
DQ_EXTERN int64_t dq_job_lease_deadline_ms(const dq_job *job);
/* Lease token to pass to dq_ack/dq_nack/dq_extend ("" if not leased). */
DQ_EXTERN const char *dq_job_token(const dq_job *job);
/* The job's last failure reason: the bytes a dq_nack_reason recorded (not
 * NUL-terminated for binary reasons, but one NUL byte always follows), or
 * "max attempts" when a poll dead-lettered it for DQ_OPT_MAX_ATTEMPTS;
 * *len (if len is not NULL) receives its length.  NULL (and *len 0) when
 * none was recorded.  Filled in by dq_list and dq_dead_list; jobs from a
 * poll carry none (use dq_get). */
DQ_EXTERN const void *dq_job_last_error(const dq_job *job, size_t *len);
/* When the last failure reason was recorded (server epoch ms), 0 if none. */
DQ_EXTERN int64_t dq_job_failed_ms(const dq_job *job);
/* Defined when dq_job_group and dq_job_priority exist (added in the same
 * version as they). */
#define DQ_HAVE_JOB_GROUP 1
/* The job's group (DQ_PUSHOPT_GROUP), NUL-terminated, or NULL when it has
 * none.  Filled in by dq_list and dq_dead_list (and dq_async_list,
 * dq_async_dead_list) and by every poll: dq_poll, dq_poll_wait(_multi),
 * dq_async_poll and the jobs handed to consumers' handlers (a lease that
 * ran out and is claimed again too). */
DQ_EXTERN const char *dq_job_group(const dq_job *job);
/* The job's priority (DQ_PUSHOPT_PRIORITY, 0..DQ_PRIORITY_MAX), 0 when it
 * has none; filled in by the same calls as dq_job_group. */
DQ_EXTERN int dq_job_priority(const dq_job *job);
/* A deep copy that outlives its list; free it with dq_job_free.  NULL if out
 * of memory or job is NULL. */
DQ_EXTERN dq_job *dq_job_dup(const dq_job *job);
/* Frees a copy made by dq_job_dup.  NULL is a no-op.  Never call it on a
 * job that belongs to a dq_jobs list. */
DQ_EXTERN void dq_job_free(dq_job *job);

/* ---- Producing -------------------------------------------------------- */

/* Push flags: what happens when a job with the same id already exists
 * (pending, in flight or dead). */
#define DQ_PUSH_KEEP 0    /* keep the existing job untouched (default) */
#define DQ_PUSH_REPLACE 1 /* replace payload and due time; attempts reset to
                             0; an in-flight holder's token goes stale; a
                             dead job with that id is revived */

/* Push outcomes, written to *outcome. */
#define DQ_PUSHED 1   /* a new job was created */
#define DQ_KEPT 2     /* the id existed and DQ_PUSH_KEEP left it alone */
#define DQ_REPLACED 3 /* the id existed and was replaced/rescheduled */
#define DQ_DONE 4     /* DQ_PUSH_KEEP: a job with this id was acked within
                         the acker's DQ_OPT_DONE_TTL_MS; taken for a retry of
                         a push that landed and already ran: nothing written
                         (use DQ_PUSH_REPLACE to run the id again).  The
                         record answers only for the job that was acked:
                         once a push created the id again (a replace, or
                         a keep push after the record's window) or a
                         dq_cancel named it, no later push is refused by
                         it (a retried ack of that delivery still
                         answers 0) */

/*
 * Pushes one job to run delay_ms from now (server clock).
 *
 * queue:    1..DQ_QUEUE_MAX bytes, any bytes but NUL.
 * payload:  len bytes (len 0 allowed; payload may be NULL only if len is 0),
 *           at most DQ_OPT_MAX_PAYLOAD bytes.
 * delay_ms: 0..DQ_DELAY_MAX.
 * id:       NULL to let the library generate a unique id (14 characters of
 *           [0-9A-Za-z], ~83 random bits), or 1..DQ_ID_MAX bytes chosen by
 *           the caller.
 * flags:    DQ_PUSH_KEEP or DQ_PUSH_REPLACE.
 * id_out:   NULL, or a buffer of id_out_size bytes (DQ_ID_BUF always fits)
 *           that receives the job id, NUL-terminated.
 * outcome:  NULL, or receives DQ_PUSHED, DQ_KEPT, DQ_REPLACED or DQ_DONE.
 *
 * Returns 0 or a negative code (DQ_EINVAL if id_out_size is too small).  A
 * call that returns an error wrote nothing, except that DQ_EIO and
 * DQ_ETIMEDOUT leave it open whether the push landed (retry with the same id
 * and DQ_PUSH_KEEP: DQ_KEPT or DQ_DONE then say it had) and DQ_EREPLICAS
 * means it landed on the primary only (or, when the message says
 * NOREPLICAS, that the primary refused it for min-replicas-to-write: not
 * written).
 */
DQ_EXTERN int dq_push(dq_client *c, const char *queue, const void *payload,
                      size_t len, int64_t delay_ms, const char *id, int flags,
                      char *id_out, size_t id_out_size, int *outcome);

/* As dq_push, but due at an absolute time: at_ms is Unix epoch ms as the
 * Redis server's clock counts them (0..DQ_AT_MAX); a time in the past makes
 * the job due at once. */
DQ_EXTERN int dq_push_at(dq_client *c, const char *queue, const void *payload,
                         size_t len, int64_t at_ms, const char *id, int flags,
                         char *id_out, size_t id_out_size, int *outcome);

/*
 * Pushes n jobs (1..DQ_BATCH_MAX) in one round trip.  Arrays are indexed
 * 0..n-1:
 *   payloads[i], lens[i]   payload of job i (payloads[i] may be NULL if
 *                          lens[i] is 0)
 *   delays_ms              NULL for all 0, else delay of job i
 *   ids                    NULL to generate every id, else ids[i] (NULL
 *                          entries are generated)
 *   ids_out                NULL, or n * DQ_ID_BUF bytes: id of job i at
 *                          ids_out + i * DQ_ID_BUF
 *   outcomes               NULL, or n ints (DQ_PUSHED / DQ_KEPT / DQ_REPLACED
 *                          / DQ_DONE)
 * Every argument is checked before anything is sent.  Jobs are written in
 * chunks of up to 1000 jobs and about 8 MiB (a bigger job goes alone), each
 * chunk atomic: a chunk that fails in Redis wrote nothing.  After an error
 * some earlier chunks may have been written (retrying with the same ids and
 * DQ_PUSH_KEEP is safe).
 * Returns the number of jobs newly created or replaced (>= 0), or an error.
 */
DQ_EXTERN int dq_push_batch(dq_client *c, const char *queue, size_t n,
                            const void *const *payloads, const size_t *lens,
                            const int64_t *delays_ms, const char *const *ids,
                            int flags, char *ids_out, int *outcomes);

/* ---- Queue settings, stored in Redis ------------------------------------ */

#define DQ_HAVE_CONFIG 1

/*
 * A queue's settings live in Redis beside its jobs (a hash
 * <ns>:{queue}:conf), so every client and consumer of the queue follows
 * the same ones; the scripts read them at each poll and nack.  A queue
 * without a setting falls back to the client's option where there is one
 * (DQ_OPT_MAX_ATTEMPTS, DQ_OPT_LEASE_MS) or to nothing (no backoff, keep
 * dead jobs forever, dead-letter expired jobs, no rate limit).  Settings
 * outlive the queue's jobs until unset.  A partitioned queue keeps them in
 * every partition (dq_config_set writes each partition in turn: an error
 * half-way leaves the earlier ones changed; set again), rate_max and
 * dead_max split evenly over the partitions.
 * The limit on jobs in flight (DQ_SET_MAX_INFLIGHT) counts the leases
 * whose deadline has not passed, inside Redis at each poll: a poll leases
 * at most the free slots, and one that finds none says (next_due_ms) when
 * the first lease ends; an ack, nack or cancel that frees a slot wakes one
 * waiting consumer (dq_poll_wait).  A partitioned queue splits it evenly
 * (each partition limits its own share).
 */
#define DQ_SET_MAX_ATTEMPTS 1    /* 0..DQ_ATTEMPTS_MAX (0 = unlimited):
                                    deliveries before a job is dead-lettered
                                    (a job's own DQ_PUSHOPT_MAX_ATTEMPTS
                                    comes first, DQ_OPT_MAX_ATTEMPTS after) */
#define DQ_SET_LEASE_MS 2        /* DQ_LEASE_MIN..DQ_LEASE_MAX: the lease of
                                    polls given lease_ms 0 */
#define DQ_SET_BACKOFF 3         /* DQ_BACKOFF_FIXED or DQ_BACKOFF_EXPONENTIAL:
                                    the delay of a nack with DQ_NACK_BACKOFF
                                    (the consumers' retries) */
#define DQ_SET_BACKOFF_BASE_MS 4 /* 0..DQ_DELAY_MAX, default 1000: the fixed
                                    delay, or the first of the doubling ones */
#define DQ_SET_BACKOFF_CAP_MS 5  /* 0..DQ_DELAY_MAX: the longest delay
                                    (unset: DQ_DELAY_MAX) */
#define DQ_SET_BACKOFF_JITTER 6  /* 0..100: up to this percent of each delay
                                    is taken off at random */
#define DQ_SET_DEAD_MAX 7        /* 1..10^9: keep at most this many dead
                                    jobs (the oldest go first; each
                                    partition keeps its share, at least 1,
                                    trimmed by up to 16 more than a call
                                    adds) */
#define DQ_SET_DEAD_TTL_MS 8     /* 1..DQ_DELAY_MAX: keep a dead job at most
                                    this long */
#define DQ_SET_EXPIRED 9         /* DQ_EXPIRED_DEAD (what a queue without the
                                    setting does) or DQ_EXPIRED_DROP: what
                                    becomes of a job whose expiry passed */
#define DQ_SET_RATE_MAX 10       /* 1..DQ_RATE_MAX: at most this many
                                    deliveries in any DQ_SET_RATE_WINDOW_MS,
                                    over all consumers (the two go together) */
#define DQ_SET_RATE_WINDOW_MS 11 /* 1..DQ_RATE_WINDOW_MAX */
#define DQ_SET_LAYOUT 12         /* DQ_LAYOUT_*: how pending jobs are
                                    stored (unset: the calling client's
                                    DQ_OPT_LAYOUT) */
#define DQ_SET_MAX_INFLIGHT 13   /* 1..DQ_INFLIGHT_MAX: at most this many
                                    jobs of the queue leased at once, over
                                    all consumers (a partitioned queue: at
                                    least one per partition, split evenly);
                                    a lease frees its slot when the job is
                                    acked, nacked, cancelled or
                                    dead-lettered, or when it runs out */
#define DQ_SET_GROUP_MAX_INFLIGHT 14 /* 1..DQ_INFLIGHT_MAX: at most this
                                    many jobs of one group
                                    (DQ_PUSHOPT_GROUP; jobs without a
                                    group are not limited) leased at once
                                    (a partitioned queue: per partition,
                                    split evenly, at least one); a group
                                    at its limit is skipped, the others
                                                                        served; slots free as for
                                    DQ_SET_MAX_INFLIGHT.  Setting it on
                                    a queue that had none reads the jobs
                                    in flight once, so they count */
#define DQ_SET__COUNT 14         /* number of settings */

/* Layouts (DQ_SET_LAYOUT, DQ_OPT_LAYOUT).  The default one keeps each
 * pending job in a sorted set and a hash: about 180 bytes of Redis memory
 * per job beyond its payload.  The compact one, for huge backlogs of
 * small jobs, keeps pending jobs that were never delivered, carry no push
 * options and have an id and payload of at most 64 and 53 bytes in
 * small hashes by due time and id shards (listpacks) instead: about 100
 * bytes per job beyond the payload at a million jobs per queue or
 * partition, less above (its 262,144 shards cost about 25 MB once all
 * exist, so below about a million jobs it saves little).  Pushes write the
 * default layout as fast as in it; in DQ_LAYOUT_COMPACT polls that find
 * nothing due move up to 256 of them at a time into the compact one (a
 * waiting consumer comes back every 20 ms while a backlog is left to
 * move), so memory becomes compact once the idle consumers have caught
 * up.  In DQ_LAYOUT_COMPACT_PUSH every push moves as many jobs as it
 * pushed that fit instead: compact at once, pushes about four times as
 * costly.  A poll moves the jobs it claims back; other jobs keep the
 * default layout.  Cancels cost more (bench/RESULTS.md, "Memory: default
 * and compact layouts").  Every operation and guarantee is the same in both, and
 * either reads both: a queue can switch at any time.  On a Redis Cluster a
 * queue with compact jobs answers TRYAGAIN while its slot migrates
 * (README, "The compact layout"). */
#define DQ_LAYOUT_DEFAULT 0
#define DQ_LAYOUT_COMPACT 1
#define DQ_LAYOUT_COMPACT_PUSH 2

#define DQ_BACKOFF_FIXED 1       /* every retry waits the base delay */
#define DQ_BACKOFF_EXPONENTIAL 2 /* base * 2^(attempt-1), capped */
#define DQ_EXPIRED_DEAD 0
#define DQ_EXPIRED_DROP 1
#define DQ_RATE_MAX 100000
#define DQ_RATE_WINDOW_MAX INT64_C(86400000) /* 1 day */
#define DQ_INFLIGHT_MAX 1000000
#define DQ_UNSET (-1)            /* a value that unsets a setting (set), or
                                    says it is not set (get) */

/*
 * Sets n (1..DQ_SET__COUNT) settings of queue in one atomic step (per
 * partition): settings[i] (DQ_SET_*, each at most once) to values[i], or
 * unsets it when values[i] is DQ_UNSET.  Every name and range is checked
 * first (DQ_EINVAL, nothing sent); rate_max and rate_window_ms go
 * together: a call sets both or unsets both, or names neither.  A changed
 * rate limit counts the deliveries of the current window already made
 * (setting the same limit again, as restarting workers do, resets
 * nothing).  Returns 0 or a negative code.
 */
DQ_EXTERN int dq_config_set(dq_client *c, const char *queue, size_t n,
                            const int *settings, const int64_t *values);

/* Reads n settings of queue into values[i] (DQ_UNSET when not set).
 * Totals for a partitioned queue.  Returns 0 or a negative code. */
DQ_EXTERN int dq_config_get(dq_client *c, const char *queue, size_t n,
                            const int *settings, int64_t *values);

/* The name of a setting as the conf hash, the CLI and the bindings spell
 * it ("max_attempts", .., "rate_window_ms"), or NULL; and back: the
 * DQ_SET_* of a name, or DQ_EINVAL (DQ_ENULL for NULL). */
DQ_EXTERN const char *dq_setting_name(int setting);
DQ_EXTERN int dq_setting_by_name(const char *name);

/* ---- Push options: per job max attempts, expiry, repeat ------------------ */

#define DQ_HAVE_PUSH_OPTS 1
#define DQ_HAVE_REPEAT 1

/* Options a push can give its jobs, set one by one on an opaque object
 * (an FFI caller needs no struct layout).  One object may serve any
 * number of pushes; the library only reads it during a push call.  Not
 * thread-safe: a thread that changes it must not share it meanwhile. */
typedef struct dq_push_opts dq_push_opts;

/* A new, empty set of options (NULL when out of memory). */
DQ_EXTERN dq_push_opts *dq_push_opts_new(void);
/* Frees it; NULL is a no-op. */
DQ_EXTERN void dq_push_opts_free(dq_push_opts *o);

#define DQ_ATTEMPTS_MAX 1000000 /* largest max attempts (option or setting) */

/* Options: an int64_t each (dq_push_opts_set; 0 unsets it), but
 * DQ_PUSHOPT_CRON, which is text (dq_push_opts_set_str). */
#define DQ_PUSHOPT_MAX_ATTEMPTS 1 /* 1..DQ_ATTEMPTS_MAX: this job's own max
                                     attempts, before the queue's setting
                                     and DQ_OPT_MAX_ATTEMPTS */
#define DQ_PUSHOPT_EXPIRE_AT 2    /* 1..DQ_AT_MAX, epoch ms (server clock):
                                     no delivery of the job starts after it */
#define DQ_PUSHOPT_EXPIRE_IN_MS 3 /* 1..DQ_DELAY_MAX: the same, counted from
                                     the push (server clock); setting one
                                     of the two expiries replaces the other */

#define DQ_PUSHOPT_EVERY_MS 4      /* DQ_EVERY_MIN..DQ_DELAY_MAX: the job
                                       repeats every this many ms, counted
                                       from its first due time (see
                                       "Repeating jobs" below); setting it
                                       unsets DQ_PUSHOPT_CRON */
#define DQ_PUSHOPT_TZ_OFFSET_MIN 5 /* -DQ_TZ_OFFSET_MAX..DQ_TZ_OFFSET_MAX:
                                       the fixed offset from UTC, minutes
                                       (+330 = UTC+05:30), in which a
                                       DQ_PUSHOPT_CRON reads its times;
                                       0 = UTC */
#define DQ_PUSHOPT_CRON 6          /* text, dq_push_opts_set_str: the job
                                       repeats on a cron schedule; setting
                                       it unsets DQ_PUSHOPT_EVERY_MS */
#define DQ_PUSHOPT_GROUP 8         /* text, dq_push_opts_set_str: the
                                       job's group (a tenant, say): 1..
                                       DQ_GROUP_MAX bytes of letters,
                                       digits and "_-.:@"; due jobs are
                                       handed out round-robin over the
                                       groups that have some (jobs without
                                       a group forming one group), oldest
                                       first within a group */
#define DQ_GROUP_MAX 64             /* longest group name, bytes */
#define DQ_PUSHOPT_PRIORITY 9      /* 0..DQ_PRIORITY_MAX (0, the default):
                                       among due jobs (of one group, when
                                       groups are used) higher priority
                                       first, then oldest due first; never
                                       before its due time */
#define DQ_PRIORITY_MAX 9           /* highest priority */
#define DQ_EVERY_MIN 10             /* shortest repeat interval, ms */
#define DQ_TZ_OFFSET_MAX 840        /* largest offset from UTC, minutes */

/* Sets opt to value.  Returns 0, DQ_ENULL (o NULL) or DQ_EINVAL (unknown
 * option, DQ_PUSHOPT_CRON, or value out of range; the object is unchanged
 * and dq_push_opts_errmsg says why). */
DQ_EXTERN int dq_push_opts_set(dq_push_opts *o, int opt, int64_t value);

/*
 * Sets the text option opt (DQ_PUSHOPT_CRON or DQ_PUSHOPT_GROUP) to value,
 * a copy is kept; NULL or "" unsets it.  A cron expression has 5 fields separated by
 * blanks: minute (0-59) hour (0-23) day-of-month (1-31) month (1-12)
 * day-of-week (0-7, 0 and 7 are Sunday).  A field is '*', a number, a
 * range a-b, a step * /n or a-b/n (n at most the field's span), or a
 * comma list of those; months may be named jan..dec and days sun..sat
 * (any case).  When both day fields are restricted (neither starts with
 * '*') a day matches if either matches, else both must (Vixie cron).
 * Times are read in DQ_PUSHOPT_TZ_OFFSET_MIN (a fixed offset: no daylight
 * saving).  The expression is parsed here, once: push.lua gets explicit
 * value lists.
 * Returns 0, DQ_ENULL (o NULL) or DQ_EINVAL (opt is not a text option, a
 * bad field, a value out of range, a reversed range, a step of 0 or too
 * long, not 5 fields, longer than 200 bytes, or an expression that can
 * never fire such as "0 0 30 2 *"; the object is unchanged and
 * dq_push_opts_errmsg says why).
 */
DQ_EXTERN int dq_push_opts_set_str(dq_push_opts *o, int opt,
                                   const char *value);

/* Why the last dq_push_opts_set or dq_push_opts_set_str on o failed ("" if
 * it did not; "" for NULL).  Valid until the next set on o. */
DQ_EXTERN const char *dq_push_opts_errmsg(const dq_push_opts *o);

/* Push flag, with DQ_PUSH_KEEP or DQ_PUSH_REPLACE, for dq_push_ex and
 * dq_push_batch_ex: the times are absolute epoch ms (server clock, as
 * dq_push_at), not delays. */
#define DQ_PUSH_AT 2

/*
 * Debounce with a max wait: DQ_PUSH_DEBOUNCE in flags (instead of
 * DQ_PUSH_KEEP or DQ_PUSH_REPLACE; times are delays, never DQ_PUSH_AT; the
 * caller's ids; no repeat or expiry option: DQ_EINVAL, nothing sent), and
 * the max wait as the push option DQ_PUSHOPT_DEBOUNCE_MAX_MS (unset: no
 * cap).  Each push of an id, on the server clock, in one atomic step:
 *  - unknown id (or a dead job with that id, dropped): a new job, due
 *    after the delay; its deadline is this push + max wait.
 *    DQ_DEBOUNCE_CREATED.
 *  - pending, never delivered: the payload is replaced (latest wins) and
 *    the job is due at now + delay, but never after its deadline (a job
 *    pushed without the flag gets now + max wait as deadline).
 *    DQ_DEBOUNCE_MOVED.
 *  - delivered (in flight, or waiting for a retry after a nack): the
 *    running job is left alone; the id keeps exactly one follow-up with
 *    the latest payload, however many pushes come.  When the running
 *    delivery is acked, the follow-up becomes the pending job in the same
 *    step, due at the later of the ack and min(last push + delay, first
 *    such push + max wait), attempts 0.  A nack for a retry keeps the job
 *    and its follow-up; a delivery dead-lettered keeps its follow-up with
 *    it (a dq_dead_requeue runs the dead one, then the follow-up;
 *    dq_dead_purge and dq_cancel drop both; a DQ_PUSH_REPLACE push
 *    replaces the job and drops its follow-up).  DQ_DEBOUNCE_FOLLOWUP.
 * A debounced push never answers DQ_DONE.  Batches (each outcome as above,
 * an id twice in a call applied in order) and partitions (one id, one
 * partition: atomic) work alike; dq_push_batch counts all three outcomes.
 * The other options (DQ_PUSHOPT_MAX_ATTEMPTS) and the max wait are the
 * latest push's while the job is pending (its deadline stays the first
 * push's); a follow-up keeps the running job's.
 */
#define DQ_PUSH_DEBOUNCE 4
#define DQ_DEBOUNCE_CREATED 5  /* outcome: a new debounced job */
#define DQ_DEBOUNCE_MOVED 6    /* outcome: the pending job took the payload
                                  and its due time moved */
#define DQ_DEBOUNCE_FOLLOWUP 7 /* outcome: the job runs; its follow-up was
                                  made or took the payload */
#define DQ_PUSHOPT_DEBOUNCE_MAX_MS 7 /* 0..DQ_DELAY_MAX: with
                                        DQ_PUSH_DEBOUNCE, the longest a job
                                        waits after the first push that
                                        made it (0: no cap) */

/*
 * As dq_push (or dq_push_at with DQ_PUSH_AT in flags), with options (NULL:
 * none, exactly dq_push).  The options are the job's from this push on:
 * a DQ_PUSH_KEEP push of an id that exists changes nothing, a
 * DQ_PUSH_REPLACE push gives the job these (and only these) options.
 *
 * Expiry: a job whose expiry time has passed when a poll would deliver it
 * (first delivery or a retry) is not delivered: it is dead-lettered with
 * the reason "expired", or deleted when the queue's DQ_SET_EXPIRED
 * setting is DQ_EXPIRED_DROP.  A requeue from the dead set drops the
 * expiry (it is an operator's "run it").  An expiry not after the job's
 * due time, when both count the same way, is refused (DQ_EINVAL).
 */
DQ_EXTERN int dq_push_ex(dq_client *c, const char *queue, const void *payload,
                         size_t len, int64_t when, const char *id, int flags,
                         const dq_push_opts *opts, char *id_out,
                         size_t id_out_size, int *outcome);

/*
 * Repeating jobs (DQ_PUSHOPT_EVERY_MS or DQ_PUSHOPT_CRON): a job that,
 * when acked, is rescheduled for its next run in the same atomic step,
 * keeping its id and payload, so exactly one instance of it is pending or
 * in flight at any time however many producers register it.
 *  - A repeating push needs the caller's id (NULL: DQ_EINVAL) and takes no
 *    expiry (DQ_EINVAL); nothing is sent then.  With DQ_PUSH_KEEP an id
 *    that exists changes nothing (DQ_KEPT): registering a series from many
 *    producers, at every start, is safe.  (A done record of an earlier ack
 *    of the id does not answer DQ_DONE to a repeating push: the series is
 *    registered again.)  DQ_PUSH_REPLACE replaces the job and its rule, or
 *    drops the rule when the new push has none.
 *  - First run: every: at the push's time (delay or DQ_PUSH_AT time), the
 *    series' start; cron: the first matching minute at or after it.
 *  - An ack computes the next run on the server clock: every: the first
 *    start + k * every strictly after now; cron: the first matching
 *    minute strictly after now (in the job's offset).  Runs missed while
 *    no consumer ran are not made up: the late delivery is the one run,
 *    and the next comes after the ack.  The next run starts with attempt
 *    1, a new token and no last error (the run succeeded); a retried ack
 *    of the same delivery still answers 0.
 *  - A nack for a retry keeps the series (the retry is the same run).  A
 *    run that is dead-lettered (DQ_NACK_DEAD, max attempts) stops the
 *    series: the job waits in the dead set with its rule, and the ack of
 *    a run requeued by dq_dead_requeue resumes it (purge ends it).
 *  - dq_cancel stops the series (a pending run, or one in flight with
 *    DQ_CANCEL_INFLIGHT: its holder's ack then answers DQ_ENOTFOUND).
 * dq_job_info_repeat tells a job's rule.
 */

/* As dq_push_batch (times are delays, or epoch ms with DQ_PUSH_AT), every
 * job with the same options (NULL: none). */
DQ_EXTERN int dq_push_batch_ex(dq_client *c, const char *queue, size_t n,
                               const void *const *payloads,
                               const size_t *lens, const int64_t *times,
                               const char *const *ids, int flags,
                               const dq_push_opts *opts, char *ids_out,
                               int *outcomes);

/*
 * Cancels a job that has not been delivered yet.
 * flags: 0, or DQ_CANCEL_INFLIGHT to also remove a job that is in flight
 *        (its holder's ack/nack/extend then fail with DQ_ENOTFOUND and it
 *        is never delivered again).  Without it, an in-flight job is left alone
 *        and reported as DQ_CANCEL_BUSY, because its handler is already
 *        running and only its holder can finish it.  A job whose lease ran
 *        out is in flight until a poll claims it again (its holder may
 *        still ack it), so it too answers DQ_CANCEL_BUSY.
 * Returns DQ_CANCELED_PENDING (1) if a pending job was removed,
 * DQ_CANCEL_BUSY (2) if the job is in flight and was left alone,
 * DQ_CANCELED_INFLIGHT (3) if an in-flight job was removed (with the flag),
 * 0 if there is no pending or in-flight job with that id (dead jobs are
 * untouched: see dq_dead_purge), or a negative code.
 */
#define DQ_CANCEL_INFLIGHT 1
#define DQ_CANCELED_PENDING 1
#define DQ_CANCEL_BUSY 2
#define DQ_CANCELED_INFLIGHT 3
DQ_EXTERN int dq_cancel(dq_client *c, const char *queue, const char *id,
                        int flags);

/*
 * Moves a pending job (scheduled or already due) to a new due time in one
 * atomic step, keeping everything else: payload, attempts, options
 * (max attempts, expiry: a job moved past its expiry is never delivered),
 * repeat rule and last failure reason.  Nothing is deleted and re-pushed,
 * so no consumer can miss the job or get it twice.  On a repeating job it
 * moves the next run only: the runs after it follow the rule from its ack.
 * A job held in the compact layout goes back to the default layout at its
 * new time.  A job moved earlier than the queue's next due time wakes a
 * waiting consumer as a push does (see the README, "Waking on time").
 * when: a delay from now on the Redis server's clock (0..DQ_DELAY_MAX), or
 *       with DQ_RESCHED_AT the absolute epoch ms (0..DQ_AT_MAX; a time in
 *       the past makes the job due at once, ahead of later ones).
 * flags: 0, or any of
 *   DQ_RESCHED_AT      when is an epoch ms (the same bit as DQ_PUSH_AT)
 *   DQ_RESCHED_REVIVE  also move a dead job back to pending at the new
 *                      time, as dq_dead_requeue does (attempts restart,
 *                      an expiry that passed no longer holds, the last
 *                      failure reason stays)
 * Returns the job's outcome:
 *   DQ_RESCHED_MOVED (1)     the pending job now has the new due time
 *   DQ_RESCHED_INFLIGHT (2)  the job is in flight (also when its lease ran
 *                            out and no poll claimed it again: its holder
 *                            may still ack it); left alone
 *   DQ_RESCHED_DEAD (3)      the job is dead; left alone
 *   DQ_RESCHED_REVIVED (4)   the job was dead and is pending again at the
 *                            new time (DQ_RESCHED_REVIVE)
 *   DQ_RESCHED_UNKNOWN (0)   no such job (never pushed, acked, cancelled,
 *                            purged)
 * or a negative code: bad input (NULL or bad queue or id, a time out of
 * range, an unknown flag) is refused with its code and message and
 * nothing is sent.
 */
#define DQ_RESCHED_REVIVE 1
#define DQ_RESCHED_AT 2
#define DQ_RESCHED_UNKNOWN 0
#define DQ_RESCHED_MOVED 1
#define DQ_RESCHED_INFLIGHT 2
#define DQ_RESCHED_DEAD 3
#define DQ_RESCHED_REVIVED 4
DQ_EXTERN int dq_reschedule(dq_client *c, const char *queue, const char *id,
                            int64_t when, int flags);

/* Promotes a pending job: due now, on the server's clock, otherwise as
 * dq_reschedule with a delay of 0 (flags: 0 or DQ_RESCHED_REVIVE; the
 * same outcomes).  The job is delivered by the next poll, ahead of the
 * jobs due later. */
DQ_EXTERN int dq_promote(dq_client *c, const char *queue, const char *id,
                         int flags);

/* dq_reschedule of n jobs (1..DQ_BATCH_MAX), all to the same time, in one
 * round trip (script calls of up to 1000 jobs, each atomic; on a
 * partitioned queue one call per partition).  outcomes: NULL or n ints
 * receiving each job's DQ_RESCHED_* outcome; an id named twice gets the
 * same outcome twice.  Returns how many of the n entries moved or revived
 * (an id named twice counts twice), or a negative code for the call as a
 * whole (any bad id refuses the whole call, nothing sent). */
DQ_EXTERN int dq_reschedule_batch(dq_client *c, const char *queue, size_t n,
                                  const char *const *ids, int64_t when,
                                  int flags, int *outcomes);

/* ---- Consuming -------------------------------------------------------- */

/*
 * Atomically claims up to max (1..DQ_POLL_MAX) jobs whose due time has
 * passed, oldest due first, and leases each to the caller for lease_ms
 * (DQ_LEASE_MIN..DQ_LEASE_MAX; 0: the queue's DQ_SET_LEASE_MS setting, or
 * DQ_OPT_LEASE_MS for a queue without one; each job's lease deadline says
 * what it got).  Jobs whose lease ran out without an ack are
 * due again at their lease deadline and are delivered with attempt + 1 (and
 * a new token; until then the old holder may still ack them).  With
 * DQ_OPT_MAX_ATTEMPTS = M > 0, a job that already had M deliveries goes to
 * the dead set instead of being delivered again; its last holder's token
 * stays valid there (a late ack still finishes it).
 *
 * out:         receives a list (NULL when no job was claimed); free it with
 *              dq_jobs_free.  Each job carries its group and priority
 *              (dq_job_group, dq_job_priority), as with every poll.
 * next_due_ms: NULL, or receives how long (ms, server clock, rounded up)
 *              until the next job is due when none was claimed: 0 if
 *              jobs were claimed or something is due now, -1 if the queue has
 *              nothing pending or in flight.  Sleep that long, then poll.
 *
 * Returns the number of jobs claimed (0..max) or a negative code.
 */
DQ_EXTERN int dq_poll(dq_client *c, const char *queue, int max,
                      int64_t lease_ms, dq_jobs **out, int64_t *next_due_ms);

/*
 * As dq_poll, but when nothing is due, waits up to timeout_ms (0..
 * DQ_DELAY_MAX) for a job to come due, without busy polling.  Its polls
 * register the client as a waiting consumer of the queue: of all waiting
 * consumers one sleeps until the next due time (on its own clock, from the
 * server's offsets), the others until DQ_OPT_WAIT_CAP_MS, and a push of an
 * earlier job, or due work another poll left behind, wakes exactly one of
 * them, on a second connection opened on first use (README, "Waking on
 * time").  A call right after one that returned jobs does not poll first
 * when nothing was left due: it waits.  While idle it sends Redis at most
 * two commands per DQ_OPT_WAIT_CAP_MS (default 1 s): one poll and one PING.
 * A client that stops calling it but stays open may still be woken for jobs
 * until its cap has passed; others poll them then.  One client waits as one
 * consumer: threads need a client each (as for every call).
 * Returns the number of jobs claimed, 0 on timeout, or a negative code.
 */
DQ_EXTERN int dq_poll_wait(dq_client *c, const char *queue, int max,
                           int64_t lease_ms, int64_t timeout_ms,
                           dq_jobs **out);

/* Modes of choosing among several queues (dq_poll_wait_multi,
 * DQ_COPT_PRIORITY). */
#define DQ_PRIO_STRICT 1   /* the first queue in list order with due work */
#define DQ_PRIO_WEIGHTED 2 /* among the queues with due work, one drawn at
                              random in proportion to its weight */

/*
 * As dq_poll_wait, over n queues (1..DQ_MULTI_MAX, queues[0..n-1], no name
 * twice): claims up to max jobs of ONE of them, chosen by mode:
 * DQ_PRIO_STRICT takes the first queue in list order that has due work
 * (a later queue is served only while every earlier one has none);
 * DQ_PRIO_WEIGHTED draws among the queues with due work, each with
 * probability weights[i] / (sum of their weights), so busy queues share
 * deliveries in proportion to their weights and none starves.  weights:
 * NULL (every queue 1) or n ints in 1..DQ_WEIGHT_MAX; read in strict mode
 * too (checked), but only the order counts there.
 *
 * The wait is the one dq_poll_wait does, for every queue at once: one
 * wake-up connection subscribed to this client's channel of each queue
 * (and of each partition), and each poll registers the client as a
 * waiting consumer of its queue.  A queue is polled only when the client
 * knows it may have due work (a poll left some, a wake-up says so, its
 * next due time it owns has come) or its idle cap (DQ_OPT_WAIT_CAP_MS)
 * has passed: an idle queue costs one poll per cap, as with dq_poll_wait.
 * dq_poll_wait(c, q, ...) is this call with the one queue q.
 *
 * out:         as dq_poll_wait: the jobs (NULL when none), all of one
 *              queue; free with dq_jobs_free.
 * queue_index: NULL, or receives the index in queues of the queue the
 *              jobs came from (-1 when none were claimed).  Ack, nack and
 *              extend them on that queue.
 * Returns the number of jobs claimed, 0 on timeout, or a negative code:
 * DQ_EINVAL (nothing sent) for queues NULL or an element NULL, n 0 or
 * above DQ_MULTI_MAX, a name given twice, a weight out of range or an
 * unknown mode; DQ_EQUEUE for an empty or too long name; DQ_ENULL for out
 * NULL; the codes of dq_poll_wait otherwise.  The arrays are read during
 * the call only.  Same thread rules as dq_poll_wait.
 */
DQ_EXTERN int dq_poll_wait_multi(dq_client *c, size_t n,
                                 const char *const *queues,
                                 const int *weights, int mode, int max,
                                 int64_t lease_ms, int64_t timeout_ms,
                                 dq_jobs **out, int *queue_index);

/* Finishes a job and deletes all its data.  Returns 0, DQ_ESTALE if token
 * is not the job's current lease token (the lease ran out and the job was
 * claimed again, or it was nacked or replaced, or another holder acked it;
 * nothing changes), or DQ_ENOTFOUND if there is no such job (cancelled with
 * DQ_CANCEL_INFLIGHT, purged, never existed, or finished longer ago than
 * the done window).  An ack after the lease deadline still succeeds while
 * no other consumer has claimed the job, also when a poll has dead-lettered
 * it meanwhile for DQ_OPT_MAX_ATTEMPTS.  Retrying an ack that failed with
 * DQ_EIO/DQ_ETIMEDOUT: 0 means yours landed (the job's done record holds
 * your token, see DQ_OPT_DONE_TTL_MS), DQ_ESTALE that someone else finished
 * or holds the job, DQ_ENOTFOUND that it is gone and nothing says who
 * finished it. */
DQ_EXTERN int dq_ack(dq_client *c, const char *queue, const char *id,
                     const char *token);

/* Acks n jobs (1..DQ_BATCH_MAX) in one round trip (script calls of up to
 * 1000 jobs, each atomic).  results: NULL or n ints receiving 0, DQ_ESTALE
 * or DQ_ENOTFOUND per job, as dq_ack would; an id named twice is acked once
 * and its later entries get DQ_ENOTFOUND.  Returns the number acked, or a
 * negative code for the call as a whole (results are filled in for
 * DQ_EREPLICAS too: the acks were made, not confirmed; see "Durable
 * mode"). */
DQ_EXTERN int dq_ack_batch(dq_client *c, const char *queue, size_t n,
                           const char *const *ids, const char *const *tokens,
                           int *results);

/* Nack flags. */
#define DQ_NACK_DEAD 1 /* give up: move the job to the dead set now */
#define DQ_NACK_BACKOFF 2 /* the queue's backoff settings (DQ_SET_BACKOFF),
                             when it has them, decide the delay; delay_ms
                             is the delay for a queue without them */

/* Releases a leased job: due again after delay_ms (0..DQ_DELAY_MAX), with
 * its attempt count kept; or, with DQ_NACK_DEAD or when it has had
 * DQ_OPT_MAX_ATTEMPTS deliveries, moved to the dead set.  Returns 0 when
 * requeued, 1 when dead-lettered, DQ_ESTALE, DQ_ENOTFOUND or another code. */
DQ_EXTERN int dq_nack(dq_client *c, const char *queue, const char *id,
                      const char *token, int64_t delay_ms, int flags);

/* As dq_nack, and records why: reason (reason_len bytes, binary-safe, at
 * most DQ_REASON_MAX; reason may be NULL only if reason_len is 0, which
 * records an empty reason) becomes the job's last failure reason, with the
 * server time, in the same script call.  dq_get, dq_list and dq_dead_list
 * show it.  A longer reason is refused with DQ_EINVAL (nothing is sent,
 * nothing changes; it is not cut).  The reason stays with the job through
 * later deliveries and dq_dead_requeue, until a later nack with a reason
 * (or a poll that dead-letters the job for DQ_OPT_MAX_ATTEMPTS: "max
 * attempts") replaces it, a DQ_PUSH_REPLACE push of the id drops it, or
 * the job's data is deleted (ack, cancel, purge).  dq_nack records no
 * reason and leaves the last one as it was.  Returns as dq_nack. */
DQ_EXTERN int dq_nack_reason(dq_client *c, const char *queue, const char *id,
                             const char *token, int64_t delay_ms, int flags,
                             const void *reason, size_t reason_len);

/* Sets the lease of a job you hold to lease_ms from now (server clock).
 * deadline_ms: NULL or receives the new deadline (server epoch ms).
 * Returns 0, DQ_ESTALE (lease lost), DQ_ENOTFOUND or another code.
 * A lease that ran out (its deadline passed) but that no poll claimed
 * again is still yours: the extend brings it back, but it then takes a
 * slot anew, so on a queue with DQ_SET_MAX_INFLIGHT, or a job of a named
 * group under DQ_SET_GROUP_MAX_INFLIGHT, only if that limit has room for
 * it now; else DQ_ESTALE and nothing changes (the job stays due as a
 * lease that ran out).  A lease still live keeps its slot: its extend
 * never asks a limit. */
DQ_EXTERN int dq_extend(dq_client *c, const char *queue, const char *id,
                        const char *token, int64_t lease_ms,
                        int64_t *deadline_ms);

/* ---- Dead letters ------------------------------------------------------ */

/* Lists dead jobs, oldest first: up to count (1..DQ_POLL_MAX) from offset.
 * Returns the number listed; *out as for dq_poll (attempt = deliveries made,
 * due = time of death, no token; dq_job_last_error and dq_job_failed_ms
 * say why it failed last, when that was recorded). */
DQ_EXTERN int dq_dead_list(dq_client *c, const char *queue, int64_t offset,
                           int count, dq_jobs **out);
/* Moves dead jobs back to pending, due after delay_ms, attempts reset to 0.
 * id: one job, or NULL for the oldest up to 1000 dead jobs per call (call
 * again until it returns 0).  Returns the number requeued. */
DQ_EXTERN int dq_dead_requeue(dq_client *c, const char *queue, const char *id,
                              int64_t delay_ms);
/* Deletes dead jobs: id, or NULL for the oldest up to 1000 per call.
 * Returns the number deleted. */
DQ_EXTERN int dq_dead_purge(dq_client *c, const char *queue, const char *id);

/* ---- Listing ----------------------------------------------------------- */

/* Defined when dq_list exists (added in the same version as it). */
#define DQ_HAVE_LIST 1

/* What dq_list lists. */
#define DQ_LIST_SCHEDULED 1 /* pending jobs, by due time (due ones too) */
#define DQ_LIST_INFLIGHT 2  /* leased jobs, by lease deadline */
#define DQ_LIST_DEAD 3      /* dead jobs, by time of death */

/*
 * Lists the jobs of a queue in one state, in time order, without changing
 * anything (a read-only script: it also runs on a replica): up to count
 * (1..DQ_POLL_MAX) from offset (0..INT32_MAX), for paging.
 *
 * which:  DQ_LIST_SCHEDULED, DQ_LIST_INFLIGHT or DQ_LIST_DEAD.
 * out:    as for dq_poll.  Per job: id, payload, attempt (deliveries so
 *         far), due_ms = due time (scheduled), lease deadline (in flight:
 *         when it is due again unless acked) or time of death (dead);
 *         lease_deadline_ms = the lease deadline for in-flight jobs, else
 *         0.  Listed jobs carry no token: listing never hands out a lease.
 *         A lease that ran out is listed in flight until a poll reclaims it.
 * now_ms: NULL, or receives the server's time of the listing (to show the
 *         times relative to it).
 *
 * Returns the number listed (0..count) or a negative code (DQ_EINVAL for
 * an unknown which, a bad offset or count).
 */
DQ_EXTERN int dq_list(dq_client *c, const char *queue, int which,
                      int64_t offset, int count, dq_jobs **out,
                      int64_t *now_ms);

/* ---- The queues of a namespace ---------------------------------------- */

/* Defined when dq_queues exists (added in the same version as it). */
#define DQ_HAVE_QUEUES 1
#define DQ_QUEUES_MAX 100000     /* queues one dq_queues lists, at most */
#define DQ_QUEUES_SCAN_COUNT 1000 /* the COUNT of each of its SCAN calls */
#define DQ_QUEUES_ROUNDS 1000    /* its SCAN calls per node, at most */

typedef struct dq_queue_list dq_queue_list; /* the queues dq_queues found */

/*
 * Lists the queues of the client's namespace (DQ_OPT_NAMESPACE) in its
 * database, without changing anything: every queue with a key in Redis
 * (jobs in any state, of either layout, settings, counters, the done
 * window).  One SCAN cursor ("SCAN ... MATCH <ns>:{*}:* COUNT
 * DQ_QUEUES_SCAN_COUNT") on the one node, on the primary the Sentinels
 * name, or on each primary of a Redis Cluster in turn.  A partitioned
 * queue is listed once, by its name.  Names are sorted as strcmp does.
 *
 * max: the most queues to list, 1..DQ_QUEUES_MAX.
 * out: receives the list (also an empty one); free it with
 *      dq_queue_list_free.  NULL when the call fails.
 *
 * Bounded: at most DQ_QUEUES_ROUNDS SCAN calls per node, each within
 * DQ_OPT_COMMAND_TIMEOUT_MS (DQ_QUEUES_ROUNDS * DQ_QUEUES_SCAN_COUNT keys
 * visited per node; the compact layout keeps many keys per queue).  When
 * a node has more keys, or there are more than max queues, the list holds
 * what was found and dq_queue_list_complete says 0.  SCAN's guarantee:
 * a queue that exists during the whole call is listed; one made or
 * emptied meanwhile may be or not.  A slot that moves between primaries
 * during the call may hide its queues from it.
 *
 * Returns the number of queues listed (0..max) or a negative code:
 * DQ_ENULL (out NULL) or DQ_EINVAL (max out of range), nothing sent then;
 * DQ_EIO, DQ_ETIMEDOUT, DQ_EREDIS (e.g. an ACL that refuses SCAN), ...
 * Like the other read-only calls it reconnects and tries once more by
 * itself after a DQ_EIO.  The list is independent of the client once
 * returned (the usual thread rules hold for c).
 */
DQ_EXTERN int dq_queues(dq_client *c, int max, dq_queue_list **out);
/* Accessors: all accept NULL (and i out of range) and then return 0 /
 * NULL.  Names stay valid as long as the list. */
DQ_EXTERN size_t dq_queue_list_count(const dq_queue_list *list);
/* The i-th queue's name (NUL-terminated; a valid name for every call). */
DQ_EXTERN const char *dq_queue_list_name(const dq_queue_list *list,
                                         size_t i);
/* 1 if the i-th queue has partitions (keys "{name#p}"), else 0. */
DQ_EXTERN int dq_queue_list_partitioned(const dq_queue_list *list,
                                        size_t i);
/* 1 if the scan went through on every node and found at most max
 * queues, 0 if a bound cut it short. */
DQ_EXTERN int dq_queue_list_complete(const dq_queue_list *list);
/* Frees a list.  NULL is a no-op. */
DQ_EXTERN void dq_queue_list_free(dq_queue_list *list);

/* ---- Counts per tenant group ------------------------------------------ */

/* Defined when dq_group_stats exists (added in the same version as it). */
#define DQ_HAVE_GROUP_STATS 1
#define DQ_GROUP_STATS_MAX 1000 /* groups one dq_group_stats reads, at most */

typedef struct dq_group_list dq_group_list; /* what dq_group_stats found */

/*
 * The counts of a queue's tenant groups (DQ_PUSHOPT_GROUP), read-only:
 * the first max groups in turn order (those a poll serves next first;
 * group "" is the jobs without a group of a queue that has groups), and
  * for each the jobs of its index due now and due later (all priorities),
 * and its jobs in flight: under DQ_SET_GROUP_MAX_INFLIGHT from the lease
 * index the polls keep per named group for the limit, without it counted
 * from the leases themselves (group "", the jobs without a group, counts
 * 0 in flight).  Then, while fewer than max are listed, the groups whose
 * jobs are all in flight (due 0, later 0).  The index is a hint: a job
 * cancelled while pending counts until a poll of its group drops it.  A
 * partitioned queue: each partition's first max groups, summed by name,
 * those with jobs pending first, at most max in all.  A queue without
 * groups: an empty list.
 *
 * max: the most groups to read, 1..DQ_GROUP_STATS_MAX.
 * out: receives the list (also an empty one); free it with
 *      dq_group_list_free.  NULL when the call fails.
 *
  * Bounded: one script per partition reads at most max groups with jobs
 * pending, each with two ZCOUNTs per priority level in use, and the jobs
 * in flight: under a limit per group at most 1024 leases of each group
 * listed (at most max more with jobs in flight only), without one at most
 * the 10,000 live leases that end first (and their jobs' options), so a
 * partition with more in flight counts those.
 * Returns the number of groups listed (0..max) or a negative code:
 * DQ_ENULL (queue or out NULL), DQ_EQUEUE (bad queue name), DQ_EINVAL
 * (max out of range), nothing sent then; DQ_EIO, DQ_ETIMEDOUT, DQ_EREDIS, ...  Like the other
 * read-only calls it tries once more by itself after a DQ_EIO.
 */
DQ_EXTERN int dq_group_stats(dq_client *c, const char *queue, int max,
                             dq_group_list **out);
/* Accessors: all accept NULL (and i out of range) and then return 0 /
 * NULL.  Names stay valid as long as the list. */
DQ_EXTERN size_t dq_group_list_count(const dq_group_list *list);
/* The i-th group's name (NUL-terminated). */
DQ_EXTERN const char *dq_group_list_name(const dq_group_list *list,
                                         size_t i);
/* Its jobs due now, due later, in flight. */
DQ_EXTERN int64_t dq_group_list_due(const dq_group_list *list, size_t i);
DQ_EXTERN int64_t dq_group_list_later(const dq_group_list *list, size_t i);
DQ_EXTERN int64_t dq_group_list_inflight(const dq_group_list *list,
                                         size_t i);
/* Frees a list.  NULL is a no-op. */
DQ_EXTERN void dq_group_list_free(dq_group_list *list);

/* ---- Looking up one job ------------------------------------------------ */

/* Defined when dq_get exists (added in the same version as it). */
#define DQ_HAVE_GET 1

/* What a job is doing, as dq_job_info_state tells it. */
#define DQ_JOB_UNKNOWN 0   /* no such job (never existed, acked, cancelled,
                              purged); also for a NULL info */
#define DQ_JOB_SCHEDULED 1 /* pending, due later */
#define DQ_JOB_DUE 2       /* pending and due: the next poll may take it */
#define DQ_JOB_INFLIGHT 3  /* leased to a consumer; a lease that ran out
                              stays in flight until a poll claims the job
                              again (its holder may still ack it), as
                              dq_list and dq_cancel see it */
#define DQ_JOB_DEAD 4      /* dead-lettered */

typedef struct dq_job_info dq_job_info; /* one job as dq_get saw it */

/*
 * Looks a job up by its id, in one round trip and without changing
 * anything (a read-only script: it also runs on a replica).  On a
 * partitioned queue it asks the partition the id hashes to.
 *
 * id:   1..DQ_ID_MAX bytes.
 * out:  receives the job's info when it is found (free it with
 *       dq_job_info_free), NULL otherwise.
 *
 * Returns 1 when the job exists, 0 when there is no pending, in-flight or
 * dead job with that id, or a negative code (DQ_ENULL, DQ_EQUEUE, DQ_EID:
 * nothing was sent).  Like the other read-only calls it reconnects and
 * tries once more by itself after a DQ_EIO.
 */
DQ_EXTERN int dq_get(dq_client *c, const char *queue, const char *id,
                     dq_job_info **out);
/* Accessors: all accept NULL and then return DQ_JOB_UNKNOWN / NULL / 0.
 * Pointers stay valid as long as the info lives. */
DQ_EXTERN int dq_job_info_state(const dq_job_info *info);
DQ_EXTERN const char *dq_job_info_id(const dq_job_info *info);
/* Due time (scheduled, due), lease deadline (in flight: when the job is due
 * again unless acked) or time of death (dead); server epoch ms. */
DQ_EXTERN int64_t dq_job_info_due_ms(const dq_job_info *info);
/* Deliveries so far (0 before the first; dq_dead_requeue resets it). */
DQ_EXTERN int64_t dq_job_info_attempts(const dq_job_info *info);
/* The lease deadline of a job in flight (server epoch ms), else 0; one
 * before now_ms is a lease that ran out. */
DQ_EXTERN int64_t dq_job_info_lease_deadline_ms(const dq_job_info *info);
/* Payload bytes (one NUL byte follows them); *len receives the length. */
DQ_EXTERN const void *dq_job_info_payload(const dq_job_info *info,
                                          size_t *len);
/* The last failure reason, as dq_job_last_error: NULL (and *len 0) when
 * none was recorded. */
DQ_EXTERN const void *dq_job_info_last_error(const dq_job_info *info,
                                             size_t *len);
/* When the last failure reason was recorded (server epoch ms), 0 if none. */
DQ_EXTERN int64_t dq_job_info_failed_ms(const dq_job_info *info);
/* The server's time of the lookup (epoch ms). */
DQ_EXTERN int64_t dq_job_info_now_ms(const dq_job_info *info);
/* A debounced job (DQ_PUSH_DEBOUNCE) that runs while pushes wait as its
 * follow-up: the earliest time (epoch ms, server clock) the follow-up may
 * be due; it becomes the pending job when the running delivery is acked,
 * due at the later of the ack and this.  0 when no follow-up waits. */
DQ_EXTERN int64_t dq_job_info_followup_ms(const dq_job_info *info);
/* A repeating job's rule (see "Repeating jobs"), as people read it:
 * "every <ms> ms from <start epoch ms>" or "cron <expression> tz <+-offset
 * minutes>"; NULL when the job does not repeat (or info is NULL).  Valid
 * as long as info. */
DQ_EXTERN const char *dq_job_info_repeat(const dq_job_info *info);
/* The job's group (DQ_PUSHOPT_GROUP), or NULL when it has none (or info
 * is NULL).  Valid as long as info. */
DQ_EXTERN const char *dq_job_info_group(const dq_job_info *info);
/* The job's priority (DQ_PUSHOPT_PRIORITY), 0 when it has none (or info
 * is NULL). */
DQ_EXTERN int dq_job_info_priority(const dq_job_info *info);
/* A deep copy (for an async callback's borrowed info); free it with
 * dq_job_info_free.  NULL if out of memory or info is NULL. */
DQ_EXTERN dq_job_info *dq_job_info_dup(const dq_job_info *info);
/* Frees an info.  NULL is a no-op. */
DQ_EXTERN void dq_job_info_free(dq_job_info *info);

/* ---- Stats ------------------------------------------------------------- */

/* Counts for one queue, read atomically.  Each out pointer may be NULL.
 *   scheduled:   pending jobs not yet due
 *   due:         pending jobs due now (including expired leases)
 *   inflight:    jobs leased to a consumer (lease not yet expired)
 *   dead:        dead-lettered jobs
 *   next_due_ms: ms until the earliest pending job is due (0 if one is due,
 *                -1 if none is pending) */
DQ_EXTERN int dq_stats(dq_client *c, const char *queue, int64_t *scheduled,
                       int64_t *due, int64_t *inflight, int64_t *dead,
                       int64_t *next_due_ms);

/* Defined when dq_count_due exists (added in the same version as it). */
#define DQ_HAVE_COUNT_DUE 1
#define DQ_COUNT_DUE_MAX 64 /* bounds in one dq_count_due */

/*
 * Counts the pending jobs of a queue by when they fall due, in windows
 * relative to the Redis server's clock, without reading any job: one
 * read-only script (one ZCOUNT per window on the queue's due set; it also
 * runs on a replica).  On a partitioned queue every partition is counted
 * (one call each, in one pipeline) and the counts are summed.  For a
 * histogram of a big queue at the cost of a few commands.
 *
 * bounds_ms: nbounds (1..DQ_COUNT_DUE_MAX) upper bounds of the windows, ms
 *            from now (server clock), strictly increasing, each in
 *            -DQ_DELAY_MAX..DQ_DELAY_MAX; read during the call only.
 * counts:    nbounds + 1 int64_t, receiving: counts[0] the jobs due at or
 *            before now + bounds_ms[0] (with bounds_ms[0] = 0: those due
 *            now); counts[i], 0 < i < nbounds, those due after now +
 *            bounds_ms[i-1] and at or before now + bounds_ms[i];
 *            counts[nbounds] those due after now + bounds_ms[nbounds-1].
 *            They add up to the queue's pending jobs (scheduled + due of
 *            dq_stats, less the in-flight jobs whose lease ran out, which
 *            dq_stats counts as due).  Left unchanged on failure.
 * now_ms:    NULL, or receives the server time the windows count from (on
 *            a partitioned queue each partition counts from its own
 *            reading of the time; this is the latest of them).
 *
 * Returns 0 or a negative code: DQ_EINVAL for bounds_ms NULL, nbounds out
 * of range, a bound out of range or not above the one before; DQ_ENULL
 * for counts NULL; DQ_EQUEUE for a bad queue name (in every such case
 * nothing was sent).  Like the other read-only calls it reconnects and
 * tries once more by itself after a DQ_EIO.
 */
DQ_EXTERN int dq_count_due(dq_client *c, const char *queue,
                           const int64_t *bounds_ms, int nbounds,
                           int64_t *counts, int64_t *now_ms);

/* Totals for one queue kept by the clients that set DQ_OPT_COUNTERS (all 0
 * while none did), read atomically; each out pointer may be NULL.
 *   delivered: jobs handed out by polls (every delivery, retries included)
 *   acked:     jobs acked
 *   retried:   jobs nacked for a retry
 *   failed:    jobs dead-lettered (nacked as dead, or out of attempts)
 * They only grow: rates come from two readings.  Returns 0 or a code. */
DQ_EXTERN int dq_counters(dq_client *c, const char *queue,
                          int64_t *delivered, int64_t *acked,
                          int64_t *retried, int64_t *failed);

#ifdef __cplusplus
}
#endif
#endif /* DELAYQ_H */
