/*
 * Differential test of Java's Double.toString in C (src/encode/jdouble.c):
 * ejson_java_double, with its fast paths (integral values below 2^53,
 * plain-notation values in exact integer arithmetic), against a reference
 * made another way: the JDK 17 digit loop emulated step by step
 * (jdouble_java_digits, jdouble_dtoa.c, the path every value took before the
 * fast paths existed) laid out by Double.toString's javadoc rules, written
 * here independently of the encoder's layout code.
 *
 * Inputs: edge cases (zeros, subnormals, extremes, powers of two and of ten
 * and their neighbours, values around 1e-3 and 1e7, 2^53), then random
 * values in classes: any bit pattern, any bit pattern with an exponent of the
 * plain-notation range, values exactly halfway between two candidate
 * decimals, integral values, short decimals (n / 10^j) and
 * full-precision values below 1000. MCDC_JDOUBLE_SWEEP=N sets the number of
 * random values per class (default 200,000, a few seconds; the large sweep
 * is run by hand with tens of millions).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "encode/ejson.h"
#include "encode/jdouble_internal.h"

/* Double.toString's layout of 0.d1..dn * 10^dexp (sign, zero, NaN and the
 * infinities included), from the javadoc. */
static size_t reference(double v, char *out)
{
    if (v != v) {
        return (size_t)sprintf(out, "NaN");
    }
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    char *p = out;
    if (bits >> 63) {
        *p++ = '-';
        bits &= ~(UINT64_C(1) << 63);
    }
    if (bits == UINT64_C(0x7ff0000000000000)) {
        return (size_t)(p - out) + (size_t)sprintf(p, "Infinity");
    }
    if (bits == 0) {
        return (size_t)(p - out) + (size_t)sprintf(p, "0.0");
    }
    char d[32];
    int dexp;
    int n = jdouble_java_digits(bits, d, &dexp);
    d[n] = '\0';
    if (dexp > 0 && dexp <= 7) {
        /* integer digits (padded with zeros), '.', at least one fraction digit */
        for (int i = 0; i < dexp; i++) {
            *p++ = i < n ? d[i] : '0';
        }
        *p++ = '.';
        p += sprintf(p, "%s", n > dexp ? d + dexp : "0");
    } else if (dexp <= 0 && dexp > -3) {
        p += sprintf(p, "0.%.*s%s", -dexp, "000", d);
    } else {
        p += sprintf(p, "%c.%s", d[0], n > 1 ? d + 1 : "0");
        p += sprintf(p, "E%d", dexp - 1);
    }
    return (size_t)(p - out);
}

static unsigned long long mismatches;

static void check_bits(uint64_t bits)
{
    double v;
    memcpy(&v, &bits, sizeof v);
    char got[64], want[64];
    size_t ng = ejson_java_double(v, got);
    size_t nw = reference(v, want);
    got[ng] = want[nw] = '\0';
    if (ng != nw || memcmp(got, want, nw) != 0) {
        if (mismatches++ < 20) {
            print_error("bits %016llx: got %s, want %s\n", (unsigned long long)bits, got, want);
        }
    }
}

static void check_value(double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    check_bits(bits);
    check_bits(bits ^ (UINT64_C(1) << 63));
}

/* v and its neighbours up to `span` ulps away on both sides */
static void check_around(double v, int span)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    for (int i = -span; i <= span; i++) {
        uint64_t b = bits + (uint64_t)(int64_t)i;
        if ((b & UINT64_C(0x7ff0000000000000)) != UINT64_C(0x7ff0000000000000)) {
            check_bits(b);
        }
    }
}

/* xorshift64*: a fixed sequence, so a failure is reproducible */
static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(0x2545f4914f6cdd1d);
}

static unsigned long sweep_count(void)
{
    const char *s = getenv("MCDC_JDOUBLE_SWEEP");
    return s && *s ? strtoul(s, NULL, 10) : 200000ul;
}

