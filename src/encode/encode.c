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
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "encode/digits_internal.h"

void json_append_lit(struct ejson_buf *out, const char *s)
{
    ejson_buf_append(out, s, strlen(s));
}

void json_append_int(struct ejson_buf *out, int64_t v)
{
    /* Every record has two or three of these (ts_ms, source times): the
     * digit writer, not snprintf (~800 instructions a call). */
    char tmp[32];
    size_t n = 0;
    uint64_t u = (uint64_t)v;
    if (v < 0) {
        tmp[n++] = '-';
        u = 0 - u; /* INT64_MIN too, in unsigned arithmetic */
    }
    n += digits_u64(u, tmp + n);
    ejson_buf_append(out, tmp, n);
}

/* Non-zero if any byte of w is '"', '\\' or below 0x20 (the "has zero byte"
 * and "has byte less than" bit tricks; exact for the any-byte question). */
static inline uint64_t word_needs_escape(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t q = w ^ (ones * '"');
    uint64_t b = w ^ (ones * '\\');
    return (((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w)) & highs;
}

/* Jackson's escape for each byte: 0 = written raw, 'u' = \u00XX, else the
 * letter after the backslash. */
static const char jackson_escape[256] = {
    ['\0'] = 'u', [1] = 'u',    [2] = 'u',    [3] = 'u',     [4] = 'u',    [5] = 'u',
    [6] = 'u',    [7] = 'u',    ['\b'] = 'b', ['\t'] = 't',  ['\n'] = 'n', [11] = 'u',
    ['\f'] = 'f', ['\r'] = 'r', [14] = 'u',   [15] = 'u',    [16] = 'u',   [17] = 'u',
    [18] = 'u',   [19] = 'u',   [20] = 'u',   [21] = 'u',    [22] = 'u',   [23] = 'u',
    [24] = 'u',   [25] = 'u',   [26] = 'u',   [27] = 'u',    [28] = 'u',   [29] = 'u',
    [30] = 'u',   [31] = 'u',   ['"'] = '"',  ['\\'] = '\\',
};

/* Number of leading bytes (in memory order) of a word that need no escape,
 * from word_needs_escape's mask: its lowest set bit is always exact. */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline size_t clean_prefix(uint64_t mask)
{
    return mask ? (size_t)__builtin_ctzll(mask) / 8 : 8;
}
#else
static inline size_t clean_prefix(uint64_t mask)
{
    return mask ? 0 : 8; /* portable fallback: byte by byte */
}
#endif

void json_append_string(struct ejson_buf *out, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    /* One reservation for the common worst case (every byte doubled); the
     * rare control character, six bytes, re-reserves. The text is mostly
     * extended JSON whose quotes all need escaping, so this loop is hot:
     * clean 8-byte words are copied whole, the others byte by byte. */
    size_t need = 2 * n + 2;
    if (out->cap - out->len <= need)
        ejson_buf_grow(out, need);
    char *d = out->data + out->len;
    *d++ = '"';
    size_t i = 0;
    while (i < n) {
        size_t stop = n;
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            uint64_t m = word_needs_escape(w);
            /* copy the clean prefix (all 8 bytes when clean), then escape one byte */
            size_t k = clean_prefix(m);
            memcpy(d, s + i, 8);
            d += k;
            i += k;
            if (k == 8)
                continue;
            stop = i + 1;
        }
        for (; i < stop; i++) {
            unsigned char c = (unsigned char)s[i];
            char e = jackson_escape[c];
            if (e == 0) {
                *d++ = (char)c;
            } else if (e != 'u') {
                *d++ = '\\';
                *d++ = e;
            } else {
                out->len = (size_t)(d - out->data);
                need = 6 + 2 * (n - i);
                if (out->cap - out->len <= need)
                    ejson_buf_grow(out, need);
                d = out->data + out->len;
                memcpy(d, "\\u00", 4);
                d[4] = hex[c >> 4];
                d[5] = hex[c & 15];
                d += 6;
            }
        }
    }
    *d++ = '"';
    out->len = (size_t)(d - out->data);
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
    r->headers = NULL;
    r->header_count = 0;
    r->ns = r->id = NULL;
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

/* A version-7 UUID (RFC 9562 §5.7: 48-bit Unix time in ms, then random bits),
 * the kind Debezium 3.x draws for its runId, in canonical text into out[37+].
 * getrandom() failing (very old kernel) falls back to the clock and pid: the
 * runId only has to differ between task starts. */
static void random_uuid(char *out)
{
    uint8_t b[16];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        uint64_t y = (uint64_t)(uintptr_t)out ^ (uint64_t)ts.tv_sec;
        memcpy(b, &x, 8);
        memcpy(b + 8, &y, 8);
    }
    for (int i = 0; i < 6; i++)
        b[i] = (uint8_t)(ms >> (40 - 8 * i));
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x70); /* version 7 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* variant 10 */
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

struct encoder *encoder_new(const struct mcdc_config *cfg, struct mcdc_error *err)
{
    BSON_ASSERT(cfg->topic_prefix != NULL); /* required by config validation */
    /* aligned: bson_t members */
    struct encoder *enc = xzalloc_aligned(_Alignof(struct encoder), sizeof *enc);
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
    random_uuid(enc->run_id);
    if (cfg->extended_headers_enabled) {
        /* Order and values of DebeziumHeaderProducer (debezium-format.md §1.7). */
        enc->headers[0] = (struct mcdc_header){"__debezium.context.connectorLogicalName",
                                               cfg->topic_prefix};
        enc->headers[1] = (struct mcdc_header){"__debezium.context.taskId", "0"};
        enc->headers[2] = (struct mcdc_header){"__debezium.context.connectorName", "mongodb"};
        enc->headers[3] = (struct mcdc_header){"__debezium.context.runId", enc->run_id};
        enc->header_count = 4;
    }
    return enc;
}

