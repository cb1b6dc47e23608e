/* common/clock: see clock.h. */
#include "common/clock.h"

static struct timespec now(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return ts;
}

int64_t mcdc_clock_mono_ms(void)
{
    struct timespec ts = now(CLOCK_MONOTONIC);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mcdc_clock_mono_ns(void)
{
    struct timespec ts = now(CLOCK_MONOTONIC);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t mcdc_clock_wall_ms(void)
{
    struct timespec ts = now(CLOCK_REALTIME);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mcdc_clock_wall_us(void)
{
    struct timespec ts = now(CLOCK_REALTIME);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

struct timespec mcdc_clock_deadline(clockid_t clk, int64_t ms)
{
    struct timespec ts = now(clk);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}
