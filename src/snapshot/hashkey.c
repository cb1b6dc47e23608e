/*
 * snapshot/hashkey: MongoDB's hash64 of BSON values and the hashed-chunk
 * ownership filter (see hashkey.h for the algorithm and why).
 */
#include "snapshot/hashkey.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "snapshot/keyrange.h"

#define FILTER_KEY "$hashedShardKey"
#define MAX_KEY_FIELDS 32

static int canonical_type(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_MINKEY: return -1;
    case BSON_TYPE_EOD:
    case BSON_TYPE_UNDEFINED: return 0;
    case BSON_TYPE_NULL: return 5;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128: return 10;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL: return 15;
    case BSON_TYPE_DOCUMENT: return 20;
    case BSON_TYPE_ARRAY: return 25;
    case BSON_TYPE_BINARY: return 30;
    case BSON_TYPE_OID: return 35;
    case BSON_TYPE_BOOL: return 40;
    case BSON_TYPE_DATE_TIME:
    case BSON_TYPE_TIMESTAMP: return 45;
    case BSON_TYPE_REGEX: return 50;
    case BSON_TYPE_DBPOINTER: return 55;
    case BSON_TYPE_CODE: return 60;
    case BSON_TYPE_CODEWSCOPE: return 65;
    case BSON_TYPE_MAXKEY: return 127;
    default: return 0;
    }
}

static void add_le32(EVP_MD_CTX *md, int32_t v)
{
    uint8_t b[4];
    uint32_t u = (uint32_t)v;
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(u >> (8 * i));
    EVP_DigestUpdate(md, b, sizeof b);
}

static void add_le64(EVP_MD_CTX *md, int64_t v)
{
    uint8_t b[8];
    uint64_t u = (uint64_t)v;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(u >> (8 * i));
    EVP_DigestUpdate(md, b, sizeof b);
}

/* A double as MongoDB squashes it for hashing (safeNumberLongForHash): NaN
 * 0, truncated toward zero, clamped to the int64 range, except that exactly
 * 2^63 gives INT64_MIN (older servers' overflowing cast, kept for hashes). */
static int64_t double_for_hash(double d)
{
    if (isnan(d))
        return 0;
    if (d == 9223372036854775808.0)
        return INT64_MIN;
    if (d > 9223372036854775808.0)
        return INT64_MAX;
    if (d < -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)d;
}

/* A decimal128 as MongoDB squashes it for hashing: NaN 0, clamped to the
 * int64 range, else rounded to the nearest integer, ties to even
 * (Decimal128::toLong's default). Exact: from the decimal's digits. */
