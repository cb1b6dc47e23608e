/* Unit tests for snapshot/incremental: the offset members (Debezium's keys,
 * portable values) and their restore, the window's deduplication against the
 * stream for both window kinds (markers, cluster time), stop during a window,
 * and data-collections regex matching. No server: the window is filled as a
 * chunk read would fill it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "offsets/offsets.h"
#include "snapshot/incremental_internal.h"

static struct mcdc_config cfg; /* the engine reads options only when it reads chunks */

static bson_t *doc_json(const char *json)
{
    bson_error_t e;
    bson_t *d = bson_new_from_json((const uint8_t *)json, -1, &e);
    if (d == NULL)
        fail_msg("bad JSON %s: %s", json, e.message);
    return d;
}

/* A window of keys as a chunk read leaves it (state WAIT_OPEN or WAIT_TIME). */
static void fill(struct incr *s, const char *const *ids, size_t n, enum incr_state st)
{
    char buf[256];
    for (size_t i = 0; i < n; i++) {
        snprintf(buf, sizeof buf, "{\"_id\": %s, \"v\": %zu}", ids[i], i);
        incr_window_add(s, doc_json(buf));
    }
    bson_t *end = doc_json("{\"_id\": 0}");
    snprintf(buf, sizeof buf, "{\"_id\": %s}", ids[n - 1]);
    bson_destroy(end);
    end = doc_json(buf);
    bson_reinit(&s->chunk_end);
    bson_concat(&s->chunk_end, end);
    bson_destroy(end);
    snprintf(s->chunk_id, sizeof s->chunk_id, "chunk-1");
    s->state = st;
}

/* One round trip in the layout of dialect d: what is written is read back
 * whole, and Debezium's keys hold nothing it would fail on. */
static void round_trip_in(enum mcdc_dialect d)
{
    struct incr *s, *r;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bson_t *cond = doc_json("{\"k\": \"A\"}");
    const char *j;
    char *copy;

    cfg.dialect = d;
    s = incr_new(&cfg, "rs0", false);
    r = incr_new(&cfg, "rs0", false);
    assert_null(incr_offset_json(s));
    incr_enqueue(s, "db", "c1", cond, "sig-1");
    incr_enqueue(s, "db", "c2", NULL, "sig-1");
    incr_enqueue(s, "db", "c1", NULL, "sig-2"); /* already queued: queued again (Debezium) */
    bson_destroy(cond);
    assert_int_equal(incr_state(s), INCR_READY);
    assert_int_equal(incr_queued(s), 3);
    incr_pause(s);
    bson_t *k = doc_json("{\"_id\": {\"$numberLong\": \"42\"}}");
    bson_concat(&s->max_key, k);
    bson_destroy(k);
    const char *ids[] = {"{\"$oid\": \"5f0000000000000000000001\"}"};
    fill(s, ids, 1, INCR_CLOSED);
    incr_window_sent(s, 0);
    j = incr_offset_json(s);
    assert_non_null(j);
    /* The project's writers, not libbson's: the same bytes whichever libbson
     * version is linked (compact members, canonical extended JSON keys). */
    if (d == MCDC_DIALECT_3_X) {
        assert_non_null(strstr(j, "{\"incremental_snapshot_collections\":\"[{\\\"incremental_snapshot_"
                                  "collections_id\\\":\\\"db.c1\\\",\\\"incremental_snapshot_collections_"
                                  "additional_condition\\\":\\\"{\\\\\\\"k\\\\\\\": \\\\\\\"A\\\\\\\"}\\\""));
        assert_null(strstr(j, "mongocdc_incremental_snapshot_collections"));
    } else {
        /* 1.9: CollectionId identifiers, comma-separated; the full list in mongocdc's key. */
        assert_non_null(
            strstr(j, "{\"incremental_snapshot_collections\":\"rs0.db.c1,rs0.db.c2,rs0.db.c1\""));
        assert_non_null(strstr(j, "\"mongocdc_incremental_snapshot_collections\":\"[{"));
    }
    assert_non_null(strstr(j, "\"incremental_snapshot_correlation_id\":\"sig-1\""));
    /* The keys only under mongocdc's names: Debezium fails on anything but
     * its Java-serialised hex under its own. */
    assert_null(strstr(j, "\"incremental_snapshot_primary_key\""));
    assert_null(strstr(j, "\"incremental_snapshot_maximum_key\""));
    assert_non_null(strstr(j, "\"mongocdc_incremental_snapshot_primary_key\":\"{\\\"_id\\\": {"
                              "\\\"$oid\\\": \\\"5f0000000000000000000001\\\"}}\""));
    assert_non_null(strstr(j, "\"mongocdc_incremental_snapshot_maximum_key\":\"{\\\"_id\\\": {"
                              "\\\"$numberLong\\\": \\\"42\\\"}}\""));
    copy = strdup(j);
    assert_true(incr_restore(r, copy, &err));
    assert_int_equal(incr_state(r), INCR_READY);
    assert_string_equal(incr_current(r), "db.c1");
    assert_string_equal(incr_signal_id(r), "sig-1");
    assert_string_equal(incr_offset_json(r), j); /* same state, same text */
    assert_int_equal(incr_queued(r), 3);
    assert_non_null(strstr(j, "\\\"db.c1\\\",\\\"incremental_snapshot_collections_additional_"
                              "condition\\\":null,\\\"incremental_snapshot_collections_"
                              "correlation_id\\\":\\\"sig-2\\\""));
    /* the pause is kept across a restart */
    assert_non_null(strstr(j, "\"mongocdc_incremental_snapshot_paused\":true"));
    assert_true(incr_paused(r));
    /* a refused signal's collections are taken back, never the current one */
    incr_drop_last(r, 2);
    assert_int_equal(incr_queued(r), 1);
    assert_string_equal(incr_current(r), "db.c1");
    assert_null(strstr(incr_offset_json(r), "sig-2"));
    free(copy);
    incr_destroy(r);
    incr_destroy(s);
}

