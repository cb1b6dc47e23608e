/*
 * encode: the encoder's lifecycle and its one entry point per event.
 *
 *   event --filters (namespace, skipped.operations)--> dropped, or
 *         --fields (exclude/rename on after, before, updateDescription)-->
 *         --txn (END/BEGIN records, transaction block)-->
 *         --envelope (key, value)--> data record [, tombstone]
 *
 * The encoder keeps its buffers (extended JSON, output, field-selection
 * scratch documents) across events, so a steady stream allocates only the
 * records' own key and value copies. Thread: one encoder per capture thread;
 * not shared.
 */
#include "encode/encode_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"

void json_append_lit(struct ejson_buf *out, const char *s)
{
    ejson_buf_append(out, s, strlen(s));
}

void json_append_int(struct ejson_buf *out, int64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof tmp, "%" PRId64, v);
    ejson_buf_append(out, tmp, (size_t)n);
}

void json_append_string(struct ejson_buf *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t run = 0;
    ejson_buf_append(out, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[6];
        size_t elen = 2;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        ejson_buf_append(out, s + run, i - run);
        run = i + 1;
        esc[0] = '\\';
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        }
        ejson_buf_append(out, esc, elen);
    }
    ejson_buf_append(out, s + run, n - run);
    ejson_buf_append(out, "\"", 1);
}

char *encoder_take_out(struct encoder *enc, size_t *len)
{
    char *s = xmalloc(enc->out.len + 1);
    if (enc->out.len)
        memcpy(s, enc->out.data, enc->out.len);
    s[enc->out.len] = '\0';
    *len = enc->out.len;
    return s;
}

void records_push(struct mcdc_records *recs, const char *topic, const char *key, size_t key_len,
                  const char *value, size_t value_len)
{
    BSON_ASSERT(recs->count < MCDC_RECORDS_MAX);
    struct mcdc_record *r = &recs->items[recs->count++];
    r->topic = topic;
    r->key = xmalloc(key_len + 1);
    memcpy(r->key, key, key_len);
    r->key[key_len] = '\0';
    r->key_len = key_len;
    if (value) {
        r->value = xmalloc(value_len + 1);
        memcpy(r->value, value, value_len);
        r->value[value_len] = '\0';
        r->value_len = value_len;
    } else {
        r->value = NULL;
        r->value_len = 0;
    }
}

void records_release(struct mcdc_records *out)
{
    for (size_t i = 0; i < out->count; i++) {
        free(out->items[i].key);
        free(out->items[i].value);
        memset(&out->items[i], 0, sizeof out->items[i]);
    }
    out->count = 0;
}

/* Joins a and b with the topic delimiter and sanitises the result. */
static char *other_topic(const struct mcdc_config *cfg, const char *a, const char *b)
{
    const char *delim = cfg->topic_delimiter ? cfg->topic_delimiter : ".";
    char *joined = xasprintf("%s%s%s", a, delim, b);
    struct ejson_buf clean = {0};
    topics_sanitize(&clean, joined, strlen(joined));
    char *s = xstrndup(clean.data ? clean.data : "", clean.len);
    ejson_buf_free(&clean);
    free(joined);
    return s;
}

static bool parse_skipped(struct encoder *enc, const struct mcdc_strlist *sl,
                          struct mcdc_error *err)
{
    for (size_t i = 0; i < sl->count; i++) {
        const char *s = sl->items[i];
        if (strcmp(s, "c") == 0) {
            enc->skip_op[MCDC_OP_INSERT] = true;
        } else if (strcmp(s, "u") == 0) {
            /* u removes both update and replace (§7.1) */
            enc->skip_op[MCDC_OP_UPDATE] = enc->skip_op[MCDC_OP_REPLACE] = true;
        } else if (strcmp(s, "d") == 0) {
            enc->skip_op[MCDC_OP_DELETE] = true;
        } else if (strcmp(s, "t") != 0 && strcmp(s, "none") != 0) {
            /* t: MongoDB has no truncate events; none: the explicit empty list */
            return mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                                  "skipped.operations: unknown operation \"%s\" (expected c, u, "
                                  "d, t or none)",
                                  s);
        }
    }
    return true;
}

