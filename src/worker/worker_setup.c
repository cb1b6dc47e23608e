/*
 * worker_setup: discovery and the setup of one run of the capture task, each
 * time run() (re)connects (design.md §3; debezium-format.md §4.4, §6.1): the
 * replica set's name from `hello`; then the delivery pipeline opened, the
 * change stream's stages and the oplog query built, the stored position
 * loaded and the resume plan decided (snapshot or stream, a merged start, a
 * shard's join time), the incremental snapshot restored.
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <string.h>

#include "capture/capture.h"
#include "capture/hello.h"
#include "capture/oversize.h"
#include "common/log.h"

enum phase worker_discover(struct worker *w)
{
    struct mcdc_hello h;
    bson_error_t error;
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    enum phase ph = worker_await_server(w);

    if (ph != PHASE_OK)
        return ph;
    if (!mcdc_hello_run(w->client, 0, &h, &error)) {
        capture_failure_from(&error, &h.reply, &fail, &err);
        ph = worker_phase_from_failure(w, &fail, &err);
    } else if (h.set_name != NULL) { /* a replica set (a config server's too) */
        snprintf(w->rs, sizeof w->rs, "%s", h.set_name);
        w->rs_known = true;
    } else if (h.kind == MCDC_SERVER_MONGOS) {
        mcdc_error_set(&w->err, MCDC_ERR_CONFIG, 0,
                       "mongodb.connection.string points at a mongos (sharded cluster); this "
                       "build captures replica sets only: connect to each shard's replica set");
        ph = PHASE_FATAL;
    } else {
        mcdc_error_set(&w->err, MCDC_ERR_CONFIG, 0,
                       "mongodb.connection.string points at a standalone server, which has no "
                       "oplog and so no change streams; run it as a replica set (--replSet, "
                       "then rs.initiate(); one member is enough)");
        ph = PHASE_FATAL;
    }
    mcdc_hello_destroy(&h);
    return ph;
}

/*
 * The stages after $changeStream: under cursor.oversize.handling.mode skip
 * the size stage first (capture/oversize.h), the encoder's $match on
 * namespaces and operation types (debezium-format.md §7.2, the signal
 * collection included), then cursor.pipeline (Debezium's default order,
 * internal stages first), under split $changeStreamSplitLargeEvent last
 * (Debezium's ChangeStreamPipelineFactory: size, internal, user, split).
 */
static bool build_pipeline(struct worker *w, struct mcdc_error *err)
{
    bson_t stage, user;
    bson_error_t error;
    uint32_t n = 0;
    char idx[16];
    const char *key;

    bson_reinit(&w->pipeline);
    if (w->cfg->oversize_mode == MCDC_OVERSIZE_SKIP) {
        bson_init(&stage);
        oversize_skip_stage(&stage, w->cfg->oversize_skip_threshold);
        bson_uint32_to_string(n++, &key, idx, sizeof idx);
        BSON_APPEND_DOCUMENT(&w->pipeline, key, &stage);
        bson_destroy(&stage);
    }
    if (!encoder_build_stream_match(pipeline_encoder(w->pipe), &stage, err))
        return false;
    bson_uint32_to_string(n++, &key, idx, sizeof idx);
    BSON_APPEND_DOCUMENT(&w->pipeline, key, &stage);
    bson_destroy(&stage);
    if (w->cfg->cursor_pipeline != NULL && w->cfg->cursor_pipeline[0] != '\0') {
        /* A JSON array parses as a document with keys "0", "1", ... */
        bson_iter_t it;
        if (!bson_init_from_json(&user, w->cfg->cursor_pipeline, -1, &error))
            return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "cursor.pipeline: %s", error.message);
        if (bson_iter_init(&it, &user)) {
            while (bson_iter_next(&it)) {
                bson_uint32_to_string(n++, &key, idx, sizeof idx);
                bson_append_iter(&w->pipeline, key, -1, &it);
            }
        }
        bson_destroy(&user);
    }
    if (w->cfg->oversize_mode == MCDC_OVERSIZE_SPLIT) {
        bson_init(&stage);
        oversize_split_stage(&stage);
        bson_uint32_to_string(n++, &key, idx, sizeof idx);
        BSON_APPEND_DOCUMENT(&w->pipeline, key, &stage);
        bson_destroy(&stage);
    }
    w->has_pipeline = true;
    return true;
}

/* worker_setup(), no stored offsets and a merged start (a switch from
 * per-shard offsets, topology): w->stream_pos set to it and stored. False
 * with err when the store fails. */
