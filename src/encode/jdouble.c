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
 */
#include "encode/ejson.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "encode/jdouble_internal.h"

/*
 * ---- Digit generation of JDK <= 18 (FloatingDecimal.BinaryToASCIIBuffer.dtoa)
 *
 * Re-implemented from the algorithm's description, step for step, because
 * its output is not always the shortest (JDK-4511638: 1.0E23 prints as
 * 9.999999999999999E22, 2.82879384806159E17 as 2.82879384806159008E17,
 * Double.MIN_VALUE as 4.9E-324) and Debezium's bytes are what the JVM
 * prints. The algorithm:
 *
 *  1. "Easy" case: a value with no fraction bits that fits in 63 bits is an
 *     integer; print its decimal digits, first rounding away the low digits
 *     that the 53-bit significand cannot carry (insignificant digits of
 *     2^(binExp-54)).
 *  2. Otherwise Steele & White / dragon4 digit generation with integers
 *     B / S = v / 10^decExp and M = half an ulp (scaled alike), where decExp
 *     is a floating-point estimate of floor(log10 v). Digits are produced
 *     until B < M ("low") or B + M > 10S ("high") holds after one; for
 *     values printed in E-form the test is skipped after the first digit, so
 *     at least two digits are produced. The last digit is rounded up when
 *     only "high" holds, or when both hold and 2B > 10S (ties: to even).
 *     The arithmetic is done in 32-bit, 64-bit or arbitrary precision
 *     depending on estimated sizes, and the JDK's three variants differ
 *     slightly (wrap-around guards, `>` versus `>=` in the "high" test); each
 *     is mirrored here, 32/64-bit ones with Java's wrapping arithmetic.
 */

static const int n5bits[27] = {0,  3,  5,  7,  10, 12, 14, 17, 19, 21, 24, 26, 28, 31,
                               33, 35, 38, 40, 42, 45, 47, 49, 52, 54, 56, 59, 61};

/* insignificant decimal digits of 2^i (i.e. floor(log10(2^i))), i < 64 */
static const int insig_pow2[64] = {0,  0,  0,  0,  1,  1,  1,  2,  2,  2,  3,  3,  3,  3,  4,  4,
                                   4,  5,  5,  5,  6,  6,  6,  6,  7,  7,  7,  8,  8,  8,  9,  9,
                                   9,  9,  10, 10, 10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14,
                                   14, 14, 15, 15, 15, 15, 16, 16, 16, 17, 17, 17, 18, 18, 18, 19};

static void develop_long_digits(struct jdigits *out, uint64_t lvalue, int insignificant)
{
    int dexp = 0;
    if (insignificant != 0) {
        uint64_t pow10 = pow5_u64(insignificant) << insignificant;
        uint64_t residue = lvalue % pow10;
        lvalue /= pow10;
        dexp += insignificant;
        if (residue >= (pow10 >> 1)) {
            lvalue++;
        }
    }
    char tmp[MAX_DIGITS + 2];
    int k = 0;
    unsigned c = (unsigned)(lvalue % 10);
    lvalue /= 10;
    while (c == 0) {
        dexp++;
        c = (unsigned)(lvalue % 10);
        lvalue /= 10;
    }
    while (lvalue != 0) {
        tmp[k++] = (char)('0' + c);
        dexp++;
        c = (unsigned)(lvalue % 10);
        lvalue /= 10;
    }
    tmp[k++] = (char)('0' + c);
    for (int i = 0; i < k; i++) {
        out->d[i] = tmp[k - 1 - i];
    }
    out->n = k;
    out->dexp = dexp + 1;
}

/* floor(log10(v)) estimated from the bits exactly as the JDK does it. */
static int estimate_dec_exp(uint64_t fract, int bin_exp)
{
    uint64_t b = (UINT64_C(1023) << 52) | (fract & ((UINT64_C(1) << 52) - 1));
    double d2;
    memcpy(&d2, &b, sizeof d2);
    double d = (d2 - 1.5) * 0.289529654 + 0.176091259 + (double)bin_exp * 0.301029995663981;
    int f = (int)d; /* |d| < 400: no overflow */
    return f - (d < (double)f);
}

/* ---- the digit loop in its three precisions */

