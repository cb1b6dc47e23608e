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
 * This file lays the digits out and holds the fast paths, which compute the
 * digits the JDK's loop would print in closed form for the common values:
 * integral doubles below 2^53, and plain-notation doubles with fraction bits
 * (below). The JDK's general digit loop, emulated step by step, is in
 * jdouble_dtoa.c (its 128-bit and arbitrary-precision variants in
 * jdouble_wide.c) and decides every other value; test_jdouble compares the
 * fast paths with it.
 */
#include "encode/ejson.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "encode/jdouble_internal.h"

#define FRACT_MASK ((UINT64_C(1) << 52) - 1)
#define ZEROS8 UINT64_C(0x3030303030303030)

/*
 * The decimal digits of D < 10^18 as characters, zero-padded to 24 at
 * d[0..24), with '0' at d[24..48) so that fixed-size copies may read past
 * them; *first is the index of the first non-zero digit, *end one past the
 * last (D != 0).
 */
static inline void digits24(uint64_t D, char d[48], int *first, int *end)
{
#ifdef MCDC_DIGIT_WORDS
    /* zero digits are zero bytes; the first character is the low byte */
    uint64_t w0 = 0;
    if (D >= UINT64_C(10000000000000000)) {
        uint64_t q = D / UINT64_C(10000000000000000); /* 1..18 */
        D -= q * UINT64_C(10000000000000000);
        w0 = q < 10 ? q << 56 : eight_digit_values((uint32_t)q); /* one digit: the last byte */
    }
    uint64_t w1 = eight_digit_values((uint32_t)(D / 100000000u));
    uint32_t low = (uint32_t)(D % 100000000u);
    uint64_t w2 = low ? eight_digit_values(low) : 0; /* zero for most short decimals */
    *first = w0   ? __builtin_ctzll(w0) / 8
             : w1 ? 8 + __builtin_ctzll(w1) / 8
                  : 16 + __builtin_ctzll(w2) / 8;
    *end = w2   ? 24 - __builtin_clzll(w2) / 8
           : w1 ? 16 - __builtin_clzll(w1) / 8
                : 8 - __builtin_clzll(w0) / 8;
    w0 += ZEROS8;
    w1 += ZEROS8;
    w2 += ZEROS8;
    memcpy(d, &w0, 8);
    memcpy(d + 8, &w1, 8);
    memcpy(d + 16, &w2, 8);
    memset(d + 24, '0', 24);
#else
    if (D < UINT64_C(10000000000000000)) {
        memset(d, '0', 8);
    } else {
        eight_digits((uint32_t)(D / UINT64_C(10000000000000000)), d);
        D %= UINT64_C(10000000000000000);
    }
    eight_digits((uint32_t)(D / 100000000u), d + 8);
    eight_digits((uint32_t)(D % 100000000u), d + 16);
    memset(d + 24, '0', 24);
    int f = 0, e = 24;
    while (d[f] == '0') {
        f++;
    }
    while (d[e - 1] == '0') {
        e--;
    }
    *first = f;
    *end = e;
#endif
}

/*
 * Writes D * 10^-k (0 < D < 10^18, 1e-3 <= value < 1e7, at most 17
 * significant digits, k <= 24) in plain notation to p, which has room for
 * 31 bytes: the integer digits (or "0"), '.', the fraction without trailing
 * zeros (or "0"). Returns the length.
 */
static size_t plain_layout(uint64_t D, int k, char *p)
{
    char d[48];
    int first, end;
    digits24(D, d, &first, &end);
    char *start = p;
    int point = 24 - k;     /* index of the first fractional digit */
    int frac = end - point; /* fractional digits, may be <= 0 */
    if (point > first) {
        memcpy(p, d + first, 8);
        p += point - first; /* <= 7 integer digits */
        *p++ = '.';
        if (frac > 0) {
            memcpy(p, d + point, 16);
            p += frac; /* <= 16 */
        } else {
            *p++ = '0';
        }
    } else {
        memcpy(p, "0.", 2);
        p += 2;
        memcpy(p, d + point, 24);
        p += frac; /* <= 2 + 17 */
    }
    return (size_t)(p - start);
}

