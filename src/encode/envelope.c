/*
 * envelope: the Debezium key and value payloads (debezium-format.md §1.1-§1.5)
 * from one table per dialect. The table says which value and source fields
 * exist and in which order; the writers below know how to render each field,
 * so adding a dialect is a new table row, not a new encoder.
 *
 * Output is Kafka's JsonConverter layout (Jackson, no whitespace) with the
 * documents inside as JSON strings holding the MongoDB Java driver's extended
 * JSON (ejson.h): STRICT compact for after/before/patch/filter/lsid, RELAXED
 * compact for the key id, RELAXED with default separators for updatedFields
 * (§2.1).
 */
#include "encode/encode_internal.h"

#include <string.h>

static const struct dialect dialects[MCDC_DIALECT_COUNT] =
    {
        [MCDC_DIALECT_1_9] =
            {
                .name = "1.9",
                .default_version = "1.9.8.Final",
                .value_fields = {VF_AFTER, VF_PATCH, VF_FILTER, VF_UPDATE_DESCRIPTION, VF_SOURCE,
                                 VF_OP, VF_TS_MS, VF_TRANSACTION},
                .value_count = 8,
                .source_fields = {SF_VERSION, SF_CONNECTOR, SF_NAME, SF_TS_MS, SF_SNAPSHOT, SF_DB,
                                  SF_SEQUENCE, SF_RS, SF_COLLECTION, SF_ORD, SF_H, SF_TORD,
                                  SF_STXNID, SF_LSID, SF_TXN_NUMBER},
                .source_count = 15,
                .ts_rule = TS_RULE_1_9,
                .versioned_structs = false,
                .source_versioned = false,
                .transaction_named = false,
                .snapshot_allowed = "true,last,false,incremental",
                .txn_value_ts_ms = false,
                .txn_collection_with_rs = true,
            },
        [MCDC_DIALECT_3_X] =
            {
                .name = "3.x",
                .default_version = "3.6.1.Final",
                .value_fields = {VF_BEFORE, VF_AFTER, VF_UPDATE_DESCRIPTION, VF_SOURCE, VF_OP,
                                 VF_TS_MS, VF_TRANSACTION},
                .value_count = 7,
                .source_fields = {SF_VERSION, SF_CONNECTOR, SF_NAME, SF_TS_MS, SF_SNAPSHOT, SF_DB,
                                  SF_SEQUENCE, SF_TS_US, SF_TS_NS, SF_COLLECTION, SF_ORD, SF_LSID,
                                  SF_TXN_NUMBER, SF_WALL_TIME},
                .source_count = 14,
                .ts_rule = TS_RULE_3_4,
                .versioned_structs = true,
                .source_versioned = true,
                .transaction_named = true,
                .snapshot_allowed = "true,first,first_in_data_collection,last_in_data_collection,"
                                    "last,false,incremental",
                .txn_value_ts_ms = true,
                .txn_collection_with_rs = false,
            },
};

const struct dialect *dialect_get(enum mcdc_dialect d)
{
    return &dialects[(unsigned)d < MCDC_DIALECT_COUNT ? d : MCDC_DIALECT_1_9];
}

const char *vfield_name(enum vfield f)
{
    static const char *const names[VF_COUNT] = {
        [VF_BEFORE] = "before",
        [VF_AFTER] = "after",
        [VF_PATCH] = "patch",
        [VF_FILTER] = "filter",
        [VF_UPDATE_DESCRIPTION] = "updateDescription",
        [VF_SOURCE] = "source",
        [VF_OP] = "op",
        [VF_TS_MS] = "ts_ms",
        [VF_TRANSACTION] = "transaction",
    };
    return names[f];
}

const char *sfield_name(enum sfield f)
{
    static const char *const names[SF_COUNT] = {
        [SF_VERSION] = "version",
        [SF_CONNECTOR] = "connector",
        [SF_NAME] = "name",
        [SF_TS_MS] = "ts_ms",
        [SF_SNAPSHOT] = "snapshot",
        [SF_DB] = "db",
        [SF_SEQUENCE] = "sequence",
        [SF_TS_US] = "ts_us",
        [SF_TS_NS] = "ts_ns",
        [SF_RS] = "rs",
        [SF_COLLECTION] = "collection",
        [SF_ORD] = "ord",
        [SF_H] = "h",
        [SF_TORD] = "tord",
        [SF_STXNID] = "stxnid",
        [SF_LSID] = "lsid",
        [SF_TXN_NUMBER] = "txnNumber",
        [SF_WALL_TIME] = "wallTime",
    };
    return names[f];
}

