/*
 * clock.c - the client's monotonic clock, in the base layer every unit may
 * use.  The client measures only durations with it (waits, timeouts):
 * every scheduling decision is taken on the Redis server's clock.
 */
#include <time.h>

#include "internal.h"

int64_t dq__mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
