/* Unit tests for the hand-over between Debezium and mongocdc through the
 * stored offsets (debezium-format.md §4): Kafka Connect key bytes, partition
 * forms per layout, offset values as Debezium 1.9.8 and 3.6.1 write them,
 * adoption of the newest form from the file and the Kafka store, entries of
 * other names, and the refusal of a position that moves backwards.
 *
 * Fixture bytes: Kafka Connect's JsonConverter (schemas.enable=false) writes
 * the key List [name, partition] and the value Map compactly, members in the
 * Map's iteration order (the key and value texts below are what
 * JsonConverter.fromConnectData of connect-json 3.7.0 printed for these maps,
 * control characters as \u00XX in upper case). Debezium builds both with java.util.HashMap
 * (Collect.hashMapOf), whose order for these key sets is, as a JVM prints it:
 *   partition {rs, server_id}                     -> rs, server_id
 *   1.9.8 change stream {sec, ord, h, resume_token} -> sec, ord, resume_token, h
 *   1.9.8 snapshot {sec, ord, initsync, h}         -> sec, ord, initsync, h
 *   3.6.1 {sec, ord, resume_token}                 -> sec, ord, resume_token
 * 1.9.8 (SourceInfo.lastOffset) writes the token as the `_data` hex string and
 * "h" null for change-stream positions; 3.6.1 (MongoDbOffsetContext) the
 * Base64 of the token's BSON (2.7+, DBZ-6522). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bson/bson.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "offsets/offsets.h"

/* A change-stream resume token at Timestamp(1694627139, 3) (0x6501F543). */
#define DATA                                                                                       \
    "826501F543000000032B022C0100296E5A100463F1E2D3C4B5A69788796A5B4C3D2E1F46645F696400646501F5"   \
    "43E4B0A1B2C3D4E5F60004"
/* Base64 of the BSON {_data: DATA}: what 3.6.1 stores. */
#define DATA_B64                                                                                   \
    "gQAAAAJfZGF0YQBxAAAAODI2NTAxRjU0MzAwMDAwMDAzMkIwMjJDMDEwMDI5NkU1QTEwMDQ2M0YxRTJEM0M0QjVBNjk3" \
    "ODg3OTZBNUI0QzNEMkUxRjQ2NjQ1RjY5NjQwMDY0NjUwMUY1NDNFNEIwQTFCMkMzRDRFNUY2MDAwNAAA"

/* Debezium 1.9.8, change streams, connector "inventory-connector", mongodb.name "dbserver1". */
static const char DBZ19_KEY[] =
    "[\"inventory-connector\",{\"rs\":\"rs0\",\"server_id\":\"dbserver1\"}]";
static const char DBZ19_VALUE[] =
    "{\"sec\":1694627139,\"ord\":3,\"resume_token\":\"" DATA "\",\"h\":null}";
/* Debezium 1.9.8 during the initial snapshot (no token yet, h null on 4.4+). */
static const char DBZ19_INITSYNC[] = "{\"sec\":1694627100,\"ord\":1,\"initsync\":true,\"h\":null}";
/* Debezium 1.9.8, oplog capture on MongoDB < 4.4 (h the oplog entry's hash). */
static const char DBZ19_OPLOG[] = "{\"sec\":1694627139,\"ord\":3,\"h\":-4113937578913498110}";
/* Debezium 3.6.1, topic.prefix "dbserver1". */
static const char DBZ36_KEY[] = "[\"inventory-connector\",{\"server_id\":\"dbserver1\"}]";
static const char DBZ36_VALUE[] =
    "{\"sec\":1694627139,\"ord\":3,\"resume_token\":\"" DATA_B64 "\"}";
/* Debezium 3.6.1 after an empty poll: a post-batch token only (sec/ord -1, 3.1+). */
static const char DBZ36_TOKEN_ONLY[] = "{\"sec\":-1,\"ord\":-1,\"resume_token\":\"" DATA_B64 "\"}";

static const char *token_data(const struct mcdc_position *pos)
{
    bson_iter_t it;
    if (!pos->has_resume_token || !bson_iter_init_find(&it, &pos->resume_token, "_data"))
        return NULL;
    return bson_iter_utf8(&it, NULL);
}

