/*
 * Golden vectors for the extended-JSON writer (src/encode/ejson.c and
 * friends): the key table of debezium-format.md §1.1, the per-type table of
 * §2.3, the worked example of §2.5, Java Double.toString digits (checked
 * against JDK 17), Java character-class escaping (§2.2) and invalid UTF-8.
 * The full byte-for-byte comparison with the Java driver is the integration
 * test tests/integration/test_ejson_oracle.py; these vectors pin the cases a
 * reader of the format document will look for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bson/bson.h>

#include "encode/ejson.h"

/* Renders doc (extended JSON text, parsed by libbson) and compares. */
static void check_doc(const char *json, enum ejson_mode mode, enum ejson_separators sep,
                      const char *expected)
{
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr);
    if (!doc) {
        fail_msg("bad test JSON %s: %s", json, berr.message);
    }
    struct ejson_buf buf = {0};
    ejson_write_document(&buf, doc, mode, sep);
    ejson_buf_append(&buf, "", 1);
    assert_string_equal(buf.data, expected);
    ejson_buf_free(&buf);
    bson_destroy(doc);
}

static void check_strict(const char *json, const char *expected)
{
    check_doc(json, EJSON_STRICT, EJSON_SEP_COMPACT, expected);
}

static void check_relaxed(const char *json, const char *expected)
{
    check_doc(json, EJSON_RELAXED, EJSON_SEP_COMPACT, expected);
}

/* Key text of {"_id": <id_json>} (§1.1). */
static void check_key(const char *id_json, const char *expected)
{
    char json[512];
    snprintf(json, sizeof json, "{\"_id\": %s}", id_json);
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr);
    if (!doc) {
        fail_msg("bad test JSON %s: %s", json, berr.message);
    }
    struct ejson_buf buf = {0};
    assert_true(ejson_write_key(&buf, doc));
    ejson_buf_append(&buf, "", 1);
    assert_string_equal(buf.data, expected);
    ejson_buf_free(&buf);
    bson_destroy(doc);
}

/* Renders one raw UTF-8 string with the writer's escaping. */
static void check_string(const char *s, size_t n, const char *expected)
{
    struct ejson_buf buf = {0};
    ejson_write_string(&buf, s, n);
    ejson_buf_append(&buf, "", 1);
    assert_string_equal(buf.data, expected);
    ejson_buf_free(&buf);
}

static void check_double(double v, const char *expected)
{
    char out[40];
    size_t n = ejson_java_double(v, out);
    out[n] = '\0';
    assert_string_equal(out, expected);
}

/* /ejson/key/table_1_1 */
static void test_key_table(void **state)
{
    (void)state;
    check_key("{\"$numberInt\": \"1234\"}", "1234");
    check_key("{\"$numberLong\": \"2147483657\"}", "2147483657");
    check_key("12.34", "12.34");
    check_key("10.0", "10.0");
    check_key("\"123\"", "\"123\"");
    check_key("{\"$oid\": \"596e275826f08b2730779e1f\"}",
              "{\"$oid\": \"596e275826f08b2730779e1f\"}");
    check_key("{\"company\": 32, \"dept\": \"home improvement\"}",
              "{\"company\": 32,\"dept\": \"home improvement\"}");
    check_key("{\"hi\": \"kafka\", \"nums\": [10.0, 100.0, 1000.0]}",
              "{\"hi\": \"kafka\",\"nums\": [10.0,100.0,1000.0]}");
    check_key("{\"$date\": \"2015-03-20T10:15:30.120Z\"}",
              "{\"$date\": \"2015-03-20T10:15:30.12Z\"}");
    check_key("{\"$numberDecimal\": \"123.45678\"}", "{\"$numberDecimal\": \"123.45678\"}");
    check_key("{\"$binary\": {\"base64\": \"a2Fma2E=\", \"subType\": \"00\"}}",
              "{\"$binary\": {\"base64\": \"a2Fma2E=\",\"subType\": \"00\"}}");
    check_key("{\"$binary\": {\"base64\": \"ASNFZ4mrze8BI0VniavN7w==\", \"subType\": \"04\"}}",
              "{\"$binary\": {\"base64\": \"ASNFZ4mrze8BI0VniavN7w==\",\"subType\": \"04\"}}");
}

