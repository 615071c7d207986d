/*
 * clockshift: an LD_PRELOAD module that moves a process's wall clock by an
 * offset read from a file, for the partition harness's clock-jump fault.
 *
 * Debian's libfaketime (0.9.10) cannot run redis-server: jemalloc reads
 * the clock while libfaketime initialises, and libfaketime gives up on the
 * recursion.  This module needs no initialisation and no allocation: the
 * real time comes from the clock_gettime system call, and the offset
 * (signed milliseconds as text) from the file named by DQJ_CLOCK_FILE,
 * read again at most every 100 ms (by CLOCK_MONOTONIC, which it leaves
 * alone, as Redis's timers use it).  It moves gettimeofday, time and
 * clock_gettime(CLOCK_REALTIME*), what Redis's TIME and its scripts see.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int64_t offset_ms, read_at_ms = -1000;

static int sys_clock(clockid_t id, struct timespec *ts)
{
    return (int)syscall(SYS_clock_gettime, id, ts);
}

static int64_t read_offset(void)
{
    const char *path = getenv("DQJ_CLOCK_FILE");
    char buf[32] = {0};
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0)
        return offset_ms;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 ? strtoll(buf, NULL, 10) : offset_ms;
}

static int64_t current_offset(void)
{
    struct timespec m;
    sys_clock(CLOCK_MONOTONIC, &m);
    int64_t now = (int64_t)m.tv_sec * 1000 + m.tv_nsec / 1000000;
    if (now - read_at_ms >= 100) {
        offset_ms = read_offset();
        read_at_ms = now;
    }
    return offset_ms;
}

static void shift(struct timespec *ts)
{
    int64_t ns = (int64_t)ts->tv_nsec + current_offset() % 1000 * 1000000;
    ts->tv_sec += (time_t)(current_offset() / 1000 + ns / 1000000000);
    ts->tv_nsec = (long)(ns % 1000000000);
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000;
        ts->tv_sec -= 1;
    }
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int rc = sys_clock(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        shift(ts);
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;
    (void)tz;
    if (sys_clock(CLOCK_REALTIME, &ts) != 0)
        return -1;
    shift(&ts);
    tv->tv_sec = ts.tv_sec; /* glibc declares tv nonnull */
    tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
    return 0;
}

time_t time(time_t *out)
{
    struct timespec ts;
    sys_clock(CLOCK_REALTIME, &ts);
    shift(&ts);
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