static const char *snapshot_text(enum mcdc_snapshot_flag s)
{
    switch (s) {
    case MCDC_SNAP_TRUE:
        return "true";
    case MCDC_SNAP_LAST:
        return "last";
    case MCDC_SNAP_INCREMENTAL:
        return "incremental";
    case MCDC_SNAP_FALSE:
    case MCDC_SNAP_FLAG_COUNT:
        break;
    }
    /* SnapshotRecord.toSource leaves FALSE unset; JsonConverter then prints
     * the schema default "false" (§1.5). */
    return "false";
}

int64_t envelope_source_ts_ms(const struct encoder *enc, const struct mcdc_event *ev,
                              int64_t ts_ms_now)
{
    int64_t cluster_ms = ev->has_cluster_time ? (int64_t)ev->ts_sec * 1000 : 0;
    if (enc->d->ts_rule == TS_RULE_1_9)
        return cluster_ms; /* streaming and snapshot alike: the position's seconds */
    if (ev->op == MCDC_OP_READ)
        return ev->snapshot == MCDC_SNAP_INCREMENTAL ? cluster_ms : ts_ms_now;
    if (ev->has_wall_time && ev->wall_time_ms != 0)
        return ev->wall_time_ms; /* 3.4+: wallTime (DBZ-9683) */
    return cluster_ms;
}

/* source.ts_us of the event (§1.5): a snapshot read's ts_ms is the wall clock
 * (3.1+), which Debezium keeps at µs precision (Instant.now()); every other
 * ts_ms comes from a server time in ms or s, so ts_us is that value × 1000. */
static int64_t source_ts_us(const struct encoder *enc, const struct mcdc_event *ev,
                            const struct envelope_parts *p)
{
    if (enc->d->ts_rule != TS_RULE_1_9 && ev->op == MCDC_OP_READ &&
        ev->snapshot != MCDC_SNAP_INCREMENTAL)
        return p->ts_us_now;
    return p->source_ts_ms * 1000;
}

/* Appends doc as extended JSON inside a JSON string. */
static void doc_string(struct encoder *enc, const bson_t *doc, enum ejson_mode mode,
                       enum ejson_separators sep)
{
    ejson_buf_reset(&enc->json);
    ejson_write_document(&enc->json, doc, mode, sep);
    json_append_string(&enc->out, enc->json.data, enc->json.len);
}

static void field_name(struct ejson_buf *out, bool *first, const char *name)
{
    if (!*first)
        ejson_buf_append(out, ",", 1);
    *first = false;
    ejson_buf_append(out, "\"", 1);
    json_append_lit(out, name);
    ejson_buf_append(out, "\":", 2);
}

static void write_source_field(struct encoder *enc, const struct mcdc_event *ev, enum sfield f,
                               const struct envelope_parts *p)
{
    struct ejson_buf *out = &enc->out;
    const struct mcdc_config *cfg = enc->cfg;
    switch (f) {
    case SF_VERSION:
        json_append_string(out, enc->version, strlen(enc->version));
        return;
    case SF_CONNECTOR:
        json_append_lit(out, "\"mongodb\"");
        return;
    case SF_NAME:
        json_append_string(out, cfg->topic_prefix, strlen(cfg->topic_prefix));
        return;
    case SF_TS_MS:
        json_append_int(out, p->source_ts_ms);
        return;
    case SF_SNAPSHOT:
        ejson_buf_append(out, "\"", 1);
        json_append_lit(out, snapshot_text(ev->snapshot));
        ejson_buf_append(out, "\"", 1);
        return;
    case SF_DB:
        json_append_string(out, ev->db ? ev->db : "", ev->db ? ev->db_len : 0);
        return;
    case SF_TS_US:
        json_append_int(out, source_ts_us(enc, ev, p));
        return;
    case SF_TS_NS:
        json_append_int(out, source_ts_us(enc, ev, p) * 1000);
        return;
    case SF_RS:
        json_append_string(out, ev->rs ? ev->rs : "", ev->rs ? strlen(ev->rs) : 0);
        return;
    case SF_COLLECTION:
        json_append_string(out, ev->coll ? ev->coll : "", ev->coll ? ev->coll_len : 0);
        return;
    case SF_ORD:
        /* ord is an int32; -1 when the position has no timestamp (§1.5). */
        json_append_int(out, ev->has_cluster_time ? (int64_t)(int32_t)ev->ts_inc : -1);
        return;
    case SF_H:
        /* oplog h in oplog mode; null for change-stream positions and for
         * entries without `h` (MongoDB 4.4+; 1.9's SourceInfo reads it with
         * getLong("h"), null when absent; snapshot reads carry none here). */
        if (cfg->capture_mode == MCDC_CAPTURE_OPLOG && ev->oplog_has_h)
            json_append_int(out, ev->oplog_h);
        else
            json_append_lit(out, "null");
        return;
    case SF_TORD:
        if (ev->oplog_tord > 0)
            json_append_int(out, ev->oplog_tord);
        else
            json_append_lit(out, "null");
        return;
    case SF_STXNID:
        if (ev->oplog_stxnid)
            json_append_string(out, ev->oplog_stxnid, strlen(ev->oplog_stxnid));
        else
            json_append_lit(out, "null");
        return;
    case SF_LSID:
        if (ev->has_lsid)
            doc_string(enc, &ev->lsid, EJSON_STRICT, EJSON_SEP_COMPACT);
        else
            json_append_lit(out, "null");
        return;
    case SF_TXN_NUMBER:
        if (ev->has_txn_number)
            json_append_int(out, ev->txn_number);
        else
            json_append_lit(out, "null");
        return;
    case SF_WALL_TIME:
        /* null for snapshot reads and when absent or 0 (§1.5). */
        if (ev->op != MCDC_OP_READ && ev->has_wall_time && ev->wall_time_ms != 0)
            json_append_int(out, ev->wall_time_ms);
        else
            json_append_lit(out, "null");
        return;
    case SF_SEQUENCE: /* always null for MongoDB */
    case SF_COUNT:
        break;
    }
    json_append_lit(out, "null");
}