/* /ejson/key/missing_id */
static void test_key_missing(void **state)
{
    (void)state;
    bson_t *doc = BCON_NEW("a", BCON_INT32(1));
    struct ejson_buf buf = {0};
    assert_false(ejson_write_key(&buf, doc));
    assert_int_equal(buf.len, 0);
    ejson_buf_free(&buf);
    bson_destroy(doc);
}

/* /ejson/types/table_2_3 (STRICT and RELAXED columns) */
static void test_types_table(void **state)
{
    (void)state;
    check_strict("{\"a\": {\"$numberInt\": \"42\"}}", "{\"a\": 42}");
    check_strict("{\"a\": {\"$numberLong\": \"42\"}}", "{\"a\": {\"$numberLong\": \"42\"}}");
    check_relaxed("{\"a\": {\"$numberLong\": \"42\"}}", "{\"a\": 42}");
    check_strict("{\"a\": {\"$numberDecimal\": \"19.99\"}}",
                 "{\"a\": {\"$numberDecimal\": \"19.99\"}}");
    check_strict("{\"a\": \"text\", \"b\": true, \"c\": false, \"d\": null}",
                 "{\"a\": \"text\",\"b\": true,\"c\": false,\"d\": null}");
    check_strict("{\"a\": {\"$oid\": \"6501F5C3E4B0A1B2C3D4E5F6\"}}",
                 "{\"a\": {\"$oid\": \"6501f5c3e4b0a1b2c3d4e5f6\"}}");
    check_strict("{\"a\": {\"$date\": {\"$numberLong\": \"1694627139123\"}}}",
                 "{\"a\": {\"$date\": 1694627139123}}");
    check_relaxed("{\"a\": {\"$date\": {\"$numberLong\": \"1694627139123\"}}}",
                  "{\"a\": {\"$date\": \"2023-09-13T17:45:39.123Z\"}}");
    check_relaxed("{\"a\": {\"$date\": {\"$numberLong\": \"-1000\"}}}",
                  "{\"a\": {\"$date\": {\"$numberLong\": \"-1000\"}}}");
    check_strict("{\"a\": {\"$timestamp\": {\"t\": 1694627139, \"i\": 3}}}",
                 "{\"a\": {\"$timestamp\": {\"t\": 1694627139,\"i\": 3}}}");
    check_strict("{\"a\": {\"$binary\": {\"base64\": \"a2Fma2E=\", \"subType\": \"00\"}}}",
                 "{\"a\": {\"$binary\": \"a2Fma2E=\",\"$type\": \"00\"}}");
    check_relaxed("{\"a\": {\"$binary\": {\"base64\": \"a2Fma2E=\", \"subType\": \"00\"}}}",
                  "{\"a\": {\"$binary\": {\"base64\": \"a2Fma2E=\",\"subType\": \"00\"}}}");
    check_strict("{\"a\": {\"$regularExpression\": {\"pattern\": \"^ab\", \"options\": \"mi\"}}}",
                 "{\"a\": {\"$regex\": \"^ab\",\"$options\": \"im\"}}");
    check_relaxed("{\"a\": {\"$regularExpression\": {\"pattern\": \"^ab\", \"options\": \"mi\"}}}",
                  "{\"a\": {\"$regularExpression\": {\"pattern\": \"^ab\",\"options\": \"im\"}}}");
    check_strict(
        "{\"a\": {\"$dbPointer\": {\"$ref\": \"db.coll\", \"$id\": {\"$oid\": "
        "\"6501f5c3e4b0a1b2c3d4e5f6\"}}}}",
        "{\"a\": {\"$ref\": \"db.coll\",\"$id\": {\"$oid\": \"6501f5c3e4b0a1b2c3d4e5f6\"}}}");
    check_relaxed(
        "{\"a\": {\"$dbPointer\": {\"$ref\": \"db.coll\", \"$id\": {\"$oid\": "
        "\"6501f5c3e4b0a1b2c3d4e5f6\"}}}}",
        "{\"a\": {\"$ref\": \"db.coll\",\"$id\": {\"$oid\": \"6501f5c3e4b0a1b2c3d4e5f6\"}}}");
    check_strict("{\"a\": {\"$symbol\": \"abc\"}}", "{\"a\": {\"$symbol\": \"abc\"}}");
    check_strict("{\"a\": {\"$code\": \"function(){}\"}}",
                 "{\"a\": {\"$code\": \"function(){}\"}}");
    check_strict("{\"a\": {\"$code\": \"f()\", \"$scope\": {\"x\": {\"$numberLong\": \"1\"}}}}",
                 "{\"a\": {\"$code\": \"f()\",\"$scope\": {\"x\": {\"$numberLong\": \"1\"}}}}");
    check_relaxed("{\"a\": {\"$code\": \"f()\", \"$scope\": {\"x\": {\"$numberLong\": \"1\"}}}}",
                  "{\"a\": {\"$code\": \"f()\",\"$scope\": {\"x\": 1}}}");
    check_strict(
        "{\"a\": {\"$minKey\": 1}, \"b\": {\"$maxKey\": 1}, \"c\": {\"$undefined\": true}}",
        "{\"a\": {\"$minKey\": 1},\"b\": {\"$maxKey\": 1},\"c\": {\"$undefined\": true}}");
    check_strict("{\"a\": {}, \"b\": [], \"c\": [{}, [1]]}",
                 "{\"a\": {},\"b\": [],\"c\": [{},[1]]}");
    check_strict("{\"a\": {\"$numberDouble\": \"NaN\"}, \"b\": {\"$numberDouble\": \"Infinity\"}, "
                 "\"c\": {\"$numberDouble\": \"-Infinity\"}}",
                 "{\"a\": NaN,\"b\": Infinity,\"c\": -Infinity}");
    check_relaxed(
        "{\"a\": {\"$numberDouble\": \"NaN\"}, \"b\": {\"$numberDouble\": \"-Infinity\"}}",
        "{\"a\": {\"$numberDouble\": \"NaN\"},\"b\": {\"$numberDouble\": \"-Infinity\"}}");
}

