/*
 * oplog: tailing local.oplog.rs in Debezium 1.9's oplog mode (see oplog.h;
 * debezium-format.md §1.4, §3.5; mongo-sim-spec.md §5).
 */
#include "capture/oplog.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "capture/oplog_diff.h"
#include "common/xalloc.h"

struct oplog_reader {
    mongoc_client_t *client;
    mongoc_collection_t *coll;
    mongoc_cursor_t *cursor;
    const struct mcdc_config *cfg;
    bson_t query; /* the caller's extra conditions */

    uint32_t sec, ord;     /* ts of the last entry read: where a reopened cursor starts */
    bool started;          /* sec/ord valid */
    int64_t start_tord;    /* stored position inside a transaction */
    uint32_t skip_sec, skip_ord;
    int64_t skip_tord;     /* operations of the txn at skip ts already emitted */

    bson_t entry;      /* the current top-level entry (owned copy) */
    bson_t **chain;    /* partialTxn entries of the current transaction (owned copies) */
    size_t n_chain;
    bson_t **ops;      /* the current transaction's operations (owned copies) */
    size_t n_ops, next_op;
    bool txn_open;
    char stxnid[96];
    bool has_stxnid;
    int64_t h;
    bool has_h; /* the entry has `h` (MongoDB < 4.4) */

    bson_t decoded;
    bool has_decoded;

    bson_error_t error;
    bson_t reply;
    bool has_error;
    struct mcdc_error local; /* errors found here (malformed entries) */
    bool local_error;
};

/* Copied whole into a position's offset field. */
_Static_assert(sizeof((struct oplog_reader *)0)->stxnid ==
                   sizeof((struct mcdc_position *)0)->stxnid,
               "the reader's and the offset's stxnid have one size");

void oplog_item_init(struct oplog_item *item)
{
    event_init(&item->ev);
    item->emit = false;
    position_init(&item->pos);
}

void oplog_item_clear(struct oplog_item *item)
{
    position_clear(&item->pos);
}

static void ts_of(const bson_t *doc, const char *key, uint32_t *sec, uint32_t *ord)
{
    bson_iter_t it;
    *sec = *ord = 0;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_TIMESTAMP(&it))
        bson_iter_timestamp(&it, sec, ord);
}

static bool view(const bson_t *doc, const char *key, bson_t *out);

/* SourceInfo.extractSessionTxnId@v1.9.8: an entry whose `h` is absent or 0
 * (MongoDB 4.2+) and that has txnNumber gets "<lsid uuid>:<txnNumber>"
 * (MongoUtil.getOplogSessionTransactionId); any other entry none. */
static void entry_stxnid(const bson_t *entry, char *buf, size_t n)
{
    bson_iter_t it;
    bson_t lsid;

    buf[0] = '\0';
    if (bson_iter_init_find(&it, entry, "h") && BSON_ITER_HOLDS_NUMBER(&it) &&
        bson_iter_as_int64(&it) != 0)
        return;
    if (view(entry, "lsid", &lsid) && bson_iter_init_find(&it, entry, "txnNumber") &&
        BSON_ITER_HOLDS_NUMBER(&it) && !oplog_stxnid(&lsid, bson_iter_as_int64(&it), buf, n))
        buf[0] = '\0';
}

/* The oldest or newest entry's ts and, with stxnid set, its session id. */
static bool edge_entry(mongoc_client_t *client, bool newest, uint32_t *sec, uint32_t *ord,
                       char *stxnid, size_t stxnid_size, struct resume_failure *fail,
                       struct mcdc_error *err)
{
    mongoc_collection_t *oplog = mongoc_client_get_collection(client, "local", "oplog.rs");
    bson_t filter = BSON_INITIALIZER;
    bson_t *opts = BCON_NEW("sort", "{", "$natural", BCON_INT32(newest ? -1 : 1), "}", "limit",
                            BCON_INT64(1), "projection", "{", "ts", BCON_INT32(1), "}");
    mongoc_cursor_t *cur;
    const bson_t *doc = NULL, *reply = NULL;
    bson_error_t error;
    bool ok;

