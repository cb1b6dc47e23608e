/*
 * Unit tests for encode: keys, envelopes per dialect, Kafka Connect schemas,
 * topics and schema names, transactions, heartbeats, namespace filters and
 * field selection. Expected bytes come from encode_golden.tsv, whose texts
 * are quoted from debezium-format.md or assembled from its field tables.
 * Configs are built by hand (config.h is a plain struct).
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
#include "encode/encode_internal.h"
#include "event/event.h"

#define NOW 1694627139500LL
#define NOW_US (NOW * 1000 + 123) /* same instant, µs: sub-ms digits must reach ts_us */

/* ---- golden file ---------------------------------------------------------- */

struct golden {
    char *name;
    char *fields[3];
    size_t nfields;
};

static struct golden goldens[128];
static size_t ngoldens;
static char *golden_buf;

static int load_goldens(void **state)
{
    (void)state;
    const char *dir = getenv("MCDC_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/unit/encode_golden.tsv", dir ? dir : ".");
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s (set MCDC_SOURCE_DIR)\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    golden_buf = malloc((size_t)n + 1);
    size_t got = fread(golden_buf, 1, (size_t)n, f);
    golden_buf[got] = '\0';
    fclose(f);
    for (char *line = strtok(golden_buf, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#' || ngoldens == sizeof goldens / sizeof goldens[0])
            continue;
        struct golden *g = &goldens[ngoldens++];
        char *tab = strchr(line, '\t');
        g->name = line;
        while (tab && g->nfields < 3) {
            *tab = '\0';
            g->fields[g->nfields++] = tab + 1;
            tab = strchr(tab + 1, '\t');
        }
    }
    return 0;
}

static int free_goldens(void **state)
{
    (void)state;
    free(golden_buf);
    return 0;
}

static const char *golden(const char *name)
{
    for (size_t i = 0; i < ngoldens; i++)
        if (strcmp(goldens[i].name, name) == 0)
            return goldens[i].fields[0];
    fail_msg("no golden \"%s\"", name);
    return NULL;
}

/* ---- helpers -------------------------------------------------------------- */

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

static bson_t *from_json(const char *json)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &e);
    if (b == NULL)
        fail_msg("bad JSON (%s): %s", e.message, json);
    return b;
}

static struct encoder *enc_new(const struct mcdc_config *cfg)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct encoder *enc = encoder_new(cfg, &err);
    if (enc == NULL)
        fail_msg("encoder_new: %s", err.msg);
    return enc;
}

/* Parses a change event from golden input `in` and encodes it. */
static void encode_change(struct encoder *enc, const bson_t *doc, struct mcdc_records *out)
{
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool emit = false;
    assert_true(event_from_change(doc, &ev, &emit, &err));
    assert_true(emit);
    ev.rs = "rs0";
    if (!encoder_encode(enc, &ev, NOW_US, out, &err))
        fail_msg("encoder_encode: %s", err.msg);
}

static void assert_text(const char *got, const char *want)
{
    if (got == NULL || strcmp(got, want) != 0)
        fail_msg("\n got: %s\nwant: %s", got ? got : "(null)", want);
}

/* The string member `name` of a JSON object text (independent of our writer:
 * libbson's JSON parser undoes Jackson's escaping). Caller frees. */
static char *json_member(const char *json, const char *name)
{
    bson_t *b = from_json(json);
    bson_iter_t it;
    char *s = NULL;
    if (bson_iter_init_find(&it, b, name) && BSON_ITER_HOLDS_UTF8(&it))
        s = strdup(bson_iter_utf8(&it, NULL));
    bson_destroy(b);
    return s;
}

/* ---- keys (§1.1) ---------------------------------------------------------- */

static void keys_table(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    struct encoder *enc = enc_new(&cfg);
    size_t n = 0;
    for (size_t i = 0; i < ngoldens; i++) {
        if (strcmp(goldens[i].name, "key") != 0)
            continue;
        bson_t *doc = from_json(goldens[i].fields[0]);
        struct mcdc_event ev;
        struct mcdc_error err = MCDC_ERROR_INIT;
        struct mcdc_records out = {0};
        assert_true(
            event_from_snapshot_doc(doc, "inventory", "customers", MCDC_SNAP_TRUE, &ev, &err));
        assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
        assert_int_equal(out.count, 1);
        assert_text(out.items[0].key, goldens[i].fields[1]);
        assert_int_equal(out.items[0].key_len, strlen(goldens[i].fields[1]));
        records_release(&out);
        bson_destroy(doc);
        n++;
    }
    assert_int_equal(n, 12);
    encoder_destroy(enc);
}

static void key_uses_only_id_on_sharded_collections(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_1_9);
    struct encoder *enc = enc_new(&cfg);
    bson_t *doc = from_json("{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"delete\","
                            " \"clusterTime\": {\"$timestamp\": {\"t\": 1, \"i\": 1}},"
                            " \"ns\": {\"db\": \"inventory\", \"coll\": \"customers\"},"
                            " \"documentKey\": {\"email\": \"foo@bar.com\", \"_id\": 42}}");
    struct mcdc_records out = {0};
    encode_change(enc, doc, &out);
    assert_int_equal(out.count, 2);
    assert_text(out.items[0].key, "{\"id\":\"42\"}");
    records_release(&out);
    bson_destroy(doc);
    encoder_destroy(enc);
}

static void key_with_schema(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.key_schemas_enable = true;
    struct encoder *enc = enc_new(&cfg);
    bson_t *doc = from_json("{\"_id\": {\"$oid\": \"596e275826f08b2730779e1f\"}}");
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_records out = {0};
    assert_true(event_from_snapshot_doc(doc, "inventory", "customers", MCDC_SNAP_TRUE, &ev, &err));
    assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
    assert_text(out.items[0].key, golden("key_schema"));
    assert_string_equal(out.items[0].topic, "fulfillment.inventory.customers");
    records_release(&out);
    bson_destroy(doc);
    encoder_destroy(enc);
}

/* ---- envelopes (§1.3, §1.8) ----------------------------------------------- */

/* Encodes golden input `in` with dialect d and compares the value. */
static void check_value(enum mcdc_dialect d, const char *in, const char *want, size_t count)
{
    struct mcdc_config cfg;
    cfg_init(&cfg, d);
    struct encoder *enc = enc_new(&cfg);
    bson_t *doc = from_json(golden(in));
    struct mcdc_records out = {0};
    encode_change(enc, doc, &out);
    assert_int_equal(out.count, count);
    assert_string_equal(out.items[0].topic, "fulfillment.inventory.customers");
    assert_text(out.items[0].value, golden(want));
    assert_int_equal(out.items[0].value_len, strlen(golden(want)));
    records_release(&out);
    bson_destroy(doc);
    encoder_destroy(enc);
}

static void insert_3x_payload(void **state)
{
    (void)state;
    check_value(MCDC_DIALECT_3_X, "in_insert", "insert_3x", 1);
}

static void update_envelopes(void **state)
{
    (void)state;
    check_value(MCDC_DIALECT_3_X, "in_update", "update_3x", 1);
    check_value(MCDC_DIALECT_1_9, "in_update", "update_19", 1);
}

static void replace_envelopes(void **state)
{
    (void)state;
    check_value(MCDC_DIALECT_3_X, "in_replace", "replace_3x", 1);
    check_value(MCDC_DIALECT_1_9, "in_replace", "replace_19", 1);
}

