/*
 * snapshot/incremental_read: the reads of the incremental snapshot engine
 * (incremental.h; debezium-format.md §5.4 "Reading a chunk"): the maximum
 * key, one chunk in `_id` order across BSON type brackets, and the window
 * markers in the signal collection (or a snapshot read at a cluster time).
 *
 * Type brackets: MongoDB's $gt/$lte compare only within the operand's type
 * class (mongo-sim-spec.md §1.9), so "after key K" is written
 * {$or: [{_id: {$gt: K}}, {_id: {$type: [every type of a higher bracket]}}]}
 * and "up to the maximum M" likewise with the lower brackets. Sorting on
 * _id orders across brackets in BSON order (MinKey, null, numbers, strings,
 * objects, binary, ObjectId, bool, date, timestamp, ..., MaxKey), so a
 * mixed-type collection is read whole, chunk after chunk, one bracket after
 * the other. (Arrays, regexes and undefined are not valid `_id` values in
 * MongoDB.)
 */
#include "snapshot/incremental_internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "common/log.h"

/* The bracket of a BSON type, in MongoDB's canonical order. */
static int bracket_of(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_MINKEY: return 0;
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED: return 1;
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DECIMAL128: return 2;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_SYMBOL: return 3;
    case BSON_TYPE_DOCUMENT: return 4;
    case BSON_TYPE_ARRAY: return 5;
    case BSON_TYPE_BINARY: return 6;
    case BSON_TYPE_OID: return 7;
    case BSON_TYPE_BOOL: return 8;
    case BSON_TYPE_DATE_TIME: return 9;
    case BSON_TYPE_TIMESTAMP: return 10;
    case BSON_TYPE_REGEX: return 11;
    case BSON_TYPE_DBPOINTER: return 12;
    case BSON_TYPE_CODE: return 13;
    case BSON_TYPE_CODEWSCOPE: return 14;
    case BSON_TYPE_MAXKEY: return 15;
    default: return 2;
    }
}

#define BRACKETS 16

/* $type numbers of each bracket (-1 MinKey, 127 MaxKey). */
static const int bracket_types[BRACKETS][5] = {
    {-1, 0}, {10, 0}, {1, 16, 18, 19, 0}, {2, 14, 0}, {3, 0},  {4, 0},  {5, 0},  {7, 0},
    {8, 0},  {9, 0},  {17, 0},           {11, 0},    {12, 0}, {13, 0}, {15, 0}, {127, 0},
};

/* {_id: {$type: [types of brackets lo..hi]}} into arr at key; false if empty. */
static bool append_types(bson_t *parent, const char *key, int lo, int hi)
{
    bson_t d, sub, list;
    uint32_t n = 0;
    char idx[16];
    const char *k;

    if (lo > hi)
        return false;
    bson_append_document_begin(parent, key, -1, &d);
    bson_append_document_begin(&d, "_id", 3, &sub);
    bson_append_array_begin(&sub, "$type", 5, &list);
    for (int b = lo; b <= hi; b++)
        for (int i = 0; i < 5 && bracket_types[b][i] != 0; i++) {
            bson_uint32_to_string(n++, &k, idx, sizeof idx);
            bson_append_int32(&list, k, -1, bracket_types[b][i]);
        }
    bson_append_array_end(&sub, &list);
    bson_append_document_end(&d, &sub);
    bson_append_document_end(parent, &d);
    return true;
}

/* One side of the range: {$or: [{_id: {op: key}}, {_id: {$type: [other brackets]}}]}. */
static void append_bound(bson_t *and_arr, const char *akey, const bson_t *key_doc, bool after)
{
    bson_iter_t id;
    bson_t d, orr, one, cmp;
    int b;

    if (!bson_iter_init_find(&id, key_doc, "_id"))
        return;
    b = bracket_of(bson_iter_type(&id));
    bson_append_document_begin(and_arr, akey, -1, &d);
    bson_append_array_begin(&d, "$or", 3, &orr);
    bson_append_document_begin(&orr, "0", 1, &one);
    bson_append_document_begin(&one, "_id", 3, &cmp);
    bson_append_iter(&cmp, after ? "$gt" : "$lte", -1, &id);
    bson_append_document_end(&one, &cmp);
    bson_append_document_end(&orr, &one);
    if (after)
        append_types(&orr, "1", b + 1, BRACKETS - 1);
    else
        append_types(&orr, "1", 0, b - 1);
    bson_append_array_end(&d, &orr);
    bson_append_document_end(and_arr, &d);
}