    if (stxnid != NULL) {
        bson_destroy(opts);
        opts = BCON_NEW("sort", "{", "$natural", BCON_INT32(newest ? -1 : 1), "}", "limit",
                        BCON_INT64(1), "projection", "{", "ts", BCON_INT32(1), "h", BCON_INT32(1),
                        "lsid", BCON_INT32(1), "txnNumber", BCON_INT32(1), "}");
        stxnid[0] = '\0';
    }
    cur = mongoc_collection_find_with_opts(oplog, &filter, opts, NULL);
    ok = mongoc_cursor_next(cur, &doc);
    if (ok) {
        ts_of(doc, "ts", sec, ord);
        if (stxnid != NULL)
            entry_stxnid(doc, stxnid, stxnid_size);
    } else if (mongoc_cursor_error_document(cur, &error, &reply)) {
        capture_failure_from(&error, reply, fail, err);
    } else {
        /* An initiated replica set always has entries (mongo-sim-spec.md §5.6). */
        mcdc_error_set_retriable(err, MCDC_ERR_MONGO, 0, "local.oplog.rs is empty");
        if (fail != NULL) {
            memset(fail, 0, sizeof *fail);
            fail->domain = MONGOC_ERROR_SERVER;
            fail->message = err->msg;
        }
    }
    mongoc_cursor_destroy(cur);
    bson_destroy(opts);
    bson_destroy(&filter);
    mongoc_collection_destroy(oplog);
    return ok;
}

bool oplog_edge(mongoc_client_t *client, bool newest, uint32_t *sec, uint32_t *ord,
                struct resume_failure *fail, struct mcdc_error *err)
{
    return edge_entry(client, newest, sec, ord, NULL, 0, fail, err);
}

bool oplog_newest(mongoc_client_t *client, uint32_t *sec, uint32_t *ord, char *stxnid,
                  size_t stxnid_size, struct resume_failure *fail, struct mcdc_error *err)
{
    return edge_entry(client, true, sec, ord, stxnid, stxnid_size, fail, err);
}

/* {ts: {$gt|$gte: T}, fromMigrate: {$exists: false},
 *  $or: [<query>, {op: "n"}, {op: "c", "o.applyOps": {$exists: true}},
 *        {op: "c", "o.commitTransaction": {$exists: true}}]} */
static void build_filter(const struct oplog_reader *r, bool inclusive, bson_t *f)
{
    bson_t ts, fm, or_arr, d;
    bson_init(f);
    bson_append_document_begin(f, "ts", -1, &ts);
    bson_append_timestamp(&ts, inclusive ? "$gte" : "$gt", -1, r->sec, r->ord);
    bson_append_document_end(f, &ts);
    bson_append_document_begin(f, "fromMigrate", -1, &fm);
    bson_append_bool(&fm, "$exists", -1, false);
    bson_append_document_end(f, &fm);
    bson_append_array_begin(f, "$or", -1, &or_arr);
    bson_append_document(&or_arr, "0", -1, &r->query);
    bson_append_document_begin(&or_arr, "1", -1, &d);
    bson_append_utf8(&d, "op", -1, "n", 1);
    bson_append_document_end(&or_arr, &d);
    bson_append_document_begin(&or_arr, "2", -1, &d);
    bson_append_utf8(&d, "op", -1, "c", 1);
    {
        bson_t ex;
        bson_append_document_begin(&d, "o.applyOps", -1, &ex);
        bson_append_bool(&ex, "$exists", -1, true);
        bson_append_document_end(&d, &ex);
    }
    bson_append_document_end(&or_arr, &d);
    /* A prepared transaction (a cross-shard one, committed by two-phase
     * commit) is applied by a later commitTransaction entry whose prevOpTime
     * names the prepare entry (MongoDB's oplog, "Prepared transactions"). */
    bson_append_document_begin(&or_arr, "3", -1, &d);
    bson_append_utf8(&d, "op", -1, "c", 1);
    {
        bson_t ex;
        bson_append_document_begin(&d, "o.commitTransaction", -1, &ex);
        bson_append_bool(&ex, "$exists", -1, true);
        bson_append_document_end(&d, &ex);
    }
    bson_append_document_end(&or_arr, &d);
    bson_append_array_end(f, &or_arr);
}

