/* Unit tests for snapshot/progress: the initial snapshot's progress member
 * (the tracker's text per record, its parse back, the extraction from a
 * position's extra members), the pieces a collection resumes in (gaps,
 * cross-type bounds, inconsistent ranges refused) and the check of stored
 * progress against a new plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "snapshot/keyrange.h"
#include "snapshot/progress.h"
#include "snapshot/snapshot.h"

/* A value parsed from extended JSON {"v": ...}, kept in a pool freed per test. */
static bson_t *pool[64];
static size_t npool;

static bson_value_t val(const char *json_value)
{
    char buf[512];
    bson_error_t error;
    bson_iter_t it;
    bson_t *doc;
    snprintf(buf, sizeof buf, "{\"v\": %s}", json_value);
    doc = bson_new_from_json((const uint8_t *)buf, -1, &error);
    if (doc == NULL)
        fail_msg("bad test JSON %s: %s", buf, error.message);
    assert_true(npool < 64);
    pool[npool++] = doc;
    assert_true(bson_iter_init_find(&it, doc, "v"));
    return *bson_iter_value(&it);
}

static int pool_free(void **state)
{
    (void)state;
    for (size_t i = 0; i < npool; i++)
        bson_destroy(pool[i]);
    npool = 0;
    return 0;
}

#define MEMBER_START "{\"mongocdc_snapshot\":\""

static void tracker_text_follows_each_record(void **state)
{
    (void)state;
    struct snapshot_progress *p = progress_new(NULL);
    bson_value_t p1 = val("{\"$numberLong\": \"100\"}"), k5 = val("{\"$numberInt\": \"5\"}");
    bson_value_t kx = val("\"x\\\"y\"");
    size_t shared = 0, e0, e1;
    const char *t;

    progress_add_done_coll(p, "db.a");
    e0 = progress_add(p, "db.b", NULL, &p1, PROGRESS_NOT_STARTED, NULL);
    e1 = progress_add(p, "db.b", &p1, NULL, PROGRESS_NOT_STARTED, NULL);
    assert_int_equal(progress_count(p), 2);
    /* nothing started: the ranges not started are implicit */
    t = progress_text(p, &shared);
    assert_string_equal(t, MEMBER_START "{\\\"v\\\":1,\\\"done\\\":[\\\"db.a\\\"],"
                           "\\\"ranges\\\":[]}\"}");
    progress_advance(p, e0, &k5);
    t = progress_text(p, &shared);
    assert_string_equal(t, MEMBER_START "{\\\"v\\\":1,\\\"done\\\":[\\\"db.a\\\"],"
                           "\\\"ranges\\\":[{\\\"ns\\\":\\\"db.b\\\",\\\"hi\\\":{\\\"_id\\\": "
                           "{\\\"$numberLong\\\": \\\"100\\\"}},\\\"after\\\":{\\\"_id\\\": "
                           "{\\\"$numberInt\\\": \\\"5\\\"}}}]}\"}");
    /* the shared head ends where the ranges in progress start */
    assert_int_equal(shared, strstr(t, "{\\\"ns\\\"") - t);
    /* range 0 done, range 1 in progress on a string key (another type bracket,
     * with a quote: escaped twice, once in the key's JSON, once in the member) */
    progress_finish(p, e0);
    progress_advance(p, e1, &kx);
    t = progress_text(p, &shared);
    assert_string_equal(t, MEMBER_START "{\\\"v\\\":1,\\\"done\\\":[\\\"db.a\\\"],"
                           "\\\"ranges\\\":[{\\\"ns\\\":\\\"db.b\\\",\\\"hi\\\":{\\\"_id\\\": "
                           "{\\\"$numberLong\\\": \\\"100\\\"}},\\\"done\\\":true},"
                           "{\\\"ns\\\":\\\"db.b\\\",\\\"lo\\\":{\\\"_id\\\": {\\\"$numberLong\\\": "
                           "\\\"100\\\"}},\\\"after\\\":{\\\"_id\\\": \\\"x\\\\\\\"y\\\"}}]}\"}");
    assert_int_equal(shared, strstr(t, ",{\\\"ns\\\"") - t);
    /* the last range done: the collection folds into the done list */
    progress_finish(p, e1);
    t = progress_text(p, &shared);
    assert_string_equal(t, MEMBER_START "{\\\"v\\\":1,\\\"done\\\":[\\\"db.a\\\",\\\"db.b\\\"],"
                           "\\\"ranges\\\":[]}\"}");
    progress_free(p);
}

