/*
 * Unit tests for the encoder details found by running Debezium's own
 * connector side by side (debezium-format.md §1.5, §1.6, §1.7):
 *  - the four __debezium.context.* headers of extended.headers.enabled on
 *    data records and tombstones, not on transaction records; a runId that
 *    is a fresh version-7 UUID per encoder (as Debezium 3.6 draws it);
 *  - 3.x snapshot source.ts_us / ts_ns from the µs clock read, streaming ones
 *    from the server time × 1000;
 *  - 1.9 snapshot records with a position: source.ts_ms = seconds × 1000,
 *    ord = increment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "encode/encode.h"
#include "event/event.h"

#define NOW_US 1694627139500123LL /* µs; the ms value is 1694627139500 */

static void cfg_init(struct mcdc_config *c, enum mcdc_dialect d)
{
    memset(c, 0, sizeof *c);
    c->topic_prefix = "fulfillment";
    c->dialect = d;
    c->capture_mode = MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL;
    c->tombstones_on_delete = true;
    c->schema_name_adjust =
        d == MCDC_DIALECT_1_9 ? MCDC_SCHEMA_ADJUST_AVRO : MCDC_SCHEMA_ADJUST_NONE;
    c->topic_delimiter = ".";
    c->topic_transaction = "transaction";
    c->topic_heartbeat_prefix = "__debezium-heartbeat";
    c->debezium_version = d == MCDC_DIALECT_1_9 ? "1.9.8.Final" : "3.6.1.Final";
}

static struct encoder *enc_new(const struct mcdc_config *cfg)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct encoder *enc = encoder_new(cfg, &err);
    if (enc == NULL)
        fail_msg("encoder_new: %s", err.msg);
    return enc;
}

static bson_t *from_json(const char *json)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &e);
    if (b == NULL)
        fail_msg("bad JSON (%s): %s", e.message, json);
    return b;
}

static void encode_json_change(struct encoder *enc, const char *json, struct mcdc_records *out)
{
    bson_t *doc = from_json(json);
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool emit = false;
    assert_true(event_from_change(doc, &ev, &emit, &err));
    assert_true(emit);
    ev.rs = "rs0";
    if (!encoder_encode(enc, &ev, NOW_US, out, &err))
        fail_msg("encoder_encode: %s", err.msg);
    bson_destroy(doc);
}

static void encode_read(struct encoder *enc, bool with_ts, struct mcdc_records *out)
{
    bson_t *doc = from_json("{\"_id\": 7, \"n\": \"x\"}");
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(event_from_snapshot_doc(doc, "inventory", "customers", MCDC_SNAP_TRUE, &ev, &err));
    ev.rs = "rs0";
    if (with_ts) {
        ev.has_cluster_time = true;
        ev.ts_sec = 1694627100;
        ev.ts_inc = 17;
    }
    assert_true(encoder_encode(enc, &ev, NOW_US, out, &err));
    bson_destroy(doc);
}

static bool is_uuid7(const char *s)
{
    if (strlen(s) != 36)
        return false;
    for (size_t i = 0; i < 36; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? s[i] != '-' : strchr("0123456789abcdef", s[i]) == NULL)
            return false;
    }
    return s[14] == '7' && strchr("89ab", s[19]) != NULL;
}

static void assert_context_headers(const struct mcdc_record *r, const char *run_id)
{
    assert_int_equal(r->header_count, 4);
    assert_string_equal(r->headers[0].name, "__debezium.context.connectorLogicalName");
    assert_string_equal(r->headers[0].value, "fulfillment");
    assert_string_equal(r->headers[1].name, "__debezium.context.taskId");
    assert_string_equal(r->headers[1].value, "0");
    assert_string_equal(r->headers[2].name, "__debezium.context.connectorName");
    assert_string_equal(r->headers[2].value, "mongodb");
    assert_string_equal(r->headers[3].name, "__debezium.context.runId");
    assert_string_equal(r->headers[3].value, run_id);
}

static const char delete_json[] =
    "{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"delete\","
    " \"clusterTime\": {\"$timestamp\": {\"t\": 1694627000, \"i\": 3}},"
    " \"lsid\": {\"id\": {\"$binary\": {\"base64\": \"AAAAAAAAAAAAAAAAAAAAAA==\", \"subType\": "
    "\"04\"}}, \"uid\": {\"$binary\": {\"base64\": \"AA==\", \"subType\": \"00\"}}},"
    " \"txnNumber\": {\"$numberLong\": \"1\"},"
    " \"ns\": {\"db\": \"inventory\", \"coll\": \"customers\"}, \"documentKey\": {\"_id\": 42}}";

