/*
 * encode/jdecimal: Decimal128 text exactly as the Java driver's
 * org.bson.types.Decimal128.toString() prints it (debezium-format.md §2.3).
 *
 * The driver does not clamp non-canonical values the way libbson's
 * bson_decimal128_to_string does: any 113-bit coefficient is printed in full
 * (up to 35 digits, e.g. 2^113 - 1), and only the "11" combination form reads
 * as a zero coefficient. The layout then follows the BSON decimal spec:
 *   exponent <= 0 and adjusted exponent >= -6: plain notation (0.000001);
 *   otherwise d[.ddd]E(+|-)adj (1E+3, 1.0E-7).
 * NaN of either sign (signalling too) prints "NaN"; infinities "Infinity" and
 * "-Infinity".
 */
#include "encode/ejson.h"

#include <string.h>

#define DEC_SIGN UINT64_C(0x8000000000000000)
#define DEC_INF_MASK UINT64_C(0x7c00000000000000)
#define DEC_INF UINT64_C(0x7800000000000000)
#define DEC_NAN UINT64_C(0x7c00000000000000)
#define DEC_TWO_HIGH UINT64_C(0x6000000000000000)
#define DEC_EXP_BIAS 6176

/* Decimal digits of the 128-bit value hi:lo into out; returns the count. */
static int u128_digits(uint64_t hi, uint64_t lo, char *out)
{
    uint32_t w[4] = {(uint32_t)(hi >> 32), (uint32_t)hi, (uint32_t)(lo >> 32), (uint32_t)lo};
    char tmp[48];
    int n = 0;
    bool nonzero = hi || lo;
    if (!nonzero) {
        out[0] = '0';
        return 1;
    }
    while (w[0] || w[1] || w[2] || w[3]) {
        /* divide by 10^9, most significant limb first */
        uint64_t rem = 0;
        for (int i = 0; i < 4; i++) {
            uint64_t cur = (rem << 32) | w[i];
            w[i] = (uint32_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        bool more = w[0] || w[1] || w[2] || w[3];
        for (int k = 0; k < 9 && (more || rem); k++) {
            tmp[n++] = (char)('0' + rem % 10);
            rem /= 10;
        }
    }
    for (int i = 0; i < n; i++) {
        out[i] = tmp[n - 1 - i];
    }
    return n;
}

size_t ejson_decimal128_string(const bson_decimal128_t *dec, char *out)
{
    uint64_t high = dec->high, low = dec->low;
    char *p = out;
    if ((high & DEC_INF_MASK) == DEC_NAN) {
        memcpy(out, "NaN", 3);
        return 3;
    }
    if ((high & DEC_INF_MASK) == DEC_INF) {
        if (high & DEC_SIGN) {
            memcpy(out, "-Infinity", 9);
            return 9;
        }
        memcpy(out, "Infinity", 8);
        return 8;
    }
    int exponent;
    char sig[48];
    int n;
    if ((high & DEC_TWO_HIGH) == DEC_TWO_HIGH) {
        exponent = (int)((high & UINT64_C(0x1fffe00000000000)) >> 47) - DEC_EXP_BIAS;
        sig[0] = '0';
        n = 1;
    } else {
        exponent = (int)((high & UINT64_C(0x7fff800000000000)) >> 49) - DEC_EXP_BIAS;
        n = u128_digits(high & UINT64_C(0x0001ffffffffffff), low, sig);
    }
    if (high & DEC_SIGN) {
        *p++ = '-';
    }
    int adjusted = exponent + (n - 1);
    if (exponent <= 0 && adjusted >= -6) {
        if (exponent == 0) {
            memcpy(p, sig, (size_t)n);
            p += n;
        } else {
            int pad = -exponent - n;
            if (pad >= 0) {
                *p++ = '0';
                *p++ = '.';
                memset(p, '0', (size_t)pad);
                p += pad;
                memcpy(p, sig, (size_t)n);
                p += n;
            } else {
                memcpy(p, sig, (size_t)-pad);
                p += -pad;
                *p++ = '.';
                memcpy(p, sig - pad, (size_t)-exponent);
                p += -exponent;
            }
        }
    } else {
        *p++ = sig[0];
        if (n > 1) {
            *p++ = '.';
            memcpy(p, sig + 1, (size_t)(n - 1));
            p += n - 1;
        }
        *p++ = 'E';
        if (adjusted > 0) {
            *p++ = '+';
        } else if (adjusted < 0) {
            *p++ = '-';
            adjusted = -adjusted;
        }
        char eb[8];
        int k = 0;
        do {
            eb[k++] = (char)('0' + adjusted % 10);
            adjusted /= 10;
        } while (adjusted);
        while (k) {
            *p++ = eb[--k];
        }
    }
    return (size_t)(p - out);
}