static int64_t decimal_for_hash(const bson_decimal128_t *dec)
{
    char s[BSON_DECIMAL128_STRING], digits[96];
    const char *p = s;
    size_t nd = 0, k, first = 0;
    long exp = 0;
    bool neg = false, dot = false, over = false, up = false;
    uint64_t mag = 0;

    bson_decimal128_to_string(dec, s);
    if (*p == '-' || *p == '+')
        neg = *p++ == '-';
    if (strcmp(p, "NaN") == 0)
        return 0;
    if (strcmp(p, "Inf") == 0 || strcmp(p, "Infinity") == 0)
        return neg ? INT64_MIN : INT64_MAX;
    for (; *p != '\0' && *p != 'E' && *p != 'e'; p++) {
        if (*p == '.') {
            dot = true;
        } else if (nd < sizeof digits) {
            digits[nd++] = *p;
            if (dot)
                exp--;
        }
    }
    if (*p == 'E' || *p == 'e')
        exp += strtol(p + 1, NULL, 10);
    while (first < nd && digits[first] == '0')
        first++;
    if (first == nd)
        return 0;
    /* integer digits: digits[first, k) then exp zeros when exp > 0 */
    k = exp >= 0 ? nd : (long)nd + exp > (long)first ? (size_t)((long)nd + exp) : first;
    if ((long)(k - first) + (exp > 0 ? exp : 0) > 19)
        over = true;
    for (size_t i = first; !over && i < k; i++)
        mag = mag * 10 + (uint64_t)(digits[i] - '0');
    for (long i = 0; !over && i < exp; i++) {
        if (mag > UINT64_MAX / 10)
            over = true;
        else
            mag *= 10;
    }
    if (!over && k < nd) {
        /* the fraction digits[k, nd): round half to even */
        bool rest = false;
        for (size_t i = k + 1; i < nd; i++)
            rest = rest || digits[i] != '0';
        up = digits[k] > '5' || (digits[k] == '5' && (rest || (mag & 1) != 0));
        if (up)
            mag++;
    }
    if (over || mag > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
        return neg ? INT64_MIN : INT64_MAX;
    return neg ? (int64_t)(0 - mag) : (int64_t)mag;
}

static int64_t number_for_hash(const bson_iter_t *it)
{
    switch (bson_iter_type(it)) {
    case BSON_TYPE_INT32: return bson_iter_int32(it);
    case BSON_TYPE_INT64: return bson_iter_int64(it);
    case BSON_TYPE_DOUBLE: return double_for_hash(bson_iter_double(it));
    default: {
        bson_decimal128_t dec;
        bson_iter_decimal128(it, &dec);
        return decimal_for_hash(&dec);
    }
    }
}

static void hash_element(EVP_MD_CTX *md, const bson_iter_t *it, bool with_name);

/* Each element of the embedded document at data/len, then the end marker. */
static void hash_elements(EVP_MD_CTX *md, const uint8_t *data, uint32_t len)
{
    bson_t sub;
    bson_iter_t c;
    if (bson_init_static(&sub, data, len) && bson_iter_init(&c, &sub)) {
        while (bson_iter_next(&c))
            hash_element(md, &c, true);
    }
    add_le32(md, canonical_type(BSON_TYPE_EOD)); /* end of object: no name, no value */
}

static void hash_element(EVP_MD_CTX *md, const bson_iter_t *it, bool with_name)
{
    bson_type_t t = bson_iter_type(it);
    const uint8_t *data;
    uint32_t len;

    add_le32(md, canonical_type(t));
    if (with_name)
        EVP_DigestUpdate(md, bson_iter_key(it), strlen(bson_iter_key(it)) + 1);
    switch (t) {
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: add_le64(md, number_for_hash(it)); break;
    case BSON_TYPE_DOCUMENT:
        bson_iter_document(it, &len, &data);
        hash_elements(md, data, len);
        break;
    case BSON_TYPE_ARRAY:
        bson_iter_array(it, &len, &data);
        hash_elements(md, data, len);
        break;
    case BSON_TYPE_CODEWSCOPE: {
        uint32_t clen;
        const char *code = bson_iter_codewscope(it, &clen, &len, &data);
        EVP_DigestUpdate(md, code, clen);
        EVP_DigestUpdate(md, "", 1); /* the code's NUL */
        hash_elements(md, data, len);
        break;
    }
    default:
        /* The raw value bytes as BSON stores them (length prefixes, NULs,
         * subtypes included): d1 is the value's offset, next_off the next
         * element's. */
        EVP_DigestUpdate(md, it->raw + it->d1, it->next_off - it->d1);
        break;
    }
}

int64_t hashkey_hash64(const bson_iter_t *it, int32_t seed)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    uint64_t u = 0;

    EVP_DigestInit_ex(md, EVP_md5(), NULL);
    add_le32(md, seed);
    hash_element(md, it, false);
    EVP_DigestFinal_ex(md, digest, &dlen);
    EVP_MD_CTX_free(md);
    for (int i = 7; i >= 0; i--)
        u = (u << 8) | digest[i];
    return (int64_t)u;
}

bool hashkey_pattern_hashed(const bson_t *pattern)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, pattern))
        return false;
    while (bson_iter_next(&it)) {
        if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_utf8(&it, NULL), "hashed") == 0)
            return true;
    }
    return false;
}

