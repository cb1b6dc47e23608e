/*
 * encode/jdouble_wide: the wide variants of the JDK 17 digit loop of
 * jdouble_dtoa.c, for doubles whose scaled operands do not fit in 64 bits (most
 * values below 1e-3 or above about 1e17, and the extremes of the range). The
 * JDK runs these with FDBigInteger; the comparisons here are that code's
 * (notably "high" is B + M >= 10S, where the 64-bit loop uses >).
 */
#include "encode/jdouble_internal.h"

/* ---- fixed-size unsigned big integers for the arbitrary-precision path */

#define BIG_LIMBS 48 /* 1536 bits; the largest operand is about 2^1110 */

struct big {
    uint32_t w[BIG_LIMBS];
    int n; /* limbs in use; w[n-1] != 0 unless n == 0 */
};

static void big_set(struct big *a, uint64_t v)
{
    a->w[0] = (uint32_t)v;
    a->w[1] = (uint32_t)(v >> 32);
    a->n = a->w[1] ? 2 : (a->w[0] ? 1 : 0);
}

static void big_mul_small(struct big *a, uint32_t m)
{
    uint64_t carry = 0;
    for (int i = 0; i < a->n; i++) {
        uint64_t t = (uint64_t)a->w[i] * m + carry;
        a->w[i] = (uint32_t)t;
        carry = t >> 32;
    }
    if (carry) {
        a->w[a->n++] = (uint32_t)carry;
    }
}

static void big_mul_pow5(struct big *a, int e)
{
    while (e >= 13) {
        big_mul_small(a, 1220703125u); /* 5^13 */
        e -= 13;
    }
    if (e > 0) {
        big_mul_small(a, (uint32_t)pow5_u64(e));
    }
}

static void big_shl(struct big *a, int s)
{
    if (a->n == 0 || s == 0) {
        return;
    }
    int limbs = s / 32, bits = s % 32;
    if (bits) {
        uint32_t carry = 0;
        for (int i = 0; i < a->n; i++) {
            uint32_t w = a->w[i];
            a->w[i] = (w << bits) | carry;
            carry = w >> (32 - bits);
        }
        if (carry) {
            a->w[a->n++] = carry;
        }
    }
    if (limbs) {
        memmove(a->w + limbs, a->w, (size_t)a->n * sizeof a->w[0]);
        memset(a->w, 0, (size_t)limbs * sizeof a->w[0]);
        a->n += limbs;
    }
}

static int big_cmp(const struct big *a, const struct big *b)
{
    if (a->n != b->n) {
        return a->n < b->n ? -1 : 1;
    }
    for (int i = a->n - 1; i >= 0; i--) {
        if (a->w[i] != b->w[i]) {
            return a->w[i] < b->w[i] ? -1 : 1;
        }
    }
    return 0;
}

static void big_trim(struct big *a)
{
    while (a->n > 0 && a->w[a->n - 1] == 0) {
        a->n--;
    }
}

/* a -= b, requires a >= b */
static void big_sub(struct big *a, const struct big *b)
{
    int64_t borrow = 0;
    for (int i = 0; i < a->n; i++) {
        int64_t t = (int64_t)a->w[i] - (i < b->n ? b->w[i] : 0) - borrow;
        borrow = t < 0;
        a->w[i] = (uint32_t)(t + (borrow ? (INT64_C(1) << 32) : 0));
    }
    big_trim(a);
}

static void big_add(struct big *r, const struct big *a, const struct big *b)
{
    int n = a->n > b->n ? a->n : b->n;
    uint64_t carry = 0;
    for (int i = 0; i < n; i++) {
        uint64_t t = (uint64_t)(i < a->n ? a->w[i] : 0) + (i < b->n ? b->w[i] : 0) + carry;
        r->w[i] = (uint32_t)t;
        carry = t >> 32;
    }
    r->n = n;
    if (carry) {
        r->w[r->n++] = (uint32_t)carry;
    }
}

/* q = b / s, b = 10 * (b % s) (FDBigInteger.quoRemIteration) */
static int big_quo_rem(struct big *b, const struct big *s)
{
    int q = 0;
    while (big_cmp(b, s) >= 0) {
        big_sub(b, s);
        q++;
    }
    big_mul_small(b, 10);
    return q;
}

static void big_pow52(struct big *a, uint64_t f, int p5, int p2)
{
    big_set(a, f);
    big_mul_pow5(a, p5);
    big_shl(a, p2);
}

#ifdef __SIZEOF_INT128__
static u128 pow52_u128(uint64_t f, int p5, int p2)
{
    u128 v = f;
    while (p5-- > 0) {
        v *= 5;
    }
    return v << p2;
}

static int bitlen_u128(u128 v)
{
    uint64_t hi = (uint64_t)(v >> 64);
    if (hi) {
        return 128 - __builtin_clzll(hi);
    }
    uint64_t lo = (uint64_t)v;
    return lo ? 64 - __builtin_clzll(lo) : 0;
}

/* One step of the digit loop: q = B / S, B = 10 * (B % S). */
static inline int quo_rem_u128(u128 *B, u128 S, int sh, double inv_s)
{
    u128 qq = (uint64_t)((double)(uint64_t)(*B >> sh) * inv_s);
    u128 qs = qq * S;
    while (qs > *B) {
        qq--;
        qs -= S;
    }
    u128 r = *B - qs;
    while (r >= S) {
        qq++;
        r -= S;
    }
    *B = r * 10;
    return (int)qq;
}

