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

#include <stdlib.h>
#include <string.h>

#include <mongoc/mongoc.h>

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
        char *got = shard_connection_string(uri_cases[i].configured, &s, uri_cases[i].params, &err);
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

static void shard_uri_refuses_other_schemes(void **state)
{
    (void)state;
    struct shard_info s = {.name = "a", .rs = "a", .hosts = "h:1"};
    struct mcdc_error err = MCDC_ERROR_INIT;

    assert_null(shard_connection_string("http://h:1/", &s, NULL, &err));
    assert_int_equal(err.domain, MCDC_ERR_CONFIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shard_uri_table),
        cmocka_unit_test(shard_uri_refuses_other_schemes),
    };
    int rc;
    mongoc_init();
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    mongoc_cleanup();
    return rc;
}
