/*
 * Unit tests for event: change-stream event documents (mongo-sim-spec.md
 * §3.5-3.9) and snapshot documents parsed into struct mcdc_event views, and
 * the stream position's lifecycle and cluster time (event/position.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <bson/bson.h>

#include "common/xalloc.h"
#include "event/event.h"
#include "event/position.h"

static bson_t *from_json(const char *json)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &e);
    if (b == NULL)
        fail_msg("bad test JSON: %s", e.message);
    return b;
}

static void insert_event_is_parsed(void **state)
{
    (void)state;
    bson_t *doc = from_json(
        "{\"_id\": {\"_data\": \"826553F100000000012B\"}, \"operationType\": \"insert\","
        " \"clusterTime\": {\"$timestamp\": {\"t\": 1700000000, \"i\": 1}},"
        " \"wallTime\": {\"$date\": {\"$numberLong\": \"1700000000000\"}},"
        " \"fullDocument\": {\"_id\": {\"$oid\": \"6553f1000000000000000001\"}, \"sku\": \"A-1\"},"
        " \"ns\": {\"db\": \"shop\", \"coll\": \"orders\"},"
        " \"documentKey\": {\"_id\": {\"$oid\": \"6553f1000000000000000001\"}}}");
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool emit = false;
    assert_true(event_from_change(doc, &ev, &emit, &err));
    assert_true(emit);
    assert_int_equal(ev.op, MCDC_OP_INSERT);
    assert_string_equal(event_op_letter(ev.op), "c");
    assert_string_equal(ev.db, "shop");
    assert_int_equal(ev.db_len, 4);
    assert_string_equal(ev.coll, "orders");
    assert_true(ev.has_cluster_time);
    assert_int_equal(ev.ts_sec, 1700000000);
    assert_int_equal(ev.ts_inc, 1);
    assert_true(ev.has_wall_time);
    assert_int_equal(ev.wall_time_ms, 1700000000000LL);
    assert_true(ev.has_full_document);
    assert_true(ev.has_document_key);
    assert_true(ev.has_resume_token);
    assert_false(ev.has_updated_fields);
    assert_false(ev.has_lsid);
    bson_iter_t it;
    assert_true(bson_iter_init_find(&it, &ev.full_document, "sku"));
    assert_string_equal(bson_iter_utf8(&it, NULL), "A-1");
    assert_true(bson_iter_init_find(&it, &ev.resume_token, "_data"));
    /* views, not copies */
    assert_true(bson_get_data(&ev.full_document) > bson_get_data(doc));
    assert_true(bson_get_data(&ev.full_document) < bson_get_data(doc) + doc->len);
    bson_destroy(doc);
}

static void update_event_has_update_description(void **state)
{
    (void)state;
    bson_t *doc = from_json(
        "{\"txnNumber\": {\"$numberLong\": \"7\"},"
        " \"lsid\": {\"id\": {\"$binary\": {\"base64\": \"FA7YEzXgQXSX9OxmzllH2w==\", \"subType\": "
        "\"04\"}}},"
        " \"_id\": {\"_data\": \"82\"}, \"operationType\": \"update\","
        " \"clusterTime\": {\"$timestamp\": {\"t\": 1700000001, \"i\": 2}},"
        " \"ns\": {\"db\": \"shop\", \"coll\": \"orders\"},"
        " \"documentKey\": {\"_id\": 1},"
        " \"updateDescription\": {\"updatedFields\": {\"status\": \"shipped\", \"items.0.qty\": 3},"
        "   \"removedFields\": [\"note\"], \"truncatedArrays\": [{\"field\": \"items\", "
        "\"newSize\": 1}]},"
        " \"fullDocument\": null, \"fullDocumentBeforeChange\": {\"_id\": 1, \"status\": "
        "\"new\"}}");
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool emit = false;
    assert_true(event_from_change(doc, &ev, &emit, &err));
    assert_true(emit);
    assert_int_equal(ev.op, MCDC_OP_UPDATE);
    assert_true(ev.has_updated_fields);
    assert_true(ev.has_removed_fields);
    assert_true(ev.has_truncated_arrays);
    assert_false(ev.has_full_document); /* null after a lookup that found nothing */
    assert_true(ev.has_before);
    assert_true(ev.has_lsid);
    assert_true(ev.has_txn_number);
    assert_int_equal(ev.txn_number, 7);
    assert_int_equal(bson_count_keys(&ev.updated_fields), 2);
    assert_int_equal(bson_count_keys(&ev.removed_fields), 1);
    bson_destroy(doc);
}

