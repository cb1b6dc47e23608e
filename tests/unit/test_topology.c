/*
 * Unit tests for topology/shards: the per-shard connection string built from
 * the configured one (debezium-format.md §6.2), as a table of inputs with the
 * expected string; each result is also parsed with libmongoc's own URI
 * parser. Reading config.shards is covered end to end by
 * tests/integration/test_sharded.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mongoc/mongoc.h>

#include "topology/chunks.h"
#include "topology/gate.h"
#include "topology/primary.h"
#include "topology/shards.h"

struct uri_case {
    const char *configured;
    const char *params;
    const char *want;
};

static const struct uri_case uri_cases[] = {
    /* a mongos seed: hosts replaced, replicaSet added */
    {"mongodb://mongos1:27017,mongos2:27017/", NULL,
     "mongodb://s1a:27018,s1b:27018/?replicaSet=shard01rs"},
    /* credentials, database and options carried over; seed-only options dropped */
    {"mongodb://u%40x:p%3Aw@cfg1:27019/admin?replicaSet=configRepl&authSource=admin&"
     "directConnection=false&tls=true",
     NULL,
     "mongodb://u%40x:p%3Aw@s1a:27018,s1b:27018/admin?authSource=admin&tls=true&"
     "replicaSet=shard01rs"},
    /* shard params appended last (a leading '?' ignored) */
    {"mongodb://m:27017/?readPreference=secondaryPreferred", "?authSource=shards&tls=false",
     "mongodb://s1a:27018,s1b:27018/?readPreference=secondaryPreferred&replicaSet=shard01rs&"
     "authSource=shards&tls=false"},
    /* SRV implies TLS; SRV-only options dropped */
    {"mongodb+srv://u:p@cluster.example.com/?srvMaxHosts=2&appName=x", "",
     "mongodb://u:p@s1a:27018,s1b:27018/?appName=x&tls=true&replicaSet=shard01rs"},
    {"mongodb+srv://cluster.example.com/?ssl=false", NULL,
     "mongodb://s1a:27018,s1b:27018/?ssl=false&replicaSet=shard01rs"},
};

static void shard_uri_table(void **state)
{
    (void)state;
    struct shard_info s = {.name = "shard01", .rs = "shard01rs", .hosts = "s1a:27018,s1b:27018"};

    for (size_t i = 0; i < sizeof uri_cases / sizeof uri_cases[0]; i++) {
        struct mcdc_error err = MCDC_ERROR_INIT;
        bson_error_t error;
        char *got = shard_connection_string(uri_cases[i].configured, &s, uri_cases[i].params, true,
                                            &err);
        mongoc_uri_t *uri;

        assert_non_null(got);
        assert_string_equal(got, uri_cases[i].want);
        uri = mongoc_uri_new_with_error(got, &error);
        assert_non_null(uri);
        assert_string_equal(mongoc_uri_get_replica_set(uri), "shard01rs");
        mongoc_uri_destroy(uri);
        free(got);
    }
}

/* mongodb.members.auto.discover false: one address is used directly
 * (directConnection, no replicaSet); several keep replicaSet. */
static void shard_uri_as_given(void **state)
{
    (void)state;
    struct shard_info one = {.name = "shard01", .rs = "shard01rs", .hosts = "10.0.0.5:27018"};
    struct shard_info two = {.name = "shard01", .rs = "shard01rs", .hosts = "a:1,b:2"};
    struct mcdc_error err = MCDC_ERROR_INIT;
    bson_error_t error;
    char *got = shard_connection_string("mongodb://u:p@m:27017/?replicaSet=x&tls=true", &one,
                                        NULL, false, &err);
    mongoc_uri_t *uri;

    assert_non_null(got);
    assert_string_equal(got, "mongodb://u:p@10.0.0.5:27018/?tls=true&directConnection=true");
    uri = mongoc_uri_new_with_error(got, &error);
    assert_non_null(uri);
    assert_null(mongoc_uri_get_replica_set(uri));
    assert_true(mongoc_uri_get_option_as_bool(uri, MONGOC_URI_DIRECTCONNECTION, false));
    mongoc_uri_destroy(uri);
    free(got);
    got = shard_connection_string("mongodb://m:27017/", &two, NULL, false, &err);
    assert_string_equal(got, "mongodb://a:1,b:2/?replicaSet=shard01rs");
    free(got);
}

/* The rule for addresses used as given (topology/primary.h): auto.discover
 * false and more than one address; the host list of a mongodb:// string. */
