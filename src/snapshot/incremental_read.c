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
#include "common/xalloc.h"
#include "snapshot/hashkey.h"
#include "snapshot/keyrange.h"

/* The additional condition ANDed with the documents this task owns. */
static void extra_filter(const struct incr_job *j, const bson_t *owned, bson_t *out)
{
    const bson_t *cond = &j->cond;
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
static bool insert_marker(struct incr_job *j, mongoc_client_t *client, const char *suffix,
                          const char *type, struct mcdc_error *err)
{
    mongoc_collection_t *c = signal_collection(client, j->cfg->signal_data_collection);
    bson_t doc = BSON_INITIALIZER;
    bson_error_t be;
    char id[64];
    bool ok;

    snprintf(id, sizeof id, "%s%s", j->chunk_id, suffix);
    BSON_APPEND_UTF8(&doc, "_id", id);
    BSON_APPEND_UTF8(&doc, "type", type);
    BSON_APPEND_UTF8(&doc, "payload", "");
    ok = mongoc_collection_insert_one(c, &doc, NULL, NULL, &be);
    bson_destroy(&doc);
    mongoc_collection_destroy(c);
    return ok || mongo_fail(err, &be, "cannot write the window marker to the signal collection",
                            j->ns);
}

static bool delete_open_marker(struct incr_job *j, mongoc_client_t *client, struct mcdc_error *err)
{
    mongoc_collection_t *c = signal_collection(client, j->cfg->signal_data_collection);
    bson_t sel = BSON_INITIALIZER;
    bson_error_t be;
    char id[64];
    bool ok;

    snprintf(id, sizeof id, "%s-open", j->chunk_id);
    BSON_APPEND_UTF8(&sel, "_id", id);
    ok = mongoc_collection_delete_one(c, &sel, NULL, NULL, &be);
    bson_destroy(&sel);
    mongoc_collection_destroy(c);
    return ok || mongo_fail(err, &be, "cannot delete the window marker", j->ns);
}

/* Closes the window of a chunk that found nothing (the collection is done):
 * as a full window closes (a close marker, or the open marker deleted), so
 * no open marker is left behind in the signal collection (Debezium closes
 * the window after its read loop whatever it found). The stream side
 * ignores these markers: the state is no longer waiting for them. */
static bool close_empty_window(struct incr_job *j, mongoc_client_t *client, struct mcdc_error *err)
{
    return j->cfg->incremental_snapshot_watermarking == MCDC_WATERMARK_INSERT_DELETE
               ? delete_open_marker(j, client, err)
               : insert_marker(j, client, "-close", "snapshot-window-close", err);
}

bool incr_cluster_time_now(mongoc_client_t *client, uint32_t *sec, uint32_t *inc,
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
static mongoc_cursor_t *find(struct incr_job *j, mongoc_client_t *client, const bson_t *filter, int dir,
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
    mongoc_session_opts_set_causal_consistency(so, !j->cluster_time);
    *cs = mongoc_client_start_session(client, so, &be);
    mongoc_session_opts_destroy(so);
    if (*cs == NULL) {
        mongo_fail(err, &be, "cannot start a session for the chunk read", j->ns);
        return NULL;
    }
    if (!j->cluster_time)
        mongoc_client_session_advance_operation_time(*cs, j->at_sec, j->at_inc);
    if (!mongoc_client_session_append(*cs, &opts, &be)) {
        bson_destroy(&opts);
        mongoc_client_session_destroy(*cs);
        *cs = NULL;
        mongo_fail(err, &be, "cannot start a session for the chunk read", j->ns);
        return NULL;
    }
    coll = mongoc_client_get_collection(client, j->db, j->coll);
    rp = mongoc_read_prefs_new(MONGOC_READ_PRIMARY);
    bson_init(&sort);
    BSON_APPEND_INT32(&sort, "_id", dir);
    if (!j->cluster_time) {
        BSON_APPEND_DOCUMENT(&opts, "sort", &sort);
        BSON_APPEND_INT64(&opts, "limit", limit);
        if (j->cfg->snapshot_fetch_size > 0)
            BSON_APPEND_INT64(&opts, "batchSize", j->cfg->snapshot_fetch_size);
        BCON_APPEND(&opts, "readConcern", "{", "level", BCON_UTF8("majority"), "}");
        cur = mongoc_collection_find_with_opts(coll, filter, &opts, rp);
    } else {
        bson_t cmd = BSON_INITIALIZER, rc, reply, cur_opts = BSON_INITIALIZER;
        mongoc_database_t *db = mongoc_client_get_database(client, j->db);
        BSON_APPEND_UTF8(&cmd, "find", j->coll);
        BSON_APPEND_DOCUMENT(&cmd, "filter", filter);
        BSON_APPEND_DOCUMENT(&cmd, "sort", &sort);
        BSON_APPEND_INT64(&cmd, "limit", limit);
        if (j->cfg->snapshot_fetch_size > 0) {
            BSON_APPEND_INT64(&cmd, "batchSize", j->cfg->snapshot_fetch_size);
            BSON_APPEND_INT64(&cur_opts, "batchSize", j->cfg->snapshot_fetch_size);
        }
        bson_append_document_begin(&cmd, "readConcern", -1, &rc);
        BSON_APPEND_UTF8(&rc, "level", "snapshot");
        BSON_APPEND_TIMESTAMP(&rc, "atClusterTime", j->at_sec, j->at_inc);
        bson_append_document_end(&cmd, &rc);
        bson_concat(&cur_opts, &opts); /* the sessionId, for the getMores */
        /* The command initialises reply (stack storage, always destroyed);
         * the cursor takes a heap copy it frees itself. A bson_new() reply
         * would be re-initialised in place and its allocation leaked. */
        if (mongoc_database_read_command_with_opts(db, &cmd, rp, &opts, &reply, &be))
            cur = mongoc_cursor_new_from_command_reply_with_opts(client, bson_copy(&reply),
                                                                 &cur_opts);
        else
            mongo_fail(err, &be, "snapshot read at the cluster time failed", j->ns);
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
static bool read_max_key(struct incr_job *j, mongoc_client_t *client, const bson_t *owned, bool *empty,
                         struct mcdc_error *err)
{
    bson_t filter;
    const bson_t *doc;
    bson_error_t be;
    bson_iter_t id;
    mongoc_cursor_t *cur;
    mongoc_client_session_t *cs = NULL;

    /* sort({_id: -1}) orders across brackets: the greatest key in BSON order. */
    extra_filter(j, owned, &filter);
    cur = find(j, client, &filter, -1, 1, &cs, err);
    bson_destroy(&filter);
    if (cur == NULL)
        return false;
    *empty = true;
    if (mongoc_cursor_next(cur, &doc) && bson_iter_init_find(&id, doc, "_id")) {
        bson_reinit(&j->max_key);
        bson_append_iter(&j->max_key, "_id", 3, &id);
        *empty = false;
    }
    if (mongoc_cursor_error(cur, &be)) {
        find_done(cur, cs);
        return mongo_fail(err, &be, "cannot read the maximum key", j->ns);
    }
    find_done(cur, cs);
    return true;
}

static void estimate(struct incr_job *j, mongoc_client_t *client)
{
    mongoc_collection_t *c = mongoc_client_get_collection(client, j->db, j->coll);
    bson_error_t be;
    int64_t n = mongoc_collection_estimated_document_count(c, NULL, NULL, NULL, &be);
    j->estimated = n >= 0 ? n : -1;
    mongoc_collection_destroy(c);
}

static void job_add_doc(struct incr_job *j, const bson_t *doc)
{
    if (j->ndocs == j->docs_cap) {
        j->docs_cap = j->docs_cap ? j->docs_cap * 2 : 256;
        j->docs = xrealloc(j->docs, j->docs_cap * sizeof *j->docs);
    }
    j->docs[j->ndocs++] = bson_copy(doc);
    j->bytes += doc->len;
}

static bool cancelled(const atomic_bool *cancel)
{
    return cancel != NULL && atomic_load(cancel);
}

/* The chunk's rows into j (§5.4 step 4): the brackets from the last key's up
 * to the maximum key's, the first non-empty one read. Returns false with
 * j->err on a failure or a cancel. */
static bool read_rows(struct incr_job *j, mongoc_client_t *client, const bson_t *owned,
                      const bson_t *post, const atomic_bool *cancel)
{
    int64_t limit = j->cfg->incremental_snapshot_chunk_size;
    int64_t cap = j->cfg->incremental_snapshot_window_max_bytes;
    bson_value_t last, max;
    bool has_last = key_value(&j->last_key, &last);
    enum keyrange_bracket maxb, b;
    bson_t extra, filter;
    int64_t n = 0;

    if (!key_value(&j->max_key, &max))
        return true;
    maxb = keyrange_bracket_of(&max);
    b = has_last ? keyrange_bracket_of(&last) : KEYRANGE_MINKEY;
    if (j->bracket > (int)b)
        b = (enum keyrange_bracket)j->bracket;
    extra_filter(j, owned, &extra);
    for (; b <= maxb && n == 0; b++) {
        const bson_value_t *after = has_last && keyrange_bracket_of(&last) == b ? &last : NULL;
        mongoc_client_session_t *cs = NULL;
        mongoc_cursor_t *cur;
        const bson_t *doc;
        bson_error_t be;

        if (after != NULL && keyrange_bracket_singleton(b))
            continue; /* its one key was sent */
        bson_init(&filter);
        if (!keyrange_filter(b, after, b == maxb ? &max : NULL, &extra, &filter, &j->err)) {
            bson_destroy(&filter);
            bson_destroy(&extra);
            return false;
        }
        cur = find(j, client, &filter, 1, limit, &cs, &j->err);
        bson_destroy(&filter);
        if (cur == NULL) {
            bson_destroy(&extra);
            return false;
        }
        while (n < limit && !cancelled(cancel) && mongoc_cursor_next(cur, &doc)) {
            bson_iter_t id;
            if (bson_iter_init_find(&id, doc, "_id")) {
                bson_reinit(&j->chunk_end);
                bson_append_iter(&j->chunk_end, "_id", 3, &id);
            }
            n++; /* counts orphans too: the chunk's end moves past them */
            if (post != NULL && !hashkey_owns(post, doc))
                continue;
            job_add_doc(j, doc);
            /* The byte cap: a window of huge documents ends early (one row at least). */
            if (cap > 0 && (int64_t)j->bytes >= cap)
                break;
        }
        if (mongoc_cursor_error(cur, &be)) {
            find_done(cur, cs);
            bson_destroy(&extra);
            return mongo_fail(&j->err, &be, "chunk read failed", j->ns);
        }
        find_done(cur, cs);
        if (cancelled(cancel)) {
            bson_destroy(&extra);
            return mcdc_error_set(&j->err, MCDC_ERR_MONGO, 0, "chunk read of %s abandoned", j->ns);
        }
        if (n > 0)
            j->bracket = (int)b;
    }
    bson_destroy(&extra);
    return true;
}

void incr_job_run(struct incr_job *j, mongoc_client_t *client, const atomic_bool *cancel)
{
    bool markers = !j->cluster_time, empty = false;
    const bson_t *owned = &j->owned, *post = NULL;

    j->result = INCR_READ_FAILED;
    /* A hashed shard key's ownership is tested on each document read
     * (snapshot/hashkey.h): the find reads the shard's orphans too. */
    if (j->hashed_owned) {
        post = &j->owned;
        owned = NULL;
    }
    if (j->need_estimate)
        estimate(j, client);
    if (markers && !insert_marker(j, client, "-open", "snapshot-window-open", &j->err))
        return;
    /* cluster-time windows: T of the snapshot read; marker windows: the time
     * the majority read must reach (after the open marker). */
    if (!j->has_at && !incr_cluster_time_now(client, &j->at_sec, &j->at_inc, &j->err)) {
        mcdc_error_prefix(&j->err, "incremental snapshot of %s", j->ns);
        return;
    }
    if (bson_empty(&j->max_key)) {
        if (!read_max_key(j, client, owned, &empty, &j->err))
            return;
        if (empty) {
            LOG_INFO("incremental snapshot of %s: no document matches (collection empty or "
                     "condition matches nothing)",
                     j->ns);
            if (!markers || close_empty_window(j, client, &j->err))
                j->result = INCR_READ_COLL_DONE;
            return;
        }
    }
    if (!read_rows(j, client, owned, post, cancel))
        return;
    if (j->ndocs == 0 && bson_empty(&j->chunk_end)) {
        if (!markers || close_empty_window(j, client, &j->err))
            j->result = INCR_READ_COLL_DONE;
        return;
    }
    if (markers && !close_empty_window(j, client, &j->err))
        return;
    j->result = INCR_READ_WINDOW;
}