static void replace_and_delete_map_to_u_and_d(void **state)
{
    (void)state;
    bson_t *rep =
        from_json("{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"replace\","
                  " \"clusterTime\": {\"$timestamp\": {\"t\": 5, \"i\": 1}},"
                  " \"fullDocument\": {\"_id\": 1, \"qty\": 5},"
                  " \"ns\": {\"db\": \"d\", \"coll\": \"c\"}, \"documentKey\": {\"_id\": 1}}");
    bson_t *del =
        from_json("{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"delete\","
                  " \"clusterTime\": {\"$timestamp\": {\"t\": 5, \"i\": 2}},"
                  " \"ns\": {\"db\": \"d\", \"coll\": \"c\"}, \"documentKey\": {\"_id\": 1}}");
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool emit = false;
    assert_true(event_from_change(rep, &ev, &emit, &err));
    assert_true(emit);
    assert_int_equal(ev.op, MCDC_OP_REPLACE);
    assert_string_equal(event_op_letter(ev.op), "u");
    assert_true(ev.has_full_document);
    assert_true(event_from_change(del, &ev, &emit, &err));
    assert_true(emit);
    assert_int_equal(ev.op, MCDC_OP_DELETE);
    assert_string_equal(event_op_letter(ev.op), "d");
    assert_false(ev.has_full_document);
    assert_int_equal(ev.ts_inc, 2);
    bson_destroy(rep);
    bson_destroy(del);
}

static void non_data_events_are_not_emitted(void **state)
{
    (void)state;
    static const char *const docs[] = {
        "{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"drop\","
        " \"clusterTime\": {\"$timestamp\": {\"t\": 9, \"i\": 1}}, \"ns\": {\"db\": \"shop\", "
        "\"coll\": \"orders\"}}",
        "{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"invalidate\","
        " \"clusterTime\": {\"$timestamp\": {\"t\": 9, \"i\": 1}}}",
        "{\"to\": {\"db\": \"shop\", \"coll\": \"o2\"}, \"_id\": {\"_data\": \"82\"}, "
        "\"operationType\": \"rename\","
        " \"clusterTime\": {\"$timestamp\": {\"t\": 9, \"i\": 1}}, \"ns\": {\"db\": \"shop\", "
        "\"coll\": \"orders\"}}",
        "{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"dropDatabase\","
        " \"clusterTime\": {\"$timestamp\": {\"t\": 9, \"i\": 1}}, \"ns\": {\"db\": \"shop\"}}",
        "{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"createIndexes\","
        " \"clusterTime\": {\"$timestamp\": {\"t\": 9, \"i\": 1}}, \"ns\": {\"db\": \"shop\", "
        "\"coll\": \"orders\"},"
        " \"operationDescription\": {\"indexes\": []}}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        bson_t *doc = from_json(docs[i]);
        struct mcdc_event ev;
        struct mcdc_error err = MCDC_ERROR_INIT;
        bool emit = true;
        assert_true(event_from_change(doc, &ev, &emit, &err));
        assert_false(emit);
        /* the position still advances */
        assert_true(ev.has_cluster_time);
        assert_int_equal(ev.ts_sec, 9);
        assert_true(ev.has_resume_token);
        bson_destroy(doc);
    }
}