void hashkey_filter(const bson_t *pattern, const bson_t *const *mins, const bson_t *const *maxs,
                    size_t n, bson_t *out)
{
    bson_t f, ranges, r;
    bson_append_document_begin(out, FILTER_KEY, -1, &f);
    BSON_APPEND_DOCUMENT(&f, "key", pattern);
    bson_append_array_begin(&f, "ranges", -1, &ranges);
    for (size_t i = 0; i < n; i++) {
        char idx[24];
        bson_snprintf(idx, sizeof idx, "%zu", i);
        bson_append_document_begin(&ranges, idx, -1, &r);
        BSON_APPEND_DOCUMENT(&r, "min", mins[i]);
        BSON_APPEND_DOCUMENT(&r, "max", maxs[i]);
        bson_append_document_end(&ranges, &r);
    }
    bson_append_array_end(&f, &ranges);
    bson_append_document_end(out, &f);
}

bool hashkey_is_filter(const bson_t *f)
{
    bson_iter_t it;
    return f != NULL && bson_iter_init_find(&it, f, FILTER_KEY) && BSON_ITER_HOLDS_DOCUMENT(&it);
}

/* Compares the key values with a bound document (fields in pattern order). */
static int cmp_bound(const bson_value_t *vals, size_t n, const bson_iter_t *bound)
{
    bson_iter_t b;
    size_t i = 0;
    if (!BSON_ITER_HOLDS_DOCUMENT(bound) || !bson_iter_recurse(bound, &b))
        return 0;
    while (i < n && bson_iter_next(&b)) {
        int c = keyrange_compare(&vals[i], bson_iter_value(&b));
        if (c != 0)
            return c;
        i++;
    }
    return 0;
}

bool hashkey_owns(const bson_t *f, const bson_t *doc)
{
    bson_iter_t it, key, ranges;
    bson_value_t vals[MAX_KEY_FIELDS];
    size_t n = 0;

    if (!bson_iter_init_find(&it, f, FILTER_KEY) || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &key) || !bson_iter_find(&key, "key") ||
        !BSON_ITER_HOLDS_DOCUMENT(&key) || !bson_iter_recurse(&it, &ranges) ||
        !bson_iter_find(&ranges, "ranges") || !BSON_ITER_HOLDS_ARRAY(&ranges))
        return false;
    {
        bson_iter_t p;
        bson_iter_recurse(&key, &p);
        while (n < MAX_KEY_FIELDS && bson_iter_next(&p)) {
            bson_iter_t top, v;
            bool found = bson_iter_init(&top, doc) &&
                         bson_iter_find_descendant(&top, bson_iter_key(&p), &v);
            bool hashed =
                BSON_ITER_HOLDS_UTF8(&p) && strcmp(bson_iter_utf8(&p, NULL), "hashed") == 0;
            if (hashed) {
                vals[n].value_type = BSON_TYPE_INT64;
                if (found) {
                    vals[n].value.v_int64 = hashkey_hash64(&v, 0);
                } else {
                    /* a missing field hashes as null */
                    bson_t nb = BSON_INITIALIZER;
                    bson_iter_t ni;
                    BSON_APPEND_NULL(&nb, "v");
                    bson_iter_init_find(&ni, &nb, "v");
                    vals[n].value.v_int64 = hashkey_hash64(&ni, 0);
                    bson_destroy(&nb);
                }
            } else if (found) {
                vals[n] = *bson_iter_value(&v);
            } else {
                vals[n].value_type = BSON_TYPE_NULL;
            }
            n++;
        }
    }
    if (n == 0)
        return false;
    {
        bson_iter_t r;
        bson_iter_recurse(&ranges, &r);
        while (bson_iter_next(&r)) {
            bson_iter_t lo, hi;
            if (!BSON_ITER_HOLDS_DOCUMENT(&r) || !bson_iter_recurse(&r, &lo) ||
                !bson_iter_find(&lo, "min") || !bson_iter_recurse(&r, &hi) ||
                !bson_iter_find(&hi, "max"))
                continue;
            if (cmp_bound(vals, n, &lo) >= 0 && cmp_bound(vals, n, &hi) < 0)
                return true;
        }
    }
    return false;
}