static void base_cfg(struct mcdc_config *cfg, enum mcdc_dialect d)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->topic_prefix = (char *)"dbserver1";
    cfg->connector_name = (char *)"inventory-connector";
    cfg->dialect = d;
    cfg->offsets_flush_timeout_ms = 5000;
}

/* ---- keys and partitions ---- */

static void keys_are_connect_bytes(void **state)
{
    (void)state;
    char *k = offsets_partition_key("inventory-connector", "dbserver1", NULL);
    assert_string_equal(k, DBZ36_KEY);
    free(k);
    k = offsets_partition_key("inventory-connector", "dbserver1", "rs0");
    assert_string_equal(k, DBZ19_KEY);
    free(k);
    /* Jackson's escaping of the strings. */
    k = offsets_partition_key("a\"b\\c\x1f\n", "x", NULL);
    assert_string_equal(k, "[\"a\\\"b\\\\c\\u001F\\n\",{\"server_id\":\"x\"}]");
    free(k);
    /* ... and a key is read back into its parts. */
    char *nm, *sid, *rs;
    assert_true(offsets_parse_key(DBZ19_KEY, &nm, &sid, &rs));
    assert_string_equal(nm, "inventory-connector");
    assert_string_equal(sid, "dbserver1");
    assert_string_equal(rs, "rs0");
    free(nm);
    free(sid);
    free(rs);
    assert_true(offsets_parse_key(DBZ36_KEY, &nm, &sid, &rs));
    assert_null(rs);
    free(nm);
    free(sid);
    assert_false(offsets_parse_key("[\"mysql\",{\"server\":\"m\"}]", &nm, &sid, &rs));
    assert_false(offsets_parse_key("not json", &nm, &sid, &rs));

    struct mcdc_config cfg;
    base_cfg(&cfg, MCDC_DIALECT_3_X);
    assert_string_equal(mcdc_config_connector_name(&cfg), "inventory-connector");
    cfg.connector_name = NULL; /* default: topic.prefix, today's mongocdc keys */
    assert_string_equal(mcdc_config_connector_name(&cfg), "dbserver1");
    cfg.connector_name = (char *)"";
    assert_string_equal(mcdc_config_connector_name(&cfg), "dbserver1");
}

static void layout_partitions_and_forms(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    const char *f[3];

    base_cfg(&cfg, MCDC_DIALECT_3_X);
    assert_null(offsets_layout_partition(&cfg, "rs0", false, false));    /* replica set */
    assert_null(offsets_layout_partition(&cfg, "cluster", true, false)); /* merged */
    assert_string_equal(offsets_layout_partition(&cfg, "sh1", false, true), "sh1");
    assert_int_equal(offsets_partition_forms(&cfg, "rs0", false, false, f), 3);
    assert_null(f[0]);
    assert_string_equal(f[1], "rs0");
    assert_string_equal(f[2], "cluster");
    assert_int_equal(offsets_partition_forms(&cfg, "cluster", true, false, f), 2);
    assert_null(f[0]);
    assert_string_equal(f[1], "cluster");
    assert_int_equal(offsets_partition_forms(&cfg, "sh1", false, true, f), 1);
    assert_string_equal(f[0], "sh1");

    base_cfg(&cfg, MCDC_DIALECT_1_9);
    assert_string_equal(offsets_layout_partition(&cfg, "rs0", false, false), "rs0");
    assert_string_equal(offsets_layout_partition(&cfg, "cluster", true, false), "cluster");
    assert_string_equal(offsets_layout_partition(&cfg, "sh1", false, true), "sh1");
    assert_int_equal(offsets_partition_forms(&cfg, "rs0", false, false, f), 3);
    assert_string_equal(f[0], "rs0");
    assert_null(f[1]);
    assert_string_equal(f[2], "cluster");
    assert_int_equal(offsets_partition_forms(&cfg, "cluster", true, false, f), 2);
    assert_string_equal(f[0], "cluster");
    assert_null(f[1]);
}