/* /jdouble/edges */
static void test_edges(void **state)
{
    (void)state;
    mismatches = 0;
    check_value(0.0);
    check_bits(UINT64_C(0x7ff8000000000000)); /* NaN */
    check_bits(UINT64_C(0x7ff0000000000000)); /* Infinity */
    check_bits(UINT64_C(0xfff0000000000000));
    for (uint64_t b = 1; b < 5000; b++) { /* the smallest subnormals */
        check_bits(b);
    }
    check_around(2.2250738585072014e-308, 2000); /* the subnormal/normal edge */
    check_around(1.7976931348623157e308, 2000);  /* the largest finite values */
    for (int e = -1074; e <= 1023; e++) {        /* powers of two */
        check_around(ldexp(1.0, e), 3);
    }
    for (int e = -325; e <= 308; e++) { /* powers of ten, and 1..9 times them */
        for (int m = 1; m <= 9; m++) {
            char s[32];
            snprintf(s, sizeof s, "%de%d", m, e);
            check_around(strtod(s, NULL), 40);
        }
    }
    check_around(1e-3, 50000); /* the plain/E-form thresholds */
    check_around(1e7, 50000);
    check_around(9999999.999999998, 1000);
    check_around(9007199254740992.0, 5000); /* 2^53 */
    for (int j = 1; j <= 7; j++) {          /* 0.00999.., 99.99.., 9999999.99.. */
        for (int i = 1; i <= 17; i++) {
            char s[48];
            snprintf(s, sizeof s, "%.*s.%.*se%d", 1, "9", i, "99999999999999999", j - 4);
            check_around(strtod(s, NULL), 20);
        }
    }
    assert_int_equal(mismatches, 0);
}

/*
 * /jdouble/ties: values exactly halfway between the two decimals the digit
 * loop chooses from (where the JDK takes the even one): in the plain range,
 * v = M / 2^q (M odd) has exactly q fractional decimal digits, the last a 5,
 * so with q = k + 1 - j it lies halfway between two multiples of 10^(j-k).
 */
static void test_ties(void **state)
{
    (void)state;
    mismatches = 0;
    for (int k = 10; k <= 19; k++) {
        double lo = pow(10.0, 16 - k), hi = lo * 10.0;
        for (int j = 0; j <= 1; j++) {
            double scale = ldexp(1.0, k + 1 - j);
            uint64_t m_lo = (uint64_t)(lo * scale), m_hi = (uint64_t)(hi * scale);
            for (int i = 0; i < 5000; i++) {
                uint64_t M = (m_lo + rnd() % (m_hi - m_lo)) | 1;
                if (M < (UINT64_C(1) << 53)) {
                    check_value((double)M / scale);
                }
            }
        }
    }
    assert_int_equal(mismatches, 0);
}

/* /jdouble/random */
static void test_random(void **state)
{
    (void)state;
    unsigned long n = sweep_count();
    mismatches = 0;
    static const double pow10[18] = {1e0, 1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,
                                     1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17};
    for (unsigned long i = 0; i < n; i++) {
        uint64_t r = rnd();
        /* any bit pattern (NaN payloads included) */
        check_bits(r);
        /* any significand with an exponent of the plain range, 2^-11..2^24 */
        uint64_t e = 1023 - 11 + (rnd() % 36);
        check_bits((r & ((UINT64_C(1) << 52) - 1)) | (e << 52));
        /* integral values: all bits, and with low bits cleared */
        uint64_t m = rnd() >> 11; /* < 2^53 */
        check_value((double)m);
        check_value((double)(m >> (rnd() % 53)));
        check_value((double)(m & ~((UINT64_C(1) << (rnd() % 40)) - 1)));
        /* short decimals: n / 10^j with up to 17 digits, as data holds them */
        uint64_t digits = 1 + rnd() % 17;
        uint64_t mant = rnd() % (uint64_t)pow10[digits];
        check_value((double)mant / pow10[rnd() % 18]);
        check_value((double)(rnd() % 100000000) / 100.0);
        /* full-precision measurements below 1000 (encode_bench's "numbers") */
        check_value((double)(rnd() >> 11) / 9007199254740992.0 * 1000.0);
    }
    assert_int_equal(mismatches, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