/* {$and: [after last (if any), up to max (if any), cond, owned]} (or {}). */
static void chunk_filter(const struct incr *s, const bson_t *owned, bool with_bounds, bson_t *out)
{
    bson_t arr;
    uint32_t n = 0;
    char idx[16];
    const char *k;

    bson_init(out);
    bson_append_array_begin(out, "$and", 4, &arr);
    if (with_bounds && !bson_empty(&s->last_key)) {
        bson_uint32_to_string(n++, &k, idx, sizeof idx);
        append_bound(&arr, k, &s->last_key, true);
    }
    if (with_bounds && !bson_empty(&s->max_key)) {
        bson_uint32_to_string(n++, &k, idx, sizeof idx);
        append_bound(&arr, k, &s->max_key, false);
    }
    if (!bson_empty(&s->queue[0].cond)) {
        bson_uint32_to_string(n++, &k, idx, sizeof idx);
        bson_append_document(&arr, k, -1, &s->queue[0].cond);
    }
    if (owned != NULL && !bson_empty(owned)) {
        bson_uint32_to_string(n++, &k, idx, sizeof idx);
        bson_append_document(&arr, k, -1, owned);
    }
    bson_append_array_end(out, &arr);
    if (n == 0)
        bson_reinit(out);
}

static bool mongo_fail(struct mcdc_error *err, const bson_error_t *be, const char *what,
                       const char *ns)
{
    mcdc_error_from_bson(err, be->code, be->message, false);
    mcdc_error_prefix(err, "incremental snapshot of %s: %s", ns, what);
    return false;
}

