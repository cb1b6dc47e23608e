/*
 * Unit tests for capture/oplog_diff: every $v: 2 diff shape of the server's
 * document_diff_serialization.h (d/u/i, nested sub-diffs, arrays with a, l,
 * u<n>, s<n>) decoded into the $v: 1 form, oplog_stxnid's 1.9 id, and
 * oplog_feed turning entries into events on a detached reader.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <bson/bson.h>

#include "capture/oplog.h"
#include "capture/oplog_diff.h"

static bson_t *from_json(const char *json)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &e);
    if (b == NULL)
        fail_msg("bad JSON %s: %s", json, e.message);
    return b;
}

/* got must equal the document want_json parses to: the same BSON bytes, so
 * names, order, values and types (never libbson's JSON text, whose spacing
 * changes between versions). what names the case in the failure. */
static void expect_bson(const bson_t *got, const char *want_json, const char *what)
{
    bson_t *want = from_json(want_json);
    if (!bson_equal(got, want)) {
        char *g = bson_as_canonical_extended_json(got, NULL);
        char *w = bson_as_canonical_extended_json(want, NULL);
        fail_msg("%s:\n got %s\nwant %s", what, g, w);
    }
    bson_destroy(want);
}

static void expect(const char *o_json, enum oplog_diff_result want, const char *v1_json)
{
    bson_t *o = from_json(o_json);
    bson_t out;
    struct mcdc_error err = MCDC_ERROR_INIT;
    enum oplog_diff_result r = oplog_diff_to_v1(o, &out, &err);
    if (r != want)
        fail_msg("%s: result %d, expected %d (%s)", o_json, (int)r, (int)want, err.msg);
    if (r == OPLOG_DIFF_DECODED) {
        expect_bson(&out, v1_json, o_json);
        bson_destroy(&out);
    }
    bson_destroy(o);
}

static void decodes_every_shape(void **state)
{
    (void)state;
    /* top level: u, i, d */
    expect("{\"$v\": 2, \"diff\": {\"u\": {\"status\": \"shipped\"}}}", OPLOG_DIFF_DECODED,
           "{\"$v\": 1, \"$set\": {\"status\": \"shipped\"}}");
    expect("{\"$v\": 2, \"diff\": {\"d\": {\"note\": false}, \"u\": {\"s\": 1}, \"i\": {\"n\": "
           "{\"x\": 1}}}}",
           OPLOG_DIFF_DECODED,
           "{\"$v\": 1, \"$set\": {\"s\": 1, \"n\": {\"x\": 1}}, \"$unset\": {\"note\": true}}");
    /* nested object sub-diffs, two levels */
    expect("{\"$v\": 2, \"diff\": {\"saddr\": {\"u\": {\"zip\": \"0151\"}, \"sgeo\": {\"d\": "
           "{\"lat\": false}, \"i\": {\"alt\": 3}}}}}",
           OPLOG_DIFF_DECODED,
           "{\"$v\": 1, \"$set\": {\"addr.zip\": \"0151\", \"addr.geo.alt\": 3}, \"$unset\": "
           "{\"addr.geo.lat\": true}}");
    /* arrays: element set, element sub-diff, nested array */
    expect("{\"$v\": 2, \"diff\": {\"sitems\": {\"a\": true, \"u2\": 7, \"s0\": {\"u\": {\"qty\": "
           "3}}, \"s1\": {\"a\": true, \"u0\": \"x\"}}}}",
           OPLOG_DIFF_DECODED,
           "{\"$v\": 1, \"$set\": {\"items.2\": 7, \"items.0.qty\": 3, \"items.1.0\": \"x\"}}");
    /* a field whose name starts with a digit or an s is still a field path */
    expect("{\"$v\": 2, \"diff\": {\"ss\": {\"u\": {\"s1\": true}}}}", OPLOG_DIFF_DECODED,
           "{\"$v\": 1, \"$set\": {\"s.s1\": true}}");
    /* truncation: $push with an empty $each and $slice keeps the first n elements */
    expect("{\"$v\": 2, \"diff\": {\"sitems\": {\"a\": true, \"l\": 1}}}", OPLOG_DIFF_DECODED,
           "{\"$v\": 1, \"$push\": {\"items\": {\"$each\": [], \"$slice\": 1}}}");
    expect("{\"$v\": 2, \"diff\": {\"sa\": {\"sb\": {\"a\": true, \"l\": 0}}}}", OPLOG_DIFF_DECODED,
           "{\"$v\": 1, \"$push\": {\"a.b\": {\"$each\": [], \"$slice\": 0}}}");
    /* truncation with element changes ($pull from the middle), a nested array
     * truncated inside an element, and an Int64 length */
    expect("{\"$v\": 2, \"diff\": {\"u\": {\"n\": 1}, \"st\": {\"a\": true, \"l\": 2, "
           "\"u1\": 3, \"s0\": {\"a\": true, \"l\": {\"$numberLong\": \"1\"}}}}}",
           OPLOG_DIFF_DECODED,
           "{\"$v\": 1, \"$set\": {\"n\": 1, \"t.1\": 3}, \"$push\": {\"t\": {\"$each\": [], "
           "\"$slice\": 2}, \"t.0\": {\"$each\": [], \"$slice\": 1}}}");
    expect("{\"$v\": 2, \"diff\": {\"st\": {\"a\": true, \"l\": -1}}}", OPLOG_DIFF_MALFORMED, NULL);
    expect("{\"$v\": 2, \"diff\": {\"st\": {\"a\": true, \"l\": \"2\"}}}", OPLOG_DIFF_MALFORMED,
           NULL);
    /* not a $v: 2 diff */
    expect("{\"$v\": 1, \"$set\": {\"a\": 1}}", OPLOG_DIFF_NOT_V2, NULL);
    expect("{\"_id\": 1, \"a\": 1}", OPLOG_DIFF_NOT_V2, NULL);
    /* malformed */
    expect("{\"$v\": 2}", OPLOG_DIFF_MALFORMED, NULL);
    expect("{\"$v\": 2, \"diff\": {\"x\": {}}}", OPLOG_DIFF_MALFORMED, NULL);
    expect("{\"$v\": 2, \"diff\": {\"u\": 1}}", OPLOG_DIFF_MALFORMED, NULL);
    expect("{\"$v\": 2, \"diff\": {\"sarr\": {\"a\": true, \"q1\": 1}}}", OPLOG_DIFF_MALFORMED,
           NULL);
}

