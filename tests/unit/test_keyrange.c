/* Unit tests for snapshot/keyrange: type brackets in MongoDB's sort order,
 * range filters, chunk options, BSON-order comparison (numbers by value across
 * types) and the extended-JSON round trip of keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "encode/ejson.h"
#include "snapshot/keyrange.h"
#include "snapshot/split.h"

/* A value parsed from extended JSON {"v": ...}; kept in a pool freed at the end. */
static bson_t *pool[256];
static size_t npool;

static bson_value_t val(const char *json_value)
{
    char buf[1024];
    bson_error_t error;
    bson_iter_t it;
    bson_t *doc;
    snprintf(buf, sizeof buf, "{\"v\": %s}", json_value);
    doc = bson_new_from_json((const uint8_t *)buf, -1, &error);
    if (doc == NULL)
        fail_msg("bad test JSON %s: %s", buf, error.message);
    assert_true(npool < 256);
    pool[npool++] = doc;
    assert_true(bson_iter_init_find(&it, doc, "v"));
    return *bson_iter_value(&it);
}

static void pool_free(void)
{
    for (size_t i = 0; i < npool; i++)
        bson_destroy(pool[i]);
    npool = 0;
}

/* doc as relaxed extended JSON from the project's writer (encode/ejson.h):
 * text that does not depend on the libbson version. Caller frees. */
static char *relaxed(const bson_t *doc)
{
    struct ejson_buf b = {0};
    ejson_write_document(&b, doc, EJSON_RELAXED, EJSON_SEP_DEFAULT);
    char *out = ejson_buf_steal(&b, NULL);
    ejson_buf_free(&b);
    return out;
}

/* json with the spaces between tokens removed (those inside strings kept):
 * the expected texts below compare as JSON tokens, whatever spacing a
 * writer uses (libbson's changed between versions). Caller frees. */