struct encoder *encoder_new(const struct mcdc_config *cfg, struct mcdc_error *err)
{
    struct encoder *enc = xcalloc(1, sizeof *enc);
    enc->cfg = cfg;
    enc->d = dialect_get(cfg->dialect);
    enc->version = cfg->debezium_version ? cfg->debezium_version : enc->d->default_version;
    for (size_t i = 0; i < sizeof enc->scratch / sizeof enc->scratch[0]; i++)
        bson_init(&enc->scratch[i]);
    if (!filters_init(&enc->filters, cfg, err) || !fields_init(&enc->fields, cfg, err) ||
        !parse_skipped(enc, &cfg->skipped_operations, err)) {
        encoder_destroy(enc);
        return NULL;
    }
    enc->txn_topic = other_topic(cfg, cfg->topic_prefix,
                                 cfg->topic_transaction ? cfg->topic_transaction : "transaction");
    enc->heartbeat_topic = other_topic(
        cfg, cfg->topic_heartbeat_prefix ? cfg->topic_heartbeat_prefix : "__debezium-heartbeat",
        cfg->topic_prefix);
    static const char source_name[] = "io.debezium.connector.mongo.Source";
    struct ejson_buf b = {0};
    topics_adjust_schema_name(&b, cfg->schema_name_adjust, source_name, strlen(source_name));
    enc->source_schema_name = xstrndup(b.data, b.len);
    ejson_buf_free(&b);
    return enc;
}

void encoder_destroy(struct encoder *enc)
{
    if (enc == NULL)
        return;
    filters_free(&enc->filters);
    fields_free(&enc->fields);
    topics_cache_free(&enc->topics);
    txn_free(&enc->txn);
    ejson_buf_free(&enc->out);
    ejson_buf_free(&enc->json);
    ejson_buf_free(&enc->name);
    for (size_t i = 0; i < sizeof enc->scratch / sizeof enc->scratch[0]; i++)
        bson_destroy(&enc->scratch[i]);
    free(enc->txn_topic);
    free(enc->heartbeat_topic);
    free(enc->source_schema_name);
    free(enc);
}

/* The ENCODE error for a rename onto an existing field (Debezium:
 * IllegalArgumentException "Document already contains field : x"). */
static bool rename_clash(struct encoder *enc, const struct mcdc_event *ev, const char *field,
                         struct mcdc_error *err)
{
    bson_iter_t id;
    ejson_buf_reset(&enc->json);
    if (ev->has_document_key && bson_iter_init_find(&id, &ev->document_key, "_id"))
        ejson_write_value(&enc->json, &id, EJSON_RELAXED, EJSON_SEP_COMPACT);
    ejson_buf_append(&enc->json, "", 1);
    return mcdc_error_set(err, MCDC_ERR_ENCODE, 0,
                          "field.renames on %.*s.%.*s, document _id %s: document already "
                          "contains field \"%s\"",
                          (int)ev->db_len, ev->db, (int)ev->coll_len, ev->coll, enc->json.data,
                          field);
}

/* Applies the field selection to one document; NULL stays NULL. */
static bool select_doc(struct encoder *enc, const struct mcdc_event *ev, const bson_t *doc,
                       bson_t *pair, bool dotted, const bson_t **res, struct mcdc_error *err)
{
    const char *clash = NULL;
    *res = doc;
    if (doc == NULL || enc->sel.count == 0)
        return true;
    *res = dotted ? fields_apply_updated(&enc->sel, doc, pair, &clash)
                  : fields_apply_document(&enc->sel, doc, pair, &clash);
    return *res ? true : rename_clash(enc, ev, clash, err);
}

bool encoder_encode(struct encoder *enc, const struct mcdc_event *ev, int64_t ts_ms_now,
                    struct mcdc_records *out, struct mcdc_error *err)
{
    const struct mcdc_config *cfg = enc->cfg;
    struct envelope_parts p = {0};
    struct txn_block blk = {0};