/* Canonical mode (JsonMode.EXTENDED): the exact text, and libbson's parser
 * reads it back as the same BSON (type and value) for every type. */
static void check_canonical(const char *json, const char *expected)
{
    bson_error_t berr;
    check_doc(json, EJSON_CANONICAL, EJSON_SEP_DEFAULT, expected);
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr);
    bson_t *back = bson_new_from_json((const uint8_t *)expected, -1, &berr);
    if (back == NULL)
        fail_msg("canonical text %s does not parse: %s", expected, berr.message);
    if (!bson_equal(doc, back))
        fail_msg("canonical text %s does not read back as %s", expected, json);
    bson_destroy(doc);
    bson_destroy(back);
}

static void test_canonical(void **state)
{
    (void)state;
    check_canonical("{\"a\": {\"$numberInt\": \"-42\"}, \"b\": {\"$numberLong\": \"42\"}}",
                    "{\"a\": {\"$numberInt\": \"-42\"}, \"b\": {\"$numberLong\": \"42\"}}");
    check_canonical(
        "{\"a\": 2.5, \"b\": {\"$numberDouble\": \"-0.0\"}, \"c\": 1e300, "
        "\"d\": {\"$numberDouble\": \"NaN\"}, \"e\": {\"$numberDouble\": \"-Infinity\"}}",
        "{\"a\": {\"$numberDouble\": \"2.5\"}, \"b\": {\"$numberDouble\": \"-0.0\"}, "
        "\"c\": {\"$numberDouble\": \"1.0E300\"}, \"d\": {\"$numberDouble\": \"NaN\"}, "
        "\"e\": {\"$numberDouble\": \"-Infinity\"}}");
    check_canonical("{\"a\": {\"$date\": {\"$numberLong\": \"1694627139123\"}}, "
                    "\"b\": {\"$date\": {\"$numberLong\": \"-1000\"}}}",
                    "{\"a\": {\"$date\": {\"$numberLong\": \"1694627139123\"}}, "
                    "\"b\": {\"$date\": {\"$numberLong\": \"-1000\"}}}");
    check_canonical("{\"a\": {\"$binary\": {\"base64\": \"a2Fma2E=\", \"subType\": \"04\"}}}",
                    "{\"a\": {\"$binary\": {\"base64\": \"a2Fma2E=\", \"subType\": \"04\"}}}");
    check_canonical(
        "{\"a\": {\"$regularExpression\": {\"pattern\": \"^ab\", \"options\": \"im\"}}}",
        "{\"a\": {\"$regularExpression\": {\"pattern\": \"^ab\", \"options\": \"im\"}}}");
    check_canonical("{\"a\": {\"$dbPointer\": {\"$ref\": \"db.coll\", \"$id\": {\"$oid\": "
                    "\"6501f5c3e4b0a1b2c3d4e5f6\"}}}}",
                    "{\"a\": {\"$dbPointer\": {\"$ref\": \"db.coll\", \"$id\": {\"$oid\": "
                    "\"6501f5c3e4b0a1b2c3d4e5f6\"}}}}");
    check_canonical("{\"a\": {\"$oid\": \"6501f5c3e4b0a1b2c3d4e5f6\"}, \"b\": {\"$symbol\": "
                    "\"s\"}, \"c\": {\"$code\": \"f()\", \"$scope\": {\"x\": 1}}}",
                    "{\"a\": {\"$oid\": \"6501f5c3e4b0a1b2c3d4e5f6\"}, \"b\": {\"$symbol\": "
                    "\"s\"}, \"c\": {\"$code\": \"f()\", \"$scope\": {\"x\": {\"$numberInt\": "
                    "\"1\"}}}}");
    check_canonical("{\"a\": {\"$timestamp\": {\"t\": 4294967295, \"i\": 3}}, "
                    "\"b\": {\"$numberDecimal\": \"19.99\"}, \"c\": {\"$minKey\": 1}, "
                    "\"d\": {\"$maxKey\": 1}, \"e\": {\"$undefined\": true}, \"f\": null}",
                    "{\"a\": {\"$timestamp\": {\"t\": 4294967295, \"i\": 3}}, "
                    "\"b\": {\"$numberDecimal\": \"19.99\"}, \"c\": {\"$minKey\": 1}, "
                    "\"d\": {\"$maxKey\": 1}, \"e\": {\"$undefined\": true}, \"f\": null}");
    check_canonical("{\"a\": {}, \"b\": [], \"c\": [{}, [1, \"x\\n\"]], \"d\": true}",
                    "{\"a\": {}, \"b\": [], \"c\": [{}, [{\"$numberInt\": \"1\"}, \"x\\n\"]], "
                    "\"d\": true}");
}

