/*
 * snapshot/keyrange: `_id` brackets, range filters, chunk queries, BSON-order
 * comparison and the extended-JSON form of a key (see keyrange.h).
 */
#include "snapshot/keyrange.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode/ejson.h"

static const char *const bracket_names[KEYRANGE_BRACKET_COUNT] = {
    "minKey",
    "undefined",
    "null",
    "nan",
    "number",
    "string",
    "object",
    "array",
    "binData",
    "objectId",
    "bool",
    "date",
    "timestamp",
    "regex",
    "dbPointer",
    "javascript",
    "javascriptWithScope",
    "maxKey",
};

enum keyrange_bracket keyrange_bracket_of(const bson_value_t *v)
{
    switch (v->value_type) {
    case BSON_TYPE_MINKEY:
        return KEYRANGE_MINKEY;
    case BSON_TYPE_EOD:
    case BSON_TYPE_UNDEFINED:
        return KEYRANGE_UNDEFINED;
    case BSON_TYPE_NULL:
        return KEYRANGE_NULL;
    case BSON_TYPE_DOUBLE:
        return isnan(v->value.v_double) ? KEYRANGE_NAN : KEYRANGE_NUMBER;
    case BSON_TYPE_DECIMAL128: {
        char s[BSON_DECIMAL128_STRING];
        bson_decimal128_to_string(&v->value.v_decimal128, s);
        return strcmp(s, "NaN") == 0 ? KEYRANGE_NAN : KEYRANGE_NUMBER;
    }
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
        return KEYRANGE_NUMBER;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL:
        return KEYRANGE_STRING;
    case BSON_TYPE_DOCUMENT:
        return KEYRANGE_OBJECT;
    case BSON_TYPE_ARRAY:
        return KEYRANGE_ARRAY;
    case BSON_TYPE_BINARY:
        return KEYRANGE_BINARY;
    case BSON_TYPE_OID:
        return KEYRANGE_OBJECTID;
    case BSON_TYPE_BOOL:
        return KEYRANGE_BOOL;
    case BSON_TYPE_DATE_TIME:
        return KEYRANGE_DATE;
    case BSON_TYPE_TIMESTAMP:
        return KEYRANGE_TIMESTAMP;
    case BSON_TYPE_REGEX:
        return KEYRANGE_REGEX;
    case BSON_TYPE_DBPOINTER:
        return KEYRANGE_DBPOINTER;
    case BSON_TYPE_CODE:
        return KEYRANGE_CODE;
    case BSON_TYPE_CODEWSCOPE:
        return KEYRANGE_CODEWSCOPE;
    case BSON_TYPE_MAXKEY:
    default:
        return KEYRANGE_MAXKEY;
    }
}

const char *keyrange_bracket_name(enum keyrange_bracket b)
{
    return (unsigned)b < KEYRANGE_BRACKET_COUNT ? bracket_names[b] : "?";
}

bool keyrange_bracket_from_name(const char *name, enum keyrange_bracket *out)
{
    for (int i = 0; i < KEYRANGE_BRACKET_COUNT; i++) {
        if (strcmp(bracket_names[i], name) == 0) {
            *out = (enum keyrange_bracket)i;
            return true;
        }
    }
    return false;
}

bool keyrange_bracket_singleton(enum keyrange_bracket b)
{
    return b == KEYRANGE_MINKEY || b == KEYRANGE_UNDEFINED || b == KEYRANGE_NULL ||
           b == KEYRANGE_NAN || b == KEYRANGE_MAXKEY;
}

/* ---- filters ---- */

/* $type aliases of a bracket (MongoDB's $type names). */
static void append_types(enum keyrange_bracket b, bson_t *range)
{
    if (b == KEYRANGE_STRING) {
        bson_t arr;
        bson_append_array_begin(range, "$type", -1, &arr);
        BSON_APPEND_UTF8(&arr, "0", "string");
        BSON_APPEND_UTF8(&arr, "1", "symbol");
        bson_append_array_end(range, &arr);
    } else {
        /* "number" covers double, int, long and decimal (NaN included) */
        BSON_APPEND_UTF8(range, "$type", b == KEYRANGE_NAN ? "number" : bracket_names[b]);
    }
}