static void tracker_keeps_other_members_first(void **state)
{
    (void)state;
    struct snapshot_progress *p = progress_new("{\"k\": \"v\"}");
    const char *t = progress_text(p, NULL);
    assert_string_equal(t, "{\"k\": \"v\",\"mongocdc_snapshot\":\"{\\\"v\\\":1,\\\"done\\\":[],"
                           "\\\"ranges\\\":[]}\"}");
    progress_free(p);
    p = progress_new("{ }"); /* no members: none before ours */
    t = progress_text(p, NULL);
    assert_true(strncmp(t, MEMBER_START, strlen(MEMBER_START)) == 0);
    progress_free(p);
}

/* A key the writer cannot store exactly (invalid UTF-8, written with U+FFFD)
 * does not move the range: a resume re-reads from the last exact key. */
static void inexact_key_keeps_the_range_where_it_was(void **state)
{
    (void)state;
    struct snapshot_progress *p = progress_new(NULL);
    bson_value_t good = val("\"a\""), bad = good, nested;
    bson_t *doc = bson_new();
    char *before;
    size_t e = progress_add(p, "db.s", NULL, NULL, PROGRESS_NOT_STARTED, NULL);

    bad.value.v_utf8.str = (char *)"a\x80";
    bad.value.v_utf8.len = 2;
    progress_advance(p, e, &bad); /* not started still */
    assert_non_null(strstr(progress_text(p, NULL), "\\\"ranges\\\":[]"));
    progress_advance(p, e, &good);
    before = strdup(progress_text(p, NULL));
    progress_advance(p, e, &bad);
    assert_string_equal(progress_text(p, NULL), before);
    bson_append_utf8(doc, "k", 1, "b\xC0\xAF", 3); /* an overlong '/' */
    nested.value_type = BSON_TYPE_DOCUMENT;
    nested.value.v_doc.data = (uint8_t *)bson_get_data(doc);
    nested.value.v_doc.data_len = doc->len;
    progress_advance(p, e, &nested);
    assert_string_equal(progress_text(p, NULL), before);
    free(before);
    bson_destroy(doc);
    progress_free(p);
}

static void truncate_drops_unbuilt_ranges(void **state)
{
    (void)state;
    struct snapshot_progress *p = progress_new(NULL);
    bson_value_t k = val("{\"$oid\": \"5f0000000000000000000001\"}");
    size_t e = progress_add(p, "db.x", NULL, &k, PROGRESS_NOT_STARTED, NULL);
    progress_truncate(p, 0);
    assert_int_equal(progress_count(p), 0);
    /* the collection read whole instead: done after its one range */
    e = progress_add(p, "db.x", NULL, NULL, PROGRESS_NOT_STARTED, NULL);
    progress_finish(p, e);
    assert_non_null(strstr(progress_text(p, NULL), "[\\\"db.x\\\"]"));
    progress_free(p);
}

/* What a tracker wrote, read back: the member out of the extra members, its
 * parse, every key with its type. */
static void round_trip_through_extra_members(void **state)
{
    (void)state;
    struct snapshot_progress *p = progress_new("{\"other\": 1}");
    bson_value_t lo = val("{\"$numberLong\": \"7\"}"), hi = val("\"m\"");
    bson_value_t after = val("{\"$numberDouble\": \"8.5\"}");
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct snapshot_resume *r = NULL;
    char *member = NULL, *rest = NULL;
    size_t e0, e1;

    /* a collection's ranges are all added before any of them moves */
    progress_add_done_coll(p, "db.a");
    e0 = progress_add(p, "db.b", NULL, &lo, PROGRESS_NOT_STARTED, NULL);
    e1 = progress_add(p, "db.b", &lo, &hi, PROGRESS_NOT_STARTED, NULL);
    progress_add(p, "db.b", &hi, NULL, PROGRESS_NOT_STARTED, NULL);
    progress_finish(p, e0);
    progress_advance(p, e1, &after);
    assert_true(snapshot_progress_extract(progress_text(p, NULL), &member, &rest, &err));
    assert_non_null(member);
    assert_string_equal(rest, "{ \"other\" : { \"$numberInt\" : \"1\" } }");
    assert_true(snapshot_resume_parse(member, &r, &err));
    assert_int_equal(r->ndone, 1);
    assert_string_equal(r->done[0], "db.a");
    assert_int_equal(r->nranges, 2);
    assert_string_equal(r->ranges[0].ns, "db.b");
    assert_int_equal(r->ranges[0].state, PROGRESS_DONE);
    assert_int_equal(r->ranges[0].lo.value_type, BSON_TYPE_EOD);
    assert_int_equal(r->ranges[0].hi.value_type, BSON_TYPE_INT64);
    assert_int_equal(r->ranges[1].state, PROGRESS_PARTIAL);
    assert_int_equal(r->ranges[1].lo.value_type, BSON_TYPE_INT64);
    assert_int_equal(r->ranges[1].hi.value_type, BSON_TYPE_UTF8);
    assert_int_equal(r->ranges[1].after.value_type, BSON_TYPE_DOUBLE);
    assert_int_equal(keyrange_compare(&r->ranges[1].after, &after), 0);
    assert_true(snapshot_resume_done(r, "db.a"));
    assert_false(snapshot_resume_done(r, "db.b"));
    assert_true(snapshot_resume_names(r, "db.b"));
    assert_false(snapshot_resume_names(r, "db.c"));
    snapshot_resume_free(r);
    free(member);
    free(rest);
    progress_free(p);
}