/* /ejson/types/extremes: int64, dates and timestamps at their limits */
static void test_extremes(void **state)
{
    (void)state;
    check_strict("{\"a\": {\"$numberLong\": \"-9223372036854775808\"}, \"b\": {\"$numberLong\": "
                 "\"9223372036854775807\"}}",
                 "{\"a\": {\"$numberLong\": \"-9223372036854775808\"},\"b\": {\"$numberLong\": "
                 "\"9223372036854775807\"}}");
    check_relaxed("{\"a\": {\"$numberLong\": \"-9223372036854775808\"}}",
                  "{\"a\": -9223372036854775808}");
    check_strict("{\"a\": {\"$numberInt\": \"-2147483648\"}}", "{\"a\": -2147483648}");
    check_strict("{\"a\": {\"$date\": {\"$numberLong\": \"-9223372036854775808\"}}}",
                 "{\"a\": {\"$date\": -9223372036854775808}}");
    check_relaxed("{\"a\": {\"$date\": {\"$numberLong\": \"0\"}}}",
                  "{\"a\": {\"$date\": \"1970-01-01T00:00:00Z\"}}");
    check_relaxed("{\"a\": {\"$date\": {\"$numberLong\": \"253402300799999\"}}}",
                  "{\"a\": {\"$date\": \"9999-12-31T23:59:59.999Z\"}}");
    check_relaxed("{\"a\": {\"$date\": {\"$numberLong\": \"253402300800000\"}}}",
                  "{\"a\": {\"$date\": {\"$numberLong\": \"253402300800000\"}}}");
    check_relaxed("{\"a\": {\"$date\": {\"$numberLong\": \"951782400100\"}}}",
                  "{\"a\": {\"$date\": \"2000-02-29T00:00:00.1Z\"}}");
    check_strict("{\"a\": {\"$timestamp\": {\"t\": 4294967295, \"i\": 4294967295}}}",
                 "{\"a\": {\"$timestamp\": {\"t\": 4294967295,\"i\": 4294967295}}}");
    check_strict(
        "{\"a\": {\"$binary\": {\"base64\": \"\", \"subType\": \"80\"}}, \"b\": {\"$binary\": "
        "{\"base64\": \"AQ==\", \"subType\": \"0a\"}}}",
        "{\"a\": {\"$binary\": \"\",\"$type\": \"80\"},\"b\": {\"$binary\": \"AQ==\",\"$type\": "
        "\"0A\"}}");
    check_strict("{\"a\": {\"$regularExpression\": {\"pattern\": \"x\", \"options\": \"xusmil\"}}}",
                 "{\"a\": {\"$regex\": \"x\",\"$options\": \"ilmsux\"}}");
}

