/*
 * encode/digits_internal: decimal digits eight at a time, shared by the
 * integer writer (ejson.c) and the double writer (jdouble*.c). Not part of
 * the module's interface.
 */
#ifndef MCDC_ENCODE_DIGITS_INTERNAL_H
#define MCDC_ENCODE_DIGITS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define MCDC_DIGIT_WORDS 1

/* The 8 decimal digits of q < 10^8, zero-padded, as byte values 0..9 in one
 * word, the first digit in the low byte (memory order on this target).
 * Splits q into two 4-digit lanes, then each lane into 2-digit and 1-digit
 * lanes with multiply-and-shift quotients (x * 10486 >> 20 = x / 100 for
 * x < 10^4, y * 103 >> 10 = y / 10 for y < 100); no lane carries into the
 * next. Checked against division for every q < 10^8. */
static inline uint64_t eight_digit_values(uint32_t q)
{
    uint32_t hi = q / 10000u;
    uint64_t p = hi | ((uint64_t)(q - hi * 10000u) << 32);
    uint64_t q2 = ((p * 10486u) >> 20) & UINT64_C(0x0000007F0000007F);
    p = (p << 16) - q2 * (100u * 65536u - 1u);
    uint64_t q3 = ((p * 103u) >> 10) & UINT64_C(0x000F000F000F000F);
    return (p << 8) - q3 * (10u * 256u - 1u);
}

/* The 8 decimal digits of q < 10^8, zero-padded, as characters. */
static inline void eight_digits(uint32_t q, char *out)
{
    uint64_t w = eight_digit_values(q) + UINT64_C(0x3030303030303030);
    memcpy(out, &w, 8);
}
#else
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";

/* The 8 decimal digits of q < 10^8, zero-padded, as characters. */
static inline void eight_digits(uint32_t q, char *out)
{
    uint32_t hi = q / 10000u, lo = q % 10000u;
    memcpy(out, digit_pairs + 2 * (hi / 100u), 2);
    memcpy(out + 2, digit_pairs + 2 * (hi % 100u), 2);
    memcpy(out + 4, digit_pairs + 2 * (lo / 100u), 2);
    memcpy(out + 6, digit_pairs + 2 * (lo % 100u), 2);
}
#endif

#ifdef MCDC_DIGIT_WORDS
/*
 * Decimal text of v (< 2^32) into out, which has room for 16 bytes (bytes
 * past the returned length may be overwritten); returns the length (1..10).
 * The same text as digits_u64, with one group of eight digits at most.
 */
static inline size_t digits_u32(uint32_t v, char *out)
{
    size_t n = 0;
    if (v >= 100000000u) {
        uint32_t top = v / 100000000u; /* 1..42 */
        v -= top * 100000000u;
        if (top >= 10) {
            out[n++] = (char)('0' + top / 10);
        }
        out[n++] = (char)('0' + top % 10);
        eight_digits(v, out + n);
        return n + 8;
    }
    uint64_t w = eight_digit_values(v);
    int lead = w ? __builtin_ctzll(w) / 8 : 7; /* v == 0 prints "0" */
    w = (w + UINT64_C(0x3030303030303030)) >> (8 * lead);
    memcpy(out, &w, 8);
    return (size_t)(8 - lead);
}
#endif

/*
 * Decimal text of v into out, which has room for 24 bytes (bytes past the
 * returned length may be overwritten); returns the length (1..20). Up to
 * eight digits at a time: the leading group without its leading zeros, then
 * zero-padded groups of eight.
 */
static inline size_t digits_u64(uint64_t v, char *out)
{
    if (v < 100) { /* short values (counts, small ids) without the word */
        if (v < 10) {
            out[0] = (char)('0' + v);
            return 1;
        }
        out[0] = (char)('0' + v / 10);
        out[1] = (char)('0' + v % 10);
        return 2;
    }
#ifdef MCDC_DIGIT_WORDS
    uint64_t top = v, mid = 0, low = 0;
    int groups = 0; /* full groups of eight after the leading one */
    if (v >= UINT64_C(10000000000000000)) {
        top = v / UINT64_C(10000000000000000);
        uint64_t rest = v - top * UINT64_C(10000000000000000); /* two divisions, not four */
        mid = rest / 100000000u;
        low = rest - mid * 100000000u;
        groups = 2;
    } else if (v >= 100000000u) {
        top = v / 100000000u;
        low = v - top * 100000000u;
        groups = 1;
    }
    /* top < 10^8; its leading zero digits are the low zero bytes */
    uint64_t w = eight_digit_values((uint32_t)top);
    int lead = w ? __builtin_ctzll(w) / 8 : 7; /* v == 0 prints "0" */
    w = (w + UINT64_C(0x3030303030303030)) >> (8 * lead);
    memcpy(out, &w, 8);
    size_t n = (size_t)(8 - lead);
    if (groups == 2) {
        eight_digits((uint32_t)mid, out + n);
        n += 8;
    }
    if (groups >= 1) {
        eight_digits((uint32_t)low, out + n);
        n += 8;
    }
    return n;
#else
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) {
        out[i] = tmp[n - 1 - i];
    }
    return n;
#endif
}

#endif