static void delete_envelopes_and_tombstones(void **state)
{
    (void)state;
    check_value(MCDC_DIALECT_3_X, "in_delete", "delete_3x", 2);
    check_value(MCDC_DIALECT_1_9, "in_delete", "delete_19", 2);

    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    struct encoder *enc = enc_new(&cfg);
    bson_t *doc = from_json(golden("in_delete"));
    struct mcdc_records out = {0};
    encode_change(enc, doc, &out);
    assert_int_equal(out.count, 2);
    assert_string_equal(out.items[1].topic, out.items[0].topic);
    assert_string_equal(out.items[1].key, out.items[0].key);
    assert_null(out.items[1].value);
    assert_int_equal(out.items[1].value_len, 0);
    records_release(&out);
    encoder_destroy(enc);

    cfg.tombstones_on_delete = false;
    enc = enc_new(&cfg);
    encode_change(enc, doc, &out);
    assert_int_equal(out.count, 1);
    assert_non_null(out.items[0].value);
    records_release(&out);
    encoder_destroy(enc);
    bson_destroy(doc);
}

static void value_schemas(void **state)
{
    (void)state;
    static const struct {
        enum mcdc_dialect d;
        const char *schema;
        const char *in;
        const char *payload;
    } cases[] = {
        {MCDC_DIALECT_3_X, "schema_3x", "in_insert", "insert_3x"},
        {MCDC_DIALECT_1_9, "schema_19", "in_update", "update_19"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct mcdc_config cfg;
        cfg_init(&cfg, cases[i].d);
        cfg.value_schemas_enable = true;
        struct encoder *enc = enc_new(&cfg);
        bson_t *doc = from_json(golden(cases[i].in));
        struct mcdc_records out = {0};
        encode_change(enc, doc, &out);
        char want[16384];
        snprintf(want, sizeof want, "{\"schema\":%s,\"payload\":%s}", golden(cases[i].schema),
                 golden(cases[i].payload));
        assert_text(out.items[0].value, want);
        /* keys stay bare unless key schemas are on */
        assert_text(out.items[0].key,
                    "{\"id\":\"{\\\"$oid\\\": \\\"6501f5c3e4b0a1b2c3d4e5f6\\\"}\"}");
        records_release(&out);
        bson_destroy(doc);
        encoder_destroy(enc);
    }
}

static void snapshot_reads(void **state)
{
    (void)state;
    static const struct {
        enum mcdc_dialect d;
        enum mcdc_snapshot_flag flag;
        bool has_pos;
        uint32_t sec, inc;
        const char *want;
    } cases[] = {
        {MCDC_DIALECT_3_X, MCDC_SNAP_TRUE, false, 0, 0, "read_true_3x"},
        {MCDC_DIALECT_1_9, MCDC_SNAP_LAST, true, 1694627000, 5, "read_last_19"},
        {MCDC_DIALECT_3_X, MCDC_SNAP_INCREMENTAL, true, 1694627100, 9, "read_incr_3x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct mcdc_config cfg;
        cfg_init(&cfg, cases[i].d);
        struct encoder *enc = enc_new(&cfg);
        bson_t *doc = from_json("{\"_id\": 7, \"n\": \"x\"}");
        struct mcdc_event ev;
        struct mcdc_error err = MCDC_ERROR_INIT;
        struct mcdc_records out = {0};
        assert_true(
            event_from_snapshot_doc(doc, "inventory", "customers", cases[i].flag, &ev, &err));
        ev.rs = "rs0";
        ev.has_cluster_time = cases[i].has_pos;
        ev.ts_sec = cases[i].sec;
        ev.ts_inc = cases[i].inc;
        assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
        assert_int_equal(out.count, 1);
        assert_text(out.items[0].value, golden(cases[i].want));
        records_release(&out);
        bson_destroy(doc);
        encoder_destroy(enc);
    }
}

static void oplog_patch_and_filter(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_1_9);
    cfg.capture_mode = MCDC_CAPTURE_OPLOG;
    struct encoder *enc = enc_new(&cfg);
    bson_t *patch = from_json("{\"$v\": 1, \"$set\": {\"first_name\": \"Anne Marie\"}}");
    bson_t *filter = from_json("{\"_id\": 1004}");
    struct mcdc_event ev;
    event_init(&ev);
    ev.op = MCDC_OP_UPDATE;
    ev.db = "inventory";
    ev.db_len = 9;
    ev.coll = "customers";
    ev.coll_len = 9;
    ev.rs = "rs0";
    assert_true(bson_init_static(&ev.document_key, bson_get_data(filter), filter->len));
    ev.has_document_key = true;
    assert_true(bson_init_static(&ev.oplog_patch, bson_get_data(patch), patch->len));
    ev.has_oplog_patch = true;
    assert_true(bson_init_static(&ev.oplog_filter, bson_get_data(filter), filter->len));
    ev.has_oplog_filter = true;
    ev.has_cluster_time = true;
    ev.ts_sec = 1694627139;
    ev.ts_inc = 3;
    ev.oplog_h = 0;
    ev.oplog_has_h = true;
    ev.oplog_tord = 2;
    ev.oplog_stxnid = "a2c1e1a4-2c9b-3b8e-9d2f-6f0e0e5d7b11:5";
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_records out = {0};
    assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
    assert_int_equal(out.count, 1);
    assert_text(out.items[0].key, "{\"id\":\"1004\"}");
    assert_text(out.items[0].value, golden("oplog_update_19"));
    records_release(&out);
    encoder_destroy(enc);

    /* applyOps transaction (§3.5): BEGIN before the first operation, END right
     * after the last one; tord/stxnid in the source */
    cfg.provide_transaction_metadata = true;
    enc = enc_new(&cfg);
    ev.oplog_tord = 1;
    assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
    assert_int_equal(out.count, 2);
    assert_string_equal(out.items[0].topic, "fulfillment.transaction");
    assert_text(out.items[0].value,
                "{\"status\":\"BEGIN\",\"id\":\"a2c1e1a4-2c9b-3b8e-9d2f-"
                "6f0e0e5d7b11:5\",\"event_count\":null,\"data_collections\":null}");
    assert_non_null(strstr(out.items[1].value, "\"tord\":1,\"stxnid\":\"a2c1e1a4-2c9b-3b8e-9d2f-"
                                               "6f0e0e5d7b11:5\""));
    records_release(&out);
    ev.oplog_tord = 2;
    ev.op = MCDC_OP_DELETE;
    ev.has_oplog_patch = false;
    ev.oplog_txn_last = true;
    assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
    assert_int_equal(out.count, 3); /* data, tombstone, END */
    assert_null(out.items[1].value);
    assert_text(out.items[2].value,
                "{\"status\":\"END\",\"id\":\"a2c1e1a4-2c9b-3b8e-9d2f-6f0e0e5d7b11:5\","
                "\"event_count\":2,\"data_collections\":[{\"data_collection\":"
                "\"rs0.inventory.customers\",\"event_count\":2}]}");
    records_release(&out);
    encoder_destroy(enc);
    ev.op = MCDC_OP_UPDATE;
    ev.has_oplog_patch = true;
    ev.oplog_txn_last = false;
    ev.oplog_tord = 2;
    cfg.provide_transaction_metadata = false;

    /* field selection reaches the patch: dotted rules inside $set/$unset */
    static char *excl[] = {"inventory.customers.first_name"};
    static char *ren[] = {"inventory.customers.nick:alias"};
    cfg.field_exclude = (struct mcdc_strlist){excl, 1};
    cfg.field_renames = (struct mcdc_strlist){ren, 1};
    enc = enc_new(&cfg);
    bson_t *patch2 = from_json("{\"$v\": 1, \"$set\": {\"first_name\": \"A\", \"age\": 3},"
                               " \"$unset\": {\"nick\": true}}");
    assert_true(bson_init_static(&ev.oplog_patch, bson_get_data(patch2), patch2->len));
    assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
    char *pj = json_member(out.items[0].value, "patch");
    assert_text(pj, "{\"$v\": 1,\"$set\": {\"age\": 3},\"$unset\": {\"alias\": true}}");
    free(pj);
    records_release(&out);
    bson_destroy(patch2);
    /* and the $push of a decoded truncation: renamed, or dropped when excluded */
    patch2 = from_json("{\"$v\": 1, \"$push\": {\"nick\": {\"$each\": [], \"$slice\": 1},"
                       " \"first_name\": {\"$each\": [], \"$slice\": 0}}}");
    assert_true(bson_init_static(&ev.oplog_patch, bson_get_data(patch2), patch2->len));
    assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
    pj = json_member(out.items[0].value, "patch");
    assert_text(pj, "{\"$v\": 1,\"$push\": {\"alias\": {\"$each\": [],\"$slice\": 1}}}");
    free(pj);
    records_release(&out);
    bson_destroy(patch2);
    /* a rename onto a path the same $set also writes fails the event as in
     * change-stream mode's updatedFields (Debezium: "Document already
     * contains field"): in a $set and in a replacement document */
    static const char *const clashes[] = {
        "{\"$v\": 1, \"$set\": {\"nick\": \"n\", \"alias\": \"a\"}}",
        "{\"$v\": 1, \"$set\": {\"alias\": \"a\", \"age\": 1, \"nick\": \"n\"}}",
        "{\"_id\": 1004, \"nick\": \"n\", \"alias\": \"a\"}",
    };
    for (size_t i = 0; i < sizeof clashes / sizeof clashes[0]; i++) {
        patch2 = from_json(clashes[i]);
        assert_true(bson_init_static(&ev.oplog_patch, bson_get_data(patch2), patch2->len));
        err = (struct mcdc_error)MCDC_ERROR_INIT;
        if (encoder_encode(enc, &ev, NOW_US, &out, &err))
            fail_msg("%s: rename onto an existing field was not refused", clashes[i]);
        assert_int_equal(err.domain, MCDC_ERR_ENCODE);
        assert_non_null(strstr(err.msg, "\"alias\""));
        assert_non_null(strstr(err.msg, "inventory.customers"));
        bson_destroy(patch2);
    }
    encoder_destroy(enc);
    bson_destroy(patch);
    bson_destroy(filter);
}

/* fuzz_oplog regress-txn-ns-embedded-nul: a collection name with an
 * embedded NUL inside a transaction; data_collections counted it from a
 * strndup copy (cut at the NUL) compared over the whole length (heap
 * over-read under ASan). Both operations count under the one name. */
static void txn_collection_name_with_nul(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_1_9);
    cfg.capture_mode = MCDC_CAPTURE_OPLOG;
    cfg.provide_transaction_metadata = true;
    struct encoder *enc = enc_new(&cfg);
    bson_t *doc = from_json("{\"_id\": 3}");
    static const char coll[] = {'c', '\0', 'x', 'y', 'z', 'w', 'v', 'u', 't'};
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_records out = {0};
    for (int i = 1; i <= 2; i++) {
        event_init(&ev);
        ev.op = MCDC_OP_INSERT;
        ev.db = "db";
        ev.db_len = 2;
        ev.coll = coll;
        ev.coll_len = sizeof coll;
        ev.rs = "rs0";
        assert_true(bson_init_static(&ev.full_document, bson_get_data(doc), doc->len));
        ev.has_full_document = true;
        assert_true(bson_init_static(&ev.document_key, bson_get_data(doc), doc->len));
        ev.has_document_key = true;
        ev.has_cluster_time = true;
        ev.ts_sec = 1700000000;
        ev.ts_inc = 9;
        ev.oplog_tord = i;
        ev.oplog_stxnid = "s:4";
        ev.oplog_txn_last = i == 2;
        assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
        if (i == 2) {
            const char *end = out.items[out.count - 1].value;
            assert_non_null(strstr(end, "\"status\":\"END\""));
            assert_non_null(strstr(end, "\"event_count\":2,\"data_collections\":[{"));
            assert_non_null(strstr(end, "\"event_count\":2}]"));
        }
        records_release(&out);
    }
    encoder_destroy(enc);
    bson_destroy(doc);
}

