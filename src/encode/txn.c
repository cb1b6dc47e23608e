/*
 * txn: transaction metadata (debezium-format.md §3.4; Debezium's
 * TransactionMonitor and MongoDbEventMetadataProvider).
 *
 * State machine, driven only by emitted data events:
 *   closed --event with id X--> BEGIN X, open(X)
 *   open(X) --event with id X--> (counts)
 *   open(X) --event with id Y != X--> END X, BEGIN Y, open(Y)
 *   open(X) --event without id--> END X, closed
 * The id is lsid (STRICT compact JSON) ":" txnNumber (one part alone when
 * only one exists); in oplog mode the oplog's stxnid. Because change streams
 * carry no commit marker, END waits for the next emitted data event, as in
 * Debezium. With transaction.eager.end (a mongocdc option, off by default)
 * encoder_transaction_passed() also closes the transaction as soon as the
 * stream reports a position past the transaction's clusterTime (a skipped or
 * filtered event, a post-batch resume token): every event of one MongoDB
 * transaction carries the commit's clusterTime, so a later position means
 * the transaction is complete.
 *
 * Oplog mode (1.9, §3.5): the capture marks the last operation of an applyOps
 * (oplog_txn_last) and its END follows that operation's record, as Debezium
 * 1.9 emits it; if that operation is not emitted (filtered), the lazy or eager
 * rule above closes the transaction instead. Unlike Debezium 1.9, events
 * outside transactions are not given the oplog `h` or a retryable write's
 * stxnid as a transaction id of their own (a quirk that wraps such events in
 * BEGIN/END of their own).
 */
#include "encode/encode_internal.h"

#include <string.h>

#include "common/xalloc.h"

void txn_free(struct txn_state *t)
{
    for (size_t i = 0; i < t->ncolls; i++)
        free(t->colls[i].name);
    free(t->colls);
    ejson_buf_free(&t->id);
    ejson_buf_free(&t->next);
    memset(t, 0, sizeof *t);
}

/* The event's transaction id into t->next; false if it has none. */
static bool event_txn_id(struct encoder *enc, const struct mcdc_event *ev)
{
    struct ejson_buf *b = &enc->txn.next;
    ejson_buf_reset(b);
    if (ev->has_lsid || ev->has_txn_number) {
        if (ev->has_lsid)
            ejson_write_document(b, &ev->lsid, EJSON_STRICT, EJSON_SEP_COMPACT);
        if (ev->has_lsid && ev->has_txn_number)
            ejson_buf_append(b, ":", 1);
        if (ev->has_txn_number)
            json_append_int(b, ev->txn_number);
        return true;
    }
    if (ev->oplog_stxnid && ev->oplog_tord > 0) {
        /* Only an applyOps operation (tord > 0) is in a transaction; a
         * retryable write's stxnid is not a transaction id here. */
        ejson_buf_append(b, ev->oplog_stxnid, strlen(ev->oplog_stxnid));
        return true;
    }
    return false;
}

/* Java's String.hashCode over UTF-16 units, then HashMap.hash()'s spread. */
static uint32_t java_hash(const char *s, size_t n)
{
    uint32_t h = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (i + len > n)
            len = n - i;
        cp = len == 1 ? c : (uint32_t)(c & (0xFF >> (len + 1)));
        for (size_t k = 1; k < len; k++)
            cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3F);
        if (cp > 0xFFFF) {
            cp -= 0x10000;
            h = 31 * h + (0xD800 + (cp >> 10));
            h = 31 * h + (0xDC00 + (cp & 0x3FF));
        } else {
            h = 31 * h + cp;
        }
        i += len;
    }
    return h ^ (h >> 16);
}

/* data_collections in the iteration order of the Java HashMap Debezium keeps
 * them in: by bucket of the final table (16 doubling while size > 0.75 cap),
 * insertion order within a bucket (resizes keep it). Buckets that would be
 * treeified (8+ names in one bucket of a 64+ table) are not modelled. */
static void write_data_collections(struct encoder *enc, struct ejson_buf *out)
{
    struct txn_state *t = &enc->txn;
    size_t cap = 16;
    while (t->ncolls > cap * 3 / 4)
        cap *= 2;
    json_append_lit(out, "[");
    size_t written = 0;
    for (size_t b = 0; b < cap && written < t->ncolls; b++) {
        for (size_t i = 0; i < t->ncolls; i++) {
            if ((java_hash(t->colls[i].name, t->colls[i].len) & (cap - 1)) != b)
                continue;
            if (written++)
                json_append_lit(out, ",");
            json_append_lit(out, "{\"data_collection\":");
            json_append_string(out, t->colls[i].name, t->colls[i].len);
            json_append_lit(out, ",\"event_count\":");
            json_append_int(out, t->colls[i].count);
            json_append_lit(out, "}");
        }
    }
    json_append_lit(out, "]");
}