static void extract_without_member(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    char *member = (char *)"x", *rest = (char *)"x";
    assert_true(snapshot_progress_extract(NULL, &member, &rest, &err));
    assert_null(member);
    assert_null(rest);
    assert_true(snapshot_progress_extract("{\"mongocdc_snapshot\": \"{}\"}", &member, &rest, &err));
    assert_string_equal(member, "{}");
    assert_null(rest); /* nothing else left */
    free(member);
    assert_false(snapshot_progress_extract("{\"mongocdc_snapshot\": 3}", &member, &rest, &err));
    assert_non_null(strstr(err.msg, "not a string"));
    assert_null(member);
    assert_false(snapshot_progress_extract("not json", &member, &rest, &err));
}

static void parse_refuses_bad_progress(void **state)
{
    (void)state;
    static const char *bad[] = {
        "nope",
        "{\"v\":2,\"done\":[]}",
        "{\"v\":1,\"done\":[1]}",
        "{\"v\":1,\"ranges\":[{\"lo\":{\"_id\":1},\"done\":true}]}",
        "{\"v\":1,\"ranges\":[{\"ns\":\"db.c\"}]}",
        "{\"v\":1,\"ranges\":[{\"ns\":\"db.c\",\"done\":true,\"after\":{\"_id\":1}}]}",
        "{\"v\":1,\"ranges\":[{\"ns\":\"db.c\",\"lo\":{\"k\":1},\"done\":true}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct mcdc_error err = MCDC_ERROR_INIT;
        struct snapshot_resume *r = (struct snapshot_resume *)1;
        assert_false(snapshot_resume_parse(bad[i], &r, &err));
        assert_null(r);
        assert_non_null(strstr(err.msg, SNAPSHOT_PROGRESS_KEY));
    }
}

static struct snapshot_resume *parsed(const char *text)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct snapshot_resume *r = NULL;
    if (!snapshot_resume_parse(text, &r, &err))
        fail_msg("%s", err.msg);
    return r;
}

/* Stored ranges listed out of order, across type brackets: the pieces come in
 * key order with the gaps between them not started. */
static void pieces_fill_the_gaps(void **state)
{
    (void)state;
    struct snapshot_resume *r = parsed(
        "{\"v\":1,\"ranges\":["
        "{\"ns\":\"db.c\",\"lo\":{\"_id\":\"s\"},\"after\":{\"_id\":{\"$oid\":"
        "\"5f0000000000000000000001\"}}},"
        "{\"ns\":\"db.o\",\"done\":true},"
        "{\"ns\":\"db.c\",\"lo\":{\"_id\":{\"$numberInt\":\"10\"}},\"hi\":{\"_id\":\"b\"},"
        "\"done\":true}]}");
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct progress_piece *q;
    size_t n;

    assert_true(snapshot_resume_pieces(r, "db.c", &q, &n, &err));
    assert_int_equal(n, 4);
    /* (-, 10] not started */
    assert_null(q[0].lo);
    assert_int_equal(q[0].hi->value_type, BSON_TYPE_INT32);
    assert_int_equal(q[0].state, PROGRESS_NOT_STARTED);
    /* (10, "b"] done */
    assert_int_equal(q[1].state, PROGRESS_DONE);
    assert_string_equal(q[1].hi->value.v_utf8.str, "b");
    /* ("b", "s"] not started */
    assert_int_equal(q[2].state, PROGRESS_NOT_STARTED);
    assert_string_equal(q[2].lo->value.v_utf8.str, "b");
    assert_string_equal(q[2].hi->value.v_utf8.str, "s");
    /* ("s", -) after an ObjectId */
    assert_int_equal(q[3].state, PROGRESS_PARTIAL);
    assert_null(q[3].hi);
    assert_int_equal(q[3].after->value_type, BSON_TYPE_OID);
    free(q);
    /* a collection read whole and done: one piece */
    assert_true(snapshot_resume_pieces(r, "db.o", &q, &n, &err));
    assert_int_equal(n, 1);
    assert_null(q[0].lo);
    assert_null(q[0].hi);
    assert_int_equal(q[0].state, PROGRESS_DONE);
    free(q);
    /* not named: nothing */
    assert_true(snapshot_resume_pieces(r, "db.z", &q, &n, &err));
    assert_int_equal(n, 0);
    assert_null(q);
    snapshot_resume_free(r);
}