static void open_cursor(struct oplog_reader *r, bool inclusive)
{
    bson_t filter, opts = BSON_INITIALIZER, sort;
    build_filter(r, inclusive, &filter);
    bson_append_document_begin(&opts, "sort", -1, &sort);
    bson_append_int32(&sort, "$natural", -1, 1);
    bson_append_document_end(&opts, &sort);
    BSON_APPEND_BOOL(&opts, "tailable", true);
    BSON_APPEND_BOOL(&opts, "awaitData", true);
    if (r->cfg->cursor_max_await_time_ms > 0)
        BSON_APPEND_INT64(&opts, "maxAwaitTimeMS", r->cfg->cursor_max_await_time_ms);
    if (r->cfg->cursor_batch_size > 0)
        BSON_APPEND_INT32(&opts, "batchSize", (int32_t)r->cfg->cursor_batch_size);
    r->cursor = mongoc_collection_find_with_opts(r->coll, &filter, &opts, NULL);
    bson_destroy(&filter);
    bson_destroy(&opts);
}

struct oplog_reader *oplog_open(mongoc_client_t *client, const struct mcdc_config *cfg,
                                const bson_t *query, const struct mcdc_position *from,
                                struct resume_failure *fail, struct mcdc_error *err)
{
    struct oplog_reader *r = xcalloc(1, sizeof *r);
    uint32_t osec = 0, oord = 0;

    r->client = client;
    r->cfg = cfg;
    if (query != NULL)
        bson_copy_to(query, &r->query);
    else
        bson_init(&r->query);
    bson_init(&r->entry);
    bson_init(&r->reply);
    if (from != NULL && from->sec > 0 && from->ord >= 0) {
        r->sec = (uint32_t)from->sec;
        r->ord = (uint32_t)from->ord;
        r->h = from->h;
        r->has_h = from->has_h;
        if (!oplog_edge(client, false, &osec, &oord, fail, err))
            goto fail;
        if (osec > r->sec || (osec == r->sec && oord > r->ord)) {
            mcdc_error_set(err, MCDC_ERR_MONGO, 286,
                           "the stored position Timestamp(%u, %u) is no longer in the oplog, "
                           "whose oldest entry is Timestamp(%u, %u)",
                           r->sec, r->ord, osec, oord);
            if (fail != NULL) {
                memset(fail, 0, sizeof *fail);
                fail->domain = MONGOC_ERROR_SERVER;
                fail->code = 286;
                fail->message = err->msg;
            }
            goto fail;
        }
        if (from->tord > 0) {
            r->start_tord = r->skip_tord = from->tord;
            r->skip_sec = r->sec;
            r->skip_ord = r->ord;
        }
    } else if (!oplog_edge(client, true, &r->sec, &r->ord, fail, err)) {
        goto fail;
    }
    r->started = true;
    r->coll = mongoc_client_get_collection(client, "local", "oplog.rs");
    open_cursor(r, r->skip_tord > 0);
    return r;
fail:
    oplog_destroy(r);
    return NULL;
}

static void free_txn(struct oplog_reader *r)
{
    for (size_t i = 0; i < r->n_ops; i++)
        bson_destroy(r->ops[i]);
    for (size_t i = 0; i < r->n_chain; i++)
        bson_destroy(r->chain[i]);
    free(r->ops);
    free(r->chain);
    r->ops = r->chain = NULL;
    r->n_ops = r->n_chain = r->next_op = 0;
    r->txn_open = false;
}

void oplog_destroy(struct oplog_reader *r)
{
    if (r == NULL)
        return;
    mongoc_cursor_destroy(r->cursor);
    mongoc_collection_destroy(r->coll);
    free_txn(r);
    if (r->has_decoded)
        bson_destroy(&r->decoded);
    bson_destroy(&r->query);
    bson_destroy(&r->entry);
    bson_destroy(&r->reply);
    free(r);
}