bool keyrange_filter(enum keyrange_bracket b, const bson_value_t *after, const bson_value_t *upto,
                     const bson_t *extra, bson_t *out, struct mcdc_error *err)
{
    bson_t range = BSON_INITIALIZER, ops, arr;

    if ((unsigned)b >= KEYRANGE_BRACKET_COUNT) {
        bson_destroy(&range);
        return mcdc_error_set(err, MCDC_ERR_INTERNAL, 0, "key range: no bracket %d", (int)b);
    }
    if (keyrange_bracket_singleton(b)) {
        after = upto = NULL;
    } else if ((after != NULL && keyrange_bracket_of(after) != b) ||
               (upto != NULL && keyrange_bracket_of(upto) != b)) {
        bson_destroy(&range);
        return mcdc_error_set(err, MCDC_ERR_INTERNAL, 0,
                              "key range: a bound outside the %s bracket", bracket_names[b]);
    }
    bson_append_document_begin(&range, "_id", 3, &ops);
    append_types(b, &ops);
    if (b == KEYRANGE_NAN)
        BSON_APPEND_DOUBLE(&ops, "$eq", NAN);
    if (after != NULL)
        BSON_APPEND_VALUE(&ops, "$gt", after);
    else if (b == KEYRANGE_NUMBER)
        BSON_APPEND_DOUBLE(&ops, "$gte", -INFINITY); /* every number but NaN */
    if (upto != NULL)
        BSON_APPEND_VALUE(&ops, "$lte", upto);
    bson_append_document_end(&range, &ops);

    if (extra == NULL || bson_empty(extra)) {
        bson_concat(out, &range);
    } else {
        bson_append_array_begin(out, "$and", 4, &arr);
        bson_append_document(&arr, "0", 1, &range);
        bson_append_document(&arr, "1", 1, extra);
        bson_append_array_end(out, &arr);
    }
    bson_destroy(&range);
    return true;
}

bool keyrange_span_filter(const bson_value_t *after, const bson_value_t *upto, const bson_t *extra,
                          bson_t *out, struct mcdc_error *err)
{
    int first = 0, last = KEYRANGE_BRACKET_COUNT - 1;
    bson_t span = BSON_INITIALIZER, arr, clause;
    char idx[16];
    const char *key;
    int n = 0;

    if (after != NULL) {
        first = (int)keyrange_bracket_of(after);
        if (keyrange_bracket_singleton((enum keyrange_bracket)first))
            first++; /* its one value is not above after */
    }
    if (upto != NULL)
        last = (int)keyrange_bracket_of(upto); /* a singleton's one value is at most upto */
    if (first > last || (after != NULL && upto != NULL && keyrange_compare(upto, after) <= 0)) {
        bson_t in, empty;
        bson_append_document_begin(&span, "_id", 3, &in);
        bson_append_array_begin(&in, "$in", 3, &empty);
        bson_append_array_end(&in, &empty);
        bson_append_document_end(&span, &in);
        goto done;
    }
    bson_append_array_begin(&span, "$or", 3, &arr);
    for (int b = first; b <= last; b++) {
        const bson_value_t *lo = b == first ? after : NULL, *hi = b == last ? upto : NULL;
        if (lo != NULL && (int)keyrange_bracket_of(lo) != b)
            lo = NULL;
        bson_uint32_to_string((uint32_t)n++, &key, idx, sizeof idx);
        bson_init(&clause);
        if (!keyrange_filter((enum keyrange_bracket)b, lo, hi, NULL, &clause, err)) {
            bson_destroy(&clause);
            bson_append_array_end(&span, &arr);
            bson_destroy(&span);
            return false;
        }
        bson_append_document(&arr, key, -1, &clause);
        bson_destroy(&clause);
    }
    bson_append_array_end(&span, &arr);
    if (n == 1) { /* one bracket: its range alone */
        bson_iter_t it, sub;
        const uint8_t *data;
        uint32_t len;
        bson_t only;
        if (bson_iter_init_find(&it, &span, "$or") && bson_iter_recurse(&it, &sub) &&
            bson_iter_next(&sub) && BSON_ITER_HOLDS_DOCUMENT(&sub)) {
            bson_iter_document(&sub, &len, &data);
            if (bson_init_static(&only, data, len)) {
                bson_t copy;
                bson_copy_to(&only, &copy);
                bson_destroy(&span);
                bson_steal(&span, &copy);
            }
        }
    }
done:
    if (extra == NULL || bson_empty(extra)) {
        bson_concat(out, &span);
    } else {
        bson_append_array_begin(out, "$and", 4, &arr);
        bson_append_document(&arr, "0", 1, &span);
        bson_append_document(&arr, "1", 1, extra);
        bson_append_array_end(out, &arr);
    }
    bson_destroy(&span);
    return true;
}