static void offsets_round_trip(void **state)
{
    (void)state;
    struct incr *r;
    struct mcdc_error err = MCDC_ERROR_INIT;

    round_trip_in(MCDC_DIALECT_3_X);
    round_trip_in(MCDC_DIALECT_1_9);
    cfg.dialect = MCDC_DIALECT_1_9;
    /* No incremental keys: idle; unreadable mongocdc keys: an error, never dropped silently. */
    r = incr_new(&cfg, "rs0", false);
    assert_true(incr_restore(r, "{\"other\": 1}", &err));
    assert_int_equal(incr_state(r), INCR_IDLE);
    assert_false(incr_restore(r,
                              "{\"incremental_snapshot_collections\": \"[]\", "
                              "\"mongocdc_incremental_snapshot_primary_key\": \"not json\"}",
                              &err));
    assert_non_null(strstr(err.msg, "mongocdc_incremental_snapshot_primary_key"));
    incr_destroy(r);
}

/* A refused read aborts its signal's snapshot only: the collections other
 * signals queued are read next. */
static void abort_drops_only_the_failing_signal(void **state)
{
    (void)state;
    cfg.dialect = MCDC_DIALECT_3_X;
    struct incr *s = incr_new(&cfg, "rs0", false);
    incr_enqueue(s, "db", "a", NULL, "sig1");
    incr_enqueue(s, "db", "b", NULL, "sig2");
    incr_enqueue(s, "db", "c", NULL, "sig1");
    incr_enqueue(s, "db", "d", NULL, "sig2");
    assert_int_equal(incr_abort(s), 2);
    assert_int_equal(incr_queued(s), 2);
    assert_string_equal(incr_current(s), "db.b");
    assert_string_equal(incr_signal_id(s), "sig2");
    assert_int_equal(incr_state(s), INCR_READY);
    assert_false(incr_signal_queued(s, "sig1"));
    assert_int_equal(incr_abort(s), 2);
    assert_int_equal(incr_state(s), INCR_IDLE);
    assert_int_equal(incr_abort(s), 0);
    incr_destroy(s);
}

/* Conditions longer than a bson_t holds inline (120 bytes) stay with their
 * collection when the queue grows (realloc) and when an entry before them
 * leaves it (the queue shifts): each item's condition must not point into
 * the place the item was copied from. Under ASan a dangling one is a
 * use-after-free; without, the wrong condition is read. */
