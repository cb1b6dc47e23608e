/*
 * encode/jdouble: Java's Double.toString(double) in C (debezium-format.md
 * §2.3, "double finite").
 *
 * Two steps, as in the JDK: pick a decimal digit string d1..dn and an
 * exponent, then lay it out. Layout (Double.toString's javadoc): plain
 * decimal with at least one fractional digit when 1e-3 <= |v| < 1e7,
 * otherwise d.ddd"E"exp with no '+'.
 *
 * Digits: those of JDK 17 (the JVM of the differential oracle and of the
 * Debezium 1.9-2.x images). JDK 19 and later print the shortest digit string
 * (JDK-4511638); JDK <= 18 sometimes print one or two more digits, or a
 * trailing zero, and we reproduce that, since Debezium on JDK 11/17 is what
 * consumers see.
 *
 * This file lays the digits out and holds the fast path for short
 * plain-notation values; the JDK's general digit loop is in jdouble_dtoa.c
 * (its 128-bit and arbitrary-precision variants in jdouble_wide.c).
 */
#include "encode/ejson.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "encode/jdouble_internal.h"

/*
 * ---- Fast path: plain-notation values (1e-3 <= v < 1e7)
 *
 * Most doubles in real documents are plain-notation values, often short
 * decimals (prices, rates, readings rounded to a few places). For those the
 * digit loop above ends on the shortest decimal that reads back as the same
 * double (the nearest such one when there are several), so that decimal can
 * be found directly: for up to 15 digits with one multiplication and one
 * division, for 16-17 digits in 128-bit integers (short_plain_exact).
 *
 *  - Range 1e-3 <= v < 1e7 (plain notation): the loop's stop test applies
 *    from the first digit (no forced second digit as in E-form).
 *  - Let D be the shortest decimal that rounds to v, with n <= 15
 *    significant digits and last-digit unit u. Then half an ulp of v is
 *    below u/9, so D is the only n-digit decimal within half an ulp, and no
 *    decimal of <= 17 digits lies exactly half an ulp from v (such a point
 *    is an odd multiple of 2^(e-53), e <= 23, which needs more than 30
 *    significant digits): the loop's strict and non-strict comparisons
 *    agree. Before digit n the stop test would name a shorter decimal
 *    within half an ulp, so it fails; at digit n it holds for exactly one
 *    of "low" (D <= v: the truncated digits are D) and "high" (D > v: they
 *    are D minus one unit, rounded up without carry since D ends in a
 *    non-zero digit). Either way the loop prints D.
 *  - Excluded, left to the loop: powers of two (the JDK narrows the
 *    interval to a quarter ulp on both sides), the 32-bit loop, and the
 *    64-bit loop when 10S >= 2^62, where Java's b + m can wrap and the
 *    JDK then prints extra digits.
 *
 * D padded to 15 digits is the only 15-digit decimal within half an ulp,
 * so N = round(v * 10^k) with k = 14 - decExp finds it (the product's
 * rounding error is far below 0.5), and N / 10^k == v in double arithmetic
 * (both operands exact, the quotient correctly rounded) proves N rounds to
 * v. Stripping N's trailing zeros gives D.
 *
 * short_plain takes the bits of a positive double; returns 1 with the
 * digits the JDK prints in *sd, or 0 when the value is not in this class
 * (then dtoa decides).
 */
static const double pow10_dbl[18] = {1e0, 1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,
                                     1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17};

/* The fast path's digits: D = N * 10^-k with N's 24 zero-padded digits at
 * d[0..24), zeros at d[24..48) (so fixed-size copies may read past the
 * digits), d[first] the first non-zero digit, d[end - 1] the last, and the
 * decimal point after d[24 - k - 1]. */
struct short_dec {
    char d[48];
    int first, end, k;
};

#define ZEROS8 UINT64_C(0x3030303030303030)