void oplog_start_position(const struct oplog_reader *r, struct mcdc_position *pos)
{
    position_clear(pos);
    pos->sec = r->sec;
    pos->ord = r->ord;
    pos->oplog = true;
    pos->h = r->h;
    pos->has_h = r->has_h;
    pos->tord = r->start_tord;
}

static bool bad(struct oplog_reader *r, const char *what)
{
    char ts[64];
    snprintf(ts, sizeof ts, "Timestamp(%u, %u)", r->sec, r->ord);
    mcdc_error_set(&r->local, MCDC_ERR_ENCODE, 0, "oplog entry at %s: %s", ts, what);
    r->local_error = true;
    return false;
}

static bool view(const bson_t *doc, const char *key, bson_t *out)
{
    bson_iter_t it;
    uint32_t len;
    const uint8_t *data;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    return bson_init_static(out, data, len);
}

/* Points dst at src's bytes. A static bson_t refers to itself, so views are
 * made in place, never copied by assignment. */
static void alias(bson_t *dst, const bson_t *src)
{
    bson_init_static(dst, bson_get_data(src), src->len);
}

/* Fills item->ev from a CRUD operation (a top-level entry or an applyOps
 * element). *emit false for anything but i/u/d. */
static bool fill_event(struct oplog_reader *r, const bson_t *op, struct oplog_item *item)
{
    struct mcdc_event *ev = &item->ev;
    bson_iter_t it;
    const char *o_letter, *ns, *dot;
    uint32_t ns_len;
    bson_t o, o2;

    event_init(ev);
    item->emit = false;
    if (!bson_iter_init_find(&it, op, "op") || !BSON_ITER_HOLDS_UTF8(&it))
        return bad(r, "no op");
    o_letter = bson_iter_utf8(&it, NULL);
    if (strcmp(o_letter, "i") && strcmp(o_letter, "u") && strcmp(o_letter, "d"))
        return true; /* n, c: nothing to emit */
    if (!bson_iter_init_find(&it, op, "ns") || !BSON_ITER_HOLDS_UTF8(&it))
        return bad(r, "no ns");
    ns = bson_iter_utf8(&it, &ns_len);
    dot = memchr(ns, '.', ns_len);
    if (dot == NULL)
        return bad(r, "ns without a collection");
    if (!view(op, "o", &o))
        return bad(r, "no o document");
    ev->db = ns;
    ev->db_len = (size_t)(dot - ns);
    ev->coll = dot + 1;
    ev->coll_len = ns_len - ev->db_len - 1;
    switch (o_letter[0]) {
    case 'i':
        ev->op = MCDC_OP_INSERT;
        alias(&ev->full_document, &o);
        ev->has_full_document = true;
        alias(&ev->document_key, &o);
        break;
    case 'u':
        if (!view(op, "o2", &o2))
            return bad(r, "update without o2");
        ev->op = MCDC_OP_UPDATE;
        alias(&ev->document_key, &o2);
        alias(&ev->oplog_filter, &o2);
        ev->has_oplog_filter = true;
        alias(&ev->oplog_patch, &o);
        ev->has_oplog_patch = true;
        if (!r->cfg->oplog_update_raw_diff) {
            if (r->has_decoded) {
                bson_destroy(&r->decoded);
                r->has_decoded = false;
            }
            switch (oplog_diff_to_v1(&o, &r->decoded, &r->local)) {
            case OPLOG_DIFF_DECODED:
                r->has_decoded = true;
                alias(&ev->oplog_patch, &r->decoded);
                break;
            case OPLOG_DIFF_MALFORMED:
                r->local_error = true;
                return false;
            case OPLOG_DIFF_NOT_V2:
            default:
                break;
            }
        }
        break;
    case 'd':
    default:
        ev->op = MCDC_OP_DELETE;
        alias(&ev->document_key, &o);
        alias(&ev->oplog_filter, &o);
        ev->has_oplog_filter = true;
        break;
    }
    if (!bson_iter_init_find(&it, &ev->document_key, "_id"))
        return bad(r, "operation without _id");
    ev->has_document_key = true;
    ev->has_cluster_time = true;
    ev->ts_sec = r->sec;
    ev->ts_inc = r->ord;
    ev->oplog_h = r->h;
    ev->oplog_has_h = r->has_h;
    item->emit = true;
    return true;
}