static void write_source(struct encoder *enc, const struct mcdc_event *ev,
                         const struct envelope_parts *p)
{
    bool first = true;
    ejson_buf_append(&enc->out, "{", 1);
    for (size_t i = 0; i < enc->d->source_count; i++) {
        enum sfield f = enc->d->source_fields[i];
        field_name(&enc->out, &first, sfield_name(f));
        write_source_field(enc, ev, f, p);
    }
    ejson_buf_append(&enc->out, "}", 1);
}

/* removedFields: array of strings after field selection; null when empty
 * (the connector only sets the field for a non-empty list, §1.3). */
static void write_removed(struct encoder *enc, const struct mcdc_event *ev)
{
    struct ejson_buf *out = &enc->out;
    size_t mark = out->len, n = 0;
    bson_iter_t it;
    if (ev->has_removed_fields && bson_iter_init(&it, &ev->removed_fields)) {
        ejson_buf_append(out, "[", 1);
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_UTF8(&it))
                continue;
            uint32_t len = 0;
            const char *s = bson_iter_utf8(&it, &len);
            ejson_buf_reset(&enc->name);
            if (!fields_map_name(enc->sel, s, len, &enc->name))
                continue;
            if (n++)
                ejson_buf_append(out, ",", 1);
            json_append_string(out, enc->name.data, enc->name.len);
        }
        ejson_buf_append(out, "]", 1);
    }
    if (n == 0) {
        out->len = mark;
        json_append_lit(out, "null");
    }
}

/* truncatedArrays: [{"field": ..., "size": ...}] from {field, newSize}. */
static void write_truncated(struct encoder *enc, const struct mcdc_event *ev)
{
    struct ejson_buf *out = &enc->out;
    size_t mark = out->len, n = 0;
    bson_iter_t it, child;
    if (ev->has_truncated_arrays && bson_iter_init(&it, &ev->truncated_arrays)) {
        ejson_buf_append(out, "[", 1);
        while (bson_iter_next(&it)) {
            if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &child))
                continue;
            const char *field = NULL;
            uint32_t flen = 0;
            int64_t size = 0;
            while (bson_iter_next(&child)) {
                if (strcmp(bson_iter_key(&child), "field") == 0 && BSON_ITER_HOLDS_UTF8(&child))
                    field = bson_iter_utf8(&child, &flen);
                else if (strcmp(bson_iter_key(&child), "newSize") == 0)
                    size = bson_iter_as_int64(&child);
            }
            ejson_buf_reset(&enc->name);
            if (field == NULL || !fields_map_name(enc->sel, field, flen, &enc->name))
                continue;
            if (n++)
                ejson_buf_append(out, ",", 1);
            json_append_lit(out, "{\"field\":");
            json_append_string(out, enc->name.data, enc->name.len);
            json_append_lit(out, ",\"size\":");
            json_append_int(out, (int32_t)size);
            ejson_buf_append(out, "}", 1);
        }
        ejson_buf_append(out, "]", 1);
    }
    if (n == 0) {
        out->len = mark;
        json_append_lit(out, "null");
    }
}

static void write_update_description(struct encoder *enc, const struct mcdc_event *ev,
                                     const struct envelope_parts *p)
{
    if (ev->op != MCDC_OP_UPDATE || p->updated == NULL) {
        json_append_lit(&enc->out, "null");
        return;
    }
    json_append_lit(&enc->out, "{\"removedFields\":");
    write_removed(enc, ev);
    json_append_lit(&enc->out, ",\"updatedFields\":");
    /* BsonDocument.toJson(): RELAXED, not indented (§2.1, legacy mode). */
    doc_string(enc, p->updated, EJSON_RELAXED, EJSON_SEP_DEFAULT);
    json_append_lit(&enc->out, ",\"truncatedArrays\":");
    write_truncated(enc, ev);
    ejson_buf_append(&enc->out, "}", 1);
}

