/*
 * encode/jstring: JSON string escaping exactly as the MongoDB Java driver's
 * StrictCharacterStreamJsonWriter.writeStringHelper does it
 * (debezium-format.md §2.2), fed with UTF-8 instead of UTF-16.
 *
 * Java walks UTF-16 code units. `"` `\` and the five short escapes are
 * special; any other unit is written raw only when Character.getType() is a
 * letter other than Lm, Nd/Nl/No, Zs, a punctuation or a symbol class;
 * everything else becomes `\u` and four lowercase hex digits. Surrogates are
 * never raw, so a non-BMP character always becomes an escaped pair.
 *
 * The categories come from utf8proc, whose tables (Unicode 15.0 in Debian
 * 12's build) are newer than Java 17's (Unicode 13.0). We match Java 17, the
 * JDK of the differential oracle and the one Debezium 1.9-2.x images ship:
 * the BMP code points first assigned in Unicode 14.0 or 15.0 are removed
 * again below (java17_unassigned), which makes the two tables agree for all
 * 65,536 code units (tests/integration/test_ejson_oracle.py checks every BMP
 * code point against the JVM). Debezium on JDK 11 (Unicode 10) would escape
 * characters assigned in 11.0-13.0 that are raw here; on JDK 21 (Unicode 15)
 * it writes the java17_unassigned characters raw.
 *
 * Invalid UTF-8 is decoded the way the driver decodes BSON strings,
 * `new String(bytes, UTF_8)` on JDK 17: each malformed sequence becomes one
 * U+FFFD, with the JDK's rules for how many bytes a malformed sequence spans
 * (an encoded surrogate is one sequence of three bytes; a truncated prefix of
 * a valid sequence is one). Each replacement is counted.
 */
#include "encode/ejson.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <utf8proc.h>

#include "encode/ejson_internal.h"

static _Atomic uint64_t invalid_utf8_total;

/* Bit set: BMP code unit written raw by Java (after the special cases). */
static uint8_t raw_bmp[65536 / 8];
static pthread_once_t raw_bmp_once = PTHREAD_ONCE_INIT;

/* ASCII action: 0 raw, 1 \u00XX, else the character after the backslash. */
/* clang-format off */
static const char ascii_escape[128] = {
    1,   1,   1,   1,   1,   1,   1,   1,   'b', 't', 'n', 1,   'f', 'r', 1,   1,
    1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,   1,
    0,   0,   '"', 0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
    0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
    0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
    0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   '\\', 0,  0,   0,
    0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,
    0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   0,   1,
};
/* clang-format on */

static bool java_raw_category(utf8proc_category_t cat)
{
    switch (cat) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
    case UTF8PROC_CATEGORY_SM:
    case UTF8PROC_CATEGORY_SC:
    case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO:
        return true;
    default:
        return false;
    }
}

/*
 * BMP code points that utf8proc (Unicode 15.0) classifies as letters,
 * punctuation or symbols but that Java 17's Character.getType() reports as
 * UNASSIGNED (new in Unicode 14.0 and 15.0), so the JDK 17 writer escapes
 * them. Obtained by comparing both classifications over every BMP code unit.
 */
static const uint16_t java17_unassigned[][2] = {
    {0x061d, 0x061d}, {0x0870, 0x088e}, {0x08b5, 0x08b5}, {0x08c8, 0x08c8}, {0x0c5d, 0x0c5d},
    {0x0cdd, 0x0cdd}, {0x170d, 0x170d}, {0x171f, 0x171f}, {0x1b4c, 0x1b4c}, {0x1b7d, 0x1b7e},
    {0x20c0, 0x20c0}, {0x2c2f, 0x2c2f}, {0x2c5f, 0x2c5f}, {0x2e53, 0x2e5d}, {0x9ffd, 0x9fff},
    {0xa7c0, 0xa7c1}, {0xa7d0, 0xa7d1}, {0xa7d3, 0xa7d3}, {0xa7d5, 0xa7d9}, {0xfbc2, 0xfbc2},
    {0xfd40, 0xfd4f}, {0xfdcf, 0xfdcf}, {0xfdfe, 0xfdff},
};