/* Lays D * 10^-k (D < 10^18) out in sd as described above. */
static void short_fill(struct short_dec *sd, uint64_t D, int k)
{
#ifdef JDOUBLE_DIGIT_WORDS
    /* zero digits are zero bytes; the first character is the low byte */
    uint64_t w0 = 0;
    if (D >= UINT64_C(10000000000000000)) {
        w0 = eight_digit_values((uint32_t)(D / UINT64_C(10000000000000000)));
        D %= UINT64_C(10000000000000000);
    }
    uint64_t w1 = eight_digit_values((uint32_t)(D / 100000000u));
    uint64_t w2 = eight_digit_values((uint32_t)(D % 100000000u));
    /* D != 0: not all zero */
    sd->first = w0   ? __builtin_ctzll(w0) / 8
                : w1 ? 8 + __builtin_ctzll(w1) / 8
                     : 16 + __builtin_ctzll(w2) / 8;
    sd->end = w2   ? 24 - __builtin_clzll(w2) / 8
              : w1 ? 16 - __builtin_clzll(w1) / 8
                   : 8 - __builtin_clzll(w0) / 8;
    w0 += ZEROS8;
    w1 += ZEROS8;
    w2 += ZEROS8;
    memcpy(sd->d, &w0, 8);
    memcpy(sd->d + 8, &w1, 8);
    memcpy(sd->d + 16, &w2, 8);
    memset(sd->d + 24, '0', 24);
#else
    if (D < UINT64_C(10000000000000000)) {
        memset(sd->d, '0', 8);
    } else {
        eight_digits((uint32_t)(D / UINT64_C(10000000000000000)), sd->d);
        D %= UINT64_C(10000000000000000);
    }
    eight_digits((uint32_t)(D / 100000000u), sd->d + 8);
    eight_digits((uint32_t)(D % 100000000u), sd->d + 16);
    memset(sd->d + 24, '0', 24);
    int first = 0, end = 24;
    while (sd->d[first] == '0') {
        first++;
    }
    while (sd->d[end - 1] == '0') {
        end--;
    }
    sd->first = first;
    sd->end = end;
#endif
    sd->k = k;
}

/*
 * The same class with 16 or 17 digits, where half an ulp can span several
 * candidates, in exact integer arithmetic: v * 10^k = X / 2^sh with
 * X = significand * 5^k, and half an ulp is 5^k / 2 in units of 2^-sh. The
 * integers lo..hi (in units of 10^-k) are the decimals strictly within half
 * an ulp (never on its edge, as above). The shortest length is the coarsest
 * unit 10^j with a multiple in lo..hi; there the digit loop stops with
 * "low" if floor(v * 10^(k-j)) is in range and "high" if the next one is,
 * and takes the nearer of the two when both are (ties: the even one, its
 * "2B vs 10S" test), which is what is computed here.
 */
static int short_plain_exact(struct short_dec *sd, uint64_t fract, int bin_exp, int dec_exp)
{
#ifdef __SIZEOF_INT128__
    int k = 16 - dec_exp; /* 9 <= k <= 19 */
    int sh = 52 - bin_exp - k;
    if (sh < 1 || sh > 62) {
        return 0;
    }
    uint64_t p5 = pow5_tab[k];
    u128 X = (u128)fract * p5; /* < 2^98 */
    uint64_t T = (uint64_t)(X >> sh);
    if (T >= UINT64_C(100000000000000000)) {
        return 0;
    }
    uint64_t R = (uint64_t)X & ((UINT64_C(1) << sh) - 1);
    uint64_t lo = (uint64_t)((2 * X - p5) >> (sh + 1)) + 1;
    uint64_t hi = (uint64_t)((2 * X + p5) >> (sh + 1));
    if (hi < lo) {
        return 0;
    }
    int j = 0;
    while (j < 16) {
        uint64_t nlo = (lo + 9) / 10, nhi = hi / 10;
        if (nhi < nlo) {
            break;
        }
        lo = nlo;
        hi = nhi;
        j++;
    }
    uint64_t pj = pow10_tab[j];
    uint64_t Tj = T / pj, rem = T - Tj * pj;
    bool low = Tj >= lo, high = Tj + 1 <= hi;
    uint64_t D;
    if (low && high) {
        u128 l = ((u128)rem << (sh + 1)) + 2 * (u128)R;
        u128 r = (u128)pj << sh;
        D = (l > r || (l == r && (Tj & 1))) ? Tj + 1 : Tj;
    } else if (low) {
        D = Tj;
    } else if (high) {
        D = Tj + 1;
    } else {
        return 0;
    }
    short_fill(sd, D, k - j);
    return 1;
#else
    (void)sd;
    (void)fract;
    (void)bin_exp;
    (void)dec_exp;
    return 0;
#endif
}

