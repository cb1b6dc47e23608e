/*
 * Unit tests of capture/oversize: split-event reassembly (Debezium
 * SplitEventHandler: fragments in sequence merged into one event carrying the
 * last fragment's _id; anything out of sequence refused), the split-stage
 * server versions (MongoDB manual "$changeStreamSplitLargeEvent") and the
 * skip stub.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "capture/oversize.h"
#include "encode/ejson.h"

static bson_t *json(const char *j)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)j, -1, &e);
    if (b == NULL)
        fail_msg("bad test JSON %s: %s", j, e.message);
    return b;
}

static void reassembles_fragments_in_order(void **state)
{
    (void)state;
    struct split_buffer b;
    const bson_t *merged = NULL;
    char why[200] = "";
    bson_t *f1 = json("{\"_id\": {\"_data\": \"T1\"}, \"splitEvent\": {\"fragment\": 1, \"of\": 2},"
                      " \"operationType\": \"update\", \"ns\": {\"db\": \"d\", \"coll\": \"c\"},"
                      " \"updateDescription\": {\"updatedFields\": {\"b\": \"yy\"}}}");
    bson_t *f2 = json("{\"_id\": {\"_data\": \"T2\"}, \"splitEvent\": {\"fragment\": 2, \"of\": 2},"
                      " \"fullDocument\": {\"_id\": 1, \"b\": \"yy\"}}");
    bson_t *whole = json("{\"_id\": {\"_data\": \"T3\"}, \"operationType\": \"insert\"}");
    bson_t *want = json("{\"operationType\": \"update\","
                        " \"ns\": {\"db\": \"d\", \"coll\": \"c\"},"
                        " \"updateDescription\": {\"updatedFields\": {\"b\": \"yy\"}},"
                        " \"fullDocument\": {\"_id\": 1, \"b\": \"yy\"},"
                        " \"_id\": {\"_data\": \"T2\"}}");

    split_init(&b);
    assert_int_equal(split_add(&b, whole, &merged, why, sizeof why), SPLIT_WHOLE);
    assert_int_equal(split_add(&b, f1, &merged, why, sizeof why), SPLIT_MORE);
    assert_true(b.active);
    assert_int_equal(split_add(&b, f2, &merged, why, sizeof why), SPLIT_DONE);
    assert_false(b.active);
    assert_true(bson_equal(merged, want));
    assert_int_equal(b.events, 1);
    assert_int_equal(b.fragments, 2);
    /* the buffer is reusable: a single-fragment event (1 of 1) */
    bson_t *one =
        json("{\"_id\": {\"_data\": \"T4\"}, \"splitEvent\": {\"fragment\": 1, \"of\": 1},"
             " \"operationType\": \"delete\"}");
    assert_int_equal(split_add(&b, one, &merged, why, sizeof why), SPLIT_DONE);
    bson_t *want1 = json("{\"operationType\": \"delete\", \"_id\": {\"_data\": \"T4\"}}");
    assert_true(bson_equal(merged, want1));
    split_destroy(&b);
    bson_destroy(f1);
    bson_destroy(f2);
    bson_destroy(whole);
    bson_destroy(want);
    bson_destroy(one);
    bson_destroy(want1);
}

static void refuses_fragments_out_of_sequence(void **state)
{
    (void)state;
    struct split_buffer b;
    const bson_t *merged = NULL;
    char why[200] = "";
    bson_t *f1 =
        json("{\"_id\": {\"_data\": \"T1\"}, \"splitEvent\": {\"fragment\": 1, \"of\": 3}}");
    bson_t *f2 =
        json("{\"_id\": {\"_data\": \"T2\"}, \"splitEvent\": {\"fragment\": 2, \"of\": 3}}");
    bson_t *f3 =
        json("{\"_id\": {\"_data\": \"T3\"}, \"splitEvent\": {\"fragment\": 3, \"of\": 3}}");
    bson_t *other =
        json("{\"_id\": {\"_data\": \"T9\"}, \"splitEvent\": {\"fragment\": 2, \"of\": 2}}");
    bson_t *whole = json("{\"_id\": {\"_data\": \"T5\"}, \"operationType\": \"insert\"}");

    split_init(&b);
    /* a stream never starts inside a split event */
    assert_int_equal(split_add(&b, f2, &merged, why, sizeof why), SPLIT_BROKEN);
    assert_non_null(strstr(why, "fragment 2 of 3"));
    assert_int_equal(split_add(&b, f1, &merged, why, sizeof why), SPLIT_MORE);
    /* a skipped fragment */
    assert_int_equal(split_add(&b, f3, &merged, why, sizeof why), SPLIT_BROKEN);
    /* another event's fragment ("of" differs) */
    assert_int_equal(split_add(&b, other, &merged, why, sizeof why), SPLIT_BROKEN);
    /* a whole event while fragments are buffered */
    assert_int_equal(split_add(&b, whole, &merged, why, sizeof why), SPLIT_BROKEN);
    assert_non_null(strstr(why, "fragments missing"));
    /* after a reset (the stream reopened before the event) all is read again */
    split_reset(&b);
    assert_int_equal(split_add(&b, f1, &merged, why, sizeof why), SPLIT_MORE);
    assert_int_equal(split_add(&b, f2, &merged, why, sizeof why), SPLIT_MORE);
    assert_int_equal(split_add(&b, f3, &merged, why, sizeof why), SPLIT_DONE);
    split_destroy(&b);
    bson_destroy(f1);
    bson_destroy(f2);
    bson_destroy(f3);
    bson_destroy(other);
    bson_destroy(whole);
}

