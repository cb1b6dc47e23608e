/*
 * encode/jdouble_internal: what jdouble.c (layout and the fast path),
 * jdouble_dtoa.c (the JDK's digit loop in 32 and 64 bits) and jdouble_wide.c
 * (its 128-bit and arbitrary-precision variants) share: the digit buffer,
 * small tables, the decimal-exponent estimate and the digit loops' entry
 * points. Not part of the module's interface.
 */
#ifndef MCDC_ENCODE_JDOUBLE_INTERNAL_H
#define MCDC_ENCODE_JDOUBLE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "encode/digits_internal.h"

#define MAX_DIGITS 20

struct jdigits {
    char d[MAX_DIGITS + 2];
    int n;
    int dexp; /* value = 0.d1d2...dn * 10^dexp */
};

static inline void put_digit(struct jdigits *out, int q)
{
    if (out->n < MAX_DIGITS) {
        out->d[out->n++] = (char)('0' + q);
    }
}

/* Copies n <= 24 bytes; short copies inline instead of calling memcpy. */
static inline void copy_small(char *dst, const char *src, size_t n)
{
    if (n <= 8) {
        for (size_t i = 0; i < n; i++) {
            dst[i] = src[i];
        }
        return;
    }
    memcpy(dst, src, 8);
    for (size_t i = 8; i < n; i++) {
        dst[i] = src[i];
    }
}

static const int n5bits[27] = {0,  3,  5,  7,  10, 12, 14, 17, 19, 21, 24, 26, 28, 31,
                               33, 35, 38, 40, 42, 45, 47, 49, 52, 54, 56, 59, 61};

/* 5^n, n < 28 (the JDK's LONG_5_POW range and one more) */
static const uint64_t pow5_tab[28] = {
    UINT64_C(1),
    UINT64_C(5),
    UINT64_C(25),
    UINT64_C(125),
    UINT64_C(625),
    UINT64_C(3125),
    UINT64_C(15625),
    UINT64_C(78125),
    UINT64_C(390625),
    UINT64_C(1953125),
    UINT64_C(9765625),
    UINT64_C(48828125),
    UINT64_C(244140625),
    UINT64_C(1220703125),
    UINT64_C(6103515625),
    UINT64_C(30517578125),
    UINT64_C(152587890625),
    UINT64_C(762939453125),
    UINT64_C(3814697265625),
    UINT64_C(19073486328125),
    UINT64_C(95367431640625),
    UINT64_C(476837158203125),
    UINT64_C(2384185791015625),
    UINT64_C(11920928955078125),
    UINT64_C(59604644775390625),
    UINT64_C(298023223876953125),
    UINT64_C(1490116119384765625),
    UINT64_C(7450580596923828125),
};

/* 5^n; beyond the table it wraps as Java's long arithmetic would (the
 * callers stay inside the table). */
static inline uint64_t pow5_u64(int n)
{
    if (n < 28) {
        return pow5_tab[n];
    }
    uint64_t r = pow5_tab[27];
    for (int i = 27; i < n; i++) {
        r *= 5;
    }
    return r;
}

static const uint64_t pow10_tab[17] = {1u,
                                       10u,
                                       100u,
                                       1000u,
                                       10000u,
                                       100000u,
                                       1000000u,
                                       10000000u,
                                       100000000u,
                                       1000000000u,
                                       10000000000u,
                                       100000000000u,
                                       1000000000000u,
                                       10000000000000u,
                                       100000000000000u,
                                       1000000000000000u,
                                       10000000000000000u};

#ifdef __SIZEOF_INT128__
__extension__ typedef unsigned __int128 u128;
#endif

/* floor(log10(v)) estimated from the bits exactly as the JDK does it. */
static inline int estimate_dec_exp(uint64_t fract, int bin_exp)
{
    uint64_t b = (UINT64_C(1023) << 52) | (fract & ((UINT64_C(1) << 52) - 1));
    double d2;
    memcpy(&d2, &b, sizeof d2);
    double d = (d2 - 1.5) * 0.289529654 + 0.176091259 + (double)bin_exp * 0.301029995663981;
    int f = (int)d; /* |d| < 400: no overflow */
    return f - (d < (double)f);
}

/*
 * The digits the JDK prints for the positive, finite, non-zero double whose
 * bits are bits: writes n <= 20 digit characters (no terminator) to digits,
 * which has room for 32, and the decimal exponent to *dexp (value =
 * 0.d1..dn * 10^dexp); returns n. Defined in jdouble_dtoa.c.
 */
int jdouble_java_digits(uint64_t bits, char *digits, int *dexp);

/*
 * The JDK's arbitrary-precision digit loop (FDBigInteger) for
 * B = fract * 5^B5 * 2^B2, S = 5^S5 * 2^S2, M = 5^M5 * 2^M2: appends the
 * digits to out, updates *dec_exp when the first quotient is a dropped zero,
 * and reports the final stop flags and the sign of 2B - 10S in *ldd (only
 * when both flags are set). jdouble_digits_u128 is the same loop for
 * operands that fit in 118 bits.
 */
void jdouble_digits_big(struct jdigits *out, uint64_t fract, int B5, int B2, int S5, int S2, int M5,
                        int M2, int *dec_exp, bool *low, bool *high, int64_t *ldd);
#ifdef __SIZEOF_INT128__
void jdouble_digits_u128(struct jdigits *out, uint64_t fract, int B5, int B2, int S5, int S2,
                         int M5, int M2, int *dec_exp, bool *low, bool *high, int64_t *ldd);
#endif

#endif
