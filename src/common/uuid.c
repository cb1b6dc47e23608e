/*
 * common/uuid: see uuid.h.
 */
#include "common/uuid.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

void mcdc_uuid_v4(char out[MCDC_UUID_LEN + 1])
{
    static atomic_uint_fast64_t counter;
    uint8_t b[16];

    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        struct timespec ts;
        uint64_t t, n = atomic_fetch_add(&counter, 1), p = (uint64_t)getpid();
        clock_gettime(CLOCK_REALTIME, &ts);
        t = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        memcpy(b, &t, 8);
        n ^= p << 40;
        memcpy(b + 8, &n, 8);
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* variant 10 */
    snprintf(out, MCDC_UUID_LEN + 1,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
}
