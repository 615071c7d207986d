/*
 * tests/harness.h - runs a real, private redis-server for tests and benchmarks.
 *
 * Each th_redis_start() makes a fresh temp dir (mkdtemp under $TMPDIR or
 * /tmp) holding redis.conf, redis.log, redis.out (the server's stdout and
 * stderr), redis.pid, the unix socket and any data files, and forks/execs
 * redis-server on it.  The server listens on the unix socket only, or also on
 * 127.0.0.1:<free port> when asked.  It never binds anything else.
 *
 * The server gets PR_SET_PDEATHSIG(SIGTERM): it dies when the *thread* that
 * started it exits, so a crashing test never leaves it running.  With Check's
 * fork mode, start it in an unchecked fixture (the srunner process, shared by
 * the tests) or in a checked fixture / the test itself (one per test; Check
 * also kills the test's process group when the test ends).  A test that
 * crashes leaves its temp dir behind (the server itself dies).
 *
 * th_redis_kill/th_redis_restart in a forked Check test on a server that an
 * unchecked fixture started: the restarted server is the test process's child
 * and dies with it, so later tests of that fixture find no server.  Simulate
 * crashes on a per-test server (checked fixture or the test body) instead.
 *
 * Messages go to stderr, prefixed "th_redis: ".  Works with hiredis 0.14 and 1.x.
 */
#ifndef DQ_TESTS_HARNESS_H
#define DQ_TESTS_HARNESS_H

#include <stdint.h>
#include <sys/types.h>
#include <hiredis/hiredis.h> /* tests may use hiredis directly to inspect Redis */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct th_redis {
    pid_t pid;      /* redis-server pid, 0 if not running */
    char dir[256];  /* private temp dir (mkdtemp under $TMPDIR or /tmp) */
    char sock[320]; /* unix socket path inside dir */
    char uri[400];  /* "unix://<sock>" for dq_open */
    int port;       /* TCP port on 127.0.0.1 if requested, else 0 */
} th_redis;

/*
 * Starts redis-server (binary from $DQ_REDIS_SERVER, else "redis-server" on
 * PATH, else /usr/bin/redis-server) in a new private dir, with unixsocket,
 * port 0 (or a free port on 127.0.0.1 when tcp != 0), no persistence
 * (save "", appendonly no), then extra_conf (may be NULL: raw redis.conf
 * lines separated by '\n', appended last so they override).  Waits up to
 * 10 s until PING answers on the unix socket (and no data is still loading).
 * *r is overwritten (it need not be initialised).  Returns 0, or -1 after
 * printing why to stderr and cleaning up (r->pid is then 0).
 */
int th_redis_start(th_redis *r, int tcp, const char *extra_conf);

/*
 * Stops the server (SIGTERM, up to 5 s, then SIGKILL) and removes its dir
 * recursively.  Safe to call twice, after th_redis_kill, or on a zeroed struct.
 */
void th_redis_stop(th_redis *r);

/*
 * Simulated crash: SIGKILLs the server and reaps it, keeping the dir (config,
 * data files) for th_redis_restart.  r->pid becomes 0.
 */
void th_redis_kill(th_redis *r);

/*
 * Starts redis-server again on the same config/dir/socket/port (stopping it
 * first if it is still running) and waits for PING as th_redis_start does.
 * Data survives only if extra_conf enabled persistence (e.g. "appendonly yes").
 * Returns 0 or -1.
 */
int th_redis_restart(th_redis *r);

/*
 * New hiredis connection to the server's unix socket, with 5 s connect and
 * command timeouts.  NULL on failure (prints why).  Free with redisFree().
 */
redisContext *th_redis_connect(const th_redis *r);

/*
 * Runs one command given as argv (strings; lengths by strlen) on ctx, or, if
 * ctx is NULL, on a fresh connection to the most recently started/restarted
 * server in this process.  Returns the integer reply, or -1 on error or a
 * non-integer reply (printed to stderr).  Note -1 is also a valid integer
 * reply (TTL...): use hiredis directly when that matters.
 */
long long th_redis_int(redisContext *ctx, int argc, const char **argv);

/*
 * The tests' one monotonic clock (CLOCK_MONOTONIC) in microseconds and in
 * milliseconds, and a sleep that resumes after signals.
 */
int64_t th_mono_us(void);
int64_t th_mono_ms(void);
void th_sleep_ms(int64_t ms);

/*
 * ---- building blocks, for harnesses that run other servers --------------
 * (tests/cluster_harness.c: sentinels and redis-cli).  Messages go to
 * stderr, prefixed "th_redis: ", as above.
 */

/* snprintf that returns -1 on truncation (or error), else 0. */
int th_fmt(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Path of a binary into out: $var if set (it must be an executable; looked
 * up on PATH when it has no '/'), else name on PATH, else dflt.  0, or -1
 * after printing why.
 */
int th_find_bin(const char *var, const char *name, const char *dflt, char *out, size_t n);

/* A free TCP port on 127.0.0.1 (bind port 0, read it back), or -1 (printed). */
int th_free_port(void);

/*
 * Forks and execs argv[0] (a path) with argv: stdin /dev/null, stdout and
 * stderr appended to outpath, no other fd inherited, signal dispositions and
 * mask reset, LD_PRELOAD and NOTIFY_SOCKET dropped from the environment, and
 * PR_SET_PDEATHSIG(SIGTERM): it dies with the calling thread.  Returns the
 * pid, or -1 after printing why.
 */
pid_t th_spawn(char *const argv[], const char *outpath);

/*
 * Runs a server the way th_redis_start does: th_spawn(argv, outpath), then
 * waits up to 10 s until it answers PING -- on the unix socket sock, or on
 * 127.0.0.1:port when sock is NULL -- and has no data still loading (a
 * NOAUTH error also counts as up).  Returns 0 with *pid its pid; 1 when it
 * exited because its TCP port (port > 0) was taken, as logpath says after
 * what it held before the start ("Address already in use"): try another
 * port; -1 otherwise, after printing why with the last lines outpath and
 * logpath got meanwhile.  *pid is 0 unless it returns 0: nothing is left
 * running.
 */
int th_serve(char *const argv[], const char *outpath, const char *logpath, const char *sock,
             int port, pid_t *pid);

/*
 * 1 if pid has exited (reaped here if it is our child; *status set then),
 * 0 if it still runs.
 */
int th_proc_gone(pid_t pid, int *status);

/* Waits up to timeout_ms for pid to exit (th_proc_gone).  1 if it did. */
int th_proc_wait(pid_t pid, int64_t timeout_ms, int *status);

/*
 * Sends sig to pid and waits up to 5 s for it to exit, then SIGKILLs it (and
 * waits 5 s more).  Nothing for pid <= 0 or a pid that is gone.
 */
void th_proc_stop(pid_t pid, int sig);

/* Prints the last nlines lines path got after offset (at most its last 64 KiB). */
void th_print_tail(const char *path, long offset, int nlines);

/* rm -rf dir, unless its path lacks mark (then it only says so). */
void th_rm_tree(const char *dir, const char *mark);

#ifdef __cplusplus
}
#endif

#endif /* DQ_TESTS_HARNESS_H */
