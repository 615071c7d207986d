/*
 * ops.h - per operation: check arguments, build the EVALSHA argv, decode
 * the reply.  Pure: no I/O.  The sync client (client.c) and the async
 * client run exactly these, so the two cannot drift apart.
 */
#ifndef DQ_OPS_H
#define DQ_OPS_H

#include "internal.h"
#include "reply.h"
#include "scripts.h"

#define DQ_NKEYS 9 /* keys a script can get (see lua/include/keys.lua): due, lease,
                      jobs, dead, done always; idle to the scripts that wake
                      or register consumers; conf (the queue's settings) and
                      rate (its rate limit's log) to those that read them;
                      counts when counting */
#define DQ_CHUNK 1000       /* jobs per script call of a batch */
/* Generated ids: 14 characters of [0-9A-Za-z], ~83 random bits.  Short on
 * purpose: an id is stored twice per job (ZSET member and HASH field), and
 * up to 14 bytes it stays in a smaller allocator class. */
#define DQ_GEN_ID_LEN 14
/* Bytes of payloads and ids per push script call: far below Redis's query
 * buffer limit (1 GiB), so a batch of big payloads is many short calls
 * instead of one that Redis may refuse half-read.  A single bigger job
 * still goes alone. */
#define DQ_CHUNK_BYTES (8 * 1024 * 1024)
#define DQ_ENC_QUEUE_MAX (DQ_QUEUE_MAX * 3) /* percent-encoded name */
#define DQ_KEY_MAX (64 + 2 + DQ_ENC_QUEUE_MAX + 16) /* + "#part" */

/* The keys of one queue (or one partition of it), cached for the last
 * one used. */
typedef struct dq__keys {
    char queue[DQ_QUEUE_MAX + 1]; /* queue name these keys belong to */
    int part;                     /* partition, -1 for the plain queue */
    char ns[65];                  /* namespace they were built with */
    char key[DQ_NKEYS][DQ_KEY_MAX]; /* due, lease, jobs, dead, done,
                                       idle, conf, rate, counts */
    size_t len[DQ_NKEYS];         /* lengths of key[] */
    int db;                       /* database the channel was built for */
    char chan[DQ_KEY_MAX + 16];   /* wake-up channel: <prefix>wake:<db> */
    size_t chanlen;
    char chanarg[DQ_KEY_MAX + 18]; /* ARGV[1]: chan after the flags '+'
                                      (counters) and '!' (sharded), see
                                      lua/include/keys.lua */
    size_t chanarglen;
    int slot;                     /* the queue's cluster hash slot */
    int sharded, counting;        /* the core's flags chanarg was made for */
} dq__keys;

/* A queue as one client knows it: whether the partition count recorded in
 * Redis was checked, where the next poll starts, and when this client, as
 * a waiting consumer, is to poll each partition (one entry for a plain
 * queue): monotonic us, as its registration among the queue's waiting
 * consumers says (lua/poll.lua) or a wake-up moved it; 0: now or unknown,
 * INT64_MAX: never by itself. */
#define DQ_PARTS_MAX 1024
/* Room for every queue of one dq_poll_wait_multi (or multi-queue
 * consumer) plus a few others used beside them. */
#define DQ_QPARTS_CACHE (DQ_MULTI_MAX + 8)
typedef struct dq__qparts {
    char queue[DQ_QUEUE_MAX + 1]; /* "" when the entry is free */
    int checked;
    int cursor;
    int64_t *due_us;              /* partitions entries */
    int64_t *told;                /* per partition: wake-ups taken so far
                                     (in due_us's block) */
} dq__qparts;

/* What both clients share: options, key cache, id generator. */
typedef struct dq__core {
    dq_options opts;   /* private copy of the caller's options */
    dq__keys keys;      /* keys of the last queue used */
    uint64_t rng[2];   /* id generator state (xorshift128+) */
    uint64_t rng_pid;  /* pid the generator was seeded in */
    int db;            /* database selected by the URI (wake channel) */
    int sharded;       /* wake-ups over sharded pub/sub (a cluster) */
    int counting;      /* scripts keep the queue's counters */
    int partitions;    /* of every queue this client uses; 1 = plain */
    int layout;        /* DQ_LAYOUT_* of queues without the setting */
    dq__qparts qp[DQ_QPARTS_CACHE]; /* queues last polled by a waiting
                                       consumer (partitioned or not) */
    char me[DQ_GEN_ID_LEN + 1]; /* id as a waiting consumer, "" until used */
    uint64_t me_pid;            /* pid it was made in */
    unsigned qp_next;  /* entry to reuse next */
} dq__core;

/* Initializes core from opts (copied); DQ_OK or DQ_ENOMEM. */
int dq__core_init(dq__core *core, const dq_options *opts);
void dq__core_clear(dq__core *core);

/* One script call: "EVALSHA sha 6 k1..k6 channel argv..." (5 keys when
 * the client keeps no counters).  Built as an
 * argv (pointing into the caller's data), then sealed into owned RESP
 * bytes (resp, resp_len, and a NUL after them: hiredis's async side peeks
 * one byte past a formatted command) that any link can send as they are,
 * now or later; the argv is gone after sealing. */
#define DQ_CMD_INLINE 40
#define DQ_CMD_INLINE_RESP 512
typedef struct dq__cmd {
    int script;          /* DQ_SCRIPT_* */
    int argc;            /* arguments so far */
    int cap;             /* room in argv/lens */
    const char **argv;   /* inline_argv or heap; NULL once sealed */
    size_t *lens;        /* inline_lens or heap */
    char *nums;          /* storage for formatted integers */
    size_t nums_used, nums_cap;
    char *resp;          /* sealed command: inline_resp or heap */
    size_t resp_len;
    size_t rest_off;     /* where the arguments after the sha start */
    int eval;            /* resp sends the body (EVAL), not the sha */
    int slot;            /* cluster hash slot of its keys: where it goes */
    const char *inline_argv[DQ_CMD_INLINE];
    size_t inline_lens[DQ_CMD_INLINE];
    char inline_nums[DQ_CMD_INLINE * 21];
    char inline_resp[DQ_CMD_INLINE_RESP];
} dq__cmd;

/* Starts a call of script with room for nargs script arguments. */
int dq__cmd_begin(dq__cmd *c, int script, const dq__keys *k, int nargs);
/* Appends an argument (pointing into the caller's data until sealed), or
 * an integer in decimal (kept in the call's own buffer). */
void dq__cmd_arg(dq__cmd *c, const char *s, size_t len);
void dq__cmd_int(dq__cmd *c, int64_t v);
/* Formats the call into owned RESP bytes; DQ_OK or DQ_ENOMEM. */
int dq__cmd_seal(dq__cmd *c);
void dq__cmd_free(dq__cmd *c);
/* Switches a sealed call from EVALSHA sha to EVAL body (after NOSCRIPT);
 * DQ_OK or DQ_ENOMEM (the call is then unchanged). */
int dq__cmd_use_eval(dq__cmd *c);
/* 1 if the call sends the script's body (EVAL), 0 for EVALSHA. */
int dq__cmd_is_eval(const dq__cmd *c);

/* ---- Argument checks: each returns DQ_OK or its code with err set. ---- */
int dq__check_queue(const char *queue, dq__err *err);
int dq__check_id(const char *id, const char *what, dq__err *err);
int dq__check_token_arg(const char *token, dq__err *err);
int dq__check_delay(int64_t v, const char *what, dq__err *err);
int dq__check_lease(int64_t v, dq__err *err);
int dq__check_max(int max, int limit, const char *what, dq__err *err);
/* A page of a listing: which (DQ_LIST_*), offset 0..INT32_MAX, count
 * 1..DQ_POLL_MAX.  Shared by dq_list/dq_dead_list and their async twins. */
int dq__check_page(int which, int64_t offset, int count, dq__err *err);

/* The whole argument check of one operation, shared by the sync client
 * and the async one so both refuse exactly the same calls. */
int dq__check_poll(const char *queue, int max, int64_t lease_ms, dq__err *err);
int dq__check_cancel(const char *queue, const char *id, int flags,
                    dq__err *err);
int dq__check_ack(const char *queue, size_t n, const char *const *ids,
                 const char *const *tokens, dq__err *err);
/* Reschedule of n ids (1..DQ_BATCH_MAX) to when (a delay, or epoch ms with
 * DQ_RESCHED_AT) with flags DQ_RESCHED_*. */
int dq__check_resched(const char *queue, size_t n, const char *const *ids,
                      int64_t when, int flags, dq__err *err);
int dq__check_nack(const char *queue, const char *id, const char *token,
                  int64_t delay_ms, int flags, dq__err *err);
int dq__check_extend(const char *queue, const char *id, const char *token,
                    int64_t lease_ms, dq__err *err);
/* A failure reason: reason may be NULL only if len is 0; at most
 * DQ_REASON_MAX bytes. */
int dq__check_reason(const void *reason, size_t len, dq__err *err);
int dq__check_get(const char *queue, const char *id, dq__err *err);
/* dq_count_due: bounds_ms not NULL, nbounds 1..DQ_COUNT_DUE_MAX, each
 * bound in -DQ_DELAY_MAX..DQ_DELAY_MAX and above the one before. */
int dq__check_count_due(const char *queue, const int64_t *bounds_ms,
                        int nbounds, dq__err *err);
/* dq_group_stats: max 1..DQ_GROUP_STATS_MAX. */
int dq__check_group_stats(const char *queue, int max, dq__err *err);
/* Dead requeue/purge: id may be NULL (a bounded batch). */
int dq__check_dead_change(const char *queue, const char *id, int64_t delay_ms,
                         dq__err *err);

/* Builds (or reuses) the keys of queue under core's namespace. */
void dq__core_keys(dq__core *core, const char *queue);
/* The same for partition part (0..partitions-1) of queue, whose keys carry
 * "{queue#part}" as their hash tag; part -1: the plain queue. */
void dq__core_keys_part(dq__core *core, const char *queue, int part);
/* 1 if s[0..n) is the suffix of one of a queue's keys (after
 * "<ns>:{<queue>}:"), of either layout; how dq_queues knows them. */
int dq__key_suffix_known(const char *s, size_t n);
/* Sets how many partitions the client's queues have (1..DQ_PARTS_MAX). */
void dq__core_set_partitions(dq__core *core, int n);
/* The partition of a job id: FNV-1a (32 bits) of its bytes modulo n. */
int dq__part_of(const char *id, int n);
/* FNV-1a (32 bits) of s[0..n): the partition hash of dq__part_of. */
uint32_t dq__fnv1a(const char *s, size_t n);
/* 1 if byte ch stands as itself in a queue's encoded name (the key
 * builders percent-encode every other byte). */
int dq__name_plain(unsigned char ch);
/* The client's state of partitioned queue (created, or an old entry
 * reused); NULL when out of memory. */
dq__qparts *dq__core_qparts(dq__core *core, const char *queue);
/* A wake-up arrived on channel (of a partition of a queue, or of a plain
 * queue): msg, from this client's own channel (<channel>:<its id>), says
 * in how many microseconds to poll that partition (see
 * lua/include/wake.lua); any other message, or msg NULL (a new
 * subscription: some may have been missed), says now.  Returns 1 when a
 * partition of a cached queue is due now. */
int dq__core_wake_msg(dq__core *core, const char *channel, size_t len,
                      const char *msg, size_t mlen);
/* This client's id as a waiting consumer (DQ_GEN_ID_LEN random
 * characters; a new one in a forked child). */
const char *dq__core_me(dq__core *core);
/* Every partition of queue may have due work (a periodic full visit). */
void dq__core_woken_all(dq__core *core, const char *queue);
/* A number from the client's generator (weighted picks among queues). */
uint64_t dq__core_rand(dq__core *core);

/* ---- Several queues (dq_poll_wait_multi, multi-queue consumers) ---- */

/* Checks a queue list: queues (n of them, 1..DQ_MULTI_MAX, no name
 * twice), weights (NULL, or each 1..DQ_WEIGHT_MAX) and mode
 * (DQ_PRIO_STRICT or DQ_PRIO_WEIGHTED).  DQ_OK or the code with err set. */
int dq__check_multi(size_t n, const char *const *queues, const int *weights,
                    int mode, dq__err *err);
/* Monotonic us at which this client, as a waiting consumer, is to poll
 * queue (the earliest of its partitions): 0 now or unknown, INT64_MAX
 * never by itself. */
int64_t dq__core_queue_due(dq__core *core, const char *queue);
/* The queue of the list to poll next: of those known due now (not
 * skipped: skip[i] != 0), the first (DQ_PRIO_STRICT) or one drawn with
 * probability proportional to its weight (DQ_PRIO_WEIGHTED).  Returns its
 * index, or -1 when none is due: then *wait_us (may be NULL) is the time
 * until the first one is due (-1: none by itself). */
int dq__multi_pick(dq__core *core, size_t n, const char *const *queues,
                   const int *weights, int mode, const unsigned char *skip,
                   int64_t *wait_us);
/* The partition-count check: the plain queue's keys must be set. */
int dq__build_parts(dq__cmd *c, dq__core *core);

/* ---- Push ---- */

/* A push of n jobs, split into chunks of at most DQ_CHUNK jobs and
 * DQ_CHUNK_BYTES bytes, one cmd each. */
typedef struct dq__push_plan {
    size_t n;        /* jobs */
    size_t nchunks;  /* cmds */
    dq__cmd *cmds;    /* one per chunk */
    size_t *first;   /* nchunks + 1: chunk i holds jobs first[i]..first[i+1]-1 */
    char *ids;       /* n * DQ_ID_BUF: the id of every job */
    int *outcomes;   /* n: DQ_PUSHED / DQ_KEPT / DQ_REPLACED */
    size_t *order;   /* partitioned queue: the chunks hold jobs
                        order[first[i]].. (grouped by partition); NULL:
                        in the caller's order */
} dq__push_plan;

/* Checks every argument (nothing is sent when this fails), generates the
 * missing ids and builds the chunks.  times[i] is a delay, or an absolute
 * epoch ms when absolute is 1; times may be NULL (all 0). */
int dq__push_plan_make(dq__push_plan *p, dq__core *core, const char *queue,
                      size_t n, const void *const *payloads,
                      const size_t *lens, const int64_t *times, int absolute,
                      const char *const *ids, int flags,
                      const dq_push_opts *po, dq__err *err);
/* Decodes the reply of chunk i into p->outcomes. */
int dq__push_plan_decode(dq__push_plan *p, size_t i, const dq__reply *r,
                        dq__err *err);
/* Number of jobs created or replaced (after all chunks decoded). */
int dq__push_plan_count(const dq__push_plan *p);
void dq__push_plan_free(dq__push_plan *p);

/* ---- Builders for the other scripts (arguments already checked) ---- */
/* waiting: the poll of a waiting consumer, which registers it (lua/poll.lua) */
int dq__build_poll(dq__cmd *c, dq__core *core, int max, int64_t lease_ms,
                   int waiting);
/* n <= DQ_CHUNK jobs. */
int dq__build_ack(dq__cmd *c, dq__core *core, size_t n, const char *const *ids,
                 const char *const *tokens);
/* reason NULL: the nack records none (the script keeps the last one). */
int dq__build_nack(dq__cmd *c, dq__core *core, const char *id,
                  const char *token, int64_t delay_ms, int flags,
                  const void *reason, size_t reason_len);
int dq__build_get(dq__cmd *c, dq__core *core, const char *id);
int dq__build_extend(dq__cmd *c, dq__core *core, const char *id,
                    const char *token, int64_t lease_ms);
int dq__build_cancel(dq__cmd *c, dq__core *core, const char *id, int flags);
/* n <= DQ_CHUNK ids to when (checked), flags DQ_RESCHED_*. */
int dq__build_resched(dq__cmd *c, dq__core *core, size_t n,
                      const char *const *ids, int64_t when, int flags);
int dq__build_stats(dq__cmd *c, dq__core *core);
int dq__build_counts(dq__cmd *c, dq__core *core);
/* nbounds (1..DQ_COUNT_DUE_MAX) window bounds, ms from now (checked). */
int dq__build_count_due(dq__cmd *c, dq__core *core, const int64_t *bounds_ms,
                        int nbounds);
int dq__build_group_stats(dq__cmd *c, dq__core *core, int max);
/* which: DQ_LIST_SCHEDULED, DQ_LIST_INFLIGHT or DQ_LIST_DEAD (checked). */
int dq__build_list(dq__cmd *c, dq__core *core, int which, int64_t offset,
                  int count);
/* action: "requeue" or "purge"; id NULL for the oldest limit jobs. */
#define DQ_DEAD_BATCH 1000 /* dead jobs a requeue/purge-all call moves */
int dq__build_dead_change(dq__cmd *c, dq__core *core, const char *action,
                         const char *id, int64_t delay_ms, int limit);

/* ---- Decoders: r is a non-error reply of the matching script ---- */

/* Poll: *jobs (NULL if none, each with its lease deadline from the lease
 * the script used), *next_us; returns count or a code.  Tokens
 * are copied as the decimal strings the script made (up to 23 digits). */
int dq__decode_poll(const dq__reply *r, dq_jobs **jobs, int64_t *next_us,
                    dq__err *err);
/* Ack: results[i] per job (may be NULL); returns number acked. */
int dq__decode_ack(const dq__reply *r, size_t n, int *results, dq__err *err);
/* Reschedule: results[i] per job, a DQ_RESCHED_* outcome; returns the
 * number moved or revived. */
int dq__decode_resched(const dq__reply *r, size_t n, int *results,
                       dq__err *err);
/* Integer reply of nack/extend/cancel/dead_change: *v; DQ_OK or code. */
int dq__decode_int(const dq__reply *r, long long *v, dq__err *err);
/* Counters: out[4] = delivered, acked, retried, failed. */
int dq__decode_counts(const dq__reply *r, int64_t out[4], dq__err *err);
/* Count due: counts[nbounds + 1] per window and *now_ms, the script's
 * time. */
int dq__decode_count_due(const dq__reply *r, int nbounds, int64_t *counts,
                         int64_t *now_ms, dq__err *err);
/* Stats: out[5] = scheduled, due, inflight, dead, next_ms. */
int dq__decode_stats(const dq__reply *r, int64_t out[5], dq__err *err);
/* List: jobs with attempt and time (and lease deadline for in-flight jobs)
 * and their last failure reason; *now_ms (may be NULL) receives the
 * server's time of the listing. */
int dq__decode_list(const dq__reply *r, int which, dq_jobs **jobs,
                   int64_t *now_ms, dq__err *err);
/* Get of job id: 1 and *info (the caller's), or 0 (no such job, *info
 * NULL), or a code. */
int dq__decode_get(const dq__reply *r, const char *id, dq_job_info **info,
                   dq__err *err);

/* Converts a script's negative result (-16, -17) into its code and message. */
int dq__result_code(long long v, const char *what, const char *id,
                   dq__err *err);

#endif
