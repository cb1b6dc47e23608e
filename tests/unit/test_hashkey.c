/* Unit tests for snapshot/hashkey: MongoDB's BSONElementHasher::hash64 against
 * the expected values of MongoDB's own hasher_test.cpp (seed 0), and the
 * hashed-chunk ownership filter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <bson/bson.h>

#include "snapshot/hashkey.h"

/* hash64 (seed 0) of the element "check" of doc; destroys doc. */
static int64_t hash_of(bson_t *doc)
{
    bson_iter_t it;
    int64_t h;
    assert_true(bson_iter_init_find(&it, doc, "check"));
    h = hashkey_hash64(&it, 0);
    bson_destroy(doc);
    return h;
}

static bson_t *one(void)
{
    return bson_new();
}

static int64_t h_int32(int32_t v)
{
    bson_t *d = one();
    BSON_APPEND_INT32(d, "check", v);
    return hash_of(d);
}

static int64_t h_int64(int64_t v)
{
    bson_t *d = one();
    BSON_APPEND_INT64(d, "check", v);
    return hash_of(d);
}

static int64_t h_double(double v)
{
    bson_t *d = one();
    BSON_APPEND_DOUBLE(d, "check", v);
    return hash_of(d);
}

static int64_t h_json(const char *json)
{
    bson_error_t error;
    bson_t *d = bson_new_from_json((const uint8_t *)json, -1, &error);
    if (d == NULL)
        fail_msg("bad test JSON %s: %s", json, error.message);
    return hash_of(d);
}

static void test_numbers(void **state)
{
    (void)state;
    assert_int_equal(h_int32(42), -944302157085130861LL);
    assert_int_equal(h_double(42.123), -944302157085130861LL);
    assert_int_equal(h_int64(42), -944302157085130861LL);
    assert_int_equal(h_int32(0), 4854801880128277513LL);
    assert_int_equal(h_double(0.456), 4854801880128277513LL);
    assert_int_equal(h_int64(0), 4854801880128277513LL);
    assert_int_equal(h_double(NAN), 4854801880128277513LL);
    assert_int_equal(h_int32(1), 5902408780260971510LL);
    assert_int_equal(h_double(1.987), 5902408780260971510LL);
    assert_int_equal(h_int64(1), 5902408780260971510LL);
    assert_int_equal(h_int32(-1), 1140205862565771219LL);
    assert_int_equal(h_double(-1.789), 1140205862565771219LL);
    assert_int_equal(h_int64(-1), 1140205862565771219LL);
    assert_int_equal(h_int32(INT_MIN), 6165898260261354870LL);
    assert_int_equal(h_double((double)INT_MIN), 6165898260261354870LL);
    assert_int_equal(h_int64(INT_MIN), 6165898260261354870LL);
    assert_int_equal(h_int32(INT_MAX), 1143184177162245883LL);
    assert_int_equal(h_double((double)INT_MAX), 1143184177162245883LL);
    assert_int_equal(h_int64(INT_MAX), 1143184177162245883LL);
    assert_int_equal(h_double(DBL_MAX), 921523596458303250LL);
    assert_int_equal(h_int64(INT64_MAX), 921523596458303250LL);
    assert_int_equal(h_double(-DBL_MAX), 4532067210535695462LL);
    assert_int_equal(h_int64(INT64_MIN), 4532067210535695462LL);
    /* decimal128 squashes like the other numbers, rounded half to even */
    assert_int_equal(h_json("{\"check\": {\"$numberDecimal\": \"42\"}}"), -944302157085130861LL);
    assert_int_equal(h_json("{\"check\": {\"$numberDecimal\": \"42.4999\"}}"),
                     -944302157085130861LL);
    assert_int_equal(h_json("{\"check\": {\"$numberDecimal\": \"41.5\"}}"), -944302157085130861LL);
    assert_int_equal(h_json("{\"check\": {\"$numberDecimal\": \"42.5\"}}"), -944302157085130861LL);
    assert_int_equal(h_json("{\"check\": {\"$numberDecimal\": \"4.2E+1\"}}"),
                     -944302157085130861LL);
    assert_int_equal(h_json("{\"check\": {\"$numberDecimal\": \"0.5\"}}"), 4854801880128277513LL);
    assert_int_equal(h_json("{\"check\": {\"$numberDecimal\": \"NaN\"}}"), 4854801880128277513LL);
    assert_int_equal(h_json("{\"check\": {\"$numberDecimal\": \"-1.2\"}}"), 1140205862565771219LL);
    assert_int_equal(h_json("{\"check\": {\"$numberDecimal\": \"1E+30\"}}"), 921523596458303250LL);
    assert_int_equal(h_json("{\"check\": {\"$numberDecimal\": \"-Infinity\"}}"),
                     4532067210535695462LL);
    assert_int_equal(h_json("{\"check\": {\"$numberDecimal\": \"2147483647.0\"}}"),
                     1143184177162245883LL);
    /* a double of exactly 2^63 hashes as INT64_MIN (safeNumberLongForHash) */
    assert_int_equal(h_double(9223372036854775808.0), 4532067210535695462LL);
}