/* ---- values ---- */

static void debezium_1_9_8_values_read(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_position p;

    position_init(&p);
    assert_true(position_from_json(DBZ19_VALUE, &p, &err));
    assert_int_equal(p.writer, OFFSET_WRITER_DEBEZIUM_1X);
    assert_int_equal(offset_value_writer(DBZ19_VALUE), OFFSET_WRITER_DEBEZIUM_1X);
    assert_false(p.oplog); /* a token: change streams */
    assert_false(p.has_h);
    assert_string_equal(token_data(&p), DATA);
    assert_true(position_time(&p) == ((uint64_t)1694627139 << 32 | 3));

    assert_true(position_from_json(DBZ19_INITSYNC, &p, &err));
    assert_true(p.initsync);
    assert_int_equal(p.writer, OFFSET_WRITER_DEBEZIUM_1X);

    assert_true(position_from_json(DBZ19_OPLOG, &p, &err));
    assert_true(p.oplog);
    assert_true(p.has_h);
    assert_true(p.h == -4113937578913498110LL);
    position_clear(&p);
}

static void debezium_3_6_1_values_read(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_position p;

    position_init(&p);
    assert_true(position_from_json(DBZ36_VALUE, &p, &err));
    assert_int_equal(p.writer, OFFSET_WRITER_DEBEZIUM_2X_3X);
    assert_string_equal(offset_writer_name(p.writer), "Debezium 2.x-3.x");
    assert_string_equal(token_data(&p), DATA);
    assert_true(position_time(&p) == ((uint64_t)1694627139 << 32 | 3));

    /* Token only: the time comes from the token. */
    assert_true(position_from_json(DBZ36_TOKEN_ONLY, &p, &err));
    assert_int_equal(p.sec, -1);
    assert_true(position_time(&p) == ((uint64_t)1694627139 << 32 | 3));
    position_clear(&p);
}

/* Written in each layout as that layout's Debezium reads it. */
static void values_written_per_layout(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_position p, q;
    char *j;

    position_init(&p);
    assert_true(position_from_json(DBZ36_VALUE, &p, &err));
    j = position_to_json_dialect(&p, MCDC_DIALECT_3_X);
    assert_string_equal(j, "{\"sec\":1694627139,\"ord\":3,\"resume_token\":\"" DATA_B64
                           "\",\"mongocdc_capture_mode\":\"change_streams\"}");
    free(j);
    /* 1.9: the hex `_data` (Base64 here made 1.9 fail with FailedToParse) and "h":null. */
    j = position_to_json_dialect(&p, MCDC_DIALECT_1_9);
    assert_string_equal(j, "{\"sec\":1694627139,\"ord\":3,\"h\":null,\"resume_token\":\"" DATA
                           "\",\"mongocdc_capture_mode\":\"change_streams\"}");
    /* ... and mongocdc reads its own 1.9 value back to the same token. */
    position_init(&q);
    assert_true(position_from_json(j, &q, &err));
    assert_int_equal(q.writer, OFFSET_WRITER_MONGOCDC);
    assert_false(q.oplog);
    assert_true(bson_equal(&q.resume_token, &p.resume_token));
    free(j);

    /* A token with _typeBits: 3.x keeps it whole; 1.9 can carry only `_data`
     * (as Debezium 1.9 itself did). */
    bson_t *t =
        BCON_NEW("_data", BCON_UTF8(DATA), "_typeBits", BCON_BIN(0, (const uint8_t *)"\x40", 1));
    bson_reinit(&p.resume_token);
    bson_concat(&p.resume_token, t);
    bson_destroy(t);
    j = position_to_json_dialect(&p, MCDC_DIALECT_3_X);
    assert_true(position_from_json(j, &q, &err));
    assert_true(bson_equal(&q.resume_token, &p.resume_token));
    free(j);
    j = position_to_json_dialect(&p, MCDC_DIALECT_1_9);
    assert_non_null(strstr(j, "\"resume_token\":\"" DATA "\""));
    free(j);

    /* A token-only position (post-batch token): 3.x writes -1 as 3.1+ does,
     * 1.9 the token's time (1.9 would take Timestamp(-1, -1) for a position
     * older than the oplog and snapshot again). */
    position_clear(&p);
    assert_true(position_from_json(DBZ36_TOKEN_ONLY, &p, &err));
    j = position_to_json_dialect(&p, MCDC_DIALECT_3_X);
    assert_non_null(strstr(j, "{\"sec\":-1,\"ord\":-1,"));
    free(j);
    j = position_to_json_dialect(&p, MCDC_DIALECT_1_9);
    assert_non_null(strstr(j, "{\"sec\":1694627139,\"ord\":3,\"h\":null,"));
    free(j);

    /* An interrupted snapshot: initsync true, readable by both. */
    position_clear(&p);
    assert_true(position_from_json(DBZ19_INITSYNC, &p, &err));
    j = position_to_json_dialect(&p, MCDC_DIALECT_1_9);
    assert_non_null(strstr(j, "\"initsync\":true"));
    assert_non_null(strstr(j, "\"h\":null"));
    free(j);
    position_clear(&p);
    position_clear(&q);
}