/* /ejson/types/integers_at_every_length: int64 text against printf at each
 * power of ten and its neighbours, both signs, RELAXED and STRICT */
static void test_integer_lengths(void **state)
{
    (void)state;
    int64_t p = 1;
    struct ejson_buf buf = {0};
    for (int i = 0; i < 19; i++) {
        if (i > 0) {
            p *= 10; /* 10^i, up to 10^18 */
        }
        int64_t vals[5] = {p, p - 1, p + 1, -p, -p + 1};
        for (int k = 0; k < 5; k++) {
            bson_t *doc = BCON_NEW("a", BCON_INT64(vals[k]), "b", BCON_INT32((int32_t)vals[k]));
            char expected[128];
            snprintf(expected, sizeof expected, "{\"a\": {\"$numberLong\": \"%lld\"},\"b\": %d}",
                     (long long)vals[k], (int)(int32_t)vals[k]);
            ejson_buf_reset(&buf);
            ejson_write_document(&buf, doc, EJSON_STRICT, EJSON_SEP_COMPACT);
            ejson_buf_append(&buf, "", 1);
            assert_string_equal(buf.data, expected);
            bson_destroy(doc);
        }
    }
    /* int32 around its one- and two-digit leading groups and its ends */
    static const int32_t i32[] = {INT32_MIN, INT32_MAX, -1000000000, 999999999, 1000000000,
                                  1999999999, -2000000000, 0, -1, 99999999, 100000000};
    for (size_t k = 0; k < sizeof i32 / sizeof i32[0]; k++) {
        bson_t *doc = BCON_NEW("b", BCON_INT32(i32[k]));
        char expected[64];
        snprintf(expected, sizeof expected, "{\"b\": %d}", (int)i32[k]);
        ejson_buf_reset(&buf);
        ejson_write_document(&buf, doc, EJSON_RELAXED, EJSON_SEP_COMPACT);
        ejson_buf_append(&buf, "", 1);
        assert_string_equal(buf.data, expected);
        bson_destroy(doc);
    }
    ejson_buf_free(&buf);
}

/* /ejson/decimal128/text: Decimal128.toString() forms */
static void test_decimal128(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"1E+3", "1E+3"},
        {"0.000001", "0.000001"},
        {"1.0E-7", "1.0E-7"},
        {"-0", "-0"},
        {"NaN", "NaN"},
        {"Infinity", "Infinity"},
        {"-Infinity", "-Infinity"},
        {"123.45678", "123.45678"},
        {"0E+3", "0E+3"},
        {"-1E-6176", "-1E-6176"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bson_decimal128_t dec;
        assert_true(bson_decimal128_from_string(cases[i][0], &dec));
        char out[64];
        size_t n = ejson_decimal128_string(&dec, out);
        out[n] = '\0';
        assert_string_equal(out, cases[i][1]);
    }
    /* A non-canonical coefficient (2^113 - 1 > 10^34 - 1): the Java driver
     * prints all 35 digits, libbson would not. */
    bson_decimal128_t big = {.high = UINT64_C(0x3040000000000000) | UINT64_C(0x0001ffffffffffff),
                             .low = UINT64_MAX};
    char out[64];
    size_t n = ejson_decimal128_string(&big, out);
    out[n] = '\0';
    assert_string_equal(out, "10384593717069655257060992658440191");
}