/* Appends a BEGIN (end=false) or END record for the open transaction. */
static void push_marker(struct encoder *enc, bool end, int64_t ts_ms, struct mcdc_records *recs)
{
    struct txn_state *t = &enc->txn;
    struct ejson_buf *out = &enc->out;
    const struct mcdc_config *cfg = enc->cfg;

    ejson_buf_reset(out);
    if (cfg->key_schemas_enable) {
        json_append_lit(out, "{\"schema\":");
        schema_write_txn_key(enc, out);
        json_append_lit(out, ",\"payload\":");
    }
    json_append_lit(out, "{\"id\":");
    json_append_string(out, t->id.data, t->id.len);
    json_append_lit(out, cfg->key_schemas_enable ? "}}" : "}");
    size_t key_len;
    char *key = encoder_take_out(enc, &key_len);

    ejson_buf_reset(out);
    if (cfg->value_schemas_enable) {
        json_append_lit(out, "{\"schema\":");
        schema_write_txn_value(enc, out);
        json_append_lit(out, ",\"payload\":");
    }
    json_append_lit(out, end ? "{\"status\":\"END\",\"id\":" : "{\"status\":\"BEGIN\",\"id\":");
    json_append_string(out, t->id.data, t->id.len);
    if (end) {
        json_append_lit(out, ",\"event_count\":");
        json_append_int(out, t->total);
        json_append_lit(out, ",\"data_collections\":");
        write_data_collections(enc, out);
    } else {
        json_append_lit(out, ",\"event_count\":null,\"data_collections\":null");
    }
    if (enc->d->txn_value_ts_ms) {
        json_append_lit(out, ",\"ts_ms\":");
        json_append_int(out, ts_ms);
    }
    json_append_lit(out, cfg->value_schemas_enable ? "}}" : "}");
    records_push(recs, enc->txn_topic, key, key_len, out->data, out->len);
    free(key);
}

void txn_close(struct encoder *enc, int64_t ts_ms, struct mcdc_records *out)
{
    struct txn_state *t = &enc->txn;
    if (!t->open)
        return;
    push_marker(enc, true, ts_ms, out);
    t->open = false;
    for (size_t i = 0; i < t->ncolls; i++)
        free(t->colls[i].name);
    t->ncolls = 0;
}

/* The per-collection counter of ev's collection, created at 0. */
static struct txn_coll *coll_counter(struct encoder *enc, const struct mcdc_event *ev)
{
    struct txn_state *t = &enc->txn;
    struct ejson_buf *nb = &enc->name;
    ejson_buf_reset(nb);
    if (enc->d->txn_collection_with_rs && ev->rs) {
        /* 1.x CollectionId.identifier(): rs.db.coll */
        ejson_buf_append(nb, ev->rs, strlen(ev->rs));
        ejson_buf_append(nb, ".", 1);
    }
    ejson_buf_append(nb, ev->db, ev->db_len);
    ejson_buf_append(nb, ".", 1);
    ejson_buf_append(nb, ev->coll, ev->coll_len);
    for (size_t i = 0; i < t->ncolls; i++)
        if (t->colls[i].len == nb->len && memcmp(t->colls[i].name, nb->data, nb->len) == 0)
            return &t->colls[i];
    if (t->ncolls == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 8;
        t->colls = xrealloc(t->colls, t->cap * sizeof *t->colls);
    }
    struct txn_coll *c = &t->colls[t->ncolls++];
    /* Copied whole: a name with an embedded NUL (the parser takes any BSON)
     * would be cut short by strndup and over-read by the memcmp above. */
    c->name = xmalloc(nb->len + 1);
    memcpy(c->name, nb->data, nb->len);
    c->name[nb->len] = '\0';
    c->len = nb->len;
    c->count = 0;
    return c;
}

bool txn_on_event(struct encoder *enc, const struct mcdc_event *ev, int64_t source_ts_ms,
                  struct mcdc_records *out, struct txn_block *blk, struct mcdc_error *err)
{
    struct txn_state *t = &enc->txn;
    (void)err;
    memset(blk, 0, sizeof *blk);
    bool has_id = event_txn_id(enc, ev);
    bool same = has_id && t->open && t->id.len == t->next.len &&
                memcmp(t->id.data, t->next.data, t->id.len) == 0;
    if (t->open && !same)
        txn_close(enc, source_ts_ms, out);
    if (!has_id)
        return true;
    if (!t->open) {
        ejson_buf_reset(&t->id);
        ejson_buf_append(&t->id, t->next.data, t->next.len);
        t->total = 0;
        t->open = true;
        push_marker(enc, false, source_ts_ms, out);
    }
    t->ts_sec = ev->ts_sec;
    t->ts_inc = ev->ts_inc;
    struct txn_coll *c = coll_counter(enc, ev);
    t->total++;
    c->count++;
    blk->present = true;
    blk->id = t->id.data;
    blk->id_len = t->id.len;
    blk->total_order = t->total;
    blk->data_collection_order = c->count;
    return true;
}