static void test_other_types(void **state)
{
    (void)state;
    assert_int_equal(h_json("{\"check\": {\"$minKey\": 1}}"), 7961148599568647290LL);
    assert_int_equal(h_json("{\"check\": {\"$maxKey\": 1}}"), 5504842513779440750LL);
    assert_int_equal(h_json("{\"check\": {\"$undefined\": true}}"), 40158834000849533LL);
    assert_int_equal(h_json("{\"check\": null}"), 2338878944348059895LL);
    assert_int_equal(h_json("{\"check\": \"abc\"}"), 8478485326885698097LL);
    assert_int_equal(h_json("{\"check\": {\"$symbol\": \"abc\"}}"), 8478485326885698097LL);
    assert_int_equal(h_json("{\"check\": \"\"}"), 2049396243249673340LL);
    assert_int_equal(h_json("{\"check\": {\"$symbol\": \"\"}}"), 2049396243249673340LL);
    assert_int_equal(h_json("{\"check\": {\"a\": \"abc\", \"b\": {\"$numberLong\": \"123\"}}}"),
                     4771603801758380216LL);
    assert_int_equal(h_json("{\"check\": {}}"), 7980500913326740417LL);
    assert_int_equal(h_json("{\"check\": [\"bar\", \"baz\", \"qux\"]}"), -2938911267422831539LL);
    assert_int_equal(h_json("{\"check\": []}"), 8849948234993459283LL);
    /* bytes 00 01 02 03 04 06, subtypes 0 and 0x80; 16 bytes 00..0f, subtype 4 */
    assert_int_equal(
        h_json("{\"check\": {\"$binary\": {\"base64\": \"AAECAwQG\", \"subType\": \"00\"}}}"),
        7252465090394235301LL);
    assert_int_equal(
        h_json("{\"check\": {\"$binary\": {\"base64\": \"AAECAwQG\", \"subType\": \"80\"}}}"),
        5736670452907618262LL);
    assert_int_equal(h_json("{\"check\": {\"$binary\": {\"base64\": \"AAECAwQFBgcICQoLDA0ODw==\", "
                            "\"subType\": \"04\"}}}"),
                     6084661258071355978LL);
    assert_int_equal(h_json("{\"check\": {\"$oid\": \"010203040506070809101112\"}}"),
                     -5588663249627035708LL);
    assert_int_equal(h_json("{\"check\": {\"$oid\": \"000000000000000000000000\"}}"),
                     -4293118519463489418LL);
    assert_int_equal(h_json("{\"check\": true}"), 6405873908747105701LL);
    assert_int_equal(h_json("{\"check\": false}"), 6289544573401934092LL);
    assert_int_equal(h_json("{\"check\": {\"$date\": {\"$numberLong\": \"6153737367135073092\"}}}"),
                     4476222765095560467LL); /* 0x5566778811223344 ms */
    assert_int_equal(h_json("{\"check\": {\"$timestamp\": {\"t\": 1432778632, \"i\": 287454020}}}"),
                     4476222765095560467LL); /* t 0x55667788, i 0x11223344 */
    assert_int_equal(h_json("{\"check\": {\"$date\": {\"$numberLong\": \"0\"}}}"),
                     -1178696894582842035LL);
    assert_int_equal(h_json("{\"check\": {\"$timestamp\": {\"t\": 0, \"i\": 0}}}"),
                     -1178696894582842035LL);
    assert_int_equal(
        h_json(
            "{\"check\": {\"$regularExpression\": {\"pattern\": \"mongodb\", \"options\": \"\"}}}"),
        -7275792090268217043LL);
    assert_int_equal(
        h_json("{\"check\": {\"$regularExpression\": {\"pattern\": \".*\", \"options\": \"i\"}}}"),
        7095855029187981886LL);
    assert_int_equal(h_json("{\"check\": {\"$dbPointer\": {\"$ref\": \"c\", \"$id\": {\"$oid\": "
                            "\"010203040506070809101112\"}}}}"),
                     940175826736461384LL);
    assert_int_equal(h_json("{\"check\": {\"$dbPointer\": {\"$ref\": \"db.c\", \"$id\": {\"$oid\": "
                            "\"010203040506070809101112\"}}}}"),
                     2426768198104018194LL);
    assert_int_equal(h_json("{\"check\": {\"$code\": \"func f() { return 1; }\"}}"),
                     6861638109178014270LL);
    assert_int_equal(
        h_json("{\"check\": {\"$code\": \"func f() { return 1; }\", \"$scope\": {\"c\": true}}}"),
        501342939894575968LL);
}

