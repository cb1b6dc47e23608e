/*
 * snapshot/incremental_read: the reads of the incremental snapshot engine
 * (incremental.h; debezium-format.md §5.4 "Reading a chunk"): the maximum
 * key, one chunk in `_id` order across BSON type brackets, and the window
 * markers in the signal collection (or a snapshot read at a cluster time).
 *
 * Type brackets: MongoDB's $gt/$lte compare only within the operand's type
 * class (mongo-sim-spec.md §1.9), so chunks walk the brackets in BSON order
 * (snapshot/keyrange.h) from the last key's bracket up to the maximum key's:
 * each chunk lies in one bracket, read with keyrange_filter(bracket, last
 * key, maximum key), and an empty bracket moves on to the next one. A
 * mixed-type collection is read whole.
 */
#include "snapshot/incremental_internal.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/uuid.h"
#include "snapshot/hashkey.h"
#include "snapshot/keyrange.h"

/* The additional condition ANDed with the documents this task owns. */
static void extra_filter(const struct incr *s, const bson_t *owned, bson_t *out)
{
    const bson_t *cond = &s->queue[0].cond;
    bool has_owned = owned != NULL && !bson_empty(owned);
    bson_t arr;

    bson_init(out);
    if (!bson_empty(cond) && has_owned) {
        bson_append_array_begin(out, "$and", 4, &arr);
        BSON_APPEND_DOCUMENT(&arr, "0", cond);
        BSON_APPEND_DOCUMENT(&arr, "1", owned);
        bson_append_array_end(out, &arr);
    } else if (!bson_empty(cond)) {
        bson_concat(out, cond);
    } else if (has_owned) {
        bson_concat(out, owned);
    }
}

/* The _id value of a {_id: v} document (borrowed), or false. */
static bool key_value(const bson_t *key_doc, bson_value_t *v)
{
    bson_iter_t it;
    if (bson_empty(key_doc) || !bson_iter_init_find(&it, key_doc, "_id"))
        return false;
    *v = *bson_iter_value(&it);
    return true;
}

/* Connection trouble and elections are worth a retry (the chunk is read
 * again after a reconnect); a refusal (privileges, bad condition) is not. */
static bool transient(const bson_error_t *be)
{
    static const uint32_t codes[] = {6,     7,     89,    91,    189,   262,   9001, 10107,
                                     11600, 11602, 13435, 13436, 10058, 50915, 0};
    if (be->domain == MONGOC_ERROR_STREAM || be->domain == MONGOC_ERROR_SERVER_SELECTION)
        return true;
    for (size_t i = 0; codes[i]; i++)
        if (be->code == codes[i])
            return true;
    return false;
}

