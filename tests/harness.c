/*
 * tests/harness.c - runs a real, private redis-server for tests, and the
 * process helpers (spawn, wait for PING, stop) other harnesses share (see
 * harness.h).
 *
 * Linux only (prctl, /proc).  Builds with -std=c11: it defines _GNU_SOURCE
 * itself.  Links with hiredis (0.14 or 1.x) only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define TH_START_TIMEOUT_MS 10000
#define TH_STOP_TIMEOUT_MS 5000
#define TH_PORT_ATTEMPTS 5
#define TH_DIR_MARK "/dq-redis-"
#define TH_DEFAULT_SERVER "/usr/bin/redis-server"

/* Socket of the most recently started server, for th_redis_int(NULL, ...). */
static char th_last_sock[sizeof(((th_redis *)0)->sock)];

static void th_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void th_err(const char *fmt, ...)
{
    va_list ap;
    char buf[1024];

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "th_redis: %s\n", buf);
    fflush(stderr);
}

int64_t th_mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t th_mono_ms(void)
{
    return th_mono_us() / 1000;
}

void th_sleep_ms(int64_t ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

int th_fmt(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    int len;

    va_start(ap, fmt);
    len = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return (len < 0 || (size_t)len >= n) ? -1 : 0;
}

/* ---- processes ----------------------------------------------------------- */

/*
 * Works for servers that are not our children too (e.g. started by Check's
 * srunner and killed from a forked test): a zombie or a missing /proc entry
 * counts as exited.
 */
int th_proc_gone(pid_t pid, int *status)
{
    char path[64], buf[512];
    const char *p;
    ssize_t n;
    int fd, st;
    pid_t w;

    do {
        w = waitpid(pid, &st, WNOHANG);
    } while (w == -1 && errno == EINTR);
    if (w == pid) {
        if (status)
            *status = st;
        return 1;
    }
    if (w == 0)
        return 0;
    /* ECHILD: not our child (or SIGCHLD is ignored). */
    if (th_fmt(path, sizeof path, "/proc/%ld/stat", (long)pid) != 0)
        return 1;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd == -1)
        return kill(pid, 0) == -1 && errno == ESRCH;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 1;
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* "pid (comm) S ..." */
    if (!p || p[1] != ' ')
        return 0;
    return p[2] == 'Z' || p[2] == 'X' || p[2] == 'x';
}

int th_proc_wait(pid_t pid, int64_t timeout_ms, int *status)
{
    int64_t deadline = th_mono_ms() + timeout_ms;

    for (;;) {
        if (th_proc_gone(pid, status))
            return 1;
        if (th_mono_ms() >= deadline)
            return 0;
        th_sleep_ms(10);
    }
}

void th_proc_stop(pid_t pid, int sig)
{
    if (pid <= 0 || th_proc_gone(pid, NULL))
        return;
    if (kill(pid, sig) == 0 && th_proc_wait(pid, TH_STOP_TIMEOUT_MS, NULL))
        return;
    if (th_proc_gone(pid, NULL))
        return;
    if (sig != SIGKILL)
        th_err("pid %ld ignored signal %d for %d ms: sending SIGKILL", (long)pid, sig,
               TH_STOP_TIMEOUT_MS);
    kill(pid, SIGKILL);
    if (!th_proc_wait(pid, TH_STOP_TIMEOUT_MS, NULL))
        th_err("pid %ld still there after SIGKILL", (long)pid);
}

/* ---- files --------------------------------------------------------------- */

static int th_rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    if (remove(path) != 0 && errno != ENOENT)
        th_err("cannot remove %s: %s", path, strerror(errno));
    return 0;
}