static void pieces_refuse_inconsistent_ranges(void **state)
{
    (void)state;
    static const char *bad[] = {
        /* overlapping */
        "{\"v\":1,\"ranges\":[{\"ns\":\"db.c\",\"hi\":{\"_id\":5},\"done\":true},"
        "{\"ns\":\"db.c\",\"lo\":{\"_id\":3},\"done\":true}]}",
        /* two ranges open at the bottom */
        "{\"v\":1,\"ranges\":[{\"ns\":\"db.c\",\"hi\":{\"_id\":5},\"done\":true},"
        "{\"ns\":\"db.c\",\"hi\":{\"_id\":9},\"done\":true}]}",
        /* empty range */
        "{\"v\":1,\"ranges\":[{\"ns\":\"db.c\",\"lo\":{\"_id\":5},\"hi\":{\"_id\":5},"
        "\"done\":true}]}",
        /* after key outside its range */
        "{\"v\":1,\"ranges\":[{\"ns\":\"db.c\",\"lo\":{\"_id\":5},\"hi\":{\"_id\":9},"
        "\"after\":{\"_id\":10}}]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct snapshot_resume *r = parsed(bad[i]);
        struct mcdc_error err = MCDC_ERROR_INIT;
        struct progress_piece *q = (struct progress_piece *)1;
        size_t n = 1;
        assert_false(snapshot_resume_pieces(r, "db.c", &q, &n, &err));
        assert_null(q);
        assert_int_equal(n, 0);
        snapshot_resume_free(r);
    }
}

static void check_against_plan(void **state)
{
    (void)state;
    struct snapshot_coll colls[3] = {{0}};
    struct snapshot_plan plan = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    char summary[256];
    struct snapshot_resume *r;

    colls[0].db = (char *)"db";
    colls[0].coll = (char *)"a";
    colls[1].db = (char *)"db";
    colls[1].coll = (char *)"b";
    colls[2].db = (char *)"db2";
    colls[2].coll = (char *)"c";
    plan.colls = colls;
    plan.count = 3;
    r = parsed("{\"v\":1,\"done\":[\"db.a\"],\"ranges\":["
               "{\"ns\":\"db.b\",\"hi\":{\"_id\":5},\"done\":true},"
               "{\"ns\":\"db.b\",\"lo\":{\"_id\":5},\"after\":{\"_id\":6}}]}");
    assert_true(snapshot_resume_check(&plan, r, summary, sizeof summary, &err));
    assert_string_equal(summary, "1 of 3 collections done, 1 resumed (2 _id ranges started, 1 "
                                 "of them done)");
    snapshot_resume_free(r);
    /* a collection gone since: not resumable */
    r = parsed("{\"v\":1,\"done\":[\"db.a\",\"db.gone\"]}");
    assert_false(snapshot_resume_check(&plan, r, summary, sizeof summary, &err));
    assert_non_null(strstr(err.msg, "db.gone"));
    snapshot_resume_free(r);
    /* "db" must match the whole database name */
    r = parsed("{\"v\":1,\"done\":[\"db2.a\"]}");
    assert_false(snapshot_resume_check(&plan, r, summary, sizeof summary, &err));
    snapshot_resume_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(tracker_text_follows_each_record, pool_free),
        cmocka_unit_test_teardown(tracker_keeps_other_members_first, pool_free),
        cmocka_unit_test_teardown(inexact_key_keeps_the_range_where_it_was, pool_free),
        cmocka_unit_test_teardown(truncate_drops_unbuilt_ranges, pool_free),
        cmocka_unit_test_teardown(round_trip_through_extra_members, pool_free),
        cmocka_unit_test_teardown(extract_without_member, pool_free),
        cmocka_unit_test_teardown(parse_refuses_bad_progress, pool_free),
        cmocka_unit_test_teardown(pieces_fill_the_gaps, pool_free),
        cmocka_unit_test_teardown(pieces_refuse_inconsistent_ranges, pool_free),
        cmocka_unit_test_teardown(check_against_plan, pool_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