static void write_transaction(struct encoder *enc, const struct txn_block *blk)
{
    struct ejson_buf *out = &enc->out;
    if (blk == NULL || !blk->present) {
        json_append_lit(out, "null");
        return;
    }
    json_append_lit(out, "{\"id\":");
    json_append_string(out, blk->id, blk->id_len);
    json_append_lit(out, ",\"total_order\":");
    json_append_int(out, blk->total_order);
    json_append_lit(out, ",\"data_collection_order\":");
    json_append_int(out, blk->data_collection_order);
    ejson_buf_append(out, "}", 1);
}

static void doc_or_null(struct encoder *enc, const bson_t *doc)
{
    if (doc)
        doc_string(enc, doc, EJSON_STRICT, EJSON_SEP_COMPACT);
    else
        json_append_lit(&enc->out, "null");
}

static void write_value_field(struct encoder *enc, const struct mcdc_event *ev, enum vfield f,
                              const struct envelope_parts *p)
{
    switch (f) {
    case VF_BEFORE:
        doc_or_null(enc, p->before);
        return;
    case VF_AFTER:
        doc_or_null(enc, p->after);
        return;
    case VF_PATCH:
        doc_or_null(enc, p->patch);
        return;
    case VF_FILTER:
        doc_or_null(enc, ev->has_oplog_filter ? &ev->oplog_filter : NULL);
        return;
    case VF_UPDATE_DESCRIPTION:
        write_update_description(enc, ev, p);
        return;
    case VF_SOURCE:
        write_source(enc, ev, p);
        return;
    case VF_OP:
        ejson_buf_append(&enc->out, "\"", 1);
        json_append_lit(&enc->out, event_op_letter(ev->op));
        ejson_buf_append(&enc->out, "\"", 1);
        return;
    case VF_TS_MS:
        json_append_int(&enc->out, p->ts_ms_now);
        return;
    case VF_TRANSACTION:
        write_transaction(enc, p->txn);
        return;
    case VF_COUNT:
        break;
    }
    json_append_lit(&enc->out, "null");
}

void envelope_write_value(struct encoder *enc, const struct mcdc_event *ev,
                          const struct topic_entry *te, const struct envelope_parts *p)
{
    struct ejson_buf *out = &enc->out;
    bool first = true;
    ejson_buf_reset(out);
    if (enc->cfg->value_schemas_enable) {
        json_append_lit(out, "{\"schema\":");
        schema_write_data_value(enc, out, te->topic);
        json_append_lit(out, ",\"payload\":");
    }
    ejson_buf_append(out, "{", 1);
    for (size_t i = 0; i < enc->d->value_count; i++) {
        enum vfield f = enc->d->value_fields[i];
        field_name(out, &first, vfield_name(f));
        write_value_field(enc, ev, f, p);
    }
    ejson_buf_append(out, "}", 1);
    if (enc->cfg->value_schemas_enable)
        ejson_buf_append(out, "}", 1);
}

bool envelope_write_key(struct encoder *enc, const struct mcdc_event *ev,
                        const struct topic_entry *te, struct mcdc_error *err)
{
    struct ejson_buf *out = &enc->out;
    bson_iter_t id;
    if (!ev->has_document_key || !bson_iter_init_find(&id, &ev->document_key, "_id"))
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "event on %s.%s has no document _id",
                              ev->db ? ev->db : "", ev->coll ? ev->coll : "");
    ejson_buf_reset(out);
    if (enc->cfg->key_schemas_enable) {
        json_append_lit(out, "{\"schema\":");
        schema_write_data_key(enc, out, te->topic);
        json_append_lit(out, ",\"payload\":");
    }
    /* Only _id, RELAXED compact, also on sharded collections (DBZ-7157);
     * event.key.mode document_key: the whole documentKey document in the
     * same JSON ({"region": "EU","_id": 1}), for _id unique only per shard. */
    json_append_lit(out, "{\"id\":");
    ejson_buf_reset(&enc->json);
    if (enc->cfg->key_mode == MCDC_KEY_DOCUMENT_KEY) {
        ejson_write_document(&enc->json, &ev->document_key, EJSON_RELAXED, EJSON_SEP_COMPACT);
    } else {
        ejson_write_value(&enc->json, &id, EJSON_RELAXED, EJSON_SEP_COMPACT);
    }
    json_append_string(out, enc->json.data, enc->json.len);
    ejson_buf_append(out, "}", 1);
    if (enc->cfg->key_schemas_enable)
        ejson_buf_append(out, "}", 1);
    return true;
}