void th_rm_tree(const char *dir, const char *mark)
{
    if (!dir[0] || !strstr(dir, mark)) {
        if (dir[0])
            th_err("refusing to remove %s (not a harness dir)", dir);
        return;
    }
    if (nftw(dir, th_rm_cb, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        th_err("cannot remove %s: %s", dir, strerror(errno));
}

/* Size of a file in bytes, 0 if it cannot be read. */
static long th_file_size(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* Reads path from offset (at most the last 64 KiB); malloc'ed, NUL-terminated. */
static char *th_read_file(const char *path, long offset)
{
    FILE *f = fopen(path, "rb");
    long size;
    size_t n;
    char *buf;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0) {
        fclose(f);
        return NULL;
    }
    if (offset < size - 65536)
        offset = size - 65536;
    if (offset < 0 || offset > size)
        offset = 0;
    buf = malloc((size_t)(size - offset) + 1);
    if (!buf || fseek(f, offset, SEEK_SET) != 0) {
        free(buf);
        fclose(f);
        return NULL;
    }
    n = fread(buf, 1, (size_t)(size - offset), f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

void th_print_tail(const char *path, long offset, int nlines)
{
    char *buf, *p;
    size_t len;
    int seen = 0;

    buf = th_read_file(path, offset);
    if (!buf)
        return;
    len = strlen(buf);
    while (len > 0 && buf[len - 1] == '\n')
        buf[--len] = '\0';
    if (len == 0) {
        free(buf);
        return;
    }
    p = buf + len;
    while (p > buf) {
        if (p[-1] == '\n' && ++seen >= nlines)
            break;
        p--;
    }
    fprintf(stderr, "th_redis: ---- last lines of %s ----\n%s\nth_redis: ----\n", path, p);
    fflush(stderr);
    free(buf);
}

/* 1 if path contains needle after offset. */
static int th_file_has(const char *path, long offset, const char *needle)
{
    char *buf;
    int found;

    buf = th_read_file(path, offset);
    found = buf && strstr(buf, needle) != NULL;
    free(buf);
    return found;
}

/* ---- the server binary ----------------------------------------------------- */

static int th_is_exe(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Looks name up on $PATH (or takes it as is when it has a '/'). */
static int th_which(const char *name, char *out, size_t n)
{
    const char *path, *p, *end;
    size_t len;

    if (strchr(name, '/'))
        return th_is_exe(name) && th_fmt(out, n, "%s", name) == 0 ? 0 : -1;
    path = getenv("PATH");
    if (!path)
        return -1;
    for (p = path;; p = end + 1) {
        end = strchr(p, ':');
        len = end ? (size_t)(end - p) : strlen(p);
        if (th_fmt(out, n, "%.*s/%s", (int)len, len ? p : ".", name) == 0 && th_is_exe(out))
            return 0;
        if (!end)
            break;
    }
    return -1;
}

int th_find_bin(const char *var, const char *name, const char *dflt, char *out, size_t n)
{
    const char *env = getenv(var);

    if (env && env[0]) {
        if (th_which(env, out, n) == 0)
            return 0;
        th_err("%s=%s: not an executable file", var, env);
        return -1;
    }
    if (th_which(name, out, n) == 0)
        return 0;
    if (th_is_exe(dflt) && th_fmt(out, n, "%s", dflt) == 0)
        return 0;
    th_err("%s not found: install it (tests need a real server; or set %s to its path)", name,
           var);
    return -1;
}

/* ---- config ---------------------------------------------------------------- */

/* Writes s as a redis.conf double-quoted string. */
static void th_conf_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            fprintf(f, "\\x%02x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Writes <dir>/redis.conf: socket, port, no persistence, then extra. */
static int th_write_conf(const th_redis *r, const char *extra)
{
    char path[512], logfile[512], pidfile[512];
    FILE *f;
    int bad;

    if (th_fmt(path, sizeof path, "%s/redis.conf", r->dir) != 0 ||
        th_fmt(logfile, sizeof logfile, "%s/redis.log", r->dir) != 0 ||
        th_fmt(pidfile, sizeof pidfile, "%s/redis.pid", r->dir) != 0)
        return -1;
    f = fopen(path, "w");
    if (!f) {
        th_err("cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    fputs("# written by tests/harness.c: a private server for one test run\n", f);
    fputs("daemonize no\nsupervised no\n", f);
    fputs("bind 127.0.0.1\n", f);
    fprintf(f, "port %d\n", r->port);
    fputs("unixsocket ", f);
    th_conf_str(f, r->sock);
    fputs("\nunixsocketperm 700\n", f);
    fputs("dir ", f);
    th_conf_str(f, r->dir);
    fputs("\nsave \"\"\nappendonly no\n", f);
    fputs("logfile ", f);
    th_conf_str(f, logfile);
    fputs("\npidfile ", f);
    th_conf_str(f, pidfile);
    fputc('\n', f);
    fputs("loglevel notice\n", f);
    if (extra && extra[0]) {
        size_t len = strlen(extra);

        fputs("# extra_conf (overrides the above)\n", f);
        fputs(extra, f);
        if (extra[len - 1] != '\n')
            fputc('\n', f);
    }
    bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        th_err("cannot write %s", path);
        return -1;
    }
    return 0;
}

int th_free_port(void)
{
    int attempt;

    for (attempt = 0; attempt < TH_PORT_ATTEMPTS; attempt++) {
        struct sockaddr_in sa;
        socklen_t len = sizeof sa;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int port = -1;

        if (fd == -1) {
            th_err("socket: %s", strerror(errno));
            return -1;
        }
        memset(&sa, 0, sizeof sa);
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sa.sin_port = 0;
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
            getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
            port = ntohs(sa.sin_port);
        else if (errno != EADDRINUSE)
            th_err("bind 127.0.0.1:0: %s", strerror(errno));
        close(fd);
        if (port > 0)
            return port;
    }
    th_err("no free TCP port on 127.0.0.1");
    return -1;
}

/* ---- start / wait ---------------------------------------------------------- */

/* An fd >= 3 with FD_CLOEXEC for path, or -1. */
static int th_open_high(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC, 0600);

    if (fd >= 0 && fd < 3) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, 3);

        close(fd);
        fd = high;
    }
    return fd;
}

pid_t th_spawn(char *const argv[], const char *outpath)
{
    char **envp;
    size_t nenv = 0, i, j;
    int nullfd, outfd, maxfd = 1024;
    struct rlimit rl;
    pid_t parent = getpid(), pid;

    /* Everything the child needs is prepared here: after fork only
     * async-signal-safe calls.  LD_PRELOAD (sanitizer or valgrind shims)
     * and NOTIFY_SOCKET (systemd) must not reach the server. */
    while (environ && environ[nenv])
        nenv++;
    envp = calloc(nenv + 1, sizeof *envp);
    if (!envp) {
        th_err("out of memory");
        return -1;
    }
    for (i = j = 0; i < nenv; i++) {
        if (strncmp(environ[i], "LD_PRELOAD=", 11) == 0 ||
            strncmp(environ[i], "NOTIFY_SOCKET=", 14) == 0)
            continue;
        envp[j++] = environ[i];
    }
    envp[j] = NULL;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        maxfd = rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;

    nullfd = th_open_high("/dev/null", O_RDWR);
    outfd = th_open_high(outpath, O_WRONLY | O_CREAT | O_APPEND);
    if (nullfd == -1 || outfd == -1) {
        th_err("cannot open /dev/null or %s: %s", outpath, strerror(errno));
        if (nullfd != -1)
            close(nullfd);
        if (outfd != -1)
            close(outfd);
        free(envp);
        return -1;
    }

    pid = fork();
    if (pid == 0) {
        struct sigaction sa;
        sigset_t none;
        int sig, fd;

        /* Ignored signals and the mask survive exec: reset them (first, so
         * that the death signal below cannot be ignored or blocked). */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigemptyset(&sa.sa_mask);
        for (sig = 1; sig < NSIG; sig++)
            sigaction(sig, &sa, NULL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* Die with the thread that started us (a crashed test). */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);

        if (dup2(nullfd, 0) == -1 || dup2(outfd, 1) == -1 || dup2(outfd, 2) == -1)
            _exit(127);
        for (fd = 0; fd < 3; fd++)
            fcntl(fd, F_SETFD, 0);
#ifdef SYS_close_range
        if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
#endif
        {
            for (fd = 3; fd < maxfd; fd++)
                close(fd);
        }
        execve(argv[0], argv, envp);
        {
            static const char msg[] = "th_redis: execve failed\n";
            ssize_t ignored = write(2, msg, sizeof msg - 1);
            (void)ignored;
        }
        _exit(127);
    }
    close(nullfd);
    close(outfd);
    free(envp);
    if (pid == -1) {
        th_err("fork: %s", strerror(errno));
        return -1;
    }
    return pid;
}

/* 1 if the INFO persistence text says nothing is loading. */
static int th_not_loading(const char *info)
{
    const char *p = info;

    while ((p = strstr(p, "loading:")) != NULL) {
        if (p == info || p[-1] == '\n') /* "loading:", not "async_loading:" */
            return p[8] == '0';
        p += 8;
    }
    return 1; /* old servers (and sentinels) without the field */
}

/* 1 if the server on sock (or, if NULL, 127.0.0.1:port) answers PING and
 * has finished loading. */
static int th_ping_once(const char *sock, int port)
{
    struct timeval tv = { 0, 500000 };
    redisContext *c = sock ? redisConnectUnixWithTimeout(sock, tv)
                           : redisConnectWithTimeout("127.0.0.1", port, tv);
    redisReply *rep;
    int ok = 0;

    if (!c)
        return 0;
    if (c->err || redisSetTimeout(c, tv) != REDIS_OK) {
        redisFree(c);
        return 0;
    }
    rep = redisCommand(c, "PING");
    if (rep && rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "PONG") == 0) {
        freeReplyObject(rep);
        rep = redisCommand(c, "INFO persistence");
        ok = rep && (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS) &&
             th_not_loading(rep->str);
    } else if (rep && rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOAUTH", 6) == 0) {
        ok = 1; /* extra_conf set requirepass: it is up (loading not checked) */
    }
    if (rep)
        freeReplyObject(rep);
    redisFree(c);
    return ok;
}

/* th_ping_once with SIGPIPE blocked for this thread: the server probed
 * may be exiting (a cluster node whose bus port another process took exits
 * right after the kernel accepted the probe's connection), and the PING
 * written to its closed socket must fail with EPIPE instead of killing the
 * test.  A SIGPIPE the probe raised is taken before the mask is restored,
 * so the process keeps the default disposition that the library's own
 * SIGPIPE tests rely on. */
static int th_ping(const char *sock, int port)
{
    sigset_t pipe_set, old;
    struct timespec zero = { 0, 0 };
    int ok;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    if (pthread_sigmask(SIG_BLOCK, &pipe_set, &old) != 0)
        return th_ping_once(sock, port);
    ok = th_ping_once(sock, port);
    if (!sigismember(&old, SIGPIPE)) {
        sigset_t pending;
        if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE))
            (void)sigtimedwait(&pipe_set, NULL, &zero);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    return ok;
}

enum { TH_READY = 0, TH_EXITED = 1, TH_TIMEOUT = 2 };

/* Waits for PING (and no loading) on sock or port; TH_READY/EXITED/TIMEOUT. */
static int th_wait_ready(pid_t pid, const char *sock, int port, int *status)
{
    int64_t deadline = th_mono_ms() + TH_START_TIMEOUT_MS;

    for (;;) {
        if (th_proc_gone(pid, status))
            return TH_EXITED;
        if (th_ping(sock, port))
            return TH_READY;
        if (th_mono_ms() >= deadline)
            return TH_TIMEOUT;
        th_sleep_ms(20);
    }
}

/* Prints why a start failed, with the tails of outpath and logpath. */
static void th_explain(char *const argv[], const char *outpath, const char *logpath,
                       const char *sock, int port, pid_t pid, int how, int status, long logoff,
                       long outoff)
{
    char cmd[1024] = "", where[400];
    size_t used = 0;
    int i;

    for (i = 0; argv[i] && used < sizeof cmd; i++) {
        int len = snprintf(cmd + used, sizeof cmd - used, "%s%s", i ? " " : "", argv[i]);

        if (len < 0)
            break;
        used += (size_t)len;
    }
    if (sock)
        th_fmt(where, sizeof where, "%s", sock);
    else
        th_fmt(where, sizeof where, "127.0.0.1:%d", port);
    if (how == TH_TIMEOUT)
        th_err("%s (pid %ld) did not answer PING on %s within %d ms", cmd, (long)pid, where,
               TH_START_TIMEOUT_MS);
    else if (WIFEXITED(status))
        th_err("%s exited with status %d before answering PING", cmd, WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        th_err("%s died of signal %d before answering PING", cmd, WTERMSIG(status));
    else
        th_err("%s exited before answering PING", cmd);
    th_print_tail(outpath, outoff, 20);
    th_print_tail(logpath, logoff, 20);
}

int th_serve(char *const argv[], const char *outpath, const char *logpath, const char *sock,
             int port, pid_t *pid)
{
    long logoff = th_file_size(logpath), outoff = th_file_size(outpath);
    int how, status = 0;

    *pid = th_spawn(argv, outpath);
    if (*pid <= 0) {
        *pid = 0;
        return -1;
    }
    how = th_wait_ready(*pid, sock, port, &status);
    if (how == TH_READY)
        return 0;
    if (how == TH_EXITED) {
        *pid = 0;
        if (port > 0 && th_file_has(logpath, logoff, "Address already in use"))
            return 1;
    }
    th_explain(argv, outpath, logpath, sock, port, *pid, how, status, logoff, outoff);
    th_proc_stop(*pid, SIGTERM);
    *pid = 0;
    return -1;
}

/*
 * Launches the server on the prepared r->dir (config already written) and
 * waits for it.  0 on success; otherwise -1, nothing left running, and
 * *port_busy says whether it failed only because its TCP port was taken.
 */
static int th_launch(th_redis *r, int *port_busy)
{
    char bin[PATH_MAX], conf[512], logpath[512], outpath[512];
    char *argv[3];
    int rc;

    *port_busy = 0;
    if (th_find_bin("DQ_REDIS_SERVER", "redis-server", TH_DEFAULT_SERVER, bin, sizeof bin) != 0)
        return -1;
    if (th_fmt(conf, sizeof conf, "%s/redis.conf", r->dir) != 0 ||
        th_fmt(logpath, sizeof logpath, "%s/redis.log", r->dir) != 0 ||
        th_fmt(outpath, sizeof outpath, "%s/redis.out", r->dir) != 0)
        return -1;
    argv[0] = bin;
    argv[1] = conf;
    argv[2] = NULL;
    rc = th_serve(argv, outpath, logpath, r->sock, r->port, &r->pid);
    if (rc == 0) {
        memcpy(th_last_sock, r->sock, sizeof th_last_sock);
        return 0;
    }
    *port_busy = rc == 1;
    return -1;
}

int th_redis_start(th_redis *r, int tcp, const char *extra_conf)
{
    struct sockaddr_un sa_un;
    const char *tmp = getenv("TMPDIR");
    char tmpl[PATH_MAX], real[PATH_MAX];
    int attempt, busy = 0;

    if (!r)
        return -1;
    memset(r, 0, sizeof *r);
    if (!tmp || tmp[0] != '/')
        tmp = "/tmp";
    /* The socket path must fit sockaddr_un.sun_path. */
    if (strlen(tmp) + strlen(TH_DIR_MARK "XXXXXX/redis.sock") >= sizeof sa_un.sun_path)
        tmp = "/tmp";
    if (th_fmt(tmpl, sizeof tmpl, "%s" TH_DIR_MARK "XXXXXX", tmp) != 0 || !mkdtemp(tmpl)) {
        th_err("cannot create a temp dir under %s: %s", tmp, strerror(errno));
        return -1;
    }
    if (!realpath(tmpl, real) || th_fmt(r->dir, sizeof r->dir, "%s", real) != 0 ||
        th_fmt(r->sock, sizeof r->sock, "%s/redis.sock", r->dir) != 0 ||
        strlen(r->sock) >= sizeof sa_un.sun_path ||
        th_fmt(r->uri, sizeof r->uri, "unix://%s", r->sock) != 0) {
        th_err("temp dir path %s is too long for a unix socket", tmpl);
        rmdir(tmpl);
        memset(r, 0, sizeof *r);
        return -1;
    }

    for (attempt = 0; attempt < (tcp ? TH_PORT_ATTEMPTS : 1); attempt++) {
        if (tcp && (r->port = th_free_port()) <= 0)
            break;
        if (th_write_conf(r, extra_conf) != 0)
            break;
        if (th_launch(r, &busy) == 0)
            return 0;
        if (!busy)
            break;
        th_err("port %d on 127.0.0.1 was taken meanwhile, retrying with another", r->port);
    }
    if (busy) {
        char logpath[512];

        th_err("could not bind a free TCP port on 127.0.0.1 after %d attempts", TH_PORT_ATTEMPTS);
        if (th_fmt(logpath, sizeof logpath, "%s/redis.log", r->dir) == 0)
            th_print_tail(logpath, 0, 5);
    }
    th_rm_tree(r->dir, TH_DIR_MARK);
    memset(r, 0, sizeof *r);
    return -1;
}

void th_redis_stop(th_redis *r)
{
    if (!r)
        return;
    if (r->pid > 0)
        th_proc_stop(r->pid, SIGTERM);
    r->pid = 0;
    if (r->dir[0])
        th_rm_tree(r->dir, TH_DIR_MARK);
    if (r->sock[0] && strcmp(th_last_sock, r->sock) == 0)
        th_last_sock[0] = '\0';
    memset(r, 0, sizeof *r);
}

void th_redis_kill(th_redis *r)
{
    if (!r || r->pid <= 0)
        return;
    if (!th_proc_gone(r->pid, NULL)) {
        kill(r->pid, SIGKILL);
        if (!th_proc_wait(r->pid, TH_STOP_TIMEOUT_MS, NULL))
            th_err("redis-server pid %ld still there after SIGKILL", (long)r->pid);
    }
    r->pid = 0;
}

int th_redis_restart(th_redis *r)
{
    char conf[512];
    int busy;

    if (!r || !r->dir[0]) {
        th_err("th_redis_restart: no server (never started, or stopped)");
        return -1;
    }
    if (th_fmt(conf, sizeof conf, "%s/redis.conf", r->dir) != 0 || access(conf, R_OK) != 0) {
        th_err("th_redis_restart: %s is gone", conf);
        return -1;
    }
    if (r->pid > 0)
        th_proc_stop(r->pid, SIGTERM);
    r->pid = 0;
    if (th_launch(r, &busy) == 0)
        return 0;
    if (busy)
        th_err("cannot restart: TCP port %d on 127.0.0.1 is taken now", r->port);
    return -1;
}

/* ---- clients --------------------------------------------------------------- */

static redisContext *th_connect_path(const char *sock)
{
    struct timeval tv = { 5, 0 };
    redisContext *c = redisConnectUnixWithTimeout(sock, tv);

    if (!c) {
        th_err("connect to %s: out of memory", sock);
        return NULL;
    }
    if (c->err) {
        th_err("connect to %s: %s", sock, c->errstr);
        redisFree(c);
        return NULL;
    }
    if (redisSetTimeout(c, tv) != REDIS_OK) {
        th_err("set timeout on %s: %s", sock, c->errstr);
        redisFree(c);
        return NULL;
    }
    return c;
}

redisContext *th_redis_connect(const th_redis *r)
{
    if (!r || !r->sock[0]) {
        th_err("th_redis_connect: no server");
        return NULL;
    }
    return th_connect_path(r->sock);
}

long long th_redis_int(redisContext *ctx, int argc, const char **argv)
{
    redisContext *own = NULL;
    redisReply *rep;
    long long v = -1;

    if (argc <= 0 || !argv || !argv[0]) {
        th_err("th_redis_int: no command");
        return -1;
    }
    if (!ctx) {
        if (!th_last_sock[0]) {
            th_err("th_redis_int(NULL, ...): no server started in this process");
            return -1;
        }
        own = ctx = th_connect_path(th_last_sock);
        if (!ctx)
            return -1;
    }
    rep = redisCommandArgv(ctx, argc, argv, NULL);
    if (!rep) {
        th_err("%s: %s", argv[0], ctx->errstr[0] ? ctx->errstr : "no reply");
    } else if (rep->type == REDIS_REPLY_INTEGER) {
        v = rep->integer;
    } else if (rep->type == REDIS_REPLY_ERROR) {
        th_err("%s: error reply: %s", argv[0], rep->str);
    } else if (rep->type == REDIS_REPLY_STATUS || rep->type == REDIS_REPLY_STRING) {
        th_err("%s: reply \"%.60s\" is not an integer", argv[0], rep->str);
    } else {
        th_err("%s: reply of hiredis type %d is not an integer", argv[0], rep->type);
    }
    if (rep)
        freeReplyObject(rep);
    if (own)
        redisFree(own);
    return v;
}