static char *tokens(const char *json)
{
    char *out = malloc(strlen(json) + 1), *o = out;
    bool in_str = false;
    assert_non_null(out);
    for (const char *p = json; *p; p++) {
        if (in_str) {
            *o++ = *p;
            if (*p == '\\' && p[1])
                *o++ = *++p;
            else if (*p == '"')
                in_str = false;
        } else if (*p == '"') {
            in_str = true;
            *o++ = *p;
        } else if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

static void brackets_of_every_type(void **state)
{
    (void)state;
    struct {
        const char *json;
        enum keyrange_bracket b;
    } cases[] = {
        {"{\"$minKey\": 1}", KEYRANGE_MINKEY},
        {"{\"$undefined\": true}", KEYRANGE_UNDEFINED},
        {"null", KEYRANGE_NULL},
        {"{\"$numberDouble\": \"NaN\"}", KEYRANGE_NAN},
        {"{\"$numberDecimal\": \"NaN\"}", KEYRANGE_NAN},
        {"{\"$numberInt\": \"1\"}", KEYRANGE_NUMBER},
        {"{\"$numberLong\": \"1\"}", KEYRANGE_NUMBER},
        {"{\"$numberDouble\": \"-Infinity\"}", KEYRANGE_NUMBER},
        {"{\"$numberDecimal\": \"1.5\"}", KEYRANGE_NUMBER},
        {"\"a\"", KEYRANGE_STRING},
        {"{\"$symbol\": \"a\"}", KEYRANGE_STRING},
        {"{\"a\": 1}", KEYRANGE_OBJECT},
        {"[1]", KEYRANGE_ARRAY},
        {"{\"$binary\": {\"base64\": \"AA==\", \"subType\": \"04\"}}", KEYRANGE_BINARY},
        {"{\"$oid\": \"5f0000000000000000000001\"}", KEYRANGE_OBJECTID},
        {"true", KEYRANGE_BOOL},
        {"{\"$date\": {\"$numberLong\": \"0\"}}", KEYRANGE_DATE},
        {"{\"$timestamp\": {\"t\": 1, \"i\": 2}}", KEYRANGE_TIMESTAMP},
        {"{\"$regularExpression\": {\"pattern\": \"a\", \"options\": \"i\"}}", KEYRANGE_REGEX},
        {"{\"$dbPointer\": {\"$ref\": \"c\", \"$id\": {\"$oid\": \"5f0000000000000000000001\"}}}",
         KEYRANGE_DBPOINTER},
        {"{\"$code\": \"f()\"}", KEYRANGE_CODE},
        {"{\"$code\": \"f()\", \"$scope\": {\"x\": 1}}", KEYRANGE_CODEWSCOPE},
        {"{\"$maxKey\": 1}", KEYRANGE_MAXKEY},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bson_value_t v = val(cases[i].json);
        enum keyrange_bracket back;
        if (keyrange_bracket_of(&v) != cases[i].b)
            fail_msg("%s: bracket %s, want %s", cases[i].json,
                     keyrange_bracket_name(keyrange_bracket_of(&v)),
                     keyrange_bracket_name(cases[i].b));
        assert_true(keyrange_bracket_from_name(keyrange_bracket_name(cases[i].b), &back));
        assert_int_equal(back, cases[i].b);
    }
    assert_true(keyrange_bracket_singleton(KEYRANGE_NULL));
    assert_true(keyrange_bracket_singleton(KEYRANGE_NAN));
    assert_false(keyrange_bracket_singleton(KEYRANGE_NUMBER));
    pool_free();
}

/* Values in strictly increasing BSON order: every pair must compare so. */
static const char *const ordered[] = {
    "{\"$minKey\": 1}",
    "null",
    "{\"$numberDouble\": \"NaN\"}",
    "{\"$numberDouble\": \"-Infinity\"}",
    "{\"$numberDecimal\": \"-1E+400\"}",
    "{\"$numberLong\": \"-9223372036854775808\"}",
    "{\"$numberInt\": \"-5\"}",
    "{\"$numberDouble\": \"-0.5\"}",
    "{\"$numberInt\": \"0\"}",
    "{\"$numberDecimal\": \"1E-6000\"}",
    "{\"$numberDecimal\": \"0.1\"}",
    "{\"$numberDouble\": \"0.1\"}", /* the double is 0.1000000000000000055... */
    "{\"$numberDecimal\": \"0.10000000000000001\"}",
    "{\"$numberInt\": \"1\"}",
    "{\"$numberDecimal\": \"1.000000000000000000000000000000001\"}",
    "{\"$numberDouble\": \"1.5\"}",
    "{\"$numberLong\": \"9007199254740992\"}",
    "{\"$numberLong\": \"9007199254740993\"}", /* 2^53 + 1: no double has it */
    "{\"$numberDouble\": \"9007199254740994\"}",
    "{\"$numberLong\": \"9223372036854775807\"}",
    "{\"$numberDouble\": \"9223372036854775808\"}",
    "{\"$numberDecimal\": \"1E+6000\"}",
    "{\"$numberDouble\": \"Infinity\"}",
    "\"\"",
    "\"A\"",
    "{\"$symbol\": \"B\"}",
    "\"a\"",
    "\"ab\"",
    "\"\xc3\xa9\"",
    "{}",
    "{\"a\": 1}",
    "{\"a\": 1, \"b\": 1}",
    "{\"a\": 2}",
    "{\"b\": 0}",
    "{\"a\": \"x\"}", /* element types first, then names: number < string */
    "[]",
    "[1, 2]",
    "[2]",
    "{\"$binary\": {\"base64\": \"\", \"subType\": \"00\"}}",
    "{\"$binary\": {\"base64\": \"/w==\", \"subType\": \"00\"}}",
    "{\"$binary\": {\"base64\": \"AA==\", \"subType\": \"80\"}}",
    "{\"$binary\": {\"base64\": \"AAA=\", \"subType\": \"00\"}}",
    "{\"$oid\": \"000000000000000000000001\"}",
    "{\"$oid\": \"ff0000000000000000000000\"}",
    "false",
    "true",
    "{\"$date\": {\"$numberLong\": \"-1\"}}",
    "{\"$date\": {\"$numberLong\": \"1\"}}",
    "{\"$timestamp\": {\"t\": 1, \"i\": 9}}",
    "{\"$timestamp\": {\"t\": 4294967295, \"i\": 0}}",
    "{\"$regularExpression\": {\"pattern\": \"a\", \"options\": \"\"}}",
    "{\"$regularExpression\": {\"pattern\": \"a\", \"options\": \"i\"}}",
    "{\"$regularExpression\": {\"pattern\": \"b\", \"options\": \"\"}}",
    "{\"$code\": \"a\"}",
    "{\"$code\": \"a\", \"$scope\": {}}",
    "{\"$maxKey\": 1}",
};

static void compare_follows_bson_order(void **state)
{
    (void)state;
    size_t n = sizeof ordered / sizeof ordered[0];
    bson_value_t v[sizeof ordered / sizeof ordered[0]];
    for (size_t i = 0; i < n; i++)
        v[i] = val(ordered[i]);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            int c = keyrange_compare(&v[i], &v[j]);
            int want = (i > j) - (i < j);
            if ((c > 0) - (c < 0) != want)
                fail_msg("compare(%s, %s) = %d, want %d", ordered[i], ordered[j], c, want);
        }
    }
    pool_free();
}