/* §2.5: the after text (STRICT compact) and the same document as updatedFields
 * (RELAXED, default separators), read back through an independent JSON parser. */
static void worked_example(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    struct encoder *enc = enc_new(&cfg);
    bson_t *doc = from_json(golden("in_worked"));
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_records out = {0};
    assert_true(event_from_snapshot_doc(doc, "inventory", "customers", MCDC_SNAP_TRUE, &ev, &err));
    assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
    char *after = json_member(out.items[0].value, "after");
    assert_text(after, golden("worked_after"));
    free(after);
    records_release(&out);

    /* updatedFields: the same document without _id */
    bson_t upd = BSON_INITIALIZER;
    bson_copy_to_excluding_noinit(doc, &upd, "_id", NULL);
    bson_t *ch = from_json("{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"update\","
                           " \"ns\": {\"db\": \"inventory\", \"coll\": \"customers\"},"
                           " \"documentKey\": {\"_id\": 1}, \"updateDescription\": {}}");
    bool emit;
    assert_false(event_from_change(ch, &ev, &emit, &err)); /* no updatedFields */
    bson_t *full = bson_new();
    BCON_APPEND(full, "_id", "{", "_data", "82", "}", "operationType", "update", "ns", "{", "db",
                "inventory", "coll", "customers", "}", "documentKey", "{", "_id", BCON_INT32(1),
                "}", "updateDescription", "{", "updatedFields", BCON_DOCUMENT(&upd),
                "removedFields", "[", "]", "}");
    assert_true(event_from_change(full, &ev, &emit, &err));
    assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
    char *ud = strstr(out.items[0].value, "\"updatedFields\":");
    assert_non_null(ud);
    /* wrap the member into an object for the parser */
    char *end = strstr(ud, ",\"truncatedArrays\"");
    assert_non_null(end);
    char obj[4096];
    snprintf(obj, sizeof obj, "{%.*s}", (int)(end - ud), ud);
    char *updated = json_member(obj, "updatedFields");
    assert_text(updated, golden("worked_updated"));
    free(updated);
    assert_non_null(strstr(out.items[0].value, "\"removedFields\":null"));
    records_release(&out);
    bson_destroy(full);
    bson_destroy(ch);
    bson_destroy(&upd);
    bson_destroy(doc);
    encoder_destroy(enc);
}

/* ---- transactions (§3.4) -------------------------------------------------- */

static bson_t *txn_event(const bson_t *lsid, const char *coll, int id, uint32_t sec, int64_t wall)
{
    bson_t *b = bson_new();
    if (lsid) {
        BSON_APPEND_INT64(b, "txnNumber", 1);
        BSON_APPEND_DOCUMENT(b, "lsid", lsid);
    }
    BCON_APPEND(b, "_id", "{", "_data", "82", "}", "operationType", "insert", "clusterTime",
                BCON_TIMESTAMP(sec, 1), "wallTime", BCON_DATE_TIME(wall), "fullDocument", "{",
                "_id", BCON_INT32(id), "}", "ns", "{", "db", "testDB", "coll", BCON_UTF8(coll), "}",
                "documentKey", "{", "_id", BCON_INT32(id), "}");
    return b;
}