/* ---- stores ---- */

struct tmpdir {
    char dir[64];
    char path[128];
};

static void tmpdir_make(struct tmpdir *t)
{
    snprintf(t->dir, sizeof t->dir, "/tmp/mcdc-handover-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->path, sizeof t->path, "%s/offsets.json", t->dir);
}

static void tmpdir_remove(struct tmpdir *t)
{
    char p[200];
    unlink(t->path);
    snprintf(p, sizeof p, "%s.lock", t->path);
    unlink(p);
    snprintf(p, sizeof p, "%s.tmp", t->path);
    unlink(p);
    snprintf(p, sizeof p, "%s/log", t->dir);
    unlink(p);
    rmdir(t->dir);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = xcalloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/*
 * The adoption scenario on any store: Debezium 1.9.8's per-replica-set entry
 * (older), Debezium 3.6.1's {server_id} entry (newer), an old mongocdc entry
 * under the prefix, and an entry of another connector name. The newest is
 * adopted whichever the layout; the other name is reported; a save goes
 * under the layout's key in its value form.
 */
static void adoption_on(struct mcdc_config *cfg)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *store = offset_store_open(cfg, &err);
    struct offset_origin origin = {0};
    struct mcdc_position p;
    const char *forms[3];
    size_t nf, nforeign = 0;
    bool found = false;

    assert_non_null(store);
    assert_true(offset_store_put(store, DBZ19_KEY,
                                 "{\"sec\":1694620000,\"ord\":1,\"resume_token\":"
                                 "\"826501DA60000000012B0229296E04\",\"h\":null}",
                                 &err));
    assert_true(offset_store_put(store, DBZ36_KEY, DBZ36_VALUE, &err));
    assert_true(
        offset_store_put(store, "[\"dbserver1\",{\"rs\":\"rs0\",\"server_id\":\"dbserver1\"}]",
                         "{\"sec\":1694600000,\"ord\":1,\"h\":null,\"mongocdc_capture_mode\":"
                         "\"change_streams\",\"resume_token\":\"826501A90000000001\"}",
                         &err));
    assert_true(offset_store_put(store, "[\"old-connector\",{\"server_id\":\"dbserver1\"}]",
                                 DBZ36_VALUE, &err));
    assert_true(offset_store_put(store, "[\"other-app\",{\"server\":\"mysql1\"}]",
                                 "{\"file\":\"binlog.000003\",\"pos\":154}", &err));
    offset_store_close(store);

    store = offset_store_open(cfg, &err);
    assert_non_null(store);
    position_init(&p);
    nf = offsets_partition_forms(cfg, "rs0", false, false, forms);
    assert_true(offset_store_load_forms(store, forms, nf, &p, &found, &origin, &err));
    assert_true(found);
    assert_string_equal(origin.key, DBZ36_KEY); /* the newest, whatever the layout */
    assert_int_equal(origin.writer, OFFSET_WRITER_DEBEZIUM_2X_3X);
    assert_string_equal(token_data(&p), DATA);
    const char *const *foreign = offset_store_foreign(store, &nforeign);
    assert_int_equal(nforeign, 1); /* the MySQL connector's key is not a MongoDB one */
    assert_string_equal(foreign[0], "[\"old-connector\",{\"server_id\":\"dbserver1\"}]");
    offset_origin_clear(&origin);

    /* Stored from now on under the layout's key, in its value form. */
    assert_true(
        offset_store_save(store, offsets_layout_partition(cfg, "rs0", false, false), &p, &err));
    struct offset_entry *e = NULL;
    size_t n = 0;
    assert_true(offset_store_scan(store, &e, &n, &err));
    const char *want_key = cfg->dialect == MCDC_DIALECT_1_9 ? DBZ19_KEY : DBZ36_KEY;
    const char *got = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(e[i].key, want_key))
            got = e[i].value_json;
    assert_non_null(got);
    assert_int_equal(offset_value_writer(got), OFFSET_WRITER_MONGOCDC);
    assert_non_null(strstr(got, cfg->dialect == MCDC_DIALECT_1_9 ? "\"resume_token\":\"" DATA "\""
                                                                 : "\"resume_token\":\"" DATA_B64
                                                                   "\""));
    offset_entries_free(e, n);

    /* Under the wrong name only: nothing found, the entry is named. */
    cfg->connector_name = (char *)"typo-connector";
    offset_store_close(store);
    store = offset_store_open(cfg, &err);
    assert_true(offset_store_remove(store, NULL, &err)); /* nothing there: a no-op */
    assert_true(offset_store_load_forms(store, forms, nf, &p, &found, &origin, &err));
    assert_true(found); /* the old mongocdc entry under topic.prefix */
    assert_string_equal(origin.key, "[\"dbserver1\",{\"rs\":\"rs0\",\"server_id\":\"dbserver1\"}]");
    assert_int_equal(origin.writer, OFFSET_WRITER_MONGOCDC);
    offset_origin_clear(&origin);
    (void)offset_store_foreign(store, &nforeign);
    assert_int_equal(nforeign, 3); /* inventory-connector's two and old-connector's */
    offset_store_close(store);
    cfg->connector_name = (char *)"inventory-connector";
    position_clear(&p);
}

