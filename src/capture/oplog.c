/*
 * oplog: tailing local.oplog.rs in Debezium 1.9's oplog mode (see oplog.h;
 * debezium-format.md §1.4, §3.5; mongo-sim-spec.md §5). This file holds the
 * reader: the oplog's edges, the tailable cursor and its filter, and the
 * plain find that reads a transaction's earlier entries. What an entry
 * becomes (events, transactions, positions) is decided in oplog_entry.c.
 */
#include "capture/oplog.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "capture/oplog_internal.h"
#include "common/xalloc.h"

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
        oplog_ts_of(doc, "ts", sec, ord);
        if (stxnid != NULL)
            oplog_entry_stxnid(doc, stxnid, stxnid_size);
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
    /* aligned: bson_t members */
    struct oplog_reader *r = xzalloc_aligned(_Alignof(struct oplog_reader), sizeof *r);
    uint32_t osec = 0, oord = 0;

    r->client = client;
    r->cfg = cfg;
    if (query != NULL)
        bson_copy_to(query, &r->query);
    else
        bson_init(&r->query);
    bson_init(&r->entry);
    bson_init(&r->reply);
    bson_init(&r->held);
    if (from != NULL && from->sec > 0 && from->ord >= 0) {
        r->sec = (uint32_t)from->sec;
        r->ord = (uint32_t)from->ord;
        r->h = from->h;
        r->has_h = from->has_h;
        r->t = from->t;
        r->has_t = from->has_t;
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
        if (!oplog_check_start(r, from, fail, err))
            goto fail;
    } else {
        /* "Now" is the majority commit point, not the newest entry: a start
         * position past the point could be rolled back. Entries after it are
         * read, and held until committed, like any other. */
        if (!oplog_commit_point(client, 0, &r->cp, fail, err))
            goto fail;
        if (r->cp.known) {
            r->sec = r->cp.maj_sec;
            r->ord = r->cp.maj_ord;
            r->t = r->cp.maj_t;
            r->has_t = true;
        } else if (!oplog_edge(client, true, &r->sec, &r->ord, fail, err)) {
            goto fail;
        }
    }
    r->started = true;
    r->coll = mongoc_client_get_collection(client, "local", "oplog.rs");
    open_cursor(r, r->skip_tord > 0);
    return r;
fail:
    oplog_destroy(r);
    return NULL;
}

void oplog_free_txn(struct oplog_reader *r)
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

bool oplog_fetch_entry(struct oplog_reader *r, uint32_t sec, uint32_t ord, bson_t **out)
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

void oplog_destroy(struct oplog_reader *r)
{
    if (r == NULL)
        return;
    mongoc_cursor_destroy(r->cursor);
    mongoc_collection_destroy(r->coll);
    oplog_free_txn(r);
    if (r->has_decoded)
        bson_destroy(&r->decoded);
    bson_destroy(&r->query);
    bson_destroy(&r->entry);
    bson_destroy(&r->reply);
    bson_destroy(&r->held);
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
    pos->t = r->t;
    pos->has_t = r->has_t;
    pos->tord = r->start_tord;
}

struct oplog_reader *oplog_detached(const struct mcdc_config *cfg)
{
    /* aligned: bson_t members */
    struct oplog_reader *r = xzalloc_aligned(_Alignof(struct oplog_reader), sizeof *r);
    r->cfg = cfg;
    bson_init(&r->query);
    bson_init(&r->entry);
    bson_init(&r->reply);
    bson_init(&r->held);
    r->started = true;
    return r;
}

enum capture_status oplog_feed(struct oplog_reader *r, const bson_t *entry,
                               struct oplog_item *item)
{
    if (r->has_error || r->local_error)
        return CAPTURE_ERROR;
    if (r->txn_open && r->next_op < r->n_ops)
        return oplog_next_txn_op(r, item);
    return oplog_take_entry(r, entry, item);
}

enum capture_status oplog_next(struct oplog_reader *r, struct oplog_item *item)
{
    const bson_t *doc = NULL, *reply = NULL;

    if (r->has_error || r->local_error)
        return CAPTURE_ERROR;
    if (r->txn_open && r->next_op < r->n_ops)
        return oplog_next_txn_op(r, item);
    if (r->coll == NULL) /* detached: entries come through oplog_feed */
        return CAPTURE_IDLE;
    if (r->has_held) /* past the commit point when read */
        return oplog_release_held(r, item);
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
    if (oplog_hold_if_uncommitted(r, doc))
        return oplog_release_held(r, item);
    return oplog_take_entry(r, doc, item);
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