static void long_conditions_survive_queue_moves(void **state)
{
    (void)state;
    cfg.dialect = MCDC_DIALECT_3_X;
    struct incr *s = incr_new(&cfg, "rs0", false);
    char json[400], name[16], want[400];
    for (int i = 0; i < 9; i++) { /* past the first capacity (4) and its double */
        snprintf(json, sizeof json,
                 "{\"tag\": \"collection-%d-%0200d\"}", i, i);
        bson_t *cond = doc_json(json);
        snprintf(name, sizeof name, "c%d", i);
        incr_enqueue(s, "db", name, cond, "sig");
        bson_destroy(cond);
    }
    bool current = false;
    char *re[] = {(char *)"db\\.c1", (char *)"db\\.c4"};
    assert_int_equal(incr_stop(s, re, 2, &current), 2);
    incr_pop_current(s); /* c0 done: c2 is current */
    assert_string_equal(incr_current(s), "db.c2");
    const char *j = incr_offset_json(s);
    assert_non_null(j);
    const int left[] = {2, 3, 5, 6, 7, 8};
    for (size_t k = 0; k < sizeof left / sizeof left[0]; k++) {
        snprintf(want, sizeof want, "collection-%d-%0200d", left[k], left[k]);
        if (strstr(j, want) == NULL)
            fail_msg("the condition of db.c%d is lost from the queue: %.300s", left[k], j);
    }
    assert_null(strstr(j, "collection-1-"));
    assert_null(strstr(j, "collection-4-"));
    incr_destroy(s);
}

/* Debezium's own values (1.9.8: "<rs>.<db>.<coll>" list; 3.x: JSON list; keys
 * as hex of a Java-serialised Object[]): the collections are resumed, the
 * collection in progress restarts from its first key (a WARN), no error. */
static void debezium_offsets_restart_the_collection(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    /* ObjectOutputStream of new Object[]{42}: magic aced0005, array class [Ljava.lang.Object; */
    static const char hex_key[] =
        "aced0005757200135b4c6a6176612e6c616e672e4f626a6563743b90ce589f1073296c020000787000000001"
        "737200116a6176612e6c616e672e496e746567657212e2a0a4f781873802000149000576616c7565787200"
        "106a6176612e6c616e672e4e756d62657286ac951d0b94e08b02000078700000002a";
    char buf[2048];
    struct incr *r;

    cfg.dialect = MCDC_DIALECT_1_9;
    r = incr_new(&cfg, "rs0", false);
    snprintf(buf, sizeof buf,
             "{\"incremental_snapshot_collections\": \"rs0.inventory.customers,rs0.inventory.orders\", "
             "\"incremental_snapshot_primary_key\": \"%s\", \"incremental_snapshot_maximum_key\": "
             "\"%s\", \"incremental_snapshot_correlation_id\": null}",
             hex_key, hex_key);
    assert_true(incr_restore(r, buf, &err));
    assert_int_equal(incr_state(r), INCR_READY);
    assert_string_equal(incr_current(r), "inventory.customers");
    assert_true(bson_empty(&r->last_key)); /* from the first document */
    assert_true(bson_empty(&r->max_key));
    incr_destroy(r);

    cfg.dialect = MCDC_DIALECT_3_X;
    r = incr_new(&cfg, "rs0", false);
    snprintf(buf, sizeof buf,
             "{\"incremental_snapshot_collections\": \"[{\\\"incremental_snapshot_collections_id\\\":"
             "\\\"inventory.orders\\\",\\\"incremental_snapshot_collections_additional_condition\\\":"
             "null,\\\"incremental_snapshot_collections_surrogate_key\\\":null}]\", "
             "\"incremental_snapshot_primary_key\": \"%s\", \"incremental_snapshot_maximum_key\": "
             "\"%s\", \"incremental_snapshot_correlation_id\": \"sig-9\"}",
             hex_key, hex_key);
    assert_true(incr_restore(r, buf, &err));
    assert_string_equal(incr_current(r), "inventory.orders");
    assert_true(bson_empty(&r->last_key));
    incr_destroy(r);
    cfg.dialect = MCDC_DIALECT_1_9;
}

/* ---- offsets written by builds against other libbson versions ---- */