static void adoption_from_file_store(void **state)
{
    (void)state;
    struct tmpdir t;
    struct mcdc_config cfg;
    char logpath[200];
    struct mcdc_error err = MCDC_ERROR_INIT;

    for (int d = 0; d < 2; d++) {
        tmpdir_make(&t);
        base_cfg(&cfg, d == 0 ? MCDC_DIALECT_3_X : MCDC_DIALECT_1_9);
        cfg.offset_storage = MCDC_OFFSETS_FILE;
        cfg.offsets_file = t.path;
        snprintf(logpath, sizeof logpath, "%s/log", t.dir);
        assert_true(mcdc_log_open(MCDC_LOG_INFO, MCDC_LOG_FORMAT_TEXT, logpath, &err));
        adoption_on(&cfg);
        mcdc_log_close();
        char *text = slurp(logpath);
        assert_non_null(strstr(text, "holds a position under [\"old-connector\",{\"server_id\":"
                                     "\"dbserver1\"}], which is not this source's"));
        free(text);
        tmpdir_remove(&t);
    }
}

static void adoption_from_kafka_store(void **state)
{
    (void)state;
    char errstr[256];
    for (int d = 0; d < 2; d++) {
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr);
        rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
        assert_non_null(host);
        rd_kafka_mock_cluster_t *mc = rd_kafka_mock_cluster_new(host, 1);
        assert_non_null(mc);
        /* Kafka Connect's connect-offsets has 25 partitions: keys land where
         * murmur2 puts them, and every partition is read. */
        assert_int_equal(rd_kafka_mock_topic_create(mc, "connect-offsets", 25, 1), 0);
        struct mcdc_kv kv[2] = {
            {(char *)"bootstrap.servers", (char *)rd_kafka_mock_cluster_bootstraps(mc), 1, 1},
            {(char *)"log_level", (char *)"3", 2, 1},
        };
        struct mcdc_config cfg;
        base_cfg(&cfg, d == 0 ? MCDC_DIALECT_3_X : MCDC_DIALECT_1_9);
        cfg.offset_storage = MCDC_OFFSETS_KAFKA;
        cfg.offsets_topic = (char *)"connect-offsets";
        cfg.kafka.items = kv;
        cfg.kafka.count = 2;
        adoption_on(&cfg);
        rd_kafka_mock_cluster_destroy(mc);
        rd_kafka_destroy(host);
    }
}