/*
 * ---- Fast path: integral values below 2^53
 *
 * The JDK's "easy" case (jdouble_dtoa.c, step 1) prints an integral double
 * whose binary exponent is at most 52 as the exact decimal digits of the
 * integer (no insignificant digits to round away: binExp <= nSigBits).
 * Laid out as Java does: plain with ".0" below 1e7, d.ddd"E"exp above.
 * Takes the bits of a positive double; returns the length written to p (room
 * for 31 bytes), or 0 when v is not such an integer.
 */
static size_t integral_fast(uint64_t bits, char *p)
{
    int bin_exp = (int)(bits >> 52) - 1023;
    if (bin_exp < 0 || bin_exp > 52) {
        return 0;
    }
    uint64_t fract = (bits & FRACT_MASK) | (UINT64_C(1) << 52);
    if (fract & ((UINT64_C(1) << (52 - bin_exp)) - 1)) {
        return 0; /* has fraction bits */
    }
    uint64_t N = fract >> (52 - bin_exp);
    if (N < 10000000u) {
        return plain_layout(N, 0, p);
    }
    char d[48];
    int first, end;
    digits24(N, d, &first, &end); /* N < 2^53: 8 <= first digits, end <= 24 */
    char *start = p;
    *p++ = d[first];
    *p++ = '.';
    if (end - first > 1) {
        memcpy(p, d + first + 1, 16);
        p += end - first - 1; /* <= 15 */
    } else {
        *p++ = '0';
    }
    int e = 23 - first; /* 7..15 */
    *p++ = 'E';
    if (e >= 10) {
        *p++ = '1';
        e -= 10;
    }
    *p++ = (char)('0' + e);
    return (size_t)(p - start);
}

/*
 * ---- Fast path: plain-notation values (1e-3 <= v < 1e7) with fraction bits
 *
 * For these the JDK's digit loop (jdouble_dtoa.c, step 2) stops on the
 * shortest decimal within half an ulp of v, so the digits can be computed
 * directly, in exact integer arithmetic, in the manner of the
 * shortest-digit algorithms (Steele & White's stopping rule evaluated in
 * closed form, as Ryu and Schubfach do), without any table: 10^k = 5^k * 2^k
 * and 5^k fits in 64 bits for the k needed here.
 *
 *  - Range and exclusions (as in the JDK's loop): the stop test applies from
 *    the first digit (no forced second digit as in E-form). Excluded, left to
 *    the loop: powers of two (the JDK narrows the interval to a quarter ulp
 *    on both sides), the 32-bit loop, and the 64-bit loop when 10S >= 2^62,
 *    where Java's b + m can wrap and the JDK then prints extra digits
 *    (jdk_loop_ok).
 *  - Scaling: with k = 16 - decExp, v * 10^k = X / 2^sh for X =
 *    significand * 5^k (< 2^98) and half an ulp is 5^k / 2 in units of
 *    2^-sh. The integers lo..hi (in units of 10^-k) are the decimals
 *    strictly within half an ulp. None lies exactly on an edge: an edge is
 *    an odd multiple of 2^(binExp-53), binExp <= 23, which needs more than
 *    30 significant digits; so the loop's strict and non-strict comparisons
 *    agree. Since v * 10^k < 10^17, the interval is narrower than
 *    2^(binExp-52) * 10^k < 10^17 / 2^52 < 23.
 *  - The loop stops after the digit whose unit 10^j is the coarsest with a
 *    multiple in lo..hi, "low" when the truncation floor(v*10^k / 10^j) is in
 *    range, "high" when the next multiple is, and prints the nearer of the
 *    two when both are (ties: the even one, its "2B vs 10S" test). For
 *    j >= 2 the interval (narrower than 100) holds exactly one multiple of
 *    10^j, and it is the one multiple of 100 in range; its trailing zeros
 *    fall away in the layout. For j = 0 or 1 the two neighbours are compared
 *    as the loop does.
 *  - Short decimals first, in double arithmetic: if the answer D has at
 *    most 15 significant digits, half an ulp is below a ninth of D's last
 *    unit, so D padded to 15 digits is the only 15-digit decimal within
 *    half an ulp; N = round(v * 10^(14 - decExp)) finds it (the product's
 *    rounding error is far below 0.5), and N / 10^(14 - decExp) == v (both
 *    operands exact, the quotient correctly rounded) proves that N reads
 *    back as v. Otherwise the integer computation above decides.
 *
 * Takes the bits of a positive double in range; returns the length written
 * to p (room for 31 bytes), or 0 when the value is not in this class (then
 * the loop decides).
 */