    out->count = 0;
    if (ev->db == NULL || ev->coll == NULL)
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "event without namespace");
    if (!filters_captures(&enc->filters, ev->db, ev->db_len, ev->coll, ev->coll_len))
        return true;
    if (enc->skip_op[ev->op])
        return true;

    struct topic_entry *te = topics_lookup(enc, ev->db, ev->db_len, ev->coll, ev->coll_len);
    fields_select(&enc->fields, ev->db, ev->db_len, ev->coll, ev->coll_len, &enc->sel);

    /* Which documents the envelope carries (§1.3, §1.4). */
    const bson_t *after = NULL, *before = NULL, *updated = NULL;
    if (ev->has_full_document && ev->op != MCDC_OP_DELETE)
        after = &ev->full_document;
    if (ev->has_before && ev->op != MCDC_OP_INSERT && ev->op != MCDC_OP_READ)
        before = &ev->before;
    if (ev->op == MCDC_OP_UPDATE && ev->has_updated_fields)
        updated = &ev->updated_fields;
    if (!select_doc(enc, ev, after, &enc->scratch[0], false, &p.after, err) ||
        !select_doc(enc, ev, before, &enc->scratch[2], false, &p.before, err) ||
        !select_doc(enc, ev, updated, &enc->scratch[4], true, &p.updated, err))
        return false;

    p.source_ts_ms = envelope_source_ts_ms(enc, ev, ts_ms_now);
    p.ts_ms_now = ts_ms_now;
    if (cfg->provide_transaction_metadata && ev->op != MCDC_OP_READ &&
        !txn_on_event(enc, ev, p.source_ts_ms, out, &blk, err)) {
        records_release(out);
        return false;
    }
    p.txn = &blk;

    if (!envelope_write_key(enc, ev, te, err)) {
        records_release(out);
        return false;
    }
    size_t key_len;
    char *key = encoder_take_out(enc, &key_len);
    envelope_write_value(enc, ev, te, &p);
    records_push(out, te->topic, key, key_len, enc->out.data, enc->out.len);
    /* Tombstone: same key, null value, after each streamed delete (§1.6). */
    if (ev->op == MCDC_OP_DELETE && cfg->tombstones_on_delete)
        records_push(out, te->topic, key, key_len, NULL, 0);
    free(key);
    return true;
}

bool encoder_heartbeat(struct encoder *enc, int64_t ts_ms, struct mcdc_records *out,
                       struct mcdc_error *err)
{
    const struct mcdc_config *cfg = enc->cfg;
    struct ejson_buf *o = &enc->out;
    (void)err;
    out->count = 0;
    ejson_buf_reset(o);
    if (cfg->key_schemas_enable) {
        json_append_lit(o, "{\"schema\":");
        schema_write_heartbeat_key(enc, o);
        json_append_lit(o, ",\"payload\":");
    }
    json_append_lit(o, "{\"serverName\":");
    json_append_string(o, cfg->topic_prefix, strlen(cfg->topic_prefix));
    json_append_lit(o, cfg->key_schemas_enable ? "}}" : "}");
    size_t key_len;
    char *key = encoder_take_out(enc, &key_len);
    ejson_buf_reset(o);
    if (cfg->value_schemas_enable) {
        json_append_lit(o, "{\"schema\":");
        schema_write_heartbeat_value(enc, o);
        json_append_lit(o, ",\"payload\":");
    }
    json_append_lit(o, "{\"ts_ms\":");
    json_append_int(o, ts_ms);
    json_append_lit(o, cfg->value_schemas_enable ? "}}" : "}");
    records_push(out, enc->heartbeat_topic, key, key_len, o->data, o->len);
    free(key);
    return true;
}

bool encoder_transaction_passed(struct encoder *enc, uint32_t ts_sec, uint32_t ts_inc,
                                int64_t ts_ms, struct mcdc_records *out)
{
    struct txn_state *t = &enc->txn;
    out->count = 0;
    if (!enc->cfg->provide_transaction_metadata || !enc->cfg->transaction_eager_end || !t->open)
        return false;
    if (ts_sec < t->ts_sec || (ts_sec == t->ts_sec && ts_inc <= t->ts_inc))
        return false;
    txn_close(enc, ts_ms, out);
    return true;
}

const char *encoder_topic(struct encoder *enc, const char *db, const char *coll)
{
    return topics_lookup(enc, db, strlen(db), coll, strlen(coll))->topic;
}

const char *encoder_transaction_topic(const struct encoder *enc)
{
    return enc->txn_topic;
}

const char *encoder_heartbeat_topic(const struct encoder *enc)
{
    return enc->heartbeat_topic;
}