static void build_raw_bmp(void)
{
    for (int32_t cp = 0x80; cp < 0x10000; cp++) {
        if (cp >= 0xd800 && cp <= 0xdfff) {
            continue; /* Cs: always escaped */
        }
        if (java_raw_category(utf8proc_category(cp))) {
            raw_bmp[cp >> 3] |= (uint8_t)(1u << (cp & 7));
        }
    }
    for (size_t i = 0; i < sizeof java17_unassigned / sizeof java17_unassigned[0]; i++) {
        for (uint32_t cp = java17_unassigned[i][0]; cp <= java17_unassigned[i][1]; cp++) {
            raw_bmp[cp >> 3] &= (uint8_t) ~(1u << (cp & 7));
        }
    }
}

bool ejson_java_char_is_raw(uint32_t unit)
{
    if (unit < 0x80) {
        return ascii_escape[unit] == 0;
    }
    if (unit > 0xffff) {
        return false;
    }
    pthread_once(&raw_bmp_once, build_raw_bmp);
    return (raw_bmp[unit >> 3] >> (unit & 7)) & 1;
}

uint64_t ejson_invalid_utf8_count(void)
{
    return atomic_load_explicit(&invalid_utf8_total, memory_order_relaxed);
}

static inline bool cont(uint8_t b)
{
    return (b & 0xc0) == 0x80;
}

/*
 * Decodes one character at s (n >= 1 bytes left) the way JDK 17's
 * String(byte[], UTF_8) does. Returns the bytes consumed and sets *cp, which
 * is 0xFFFD with *bad = true for a malformed sequence.
 */
static size_t decode_java(const uint8_t *s, size_t n, uint32_t *cp, bool *bad)
{
    uint8_t b1 = s[0];
    *bad = true;
    *cp = 0xfffd;
    if (b1 >= 0xc2 && b1 <= 0xdf) {
        if (n >= 2 && cont(s[1])) {
            *cp = ((uint32_t)(b1 & 0x1f) << 6) | (s[1] & 0x3f);
            *bad = false;
            return 2;
        }
        return 1;
    }
    if ((b1 & 0xf0) == 0xe0) {
        if (n >= 3) {
            uint8_t b2 = s[1], b3 = s[2];
            if ((b1 == 0xe0 && (b2 & 0xe0) == 0x80) || !cont(b2) || !cont(b3)) {
                return ((b1 == 0xe0 && (b2 & 0xe0) == 0x80) || !cont(b2)) ? 1 : 2;
            }
            uint32_t c = ((uint32_t)(b1 & 0x0f) << 12) | ((uint32_t)(b2 & 0x3f) << 6) | (b3 & 0x3f);
            if (c >= 0xd800 && c <= 0xdfff) {
                return 3;
            }
            *cp = c;
            *bad = false;
            return 3;
        }
        if (n == 2 && ((b1 == 0xe0 && (s[1] & 0xe0) == 0x80) || !cont(s[1]))) {
            return 1;
        }
        return n; /* a valid prefix cut by the end: one replacement */
    }
    if ((b1 & 0xf8) == 0xf0) {
        if (n >= 4) {
            uint8_t b2 = s[1], b3 = s[2], b4 = s[3];
            uint32_t uc = ((uint32_t)(b1 & 0x07) << 18) | ((uint32_t)(b2 & 0x3f) << 12) |
                          ((uint32_t)(b3 & 0x3f) << 6) | (b4 & 0x3f);
            if (!cont(b2) || !cont(b3) || !cont(b4) || uc < 0x10000 || uc > 0x10ffff) {
                if (b1 > 0xf4 || (b1 == 0xf0 && (b2 < 0x90 || b2 > 0xbf)) ||
                    (b1 == 0xf4 && (b2 & 0xf0) != 0x80) || !cont(b2)) {
                    return 1;
                }
                return cont(b3) ? 3 : 2;
            }
            *cp = uc;
            *bad = false;
            return 4;
        }
        if (b1 > 0xf4 || (n >= 2 && ((b1 == 0xf0 && (s[1] < 0x90 || s[1] > 0xbf)) ||
                                     (b1 == 0xf4 && (s[1] & 0xf0) != 0x80) || !cont(s[1])))) {
            return 1;
        }
        if (n == 3 && !cont(s[2])) {
            return 2;
        }
        return n;
    }
    return 1;
}

#define ONES EJSON_ONES

static const char hexl[] = "0123456789abcdef";

static inline char *put_u(char *p, uint32_t unit)
{
    p[0] = '\\';
    p[1] = 'u';
    p[2] = hexl[(unit >> 12) & 0xf];
    p[3] = hexl[(unit >> 8) & 0xf];
    p[4] = hexl[(unit >> 4) & 0xf];
    p[5] = hexl[unit & 0xf];
    return p + 6;
}