static void transaction_begin_end(void **state)
{
    (void)state;
    static const struct {
        enum mcdc_dialect d;
        const char *begin, *end;
    } cases[] = {
        {MCDC_DIALECT_3_X, "txn_begin_3x", "txn_end_3x"},
        {MCDC_DIALECT_1_9, "txn_begin_19", "txn_end_19"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct mcdc_config cfg;
        cfg_init(&cfg, cases[c].d);
        cfg.provide_transaction_metadata = true;
        struct encoder *enc = enc_new(&cfg);
        bson_t *lsid = from_json(golden("in_lsid"));
        bson_t *e1 = txn_event(lsid, "collectiona", 1, 1694627139, 1694627139123);
        bson_t *e2 = txn_event(lsid, "collectionb", 2, 1694627139, 1694627139123);
        bson_t *e3 = txn_event(NULL, "collectiona", 3, 1694627140, 1694627140456);
        struct mcdc_records out = {0};

        encode_change(enc, e1, &out);
        assert_int_equal(out.count, 2);
        assert_string_equal(out.items[0].topic, "fulfillment.transaction");
        assert_text(out.items[0].key, golden("txn_key"));
        assert_text(out.items[0].value, golden(cases[c].begin));
        assert_string_equal(out.items[1].topic, "fulfillment.testDB.collectiona");
        assert_non_null(strstr(out.items[1].value, golden("txn_lsid")));
        records_release(&out);

        encode_change(enc, e2, &out);
        assert_int_equal(out.count, 1);
        assert_non_null(strstr(out.items[0].value, golden("txn_block_2")));
        records_release(&out);

        encode_change(enc, e3, &out);
        assert_int_equal(out.count, 2);
        assert_string_equal(out.items[0].topic, "fulfillment.transaction");
        assert_text(out.items[0].value, golden(cases[c].end));
        assert_non_null(strstr(out.items[1].value, "\"transaction\":null}"));
        records_release(&out);

        bson_destroy(e1);
        bson_destroy(e2);
        bson_destroy(e3);
        bson_destroy(lsid);
        encoder_destroy(enc);
    }
}

static void transaction_records_with_schemas(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.provide_transaction_metadata = true;
    cfg.key_schemas_enable = cfg.value_schemas_enable = true;
    struct encoder *enc = enc_new(&cfg);
    bson_t *lsid = from_json(golden("in_lsid"));
    bson_t *e1 = txn_event(lsid, "collectiona", 1, 1694627139, 1694627139123);
    struct mcdc_records out = {0};
    encode_change(enc, e1, &out);
    assert_int_equal(out.count, 2);
    assert_text(out.items[0].key, golden("txn_key_schema_3x"));
    assert_text(out.items[0].value, golden("txn_begin_schema_3x"));
    records_release(&out);
    bson_destroy(e1);
    bson_destroy(lsid);
    encoder_destroy(enc);
}

static void transaction_switch_and_eager_end(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.provide_transaction_metadata = true;
    struct encoder *enc = enc_new(&cfg);
    bson_t *lsid = from_json(golden("in_lsid"));
    bson_t *e1 = txn_event(lsid, "collectiona", 1, 100, 100000);
    bson_t *e2 = bson_new();
    /* same lsid, next txnNumber: a different transaction */
    bson_copy_to_excluding_noinit(e1, e2, "txnNumber", NULL);
    BSON_APPEND_INT64(e2, "txnNumber", 2);
    struct mcdc_records out = {0};
    encode_change(enc, e1, &out);
    assert_int_equal(out.count, 2);
    records_release(&out);
    encode_change(enc, e2, &out);
    assert_int_equal(out.count, 3); /* END 1, BEGIN 2, data */
    assert_non_null(strstr(out.items[0].value, "\"status\":\"END\""));
    assert_non_null(strstr(out.items[0].value, "}:1\",\"event_count\":1,"));
    assert_non_null(strstr(out.items[1].value, "\"status\":\"BEGIN\""));
    assert_non_null(strstr(out.items[1].value, "}:2\",\"event_count\":null"));
    assert_non_null(strstr(out.items[2].value, "\"total_order\":1,\"data_collection_order\":1}"));
    records_release(&out);
    /* Debezium semantics: a later position does not close it */
    assert_false(encoder_transaction_passed(enc, 200, 1, 200000, &out));
    assert_int_equal(out.count, 0);
    encoder_destroy(enc);

    cfg.transaction_eager_end = true;
    enc = enc_new(&cfg);
    encode_change(enc, e1, &out);
    records_release(&out);
    /* same clusterTime: the transaction may still have events */
    assert_false(encoder_transaction_passed(enc, 100, 1, 100500, &out));
    assert_true(encoder_transaction_passed(enc, 100, 2, 100600, &out));
    assert_int_equal(out.count, 1);
    assert_non_null(strstr(out.items[0].value, "\"status\":\"END\""));
    assert_non_null(strstr(out.items[0].value, "\"ts_ms\":100600}"));
    records_release(&out);
    assert_false(encoder_transaction_passed(enc, 300, 1, 300000, &out));
    /* the next transactional event opens a new one, without an END first */
    encode_change(enc, e2, &out);
    assert_int_equal(out.count, 2);
    assert_non_null(strstr(out.items[0].value, "\"status\":\"BEGIN\""));
    records_release(&out);
    encoder_destroy(enc);
    bson_destroy(e1);
    bson_destroy(e2);
    bson_destroy(lsid);
}

/* data_collections follow Java HashMap iteration order, not insertion order. */
static void transaction_collections_in_hashmap_order(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.provide_transaction_metadata = true;
    struct encoder *enc = enc_new(&cfg);
    bson_t *lsid = from_json(golden("in_lsid"));
    struct mcdc_records out = {0};
    for (int i = 14; i >= 1; i--) {
        char coll[8];
        snprintf(coll, sizeof coll, "c%d", i);
        bson_t *e = txn_event(lsid, coll, i, 50, 50000);
        bson_t *e2 = bson_new();
        /* database "db" to match the golden names db.cN */
        bson_iter_t it;
        bson_iter_init(&it, e);
        while (bson_iter_next(&it)) {
            if (strcmp(bson_iter_key(&it), "ns") == 0)
                BCON_APPEND(e2, "ns", "{", "db", "db", "coll", BCON_UTF8(coll), "}");
            else
                bson_append_iter(e2, NULL, 0, &it);
        }
        encode_change(enc, e2, &out);
        records_release(&out);
        bson_destroy(e);
        bson_destroy(e2);
    }
    bson_t *end = txn_event(NULL, "x", 99, 60, 60000);
    encode_change(enc, end, &out);
    char want[2048] = "";
    char names[512];
    snprintf(names, sizeof names, "%s", golden("hashmap_order"));
    size_t w = 0;
    for (char *n = strtok(names, ","); n; n = strtok(NULL, ","))
        w += (size_t)snprintf(want + w, sizeof want - w,
                              "%s{\"data_collection\":\"%s\",\"event_count\":1}", w ? "," : "", n);
    assert_non_null(strstr(out.items[0].value, want));
    records_release(&out);
    bson_destroy(end);
    bson_destroy(lsid);
    encoder_destroy(enc);
}

/* ---- heartbeats (§1.9) ---------------------------------------------------- */

static void heartbeats(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    struct encoder *enc = enc_new(&cfg);
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_records out = {0};
    assert_true(encoder_heartbeat(enc, NOW, &out, &err));
    assert_int_equal(out.count, 1);
    assert_string_equal(out.items[0].topic, "__debezium-heartbeat.fulfillment");
    assert_string_equal(encoder_heartbeat_topic(enc), "__debezium-heartbeat.fulfillment");
    assert_text(out.items[0].key, golden("hb_key"));
    assert_text(out.items[0].value, golden("hb_value"));
    records_release(&out);
    encoder_destroy(enc);

    cfg.key_schemas_enable = cfg.value_schemas_enable = true;
    enc = enc_new(&cfg);
    assert_true(encoder_heartbeat(enc, NOW, &out, &err));
    assert_text(out.items[0].key, golden("hb_key_schema_3x"));
    assert_text(out.items[0].value, golden("hb_value_schema_3x"));
    records_release(&out);
    encoder_destroy(enc);
}

/* Kafka's JsonConverter (Jackson) escaping of plain strings: quotes,
 * backslashes, short escapes, \u00XX (uppercase) for other controls, the rest raw. */
static void jackson_string_escaping(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    struct encoder *enc = enc_new(&cfg);
    bson_t *doc = from_json("{\"_id\": 1}");
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_records out = {0};
    assert_true(event_from_snapshot_doc(doc, "caf\xc3\xa9", "q\"b\\s\x01\x1f\t\n/", MCDC_SNAP_TRUE,
                                        &ev, &err));
    assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
    assert_non_null(strstr(out.items[0].value, "\"db\":\"caf\xc3\xa9\",\"sequence\":null,"));
    assert_non_null(strstr(out.items[0].value,
                           "\"collection\":\"q\\\"b\\\\s\\u0001\\u001F\\t\\n/\",\"ord\":-1,"));
    assert_string_equal(out.items[0].topic, "fulfillment.caf_.q_b_s_____");
    records_release(&out);
    bson_destroy(doc);
    encoder_destroy(enc);
}

/* The word-at-a-time escaper against a byte-at-a-time reference, over
 * random strings dense in quotes, backslashes and controls (fixed seed). */
static void jackson_escaper_matches_reference(void **state)
{
    (void)state;
    static const char alphabet[] = "ab\"\\\x01\x1f\n\t\xc3\xa9 {}:,";
    struct ejson_buf got = {0}, want = {0};
    unsigned seed = 12345;
    for (int round = 0; round < 2000; round++) {
        char s[64];
        seed = seed * 1103515245u + 12345u;
        size_t n = (seed >> 16) % sizeof s;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            s[i] = alphabet[(seed >> 16) % (sizeof alphabet - 1)];
        }
        ejson_buf_reset(&got);
        ejson_buf_reset(&want);
        json_append_string(&got, s, n);
        ejson_buf_append(&want, "\"", 1);
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)s[i];
            char tmp[8];
            if (c == '"' || c == '\\')
                snprintf(tmp, sizeof tmp, "\\%c", c);
            else if (c == '\n')
                snprintf(tmp, sizeof tmp, "\\n");
            else if (c == '\t')
                snprintf(tmp, sizeof tmp, "\\t");
            else if (c < 0x20)
                snprintf(tmp, sizeof tmp, "\\u%04X", c);
            else
                snprintf(tmp, sizeof tmp, "%c", c);
            ejson_buf_append(&want, tmp, strlen(tmp));
        }
        ejson_buf_append(&want, "\"", 1);
        assert_int_equal(got.len, want.len);
        assert_memory_equal(got.data, want.data, got.len);
    }
    ejson_buf_free(&got);
    ejson_buf_free(&want);
}

