/*
 * schema: the Kafka Connect schemas that JsonConverter prints when
 * key/value.converter.schemas.enable is true (debezium-format.md §1.1, §1.8),
 * driven by the same dialect table as the payloads, so a field can never
 * appear in the payload and not in the schema.
 *
 * JsonConverter.asJsonSchema writes a schema's members in the order type,
 * fields|items, optional, name, version, doc, parameters, default, and a
 * struct member's "field" last; the fragments below follow that order.
 */
#include "encode/encode_internal.h"

#include <string.h>

#define JSON_FIELD(name)                                                                           \
    "{\"type\":\"string\",\"optional\":true,\"name\":\"io.debezium.data.Json\",\"version\":1,"     \
    "\"field\":\"" name "\"}"

static void lit(struct ejson_buf *out, const char *s)
{
    json_append_lit(out, s);
}

/* "name":"<adjusted name>" (preceded by a comma). */
static void adjusted_name(struct encoder *enc, struct ejson_buf *out, const char *a, const char *b)
{
    ejson_buf_reset(&enc->name);
    ejson_buf_append(&enc->name, a, strlen(a));
    ejson_buf_append(&enc->name, b, strlen(b));
    /* enc->json is free while schemas are written (before the payload). */
    ejson_buf_reset(&enc->json);
    topics_adjust_schema_name(&enc->json, enc->cfg->schema_name_adjust, enc->name.data,
                              enc->name.len);
    lit(out, ",\"name\":");
    json_append_string(out, enc->json.data, enc->json.len);
}

static void version1(const struct encoder *enc, struct ejson_buf *out)
{
    if (enc->d->versioned_structs)
        lit(out, ",\"version\":1");
}

static void source_field_schema(struct encoder *enc, struct ejson_buf *out, enum sfield f)
{
    switch (f) {
    case SF_VERSION:
    case SF_CONNECTOR:
    case SF_NAME:
    case SF_DB:
    case SF_RS:
    case SF_COLLECTION:
        lit(out, "{\"type\":\"string\",\"optional\":false");
        break;
    case SF_TS_MS:
        lit(out, "{\"type\":\"int64\",\"optional\":false");
        break;
    case SF_SNAPSHOT:
        lit(out, "{\"type\":\"string\",\"optional\":true,\"name\":\"io.debezium.data.Enum\","
                 "\"version\":1,\"parameters\":{\"allowed\":\"");
        lit(out, enc->d->snapshot_allowed);
        lit(out, "\"},\"default\":\"false\"");
        break;
    case SF_SEQUENCE:
    case SF_STXNID:
    case SF_LSID:
        lit(out, "{\"type\":\"string\",\"optional\":true");
        break;
    case SF_ORD:
        lit(out, "{\"type\":\"int32\",\"optional\":false");
        break;
    case SF_TS_US:
    case SF_TS_NS:
    case SF_H:
    case SF_TORD:
    case SF_TXN_NUMBER:
    case SF_WALL_TIME:
    case SF_COUNT:
        lit(out, "{\"type\":\"int64\",\"optional\":true");
        break;
    }
    lit(out, ",\"field\":\"");
    lit(out, sfield_name(f));
    lit(out, "\"}");
}

static void source_schema(struct encoder *enc, struct ejson_buf *out)
{
    lit(out, "{\"type\":\"struct\",\"fields\":[");
    for (size_t i = 0; i < enc->d->source_count; i++) {
        if (i)
            lit(out, ",");
        source_field_schema(enc, out, enc->d->source_fields[i]);
    }
    lit(out, "],\"optional\":false,\"name\":");
    json_append_string(out, enc->source_schema_name, strlen(enc->source_schema_name));
    if (enc->d->source_versioned)
        lit(out, ",\"version\":1");
    lit(out, ",\"field\":\"source\"}");
}

static void update_description_schema(struct encoder *enc, struct ejson_buf *out)
{
    lit(out, "{\"type\":\"struct\",\"fields\":["
             "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"optional\":false},"
             "\"optional\":true,\"field\":\"removedFields\"}," JSON_FIELD(
                 "updatedFields") ","
                                  "{\"type\":\"array\",\"items\":{\"type\":\"struct\",\"fields\":["
                                  "{\"type\":\"string\",\"optional\":false,\"field\":\"field\"},"
                                  "{\"type\":\"int32\",\"optional\":false,\"field\":\"size\"}],"
                                  "\"optional\":false,"
                                  "\"name\":\"io.debezium.connector.mongodb.changestream."
                                  "truncatedarray\"");
    version1(enc, out);
    lit(out, "},\"optional\":true,\"field\":\"truncatedArrays\"}],\"optional\":true,"
             "\"name\":\"io.debezium.connector.mongodb.changestream.updatedescription\"");
    version1(enc, out);
    lit(out, ",\"field\":\"updateDescription\"}");
}