static void set_pos(struct oplog_reader *r, struct oplog_item *item, int64_t tord)
{
    position_clear(&item->pos);
    item->pos.sec = r->sec;
    item->pos.ord = r->ord;
    item->pos.oplog = true;
    item->pos.h = r->h;
    item->pos.has_h = r->has_h;
    item->pos.tord = tord;
}

static void push(bson_t ***arr, size_t *n, const bson_t *doc)
{
    *arr = xrealloc(*arr, (*n + 1) * sizeof **arr);
    (*arr)[(*n)++] = bson_copy(doc);
}

/* Appends the operations of an applyOps entry to r->ops. */
static bool take_ops(struct oplog_reader *r, const bson_t *entry)
{
    bson_iter_t it, ops;
    if (!bson_iter_init_find(&it, entry, "o") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &it) || !bson_iter_find(&it, "applyOps") ||
        !BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &ops))
        return bad(r, "applyOps is not an array");
    while (bson_iter_next(&ops)) {
        bson_t op;
        uint32_t len;
        const uint8_t *data;
        if (!BSON_ITER_HOLDS_DOCUMENT(&ops))
            return bad(r, "applyOps element is not a document");
        bson_iter_document(&ops, &len, &data);
        if (!bson_init_static(&op, data, len))
            return bad(r, "applyOps element is not valid BSON");
        push(&r->ops, &r->n_ops, &op);
    }
    return true;
}

/* Reads the entry at ts (a partialTxn link) with a plain find. */
static bool fetch_entry(struct oplog_reader *r, uint32_t sec, uint32_t ord, bson_t **out)
{
    if (r->coll == NULL) { /* a detached reader (oplog_detached) has no oplog to read */
        mcdc_error_set(&r->local, MCDC_ERR_ENCODE, 0,
                       "oplog entry at Timestamp(%u, %u): prevOpTime Timestamp(%u, %u) cannot be "
                       "read without a connection",
                       r->sec, r->ord, sec, ord);
        r->local_error = true;
        return false;
    }
    bson_t *filter = BCON_NEW("ts", BCON_TIMESTAMP(sec, ord));
    bson_t *opts = BCON_NEW("limit", BCON_INT64(1));
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(r->coll, filter, opts, NULL);
    const bson_t *doc = NULL, *reply = NULL;
    bool ok = mongoc_cursor_next(cur, &doc);
    if (ok) {
        *out = bson_copy(doc);
    } else if (mongoc_cursor_error_document(cur, &r->error, &reply)) {
        r->has_error = true;
        bson_reinit(&r->reply);
        if (reply != NULL)
            bson_copy_to_excluding_noinit(reply, &r->reply, "", NULL);
    } else {
        /* The chain's start was truncated: the transaction cannot be rebuilt. */
        mcdc_error_set(&r->local, MCDC_ERR_MONGO, 286,
                       "the partialTxn entry Timestamp(%u, %u) of the transaction committed at "
                       "Timestamp(%u, %u) is no longer in the oplog",
                       sec, ord, r->sec, r->ord);
        r->local_error = true;
    }
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    bson_destroy(opts);
    return ok;
}

/* The committing entry r->entry: collects the chain (walking prevOpTime
 * back to Timestamp(0, 0)) and then its own operations. own_ops is false for
 * a commitTransaction entry, which carries none (its prepare entry does). */