/* ---- topics and schema names (§3) ----------------------------------------- */

static void topic_sanitisation(void **state)
{
    (void)state;
    static const struct {
        const char *db, *coll, *want;
    } cases[] = {
        {"db", "my coll$x", "prefix.db.my_coll_x"}, {"db", "a.b", "prefix.db.a.b"},
        {"inv", "caf\xc3\xa9", "prefix.inv.caf_"},  {"inv", "e\xf0\x9f\x98\x80", "prefix.inv.e__"},
        {"my-db", "x_y", "prefix.my-db.x_y"},
    };
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.topic_prefix = "prefix";
    struct encoder *enc = enc_new(&cfg);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_string_equal(encoder_topic(enc, cases[i].db, cases[i].coll), cases[i].want);
    /* cached: the same pointer every time */
    assert_ptr_equal(encoder_topic(enc, "db", "a.b"), encoder_topic(enc, "db", "a.b"));
    assert_string_equal(encoder_transaction_topic(enc), "prefix.transaction");
    encoder_destroy(enc);

    struct ejson_buf b = {0};
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    topics_sanitize(&b, longname, strlen(longname));
    assert_int_equal(b.len, 249);
    ejson_buf_reset(&b);
    topics_sanitize(&b, ".", 1);
    assert_int_equal(b.len, 1);
    assert_memory_equal(b.data, "_", 1);
    ejson_buf_reset(&b);
    topics_sanitize(&b, "..", 2);
    assert_memory_equal(b.data, "__", 2);
    ejson_buf_free(&b);
}

static void schema_name_adjustment(void **state)
{
    (void)state;
    static const struct {
        enum mcdc_schema_adjust mode;
        const char *in, *want;
    } cases[] = {
        {MCDC_SCHEMA_ADJUST_AVRO, "my-server.inv.cust.Key", "my_server.inv.cust.Key"},
        {MCDC_SCHEMA_ADJUST_AVRO, "1abc", "_1abc"},
        {MCDC_SCHEMA_ADJUST_AVRO, "io.debezium.connector.mongo.Source",
         "io.debezium.connector.mongo.Source"},
        {MCDC_SCHEMA_ADJUST_AVRO, "a$b", "a_b"},
        {MCDC_SCHEMA_ADJUST_NONE, "my-server.inv.cust.Key", "my-server.inv.cust.Key"},
        {MCDC_SCHEMA_ADJUST_AVRO_UNICODE, "my-server_x", "my_u002dserver_u005fx"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct ejson_buf b = {0};
        topics_adjust_schema_name(&b, cases[i].mode, cases[i].in, strlen(cases[i].in));
        ejson_buf_append(&b, "", 1);
        assert_string_equal(b.data, cases[i].want);
        ejson_buf_free(&b);
    }

    /* 1.9 defaults to avro: a dash in the prefix disappears from schema names only */
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_1_9);
    cfg.topic_prefix = "my-server";
    cfg.key_schemas_enable = true;
    struct encoder *enc = enc_new(&cfg);
    bson_t *doc = from_json("{\"_id\": 1}");
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_records out = {0};
    assert_true(event_from_snapshot_doc(doc, "inv", "cust", MCDC_SNAP_TRUE, &ev, &err));
    assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
    assert_string_equal(out.items[0].topic, "my-server.inv.cust");
    assert_non_null(strstr(out.items[0].key, "\"name\":\"my_server.inv.cust.Key\"}"));
    records_release(&out);
    bson_destroy(doc);
    encoder_destroy(enc);
}

/* ---- filters (§7.2) ------------------------------------------------------- */

