/* Unit tests for the server-side namespace filters of encode/filters.c: a long
 * include or exclude list becomes several regular expressions, each within
 * the server's 16384-byte pattern limit (MongoDB refuses a longer one: 51091
 * in a query, 51111 in $regexMatch), that together select what the one
 * alternation did; an entry too long on its own leaves its list to the
 * client-side filter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/xalloc.h"
#include "encode/encode.h"

#define SERVER_REGEX_MAX 16384
#define N_ENTRIES 10000

static void cfg_init(struct mcdc_config *c)
{
    memset(c, 0, sizeof *c);
    c->topic_prefix = "fulfillment";
    c->dialect = MCDC_DIALECT_3_X;
    c->capture_mode = MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL;
    c->tombstones_on_delete = true;
    c->schema_name_adjust = MCDC_SCHEMA_ADJUST_NONE;
    c->topic_delimiter = ".";
    c->topic_transaction = "transaction";
    c->topic_heartbeat_prefix = "__debezium-heartbeat";
    c->debezium_version = "3.6.1.Final";
}

struct found {
    char *re[64];
    size_t n;
};

/* Every regular expression in doc: BSON regex values and "regex" strings
 * (the $regexMatch argument). */
static void collect(const bson_t *doc, struct found *f)
{
    bson_iter_t it;
    assert_true(bson_iter_init(&it, doc));
    while (bson_iter_next(&it)) {
        const char *pat = NULL, *opts;
        if (BSON_ITER_HOLDS_REGEX(&it))
            pat = bson_iter_regex(&it, &opts);
        else if (BSON_ITER_HOLDS_UTF8(&it) && strcmp(bson_iter_key(&it), "regex") == 0)
            pat = bson_iter_utf8(&it, NULL);
        if (pat && strstr(pat, "admin|config|local") == NULL) {
            assert_true(f->n < 64);
            f->re[f->n++] = xstrdup(pat);
        }
        if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
            const uint8_t *data;
            uint32_t len;
            bson_t sub;
            if (BSON_ITER_HOLDS_DOCUMENT(&it))
                bson_iter_document(&it, &len, &data);
            else
                bson_iter_array(&it, &len, &data);
            assert_true(bson_init_static(&sub, data, len));
            collect(&sub, f);
        }
    }
}

static void found_free(struct found *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->re[i]);
    f->n = 0;
}

/* How many of f's regexes match subject (caseless, as the server is asked). */
static int matching(const struct found *f, const char *subject, bool caseless)
{
    int hits = 0;
    for (size_t i = 0; i < f->n; i++) {
        int code;
        PCRE2_SIZE off;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)f->re[i], PCRE2_ZERO_TERMINATED,
                                       caseless ? PCRE2_CASELESS : 0, &code, &off, NULL);
        assert_non_null(re);
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
        if (pcre2_match(re, (PCRE2_SPTR)subject, strlen(subject), 0, 0, md, NULL) >= 0)
            hits++;
        pcre2_match_data_free(md);
        pcre2_code_free(re);
    }
    return hits;
}

/* n entries: collection regexes "shopI\.orders_I_[a-z]+" (colls) or database
 * names "tenant_I_database_I". */
static char **names(size_t n, bool colls)
{
    char **v = xcalloc(n, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        char buf[128];
        if (colls)
            snprintf(buf, sizeof buf, "shop%zu\\.orders_%zu_[a-z]+", i, i);
        else
            snprintf(buf, sizeof buf, "tenant_%zu_database_%zu", i, i);
        v[i] = xstrdup(buf);
    }
    return v;
}