static bool mongo_fail(struct mcdc_error *err, const bson_error_t *be, const char *what,
                       const char *ns)
{
    mcdc_error_from_bson(err, be->code, be->message, transient(be));
    mcdc_error_prefix(err, "incremental snapshot of %s: %s", ns, what);
    return false;
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

/* Closes the window of a chunk that found nothing (the collection is done):
 * as a full window closes (a close marker, or the open marker deleted), so
 * no open marker is left behind in the signal collection (Debezium closes
 * the window after its read loop whatever it found). The stream side
 * ignores these markers: the state is no longer waiting for them. */
static bool close_empty_window(struct incr *s, mongoc_client_t *client, struct mcdc_error *err)
{
    return s->cfg->incremental_snapshot_watermarking == MCDC_WATERMARK_INSERT_DELETE
               ? delete_open_marker(s, client, err)
               : insert_marker(s, client, "-close", "snapshot-window-close", err);
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
        mcdc_error_from_bson(err, be.code, be.message, transient(&be));
    bson_destroy(&reply);
    return ok;
}

/*
 * find with filter/sort/limit in a session of its own (*cs, to end with
 * find_done after the cursor), so that the cursor's getMores run in the
 * session of its find (a cursor made from a command's reply would otherwise
 * take another implicit session, which the server refuses):
 * - cluster-time windows: readConcern snapshot at T (majority-committed by
 *   definition). The driver's read concern knows no atClusterTime: the find
 *   command is written out whole and its reply turned into a cursor.
 * - marker windows: readConcern majority after T, the cluster time read just
 *   after the open marker was written, through a causally consistent session
 *   advanced to T (the driver adds afterClusterTime; causal consistency spec).
 *   A chunk row is published as a read, so it must not be a w:1 write a
 *   failover can roll back (MongoDB's read concern "majority"); and it must be
 *   at least as new as the open marker, or a write committed between the
 *   commit point and the marker would be streamed before the window opens and
 *   then overwritten by the older row read. The server waits until the commit
 *   point reaches T.
 * Returns a cursor (caller ends it with find_done) or NULL with err.
 */
static mongoc_cursor_t *find(struct incr *s, mongoc_client_t *client, const bson_t *filter, int dir,
                             int64_t limit, mongoc_client_session_t **cs, struct mcdc_error *err)
{
    mongoc_collection_t *coll;
    mongoc_read_prefs_t *rp;
    mongoc_session_opt_t *so;
    mongoc_cursor_t *cur = NULL;
    bson_t sort, opts = BSON_INITIALIZER;
    bson_error_t be;

    so = mongoc_session_opts_new();
    /* A snapshot read at atClusterTime is refused in a causally consistent session. */
    mongoc_session_opts_set_causal_consistency(so, !s->cluster_time);
    *cs = mongoc_client_start_session(client, so, &be);
    mongoc_session_opts_destroy(so);
    if (*cs == NULL) {
        mongo_fail(err, &be, "cannot start a session for the chunk read", s->queue[0].ns);
        return NULL;
    }
    if (!s->cluster_time)
        mongoc_client_session_advance_operation_time(*cs, s->at_sec, s->at_inc);
    if (!mongoc_client_session_append(*cs, &opts, &be)) {
        bson_destroy(&opts);
        mongoc_client_session_destroy(*cs);
        *cs = NULL;
        mongo_fail(err, &be, "cannot start a session for the chunk read", s->queue[0].ns);
        return NULL;
    }
    coll = mongoc_client_get_collection(client, s->queue[0].db, s->queue[0].coll);
    rp = mongoc_read_prefs_new(MONGOC_READ_PRIMARY);
    bson_init(&sort);
    BSON_APPEND_INT32(&sort, "_id", dir);
    if (!s->cluster_time) {
        BSON_APPEND_DOCUMENT(&opts, "sort", &sort);
        BSON_APPEND_INT64(&opts, "limit", limit);
        if (s->cfg->snapshot_fetch_size > 0)
            BSON_APPEND_INT64(&opts, "batchSize", s->cfg->snapshot_fetch_size);
        BCON_APPEND(&opts, "readConcern", "{", "level", BCON_UTF8("majority"), "}");
        cur = mongoc_collection_find_with_opts(coll, filter, &opts, rp);
    } else {
        bson_t cmd = BSON_INITIALIZER, rc, reply, cur_opts = BSON_INITIALIZER;
        mongoc_database_t *db = mongoc_client_get_database(client, s->queue[0].db);
        BSON_APPEND_UTF8(&cmd, "find", s->queue[0].coll);
        BSON_APPEND_DOCUMENT(&cmd, "filter", filter);
        BSON_APPEND_DOCUMENT(&cmd, "sort", &sort);
        BSON_APPEND_INT64(&cmd, "limit", limit);
        if (s->cfg->snapshot_fetch_size > 0) {
            BSON_APPEND_INT64(&cmd, "batchSize", s->cfg->snapshot_fetch_size);
            BSON_APPEND_INT64(&cur_opts, "batchSize", s->cfg->snapshot_fetch_size);
        }
        bson_append_document_begin(&cmd, "readConcern", -1, &rc);
        BSON_APPEND_UTF8(&rc, "level", "snapshot");
        BSON_APPEND_TIMESTAMP(&rc, "atClusterTime", s->at_sec, s->at_inc);
        bson_append_document_end(&cmd, &rc);
        bson_concat(&cur_opts, &opts); /* the sessionId, for the getMores */
        /* The command initialises reply (stack storage, always destroyed);
         * the cursor takes a heap copy it frees itself. A bson_new() reply
         * would be re-initialised in place and its allocation leaked. */
        if (mongoc_database_read_command_with_opts(db, &cmd, rp, &opts, &reply, &be))
            cur = mongoc_cursor_new_from_command_reply_with_opts(client, bson_copy(&reply),
                                                                 &cur_opts);
        else
            mongo_fail(err, &be, "snapshot read at the cluster time failed", s->queue[0].ns);
        bson_destroy(&reply);
        bson_destroy(&cur_opts);
        mongoc_database_destroy(db);
        bson_destroy(&cmd);
    }
    bson_destroy(&opts);
    bson_destroy(&sort);
    mongoc_read_prefs_destroy(rp);
    mongoc_collection_destroy(coll);
    if (cur == NULL) {
        mongoc_client_session_destroy(*cs);
        *cs = NULL;
    }
    return cur;
}

/* Destroys a find() cursor, then its session. */
static void find_done(mongoc_cursor_t *cur, mongoc_client_session_t *cs)
{
    mongoc_cursor_destroy(cur);
    if (cs != NULL)
        mongoc_client_session_destroy(cs);
}

/* §5.4 step 3: the greatest _id matching the condition (BSON order across
 * brackets); *empty when none. */
static bool read_max_key(struct incr *s, mongoc_client_t *client, const bson_t *owned, bool *empty,
                         struct mcdc_error *err)
{
    bson_t filter;
    const bson_t *doc;
    bson_error_t be;
    bson_iter_t id;
    mongoc_cursor_t *cur;
    mongoc_client_session_t *cs = NULL;

    /* sort({_id: -1}) orders across brackets: the greatest key in BSON order. */
    extra_filter(s, owned, &filter);
    cur = find(s, client, &filter, -1, 1, &cs, err);
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
        find_done(cur, cs);
        return mongo_fail(err, &be, "cannot read the maximum key", s->queue[0].ns);
    }
    find_done(cur, cs);
    s->offset_dirty = true;
    return true;
}

