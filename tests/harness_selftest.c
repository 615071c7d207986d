/*
 * tests/harness_selftest.c - self-test of tests/harness.c (plain main, no Check).
 *
 *   cc -Wall -Wextra -Werror -std=c11 -D_GNU_SOURCE tests/harness.c \
 *      tests/harness_selftest.c $(pkg-config --cflags --libs hiredis) -o /tmp/hs && /tmp/hs
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "harness.h"
#include "support/selftest.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Monotonic seconds (the harness's clock). */
static double now(void)
{
    return (double)th_mono_us() / 1e6;
}

/* 1 if path is a directory. */
/* 1 if pid is gone or a zombie (the harness must not leave servers running). */
static int dead(pid_t pid)
{
    char path[64], buf[512];
    FILE *f;
    const char *p;
    size_t n;

    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    f = fopen(path, "r");
    if (!f)
        return 1;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* Waits up to timeout s for pid to be gone; 1 if it went. */
static int wait_dead(pid_t pid, double timeout)
{
    double end = now() + timeout;

    while (!dead(pid)) {
        if (now() > end)
            return 0;
        usleep(10000);
    }
    return 1;
}

/* 1 if PING answers PONG on c. */
static int ping(redisContext *c)
{
    redisReply *rep;
    int ok;

    if (!c)
        return 0;
    rep = redisCommand(c, "PING");
    ok = rep && rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "PONG") == 0;
    if (rep)
        freeReplyObject(rep);
    return ok;
}

/* 1 if GET key answers want. */
static int get_is(redisContext *c, const char *key, const char *want)
{
    const char *argv[] = { "GET", key };
    redisReply *rep = redisCommandArgv(c, 2, argv, NULL);
    int ok = rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, want) == 0;

    if (rep)
        freeReplyObject(rep);
    return ok;
}

static const char *DBSIZE[] = { "DBSIZE" };

static void test_failures(void)
{
    th_redis r;
    const char *old = getenv("DQ_REDIS_SERVER");
    char *saved = old ? strdup(old) : NULL;
    double t0;

    fprintf(stderr, "-- expected failure messages follow --\n");
    setenv("DQ_REDIS_SERVER", "/nonexistent/redis-server", 1);
    CHECK(th_redis_start(&r, 0, NULL) == -1);
    CHECK(r.pid == 0 && r.dir[0] == '\0');
    if (saved) {
        setenv("DQ_REDIS_SERVER", saved, 1);
        free(saved);
    } else {
        unsetenv("DQ_REDIS_SERVER");
    }

    t0 = now();
    CHECK(th_redis_start(&r, 0, "no-such-directive yes") == -1);
    CHECK(now() - t0 < 5.0); /* a server that exits is noticed at once */
    CHECK(r.pid == 0 && r.dir[0] == '\0');

    memset(&r, 0, sizeof r);
    th_redis_stop(&r); /* zeroed struct */
    th_redis_kill(&r);
    CHECK(th_redis_restart(&r) == -1);
    CHECK(th_redis_connect(&r) == NULL);
    fprintf(stderr, "-- end of expected failure messages --\n");
}

static void test_unix_kill_restart(void)
{
    th_redis r;
    redisContext *c;
    const char *set[] = { "SET", "a", "b" };
    char dir[sizeof r.dir];
    pid_t old;
    redisReply *rep;

    /* AOF so that the data survives the simulated crash. */
    CHECK(th_redis_start(&r, 0, "appendonly yes\nappendfsync always") == 0);
    CHECK(r.pid > 0 && r.port == 0);
    CHECK(strncmp(r.uri, "unix://", 7) == 0 && strcmp(r.uri + 7, r.sock) == 0);
    CHECK(strncmp(r.sock, r.dir, strlen(r.dir)) == 0);
    CHECK(is_dir(r.dir));

    c = th_redis_connect(&r);
    CHECK(c != NULL);
    if (!c) {
        th_redis_stop(&r);
        return;
    }
    CHECK(ping(c));
    rep = redisCommandArgv(c, 3, set, NULL);
    CHECK(rep && rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "OK") == 0);
    if (rep)
        freeReplyObject(rep);
    CHECK(th_redis_int(c, 1, DBSIZE) == 1);
    CHECK(th_redis_int(NULL, 1, DBSIZE) == 1); /* fresh connection, last server */
    fprintf(stderr, "-- expected: PING is not an integer --\n");
    CHECK(th_redis_int(c, 1, (const char *[]){ "PING" }) == -1);
    redisFree(c);

    old = r.pid;
    snprintf(dir, sizeof dir, "%s", r.dir);
    th_redis_kill(&r);
    CHECK(r.pid == 0);
    CHECK(dead(old));
    CHECK(is_dir(dir) && strcmp(r.dir, dir) == 0);
    th_redis_kill(&r); /* twice: no-op */

    CHECK(th_redis_restart(&r) == 0);
    CHECK(r.pid > 0 && r.pid != old);
    c = th_redis_connect(&r);
    CHECK(c && ping(c));
    CHECK(c && th_redis_int(c, 1, DBSIZE) == 1);
    CHECK(c && get_is(c, "a", "b"));
    if (c)
        redisFree(c);

    CHECK(th_redis_restart(&r) == 0); /* restart of a running server */
    CHECK(th_redis_int(NULL, 1, DBSIZE) == 1);

    old = r.pid;
    th_redis_stop(&r);
    CHECK(dead(old));
    CHECK(!is_dir(dir));
    CHECK(r.pid == 0 && r.dir[0] == '\0');
    th_redis_stop(&r); /* twice */
}