static void primary_rule_and_hosts(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    char *hosts;

    memset(&cfg, 0, sizeof cfg);
    cfg.members_auto_discover = true;
    assert_false(primary_as_given(&cfg, "a:1,b:2"));
    cfg.members_auto_discover = false;
    assert_true(primary_as_given(&cfg, "a:1,b:2"));
    assert_false(primary_as_given(&cfg, "a:1"));
    assert_false(primary_as_given(&cfg, NULL));
    hosts = primary_uri_hosts("mongodb://u:p@a:1,b:2,c:3/db?replicaSet=rs0");
    assert_string_equal(hosts, "a:1,b:2,c:3");
    free(hosts);
    hosts = primary_uri_hosts("mongodb://a/");
    assert_string_equal(hosts, "a:27017");
    free(hosts);
    assert_null(primary_uri_hosts("mongodb+srv://cluster.example.com/"));
}

static void shard_uri_refuses_other_schemes(void **state)
{
    (void)state;
    struct shard_info s = {.name = "a", .rs = "a", .hosts = "h:1"};
    struct mcdc_error err = MCDC_ERROR_INIT;

    assert_null(shard_connection_string("http://h:1/", &s, NULL, true, &err));
    assert_int_equal(err.domain, MCDC_ERR_CONFIG);
}

/* BSON order of chunk bounds: MinKey < null < numbers < strings < ObjectId <
 * bool < date < MaxKey; numbers compare across int32/int64/double. */
static void compare_follows_bson_order(void **state)
{
    (void)state;
    bson_t *d = BCON_NEW("0", BCON_MINKEY, "1", BCON_NULL, "2", BCON_INT32(-5), "3",
                         BCON_DOUBLE(2.5), "4", BCON_INT64(3), "5", BCON_UTF8("a"), "6",
                         BCON_UTF8("b"), "7", BCON_BOOL(false), "8", BCON_DATE_TIME(1), "9",
                         BCON_MAXKEY);
    bson_iter_t a, b;
    for (int i = 0; i < 10; i++) {
        for (int j = 0; j < 10; j++) {
            char ka[4], kb[4];
            snprintf(ka, sizeof ka, "%d", i);
            snprintf(kb, sizeof kb, "%d", j);
            assert_true(bson_iter_init_find(&a, d, ka));
            assert_true(bson_iter_init_find(&b, d, kb));
            int c = gate_compare_values(&a, &b);
            assert_int_equal(c < 0 ? -1 : c > 0 ? 1 : 0, i < j ? -1 : i > j ? 1 : 0);
        }
    }
    bson_destroy(d);
    bson_t *x = BCON_NEW("a", BCON_INT32(3), "b", BCON_DOUBLE(3.0));
    assert_true(bson_iter_init_find(&a, x, "a"));
    assert_true(bson_iter_init_find(&b, x, "b"));
    assert_int_equal(gate_compare_values(&a, &b), 0);
    bson_destroy(x);
}

/* The chunk filter of a compound key: one $and of a lower and an upper
 * lexicographic bound per range, inside one $expr $or. */
static void range_filter_shape(void **state)
{
    (void)state;
    bson_t *pattern = BCON_NEW("region", BCON_INT32(1), "_id", BCON_INT32(1));
    bson_t *lo = BCON_NEW("region", BCON_UTF8("EU"), "_id", BCON_MINKEY);
    bson_t *hi = BCON_NEW("region", BCON_UTF8("US"), "_id", BCON_MINKEY);
    const bson_t *mins[1] = {lo}, *maxs[1] = {hi};
    bson_t out = BSON_INITIALIZER;
    bson_iter_t it, sub;
    char *json;

    chunks_range_filter(pattern, mins, maxs, 1, &out);
    assert_true(bson_iter_init(&it, &out));
    assert_true(bson_iter_find_descendant(&it, "$expr.$or.0.$and.0.$or.0.$gt.0.$ifNull.0", &sub));
    assert_string_equal(bson_iter_utf8(&sub, NULL), "$region");
    json = bson_as_canonical_extended_json(&out, NULL);
    assert_non_null(strstr(json, "\"$lt\""));
    assert_non_null(strstr(json, "\"$_id\""));
    bson_free(json);
    bson_destroy(&out);

    bson_init(&out);
    chunks_range_filter(pattern, mins, maxs, 0, &out); /* owns nothing */
    assert_true(bson_iter_init(&it, &out));
    assert_true(bson_iter_find_descendant(&it, "$expr.$or", &sub));
    assert_true(BSON_ITER_HOLDS_ARRAY(&sub));
    {
        bson_iter_t elems;
        assert_true(bson_iter_recurse(&sub, &elems));
        assert_false(bson_iter_next(&elems));
    }
    bson_destroy(&out);
    bson_destroy(pattern);
    bson_destroy(lo);
    bson_destroy(hi);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shard_uri_table),
        cmocka_unit_test(shard_uri_as_given),
        cmocka_unit_test(shard_uri_refuses_other_schemes),
        cmocka_unit_test(primary_rule_and_hosts),
        cmocka_unit_test(compare_follows_bson_order),
        cmocka_unit_test(range_filter_shape),
    };
    int rc;
    mongoc_init();
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    mongoc_cleanup();
    return rc;
}