/* A random UUID (v4) as Debezium's chunk id. */
static void new_chunk_id(char out[40])
{
    uint8_t b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        bson_oid_t oid;
        bson_oid_init(&oid, NULL);
        memcpy(b, oid.bytes, 12);
        memset(b + 12, 0, 4);
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    snprintf(out, 40, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
}

static mongoc_collection_t *signal_collection(mongoc_client_t *client, const char *ns)
{
    char db[256];
    const char *dot = strchr(ns, '.');
    if (dot == NULL)
        return NULL;
    snprintf(db, sizeof db, "%.*s", (int)(dot - ns), ns);
    return mongoc_client_get_collection(client, db, dot + 1);
}

/* Inserts {_id: "<chunkId><suffix>", type, payload: ""} (§5.4 step 2 and 7). */
static bool insert_marker(struct incr *s, mongoc_client_t *client, const char *suffix,
                          const char *type, struct mcdc_error *err)
{
    mongoc_collection_t *c = signal_collection(client, s->cfg->signal_data_collection);
    bson_t doc = BSON_INITIALIZER;
    bson_error_t be;
    char id[64];
    bool ok;

    snprintf(id, sizeof id, "%s%s", s->chunk_id, suffix);
    BSON_APPEND_UTF8(&doc, "_id", id);
    BSON_APPEND_UTF8(&doc, "type", type);
    BSON_APPEND_UTF8(&doc, "payload", "");
    ok = mongoc_collection_insert_one(c, &doc, NULL, NULL, &be);
    bson_destroy(&doc);
    mongoc_collection_destroy(c);
    return ok || mongo_fail(err, &be, "cannot write the window marker to the signal collection",
                            s->queue[0].ns);
}

static bool delete_open_marker(struct incr *s, mongoc_client_t *client, struct mcdc_error *err)
{
    mongoc_collection_t *c = signal_collection(client, s->cfg->signal_data_collection);
    bson_t sel = BSON_INITIALIZER;
    bson_error_t be;
    char id[64];
    bool ok;

    snprintf(id, sizeof id, "%s-open", s->chunk_id);
    BSON_APPEND_UTF8(&sel, "_id", id);
    ok = mongoc_collection_delete_one(c, &sel, NULL, NULL, &be);
    bson_destroy(&sel);
    mongoc_collection_destroy(c);
    return ok || mongo_fail(err, &be, "cannot delete the window marker", s->queue[0].ns);
}

/* The server's operationTime now (the cluster time a snapshot read uses). */
static bool cluster_time_now(mongoc_client_t *client, uint32_t *sec, uint32_t *inc,
                             struct mcdc_error *err)
{
    bson_t cmd = BSON_INITIALIZER, reply;
    bson_error_t be;
    bson_iter_t it;
    bool ok;

    BSON_APPEND_INT32(&cmd, "ping", 1);
    ok = mongoc_client_command_simple(client, "admin", &cmd, NULL, &reply, &be);
    bson_destroy(&cmd);
    if (ok && bson_iter_init_find(&it, &reply, "operationTime") && BSON_ITER_HOLDS_TIMESTAMP(&it))
        bson_iter_timestamp(&it, sec, inc);
    else if (ok)
        ok = mcdc_error_set(err, MCDC_ERR_MONGO, 0,
                            "the server gives no operationTime: snapshot reads at a cluster "
                            "time need a replica set (MongoDB 5.0+)");
    else
        mcdc_error_from_bson(err, be.code, be.message, false);
    bson_destroy(&reply);
    return ok;
}

/* find with filter/sort/limit, at the cluster time T when s->cluster_time.
 * Returns a cursor (caller destroys) or NULL with err. */
static mongoc_cursor_t *find(struct incr *s, mongoc_client_t *client, const bson_t *filter,
                             int dir, int64_t limit, struct mcdc_error *err)
{
    mongoc_collection_t *coll =
        mongoc_client_get_collection(client, s->queue[0].db, s->queue[0].coll);
    mongoc_read_prefs_t *rp = mongoc_read_prefs_new(MONGOC_READ_PRIMARY);
    mongoc_cursor_t *cur = NULL;
    bson_t sort;
    bson_error_t be;

    bson_init(&sort);
    BSON_APPEND_INT32(&sort, "_id", dir);
    if (!s->cluster_time) {
        bson_t opts = BSON_INITIALIZER;
        BSON_APPEND_DOCUMENT(&opts, "sort", &sort);
        BSON_APPEND_INT64(&opts, "limit", limit);
        if (s->cfg->snapshot_fetch_size > 0)
            BSON_APPEND_INT64(&opts, "batchSize", s->cfg->snapshot_fetch_size);
        cur = mongoc_collection_find_with_opts(coll, filter, &opts, rp);
        bson_destroy(&opts);
    } else {
        /* The driver's read concern knows no atClusterTime: the find command
         * is written out whole and its reply turned into a cursor (getMore
         * continues at the same time on the server). */
        bson_t cmd = BSON_INITIALIZER, rc, *reply = bson_new();
        BSON_APPEND_UTF8(&cmd, "find", s->queue[0].coll);
        BSON_APPEND_DOCUMENT(&cmd, "filter", filter);
        BSON_APPEND_DOCUMENT(&cmd, "sort", &sort);
        BSON_APPEND_INT64(&cmd, "limit", limit);
        if (s->cfg->snapshot_fetch_size > 0)
            BSON_APPEND_INT64(&cmd, "batchSize", s->cfg->snapshot_fetch_size);
        bson_append_document_begin(&cmd, "readConcern", -1, &rc);
        BSON_APPEND_UTF8(&rc, "level", "snapshot");
        BSON_APPEND_TIMESTAMP(&rc, "atClusterTime", s->at_sec, s->at_inc);
        bson_append_document_end(&cmd, &rc);
        mongoc_database_t *db = mongoc_client_get_database(client, s->queue[0].db);
        if (mongoc_database_read_command_with_opts(db, &cmd, rp, NULL, reply, &be)) {
            cur = mongoc_cursor_new_from_command_reply_with_opts(client, reply, NULL);
            reply = NULL; /* owned by the cursor */
        } else {
            mongo_fail(err, &be, "snapshot read at the cluster time failed", s->queue[0].ns);
        }
        if (reply)
            bson_destroy(reply);
        mongoc_database_destroy(db);
        bson_destroy(&cmd);
    }
    bson_destroy(&sort);
    mongoc_read_prefs_destroy(rp);
    mongoc_collection_destroy(coll);
    return cur;
}

/* §5.4 step 3: the greatest _id matching the condition (BSON order across
 * brackets); *empty when none. */
static bool read_max_key(struct incr *s, mongoc_client_t *client, const bson_t *owned,
                         bool *empty, struct mcdc_error *err)
{
    bson_t filter;
    const bson_t *doc;
    bson_error_t be;
    bson_iter_t id;
    mongoc_cursor_t *cur;

    chunk_filter(s, owned, false, &filter);
    cur = find(s, client, &filter, -1, 1, err);
    bson_destroy(&filter);
    if (cur == NULL)
        return false;
    *empty = true;
    if (mongoc_cursor_next(cur, &doc) && bson_iter_init_find(&id, doc, "_id")) {
        bson_reinit(&s->max_key);
        bson_append_iter(&s->max_key, "_id", 3, &id);
        *empty = false;
    }
    if (mongoc_cursor_error(cur, &be)) {
        mongoc_cursor_destroy(cur);
        return mongo_fail(err, &be, "cannot read the maximum key", s->queue[0].ns);
    }
    mongoc_cursor_destroy(cur);
    s->offset_dirty = true;
    return true;
}

static void estimate(struct incr *s, mongoc_client_t *client)
{
    mongoc_collection_t *c =
        mongoc_client_get_collection(client, s->queue[0].db, s->queue[0].coll);
    bson_error_t be;
    int64_t n = mongoc_collection_estimated_document_count(c, NULL, NULL, NULL, &be);
    s->estimated = n >= 0 ? n : -1;
    mongoc_collection_destroy(c);
}

enum incr_read incr_read_chunk(struct incr *s, mongoc_client_t *client, const bson_t *owned,
                               struct mcdc_error *err)
{
    int64_t limit = s->cfg->incremental_snapshot_chunk_size;
    int64_t cap = s->cfg->incremental_snapshot_window_max_bytes;
    bool markers = !s->cluster_time, empty = false;
    mongoc_cursor_t *cur;
    const bson_t *doc;
    bson_error_t be;
    bson_t filter;
    int64_t n = 0;

    if (s->state != INCR_READY || s->count == 0)
        return INCR_READ_COLL_DONE;
    incr_window_clear(s);
    new_chunk_id(s->chunk_id);
    if (s->estimated < 0)
        estimate(s, client);
    if (markers && !insert_marker(s, client, "-open", "snapshot-window-open", err))
        return INCR_READ_FAILED;
    if (!markers && !cluster_time_now(client, &s->at_sec, &s->at_inc, err)) {
        mcdc_error_prefix(err, "incremental snapshot of %s", s->queue[0].ns);
        return INCR_READ_FAILED;
    }
    if (bson_empty(&s->max_key)) {
        if (!read_max_key(s, client, owned, &empty, err))
            return INCR_READ_FAILED;
        if (empty) {
            LOG_INFO("incremental snapshot of %s: no document matches (collection empty or "
                     "condition matches nothing)",
                     s->queue[0].ns);
            incr_collection_finished(s);
            return INCR_READ_COLL_DONE;
        }
    }
    chunk_filter(s, owned, true, &filter);
    cur = find(s, client, &filter, 1, limit, err);
    bson_destroy(&filter);
    if (cur == NULL)
        return INCR_READ_FAILED;
    bson_reinit(&s->chunk_end);
    while (n < limit && mongoc_cursor_next(cur, &doc)) {
        bson_iter_t id;
        if (bson_iter_init_find(&id, doc, "_id")) {
            bson_reinit(&s->chunk_end);
            bson_append_iter(&s->chunk_end, "_id", 3, &id);
        }
        incr_window_add(s, bson_copy(doc));
        n++;
        /* The byte cap: a window of huge documents ends early (at least one row). */
        if (cap > 0 && (int64_t)s->window_bytes >= cap)
            break;
    }
    if (mongoc_cursor_error(cur, &be)) {
        mongoc_cursor_destroy(cur);
        incr_window_clear(s);
        return mongo_fail(err, &be, "chunk read failed", s->queue[0].ns) ? INCR_READ_FAILED
                                                                            : INCR_READ_FAILED;
    }
    mongoc_cursor_destroy(cur);
    if (n == 0) {
        incr_collection_finished(s);
        return INCR_READ_COLL_DONE;
    }
    if (markers) {
        bool ok = s->cfg->incremental_snapshot_watermarking == MCDC_WATERMARK_INSERT_DELETE
                      ? delete_open_marker(s, client, err)
                      : insert_marker(s, client, "-close", "snapshot-window-close", err);
        if (!ok) {
            incr_window_clear(s);
            return INCR_READ_FAILED;
        }
        s->state = INCR_WAIT_OPEN;
    } else {
        s->state = INCR_WAIT_TIME;
    }
    return INCR_READ_WINDOW;
}