static void compare_numbers_equal_across_types(void **state)
{
    (void)state;
    const char *ones[] = {"{\"$numberInt\": \"1\"}", "{\"$numberLong\": \"1\"}",
                          "{\"$numberDouble\": \"1.0\"}", "{\"$numberDecimal\": \"1.00\"}",
                          "{\"$numberDecimal\": \"0.1E+1\"}"};
    const char *zeros[] = {"{\"$numberInt\": \"0\"}", "{\"$numberDouble\": \"-0.0\"}",
                           "{\"$numberDecimal\": \"-0\"}", "{\"$numberDecimal\": \"0E-30\"}"};
    const char *nans[] = {"{\"$numberDouble\": \"NaN\"}", "{\"$numberDecimal\": \"NaN\"}"};
    const char *infs[] = {"{\"$numberDouble\": \"Infinity\"}",
                          "{\"$numberDecimal\": \"Infinity\"}"};
    const char *const *groups[] = {ones, zeros, nans, infs};
    size_t sizes[] = {5, 4, 2, 2};
    for (size_t g = 0; g < 4; g++) {
        for (size_t i = 0; i < sizes[g]; i++) {
            for (size_t j = 0; j < sizes[g]; j++) {
                bson_value_t a = val(groups[g][i]), b = val(groups[g][j]);
                if (keyrange_compare(&a, &b) != 0)
                    fail_msg("%s != %s", groups[g][i], groups[g][j]);
            }
        }
    }
    pool_free();
}

static char *filter_json(enum keyrange_bracket b, const char *after, const char *upto,
                         const char *extra)
{
    bson_t out = BSON_INITIALIZER, *ex = NULL;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bson_value_t a, u;
    bson_error_t error;
    char *json;
    if (after)
        a = val(after);
    if (upto)
        u = val(upto);
    if (extra)
        ex = bson_new_from_json((const uint8_t *)extra, -1, &error);
    assert_true(keyrange_filter(b, after ? &a : NULL, upto ? &u : NULL, ex, &out, &err));
    json = relaxed(&out);
    bson_destroy(&out);
    if (ex)
        bson_destroy(ex);
    return json;
}

static void expect_filter(enum keyrange_bracket b, const char *after, const char *upto,
                          const char *extra, const char *want)
{
    char *got = filter_json(b, after, upto, extra), *g = tokens(got), *w = tokens(want);
    if (strcmp(g, w) != 0)
        fail_msg("filter\n got %s\nwant %s", got, want);
    free(got);
    free(g);
    free(w);
}

static void filters_name_the_bracket(void **state)
{
    (void)state;
    expect_filter(KEYRANGE_NUMBER, NULL, "{\"$numberInt\": \"7\"}", NULL,
                  "{ \"_id\" : { \"$type\" : \"number\", \"$gte\" : { \"$numberDouble\" : "
                  "\"-Infinity\" }, \"$lte\" : 7 } }");
    expect_filter(KEYRANGE_NUMBER, "{\"$numberLong\": \"3\"}", NULL, NULL,
                  "{ \"_id\" : { \"$type\" : \"number\", \"$gt\" : 3 } }");
    expect_filter(
        KEYRANGE_STRING, "\"a\"", "\"z\"", NULL,
        "{ \"_id\" : { \"$type\" : [ \"string\", \"symbol\" ], \"$gt\" : \"a\", \"$lte\" : "
        "\"z\" } }");
    expect_filter(
        KEYRANGE_NAN, NULL, NULL, NULL,
        "{ \"_id\" : { \"$type\" : \"number\", \"$eq\" : { \"$numberDouble\" : \"NaN\" } } }");
    expect_filter(KEYRANGE_NULL, NULL, NULL, NULL, "{ \"_id\" : { \"$type\" : \"null\" } }");
    expect_filter(KEYRANGE_BINARY, NULL, NULL, NULL, "{ \"_id\" : { \"$type\" : \"binData\" } }");
    expect_filter(KEYRANGE_OBJECTID, "{\"$oid\": \"000000000000000000000001\"}", NULL,
                  "{\"x\": {\"$gt\": 1}}",
                  "{ \"$and\" : [ { \"_id\" : { \"$type\" : \"objectId\", \"$gt\" : { \"$oid\" : "
                  "\"000000000000000000000001\" } } }, { \"x\" : { \"$gt\" : 1 } } ] }");
    expect_filter(KEYRANGE_DATE, NULL, NULL, "{}", "{ \"_id\" : { \"$type\" : \"date\" } }");
    /* singleton brackets ignore bounds */
    expect_filter(KEYRANGE_MAXKEY, "{\"$maxKey\": 1}", "{\"$maxKey\": 1}", NULL,
                  "{ \"_id\" : { \"$type\" : \"maxKey\" } }");
    pool_free();
}

