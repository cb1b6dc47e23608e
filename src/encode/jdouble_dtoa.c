/*
 * encode/jdouble_dtoa: the digit strings of Java's Double.toString for JDK
 * <= 18 (FloatingDecimal.BinaryToASCIIBuffer.dtoa), for the values that
 * jdouble.c's fast path leaves to it (debezium-format.md §2.3, "double
 * finite"). The 32- and 64-bit loops are here; the 128-bit and
 * arbitrary-precision ones in jdouble_wide.c.
 */
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

int jdouble_java_digits(uint64_t bits, char *digits, int *dexp)
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