static void malformed_events_fail(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        const char *msg;
    } cases[] = {
        {"{\"_id\": {\"_data\": \"82\"}}", "without operationType"},
        {"{\"operationType\": 3}", "operationType is not a string"},
        {"{\"operationType\": \"insert\", \"fullDocument\": {\"_id\": 1}, \"documentKey\": "
         "{\"_id\": 1}}",
         "without ns"},
        {"{\"operationType\": \"insert\", \"ns\": {\"db\": \"a\", \"coll\": \"b\"}, "
         "\"fullDocument\": {\"_id\": 1},"
         " \"documentKey\": {\"x\": 1}}",
         "without documentKey._id"},
        {"{\"operationType\": \"update\", \"ns\": {\"db\": \"a\", \"coll\": \"b\"}, "
         "\"documentKey\": {\"_id\": 1}}",
         "without updateDescription"},
        {"{\"operationType\": \"replace\", \"ns\": {\"db\": \"a\", \"coll\": \"b\"}, "
         "\"documentKey\": {\"_id\": 1}}",
         "without fullDocument"},
        {"{\"operationType\": \"insert\", \"ns\": {\"db\": \"a\", \"coll\": \"b\"}, "
         "\"documentKey\": {\"_id\": 1},"
         " \"fullDocument\": 5}",
         "fullDocument is not a document"},
        {"{\"operationType\": \"insert\", \"clusterTime\": 5}", "clusterTime is not a timestamp"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bson_t *doc = from_json(cases[i].json);
        struct mcdc_event ev;
        struct mcdc_error err = MCDC_ERROR_INIT;
        bool emit = true;
        assert_false(event_from_change(doc, &ev, &emit, &err));
        assert_false(emit);
        assert_int_equal(err.domain, MCDC_ERR_ENCODE);
        if (strstr(err.msg, cases[i].msg) == NULL)
            fail_msg("case %zu: \"%s\" does not mention \"%s\"", i, err.msg, cases[i].msg);
        bson_destroy(doc);
    }
}

static void snapshot_doc_is_a_read(void **state)
{
    (void)state;
    bson_t *doc = from_json("{\"_id\": 42, \"a\": 1}");
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(event_from_snapshot_doc(doc, "inv", "cust", MCDC_SNAP_LAST, &ev, &err));
    assert_int_equal(ev.op, MCDC_OP_READ);
    assert_string_equal(event_op_letter(ev.op), "r");
    assert_int_equal(ev.snapshot, MCDC_SNAP_LAST);
    assert_string_equal(ev.db, "inv");
    assert_int_equal(ev.coll_len, 4);
    assert_true(ev.has_full_document);
    bson_iter_t it;
    assert_true(bson_iter_init_find(&it, &ev.document_key, "_id"));
    assert_int_equal(bson_iter_int32(&it), 42);
    assert_false(ev.has_cluster_time);
    bson_destroy(doc);

    bson_t *noid = from_json("{\"a\": 1}");
    assert_false(event_from_snapshot_doc(noid, "inv", "cust", MCDC_SNAP_TRUE, &ev, &err));
    assert_non_null(strstr(err.msg, "without _id"));
    bson_destroy(noid);
}

/* Found by fuzz_event: an embedded document the iterator cannot hand out
 * aborted the process (BSON_ASSERT); it is now an ENCODE error. */
static void corrupt_embedded_document_is_an_error(void **state)
{
    (void)state;
    static const char hex[] =
        "ea000000035f69640037000000025f64617461002700000038323633463041314232303030303030"
        "303132423032324330313030323936453541313030340040026f7065726174696f6e547970650007"
        "00000064656c6574650011636c757374657254696d65000400000000f15365036e73001c00000002"
        "6b62000300000064620002636f6c6c000200000063000003646f63756d6570744b65790016000000"
        "035f6964000c000000107800010000000000036c736964001e000000056964001000000004303234"
        "36393133353738616263646566001274786e4e756d62657200030000000000000000";
    uint8_t buf[sizeof hex / 2];
    for (size_t i = 0; i < sizeof buf; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        buf[i] = (uint8_t)v;
    }
    bson_t doc;
    assert_true(bson_init_static(&doc, buf, sizeof buf));
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool emit = true;
    assert_false(event_from_change(&doc, &ev, &emit, &err));
    assert_non_null(strstr(err.msg, "corrupt BSON"));
}