/*
 * Up to four digits at once, as chunk_digits does for the 64-bit loop, with
 * this loop's stop test (high is B + M >= 10S here). J is limited so that
 * B * 10^(J-1) and M * 10^J fit in 127 bits. Returns false when no block of
 * two or more digits fits (the caller then takes one step).
 */
static bool chunk_digits_u128(struct jdigits *out, u128 *pB, u128 *pM, u128 S, u128 tenS,
                              double inv_s_full, bool *low, bool *high)
{
    u128 B = *pB, M = *pM;
    int bb = bitlen_u128(B), bm = bitlen_u128(M);
    int J = 4;
    while (J >= 2 && (bb + 4 * (J - 1) > 126 || bm + 4 * J > 126 || out->n + J > MAX_DIGITS)) {
        J--;
    }
    if (J < 2) {
        return false;
    }
    u128 T = B * pow10_tab[J - 1];
    u128 Q = (uint64_t)((double)T * inv_s_full);
    u128 QS = Q * S;
    while (QS > T) {
        Q--;
        QS -= S;
    }
    while (T - QS >= S) {
        Q++;
        QS += S;
    }
    char all[8];
    eight_digits((uint32_t)Q, all);
    const char *dq = all + 8 - J;
    u128 bJ = (T - QS) * 10, mJ = M * pow10_tab[J];
    if (!(bJ < mJ || bJ + mJ >= tenS)) {
        copy_small(out->d + out->n, dq, (size_t)J);
        out->n += J;
        *pB = bJ;
        *pM = mJ;
        return true;
    }
    for (int j = 0; j < J; j++) {
        B = (B - (u128)(uint64_t)(dq[j] - '0') * S) * 10;
        M *= 10;
        out->d[out->n++] = dq[j];
        *low = B < M;
        *high = B + M >= tenS;
        if (*low || *high) {
            break;
        }
    }
    *pB = B;
    *pM = M;
    return true;
}

/*
 * The arbitrary-precision variant (same comparisons as jdouble_digits_big) for
 * operands that fit in 128 bits with room for the growing M: most doubles
 * below 1e-3 or with large exponents land here.
 */
void jdouble_digits_u128(struct jdigits *out, uint64_t fract, int B5, int B2, int S5, int S2,
                         int M5, int M2, int *dec_exp, bool *low, bool *high, int64_t *ldd)
{
    u128 S = pow52_u128(1, S5, S2);
    u128 B = pow52_u128(fract, B5, B2);
    u128 M = pow52_u128(1, M5 + 1, M2 + 1); /* 10 * M */
    u128 tenS = S * 10;
    int sh = bitlen_u128(S) > 60 ? bitlen_u128(S) - 60 : 0;
    double inv_s = 1.0 / (double)(uint64_t)(S >> sh);
    double inv_s_full = 1.0 / (double)S;
    int q = quo_rem_u128(&B, S, sh, inv_s);
    *low = B < M;
    *high = B + M >= tenS;
    if (q == 0 && !*high) {
        (*dec_exp)--;
    } else {
        put_digit(out, q);
    }
    if (*dec_exp < -3 || *dec_exp >= 8) {
        *high = *low = false;
    }
    while (!*low && !*high) {
        if (chunk_digits_u128(out, &B, &M, S, tenS, inv_s_full, low, high)) {
            continue;
        }
        q = quo_rem_u128(&B, S, sh, inv_s);
        M *= 10;
        *low = B < M;
        *high = B + M >= tenS;
        put_digit(out, q);
    }
    *ldd = 0;
    if (*high && *low) {
        u128 b2 = B << 1;
        *ldd = b2 < tenS ? -1 : (b2 > tenS ? 1 : 0);
    }
}
#endif

void jdouble_digits_big(struct jdigits *out, uint64_t fract, int B5, int B2, int S5, int S2, int M5,
                        int M2, int *dec_exp, bool *low, bool *high, int64_t *ldd)
{
    struct big S, B, M, tenS, sum;
    big_pow52(&S, 1, S5, S2);
    big_pow52(&B, fract, B5, B2);
    big_pow52(&M, 1, M5 + 1, M2 + 1); /* 10 * M */
    big_pow52(&tenS, 1, S5 + 1, S2 + 1);
    int q = big_quo_rem(&B, &S);
    *low = big_cmp(&B, &M) < 0;
    big_add(&sum, &B, &M);
    *high = big_cmp(&sum, &tenS) >= 0;
    if (q == 0 && !*high) {
        (*dec_exp)--;
    } else {
        put_digit(out, q);
    }
    if (*dec_exp < -3 || *dec_exp >= 8) {
        *high = *low = false;
    }
    while (!*low && !*high) {
        q = big_quo_rem(&B, &S);
        big_mul_small(&M, 10);
        *low = big_cmp(&B, &M) < 0;
        big_add(&sum, &B, &M);
        *high = big_cmp(&sum, &tenS) >= 0;
        put_digit(out, q);
    }
    *ldd = 0;
    if (*high && *low) {
        big_shl(&B, 1);
        *ldd = big_cmp(&B, &tenS);
    }
}