/* A position never moves backwards silently: refused with ERANGE and an
 * ERROR, the stored one kept; allowed with OFFSET_SAVE_ALLOW_BACKWARDS. */
static void backwards_position_is_refused(void **state)
{
    (void)state;
    struct tmpdir t;
    struct mcdc_config cfg;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_position newer, older, q;
    char logpath[200];
    bool found = false;

    tmpdir_make(&t);
    base_cfg(&cfg, MCDC_DIALECT_3_X);
    cfg.offset_storage = MCDC_OFFSETS_FILE;
    cfg.offsets_file = t.path;
    snprintf(logpath, sizeof logpath, "%s/log", t.dir);
    assert_true(mcdc_log_open(MCDC_LOG_INFO, MCDC_LOG_FORMAT_TEXT, logpath, &err));

    position_init(&newer);
    position_init(&older);
    position_init(&q);
    assert_true(position_from_json(DBZ36_VALUE, &newer, &err));
    older.sec = 1694627000;
    older.ord = 9;

    struct offset_store *store = offset_store_open(&cfg, &err);
    assert_true(offset_store_save(store, NULL, &newer, &err));
    assert_true(offset_store_save(store, NULL, &newer, &err)); /* the same: fine */
    assert_false(offset_store_save(store, NULL, &older, &err));
    assert_int_equal(err.domain, MCDC_ERR_IO);
    assert_int_equal(err.code, ERANGE);
    assert_false(err.retriable);
    offset_store_close(store);

    /* A new handle knows the stored one from the store itself. */
    store = offset_store_open(&cfg, &err);
    err = (struct mcdc_error)MCDC_ERROR_INIT;
    assert_false(offset_store_save(store, NULL, &older, &err));
    assert_int_equal(err.code, ERANGE);
    assert_true(offset_store_load(store, NULL, &q, &found, &err));
    assert_true(found);
    assert_int_equal(q.sec, 1694627139); /* kept */
    /* Another partition is not compared. */
    assert_true(offset_store_save(store, "rs9", &older, &err));
    /* The operator's tool may. */
    assert_true(offset_store_save_flags(store, NULL, &older, OFFSET_SAVE_ALLOW_BACKWARDS, &err));
    assert_true(offset_store_load(store, NULL, &q, &found, &err));
    assert_int_equal(q.sec, 1694627000);
    /* Reset: the entry is gone, any position may follow. */
    assert_true(offset_store_remove(store, NULL, &err));
    assert_true(offset_store_load(store, NULL, &q, &found, &err));
    assert_false(found);
    offset_store_close(store);
    mcdc_log_close();

    char *text = slurp(logpath);
    assert_non_null(strstr(text, "ERROR"));
    assert_non_null(strstr(text, "refusing to store position Timestamp(1694627000, 9) under "
                                 "[\"inventory-connector\",{\"server_id\":\"dbserver1\"}]: the "
                                 "stored one, Timestamp(1694627139, 3), is newer"));
    assert_non_null(strstr(text, "moving the stored position under"));
    free(text);
    position_clear(&newer);
    position_clear(&older);
    position_clear(&q);
    tmpdir_remove(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keys_are_connect_bytes),
        cmocka_unit_test(layout_partitions_and_forms),
        cmocka_unit_test(debezium_1_9_8_values_read),
        cmocka_unit_test(debezium_3_6_1_values_read),
        cmocka_unit_test(values_written_per_layout),
        cmocka_unit_test(adoption_from_file_store),
        cmocka_unit_test(adoption_from_kafka_store),
        cmocka_unit_test(backwards_position_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