void keyrange_chunk_opts(int64_t limit, bool keys_only, bson_t *out)
{
    bson_t sort, proj;
    bson_append_document_begin(out, "sort", 4, &sort);
    BSON_APPEND_INT32(&sort, "_id", 1);
    bson_append_document_end(out, &sort);
    if (keys_only) {
        bson_append_document_begin(out, "projection", 10, &proj);
        BSON_APPEND_INT32(&proj, "_id", 1);
        bson_append_document_end(out, &proj);
    }
    BSON_APPEND_INT64(out, "limit", limit);
}

void keyrange_max_opts(bson_t *out)
{
    bson_t sort, proj;
    bson_append_document_begin(out, "sort", 4, &sort);
    BSON_APPEND_INT32(&sort, "_id", -1);
    bson_append_document_end(out, &sort);
    bson_append_document_begin(out, "projection", 10, &proj);
    BSON_APPEND_INT32(&proj, "_id", 1);
    bson_append_document_end(out, &proj);
    BSON_APPEND_INT64(out, "limit", 1);
}

/* ---- numbers ---- */

static int sgn(int c)
{
    return (c > 0) - (c < 0);
}

/* A finite number as sign, significant digits d1d2... (no leading or
 * trailing zeros) and exponent e: value = 0.d1d2... x 10^e. Zero: sign 0. */
struct decnum {
    int sign;
    char digits[128];
    int exp;
};

/* Parses "-1.25E+3", "0.001", "12", "1.5e-07": the forms that
 * bson_decimal128_to_string and printf write. */
static void decnum_from_string(const char *s, struct decnum *d)
{
    int intlen = -1, pos = 0, first = -1, n = 0;

    memset(d, 0, sizeof *d);
    d->sign = 1;
    if (*s == '-' || *s == '+')
        d->sign = *s++ == '-' ? -1 : 1;
    for (;; s++) {
        if (*s == '.' && intlen < 0) {
            intlen = pos;
            continue;
        }
        if (*s < '0' || *s > '9')
            break;
        if (first < 0 && *s != '0')
            first = pos;
        if (first >= 0 && n < (int)sizeof d->digits - 1)
            d->digits[n++] = *s;
        pos++;
    }
    if (intlen < 0)
        intlen = pos;
    if (first < 0) {
        d->sign = 0;
        return;
    }
    while (n > 0 && d->digits[n - 1] == '0')
        d->digits[--n] = '\0';
    d->exp = intlen - first;
    if (*s == 'e' || *s == 'E')
        d->exp += atoi(s + 1);
}

static int decnum_cmp(const struct decnum *a, const struct decnum *b)
{
    int c;
    if (a->sign != b->sign)
        return sgn(a->sign - b->sign);
    if (a->sign == 0)
        return 0;
    if (a->exp != b->exp)
        return a->sign * sgn(a->exp - b->exp);
    c = strcmp(a->digits, b->digits); /* a prefix is the smaller magnitude */
    return a->sign * sgn(c);
}

/* The numeric value class of a number: 0 NaN, 1 finite, 2 +inf, -2 -inf. */
static int num_class(const bson_value_t *v, struct decnum *d)
{
    char s[BSON_DECIMAL128_STRING + 128];
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        snprintf(s, sizeof s, "%d", v->value.v_int32);
        break;
    case BSON_TYPE_INT64:
        snprintf(s, sizeof s, "%lld", (long long)v->value.v_int64);
        break;
    case BSON_TYPE_DOUBLE:
        if (isnan(v->value.v_double))
            return 0;
        if (isinf(v->value.v_double))
            return v->value.v_double > 0 ? 2 : -2;
        snprintf(s, sizeof s, "%.79e", v->value.v_double);
        break;
    default:
        bson_decimal128_to_string(&v->value.v_decimal128, s);
        if (strcmp(s, "NaN") == 0)
            return 0;
        if (strcmp(s, "Infinity") == 0)
            return 2;
        if (strcmp(s, "-Infinity") == 0)
            return -2;
        break;
    }
    decnum_from_string(s, d);
    return 1;
}

/* int64 a against double b (neither NaN), exactly. */
static int cmp_i64_double(int64_t a, double b)
{
    double t;
    int64_t bi;
    if (b >= 9223372036854775808.0)
        return -1;
    if (b < -9223372036854775808.0)
        return 1;
    t = trunc(b);
    bi = (int64_t)t;
    if (a != bi)
        return a < bi ? -1 : 1;
    return b > t ? -1 : (b < t ? 1 : 0);
}

static int64_t as_i64(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_INT32 ? v->value.v_int32 : v->value.v_int64;
}