void encoder_set_run_id(struct encoder *enc, const char *run_id)
{
    snprintf(enc->run_id, sizeof enc->run_id, "%s", run_id);
}

const char *encoder_run_id(const struct encoder *enc)
{
    return enc->run_id;
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
    if (doc == NULL || enc->sel->count == 0)
        return true;
    *res = dotted ? fields_apply_updated(enc->sel, doc, pair, &clash)
                  : fields_apply_document(enc->sel, doc, pair, &clash);
    return *res ? true : rename_clash(enc, ev, clash, err);
}

/* Oplog-mode patch (1.9, §1.4): a modifier update ({$set: {...}, $unset:
 * {...}}, and $push for decoded $v: 2 truncations) has dotted paths like
 * updatedFields, so these operators get the dotted-path rules; a replacement
 * document gets the document rules. */
static bool select_patch(struct encoder *enc, const struct mcdc_event *ev, const bson_t *patch,
                         const bson_t **res, struct mcdc_error *err)
{
    bson_iter_t it;
    bool modifier = false;
    *res = patch;
    if (patch == NULL || enc->sel->count == 0 || !bson_iter_init(&it, patch))
        return true;
    while (bson_iter_next(&it))
        modifier |= bson_iter_key(&it)[0] == '$';
    if (!modifier)
        return select_doc(enc, ev, patch, &enc->scratch[6], false, res, err);

    bson_t *outdoc = &enc->scratch[8];
    bson_reinit(outdoc);
    bson_iter_init(&it, patch);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        uint32_t len = 0;
        const uint8_t *data = NULL;
        bson_t view;
        const bson_t *sel = NULL;
        if ((strcmp(k, "$set") != 0 && strcmp(k, "$unset") != 0 && strcmp(k, "$push") != 0) ||
            !BSON_ITER_HOLDS_DOCUMENT(&it)) {
            bson_append_iter(outdoc, NULL, 0, &it);
            continue;
        }
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&view, data, len) ||
            !select_doc(enc, ev, &view, &enc->scratch[6], true, &sel, err))
            return false;
        bson_append_document(outdoc, k, -1, sel);
    }
    *res = outdoc;
    return true;
}

/* Moves the encoder's out buffer into a new record's key (value NULL). */
static struct mcdc_record *push_key(struct encoder *enc, struct mcdc_records *out,
                                    const char *topic)
{
    BSON_ASSERT(out->count < MCDC_RECORDS_MAX);
    struct mcdc_record *r = &out->items[out->count++];
    r->topic = topic;
    r->key = encoder_take_out(enc, &r->key_len);
    r->value = NULL;
    r->value_len = 0;
    r->headers = NULL;
    r->header_count = 0;
    r->ns = r->id = NULL;
    return r;
}

bool encoder_encode(struct encoder *enc, const struct mcdc_event *ev, int64_t ts_us_now,
                    struct mcdc_records *out, struct mcdc_error *err)
{
    int64_t ts_ms_now = ts_us_now >= 0 ? ts_us_now / 1000 : -((999 - ts_us_now) / 1000);
    const struct mcdc_config *cfg = enc->cfg;
    struct envelope_parts p = {0};
    struct txn_block blk = {0};

    bson_iter_t id;
    out->count = 0;
    if (ev->db == NULL || ev->coll == NULL)
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "event without namespace");
    /* Checked before any state changes (transaction counters). */
    if (!ev->has_document_key || !bson_iter_init_find(&id, &ev->document_key, "_id"))
        return mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "event on %.*s.%.*s has no document _id",
                              (int)ev->db_len, ev->db, (int)ev->coll_len, ev->coll);
    if (enc->skip_op[ev->op])
        return true;
    struct topic_entry *te = topics_lookup(enc, ev->db, ev->db_len, ev->coll, ev->coll_len);
    if (!te->captured)
        return true;
    enc->sel = &te->sel;

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
        !select_doc(enc, ev, updated, &enc->scratch[4], true, &p.updated, err) ||
        !select_patch(enc, ev, ev->has_oplog_patch ? &ev->oplog_patch : NULL, &p.patch, err))
        return false;

    p.source_ts_ms = envelope_source_ts_ms(enc, ev, ts_ms_now);
    p.ts_ms_now = ts_ms_now;
    p.ts_us_now = ts_us_now;
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
    struct mcdc_record *r = push_key(enc, out, te->topic);
    envelope_write_value(enc, ev, te, &p);
    r->value = encoder_take_out(enc, &r->value_len);
    r->headers = enc->header_count ? enc->headers : NULL;
    r->header_count = enc->header_count;
    /* Tombstone: same key, null value, same headers, after each streamed
     * delete (§1.6). */
    if (ev->op == MCDC_OP_DELETE && cfg->tombstones_on_delete) {
        records_push(out, te->topic, r->key, r->key_len, NULL, 0);
        out->items[out->count - 1].headers = r->headers;
        out->items[out->count - 1].header_count = enc->header_count;
    }
    /* Oplog mode: the applyOps is complete after its last operation (§3.5). */
    if (cfg->provide_transaction_metadata && ev->oplog_txn_last)
        txn_close(enc, p.source_ts_ms, out);
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