static void split_stage_versions(void **state)
{
    (void)state;
    assert_false(oversize_split_supported(5, 0, 28));
    assert_false(oversize_split_supported(6, 0, 8));
    assert_true(oversize_split_supported(6, 0, 9));
    assert_true(oversize_split_supported(6, 0, 16));
    assert_false(oversize_split_supported(6, 1, 0)); /* rapid releases lack it */
    assert_false(oversize_split_supported(6, 3, 2));
    assert_true(oversize_split_supported(7, 0, 0));
    assert_true(oversize_split_supported(8, 0, 3));
}

static void skip_stage_and_stub(void **state)
{
    (void)state;
    bson_t stage = BSON_INITIALIZER;
    int64_t full = 0, before = 0;
    char *j;

    oversize_skip_stage(&stage, 1000);
    {
        /* the project's writer: text that does not depend on the libbson version */
        struct ejson_buf b = {0};
        ejson_write_document(&b, &stage, EJSON_RELAXED, EJSON_SEP_DEFAULT);
        j = ejson_buf_steal(&b, NULL);
        ejson_buf_free(&b);
    }
    assert_non_null(strstr(j, "{\"$lte\": [{\"$bsonSize\": \"$fullDocument\"}, 1000]}"));
    assert_non_null(
        strstr(j, "{\"$lte\": [{\"$bsonSize\": \"$fullDocumentBeforeChange\"}, 1000]}"));
    assert_non_null(strstr(j, "\"then\": \"$$ROOT\""));
    assert_non_null(strstr(j, "\"_id\": \"$_id\""));
    free(j);
    bson_destroy(&stage);

    bson_t *stub = json("{\"_id\": {\"_data\": \"T\"}, \"" OVERSIZE_STUB_FIELD "\":"
                        " {\"fullDocument\": 2048, \"fullDocumentBeforeChange\": null}}");
    assert_true(oversize_is_stub(stub, &full, &before));
    assert_int_equal(full, 2048);
    assert_int_equal(before, -1);
    bson_t *ev = json("{\"_id\": {\"_data\": \"T\"}, \"operationType\": \"insert\"}");
    assert_false(oversize_is_stub(ev, &full, &before));
    bson_destroy(stub);
    bson_destroy(ev);
}

/* One pass finds the four top-level fields the capture reads, wherever they
 * are, and tells a scan of this event from one of another. */
static void change_fields_in_one_pass(void **state)
{
    (void)state;
    bson_t *a = json("{\"operationType\": \"update\", \"clusterTime\": {\"$timestamp\": "
                     "{\"t\": 5, \"i\": 2}}, \"x\": 1, \"splitEvent\": {\"fragment\": 1, "
                     "\"of\": 2}, \"__mongocdc_oversize\": {\"fullDocument\": 9}, "
                     "\"_id\": {\"_data\": \"82\"}}");
    bson_t *b = json("{\"_id\": {\"_data\": \"83\"}, \"operationType\": \"insert\"}");
    struct change_fields f;
    change_fields_scan(a, &f);
    assert_true(f.has_id && f.has_time && f.has_split && f.has_stub);
    assert_string_equal(bson_iter_key(&f.time), "clusterTime");
    assert_string_equal(bson_iter_key(&f.id), "_id");
    int64_t full = 0, before = 0;
    assert_true(oversize_stub_in(&f, &full, &before));
    assert_int_equal(full, 9);
    assert_int_equal(before, -1);
    assert_true(change_fields_of(&f, a));
    assert_false(change_fields_of(&f, b));
    change_fields_scan(b, &f);
    assert_true(f.has_id);
    assert_false(f.has_time || f.has_split || f.has_stub);
    assert_false(oversize_stub_in(&f, &full, &before));
    bson_destroy(a);
    bson_destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reassembles_fragments_in_order),
        cmocka_unit_test(refuses_fragments_out_of_sequence),
        cmocka_unit_test(split_stage_versions),
        cmocka_unit_test(skip_stage_and_stub),
        cmocka_unit_test(change_fields_in_one_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