static int cmp_numbers(const bson_value_t *a, const bson_value_t *b)
{
    bool ad = a->value_type == BSON_TYPE_DOUBLE, bd = b->value_type == BSON_TYPE_DOUBLE;
    bool adec = a->value_type == BSON_TYPE_DECIMAL128, bdec = b->value_type == BSON_TYPE_DECIMAL128;
    struct decnum x, y;
    int ca, cb;

    if (!adec && !bdec) {
        if (!ad && !bd) {
            int64_t i = as_i64(a), j = as_i64(b);
            return (i > j) - (i < j);
        }
        if (ad && bd) {
            double p = a->value.v_double, q = b->value.v_double;
            if (isnan(p) || isnan(q))
                return isnan(p) && isnan(q) ? 0 : (isnan(p) ? -1 : 1);
            return (p > q) - (p < q);
        }
        if (ad) {
            if (isnan(a->value.v_double))
                return -1;
            return -cmp_i64_double(as_i64(b), a->value.v_double);
        }
        if (isnan(b->value.v_double))
            return 1;
        return cmp_i64_double(as_i64(a), b->value.v_double);
    }
    ca = num_class(a, &x);
    cb = num_class(b, &y);
    if (ca == 0 || cb == 0)
        return ca == cb ? 0 : (ca == 0 ? -1 : 1);
    if (ca != 1 || cb != 1) {
        int ra = ca == 1 ? 0 : ca, rb = cb == 1 ? 0 : cb; /* infinities at the ends */
        return sgn(ra - rb);
    }
    return decnum_cmp(&x, &y);
}

/* ---- everything else ---- */

static int cmp_bytes(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = n ? memcmp(a, b, n) : 0;
    if (c != 0)
        return sgn(c);
    return (alen > blen) - (alen < blen);
}

static int cmp_docs(const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen)
{
    bson_t da, db;
    bson_iter_t ia, ib;

    if (!bson_init_static(&da, a, alen) || !bson_init_static(&db, b, blen) ||
        !bson_iter_init(&ia, &da) || !bson_iter_init(&ib, &db))
        return cmp_bytes(a, alen, b, blen);
    for (;;) {
        bool na = bson_iter_next(&ia), nb = bson_iter_next(&ib);
        const bson_value_t *va, *vb;
        const char *ka, *kb;
        int c;
        if (!na || !nb)
            return (na > nb) - (na < nb);
        va = bson_iter_value(&ia);
        vb = bson_iter_value(&ib);
        c = sgn((int)keyrange_bracket_of(va) - (int)keyrange_bracket_of(vb));
        /* NaN and other numbers share the numbers bracket in MongoDB's order */
        if ((keyrange_bracket_of(va) == KEYRANGE_NAN &&
             keyrange_bracket_of(vb) == KEYRANGE_NUMBER) ||
            (keyrange_bracket_of(va) == KEYRANGE_NUMBER && keyrange_bracket_of(vb) == KEYRANGE_NAN))
            c = 0;
        if (c != 0)
            return c;
        ka = bson_iter_key(&ia);
        kb = bson_iter_key(&ib);
        c = cmp_bytes((const uint8_t *)ka, strlen(ka), (const uint8_t *)kb, strlen(kb));
        if (c != 0)
            return c;
        c = keyrange_compare(va, vb);
        if (c != 0)
            return c;
    }
}

static const char *str_of(const bson_value_t *v, uint32_t *len)
{
    if (v->value_type == BSON_TYPE_SYMBOL) {
        *len = v->value.v_symbol.len;
        return v->value.v_symbol.symbol;
    }
    *len = v->value.v_utf8.len;
    return v->value.v_utf8.str;
}