static void test_seed_and_nesting(void **state)
{
    bson_t *a = bson_new_from_json((const uint8_t *)"{\"check\": 4}", -1, NULL);
    bson_iter_t it;
    (void)state;
    assert_true(bson_iter_init_find(&it, a, "check"));
    assert_int_not_equal(hashkey_hash64(&it, 0), hashkey_hash64(&it, 1));
    bson_destroy(a);
    /* numbers squash inside documents and arrays too */
    assert_int_equal(h_json("{\"check\": {\"a\": 3, \"b\": [3.1, {\"c\": 3}]}}"),
                     h_json("{\"check\": {\"a\": 3.1, \"b\": [3, {\"c\": 3.0}]}}"));
    assert_int_not_equal(h_json("{\"check\": {\"0\": 0, \"1\": 1}}"),
                         h_json("{\"check\": [0, 1]}"));
}

/* A filter over {k: "hashed"} owning [MinKey, 0) and [h, MaxKey) where h is
 * the hash of 42 (so 42 is owned, and a value hashing in [0, h) is not). */
static void test_owns(void **state)
{
    bson_t pattern = BSON_INITIALIZER, f = BSON_INITIALIZER;
    bson_t *mins[2], *maxs[2];
    int64_t h42 = -944302157085130861LL; /* < 0: in [MinKey, 0) */
    int64_t h1 = 5902408780260971510LL;  /* >= 0 */
    (void)state;
    BSON_APPEND_UTF8(&pattern, "k", "hashed");
    assert_true(hashkey_pattern_hashed(&pattern));
    for (int i = 0; i < 2; i++) {
        mins[i] = bson_new();
        maxs[i] = bson_new();
    }
    BSON_APPEND_MINKEY(mins[0], "k");
    BSON_APPEND_INT64(maxs[0], "k", 0);
    BSON_APPEND_INT64(mins[1], "k", h1 + 1);
    BSON_APPEND_MAXKEY(maxs[1], "k");
    hashkey_filter(&pattern, (const bson_t *const *)mins, (const bson_t *const *)maxs, 2, &f);
    assert_true(hashkey_is_filter(&f));
    {
        bson_t *d42 = bson_new_from_json((const uint8_t *)"{\"_id\": 1, \"k\": 42}", -1, NULL);
        bson_t *d1 = bson_new_from_json((const uint8_t *)"{\"_id\": 2, \"k\": 1.5}", -1, NULL);
        bson_t *none = bson_new_from_json((const uint8_t *)"{\"_id\": 3}", -1, NULL);
        assert_true(h42 < 0);
        assert_true(hashkey_owns(&f, d42));
        assert_false(hashkey_owns(&f, d1)); /* hash of 1 lies in the gap [0, h1] */
        /* missing: hashes as null, 2338878944348059895 in the gap too */
        assert_false(hashkey_owns(&f, none));
        bson_destroy(d42);
        bson_destroy(d1);
        bson_destroy(none);
    }
    {
        bson_t q = BSON_INITIALIZER;
        BSON_APPEND_INT32(&q, "k", 1);
        assert_false(hashkey_is_filter(&q));
        bson_destroy(&q);
    }
    for (int i = 0; i < 2; i++) {
        bson_destroy(mins[i]);
        bson_destroy(maxs[i]);
    }
    bson_destroy(&pattern);
    bson_destroy(&f);
}

/* A compound key {region: 1, uid: "hashed"}: the range field compares by
 * value, the hashed one by hash64 (chunk [{region: "eu", uid: 0},
 * {region: "eu", uid: MaxKey}) owns eu documents whose uid hashes >= 0). */
static void test_owns_compound(void **state)
{
    bson_t pattern = BSON_INITIALIZER, f = BSON_INITIALIZER;
    bson_t *lo = bson_new(), *hi = bson_new();
    (void)state;
    BSON_APPEND_INT32(&pattern, "region", 1);
    BSON_APPEND_UTF8(&pattern, "uid", "hashed");
    BSON_APPEND_UTF8(lo, "region", "eu");
    BSON_APPEND_INT64(lo, "uid", 0);
    BSON_APPEND_UTF8(hi, "region", "eu");
    BSON_APPEND_MAXKEY(hi, "uid");
    hashkey_filter(&pattern, (const bson_t *const *)&lo, (const bson_t *const *)&hi, 1, &f);
    {
        /* hash64(1) >= 0, hash64(42) < 0 */
        bson_t *a = bson_new_from_json(
            (const uint8_t *)"{\"_id\": 1, \"region\": \"eu\", \"uid\": 1}", -1, NULL);
        bson_t *b = bson_new_from_json(
            (const uint8_t *)"{\"_id\": 2, \"region\": \"eu\", \"uid\": 42}", -1, NULL);
        bson_t *c = bson_new_from_json(
            (const uint8_t *)"{\"_id\": 3, \"region\": \"us\", \"uid\": 1}", -1, NULL);
        assert_true(hashkey_owns(&f, a));
        assert_false(hashkey_owns(&f, b));
        assert_false(hashkey_owns(&f, c));
        bson_destroy(a);
        bson_destroy(b);
        bson_destroy(c);
    }
    bson_destroy(lo);
    bson_destroy(hi);
    bson_destroy(&pattern);
    bson_destroy(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers),          cmocka_unit_test(test_other_types),
        cmocka_unit_test(test_seed_and_nesting), cmocka_unit_test(test_owns),
        cmocka_unit_test(test_owns_compound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