/* Java int arithmetic wraps; so does this (unsigned, then reinterpreted). */
static int32_t i32(uint32_t v)
{
    return (int32_t)v;
}

static int64_t i64(uint64_t v)
{
    return (int64_t)v;
}

static void digits_int(struct jdigits *out, uint64_t fract, int B5, int B2, int S5, int S2, int M5,
                       int M2, int *dec_exp, bool *low, bool *high, int64_t *ldd)
{
    int32_t b = i32((uint32_t)(i32((uint32_t)fract * (uint32_t)pow5_u64(B5))) << B2);
    int32_t s = i32((uint32_t)pow5_u64(S5) << S2);
    int32_t m = i32((uint32_t)pow5_u64(M5) << M2);
    int32_t tens = i32((uint32_t)s * 10u);
    int q = b / s;
    b = i32(10u * (uint32_t)(b % s));
    m = i32((uint32_t)m * 10u);
    *low = b < m;
    *high = i32((uint32_t)b + (uint32_t)m) > tens;
    if (q == 0 && !*high) {
        (*dec_exp)--;
    } else {
        put_digit(out, q);
    }
    if (*dec_exp < -3 || *dec_exp >= 8) {
        *high = *low = false;
    }
    while (!*low && !*high) {
        q = b / s;
        b = i32(10u * (uint32_t)(b % s));
        m = i32((uint32_t)m * 10u);
        if (m > 0) {
            *low = b < m;
            *high = i32((uint32_t)b + (uint32_t)m) > tens;
        } else {
            *low = *high = true;
        }
        put_digit(out, q);
    }
    *ldd = i32(((uint32_t)b << 1) - (uint32_t)tens);
}

/*
 * q = b / s and *rem = b % s for 0 <= b < ~11 s, without a hardware divide:
 * a floating-point estimate (off by at most one) corrected exactly.
 */
static inline int quo_rem_u64(uint64_t b, uint64_t s, double inv_s, uint64_t *rem)
{
    uint64_t q = (uint64_t)((double)b * inv_s);
    uint64_t qs = q * s;
    while (qs > b) {
        q--;
        qs -= s;
    }
    uint64_t r = b - qs;
    while (r >= s) {
        q++;
        r -= s;
    }
    *rem = r;
    return (int)q;
}

#ifdef __SIZEOF_INT128__
#define CHUNK_MAX 8 /* Q < 10^8: its digits come from 32-bit arithmetic */
#define I64_LIMIT ((u128)1 << 63)

/*
 * Runs up to CHUNK_MAX iterations of the 64-bit digit loop with one
 * division instead of one per digit, with the same result as iterating
 * (digits, final b and m, low/high).
 *
 * The next J quotient digits are the decimal digits of
 * Q = floor(b * 10^(J-1) / s) (long division, since b < 10s), so once Q is
 * known each iteration's remainder is b - digit * s: a multiplication. The
 * stop test then runs digit by digit exactly as in the loop.
 *
 * Java computes m and b + m in wrapping 64-bit arithmetic; J is chosen so
 * that m stays below 2^63, and b + m only reaches 2^63 at a stop, where we
 * bail out. Returns false, changing nothing, when it cannot guarantee that
 * (the caller then iterates).
 */