int keyrange_compare(const bson_value_t *a, const bson_value_t *b)
{
    enum keyrange_bracket ba = keyrange_bracket_of(a), bb = keyrange_bracket_of(b);
    uint32_t la, lb;
    const char *sa, *sb;
    int c;

    if ((ba == KEYRANGE_NAN || ba == KEYRANGE_NUMBER) &&
        (bb == KEYRANGE_NAN || bb == KEYRANGE_NUMBER))
        return cmp_numbers(a, b);
    if (ba != bb)
        return sgn((int)ba - (int)bb);
    switch (ba) {
    case KEYRANGE_STRING:
        sa = str_of(a, &la);
        sb = str_of(b, &lb);
        return cmp_bytes((const uint8_t *)sa, la, (const uint8_t *)sb, lb);
    case KEYRANGE_OBJECT:
    case KEYRANGE_ARRAY:
        return cmp_docs(a->value.v_doc.data, a->value.v_doc.data_len, b->value.v_doc.data,
                        b->value.v_doc.data_len);
    case KEYRANGE_BINARY:
        if (a->value.v_binary.data_len != b->value.v_binary.data_len)
            return a->value.v_binary.data_len < b->value.v_binary.data_len ? -1 : 1;
        if (a->value.v_binary.subtype != b->value.v_binary.subtype)
            return a->value.v_binary.subtype < b->value.v_binary.subtype ? -1 : 1;
        return cmp_bytes(a->value.v_binary.data, a->value.v_binary.data_len, b->value.v_binary.data,
                         b->value.v_binary.data_len);
    case KEYRANGE_OBJECTID:
        return sgn(memcmp(a->value.v_oid.bytes, b->value.v_oid.bytes, 12));
    case KEYRANGE_BOOL:
        return (a->value.v_bool > b->value.v_bool) - (a->value.v_bool < b->value.v_bool);
    case KEYRANGE_DATE:
        return (a->value.v_datetime > b->value.v_datetime) -
               (a->value.v_datetime < b->value.v_datetime);
    case KEYRANGE_TIMESTAMP:
        if (a->value.v_timestamp.timestamp != b->value.v_timestamp.timestamp)
            return a->value.v_timestamp.timestamp < b->value.v_timestamp.timestamp ? -1 : 1;
        return (a->value.v_timestamp.increment > b->value.v_timestamp.increment) -
               (a->value.v_timestamp.increment < b->value.v_timestamp.increment);
    case KEYRANGE_REGEX:
        c = strcmp(a->value.v_regex.regex, b->value.v_regex.regex);
        if (c != 0)
            return sgn(c);
        return sgn(strcmp(a->value.v_regex.options, b->value.v_regex.options));
    case KEYRANGE_DBPOINTER:
        if (a->value.v_dbpointer.collection_len != b->value.v_dbpointer.collection_len)
            return a->value.v_dbpointer.collection_len < b->value.v_dbpointer.collection_len ? -1
                                                                                             : 1;
        c = memcmp(a->value.v_dbpointer.collection, b->value.v_dbpointer.collection,
                   a->value.v_dbpointer.collection_len);
        if (c != 0)
            return sgn(c);
        return sgn(memcmp(a->value.v_dbpointer.oid.bytes, b->value.v_dbpointer.oid.bytes, 12));
    case KEYRANGE_CODE:
        return cmp_bytes((const uint8_t *)a->value.v_code.code, a->value.v_code.code_len,
                         (const uint8_t *)b->value.v_code.code, b->value.v_code.code_len);
    case KEYRANGE_CODEWSCOPE:
        c = cmp_bytes((const uint8_t *)a->value.v_codewscope.code, a->value.v_codewscope.code_len,
                      (const uint8_t *)b->value.v_codewscope.code, b->value.v_codewscope.code_len);
        if (c != 0)
            return c;
        return cmp_docs(a->value.v_codewscope.scope_data, a->value.v_codewscope.scope_len,
                        b->value.v_codewscope.scope_data, b->value.v_codewscope.scope_len);
    default:
        return 0; /* singleton brackets: all values equal */
    }
}

/* ---- extended JSON ---- */

void keyrange_key_write(struct ejson_buf *b, const bson_value_t *v)
{
    bson_t doc = BSON_INITIALIZER;
    BSON_APPEND_VALUE(&doc, "_id", v);
    ejson_write_document(b, &doc, EJSON_CANONICAL, EJSON_SEP_DEFAULT);
    bson_destroy(&doc);
}

char *keyrange_key_to_json(const bson_value_t *v)
{
    struct ejson_buf b = {0};
    char *json;
    keyrange_key_write(&b, v);
    json = ejson_buf_steal(&b, NULL);
    ejson_buf_free(&b);
    return json;
}

bool keyrange_key_from_json(const char *json, bson_value_t *out, struct mcdc_error *err)
{
    bson_t doc;
    bson_error_t error;
    bson_iter_t it;

    if (!bson_init_from_json(&doc, json, -1, &error))
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "key '%.80s': %s", json, error.message);
    if (!bson_iter_init(&it, &doc) || !bson_iter_next(&it)) {
        bson_destroy(&doc);
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "key '%.80s': an empty document", json);
    }
    bson_value_copy(bson_iter_value(&it), out);
    if (bson_iter_next(&it)) {
        bson_value_destroy(out);
        bson_destroy(&doc);
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "key '%.80s': more than one field", json);
    }
    bson_destroy(&doc);
    return true;
}