static void headers_on_data_records_and_tombstones(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.extended_headers_enabled = true;
    cfg.provide_transaction_metadata = true;
    struct encoder *enc = enc_new(&cfg);
    const char *run_id = encoder_run_id(enc);
    assert_true(is_uuid7(run_id));
    struct mcdc_records out = {0};
    encode_json_change(enc, delete_json, &out);
    /* BEGIN, the delete, its tombstone */
    assert_int_equal(out.count, 3);
    assert_string_equal(out.items[0].topic, "fulfillment.transaction");
    assert_int_equal(out.items[0].header_count, 0);
    assert_context_headers(&out.items[1], run_id);
    assert_non_null(out.items[1].value);
    assert_context_headers(&out.items[2], run_id);
    assert_null(out.items[2].value);
    records_release(&out);

    /* Snapshot reads carry them too; encoder_set_run_id replaces the value. */
    encoder_set_run_id(enc, "00000000-0000-7000-8000-000000000001");
    encode_read(enc, false, &out);
    assert_int_equal(out.count, 1);
    assert_context_headers(&out.items[0], "00000000-0000-7000-8000-000000000001");
    records_release(&out);

    /* Heartbeats have none. */
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(encoder_heartbeat(enc, 1694627139500, &out, &err));
    assert_int_equal(out.items[0].header_count, 0);
    records_release(&out);
    encoder_destroy(enc);
}

static void run_id_differs_per_encoder_and_headers_are_optional(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.extended_headers_enabled = true;
    struct encoder *a = enc_new(&cfg), *b = enc_new(&cfg);
    assert_true(is_uuid7(encoder_run_id(a)));
    assert_true(is_uuid7(encoder_run_id(b)));
    assert_string_not_equal(encoder_run_id(a), encoder_run_id(b));
    encoder_destroy(a);
    encoder_destroy(b);

    cfg.extended_headers_enabled = false;
    struct encoder *enc = enc_new(&cfg);
    struct mcdc_records out = {0};
    encode_json_change(enc, delete_json, &out);
    for (size_t i = 0; i < out.count; i++) {
        assert_int_equal(out.items[i].header_count, 0);
        assert_null(out.items[i].headers);
    }
    records_release(&out);
    encoder_destroy(enc);
}

static void snapshot_ts_us_is_the_clock_read_streaming_is_server_time(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    struct encoder *enc = enc_new(&cfg);
    struct mcdc_records out = {0};
    encode_read(enc, true, &out);
    const char *v = out.items[0].value;
    assert_non_null(strstr(v, "\"ts_ms\":1694627139500,\"snapshot\":\"true\""));
    assert_non_null(strstr(v, "\"ts_us\":1694627139500123,\"ts_ns\":1694627139500123000,"));
    assert_non_null(strstr(v, "\"op\":\"r\",\"ts_ms\":1694627139500,"));
    records_release(&out);

    encode_json_change(enc,
                       "{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"insert\","
                       " \"clusterTime\": {\"$timestamp\": {\"t\": 1694627000, \"i\": 3}},"
                       " \"ns\": {\"db\": \"inventory\", \"coll\": \"customers\"},"
                       " \"fullDocument\": {\"_id\": 1}, \"documentKey\": {\"_id\": 1}}",
                       &out);
    v = out.items[0].value;
    assert_non_null(strstr(v, "\"ts_ms\":1694627000000,\"snapshot\":\"false\""));
    assert_non_null(strstr(v, "\"ts_us\":1694627000000000,\"ts_ns\":1694627000000000000,"));
    assert_non_null(strstr(v, "\"op\":\"c\",\"ts_ms\":1694627139500,"));
    records_release(&out);
    encoder_destroy(enc);
}

static void snapshot_19_carries_the_start_position(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_1_9);
    struct encoder *enc = enc_new(&cfg);
    struct mcdc_records out = {0};
    encode_read(enc, true, &out);
    assert_non_null(strstr(out.items[0].value,
                           "\"ts_ms\":1694627100000,\"snapshot\":\"true\",\"db\":\"inventory\","
                           "\"sequence\":null,\"rs\":\"rs0\",\"collection\":\"customers\","
                           "\"ord\":17,"));
    assert_int_equal(out.items[0].header_count, 0);
    records_release(&out);
    /* Without a position (no oplog access, no timestamp): 0 / -1. */
    encode_read(enc, false, &out);
    assert_non_null(strstr(out.items[0].value, "\"ts_ms\":0,\"snapshot\":\"true\""));
    assert_non_null(strstr(out.items[0].value, "\"ord\":-1,"));
    records_release(&out);
    encoder_destroy(enc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(headers_on_data_records_and_tombstones),
        cmocka_unit_test(run_id_differs_per_encoder_and_headers_are_optional),
        cmocka_unit_test(snapshot_ts_us_is_the_clock_read_streaming_is_server_time),
        cmocka_unit_test(snapshot_19_carries_the_start_position),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