static void transaction_schema(struct encoder *enc, struct ejson_buf *out)
{
    lit(out, "{\"type\":\"struct\",\"fields\":["
             "{\"type\":\"string\",\"optional\":false,\"field\":\"id\"},"
             "{\"type\":\"int64\",\"optional\":false,\"field\":\"total_order\"},"
             "{\"type\":\"int64\",\"optional\":false,\"field\":\"data_collection_order\"}],"
             "\"optional\":true");
    if (enc->d->transaction_named)
        lit(out, ",\"name\":\"event.block\",\"version\":1");
    lit(out, ",\"field\":\"transaction\"}");
}

void schema_write_data_key(struct encoder *enc, struct ejson_buf *out, const char *topic)
{
    lit(out, "{\"type\":\"struct\",\"fields\":[{\"type\":\"string\",\"optional\":false,"
             "\"field\":\"id\"}],\"optional\":false");
    adjusted_name(enc, out, topic, ".Key");
    lit(out, "}");
}

void schema_write_data_value(struct encoder *enc, struct ejson_buf *out, const char *topic)
{
    lit(out, "{\"type\":\"struct\",\"fields\":[");
    for (size_t i = 0; i < enc->d->value_count; i++) {
        if (i)
            lit(out, ",");
        switch (enc->d->value_fields[i]) {
        case VF_BEFORE:
            lit(out, JSON_FIELD("before"));
            break;
        case VF_AFTER:
            lit(out, JSON_FIELD("after"));
            break;
        case VF_PATCH:
            lit(out, JSON_FIELD("patch"));
            break;
        case VF_FILTER:
            lit(out, JSON_FIELD("filter"));
            break;
        case VF_UPDATE_DESCRIPTION:
            update_description_schema(enc, out);
            break;
        case VF_SOURCE:
            source_schema(enc, out);
            break;
        case VF_OP:
            lit(out, "{\"type\":\"string\",\"optional\":true,\"field\":\"op\"}");
            break;
        case VF_TS_MS:
            lit(out, "{\"type\":\"int64\",\"optional\":true,\"field\":\"ts_ms\"}");
            break;
        case VF_TRANSACTION:
        case VF_COUNT:
            transaction_schema(enc, out);
            break;
        }
    }
    lit(out, "],\"optional\":false");
    adjusted_name(enc, out, topic, ".Envelope");
    lit(out, "}");
}

void schema_write_txn_key(struct encoder *enc, struct ejson_buf *out)
{
    lit(out, "{\"type\":\"struct\",\"fields\":[{\"type\":\"string\",\"optional\":false,"
             "\"field\":\"id\"}],\"optional\":false");
    adjusted_name(enc, out, "io.debezium.connector.common.TransactionMetadataKey", "");
    version1(enc, out);
    lit(out, "}");
}

void schema_write_txn_value(struct encoder *enc, struct ejson_buf *out)
{
    lit(out, "{\"type\":\"struct\",\"fields\":["
             "{\"type\":\"string\",\"optional\":false,\"field\":\"status\"},"
             "{\"type\":\"string\",\"optional\":false,\"field\":\"id\"},"
             "{\"type\":\"int64\",\"optional\":true,\"field\":\"event_count\"},"
             "{\"type\":\"array\",\"items\":{\"type\":\"struct\",\"fields\":["
             "{\"type\":\"string\",\"optional\":false,\"field\":\"data_collection\"},"
             "{\"type\":\"int64\",\"optional\":false,\"field\":\"event_count\"}],"
             "\"optional\":false");
    if (enc->d->versioned_structs)
        lit(out, ",\"name\":\"event.collection\",\"version\":1");
    lit(out, "},\"optional\":true,\"field\":\"data_collections\"}");
    if (enc->d->txn_value_ts_ms)
        lit(out, ",{\"type\":\"int64\",\"optional\":false,\"field\":\"ts_ms\"}");
    lit(out, "],\"optional\":false");
    adjusted_name(enc, out, "io.debezium.connector.common.TransactionMetadataValue", "");
    version1(enc, out);
    lit(out, "}");
}

void schema_write_heartbeat_key(struct encoder *enc, struct ejson_buf *out)
{
    lit(out, "{\"type\":\"struct\",\"fields\":[{\"type\":\"string\",\"optional\":false,"
             "\"field\":\"serverName\"}],\"optional\":false");
    adjusted_name(enc, out, "io.debezium.connector.common.ServerNameKey", "");
    version1(enc, out);
    lit(out, "}");
}

void schema_write_heartbeat_value(struct encoder *enc, struct ejson_buf *out)
{
    lit(out, "{\"type\":\"struct\",\"fields\":[{\"type\":\"int64\",\"optional\":false,"
             "\"field\":\"ts_ms\"}],\"optional\":false");
    adjusted_name(enc, out, "io.debezium.connector.common.Heartbeat", "");
    version1(enc, out);
    lit(out, "}");
}