static bool chunk_digits(struct jdigits *out, uint64_t *pb, uint64_t *pm, uint64_t s, uint64_t tens,
                         double inv_s, bool *low, bool *high)
{
    uint64_t b = *pb, m = *pm;
    int J = CHUNK_MAX;
    while (J > 0 && (u128)m * pow10_tab[J] >= I64_LIMIT) {
        J--;
    }
    if (J == 0 || out->n + J > MAX_DIGITS) {
        return false;
    }
    /* Q = floor(b * 10^(J-1) / s), exactly */
    u128 T = (u128)b * pow10_tab[J - 1];
    uint64_t Q = (uint64_t)((double)b * (double)pow10_tab[J - 1] * inv_s);
    u128 QS = (u128)Q * s;
    while (QS > T) {
        Q--;
        QS -= s;
    }
    while (T - QS >= s) {
        Q++;
        QS += s;
    }
    char all[8];
    eight_digits((uint32_t)Q, all);
    const char *dq = all + 8 - J; /* the J digits of Q, as characters */
    /* The stop test is monotone in the digit count (once true it stays
     * true: the remainder at most grows tenfold while m grows tenfold), so
     * if it fails after all J digits it failed after each of them. */
    uint64_t bJ = (uint64_t)(10u * (T - QS)), mJ = m * pow10_tab[J];
    if (!(bJ < mJ || bJ + mJ > tens)) {
        memcpy(out->d + out->n, dq, (size_t)J);
        out->n += J;
        *pb = bJ;
        *pm = mJ;
        return true;
    }
    bool lo = false, hi = false;
    int j = 0;
    while (j < J) {
        b = 10u * (b - (uint64_t)(dq[j] - '0') * s);
        m *= 10u;
        j++;
        lo = b < m;
        hi = b + m > tens;
        if (lo || hi) {
            if (b + m >= (uint64_t)1 << 63) {
                return false; /* Java's b + m would wrap: iterate instead */
            }
            break;
        }
    }
    memcpy(out->d + out->n, dq, (size_t)j);
    out->n += j;
    *low = lo;
    *high = hi;
    *pb = b;
    *pm = m;
    return true;
}
#endif

static void digits_long(struct jdigits *out, uint64_t fract, int B5, int B2, int S5, int S2, int M5,
                        int M2, int *dec_exp, bool *low, bool *high, int64_t *ldd)
{
    int64_t b = i64((fract * pow5_u64(B5)) << B2);
    int64_t s = i64(pow5_u64(S5) << S2);
    int64_t m = i64(pow5_u64(M5) << M2);
    int64_t tens = i64((uint64_t)s * 10u);
    double inv_s = 1.0 / (double)s;
    uint64_t rem;
    /* b and s are positive here (Bbits, tenSbits < 64), so the unsigned
     * quotient is Java's b / s and b % s. */
    int q = quo_rem_u64((uint64_t)b, (uint64_t)s, inv_s, &rem);
    b = i64(10u * rem);
    m = i64((uint64_t)m * 10u);
    *low = b < m;
    *high = i64((uint64_t)b + (uint64_t)m) > tens;
    if (q == 0 && !*high) {
        (*dec_exp)--;
    } else {
        put_digit(out, q);
    }
    if (*dec_exp < -3 || *dec_exp >= 8) {
        *high = *low = false;
    }
#ifdef __SIZEOF_INT128__
    while (!*low && !*high && m > 0) {
        uint64_t ub = (uint64_t)b, um = (uint64_t)m;
        if (!chunk_digits(out, &ub, &um, (uint64_t)s, (uint64_t)tens, inv_s, low, high)) {
            break;
        }
        b = (int64_t)ub;
        m = (int64_t)um;
    }
#endif
    while (!*low && !*high) {
        q = quo_rem_u64((uint64_t)b, (uint64_t)s, inv_s, &rem);
        b = i64(10u * rem);
        m = i64((uint64_t)m * 10u);
        if (m > 0) {
            *low = b < m;
            *high = i64((uint64_t)b + (uint64_t)m) > tens;
        } else {
            *low = *high = true;
        }
        put_digit(out, q);
    }
    *ldd = i64(((uint64_t)b << 1) - (uint64_t)tens);
}

static void roundup(struct jdigits *out)
{
    int i = out->n - 1;
    char q = out->d[i];
    if (q == '9') {
        while (q == '9' && i > 0) {
            out->d[i] = '0';
            q = out->d[--i];
        }
        if (q == '9') {
            /* carry out: "1" followed by the zeros already there */
            out->dexp += 1;
            out->d[0] = '1';
            return;
        }
    }
    out->d[i] = (char)(q + 1);
}