static void namespace_filters(void **state)
{
    (void)state;
    static char *db_inc[] = {"inv.*", "shop"};
    static char *coll_exc[] = {"inventory\\.secret.*"};
    static char *coll_inc_lit[] = {"Shop.Orders"};
    static char *db_exc[] = {"test"};
    static const struct {
        int cfgno;
        const char *db, *coll;
        bool want;
    } cases[] = {
        /* 0: no lists: everything but admin/config/local */
        {0, "shop", "orders", true},
        {0, "admin", "x", false},
        {0, "config", "x", false},
        {0, "local", "oplog.rs", false},
        {0, "sig", "signals", true},
        /* 1: regex include on db, exclude on collections, anchored, case-insensitive */
        {1, "inventory", "customers", true},
        {1, "INVENTORY", "customers", true},
        {1, "shop", "orders", true},
        {1, "shopping", "orders", false}, /* anchored at the end */
        {1, "myinv", "x", false},         /* anchored at the start */
        {1, "inventory", "secrets", false},
        {1, "inventory", "Secret_plans", false},
        {1, "inventory", "public", true},
        {1, "sig", "signals", true}, /* the signal collection, always */
        {1, "sig", "other", false},
        /* 2: literal mode: case-insensitive exact */
        {2, "shop", "orders", true},
        {2, "SHOP", "ORDERS", true},
        {2, "shop", "orders2", false},
        {2, "test", "orders", false},
        /* 3: db exclude */
        {3, "test", "x", false},
        {3, "Test", "x", false},
        {3, "tests", "x", true},
    };
    struct encoder *encs[4];
    struct mcdc_config cfgs[4];
    for (int i = 0; i < 4; i++) {
        cfg_init(&cfgs[i], MCDC_DIALECT_3_X);
        cfgs[i].signal_data_collection = "sig.signals";
    }
    cfgs[1].database_include = (struct mcdc_strlist){db_inc, 2};
    cfgs[1].collection_exclude = (struct mcdc_strlist){coll_exc, 1};
    cfgs[2].filters_match_mode = MCDC_FILTER_MATCH_LITERAL;
    cfgs[2].collection_include = (struct mcdc_strlist){coll_inc_lit, 1};
    cfgs[3].database_exclude = (struct mcdc_strlist){db_exc, 1};
    for (int i = 0; i < 4; i++)
        encs[i] = enc_new(&cfgs[i]);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool got = encoder_captures(encs[cases[i].cfgno], cases[i].db, cases[i].coll);
        if (got != cases[i].want)
            fail_msg("case %zu: config %d, %s.%s: got %d", i, cases[i].cfgno, cases[i].db,
                     cases[i].coll, got);
    }
    for (int i = 0; i < 4; i++)
        encoder_destroy(encs[i]);

    /* a filtered event yields no records */
    struct encoder *enc = enc_new(&cfgs[1]);
    bson_t *doc = from_json("{\"_id\": 1}");
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_records out = {0};
    assert_true(event_from_snapshot_doc(doc, "other", "x", MCDC_SNAP_TRUE, &ev, &err));
    assert_true(encoder_encode(enc, &ev, NOW_US, &out, &err));
    assert_int_equal(out.count, 0);
    bson_destroy(doc);
    encoder_destroy(enc);

    /* a bad regex is a config error naming the option */
    static char *bad[] = {"inv(("};
    struct mcdc_config c;
    cfg_init(&c, MCDC_DIALECT_3_X);
    c.collection_include = (struct mcdc_strlist){bad, 1};
    assert_null(encoder_new(&c, &err));
    assert_int_equal(err.domain, MCDC_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "collection.include.list"));
}

static void skipped_operations(void **state)
{
    (void)state;
    static char *skip[] = {"u", "t"};
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.skipped_operations = (struct mcdc_strlist){skip, 2};
    struct encoder *enc = enc_new(&cfg);
    struct mcdc_records out = {0};
    static const struct {
        const char *in;
        size_t count;
    } cases[] = {{"in_update", 0}, {"in_replace", 0}, {"in_insert", 1}, {"in_delete", 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bson_t *doc = from_json(golden(cases[i].in));
        encode_change(enc, doc, &out);
        assert_int_equal(out.count, cases[i].count);
        records_release(&out);
        bson_destroy(doc);
    }
    encoder_destroy(enc);

    static char *bad[] = {"x"};
    struct mcdc_error err = MCDC_ERROR_INIT;
    cfg.skipped_operations = (struct mcdc_strlist){bad, 1};
    assert_null(encoder_new(&cfg, &err));
    assert_non_null(strstr(err.msg, "skipped.operations"));
}

static void stream_match_stage(void **state)
{
    (void)state;
    static char *db_inc[] = {"inv.*", "shop"};
    static char *coll_inc[] = {"shop.orders"};
    static char *coll_exc[] = {"inv\\.secret"};
    static char *skip[] = {"d"};
    static const char *want_regex =
        "{\"$match\": {\"$and\": [{\"$or\": [{\"$and\": ["
        "{\"ns.db\": {\"$nin\": [\"admin\", \"config\", \"local\"]}},"
        "{\"ns.db\": {\"$regularExpression\": {\"pattern\": \"^(?:(?:inv.*)|(?:shop))$\", "
        "\"options\": \"i\"}}},"
        "{\"$expr\": {\"$not\": [{\"$regexMatch\": {\"input\": {\"$concat\": [\"$ns.db\", \".\", "
        "\"$ns.coll\"]},"
        " \"regex\": \"^(?:(?:inv\\\\.secret))$\", \"options\": \"i\"}}]}}]},"
        "{\"ns.db\": \"sig\", \"ns.coll\": \"signals\"}]},"
        "{\"operationType\": {\"$in\": [\"insert\", \"update\", \"replace\", \"drop\", "
        "\"rename\", \"dropDatabase\"]}}]}}";
    static const char *want_literal =
        "{\"$match\": {\"$and\": [{\"$or\": [{\"$and\": ["
        "{\"ns.db\": {\"$nin\": [\"admin\", \"config\", \"local\"]}},"
        "{\"ns\": {\"$in\": [{\"db\": \"shop\", \"coll\": \"orders\"}]}}]}]},"
        "{\"operationType\": {\"$in\": [\"insert\", \"update\", \"replace\", \"delete\", "
        "\"drop\", \"rename\", \"dropDatabase\"]}}]}}";
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.database_include = (struct mcdc_strlist){db_inc, 2};
    cfg.collection_exclude = (struct mcdc_strlist){coll_exc, 1};
    cfg.skipped_operations = (struct mcdc_strlist){skip, 1};
    cfg.signal_data_collection = "sig.signals";
    struct encoder *enc = enc_new(&cfg);
    bson_t stage;
    assert_true(encoder_build_stream_match(enc, &stage, &err));
    bson_t *want = from_json(want_regex);
    if (!bson_equal(&stage, want)) {
        char *got = bson_as_relaxed_extended_json(&stage, NULL);
        fail_msg("got %s", got);
    }
    bson_destroy(want);
    bson_destroy(&stage);
    encoder_destroy(enc);

    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.filters_match_mode = MCDC_FILTER_MATCH_LITERAL;
    cfg.collection_include = (struct mcdc_strlist){coll_inc, 1};
    enc = enc_new(&cfg);
    assert_true(encoder_build_stream_match(enc, &stage, &err));
    want = from_json(want_literal);
    if (!bson_equal(&stage, want)) {
        char *got = bson_as_relaxed_extended_json(&stage, NULL);
        fail_msg("got %s", got);
    }
    bson_destroy(want);
    bson_destroy(&stage);
    encoder_destroy(enc);
}

/* ---- field selection (§7.2) ----------------------------------------------- */

/* Encodes a snapshot read of doc_json and returns the `after` text. */
static char *after_of(struct encoder *enc, const char *doc_json, struct mcdc_error *err, bool *ok)
{
    bson_t *doc = from_json(doc_json);
    struct mcdc_event ev;
    struct mcdc_records out = {0};
    char *after = NULL;
    assert_true(event_from_snapshot_doc(doc, "inventory", "customers", MCDC_SNAP_TRUE, &ev, err));
    *ok = encoder_encode(enc, &ev, NOW_US, &out, err);
    if (*ok)
        after = json_member(out.items[0].value, "after");
    records_release(&out);
    bson_destroy(doc);
    return after;
}

static void field_selection_documents(void **state)
{
    (void)state;
    static char *excl[] = {"inventory.customers.addr.zip", "*.cust*.items.sku",
                           "other.customers.name"};
    static char *ren[] = {"inventory.customers.name:new_name",
                          "inventory.customers.active:new_active",
                          "inventory.customers.missing:whatever"};
    static const struct {
        const char *in, *want;
    } cases[] = {
        /* nested exclusion, arrays of documents, rename moves to the end (FieldRenamesIT) */
        {"{\"_id\": 1, \"name\": \"Sally\", \"phone\": 123, \"active\": true, \"scores\": [1.2, "
         "3.4],"
         " \"addr\": {\"city\": \"Oslo\", \"zip\": \"0150\"},"
         " \"items\": [{\"sku\": \"A\", \"qty\": 1}, 5, {\"qty\": 2}, {\"sku\": \"B\"}]}",
         "{\"_id\": 1,\"phone\": 123,\"scores\": [1.2,3.4],\"addr\": {\"city\": \"Oslo\"},"
         "\"items\": [{\"qty\": 1},5,{\"qty\": 2},{}],\"new_name\": \"Sally\",\"new_active\": "
         "true}"},
        /* paths through non-documents are left alone */
        {"{\"_id\": 2, \"addr\": \"none\", \"items\": 3}",
         "{\"_id\": 2,\"addr\": \"none\",\"items\": 3}"},
    };
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.field_exclude = (struct mcdc_strlist){excl, 3};
    cfg.field_renames = (struct mcdc_strlist){ren, 3};
    struct encoder *enc = enc_new(&cfg);
    struct mcdc_error err = MCDC_ERROR_INIT;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool ok;
        char *after = after_of(enc, cases[i].in, &err, &ok);
        assert_true(ok);
        assert_text(after, cases[i].want);
        free(after);
    }
    /* rename onto an existing field fails the event, naming key, collection and field */
    bool ok;
    char *after = after_of(enc,
                           "{\"_id\": {\"$oid\": \"596e275826f08b2730779e1f\"}, \"name\": \"a\","
                           " \"new_name\": \"b\"}",
                           &err, &ok);
    assert_false(ok);
    assert_null(after);
    assert_int_equal(err.domain, MCDC_ERR_ENCODE);
    assert_non_null(strstr(err.msg, "inventory.customers"));
    assert_non_null(strstr(err.msg, "596e275826f08b2730779e1f"));
    assert_non_null(strstr(err.msg, "\"new_name\""));
    encoder_destroy(enc);
}