static bool start_txn(struct oplog_reader *r, bool own_ops)
{
    bson_iter_t it, pt;
    const bson_t *cur = &r->entry;
    bson_t lsid;

    free_txn(r);
    for (;;) {
        uint32_t ps = 0, po = 0;
        if (bson_iter_init_find(&it, cur, "prevOpTime") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            bson_iter_recurse(&it, &pt) && bson_iter_find(&pt, "ts") &&
            BSON_ITER_HOLDS_TIMESTAMP(&pt))
            bson_iter_timestamp(&pt, &ps, &po);
        if (ps == 0 && po == 0)
            break;
        bson_t *prev = NULL;
        if (!fetch_entry(r, ps, po, &prev))
            return false;
        r->chain = xrealloc(r->chain, (r->n_chain + 1) * sizeof *r->chain);
        r->chain[r->n_chain++] = prev;
        cur = prev;
    }
    for (size_t i = r->n_chain; i > 0; i--)
        if (!take_ops(r, r->chain[i - 1]))
            return false;
    if (own_ops && !take_ops(r, &r->entry))
        return false;
    r->has_stxnid = false;
    if (view(&r->entry, "lsid", &lsid) && bson_iter_init_find(&it, &r->entry, "txnNumber"))
        r->has_stxnid = oplog_stxnid(&lsid, bson_iter_as_int64(&it), r->stxnid, sizeof r->stxnid);
    r->txn_open = true;
    r->next_op = 0;
    if (r->skip_tord > 0 && r->skip_sec == r->sec && r->skip_ord == r->ord)
        r->next_op = (size_t)r->skip_tord < r->n_ops ? (size_t)r->skip_tord : r->n_ops;
    r->skip_tord = 0;
    return true;
}

static enum capture_status next_txn_op(struct oplog_reader *r, struct oplog_item *item)
{
    size_t i = r->next_op++;
    if (!fill_event(r, r->ops[i], item))
        return CAPTURE_ERROR;
    set_pos(r, item, (int64_t)i + 1);
    if (item->emit) {
        item->ev.oplog_tord = (int64_t)i + 1;
        item->ev.oplog_stxnid = r->has_stxnid ? r->stxnid : NULL;
        item->ev.oplog_txn_last = r->next_op == r->n_ops;
        if (r->has_stxnid) /* the offset too (SourceInfo.lastOffset@v1.9.8) */
            memcpy(item->pos.stxnid, r->stxnid, sizeof item->pos.stxnid);
    }
    if (r->next_op >= r->n_ops)
        r->txn_open = false;
    return CAPTURE_EVENT;
}

static bool holds_true(const bson_t *o, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, o, key) && bson_iter_as_bool(&it);
}

static enum capture_status take_entry(struct oplog_reader *r, const bson_t *doc,
                                      struct oplog_item *item);

struct oplog_reader *oplog_detached(const struct mcdc_config *cfg)
{
    struct oplog_reader *r = xcalloc(1, sizeof *r);
    r->cfg = cfg;
    bson_init(&r->query);
    bson_init(&r->entry);
    bson_init(&r->reply);
    r->started = true;
    return r;
}

enum capture_status oplog_feed(struct oplog_reader *r, const bson_t *entry,
                               struct oplog_item *item)
{
    if (r->has_error || r->local_error)
        return CAPTURE_ERROR;
    if (r->txn_open && r->next_op < r->n_ops)
        return next_txn_op(r, item);
    return take_entry(r, entry, item);
}

enum capture_status oplog_next(struct oplog_reader *r, struct oplog_item *item)
{
    const bson_t *doc = NULL, *reply = NULL;

    if (r->has_error || r->local_error)
        return CAPTURE_ERROR;
    if (r->txn_open && r->next_op < r->n_ops)
        return next_txn_op(r, item);
    if (r->coll == NULL) /* detached: entries come through oplog_feed */
        return CAPTURE_IDLE;
    if (r->cursor == NULL) /* still at the stored transaction entry: read it again */
        open_cursor(r, r->skip_tord > 0);
    if (!mongoc_cursor_next(r->cursor, &doc)) {
        if (mongoc_cursor_error_document(r->cursor, &r->error, &reply)) {
            r->has_error = true;
            bson_reinit(&r->reply);
            if (reply != NULL)
                bson_copy_to_excluding_noinit(reply, &r->reply, "", NULL);
            return CAPTURE_ERROR;
        }
        if (!mongoc_cursor_more(r->cursor)) {
            /* The server closed the tailable cursor (e.g. nothing matched yet on an old
             * server): reopen after the last entry read. */
            mongoc_cursor_destroy(r->cursor);
            r->cursor = NULL;
        }
        return CAPTURE_IDLE;
    }
    return take_entry(r, doc, item);
}