/* tests/fixtures/offsets/<name>, read whole; caller frees. */
static char *fixture(const char *name)
{
    const char *dir = getenv("MCDC_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/offsets/%s", dir ? dir : ".", name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s (set MCDC_SOURCE_DIR)", path);
    char *buf = malloc(65536);
    assert_non_null(buf);
    size_t n = fread(buf, 1, 65535, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void expect_doc(const bson_t *got, const char *want_json, const char *what)
{
    bson_t *want = doc_json(want_json);
    if (!bson_equal(got, want))
        fail_msg("%s: not the document %s", what, want_json);
    bson_destroy(want);
}

/* The state every fixture holds: shop.orders (with a condition) then
 * shop.items, signal sig-1, a compound key with an empty array, an int64
 * and a double. Restored from extra_json, it must be the same BSON whatever
 * spelling wrote it, and be written back as the same bytes. */
static void expect_fixture_state(const char *extra_json, const char *what)
{
    /* mongocdc's own offsets of earlier builds: the keys as extended JSON
     * under Debezium's names, read as such; written back in the 3.x layout */
    cfg.dialect = MCDC_DIALECT_3_X;
    struct incr *r = incr_new(&cfg, "rs0", false);
    struct mcdc_error err = MCDC_ERROR_INIT;
    if (!incr_restore(r, extra_json, &err))
        fail_msg("%s: %s", what, err.msg);
    assert_int_equal(incr_state(r), INCR_READY);
    assert_int_equal(r->count, 2);
    assert_string_equal(r->queue[0].ns, "shop.orders");
    assert_string_equal(r->queue[1].ns, "shop.items");
    assert_string_equal(incr_signal_id(r), "sig-1");
    expect_doc(r->queue[0].cond, "{\"status\": {\"$nin\": []}, \"qty\": {\"$gte\": 3}}", what);
    assert_true(bson_empty(r->queue[1].cond));
    expect_doc(&r->last_key,
               "{\"_id\": {\"region\": \"eu\", \"tags\": [], \"n\": {\"$numberLong\": \"7\"}, "
               "\"w\": 2.5}}",
               what);
    expect_doc(&r->max_key,
               "{\"_id\": {\"region\": \"us\", \"tags\": [], \"n\": {\"$numberLong\": \"9\"}, "
               "\"w\": 0.5}}",
               what);
    /* written back: the project's writer, one spelling for every reader */
    assert_string_equal(
        incr_offset_json(r),
        "{\"incremental_snapshot_collections\":\"[{\\\"incremental_snapshot_collections_id\\\":"
        "\\\"shop.orders\\\",\\\"incremental_snapshot_collections_additional_condition\\\":"
        "\\\"{\\\\\\\"status\\\\\\\": {\\\\\\\"$nin\\\\\\\": []}, \\\\\\\"qty\\\\\\\": "
        "{\\\\\\\"$gte\\\\\\\": "
        "{\\\\\\\"$numberInt\\\\\\\": "
        "\\\\\\\"3\\\\\\\"}}}\\\",\\\"incremental_snapshot_collections_"
        "correlation_id\\\":\\\"sig-1\\\"},{\\\"incremental_snapshot_collections_id\\\":"
        "\\\"shop.items\\\",\\\"incremental_snapshot_collections_additional_condition\\\":null,"
        "\\\"incremental_snapshot_collections_correlation_id\\\":\\\"sig-1\\\"}]\","
        "\"mongocdc_incremental_snapshot_primary_key\":\"{\\\"_id\\\": {\\\"region\\\": \\\"eu\\\", "
        "\\\"tags\\\": [], \\\"n\\\": {\\\"$numberLong\\\": \\\"7\\\"}, \\\"w\\\": "
        "{\\\"$numberDouble\\\": \\\"2.5\\\"}}}\",\"mongocdc_incremental_snapshot_maximum_key\":"
        "\"{\\\"_id\\\": {\\\"region\\\": \\\"us\\\", \\\"tags\\\": [], \\\"n\\\": "
        "{\\\"$numberLong\\\": \\\"9\\\"}, \\\"w\\\": {\\\"$numberDouble\\\": \\\"0.5\\\"}}}\","
        "\"incremental_snapshot_correlation_id\":\"sig-1\"}");
    incr_destroy(r);
    cfg.dialect = MCDC_DIALECT_1_9;
}

/* An offsets file and an offsets-topic record value written by builds
 * against libbson 1.23 (`[  ]`) and 1.30 (`[ ]`), as stored
 * (tests/fixtures/offsets/README.md): each reads as the same state. */
static void offsets_of_either_libbson_read_the_same(void **state)
{
    (void)state;
    static const char *const versions[] = {"1.23", "1.30"};
    for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
        char name[128], what[160];
        struct mcdc_error err = MCDC_ERROR_INIT;
        struct mcdc_position pos;
        bool found = false;

        /* the file store, reading the fixture in place */
        struct mcdc_config fc;
        memset(&fc, 0, sizeof fc);
        const char *dir = getenv("MCDC_SOURCE_DIR");
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/fixtures/offsets/incremental.libbson-%s.offsets",
                 dir ? dir : ".", versions[v]);
        fc.topic_prefix = (char *)"shop";
        fc.offset_storage = MCDC_OFFSETS_FILE;
        fc.offsets_file = path;
        struct offset_store *st = offset_store_open_read_only(&fc, &err);
        if (st == NULL)
            fail_msg("%s: %s", path, err.msg);
        position_init(&pos);
        if (!offset_store_load(st, "rs0", &pos, &found, &err))
            fail_msg("%s: %s", path, err.msg);
        assert_true(found);
        assert_int_equal(pos.sec, 1700000000);
        assert_int_equal(pos.ord, 3);
        assert_true(pos.has_resume_token);
        snprintf(what, sizeof what, "offsets file of libbson %s", versions[v]);
        expect_fixture_state(pos.extra_json, what);
        position_clear(&pos);
        offset_store_close(st);

        /* an offsets-topic record's value, parsed as kafka_load's caller does */
        snprintf(name, sizeof name, "incremental.libbson-%s.record-value", versions[v]);
        char *value = fixture(name);
        position_init(&pos);
        if (!position_from_json(value, &pos, &err))
            fail_msg("%s: %s", name, err.msg);
        assert_int_equal(pos.sec, 1700000000);
        snprintf(what, sizeof what, "offsets record of libbson %s", versions[v]);
        expect_fixture_state(pos.extra_json, what);
        position_clear(&pos);
        free(value);
    }
}

static void marker_window_drops_streamed_keys(void **state)
{
    (void)state;
    struct incr *s = incr_new(&cfg, "rs0", false);
    const char *ids[] = {"1", "2", "3", "\"x\""};
    bson_t *k2 = doc_json("{\"_id\": 2}"), *kx = doc_json("{\"_id\": \"x\"}");
    bson_t *k1 = doc_json("{\"_id\": 1}"), *k1l = doc_json("{\"_id\": {\"$numberLong\": \"1\"}}");

    incr_enqueue(s, "db", "c", NULL, "s");
    fill(s, ids, 4, INCR_WAIT_OPEN);
    /* before the open marker: the read already holds the change */
    assert_false(incr_on_event(s, "db", 2, "c", 1, k1, true, 5, 1));
    bson_t *other = doc_json("{\"_id\": \"older-chunk-open\"}");
    assert_false(incr_on_marker(s, true, other));
    bson_destroy(other);
    bson_t *open = doc_json("{\"_id\": \"chunk-1-open\", \"type\": \"snapshot-window-open\"}");
    assert_true(incr_on_marker(s, true, open));
    assert_int_equal(incr_state(s), INCR_OPEN);
    incr_on_event(s, "db", 2, "c", 1, k2, true, 6, 1);     /* superseded */
    incr_on_event(s, "db", 2, "other", 5, kx, true, 6, 2); /* another collection */
    incr_on_event(s, "db", 2, "c", 1, k1l, true, 6, 3);    /* 1 as long: another key */
    bson_t *close = doc_json("{\"_id\": \"chunk-1-close\", \"type\": \"snapshot-window-close\"}");
    assert_true(incr_on_marker(s, true, close));
    assert_int_equal(incr_state(s), INCR_CLOSED);
    assert_int_equal(incr_window_size(s), 4);
    assert_non_null(incr_window_row(s, 0));
    assert_null(incr_window_row(s, 1));
    assert_non_null(incr_window_row(s, 2));
    assert_non_null(incr_window_row(s, 3));
    incr_window_done(s);
    assert_int_equal(incr_state(s), INCR_READY);
    assert_non_null(strstr(incr_offset_json(s), "\\\"x\\\""));
    bson_destroy(open);
    bson_destroy(close);
    bson_destroy(k1);
    bson_destroy(k1l);
    bson_destroy(k2);
    bson_destroy(kx);
    incr_destroy(s);
}

static void insert_delete_closes_on_the_open_markers_delete(void **state)
{
    (void)state;
    struct incr *s = incr_new(&cfg, "rs0", false);
    const char *ids[] = {"1"};
    bson_t *open = doc_json("{\"_id\": \"chunk-1-open\", \"type\": \"snapshot-window-open\"}");
    bson_t *key = doc_json("{\"_id\": \"chunk-1-open\"}");

    incr_enqueue(s, "db", "c", NULL, "s");
    fill(s, ids, 1, INCR_WAIT_OPEN);
    assert_false(incr_on_marker(s, false, key)); /* not open yet */
    assert_true(incr_on_marker(s, true, open));
    assert_true(incr_on_marker(s, false, key));
    assert_int_equal(incr_state(s), INCR_CLOSED);
    bson_destroy(open);
    bson_destroy(key);
    incr_destroy(s);
}

static void cluster_time_window(void **state)
{
    (void)state;
    struct incr *s = incr_new(&cfg, "rs0", true);
    const char *ids[] = {"1", "2"};
    bson_t *k1 = doc_json("{\"_id\": 1}"), *k2 = doc_json("{\"_id\": 2}");

    incr_enqueue(s, "db", "c", NULL, "s");
    fill(s, ids, 2, INCR_WAIT_TIME);
    s->at_sec = 100;
    s->at_inc = 5;
    /* at or before T: in the rows already, they come first */
    assert_false(incr_on_event(s, "db", 2, "c", 1, k1, true, 100, 5));
    assert_false(incr_on_event(s, "db", 2, "c", 1, k1, true, 99, 9));
    assert_int_equal(incr_state(s), INCR_WAIT_TIME);
    /* after T: supersedes its row, and the window closes before anything later */
    assert_true(incr_on_event(s, "db", 2, "c", 1, k2, true, 100, 6));
    assert_int_equal(incr_state(s), INCR_CLOSED);
    assert_non_null(incr_window_row(s, 0));
    assert_null(incr_window_row(s, 1));
    incr_window_done(s);
    fill(s, ids, 2, INCR_WAIT_TIME);
    incr_on_idle(s); /* an empty batch after the read: the stream passed T */
    assert_int_equal(incr_state(s), INCR_CLOSED);
    /* markers mean nothing to a cluster-time window */
    bson_t *open = doc_json("{\"_id\": \"chunk-1-open\"}");
    assert_false(incr_on_marker(s, true, open));
    bson_destroy(open);
    bson_destroy(k1);
    bson_destroy(k2);
    incr_destroy(s);
}

static void stop_during_a_window_ends_between_chunks(void **state)
{
    (void)state;
    struct incr *s = incr_new(&cfg, "rs0", false);
    const char *ids[] = {"1", "2"};
    char *all[] = {"DB\\.C.*"};
    bool current = false;

    incr_enqueue(s, "db", "c1", NULL, "s");
    incr_enqueue(s, "db", "c2", NULL, "s");
    incr_enqueue(s, "db", "other", NULL, "s");
    fill(s, ids, 2, INCR_OPEN);
    assert_int_equal(incr_stop(s, all, 1, &current), 2);
    assert_true(current);
    assert_string_equal(incr_current(s), "db.c1"); /* the open window finishes */
    s->state = INCR_CLOSED;
    incr_window_done(s);
    assert_string_equal(incr_current(s), "db.other");
    assert_int_equal(incr_stop(s, NULL, 0, &current), 1);
    assert_int_equal(incr_state(s), INCR_IDLE);
    assert_null(incr_offset_json(s));
    incr_destroy(s);
}

static void data_collection_regexes(void **state)
{
    (void)state;
    assert_true(incr_ns_matches("db\\.orders.*", "db.orders_2024"));
    assert_true(incr_ns_matches("DB.ORDERS", "db.orders"));
    assert_false(incr_ns_matches("db.orders", "db.orders_2024")); /* anchored */
    assert_false(incr_ns_matches("orders", "db.orders"));
    assert_true(incr_ns_matches("db.(", "db.(")); /* an invalid regex: the literal */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(offsets_round_trip),
        cmocka_unit_test(long_conditions_survive_queue_moves),
        cmocka_unit_test(abort_drops_only_the_failing_signal),
        cmocka_unit_test(debezium_offsets_restart_the_collection),
        cmocka_unit_test(offsets_of_either_libbson_read_the_same),
        cmocka_unit_test(marker_window_drops_streamed_keys),
        cmocka_unit_test(insert_delete_closes_on_the_open_markers_delete),
        cmocka_unit_test(cluster_time_window),
        cmocka_unit_test(stop_during_a_window_ends_between_chunks),
        cmocka_unit_test(data_collection_regexes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