static void filter_refuses_a_bound_of_another_bracket(void **state)
{
    (void)state;
    bson_t out = BSON_INITIALIZER;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bson_value_t s = val("\"a\""), nan = val("{\"$numberDouble\": \"NaN\"}");
    assert_false(keyrange_filter(KEYRANGE_NUMBER, &s, NULL, NULL, &out, &err));
    assert_int_equal(err.domain, MCDC_ERR_INTERNAL);
    assert_non_null(strstr(err.msg, "number"));
    assert_false(keyrange_filter(KEYRANGE_NUMBER, NULL, &nan, NULL, &out, &err));
    assert_false(keyrange_filter(KEYRANGE_BRACKET_COUNT, NULL, NULL, NULL, &out, &err));
    assert_true(bson_empty(&out));
    bson_destroy(&out);
    pool_free();
}

static void chunk_and_max_options(void **state)
{
    (void)state;
    bson_t o = BSON_INITIALIZER;
    char *json;
    keyrange_chunk_opts(1024, true, &o);
    json = relaxed(&o);
    assert_string_equal(json,
                        "{\"sort\": {\"_id\": 1}, \"projection\": {\"_id\": 1}, \"limit\": 1024}");
    free(json);
    bson_reinit(&o);
    keyrange_chunk_opts(5, false, &o);
    json = relaxed(&o);
    assert_string_equal(json, "{\"sort\": {\"_id\": 1}, \"limit\": 5}");
    free(json);
    bson_reinit(&o);
    keyrange_max_opts(&o);
    json = relaxed(&o);
    assert_string_equal(json,
                        "{\"sort\": {\"_id\": -1}, \"projection\": {\"_id\": 1}, \"limit\": 1}");
    free(json);
    bson_destroy(&o);
}

static void json_round_trip_keeps_type_and_value(void **state)
{
    (void)state;
    size_t n = sizeof ordered / sizeof ordered[0];
    for (size_t i = 0; i < n; i++) {
        bson_value_t v = val(ordered[i]), back;
        struct mcdc_error err = MCDC_ERROR_INIT;
        char *json = keyrange_key_to_json(&v);
        assert_non_null(strstr(json, "\"_id\""));
        if (!keyrange_key_from_json(json, &back, &err))
            fail_msg("%s: %s", json, err.msg);
        assert_int_equal(back.value_type, v.value_type);
        if (keyrange_compare(&v, &back) != 0)
            fail_msg("round trip changed %s (%s)", ordered[i], json);
        if (v.value_type == BSON_TYPE_DOUBLE && !isnan(v.value.v_double))
            assert_memory_equal(&v.value.v_double, &back.value.v_double, sizeof(double));
        bson_value_destroy(&back);
        free(json);
    }
    /* -0.0 keeps its sign, binary subtypes survive */
    {
        bson_value_t z = val("{\"$numberDouble\": \"-0.0\"}"), back;
        struct mcdc_error err = MCDC_ERROR_INIT;
        char *json = keyrange_key_to_json(&z);
        assert_true(keyrange_key_from_json(json, &back, &err));
        assert_true(signbit(back.value.v_double));
        free(json);
        bson_value_destroy(&back);
    }
    pool_free();
}

static void json_refuses_bad_input(void **state)
{
    (void)state;
    bson_value_t v;
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_false(keyrange_key_from_json("{\"_id\": ", &v, &err));
    assert_int_equal(err.domain, MCDC_ERR_CONFIG);
    assert_false(keyrange_key_from_json("{}", &v, &err));
    assert_non_null(strstr(err.msg, "empty"));
    assert_false(keyrange_key_from_json("{\"a\": 1, \"b\": 2}", &v, &err));
    assert_non_null(strstr(err.msg, "more than one"));
}

static char *span_json(const char *after, const char *upto, const char *extra)
{
    bson_t out = BSON_INITIALIZER, *ex = NULL;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bson_value_t a, u;
    bson_error_t error;
    char *json;
    if (after)
        a = val(after);
    if (upto)
        u = val(upto);
    if (extra)
        ex = bson_new_from_json((const uint8_t *)extra, -1, &error);
    assert_true(keyrange_span_filter(after ? &a : NULL, upto ? &u : NULL, ex, &out, &err));
    json = relaxed(&out);
    bson_destroy(&out);
    if (ex)
        bson_destroy(ex);
    return json;
}