/* /position/time: sec/ord first (an unknown ord counts as 0), else the
 * token's KeyString time (0x82 + 8-byte Timestamp), else 0. */
static void position_time_from_fields_or_token(void **state)
{
    (void)state;
    struct mcdc_position p;
    uint64_t t = 7;

    position_init(&p);
    assert_true(position_time(&p) == 0);
    p.sec = 1700000000;
    p.ord = 3;
    assert_true(position_time(&p) == ((uint64_t)1700000000 << 32 | 3));
    p.ord = -1;
    assert_true(position_time(&p) == (uint64_t)1700000000 << 32);

    p.sec = -1;
    BSON_APPEND_UTF8(&p.resume_token, "_data", "8269B03187000000022B0429296E1404");
    p.has_resume_token = true;
    assert_true(position_time(&p) == ((uint64_t)0x69B03187u << 32 | 2));
    assert_true(position_token_time(&p.resume_token, &t));
    assert_true(t == ((uint64_t)0x69B03187u << 32 | 2));
    position_clear(&p);

    /* Not the 0x82 layout, a non-hex digit, a short or non-string _data: no time. */
    static const char *const bad[] = {"8169B03187000000022B", "8269B0318G000000022B", "8269B031"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        BSON_APPEND_UTF8(&p.resume_token, "_data", bad[i]);
        p.has_resume_token = true;
        t = 7;
        assert_false(position_token_time(&p.resume_token, &t));
        assert_true(t == 7);
        assert_true(position_time(&p) == 0);
        position_clear(&p);
    }
    BSON_APPEND_INT32(&p.resume_token, "_data", 5);
    assert_false(position_token_time(&p.resume_token, &t));
    assert_false(position_token_time(NULL, &t));
    position_clear(&p);
}

/* /position/copy_move: deep copies own their strings and token; a move
 * leaves the source empty. */
static void position_copy_and_move_own_their_data(void **state)
{
    (void)state;
    struct mcdc_position a, b, c;

    position_init(&a);
    position_init(&b);
    position_init(&c);
    a.sec = 5;
    a.ord = 1;
    a.lsid = xstrdup("{\"id\":1}");
    a.extra_json = xstrdup("{\"x\":1}");
    BSON_APPEND_UTF8(&a.resume_token, "_data", "8200000005000000012B");
    a.has_resume_token = true;
    position_copy(&b, &a);
    position_clear(&a);
    assert_true(b.sec == 5 && b.ord == 1 && b.has_resume_token);
    assert_string_equal(b.lsid, "{\"id\":1}");
    assert_string_equal(b.extra_json, "{\"x\":1}");
    assert_true(position_time(&b) == ((uint64_t)5 << 32 | 1));
    position_move(&c, &b);
    assert_true(b.sec == -1 && b.lsid == NULL && !b.has_resume_token);
    assert_true(bson_empty(&b.resume_token));
    assert_string_equal(c.lsid, "{\"id\":1}");
    assert_true(c.has_resume_token && !bson_empty(&c.resume_token));
    position_clear(&b);
    position_clear(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(insert_event_is_parsed),
        cmocka_unit_test(corrupt_embedded_document_is_an_error),
        cmocka_unit_test(update_event_has_update_description),
        cmocka_unit_test(replace_and_delete_map_to_u_and_d),
        cmocka_unit_test(non_data_events_are_not_emitted),
        cmocka_unit_test(malformed_events_fail),
        cmocka_unit_test(snapshot_doc_is_a_read),
        cmocka_unit_test(position_time_from_fields_or_token),
        cmocka_unit_test(position_copy_and_move_own_their_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