static const double pow10_dbl[18] = {1e0, 1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,
                                     1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17};

/*
 * False when the JDK runs its 32-bit loop for v, or its 64-bit loop with
 * 10S >= 2^62 (dtoa's operand sizes). For a value with fraction bits and
 * -3 <= decExp <= 7, dtoa's sizes reduce to closed forms: B has
 * 54 + N5(max(0, -decExp)) < 64 bits (so never the 32-bit loop), and 10S has
 * 57 - binExp + decExp bits when decExp < 0, 54 + decExp - binExp +
 * N5(decExp + 1) otherwise (N5 = n5bits). Only 63 bits is excluded (64 or
 * more is the wide loop). These were checked equal to dtoa's computation
 * for every binExp, decExp and fraction length of the range.
 */
static inline bool jdk_loop_ok(int bin_exp, int dec_exp)
{
    int ten_s_bits =
        dec_exp < 0 ? 57 - bin_exp + dec_exp : 54 + dec_exp - bin_exp + n5bits[dec_exp + 1];
    return ten_s_bits != 63;
}

static size_t plain_fast(uint64_t bits, char *p)
{
    uint64_t fract = bits & FRACT_MASK;
    if (fract == 0) {
        return 0; /* power of two */
    }
    fract |= UINT64_C(1) << 52;
    int bin_exp = (int)(bits >> 52) - 1023;
    int dec_exp = estimate_dec_exp(fract, bin_exp);
    if (dec_exp < -3 || dec_exp > 7 || !jdk_loop_ok(bin_exp, dec_exp)) {
        return 0;
    }
    double v;
    memcpy(&v, &bits, sizeof v);
    double scaled = v * pow10_dbl[14 - dec_exp];
    if (scaled < 1e15) {
        uint64_t N = (uint64_t)(scaled + 0.5); /* scaled < 2^50: the sum is exact */
        if (N != 0 && N < UINT64_C(1000000000000000) && (double)N / pow10_dbl[14 - dec_exp] == v) {
            return plain_layout(N, 14 - dec_exp, p);
        }
    }
#ifdef __SIZEOF_INT128__
    int k = 16 - dec_exp; /* 9 <= k <= 19 */
    int sh = 52 - bin_exp - k;
    if (sh < 1 || sh > 62) {
        return 0;
    }
    uint64_t p5 = pow5_tab[k];
    u128 X = (u128)fract * p5;
    uint64_t T = (uint64_t)(X >> sh);
    if (T >= UINT64_C(100000000000000000)) {
        return 0;
    }
    uint64_t lo = (uint64_t)((2 * X - p5) >> (sh + 1)) + 1;
    uint64_t hi = (uint64_t)((2 * X + p5) >> (sh + 1));
    if (hi < lo) {
        return 0;
    }
    uint64_t D = hi / 100u * 100u;
    if (D < lo) {
        /* no multiple of 100 in range: unit 10 if a multiple of 10 is,
         * else 1 */
        uint64_t pj = hi / 10u * 10u >= lo ? 10u : 1u;
        uint64_t Tj = T / pj, rem = T - Tj * pj;
        bool low = Tj * pj >= lo, high = (Tj + 1) * pj <= hi;
        if (low && high) {
            uint64_t R = (uint64_t)X & ((UINT64_C(1) << sh) - 1);
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
        D *= pj;
    }
    return plain_layout(D, k, p);
#else
    (void)p;
    return 0;
#endif
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
    size_t fast = integral_fast(bits, p);
    if (fast == 0 && v >= 1e-3 && v < 1e7) {
        fast = plain_fast(bits, p);
    }
    if (fast != 0) {
        return (size_t)(p - out) + fast;
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