static void names_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* 10,000 collection.include.list regexes (~300 KB as one alternation). */
static void long_regex_include_list_is_split(void **state)
{
    (void)state;
    char **inc = names(N_ENTRIES, true);
    struct mcdc_config cfg;
    cfg_init(&cfg);
    cfg.collection_include = (struct mcdc_strlist){inc, N_ENTRIES};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct encoder *enc = encoder_new(&cfg, &err);
    assert_non_null(enc);
    bson_t stage;
    assert_true(encoder_build_stream_match(enc, &stage, &err));
    struct found f = {.n = 0};
    collect(&stage, &f);
    assert_true(f.n > 10); /* the entries alone are ~270 KB */
    size_t alternatives = 0;
    for (size_t i = 0; i < f.n; i++) {
        assert_true(strlen(f.re[i]) <= SERVER_REGEX_MAX);
        assert_true(strncmp(f.re[i], "^(?:", 4) == 0);
        for (const char *p = f.re[i]; *p; p++)
            alternatives += strncmp(p, "(?:shop", 7) == 0;
    }
    assert_int_equal(alternatives, N_ENTRIES); /* every entry, once */
    /* Together they select what the list does: one part each. */
    assert_int_equal(matching(&f, "shop0.orders_0_abc", true), 1);
    assert_int_equal(matching(&f, "SHOP9999.Orders_9999_x", true), 1);
    assert_int_equal(matching(&f, "shop9999.orders_9998_x", true), 0);
    assert_int_equal(matching(&f, "other.orders", true), 0);
    char *json = bson_as_relaxed_extended_json(&stage, NULL);
    assert_non_null(strstr(json, "\"$or\""));
    bson_free(json);
    found_free(&f);
    bson_destroy(&stage);

    /* The same list as an exclude list: each part negated on its own. */
    cfg.collection_include = (struct mcdc_strlist){NULL, 0};
    cfg.collection_exclude = (struct mcdc_strlist){inc, N_ENTRIES};
    encoder_destroy(enc);
    enc = encoder_new(&cfg, &err);
    assert_non_null(enc);
    assert_true(encoder_build_stream_match(enc, &stage, &err));
    collect(&stage, &f);
    assert_true(f.n > 10);
    json = bson_as_relaxed_extended_json(&stage, NULL);
    size_t nots = 0;
    for (const char *p = json; (p = strstr(p, "\"$not\"")) != NULL; p++)
        nots++;
    assert_int_equal(nots, f.n);
    bson_free(json);
    found_free(&f);
    bson_destroy(&stage);
    encoder_destroy(enc);
    names_free(inc, N_ENTRIES);
}

/* database.include.list and the oplog query (literal mode: quoted names). */
static void long_lists_split_for_databases_and_the_oplog(void **state)
{
    (void)state;
    char **dbs = names(N_ENTRIES, false);
    struct mcdc_config cfg;
    cfg_init(&cfg);
    cfg.database_include = (struct mcdc_strlist){dbs, N_ENTRIES};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct encoder *enc = encoder_new(&cfg, &err);
    assert_non_null(enc);
    bson_t stage;
    assert_true(encoder_build_stream_match(enc, &stage, &err));
    struct found f = {.n = 0};
    collect(&stage, &f);
    assert_true(f.n > 10);
    for (size_t i = 0; i < f.n; i++)
        assert_true(strlen(f.re[i]) <= SERVER_REGEX_MAX);
    assert_int_equal(matching(&f, "tenant_4321_database_4321", true), 1);
    assert_int_equal(matching(&f, "tenant_4321_database_4322", true), 0);
    found_free(&f);
    bson_destroy(&stage);
    encoder_destroy(enc);

    cfg.capture_mode = MCDC_CAPTURE_OPLOG;
    cfg.dialect = MCDC_DIALECT_1_9;
    cfg.debezium_version = "1.9.8.Final";
    cfg.filters_match_mode = MCDC_FILTER_MATCH_LITERAL;
    enc = encoder_new(&cfg, &err);
    assert_non_null(enc);
    bson_t q;
    assert_true(encoder_build_oplog_query(enc, &q, &err));
    collect(&q, &f);
    assert_true(f.n > 10);
    for (size_t i = 0; i < f.n; i++)
        assert_true(strlen(f.re[i]) <= SERVER_REGEX_MAX);
    assert_int_equal(matching(&f, "tenant_7_database_7.orders", false), 1);
    assert_int_equal(matching(&f, "TENANT_7_database_7.orders", false), 0); /* literal: exact */
    found_free(&f);
    bson_destroy(&q);
    encoder_destroy(enc);
    names_free(dbs, N_ENTRIES);
}

/* An entry longer than the server takes cannot be split: its list gets no
 * server-side condition (the client-side filter still applies). */
static void an_entry_over_the_limit_is_left_to_the_client(void **state)
{
    (void)state;
    char *big = xmalloc(SERVER_REGEX_MAX + 10);
    memset(big, 'a', SERVER_REGEX_MAX + 9);
    big[0] = 'x';
    big[1] = '\\';
    big[2] = '.';
    big[SERVER_REGEX_MAX + 9] = '\0';
    char *inc[] = {"small\\.one", big};
    struct mcdc_config cfg;
    cfg_init(&cfg);
    cfg.collection_include = (struct mcdc_strlist){inc, 2};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct encoder *enc = encoder_new(&cfg, &err);
    assert_non_null(enc);
    bson_t stage;
    assert_true(encoder_build_stream_match(enc, &stage, &err));
    struct found f = {.n = 0};
    collect(&stage, &f);
    assert_int_equal(f.n, 0);
    bson_destroy(&stage);
    assert_true(encoder_captures(enc, "small", "one"));
    assert_false(encoder_captures(enc, "small", "two"));
    encoder_destroy(enc);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(long_regex_include_list_is_split),
        cmocka_unit_test(long_lists_split_for_databases_and_the_oplog),
        cmocka_unit_test(an_entry_over_the_limit_is_left_to_the_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