static void expect_span(const char *after, const char *upto, const char *extra, const char *want)
{
    char *got = span_json(after, upto, extra), *g = tokens(got), *w = tokens(want);
    if (strcmp(g, w) != 0)
        fail_msg("span (%s, %s]\n got %s\nwant %s", after ? after : "-", upto ? upto : "-", got,
                 want);
    free(got);
    free(g);
    free(w);
}

static void spans_cross_brackets(void **state)
{
    (void)state;
    char *all = span_json(NULL, NULL, NULL);
    /* unbounded: one clause per bracket, MinKey to MaxKey */
    assert_non_null(strstr(all, "\"$or\": [{\"_id\": {\"$type\": \"minKey\"}}"));
    assert_non_null(strstr(all, "{\"_id\": {\"$type\": \"maxKey\"}}]}"));
    {
        int n = 0;
        for (const char *p = all; (p = strstr(p, "\"_id\"")) != NULL; p++)
            n++;
        assert_int_equal(n, KEYRANGE_BRACKET_COUNT);
    }
    free(all);
    /* inside one bracket: that bracket's range alone */
    expect_span("{\"$numberInt\": \"5\"}", "{\"$numberInt\": \"9\"}", NULL,
                "{ \"_id\" : { \"$type\" : \"number\", \"$gt\" : 5, \"$lte\" : 9 } }");
    /* after a singleton (null): from the next bracket; NaN whole, numbers whole, strings to "a" */
    expect_span("null", "\"a\"", NULL,
                "{ \"$or\" : [ { \"_id\" : { \"$type\" : \"number\", \"$eq\" : { "
                "\"$numberDouble\" : \"NaN\" } } }, { \"_id\" : { \"$type\" : \"number\", "
                "\"$gte\" : { \"$numberDouble\" : \"-Infinity\" } } }, { \"_id\" : { "
                "\"$type\" : [ \"string\", \"symbol\" ], \"$lte\" : \"a\" } } ] }");
    /* up to NaN: the NaN bracket whole, nothing of the numbers */
    expect_span("{\"$minKey\": 1}", "{\"$numberDouble\": \"NaN\"}", NULL,
                "{ \"$or\" : [ { \"_id\" : { \"$type\" : \"undefined\" } }, { \"_id\" : { "
                "\"$type\" : \"null\" } }, { \"_id\" : { \"$type\" : \"number\", \"$eq\" : "
                "{ \"$numberDouble\" : \"NaN\" } } } ] }");
    /* empty spans */
    expect_span("{\"$maxKey\": 1}", NULL, NULL, "{ \"_id\" : { \"$in\" : [  ] } }");
    expect_span("\"b\"", "\"a\"", NULL, "{ \"_id\" : { \"$in\" : [  ] } }");
    expect_span("{\"$numberInt\": \"1\"}", "{\"$numberDouble\": \"1.0\"}", NULL,
                "{ \"_id\" : { \"$in\" : [  ] } }");
    /* with the collection's filter */
    expect_span("{\"$numberInt\": \"5\"}", "{\"$numberInt\": \"9\"}", "{\"x\": 1}",
                "{ \"$and\" : [ { \"_id\" : { \"$type\" : \"number\", \"$gt\" : 5, "
                "\"$lte\" : 9 } }, { \"x\" : 1 } ] }");
    pool_free();
}

static void split_parts_by_size_and_threads(void **state)
{
    (void)state;
    assert_int_equal(split_parts(500000, 100000, 1), 1); /* one thread: never */
    assert_int_equal(split_parts(500000, 0, 4), 1);      /* disabled */
    assert_int_equal(split_parts(99999, 100000, 4), 1);  /* too small */
    assert_int_equal(split_parts(-1, 100000, 4), 1);     /* count unknown */
    assert_int_equal(split_parts(100000, 100000, 4), 2); /* at the threshold: two */
    assert_int_equal(split_parts(250000, 100000, 4), 2);
    assert_int_equal(split_parts(500000, 100000, 4), 4); /* capped by the threads */
    assert_int_equal(split_parts(10000000, 100000, 8), 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(brackets_of_every_type),
        cmocka_unit_test(compare_follows_bson_order),
        cmocka_unit_test(compare_numbers_equal_across_types),
        cmocka_unit_test(filters_name_the_bracket),
        cmocka_unit_test(filter_refuses_a_bound_of_another_bracket),
        cmocka_unit_test(chunk_and_max_options),
        cmocka_unit_test(json_round_trip_keeps_type_and_value),
        cmocka_unit_test(json_refuses_bad_input),
        cmocka_unit_test(spans_cross_brackets),
        cmocka_unit_test(split_parts_by_size_and_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