/* /ejson/worked_example_2_5 */
static void test_worked_example(void **state)
{
    (void)state;
    const char *doc =
        "{\"_id\": {\"$oid\": \"6501f5c3e4b0a1b2c3d4e5f6\"}, \"n\": {\"$numberInt\": \"1\"}, "
        "\"l\": {\"$numberLong\": \"5\"}, \"d\": 10.0, \"nan\": {\"$numberDouble\": \"NaN\"}, "
        "\"t\": {\"$timestamp\": {\"t\": 1694627139, \"i\": 3}}, "
        "\"b\": {\"$binary\": {\"base64\": \"ASNFZ4mrze8BI0VniavN7w==\", \"subType\": \"04\"}}, "
        "\"r\": {\"$regularExpression\": {\"pattern\": \"^ab\", \"options\": \"mi\"}}, "
        "\"e\": \"\xf0\x9f\x98\x80\"}";
    check_strict(
        doc,
        "{\"_id\": {\"$oid\": \"6501f5c3e4b0a1b2c3d4e5f6\"},\"n\": 1,\"l\": {\"$numberLong\": "
        "\"5\"},\"d\": 10.0,\"nan\": NaN,\"t\": {\"$timestamp\": {\"t\": 1694627139,\"i\": 3}},"
        "\"b\": {\"$binary\": \"ASNFZ4mrze8BI0VniavN7w==\",\"$type\": \"04\"},\"r\": "
        "{\"$regex\": \"^ab\",\"$options\": \"im\"},\"e\": \"\\ud83d\\ude00\"}");
    const char *upd =
        "{\"n\": {\"$numberInt\": \"1\"}, "
        "\"l\": {\"$numberLong\": \"5\"}, \"d\": 10.0, \"nan\": {\"$numberDouble\": \"NaN\"}, "
        "\"t\": {\"$timestamp\": {\"t\": 1694627139, \"i\": 3}}, "
        "\"b\": {\"$binary\": {\"base64\": \"ASNFZ4mrze8BI0VniavN7w==\", \"subType\": \"04\"}}, "
        "\"r\": {\"$regularExpression\": {\"pattern\": \"^ab\", \"options\": \"mi\"}}, "
        "\"e\": \"\xf0\x9f\x98\x80\"}";
    check_doc(
        upd, EJSON_RELAXED, EJSON_SEP_DEFAULT,
        "{\"n\": 1, \"l\": 5, \"d\": 10.0, \"nan\": {\"$numberDouble\": \"NaN\"}, \"t\": "
        "{\"$timestamp\": {\"t\": 1694627139, \"i\": 3}}, \"b\": {\"$binary\": {\"base64\": "
        "\"ASNFZ4mrze8BI0VniavN7w==\", \"subType\": \"04\"}}, \"r\": {\"$regularExpression\": "
        "{\"pattern\": \"^ab\", \"options\": \"im\"}}, \"e\": \"\\ud83d\\ude00\"}");
    /* §2.2 examples, both separator styles */
    check_strict("{\"_id\": {\"$oid\": \"5f1e00000000000000000000\"}, \"scores\": [1.2, 3.4, 5.6], "
                 "\"addr\": {\"city\": \"Oslo\"}}",
                 "{\"_id\": {\"$oid\": \"5f1e00000000000000000000\"},\"scores\": [1.2,3.4,5.6],"
                 "\"addr\": {\"city\": \"Oslo\"}}");
    check_doc("{\"phone\": {\"$numberInt\": \"123\"}, \"scores\": [1.2, 3.4, 5.6], \"new_name\": "
              "\"Sally\"}",
              EJSON_RELAXED, EJSON_SEP_DEFAULT,
              "{\"phone\": 123, \"scores\": [1.2, 3.4, 5.6], \"new_name\": \"Sally\"}");
}

/* /ejson/double/java_to_string (expected values printed by JDK 17) */
static void test_doubles(void **state)
{
    (void)state;
    check_double(10.0, "10.0");
    check_double(3.14, "3.14");
    check_double(1e7, "1.0E7");
    check_double(1e-4, "1.0E-4");
    check_double(0.001, "0.001");
    check_double(-0.0, "-0.0");
    check_double(0.0, "0.0");
    check_double(12345678.0, "1.2345678E7");
    check_double(2e-3, "0.002");
    check_double(9999999.999999998, "9999999.999999998");
    check_double(0.1 + 0.2, "0.30000000000000004");
    check_double(1e21, "1.0E21");
    check_double(1e-5, "1.0E-5");
    check_double(1.7976931348623157e308, "1.7976931348623157E308");
    check_double(2.2250738585072014e-308, "2.2250738585072014E-308");
    check_double(123456789012345680.0, "1.2345678901234568E17");
    /* JDK <= 18 digit choices that are not the shortest (JDK-4511638) */
    check_double(4.9e-324, "4.9E-324");
    check_double(2.82879384806159e17, "2.82879384806159008E17");
    check_double(1.0e23, "9.999999999999999E22");
    check_double(1.3191472680134929e-228, "1.3191472680134929E-228");
    check_double(6.32e-322, "6.32E-322");
    check_double(-1.5, "-1.5");
    /* integral values below 2^53 (exact digits), powers of two included */
    check_double(1.0, "1.0");
    check_double(1024.0, "1024.0");
    check_double(123456789.0, "1.23456789E8");
    check_double(1e15, "1.0E15");
    check_double(9007199254740991.0, "9.007199254740991E15");
    check_double(9007199254740992.0, "9.007199254740992E15");
    check_double(2097152.25, "2097152.25");
    check_double(0.001953125, "0.001953125");
}