static bool start_merged(struct worker *w, struct mcdc_error *err)
{
    char d[128];

    /* A switch from per-shard offsets (topology): stream from the oldest
     * shard's position, stored at once so that a restart resumes here. */
    position_copy(&w->stream_pos, &w->merged_start);
    w->need_snapshot = false;
    w->snapshot_only = false;
    w->have_stored = true;
    /* Deliberately older than a stale merged entry it replaces. */
    if (!offset_store_save_flags(pipeline_store(w->pipe), worker_partition(w), &w->stream_pos,
                                 OFFSET_SAVE_ALLOW_BACKWARDS, err)) {
        mcdc_error_prefix(err, "cannot store the start position of %s", w->rs);
        return false;
    }
    resume_describe_position(&w->stream_pos, d, sizeof d);
    LOG_INFO("merged stream starts from the oldest shard position: %s", d);
    return true;
}

/* worker_setup(), a shard's task with a join time (w->start_at >= 0): a
 * stored position (found) older than the join is dropped, and without one
 * the task streams from the join, stored at once. False with err when the
 * store fails. */
static bool start_joined(struct worker *w, bool found, struct mcdc_error *err)
{
    char d[128];

    if (found && w->start_at >= 0 && worker_position_time(&w->stream_pos) < (uint64_t)w->start_at) {
        /* A shard re-added under a name whose offsets are stored: what was
         * written to its replica set while it was not a shard is no change
         * of the cluster; read from its new topologyTime. */
        resume_describe_position(&w->stream_pos, d, sizeof d);
        LOG_INFO("the stored position %s is older than the moment the shard (re)joined the "
                 "cluster: streaming from then",
                 d);
        found = false;
    }
    if (!found && w->start_at >= 0) {
        /* A shard that joined while the daemon ran: read from the moment it
         * joined, no snapshot (see worker_start()). The position is stored
         * at once so that a restart resumes here, not at "now" or with a
         * snapshot of migrated documents. */
        position_clear(&w->stream_pos);
        w->stream_pos.sec = (int64_t)((uint64_t)w->start_at >> 32);
        w->stream_pos.ord = (int64_t)((uint64_t)w->start_at & 0xffffffffu);
        w->need_snapshot = false;
        w->snapshot_only = false;
        w->have_stored = true;
        if (!offset_store_save(pipeline_store(w->pipe), worker_partition(w), &w->stream_pos, err)) {
            mcdc_error_prefix(err, "cannot store the start position of %s", w->rs);
            return false;
        }
        LOG_INFO("joined the cluster at Timestamp(%lld, %lld): streaming from then, no snapshot",
                 (long long)w->stream_pos.sec, (long long)w->stream_pos.ord);
    }
    return true;
}

enum phase worker_setup(struct worker *w, bool *proceed)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool found = false, warn = false;
    enum resume_plan plan;

    *proceed = false;
    if (!pipeline_open(w->pipe, w->rs, worker_partition(w), w->m, &err))
        goto fail;
    if (!build_pipeline(w, &err))
        goto fail;
    if (w->cfg->capture_mode == MCDC_CAPTURE_OPLOG) {
        if (w->has_oplog_query)
            bson_destroy(&w->oplog_query);
        w->has_oplog_query =
            encoder_build_oplog_query(pipeline_encoder(w->pipe), &w->oplog_query, &err);
        if (!w->has_oplog_query)
            goto fail;
    }
    if (!worker_load_stored(w, &found, &err))
        goto fail;
    plan = resume_plan_start(w->cfg->snapshot_mode, found, &w->stream_pos, &warn);
    if (warn)
        LOG_WARN("the initial snapshot was interrupted and snapshot.mode does not redo it: "
                 "streaming from the snapshot's start; documents not yet copied are not emitted");
    worker_snapshot_progress_load(w);
    w->stream_pos.initsync = false;
    w->have_stored = found && (w->stream_pos.has_resume_token || w->stream_pos.sec > 0);
    w->need_snapshot =
        plan == RESUME_PLAN_SNAPSHOT_THEN_STREAM || plan == RESUME_PLAN_SNAPSHOT_ONLY;
    w->snapshot_only = plan == RESUME_PLAN_SNAPSHOT_ONLY;
    if (plan == RESUME_PLAN_NOTHING) {
        LOG_INFO("snapshot.mode initial_only and the snapshot is complete: nothing to do");
        return PHASE_OK;
    }
    if (!found && !w->need_snapshot)
        position_clear(&w->stream_pos);
    if (!found && w->has_merged_start && !start_merged(w, &err))
        goto fail;
    if (!start_joined(w, found, &err))
        goto fail;
    /* The stored position is acknowledged: other shards' tasks may go by it
     * (the order gate) before this one has committed anything in this run. */
    if (w->have_stored)
        worker_gate_publish(w, &w->stream_pos);
    if (w->has_gate && w->gate.loaded != NULL)
        w->gate.loaded(w->gate.ctx);
    /* An incremental snapshot in the stored offsets resumes at its chunk. */
    if (worker_incremental_setup(w) != PHASE_OK)
        return PHASE_FATAL;
    *proceed = true;
    return PHASE_OK;
fail:
    w->err = err;
    return PHASE_FATAL;
}