void ejson_write_string(struct ejson_buf *buf, const char *str, size_t n)
{
    const uint8_t *s = (const uint8_t *)str;
    /* Worst case: every byte becomes \uXXXX (6 bytes per input byte covers
     * surrogate pairs too: 4 bytes -> 12), plus the quotes. */
    if (buf->cap - buf->len <= n * 6 + 2) {
        ejson_buf_grow(buf, n * 6 + 2);
    }
    char *p = buf->data + buf->len;
    uint64_t bad_count = 0;
    *p++ = '"';
    size_t i = 0;
    bool table_ready = false;
    while (i < n) {
        /* Eight plain ASCII bytes at a time (no control, DEL, quote,
         * backslash or non-ASCII byte): the common case for keys and text. */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!plain_ascii8(w)) {
                break;
            }
            memcpy(p, s + i, 8);
            p += 8;
            i += 8;
        }
        if (i >= n) {
            break;
        }
        uint8_t b = s[i];
        if (b < 0x80) {
            char e = ascii_escape[b];
            if (e == 0) {
                *p++ = (char)b;
            } else if (e == 1) {
                p = put_u(p, b);
            } else {
                *p++ = '\\';
                *p++ = e;
            }
            i++;
            continue;
        }
        uint32_t cp;
        bool bad;
        size_t len = decode_java(s + i, n - i, &cp, &bad);
        if (bad) {
            bad_count++;
        }
        if (!table_ready) {
            pthread_once(&raw_bmp_once, build_raw_bmp);
            table_ready = true;
        }
        if (cp > 0xffff) {
            p = put_u(p, 0xd800 + ((cp - 0x10000) >> 10));
            p = put_u(p, 0xdc00 + ((cp - 0x10000) & 0x3ff));
        } else if ((raw_bmp[cp >> 3] >> (cp & 7)) & 1) {
            if (bad) {
                memcpy(p, "\xef\xbf\xbd", 3);
                p += 3;
            } else {
                memcpy(p, s + i, len);
                p += len;
            }
        } else {
            p = put_u(p, cp);
        }
        i += len;
    }
    *p++ = '"';
    buf->len = (size_t)(p - buf->data);
    if (bad_count) {
        atomic_fetch_add_explicit(&invalid_utf8_total, bad_count, memory_order_relaxed);
    }
}

void ejson_write_string_bounded(struct ejson_buf *buf, const char *str, size_t n, size_t readable)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* Short names (most keys): one 8-byte load and one test. The bytes past
     * n are inside the caller's buffer (readable >= 8) and are stored but
     * not counted. */
    if (n <= 8 && readable >= 8) {
        uint64_t w;
        memcpy(&w, str, 8);
        uint64_t mask = n == 8 ? ~UINT64_C(0) : (UINT64_C(1) << (8 * n)) - 1;
        if (plain_ascii8((w & mask) | (ONES * 'a' & ~mask))) {
            if (buf->cap - buf->len <= 10) {
                ejson_buf_grow(buf, 10);
            }
            char *p = buf->data + buf->len;
            p[0] = '"';
            memcpy(p + 1, &w, 8);
            p[1 + n] = '"';
            buf->len += n + 2;
            return;
        }
    }
#else
    (void)readable;
#endif
    ejson_write_string(buf, str, n);
}

bool ejson_utf8_valid_java(const char *str, size_t n)
{
    const uint8_t *s = (const uint8_t *)str;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        bool bad;
        i += decode_java(s + i, n - i, &cp, &bad);
        if (bad) {
            return false;
        }
    }
    return true;
}

size_t ejson_java_utf8(const char *str, size_t n, char *out)
{
    const uint8_t *s = (const uint8_t *)str;
    uint8_t *p = (uint8_t *)out;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            *p++ = s[i++];
            continue;
        }
        uint32_t cp;
        bool bad;
        i += decode_java(s + i, n - i, &cp, &bad);
        if (cp < 0x800) {
            *p++ = (uint8_t)(0xc0 | (cp >> 6));
            *p++ = (uint8_t)(0x80 | (cp & 0x3f));
        } else if (cp < 0x10000) {
            *p++ = (uint8_t)(0xe0 | (cp >> 12));
            *p++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
            *p++ = (uint8_t)(0x80 | (cp & 0x3f));
        } else {
            *p++ = (uint8_t)(0xf0 | (cp >> 18));
            *p++ = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
            *p++ = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
            *p++ = (uint8_t)(0x80 | (cp & 0x3f));
        }
    }
    return (size_t)(p - (uint8_t *)out);
}