static void test_tcp(void)
{
    th_redis a, b;
    struct timeval tv = { 5, 0 };
    redisContext *c;
    pid_t pa, pb;
    char dira[sizeof a.dir], dirb[sizeof b.dir];

    CHECK(th_redis_start(&a, 0, NULL) == 0);
    CHECK(th_redis_start(&b, 1, NULL) == 0);
    CHECK(b.port > 0 && b.port < 65536);
    CHECK(strcmp(a.dir, b.dir) != 0);

    c = redisConnectWithTimeout("127.0.0.1", b.port, tv);
    CHECK(c && !c->err && ping(c));
    if (c)
        redisFree(c);
    c = th_redis_connect(&b); /* the unix socket too */
    CHECK(c && ping(c));
    if (c)
        redisFree(c);
    CHECK(th_redis_int(NULL, 1, DBSIZE) == 0); /* last started: b */

    /* kill + restart keeps the TCP port */
    th_redis_kill(&b);
    CHECK(th_redis_restart(&b) == 0);
    c = redisConnectWithTimeout("127.0.0.1", b.port, tv);
    CHECK(c && !c->err && ping(c));
    if (c)
        redisFree(c);

    pa = a.pid;
    pb = b.pid;
    snprintf(dira, sizeof dira, "%s", a.dir);
    snprintf(dirb, sizeof dirb, "%s", b.dir);
    th_redis_stop(&a);
    th_redis_stop(&b);
    CHECK(dead(pa) && dead(pb));
    CHECK(!is_dir(dira) && !is_dir(dirb));
}

/* Like Check's fork mode: the server belongs to the parent, a forked child
 * kills, restarts and stops it (waitpid gives ECHILD there). */
static void test_forked_child(void)
{
    th_redis r;
    pid_t child, old;
    int st = 0;

    CHECK(th_redis_start(&r, 0, NULL) == 0);
    old = r.pid;
    child = fork();
    if (child == 0) {
        int ok = 1;

        th_redis_kill(&r);
        ok &= r.pid == 0 && wait_dead(old, 5.0);
        ok &= th_redis_restart(&r) == 0;
        ok &= th_redis_int(NULL, 1, DBSIZE) == 0;
        th_redis_stop(&r);
        _exit(ok ? 0 : 1);
    }
    CHECK(child > 0);
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    th_redis_stop(&r); /* reaps the zombie; the dir is already gone */
    CHECK(dead(old));
    CHECK(r.pid == 0);
}

/* A test process that dies without th_redis_stop takes its server along. */
static void test_parent_death(void)
{
    int fds[2];
    pid_t child, server = 0;
    th_redis r;
    int st;

    CHECK(pipe(fds) == 0);
    child = fork();
    if (child == 0) {
        close(fds[0]);
        if (th_redis_start(&r, 0, NULL) != 0)
            _exit(1);
        if (write(fds[1], &r, sizeof r) != (ssize_t)sizeof r)
            _exit(1);
        _exit(0); /* "crash": no th_redis_stop */
    }
    close(fds[1]);
    memset(&r, 0, sizeof r);
    CHECK(read(fds[0], &r, sizeof r) == (ssize_t)sizeof r);
    close(fds[0]);
    CHECK(waitpid(child, &st, 0) == child);
    server = r.pid;
    CHECK(server > 0);
    if (server > 0) {
        CHECK(wait_dead(server, 5.0));
        r.pid = 0;
        th_redis_stop(&r); /* only removes the leftover dir */
    }
}

/* SIGCHLD ignored: children are auto-reaped, waitpid cannot be used. */
static void test_sigchld_ignored(void)
{
    th_redis r;
    pid_t old;
    struct sigaction sa, prev;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, &prev);
    CHECK(th_redis_start(&r, 0, NULL) == 0);
    th_redis_kill(&r);
    CHECK(th_redis_restart(&r) == 0);
    old = r.pid;
    th_redis_stop(&r);
    CHECK(wait_dead(old, 5.0));
    sigaction(SIGCHLD, &prev, NULL);
}

int main(void)
{
    double t0 = now();

    test_failures();
    test_unix_kill_restart();
    test_tcp();
    test_forked_child();
    test_parent_death();
    test_sigchld_ignored();
    printf("harness_selftest: %d passed, %d failed (%.2f s)\n", passed, failed, now() - t0);
    return failed ? 1 : 0;
}