static void stxnid_is_19_transaction_id(void **state)
{
    (void)state;
    char buf[96];
    /* lsid.id as a UUID binary: Java UUID.nameUUIDFromBytes of its 16 bytes
     * (version 3, IETF variant), then ":<txnNumber>". */
    bson_t *lsid = from_json("{\"id\": {\"$binary\": {\"base64\": \"AAAAAAAAAAAAAAAAAAAAAA==\", "
                             "\"subType\": \"04\"}}}");
    assert_true(oplog_stxnid(lsid, 5, buf, sizeof buf));
    /* MD5 of 16 zero bytes = 4ae71336e44bf9bf79d2752e234818a5 */
    assert_string_equal(buf, "4ae71336-e44b-39bf-b9d2-752e234818a5:5");
    bson_destroy(lsid);
    lsid = from_json("{\"uid\": 1}");
    assert_false(oplog_stxnid(lsid, 5, buf, sizeof buf));
    bson_destroy(lsid);
}

/* oplog_feed on a detached reader: entries as a 6.0 server writes them
 * (mongo-sim-spec.md §5.2, §5.4) become the 1.9 oplog events. */
static enum capture_status feed(struct oplog_reader *r, const char *json, struct oplog_item *it)
{
    bson_t *e = from_json(json);
    enum capture_status s = oplog_feed(r, e, it);
    bson_destroy(e);
    return s;
}