static void field_selection_update_description(void **state)
{
    (void)state;
    static char *excl[] = {"inventory.customers.contact.email", "inventory.customers.items.secret",
                           "inventory.customers.pwd"};
    static char *ren[] = {"inventory.customers.addr.city:town"};
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.field_exclude = (struct mcdc_strlist){excl, 3};
    cfg.field_renames = (struct mcdc_strlist){ren, 1};
    struct encoder *enc = enc_new(&cfg);
    bson_t *doc = from_json(
        "{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"update\","
        " \"ns\": {\"db\": \"inventory\", \"coll\": \"customers\"}, \"documentKey\": {\"_id\": 1},"
        " \"updateDescription\": {\"updatedFields\": {"
        "   \"contact.email\": \"x@y\", \"contact.email.verified\": true,"
        "   \"contact\": {\"email\": \"a@b\", \"phone\": 1},"
        "   \"items.0.secret\": 5, \"items.1\": {\"secret\": 1, \"n\": 2}, \"items.0.n\": 3,"
        "   \"addr.city\": \"Oslo\", \"addr\": {\"city\": \"Bergen\", \"zip\": \"5003\"},"
        "   \"pwdx\": 1, \"name\": \"n\"},"
        "  \"removedFields\": [\"contact\", \"contact.email\", \"contact.email.x\", \"pwd\","
        "   \"addr.city\", \"items.3.secret\", \"other\"],"
        "  \"truncatedArrays\": [{\"field\": \"contact\", \"newSize\": 1},"
        "   {\"field\": \"tags\", \"newSize\": 2}]}}");
    struct mcdc_records out = {0};
    encode_change(enc, doc, &out);
    char *ud = strstr(out.items[0].value, "\"updateDescription\":");
    assert_non_null(ud);
    char *end = strstr(ud, ",\"source\":");
    char obj[4096];
    snprintf(obj, sizeof obj, "{%.*s}", (int)(end - ud), ud);
    bson_t *parsed = from_json(obj);
    bson_iter_t it, sub;
    assert_true(bson_iter_init_find(&it, parsed, "updateDescription"));
    assert_true(bson_iter_recurse(&it, &sub));
    assert_true(bson_iter_find(&sub, "removedFields"));
    /* contact and contact.email hidden (prefix of / equal to an excluded path);
     * contact.email.x kept (below it); addr.city renamed; items.3.secret
     * hidden (numeric segments are ignored) */
    uint32_t len;
    const uint8_t *data;
    bson_iter_array(&sub, &len, &data);
    bson_t arr;
    bson_init_static(&arr, data, len);
    bson_t *want_arr =
        from_json("{\"0\": \"contact.email.x\", \"1\": \"addr.town\", \"2\": \"other\"}");
    assert_true(bson_equal(&arr, want_arr));
    bson_destroy(want_arr);
    assert_true(bson_iter_recurse(&it, &sub));
    assert_true(bson_iter_find(&sub, "updatedFields"));
    assert_text(
        bson_iter_utf8(&sub, NULL),
        "{\"contact\": {\"phone\": 1}, \"items.1\": {\"n\": 2}, \"items.0.n\": 3, "
        "\"addr\": {\"zip\": \"5003\", \"town\": \"Bergen\"}, \"pwdx\": 1, \"name\": \"n\", "
        "\"addr.town\": \"Oslo\"}");
    assert_true(bson_iter_recurse(&it, &sub));
    assert_true(bson_iter_find(&sub, "truncatedArrays"));
    bson_iter_array(&sub, &len, &data);
    bson_init_static(&arr, data, len);
    want_arr = from_json("{\"0\": {\"field\": \"tags\", \"size\": 2}}");
    assert_true(bson_equal(&arr, want_arr));
    bson_destroy(want_arr);
    bson_destroy(parsed);
    records_release(&out);
    bson_destroy(doc);
    encoder_destroy(enc);
}

/* Random nested documents and random rules (fixed seed): every event either
 * encodes to parseable JSON whose documents no longer hold an excluded
 * top-level field, or fails with the rename-clash error. Run under ASan in
 * the sanitizer tree, this is the field walker's robustness check. */
static unsigned rnd_state = 2024;
static unsigned rnd(unsigned n)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return (rnd_state >> 16) % n;
}

static void random_doc(bson_t *b, int depth)
{
    static const char *const keys[] = {"a", "b", "c", "0", "d.e"};
    size_t n = 1 + rnd(4);
    for (size_t i = 0; i < n; i++) {
        const char *k = keys[rnd(5)];
        bson_t child;
        switch (depth < 3 ? rnd(4) : 0) {
        case 0:
            BSON_APPEND_INT32(b, k, (int32_t)rnd(100));
            break;
        case 1:
            BSON_APPEND_UTF8(b, k, "v\"\\");
            break;
        case 2:
            BSON_APPEND_DOCUMENT_BEGIN(b, k, &child);
            random_doc(&child, depth + 1);
            bson_append_document_end(b, &child);
            break;
        default: {
            BSON_APPEND_ARRAY_BEGIN(b, k, &child);
            size_t m = rnd(3);
            for (size_t j = 0; j < m; j++) {
                char ik[24];
                snprintf(ik, sizeof ik, "%zu", j);
                bson_t el;
                if (rnd(2)) {
                    BSON_APPEND_DOCUMENT_BEGIN(&child, ik, &el);
                    random_doc(&el, depth + 1);
                    bson_append_document_end(&child, &el);
                } else {
                    BSON_APPEND_INT32(&child, ik, (int32_t)j);
                }
            }
            bson_append_array_end(b, &child);
        }
        }
    }
}

