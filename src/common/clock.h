/*
 * common/clock: the daemon's clocks, one definition each.
 *
 * Monotonic time (CLOCK_MONOTONIC) is for intervals, deadlines and timeouts: it
 * never jumps when the wall clock is set. Wall time (CLOCK_REALTIME) is for values
 * that leave the process (record timestamps, notifications, metrics exposition).
 * Condition-variable deadlines use the clock the condition variable waits on:
 * CLOCK_REALTIME by default (pthread_cond_timedwait), or CLOCK_MONOTONIC where
 * the condition was made with pthread_condattr_setclock.
 *
 * Thread: every function is safe from any thread.
 */
#ifndef MCDC_COMMON_CLOCK_H
#define MCDC_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic milliseconds since an unspecified start (boot); only differences
 * mean something. */
int64_t mcdc_clock_mono_ms(void);

/* Monotonic nanoseconds, as mcdc_clock_mono_ms, for short durations. */
int64_t mcdc_clock_mono_ns(void);

/* Wall-clock milliseconds since the Unix epoch. */
int64_t mcdc_clock_wall_ms(void);

/* Wall-clock microseconds since the Unix epoch. */
int64_t mcdc_clock_wall_us(void);

/* The absolute time ms milliseconds (>= 0) after now on clock clk
 * (CLOCK_REALTIME or CLOCK_MONOTONIC), normalised (tv_nsec < 1e9): the deadline
 * for pthread_cond_timedwait on a condition variable using that clock. */
struct timespec mcdc_clock_deadline(clockid_t clk, int64_t ms);

#endif