static void detached_reader_parses_entries(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    struct oplog_reader *r = oplog_detached(&cfg);
    struct oplog_item it;
    oplog_item_init(&it);

    /* a retryable insert: stxnid from its session, no h (source.h null), no tord */
    assert_int_equal(
        feed(r,
             "{\"lsid\": {\"id\": {\"$binary\": {\"base64\": \"AAAAAAAAAAAAAAAAAAAAAA==\", "
             "\"subType\": \"04\"}}}, \"txnNumber\": {\"$numberLong\": \"5\"}, \"op\": \"i\", "
             "\"ns\": \"db.c\", \"o\": {\"_id\": 1}, \"o2\": {\"_id\": 1}, \"stmtId\": 0, "
             "\"ts\": {\"$timestamp\": {\"t\": 100, \"i\": 2}}, \"t\": 1, \"v\": 2}",
             &it),
        CAPTURE_EVENT);
    assert_true(it.emit);
    assert_int_equal(it.ev.op, MCDC_OP_INSERT);
    assert_false(it.ev.oplog_has_h);
    assert_int_equal(it.ev.oplog_tord, 0);
    assert_string_equal(it.ev.oplog_stxnid, "4ae71336-e44b-39bf-b9d2-752e234818a5:5");
    assert_true(it.pos.oplog && !it.pos.has_h && it.pos.sec == 100 && it.pos.ord == 2);
    /* the offset carries it too (1.9's SourceInfo.lastOffset) */
    assert_string_equal(it.pos.stxnid, "4ae71336-e44b-39bf-b9d2-752e234818a5:5");
    /* h 0 (MongoDB 4.2) counts as no h: extractSessionTxnId's `opId == 0L` */
    assert_int_equal(
        feed(r,
             "{\"lsid\": {\"id\": \"s\"}, \"txnNumber\": 3, \"op\": \"i\", \"ns\": \"db.c\", "
             "\"o\": {\"_id\": 4}, \"h\": {\"$numberLong\": \"0\"}, "
             "\"ts\": {\"$timestamp\": {\"t\": 100, \"i\": 2}}}",
             &it),
        CAPTURE_EVENT);
    assert_true(it.emit && it.ev.oplog_has_h && it.ev.oplog_h == 0);
    assert_string_equal(it.ev.oplog_stxnid, "s:3");
    assert_string_equal(it.pos.stxnid, "s:3");
    /* an update truncating an array: the decoded patch */
    assert_int_equal(feed(r,
                          "{\"op\": \"u\", \"ns\": \"db.c\", \"o\": {\"$v\": 2, \"diff\": "
                          "{\"sa\": {\"a\": true, \"l\": 1}}}, \"o2\": {\"_id\": 1}, "
                          "\"ts\": {\"$timestamp\": {\"t\": 100, \"i\": 3}}}",
                          &it),
                     CAPTURE_EVENT);
    assert_true(it.emit && it.ev.has_oplog_patch && it.ev.oplog_stxnid == NULL);
    assert_string_equal(it.pos.stxnid, "");
    expect_bson(&it.ev.oplog_patch,
                "{\"$v\": 1, \"$push\": {\"a\": {\"$each\": [], \"$slice\": 1}}}",
                "the truncating update's patch");
    /* an entry with h (MongoDB < 4.4): h kept, no stxnid */
    assert_int_equal(
        feed(r,
             "{\"op\": \"d\", \"ns\": \"db.c\", \"o\": {\"_id\": 1}, \"h\": "
             "{\"$numberLong\": \"-7\"}, \"ts\": {\"$timestamp\": {\"t\": 100, \"i\": 4}}}",
             &it),
        CAPTURE_EVENT);
    assert_true(it.ev.oplog_has_h && it.ev.oplog_h == -7 && it.pos.has_h);
    assert_true(it.ev.oplog_stxnid == NULL && it.pos.stxnid[0] == '\0');
    /* a transaction: operations in order with tord, the last marked */
    assert_int_equal(
        feed(r,
             "{\"op\": \"c\", \"ns\": \"admin.$cmd\", \"o\": {\"applyOps\": ["
             "{\"op\": \"i\", \"ns\": \"db.c\", \"o\": {\"_id\": 2}},"
             "{\"op\": \"d\", \"ns\": \"db.c\", \"o\": {\"_id\": 3}}]}, "
             "\"lsid\": {\"id\": \"s\"}, \"txnNumber\": 9, "
             "\"prevOpTime\": {\"ts\": {\"$timestamp\": {\"t\": 0, \"i\": 0}}, \"t\": -1}, "
             "\"ts\": {\"$timestamp\": {\"t\": 101, \"i\": 1}}}",
             &it),
        CAPTURE_EVENT);
    assert_true(it.emit && it.ev.oplog_tord == 1 && !it.ev.oplog_txn_last);
    assert_string_equal(it.ev.oplog_stxnid, "s:9");
    assert_string_equal(it.pos.stxnid, "s:9");
    assert_int_equal(oplog_next(r, &it), CAPTURE_EVENT);
    assert_true(it.ev.op == MCDC_OP_DELETE && it.ev.oplog_tord == 2 && it.ev.oplog_txn_last);
    assert_int_equal(it.pos.tord, 2);
    assert_int_equal(oplog_next(r, &it), CAPTURE_IDLE);
    /* a no-op moves the position only */
    assert_int_equal(feed(r,
                          "{\"op\": \"n\", \"ns\": \"\", \"o\": {\"msg\": \"periodic noop\"}, "
                          "\"ts\": {\"$timestamp\": {\"t\": 102, \"i\": 1}}}",
                          &it),
                     CAPTURE_EVENT);
    assert_false(it.emit);
    assert_int_equal(it.pos.sec, 102);
    /* the commit of a partialTxn chain needs the oplog: an ENCODE error here */
    assert_int_equal(
        feed(r,
             "{\"op\": \"c\", \"ns\": \"admin.$cmd\", \"o\": {\"applyOps\": [], \"count\": 2}, "
             "\"prevOpTime\": {\"ts\": {\"$timestamp\": {\"t\": 102, \"i\": 5}}, \"t\": 1}, "
             "\"ts\": {\"$timestamp\": {\"t\": 103, \"i\": 1}}}",
             &it),
        CAPTURE_ERROR);
    struct mcdc_error err = MCDC_ERROR_INIT;
    oplog_failure(r, NULL, &err);
    assert_int_equal(err.domain, MCDC_ERR_ENCODE);
    assert_non_null(strstr(err.msg, "prevOpTime"));
    oplog_item_clear(&it);
    oplog_destroy(r);

    /* a malformed entry is an error, not a crash */
    r = oplog_detached(&cfg);
    oplog_item_init(&it);
    assert_int_equal(feed(r, "{\"op\": \"u\", \"ns\": \"db.c\", \"o\": {\"$v\": 2}}", &it),
                     CAPTURE_ERROR);
    oplog_item_clear(&it);
    oplog_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decodes_every_shape),
        cmocka_unit_test(stxnid_is_19_transaction_id),
        cmocka_unit_test(detached_reader_parses_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
