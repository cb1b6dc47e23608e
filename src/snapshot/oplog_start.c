/*
 * snapshot/oplog_start: the newest oplog entry before a copy, the snapshot
 * position of Debezium 1.x (debezium-format.md §1.5 and §5.2 step 1: 1.x and
 * 2.0-2.1 read the newest entry of local.oplog.rs; 1.9 stamps its timestamp
 * on every `r` record's source.ts_ms / ord).
 */
#include "snapshot/snapshot.h"

#include "capture/capture.h"

bool snapshot_newest_oplog_ts(mongoc_client_t *client, uint32_t *sec, uint32_t *inc, bool *found,
                              struct resume_failure *fail, struct mcdc_error *err)
{
    mongoc_collection_t *oplog = mongoc_client_get_collection(client, "local", "oplog.rs");
    bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort, proj;
    const bson_t *doc;
    bson_error_t error;
    bool ok = true;

    *found = false;
    /* find({}).sort({$natural: -1}).limit(1): the newest entry in oplog order. */
    BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
    BSON_APPEND_INT32(&sort, "$natural", -1);
    bson_append_document_end(&opts, &sort);
    BSON_APPEND_DOCUMENT_BEGIN(&opts, "projection", &proj);
    BSON_APPEND_INT32(&proj, "ts", 1);
    bson_append_document_end(&opts, &proj);
    BSON_APPEND_INT64(&opts, "limit", 1);
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(oplog, &filter, &opts, NULL);
    if (mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "ts") && BSON_ITER_HOLDS_TIMESTAMP(&it)) {
            bson_iter_timestamp(&it, sec, inc);
            *found = true;
        }
    }
    if (mongoc_cursor_error_document(cur, &error, &doc)) {
        capture_failure_from(&error, doc, fail, err);
        mcdc_error_prefix(err, "reading the newest entry of local.oplog.rs");
        ok = false;
    }
    mongoc_cursor_destroy(cur);
    mongoc_collection_destroy(oplog);
    bson_destroy(&filter);
    bson_destroy(&opts);
    return ok;
}