/* /ejson/string/java_escaping (§2.2) */
static void test_escaping(void **state)
{
    (void)state;
    check_string("\"\\\b\f\n\r\t", 7, "\"\\\"\\\\\\b\\f\\n\\r\\t\"");
    check_string("\0\x01\x1f\x7f", 4, "\"\\u0000\\u0001\\u001f\\u007f\"");
    check_string("/<>&'", 5, "\"/<>&'\"");
    check_string("\xc2\x80\xc2\x9f", 4, "\"\\u0080\\u009f\"");         /* C1 controls */
    check_string("\xe2\x80\x8b\xef\xbb\xbf", 6, "\"\\u200b\\ufeff\""); /* Cf */
    check_string("e\xcc\x81", 3, "\"e\\u0301\"");                      /* Mn */
    check_string("\xca\xb0\xe3\x83\xbc", 5, "\"\\u02b0\\u30fc\"");     /* Lm */
    check_string("\xe2\x80\xa8\xe2\x80\xa9", 6, "\"\\u2028\\u2029\""); /* Zl, Zp */
    check_string("\xee\x80\x80", 3, "\"\\ue000\"");                    /* Co */
    check_string("\xf0\x9f\x98\x80", 4, "\"\\ud83d\\ude00\"");         /* non-BMP */
    check_string("\xc3\xa9\xe2\x82\xac\xe4\xb8\xad\xc2\xa0", 10,
                 "\"\xc3\xa9\xe2\x82\xac\xe4\xb8\xad\xc2\xa0\""); /* Ll, Sc, Lo, Zs raw */
    /* U+2E5C: assigned (Pe) in Unicode 14, unassigned in Java 17's 13.0 */
    check_string("\xe2\xb9\x9c", 3, "\"\\u2e5c\"");
    assert_false(ejson_java_char_is_raw(0x2e5c));
    assert_true(ejson_java_char_is_raw(0x2e52));
    assert_false(ejson_java_char_is_raw(0xd800));
}