static void estimate(struct incr *s, mongoc_client_t *client)
{
    mongoc_collection_t *c = mongoc_client_get_collection(client, s->queue[0].db, s->queue[0].coll);
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
    mongoc_client_session_t *cs = NULL;
    const bson_t *doc;
    bson_error_t be;
    bson_t filter;
    int64_t n = 0;
    const bson_t *post = NULL;

    /* A hashed shard key's ownership is tested on each document read
     * (snapshot/hashkey.h): the find reads the shard's orphans too. */
    if (hashkey_is_filter(owned)) {
        post = owned;
        owned = NULL;
    }
    if (s->state != INCR_READY || s->count == 0)
        return INCR_READ_COLL_DONE;
    incr_window_clear(s);
    mcdc_uuid_v4(s->chunk_id);
    if (s->estimated < 0)
        estimate(s, client);
    if (markers && !insert_marker(s, client, "-open", "snapshot-window-open", err))
        return INCR_READ_FAILED;
    /* cluster-time windows: T of the snapshot read; marker windows: the time
     * the majority read must reach (after the open marker). */
    if (!cluster_time_now(client, &s->at_sec, &s->at_inc, err)) {
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
            if (markers && !close_empty_window(s, client, err))
                return INCR_READ_FAILED;
            incr_collection_finished(s);
            return INCR_READ_COLL_DONE;
        }
    }
    {
        bson_value_t last, max;
        bool has_last = key_value(&s->last_key, &last);
        enum keyrange_bracket maxb, b;
        bson_t extra;

        if (!key_value(&s->max_key, &max))
            return INCR_READ_COLL_DONE;
        maxb = keyrange_bracket_of(&max);
        b = has_last ? keyrange_bracket_of(&last) : KEYRANGE_MINKEY;
        if (s->bracket > (int)b)
            b = (enum keyrange_bracket)s->bracket;
        extra_filter(s, owned, &extra);
        bson_reinit(&s->chunk_end);
        for (; b <= maxb && n == 0; b++) {
            const bson_value_t *after = has_last && keyrange_bracket_of(&last) == b ? &last : NULL;
            if (after != NULL && keyrange_bracket_singleton(b))
                continue; /* its one key was sent */
            bson_init(&filter);
            if (!keyrange_filter(b, after, b == maxb ? &max : NULL, &extra, &filter, err)) {
                bson_destroy(&filter);
                bson_destroy(&extra);
                return INCR_READ_FAILED;
            }
            cur = find(s, client, &filter, 1, limit, &cs, err);
            bson_destroy(&filter);
            if (cur == NULL) {
                bson_destroy(&extra);
                return INCR_READ_FAILED;
            }
            while (n < limit && mongoc_cursor_next(cur, &doc)) {
                bson_iter_t id;
                if (bson_iter_init_find(&id, doc, "_id")) {
                    bson_reinit(&s->chunk_end);
                    bson_append_iter(&s->chunk_end, "_id", 3, &id);
                }
                n++; /* counts orphans too: the chunk's end moves past them */
                if (post != NULL && !hashkey_owns(post, doc))
                    continue;
                incr_window_add(s, bson_copy(doc));
                /* The byte cap: a window of huge documents ends early (one row at least). */
                if (cap > 0 && (int64_t)s->window_bytes >= cap)
                    break;
            }
            if (mongoc_cursor_error(cur, &be)) {
                find_done(cur, cs);
                bson_destroy(&extra);
                incr_window_clear(s);
                mongo_fail(err, &be, "chunk read failed", s->queue[0].ns);
                return INCR_READ_FAILED;
            }
            find_done(cur, cs);
            if (n > 0)
                s->bracket = (int)b;
        }
        bson_destroy(&extra);
    }
    if (n == 0) {
        if (markers && !close_empty_window(s, client, err))
            return INCR_READ_FAILED;
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