static void field_selection_random(void **state)
{
    (void)state;
    static char *excl[] = {"db.coll.a", "db.coll.b.c", "db.coll.c.a.b", "*.*.0"};
    static char *ren[] = {"db.coll.b.a:x", "db.coll.c:b", "db.coll.a.a:a"};
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.field_exclude = (struct mcdc_strlist){excl, 4};
    cfg.field_renames = (struct mcdc_strlist){ren, 3};
    struct encoder *enc = enc_new(&cfg);
    size_t ok = 0, clashes = 0;
    for (int round = 0; round < 400; round++) {
        bson_t *doc = bson_new();
        BSON_APPEND_INT32(doc, "_id", round);
        random_doc(doc, 0);
        struct mcdc_event ev;
        struct mcdc_error err = MCDC_ERROR_INIT;
        struct mcdc_records out = {0};
        assert_true(event_from_snapshot_doc(doc, "db", "coll", MCDC_SNAP_TRUE, &ev, &err));
        if (round % 2) {
            /* the same document as an update's updatedFields and removedFields */
            ev.op = MCDC_OP_UPDATE;
            ev.snapshot = MCDC_SNAP_FALSE;
            ev.updated_fields = ev.full_document;
            ev.has_updated_fields = true;
            ev.has_full_document = false;
        }
        if (!encoder_encode(enc, &ev, NOW_US, &out, &err)) {
            assert_int_equal(err.domain, MCDC_ERR_ENCODE);
            assert_non_null(strstr(err.msg, "already contains field"));
            assert_int_equal(out.count, 0);
            clashes++;
        } else {
            assert_int_equal(out.count, 1);
            bson_t *v = from_json(out.items[0].value);
            bson_iter_t it;
            const char *member = round % 2 ? "updateDescription" : "after";
            assert_true(bson_iter_init_find(&it, v, member));
            if (round % 2 == 0) {
                bson_t *after = from_json(bson_iter_utf8(&it, NULL));
                assert_false(bson_has_field(after, "a"));
                assert_false(bson_has_field(after, "c"));
                bson_destroy(after);
            }
            bson_destroy(v);
            ok++;
        }
        records_release(&out);
        bson_destroy(doc);
    }
    assert_true(ok > 100);
    assert_true(clashes > 0);
    encoder_destroy(enc);
}

/* An event without a document _id fails before touching transaction state. */
static void event_without_id_fails(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_3_X);
    cfg.provide_transaction_metadata = true;
    struct encoder *enc = enc_new(&cfg);
    bson_t *key = from_json("{\"x\": 1}");
    bson_t *lsid = from_json(golden("in_lsid"));
    struct mcdc_event ev;
    event_init(&ev);
    ev.op = MCDC_OP_DELETE;
    ev.db = "inventory";
    ev.db_len = 9;
    ev.coll = "customers";
    ev.coll_len = 9;
    assert_true(bson_init_static(&ev.document_key, bson_get_data(key), key->len));
    ev.has_document_key = true;
    assert_true(bson_init_static(&ev.lsid, bson_get_data(lsid), lsid->len));
    ev.has_lsid = true;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_records out = {0};
    assert_false(encoder_encode(enc, &ev, NOW_US, &out, &err));
    assert_int_equal(out.count, 0);
    assert_int_equal(err.domain, MCDC_ERR_ENCODE);
    assert_non_null(strstr(err.msg, "inventory.customers has no document _id"));
    /* no transaction was opened: the eager check finds nothing to close */
    cfg.transaction_eager_end = true;
    assert_false(encoder_transaction_passed(enc, 10, 1, 10000, &out));
    bson_destroy(key);
    bson_destroy(lsid);
    encoder_destroy(enc);
}

/* Hidden names leave null, not [] (§1.3). */
static void removed_fields_null_when_all_hidden(void **state)
{
    (void)state;
    static char *excl[] = {"inventory.customers.secret"};
    struct mcdc_config cfg;
    cfg_init(&cfg, MCDC_DIALECT_1_9);
    cfg.field_exclude = (struct mcdc_strlist){excl, 1};
    struct encoder *enc = enc_new(&cfg);
    bson_t *doc = from_json(
        "{\"_id\": {\"_data\": \"82\"}, \"operationType\": \"update\","
        " \"ns\": {\"db\": \"inventory\", \"coll\": \"customers\"}, \"documentKey\": {\"_id\": 1},"
        " \"updateDescription\": {\"updatedFields\": {\"secret\": 1},"
        "  \"removedFields\": [\"secret\"], \"truncatedArrays\": [{\"field\": \"secret\", "
        "\"newSize\": 0}]}}");
    struct mcdc_records out = {0};
    encode_change(enc, doc, &out);
    assert_non_null(strstr(out.items[0].value,
                           "\"updateDescription\":{\"removedFields\":null,\"updatedFields\":\"{}\","
                           "\"truncatedArrays\":null}"));
    records_release(&out);
    bson_destroy(doc);
    encoder_destroy(enc);
}

/* json_append_int (ts_ms and the other integers of the envelope) writes what
 * printf's %lld writes, at the edges of every digit group and of int64. */
static void envelope_integers_as_printf(void **state)
{
    (void)state;
    const int64_t vals[] = {0, 1, 9, 10, 99, 100, 101, 12345678, 99999999, 100000000,
                            1733300000000, 9999999999999999, 10000000000000000,
                            INT64_MAX, -1, -9, -10, -100000000, INT64_MIN, INT64_MIN + 1};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        struct ejson_buf b = {0};
        char want[32];
        snprintf(want, sizeof want, "%lld", (long long)vals[i]);
        json_append_int(&b, vals[i]);
        assert_int_equal(b.len, strlen(want));
        assert_memory_equal(b.data, want, b.len);
        ejson_buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keys_table),
        cmocka_unit_test(envelope_integers_as_printf),
        cmocka_unit_test(key_uses_only_id_on_sharded_collections),
        cmocka_unit_test(key_with_schema),
        cmocka_unit_test(insert_3x_payload),
        cmocka_unit_test(update_envelopes),
        cmocka_unit_test(replace_envelopes),
        cmocka_unit_test(delete_envelopes_and_tombstones),
        cmocka_unit_test(value_schemas),
        cmocka_unit_test(snapshot_reads),
        cmocka_unit_test(oplog_patch_and_filter),
        cmocka_unit_test(txn_collection_name_with_nul),
        cmocka_unit_test(worked_example),
        cmocka_unit_test(transaction_begin_end),
        cmocka_unit_test(transaction_records_with_schemas),
        cmocka_unit_test(transaction_switch_and_eager_end),
        cmocka_unit_test(transaction_collections_in_hashmap_order),
        cmocka_unit_test(heartbeats),
        cmocka_unit_test(jackson_string_escaping),
        cmocka_unit_test(jackson_escaper_matches_reference),
        cmocka_unit_test(topic_sanitisation),
        cmocka_unit_test(schema_name_adjustment),
        cmocka_unit_test(namespace_filters),
        cmocka_unit_test(skipped_operations),
        cmocka_unit_test(stream_match_stage),
        cmocka_unit_test(field_selection_documents),
        cmocka_unit_test(field_selection_update_description),
        cmocka_unit_test(removed_fields_null_when_all_hidden),
        cmocka_unit_test(event_without_id_fails),
        cmocka_unit_test(field_selection_random),
    };
    return cmocka_run_group_tests(tests, load_goldens, free_goldens);
}