/* /ejson/string/invalid_utf8_replaced_and_counted (JDK 17 String decoding) */
static void test_invalid_utf8(void **state)
{
    (void)state;
    uint64_t before = ejson_invalid_utf8_count();
    check_string("a\xff"
                 "b",
                 3,
                 "\"a\xef\xbf\xbd"
                 "b\"");
    assert_int_equal(ejson_invalid_utf8_count() - before, 1);
    check_string("\xed\xa0\x80", 3, "\"\xef\xbf\xbd\"");         /* encoded surrogate: one U+FFFD */
    check_string("\xc0\x80", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\""); /* overlong: two */
    check_string("x\xe1\x80", 3, "\"x\xef\xbf\xbd\"");           /* truncated at end: one */
    check_string("\xf0\x90\x80"
                 "A",
                 4,
                 "\"\xef\xbf\xbd"
                 "A\"");
    check_string("\xf4\x90\x80\x80", 4,
                 "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""); /* > U+10FFFF */
    assert_int_equal(ejson_invalid_utf8_count() - before, 1 + 1 + 2 + 1 + 1 + 4);
}

static char *render(const bson_t *doc, enum ejson_mode mode)
{
    struct ejson_buf buf = {0};
    ejson_write_document(&buf, doc, mode, EJSON_SEP_COMPACT);
    size_t n;
    char *s = ejson_buf_steal(&buf, &n);
    ejson_buf_free(&buf);
    return s;
}

/* /ejson/names/repeated_keep_first_position_last_value (BsonDocument is a
 * map: debezium-format.md §2, ejson.h) */
static void test_repeated_names(void **state)
{
    (void)state;
    bson_t *doc = bson_new();
    BSON_APPEND_INT32(doc, "_id", 1);
    BSON_APPEND_INT32(doc, "a", 1);
    BSON_APPEND_UTF8(doc, "b", "x");
    BSON_APPEND_INT64(doc, "a", 3);
    BSON_APPEND_INT32(doc, "_id", 2);
    bson_t sub;
    BSON_APPEND_DOCUMENT_BEGIN(doc, "s", &sub);
    BSON_APPEND_INT32(&sub, "k", 1);
    BSON_APPEND_INT32(&sub, "k", 2);
    bson_append_document_end(doc, &sub);
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(doc, "arr", &arr);
    BSON_APPEND_INT32(&arr, "0", 7);
    BSON_APPEND_INT32(&arr, "0", 8); /* array element names are not names */
    bson_append_array_end(doc, &arr);
    char *s = render(doc, EJSON_STRICT);
    assert_string_equal(
        s, "{\"_id\": 2,\"a\": {\"$numberLong\": \"3\"},\"b\": \"x\",\"s\": {\"k\": 2},"
           "\"arr\": [7,8]}");
    free(s);
    struct ejson_buf buf = {0};
    assert_true(ejson_write_key(&buf, doc));
    ejson_buf_append(&buf, "", 1);
    assert_string_equal(buf.data, "2");
    ejson_buf_free(&buf);
    bson_destroy(doc);

    /* Names with different bytes that Java decodes to the same string (each
     * invalid sequence one U+FFFD) are one map entry as well. */
    doc = bson_new();
    assert_true(bson_append_int32(doc, "x\xffy", 3, 1));
    BSON_APPEND_INT32(doc, "b", 2);
    assert_true(bson_append_int32(doc, "x\xed\xa0\x80y", 5, 3));
    s = render(doc, EJSON_STRICT);
    assert_string_equal(s, "{\"x\xef\xbf\xbdy\": 3,\"b\": 2}");
    free(s);
    bson_destroy(doc);

    /* A wide document: 3000 names, every third one repeated later, so the
     * name table grows and the rewrite path runs. */
    doc = bson_new();
    char key[16], expected_part[64];
    struct ejson_buf want = {0};
    ejson_buf_append(&want, "{", 1);
    for (int i = 0; i < 3000; i++) {
        snprintf(key, sizeof key, "n%d", i);
        BSON_APPEND_INT32(doc, key, i);
    }
    for (int i = 0; i < 3000; i += 3) {
        snprintf(key, sizeof key, "n%d", i);
        BSON_APPEND_INT32(doc, key, -i);
    }
    for (int i = 0; i < 3000; i++) {
        int n = snprintf(expected_part, sizeof expected_part, "%s\"n%d\": %d", i ? "," : "", i,
                         i % 3 == 0 ? -i : i);
        ejson_buf_append(&want, expected_part, (size_t)n);
    }
    ejson_buf_append(&want, "}", 2);
    s = render(doc, EJSON_RELAXED);
    assert_string_equal(s, want.data);
    free(s);
    ejson_buf_free(&want);
    bson_destroy(doc);
}

/* /ejson/buffer/steady_state_does_not_grow */
static void test_buffer_reuse(void **state)
{
    (void)state;
    bson_t *doc = BCON_NEW("a", BCON_UTF8("some text"), "b", "[", BCON_DOUBLE(1.5), BCON_INT64(7),
                           "]", "c", "{", "d", BCON_DATE_TIME(1694627139123), "}");
    struct ejson_buf buf = {0};
    ejson_write_document(&buf, doc, EJSON_STRICT, EJSON_SEP_COMPACT);
    size_t len = buf.len;
    char *data = buf.data;
    size_t cap = buf.cap;
    for (int i = 0; i < 1000; i++) {
        ejson_buf_reset(&buf);
        ejson_write_document(&buf, doc, EJSON_STRICT, EJSON_SEP_COMPACT);
        assert_int_equal(buf.len, len);
    }
    assert_ptr_equal(buf.data, data);
    assert_int_equal(buf.cap, cap);
    size_t n;
    char *copy = ejson_buf_steal(&buf, &n);
    assert_int_equal(n, len);
    assert_int_equal(copy[n], '\0');
    assert_memory_equal(copy, buf.data, n);
    free(copy);
    ejson_buf_free(&buf);
    assert_null(buf.data);
    bson_destroy(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_table),       cmocka_unit_test(test_key_missing),
        cmocka_unit_test(test_types_table),     cmocka_unit_test(test_extremes),
        cmocka_unit_test(test_integer_lengths), cmocka_unit_test(test_decimal128),
        cmocka_unit_test(test_worked_example),  cmocka_unit_test(test_doubles),
        cmocka_unit_test(test_escaping),        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_buffer_reuse),    cmocka_unit_test(test_repeated_names),
        cmocka_unit_test(test_canonical),
    };
    return cmocka_run_group_tests_name("ejson", tests, NULL, NULL);
}
