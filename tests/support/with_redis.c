/*
 * tests/support/with_redis.c - runs a command next to a private redis-server.
 *
 * usage: with_redis [--tcp | --cluster] [--] COMMAND [ARG...]
 *
 * Starts redis-server through the test harness (harness.h: a fresh temp dir,
 * a unix socket, no persistence; with --tcp also 127.0.0.1:<free port>),
 * runs COMMAND with these in its environment:
 *
 *   DQ_TEST_REDIS_URI     unix://<socket>, for dq_open and the CLI's --uri
 *   DQ_TEST_REDIS_SOCKET  the socket's path, for raw RESP
 *   DQ_TEST_REDIS_PORT    the TCP port (only with --tcp)
 *
 * With --cluster it starts a 3-primary Redis Cluster instead
 * (cluster_harness.h) and exports only DQ_TEST_REDIS_URI, a
 * redis+cluster:// URI of its primaries.
 *
 * then stops the server by pid, removes its dir and exits with COMMAND's exit
 * code (128 + the signal if a signal ended it).  SIGTERM, SIGINT and SIGHUP
 * are passed on to COMMAND, so meson's timeout still ends the test.  Exits
 * 125 if the server cannot be started (a failure, never a skip) and 127 if
 * COMMAND cannot be run.  The meson test() entries of the CLI and Python
 * suites run under it; the C suites start their server in their own main
 * (test_suite.c) through the same harness.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_harness.h"
#include "harness.h"

/* The command's pid, for the signal handler. */
static volatile sig_atomic_t g_child;

/* Passes a terminating signal on to the command. */
static void forward(int sig) {
    if (g_child > 0)
        kill((pid_t)g_child, sig);
}

/* Prints the usage and returns the exit code of a usage error. */
static int usage(void) {
    fprintf(stderr,
            "usage: with_redis [--tcp | --cluster] [--] COMMAND [ARG...]\n");
    return 2;
}

/* The servers: one, or a cluster. */
static th_redis g_srv;
static thc_cluster g_cluster;
static int g_is_cluster;

static void stop_servers(void) {
    if (g_is_cluster)
        thc_cluster_stop(&g_cluster);
    else
        th_redis_stop(&g_srv);
}

/* Starts the servers and exports where they are; 0 or 125. */
static int start_servers(int tcp) {
    if (g_is_cluster) {
        char uri[1024];
        if (thc_cluster_start(&g_cluster, 3, 0, NULL) != 0) {
            fprintf(stderr, "with_redis: cannot start a cluster (is "
                            "redis-server installed? run tools/deps.sh)\n");
            return 125;
        }
        if (setenv("DQ_TEST_REDIS_URI",
                   thc_cluster_uri(&g_cluster, uri, sizeof(uri)), 1) != 0) {
            perror("with_redis: setenv");
            stop_servers();
            return 125;
        }
        return 0;
    }
    if (th_redis_start(&g_srv, tcp, NULL) != 0) {
        fprintf(stderr, "with_redis: cannot start redis-server (is it "
                        "installed? run tools/deps.sh)\n");
        return 125;
    }
    char port[16];
    snprintf(port, sizeof(port), "%d", g_srv.port);
    if (setenv("DQ_TEST_REDIS_URI", g_srv.uri, 1) != 0 ||
        setenv("DQ_TEST_REDIS_SOCKET", g_srv.sock, 1) != 0 ||
        (tcp && setenv("DQ_TEST_REDIS_PORT", port, 1) != 0)) {
        perror("with_redis: setenv");
        stop_servers();
        return 125;
    }
    return 0;
}

int main(int argc, char **argv) {
    int tcp = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strcmp(argv[i], "--tcp") == 0)
            tcp = 1;
        else if (strcmp(argv[i], "--cluster") == 0)
            g_is_cluster = 1;
        else
            return usage();
    }
    if (i >= argc || (tcp && g_is_cluster))
        return usage();
    int rc = start_servers(tcp);
    if (rc != 0)
        return rc;

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = forward;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    pid_t pid = fork();
    if (pid < 0) {
        perror("with_redis: fork");
        stop_servers();
        return 125;
    }
    if (pid == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        execvp(argv[i], argv + i);
        fprintf(stderr, "with_redis: cannot run %s: %s\n", argv[i],
                strerror(errno));
        _exit(127);
    }
    g_child = pid;

    int status = 0, code;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("with_redis: waitpid");
            status = -1;
            break;
        }
    }
    g_child = 0;
    if (status == -1)
        code = 125;
    else if (WIFEXITED(status))
        code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        code = 128 + WTERMSIG(status);
    else
        code = 125;
    stop_servers();
    return code;
}