/* One top-level entry read (from the cursor, or handed in by oplog_feed). */
static enum capture_status take_entry(struct oplog_reader *r, const bson_t *doc,
                                      struct oplog_item *item)
{
    bson_iter_t it;
    bson_t o;

    bson_destroy(&r->entry);
    bson_copy_to(doc, &r->entry);
    ts_of(&r->entry, "ts", &r->sec, &r->ord);
    r->has_h = bson_iter_init_find(&it, &r->entry, "h") && BSON_ITER_HOLDS_NUMBER(&it);
    r->h = r->has_h ? bson_iter_as_int64(&it) : 0;
    if (r->skip_tord > 0 && (r->sec != r->skip_sec || r->ord != r->skip_ord))
        r->skip_tord = 0; /* the stored transaction entry was not the first one read */

    if (bson_iter_init_find(&it, &r->entry, "op") && BSON_ITER_HOLDS_UTF8(&it) &&
        !strcmp(bson_iter_utf8(&it, NULL), "c") && view(&r->entry, "o", &o) &&
        (bson_iter_init_find(&it, &o, "applyOps") ||
         bson_iter_init_find(&it, &o, "commitTransaction"))) {
        bool commit = !strcmp(bson_iter_key(&it), "commitTransaction");
        event_init(&item->ev);
        item->emit = false;
        /* partialTxn links and a prepared transaction's prepare entry are read
         * again through prevOpTime when their commit arrives (the committing
         * applyOps, or the commitTransaction of a prepared transaction; an
         * aborted one has no commit and so never produces events). The stored
         * position may move past them meanwhile: the commit entry, later in
         * the oplog, is what a restart reads again. */
        if (!commit && (holds_true(&o, "partialTxn") || holds_true(&o, "prepare"))) {
            set_pos(r, item, 0);
            return CAPTURE_EVENT;
        }
        if (!start_txn(r, !commit))
            return CAPTURE_ERROR;
        if (r->n_ops == 0) {
            set_pos(r, item, 0);
            return CAPTURE_EVENT;
        }
        if (r->next_op >= r->n_ops) { /* every operation was emitted before the restart */
            r->txn_open = false;
            set_pos(r, item, (int64_t)r->n_ops);
            return CAPTURE_EVENT;
        }
        return next_txn_op(r, item);
    }
    if (!fill_event(r, &r->entry, item))
        return CAPTURE_ERROR;
    /* A retryable write's entry carries its session (lsid, txnNumber): 1.9
     * gives it a stxnid too when the entry's `h` is absent or 0 (SourceInfo's
     * extractSessionTxnId), though it is no transaction (no tord, no
     * BEGIN/END); its offset carries the id as well (lastOffset). */
    r->has_stxnid = false;
    set_pos(r, item, 0);
    if (item->emit) {
        entry_stxnid(&r->entry, r->stxnid, sizeof r->stxnid);
        r->has_stxnid = r->stxnid[0] != '\0';
        item->ev.oplog_stxnid = r->has_stxnid ? r->stxnid : NULL;
        if (r->has_stxnid)
            memcpy(item->pos.stxnid, r->stxnid, sizeof item->pos.stxnid);
    }
    return CAPTURE_EVENT;
}

void oplog_failure(struct oplog_reader *r, struct resume_failure *fail, struct mcdc_error *err)
{
    if (r->local_error) {
        *err = r->local;
        if (fail != NULL) {
            memset(fail, 0, sizeof *fail);
            /* 286 classifies as history lost; 2 (BadValue) as fatal: a malformed
             * entry comes back on every retry. */
            fail->domain = MONGOC_ERROR_SERVER;
            fail->code = r->local.code == 286 ? 286u : 2u;
            fail->message = err->msg;
        }
        if (r->local.code != 286)
            err->retriable = false;
        return;
    }
    capture_failure_from(&r->error, &r->reply, fail, err);
}