static int short_plain(uint64_t bits, struct short_dec *sd)
{
    double v;
    memcpy(&v, &bits, sizeof v);
    if (!(v >= 1e-3 && v < 1e7)) {
        return 0;
    }
    uint64_t fract = bits & ((UINT64_C(1) << 52) - 1);
    if (fract == 0) {
        return 0; /* power of two */
    }
    fract |= UINT64_C(1) << 52;
    int bin_exp = (int)(bits >> 52) - 1023;
    int dec_exp = estimate_dec_exp(fract, bin_exp);
    if (dec_exp < -3 || dec_exp > 7) {
        return 0;
    }
    /* Which loop the JDK runs (as in dtoa): only the 64-bit one has a
     * wrap-around to rule out; the 32-bit one is left to dtoa. */
    int tail_zeros = __builtin_ctzll(fract);
    int n_fract_bits = 53 - tail_zeros;
    int n_tiny_bits = n_fract_bits - bin_exp - 1;
    if (n_tiny_bits > 0) {
        int B5 = dec_exp < 0 ? -dec_exp : 0;
        int B2 = B5 + n_tiny_bits + bin_exp;
        int S5 = dec_exp > 0 ? dec_exp : 0;
        int S2 = S5 + n_tiny_bits;
        int M2 = B2 - 53;
        B2 -= n_fract_bits - 1;
        int common2 = B2 < S2 ? B2 : S2;
        B2 -= common2;
        S2 -= common2;
        M2 -= common2;
        if (M2 < 0) {
            B2 -= M2;
            S2 -= M2;
        }
        int b_bits = n_fract_bits + B2 + n5bits[B5];
        int ten_s_bits = S2 + 1 + n5bits[S5 + 1];
        if (b_bits < 64 && ten_s_bits < 64 && (ten_s_bits >= 63 || b_bits < 32)) {
            return 0;
        }
    }
    int k = 14 - dec_exp; /* 7 <= k <= 17 */
    double p = v * pow10_dbl[k];
    if (p < 1e15) {
        uint64_t N = (uint64_t)(p + 0.5); /* p < 2^50: p + 0.5 is exact */
        if (N != 0 && N < UINT64_C(1000000000000000) && (double)N / pow10_dbl[k] == v) {
            short_fill(sd, N, k);
            return 1;
        }
    }
    return short_plain_exact(sd, fract, bin_exp, dec_exp);
}

size_t ejson_java_double(double v, char *out)
{
    char *p = out;
    if (isnan(v)) {
        memcpy(out, "NaN", 3);
        return 3;
    }
    if (signbit(v)) {
        *p++ = '-';
        v = -v;
    }
    if (isinf(v)) {
        memcpy(p, "Infinity", 8);
        return (size_t)(p - out) + 8;
    }
    if (v == 0) {
        memcpy(p, "0.0", 3);
        return (size_t)(p - out) + 3;
    }
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    struct short_dec sd;
    if (short_plain(bits, &sd)) {
        /* 1e-3 <= D < 1e7, at most 17 digits (short_plain): the plain
         * layout below, with fixed-size copies (out has 32 bytes; at most
         * 1 + 2 + 24 are written) */
        int point = 24 - sd.k;     /* index of the first fractional digit */
        int frac = sd.end - point; /* fractional digits, may be <= 0 */
        if (point > sd.first) {
            memcpy(p, sd.d + sd.first, 8);
            p += point - sd.first; /* <= 7 integer digits */
            *p++ = '.';
            if (frac > 0) {
                memcpy(p, sd.d + point, 16);
                p += frac; /* <= 16 */
            } else {
                *p++ = '0';
            }
        } else {
            memcpy(p, "0.", 2);
            p += 2;
            memcpy(p, sd.d + point, 24);
            p += frac; /* <= 2 + 17 */
        }
        return (size_t)(p - out);
    }
    char digits[32];
    int dexp;
    int n = jdouble_java_digits(bits, digits, &dexp);
    if (dexp > 0 && dexp < 8) {
        /* 1 <= v < 1e7: integer part, '.', fraction (at least one digit) */
        int ip = n < dexp ? n : dexp;
        copy_small(p, digits, (size_t)ip);
        p += ip;
        if (ip < dexp) {
            memset(p, '0', (size_t)(dexp - ip));
            p += dexp - ip;
            memcpy(p, ".0", 2);
            p += 2;
        } else {
            *p++ = '.';
            if (ip < n) {
                copy_small(p, digits + ip, (size_t)(n - ip));
                p += n - ip;
            } else {
                *p++ = '0';
            }
        }
    } else if (dexp <= 0 && dexp > -3) {
        /* 1e-3 <= v < 1: "0." then -dexp zeros then the digits */
        *p++ = '0';
        *p++ = '.';
        memset(p, '0', (size_t)-dexp);
        p += -dexp;
        copy_small(p, digits, (size_t)n);
        p += n;
    } else {
        *p++ = digits[0];
        *p++ = '.';
        if (n > 1) {
            copy_small(p, digits + 1, (size_t)(n - 1));
            p += n - 1;
        } else {
            *p++ = '0';
        }
        *p++ = 'E';
        int e = dexp - 1;
        if (e < 0) {
            *p++ = '-';
            e = -e;
        }
        char eb[8];
        int k = 0;
        do {
            eb[k++] = (char)('0' + e % 10);
            e /= 10;
        } while (e);
        while (k) {
            *p++ = eb[--k];
        }
    }
    return (size_t)(p - out);
}

int ejson_java_digits(double v, char *digits, int *dexp)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    bits &= ~(UINT64_C(1) << 63);
    struct short_dec sd;
    if (short_plain(bits, &sd)) {
        int n = sd.end - sd.first; /* <= 17 */
        memcpy(digits, sd.d + sd.first, 20);
        *dexp = (24 - sd.k) - sd.first;
        return n;
    }
    return jdouble_java_digits(bits, digits, dexp);
}