static void dtoa(struct jdigits *out, int bin_exp, uint64_t fract, int n_sig_bits)
{
    int tail_zeros = __builtin_ctzll(fract);
    int n_fract_bits = 53 - tail_zeros;
    int n_tiny_bits = n_fract_bits - bin_exp - 1;
    if (n_tiny_bits < 0) {
        n_tiny_bits = 0;
    }
    out->n = 0;
    if (bin_exp <= 62 && bin_exp >= -21 && n_tiny_bits < 27 &&
        n_fract_bits + n5bits[n_tiny_bits] < 64 && n_tiny_bits == 0) {
        int insignificant = 0;
        if (bin_exp > n_sig_bits && bin_exp - n_sig_bits - 1 > 1) {
            insignificant = insig_pow2[bin_exp - n_sig_bits - 1];
        }
        if (bin_exp >= 52) {
            fract <<= (bin_exp - 52);
        } else {
            fract >>= (52 - bin_exp);
        }
        develop_long_digits(out, fract, insignificant);
        return;
    }
    int dec_exp = estimate_dec_exp(fract, bin_exp);
    int B5 = dec_exp < 0 ? -dec_exp : 0;
    int B2 = B5 + n_tiny_bits + bin_exp;
    int S5 = dec_exp > 0 ? dec_exp : 0;
    int S2 = S5 + n_tiny_bits;
    int M5 = B5;
    int M2 = B2 - n_sig_bits;
    fract >>= tail_zeros;
    B2 -= n_fract_bits - 1;
    int common2 = B2 < S2 ? B2 : S2;
    B2 -= common2;
    S2 -= common2;
    M2 -= common2;
    if (n_fract_bits == 1) {
        M2 -= 1; /* the JDK's power-of-two adjustment */
    }
    if (M2 < 0) {
        B2 -= M2;
        S2 -= M2;
        M2 = 0;
    }
    int b_bits = n_fract_bits + B2 + (B5 < 27 ? n5bits[B5] : B5 * 3);
    int ten_s_bits = S2 + 1 + (S5 + 1 < 27 ? n5bits[S5 + 1] : (S5 + 1) * 3);
    bool low, high;
    int64_t ldd;
    if (b_bits < 64 && ten_s_bits < 64) {
        if (b_bits < 32 && ten_s_bits < 32) {
            digits_int(out, fract, B5, B2, S5, S2, M5, M2, &dec_exp, &low, &high, &ldd);
        } else {
            digits_long(out, fract, B5, B2, S5, S2, M5, M2, &dec_exp, &low, &high, &ldd);
        }
    } else {
#ifdef __SIZEOF_INT128__
        /* 118 bits leaves room for M, which grows to < 100 S before the
         * loop stops, and for B + M. */
        if (b_bits <= 118 && ten_s_bits <= 118) {
            jdouble_digits_u128(out, fract, B5, B2, S5, S2, M5, M2, &dec_exp, &low, &high, &ldd);
        } else {
            jdouble_digits_big(out, fract, B5, B2, S5, S2, M5, M2, &dec_exp, &low, &high, &ldd);
        }
#else
        jdouble_digits_big(out, fract, B5, B2, S5, S2, M5, M2, &dec_exp, &low, &high, &ldd);
#endif
    }
    out->dexp = dec_exp + 1;
    if (out->n == 0) {
        /* Not reachable for finite non-zero doubles; keep the output sane. */
        out->d[out->n++] = '0';
        return;
    }
    if (high) {
        if (low) {
            if (ldd == 0) {
                if ((out->d[out->n - 1] - '0') & 1) {
                    roundup(out);
                }
            } else if (ldd > 0) {
                roundup(out);
            }
        } else {
            roundup(out);
        }
    }
}

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

/* bits: a positive, finite, non-zero double. */
static int java_digits(uint64_t bits, char *digits, int *dexp)
{
    uint64_t fract = bits & ((UINT64_C(1) << 52) - 1);
    int bin_exp = (int)((bits >> 52) & 0x7ff);
    int n_sig_bits;
    if (bin_exp == 0) {
        int lz = __builtin_clzll(fract);
        int shift = lz - (63 - 52);
        fract <<= shift;
        bin_exp = 1 - shift;
        n_sig_bits = 64 - lz;
    } else {
        fract |= UINT64_C(1) << 52;
        n_sig_bits = 53;
    }
    bin_exp -= 1023;
    struct jdigits jd;
    dtoa(&jd, bin_exp, fract, n_sig_bits);
    copy_small(digits, jd.d, (size_t)jd.n);
    *dexp = jd.dexp;
    return jd.n;
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
    int n = java_digits(bits, digits, &dexp);
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
    return java_digits(bits, digits, dexp);
}
