/*
 * worker_snapshot: the initial snapshot phase of a capture task
 * (debezium-format.md §5.2). Readers (snapshot module) copy documents; this
 * thread turns them into `r` records, holding one back so that the last
 * record of the whole snapshot is marked `last` and carries the
 * post-snapshot offset (Debezium's BufferingSnapshotChangeRecordReceiver).
 * Every other record carries the resume position with initsync=true, so a
 * crash before the end redoes the snapshot; with snapshot.resumable that
 * position also carries the copy's progress after the record
 * (snapshot/progress.h, worker_snapshot_resume.c), and a crash resumes the
 * copy after the last record committed instead.
 *
 * The resume position is the new snapshot's start, unless a position is
 * already stored (an interrupted snapshot's start, or a complete offset with
 * snapshot.mode always): then streaming resumes from that older position.
 * A deliberate improvement on Debezium, which streams from the new start:
 * documents deleted between the first attempt and the redone copy would
 * otherwise keep the first attempt's `r` record in the topic with no delete
 * after it. The position is stored (initsync) before any document is read,
 * so even a crash before the first commit keeps it.
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <string.h>

#include "capture/capture.h"
#include "capture/oplog.h"
#include "common/log.h"
#include "signals/notify.h"
#include "snapshot/hashkey.h"
#include "snapshot/snapshot.h"

#define TAKE_TIMEOUT_MS 100

/* Snapshot progress for the metrics: collections planned and finished (read
 * atomically: readers set finished_ms under the snapshot's lock), documents
 * copied and estimated. */
static void snapshot_metrics(struct worker *w, struct snapshot *snap,
                             const struct snapshot_plan *plan)
{
    int64_t done = 0, docs, left;

    if (w->m == NULL || plan == NULL)
        return;
    for (size_t i = 0; i < plan->count; i++) {
        if (atomic_load_explicit(&plan->colls[i].finished_ms, memory_order_relaxed) != 0)
            done++;
    }
    /* The estimate the gauge shows is what was copied plus what is still
     * expected, so finished collections count what they really had. */
    snapshot_docs_progress(snap, &docs, &left);
    metrics_set_snapshot(w->m, (int64_t)plan->count, done, docs, left >= 0 ? docs + left : -1);
}

/* How long the server may count the documents a shard owns in one collection
 * (maxTimeMS) before the snapshot starts; see restrict_to_owned(). */
#define OWNED_COUNT_MAX_MS 1000

/* The position stamped on every `r` record's source (1.9 dialect: ts_ms, ord
 * and stxnid of the newest oplog entry before the copy, §1.5). */
struct snap_source_ts {
    bool known;
    uint32_t sec, inc;
    char stxnid[96]; /* "" when the entry has none */
};

/*
 * event.key.mode document_key: points ev->document_key at the documentKey a
 * change stream gives the document (mongo-sim-spec.md §3.8): the shard key
 * fields in pattern order (dotted names as in the pattern, raw values also
 * for hashed fields; a missing field is left out), then _id unless the
 * pattern has it; {_id} for an unsharded collection. Patterns come from
 * w->key_patterns (read at the snapshot's start). False when the document
 * has no _id.
 */
static bool snapshot_document_key(struct worker *w, const struct snapshot_doc *d,
                                  struct mcdc_event *ev)
{
    char ns[512];
    bson_iter_t it, pat, top, val;
    bool has_id_field = false;

    bson_reinit(&w->snap_key);
    snprintf(ns, sizeof ns, "%s.%s", d->db, d->coll);
    if (bson_iter_init_find(&it, &w->key_patterns, ns) && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &pat)) {
        while (bson_iter_next(&pat)) {
            const char *f = bson_iter_key(&pat);
            if (strcmp(f, "_id") == 0)
                has_id_field = true;
            if (bson_iter_init(&top, d->doc) && bson_iter_find_descendant(&top, f, &val))
                bson_append_value(&w->snap_key, f, -1, bson_iter_value(&val));
        }
    }
    if (!has_id_field) {
        if (!bson_iter_init_find(&top, d->doc, "_id"))
            return false;
        bson_append_value(&w->snap_key, "_id", 3, bson_iter_value(&top));
    }
    bson_init_static(&ev->document_key, bson_get_data(&w->snap_key), w->snap_key.len);
    ev->has_document_key = true;
    return true;
}

/*
 * event.key.mode document_key: reads the shard key pattern of every planned
 * collection into w->key_patterns, through the order gate's shard_key (per
 * shard tasks: config.collections through the seed) or, for the merged
 * stream, config.collections through mongos itself. A failed read is
 * transient (the snapshot is retried).
 */
static enum phase load_key_patterns(struct worker *w, const struct snapshot_plan *plan)
{
    struct mcdc_error err = MCDC_ERROR_INIT;

    bson_reinit(&w->key_patterns);
    for (size_t i = 0; i < plan->count; i++) {
        const struct snapshot_coll *c = &plan->colls[i];
        char ns[512];
        bson_t pattern = BSON_INITIALIZER;
        bool ok = true;

        snprintf(ns, sizeof ns, "%s.%s", c->db, c->coll);
        if (w->has_gate && w->gate.shard_key != NULL) {
            ok = w->gate.shard_key(w->gate.ctx, c->db, c->coll, &pattern, &err);
        } else if (w->merged) {
            mongoc_collection_t *colls =
                mongoc_client_get_collection(w->client, "config", "collections");
            bson_t q = BSON_INITIALIZER;
            const bson_t *doc;
            bson_error_t error;
            bson_iter_t it;
            mongoc_cursor_t *cur;
            BSON_APPEND_UTF8(&q, "_id", ns);
            cur = mongoc_collection_find_with_opts(colls, &q, NULL, NULL);
            if (mongoc_cursor_next(cur, &doc) &&
                !(bson_iter_init_find(&it, doc, "dropped") && bson_iter_as_bool(&it)) &&
                bson_iter_init_find(&it, doc, "key") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
                const uint8_t *data;
                uint32_t len;
                bson_t k;
                bson_iter_document(&it, &len, &data);
                if (bson_init_static(&k, data, len))
                    bson_concat(&pattern, &k);
            }
            if (mongoc_cursor_error(cur, &error)) {
                mcdc_error_from_bson(&err, error.code, error.message, true);
                ok = false;
            }
            mongoc_cursor_destroy(cur);
            bson_destroy(&q);
            mongoc_collection_destroy(colls);
        }
        if (ok && !bson_empty(&pattern))
            BSON_APPEND_DOCUMENT(&w->key_patterns, ns, &pattern);
        bson_destroy(&pattern);
        if (!ok) {
            w->err = err;
            mcdc_error_prefix(&w->err, "cannot read the shard key of %s", ns);
            return PHASE_RETRY;
        }
    }
    return PHASE_OK;
}

static enum phase emit_doc(struct worker *w, const struct snapshot_doc *d,
                           enum mcdc_snapshot_flag flag, const struct mcdc_position *pos,
                           const struct snap_source_ts *src)
{
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;

    event_init(&ev);
    metrics_progress(w->m);
    metrics_event_seen(w->m, METRICS_OP_R);
    metrics_event_emitted(w->m, METRICS_OP_R);
    metrics_collection_event(w->m, d->db, strlen(d->db), d->coll, strlen(d->coll), METRICS_OP_R);
    metrics_collection_snapshot_rows(w->m, d->db, d->coll, 1);
    if (!event_from_snapshot_doc(d->doc, d->db, d->coll, flag, &ev, &err)) {
        w->err = err;
        mcdc_error_prefix(&w->err, "snapshot of %s.%s", d->db, d->coll);
        return PHASE_FATAL;
    }
    ev.rs = w->rs;
    if (w->cfg->key_mode == MCDC_KEY_DOCUMENT_KEY && !snapshot_document_key(w, d, &ev)) {
        mcdc_error_set(&w->err, MCDC_ERR_ENCODE, 0, "snapshot of %s.%s: a document without _id",
                       d->db, d->coll);
        return PHASE_FATAL;
    }
    if (src->known) {
        ev.has_cluster_time = true;
        ev.ts_sec = src->sec;
        ev.ts_inc = src->inc;
    }
    ev.oplog_stxnid = src->stxnid[0] != '\0' ? src->stxnid : NULL;
    return worker_emit(w, &ev, pos);
}

/*
 * ANDs each planned collection's filter with the filter of the documents this
 * replica set owns (worker_snapshot_filters_fn), read after the start
 * position was recorded. A failure is transient: the snapshot is retried.
 */
static enum phase restrict_to_owned(struct worker *w, struct snapshot_plan *plan)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    bson_t owned = BSON_INITIALIZER;
    size_t filtered = 0;

    if (!w->snapshot_filters(w->filters_ctx, &owned, &err)) {
        bson_destroy(&owned);
        w->err = err;
        mcdc_error_prefix(&w->err, "cannot read which documents %s owns", w->rs);
        return PHASE_RETRY;
    }
    for (size_t i = 0; i < plan->count; i++) {
        struct snapshot_coll *c = &plan->colls[i];
        char ns[512];
        bson_iter_t it;
        const uint8_t *data;
        uint32_t len;
        bson_t f, and_filter = BSON_INITIALIZER, arr;

        snprintf(ns, sizeof ns, "%s.%s", c->db, c->coll);
        if (!bson_iter_init_find(&it, &owned, ns) || !BSON_ITER_HOLDS_DOCUMENT(&it))
            continue;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&f, data, len))
            continue;
        if (hashkey_is_filter(&f)) {
            /* hashed shard key: applied by the reader to each document */
            bson_destroy(&and_filter);
            bson_destroy(c->owned);
            c->owned = bson_copy(&f);
            filtered++;
            continue;
        }
        if (bson_empty(c->filter)) {
            bson_destroy(&and_filter);
            bson_copy_to(&f, &and_filter);
        } else {
            bson_append_array_begin(&and_filter, "$and", -1, &arr);
            bson_append_document(&arr, "0", 1, c->filter);
            bson_append_document(&arr, "1", 1, &f);
            bson_append_array_end(&and_filter, &arr);
        }
        bson_destroy(c->filter);
        c->filter = bson_copy(&and_filter);
        bson_destroy(&and_filter);
        filtered++;
        /* estimatedDocumentCount counted the shard's orphans and unowned
         * copies too: the snapshot_documents_remaining gauge would end above
         * 0. An exact count of the owned chunks is an index range scan on the
         * shard key, cheap on most collections, so it is tried with a bound
         * (OWNED_COUNT_MAX_MS); past the bound the estimate stays and each
         * collection's figure is corrected when it finishes
         * (snapshot_docs_progress), so the gauge still ends at 0. */
        if (!snapshot_coll_count(w->client, c, OWNED_COUNT_MAX_MS))
            LOG_DEBUG("snapshot: %s not counted within %d ms; its estimate includes orphans",
                      ns, OWNED_COUNT_MAX_MS);
    }
    if (filtered > 0)
        LOG_INFO("snapshot: %zu sharded collections read only in the chunks %s owns (orphans "
                 "skipped)",
                 filtered, w->rs);
    bson_destroy(&owned);
    return PHASE_OK;
}

/* 1.9 dialect: Debezium 1.9 takes its snapshot position from the newest
 * oplog entry and writes it into every snapshot record (§1.5). Without read
 * access to `local` the recorded change-stream start serves when it has a
 * timestamp; else the records keep ts_ms 0 / ord -1 and a warning says why.
 *
 * stxnid: MongoDbSnapshotChangeEventSource.determineSnapshotOffsets@v1.9.8
 * builds the MongoDbOffsetContext from that entry, whose constructor calls
 * SourceInfo.opLogEvent(rs, entry, entry, 0): the Position gets the entry's
 * ts, h and extractSessionTxnId(entry) ("<lsid uuid>:<txnNumber>" when h is
 * absent or 0 and the entry has txnNumber: a retryable write such as
 * pymongo's default insert_many, or a transaction's applyOps). Nothing
 * replaces that Position during the copy: getChangeRecordEmitter's
 * ReplicaSetOffsetContext.readEvent -> SourceInfo.collectionEvent reuses the
 * stored Position for each document, so MongoDbSourceInfoStructMaker.struct
 * gives every snapshot record, the first and the `last` one alike, the same
 * stxnid (lsid/txnNumber stay null: no change-stream session), and
 * SourceInfo.lastOffset adds it to every snapshot record's offset
 * (addSessionTxnIdToOffset, with and without initsync). Whatever the
 * capture mode: 1.9 reads the oplog for the snapshot position in both. */
static void snapshot_source_ts(struct worker *w, const struct mcdc_position *start,
                               struct snap_source_ts *src)
{
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;

    src->known = false;
    src->stxnid[0] = '\0';
    if (w->cfg->dialect != MCDC_DIALECT_1_9)
        return;
    /* The newest entry, find sorted {$natural: -1}: Debezium 1.x's snapshot
     * position (debezium-format.md §1.5, §5.2 step 1). */
    if (oplog_newest(w->client, &src->sec, &src->inc, src->stxnid, sizeof src->stxnid, &fail,
                     &err) &&
        src->sec != 0) {
        src->known = true;
        return;
    }
    if (start->sec >= 0) {
        src->known = true;
        src->sec = (uint32_t)start->sec;
        src->inc = (uint32_t)start->ord;
    }
    LOG_WARN("%s; snapshot records carry %s in source.ts_ms/ord instead of the newest oplog entry",
             err.domain != MCDC_ERR_NONE ? err.msg : "the oplog is empty",
             src->known ? "the change stream's start time" : "0/-1");
}

/* The loop of the initial snapshot below and of a blocking snapshot
 * (worker_incremental.c); see worker_internal.h. */
enum phase worker_snapshot_take(struct worker *w, struct snapshot *snap,
                                struct worker_snapshot_rows *r)
{
    struct snapshot_doc *held = NULL;
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    enum phase ph = PHASE_OK;

    while (ph == PHASE_OK && !r->done) {
        struct snapshot_doc *doc = NULL;
        if (worker_stopping(w)) {
            ph = PHASE_STOPPED;
            break;
        }
        switch (snapshot_next(snap, TAKE_TIMEOUT_MS, &doc, &fail, &err)) {
        case SNAPSHOT_DOC:
            if (held != NULL) {
                ph = r->emit(w, held, false, r->ctx);
                r->rows++;
            }
            snapshot_doc_free(held);
            held = doc;
            break;
        case SNAPSHOT_WAIT:
            if (worker_stopping(w))
                ph = PHASE_STOPPED;
            break;
        case SNAPSHOT_DONE:
            /* The one record that says "snapshot complete". */
            ph = r->emit(w, held, true, r->ctx);
            if (held != NULL)
                r->rows++;
            r->done = true;
            break;
        case SNAPSHOT_FAILED:
        default:
            ph = worker_phase_from_failure(w, &fail, &err);
            break;
        }
        if (ph == PHASE_OK)
            ph = worker_service(w, false);
        if (r->progress != NULL)
            r->progress(w, snap, r->ctx);
    }
    snapshot_doc_free(held);
    return ph;
}

/* The initial snapshot's rows: every record carries the resume position with
 * initsync (during), the last one the resume position without it. */
struct initial_rows {
    struct mcdc_position *during; /* its extra members are each record's progress when resumable */
    const struct mcdc_position *resume;
    struct snapshot *snap;
    const struct snap_source_ts *src;
    const struct snapshot_plan *plan; /* borrowed from the snapshot, for the metrics */
};

static enum phase initial_row(struct worker *w, const struct snapshot_doc *d, bool last, void *ctx)
{
    const struct initial_rows *ir = ctx;
    if (d == NULL) {
        pipeline_pass(w->pipe, ir->resume);
        return PHASE_OK;
    }
    if (last)
        return emit_doc(w, d, MCDC_SNAP_LAST, ir->resume, ir->src);
    size_t shared = 0;
    const char *progress = snapshot_progress_json(ir->snap, d, &shared);
    if (progress == NULL)
        return emit_doc(w, d, MCDC_SNAP_TRUE, ir->during, ir->src);
    /* the progress after d, borrowed for the call (the pipeline copies it) */
    char *keep = ir->during->extra_json;
    ir->during->extra_json = (char *)progress;
    ir->during->extra_shared = shared;
    enum phase ph = emit_doc(w, d, MCDC_SNAP_TRUE, ir->during, ir->src);
    ir->during->extra_json = keep;
    ir->during->extra_shared = 0;
    return ph;
}

static void initial_progress(struct worker *w, struct snapshot *snap, void *ctx)
{
    const struct initial_rows *ir = ctx;
    snapshot_metrics(w, snap, ir->plan);
}

/* worker_snapshot(), before the copy, when streaming will resume from the
 * stored position (w->have_stored): PHASE_OK when it is still in the oplog,
 * else the phase of the failed open (fail and err filled). */
static enum phase probe_stored(struct worker *w, struct resume_failure *fail,
                               struct mcdc_error *err)
{
    const struct mcdc_config *cfg = w->cfg;

    if (!w->have_stored)
        return PHASE_OK;
    /* Streaming will resume from the stored position: check that it is
     * still in the oplog before copying (Debezium HEAD validates the
     * position at start the same way), so history lost is found now and
     * not after a wasted copy. */
    if (worker_uses_oplog(w)) {
        struct oplog_reader *probe = oplog_open(w->client, cfg, NULL, &w->stream_pos, fail, err);
        if (probe == NULL)
            return worker_phase_from_failure(w, fail, err);
        oplog_destroy(probe);
    } else {
        struct capture *probe = capture_open(w->client, cfg, w->has_pipeline ? &w->pipeline : NULL,
                                             &w->stream_pos, fail, err);
        if (probe == NULL)
            return worker_phase_from_failure(w, fail, err);
        capture_destroy(probe);
    }
    return PHASE_OK;
}

/* worker_snapshot(), before the copy: the snapshot's start position into
 * *start, where streaming resumes after it (oplog mode: the newest oplog
 * entry, with its stxnid). PHASE_OK, or the phase of the failure (fail and
 * err filled, w->err prefixed). */
static enum phase record_start(struct worker *w, struct mcdc_position *start,
                               struct resume_failure *fail, struct mcdc_error *err)
{
    const struct mcdc_config *cfg = w->cfg;
    enum phase ph;

    if (worker_uses_oplog(w)) {
        /* Oplog mode (1.9): the start is the newest oplog entry read before any
         * collection is copied; tailing resumes after it. */
        uint32_t sec, ord;
        /* With the entry's stxnid: 1.9 writes it into the snapshot records'
         * offsets (snapshot_source_ts). */
        if (!oplog_newest(w->client, &sec, &ord, start->stxnid, sizeof start->stxnid, fail, err)) {
            ph = worker_phase_from_failure(w, fail, err);
            mcdc_error_prefix(&w->err, "cannot record the snapshot's start position");
            return ph;
        }
        start->sec = sec;
        start->ord = ord;
        start->oplog = true;
    } else if (!snapshot_record_start(w->client, cfg, w->has_pipeline ? &w->pipeline : NULL, start,
                                      fail, err)) {
        ph = worker_phase_from_failure(w, fail, err);
        mcdc_error_prefix(&w->err, "cannot record the snapshot's start position");
        return ph;
    }
    return PHASE_OK;
}

/* worker_snapshot(), before the copy: the collections to copy into *plan
 * (owned by the caller, also on failure), restricted to the chunks a shard
 * owns and with the shard key patterns loaded when they apply. PHASE_OK, or
 * the phase of the failure (w->err filled). */
static enum phase plan_copy(struct worker *w, struct snapshot_plan **plan,
                            struct resume_failure *fail, struct mcdc_error *err)
{
    const struct mcdc_config *cfg = w->cfg;
    enum phase ph;

    if (!snapshot_plan(w->client, cfg, pipeline_encoder(w->pipe), plan, fail, err)) {
        if (err->domain == MCDC_ERR_CONFIG) {
            w->err = *err;
            return PHASE_FATAL;
        }
        return worker_phase_from_failure(w, fail, err);
    }
    if (w->snapshot_filters != NULL) {
        ph = restrict_to_owned(w, *plan);
        if (ph != PHASE_OK)
            return ph;
    }
    if (cfg->key_mode == MCDC_KEY_DOCUMENT_KEY) {
        ph = load_key_patterns(w, *plan);
        if (ph != PHASE_OK)
            return ph;
    }
    if ((*plan)->count == 0 &&
        (cfg->collection_include.count > 0 || cfg->database_include.count > 0))
        LOG_WARN("no collection matches collection.include.list / database.include.list: the "
                 "snapshot copies nothing and only changes to matching collections created "
                 "later are captured; check the lists");
    return PHASE_OK;
}

/* worker_snapshot(), after the copy ended with phase ph: a complete copy
 * moves the stream position to resume, stored at once, and is notified; a
 * failed one is logged. Returns the phase the snapshot ends with. */
static enum phase copy_ended(struct worker *w, enum phase ph, const struct mcdc_position *resume)
{
    if (ph == PHASE_OK) {
        position_copy(&w->stream_pos, resume);
        w->have_stored = true;
        /* Store "snapshot complete" promptly: a restart then streams instead of
         * copying everything again. */
        ph = worker_service(w, true);
        notify_initial_snapshot(w->notifier, "COMPLETED", w->cfg->topic_prefix);
    } else if (ph != PHASE_STOPPED) {
        LOG_WARN("initial snapshot failed: %s; it is not marked complete", w->err.msg);
    }
    return ph;
}

enum phase worker_snapshot(struct worker *w)
{
    const struct mcdc_config *cfg = w->cfg;
    struct mcdc_position start, resume, during;
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct snapshot_plan *plan = NULL;
    struct snapshot *snap = NULL;
    struct snap_source_ts src = {0};
    enum phase ph = PHASE_OK;
    bool done = false, started = false; /* started: the STARTED notification went out */
    char d[128];

    position_init(&start);
    position_init(&resume);
    position_init(&during);
    ph = worker_await_server(w);
    if (ph != PHASE_OK)
        goto cleanup;
    ph = probe_stored(w, &fail, &err);
    if (ph != PHASE_OK)
        goto cleanup;
    ph = record_start(w, &start, &fail, &err);
    if (ph != PHASE_OK)
        goto cleanup;
    snapshot_source_ts(w, &start, &src);
    ph = plan_copy(w, &plan, &fail, &err);
    if (ph != PHASE_OK)
        goto cleanup;
    /* The attempt count is not reset here: a failure during the copy redoes
     * the whole snapshot, so failed copies count against connect.max.attempts
     * until one completes (run() resets the count then); a reset at this
     * point let a permanent read failure redo the snapshot for ever at
     * "attempt 1". */
    position_copy(&resume, w->have_stored ? &w->stream_pos : &start);
    resume.initsync = false;
    resume_describe_position(&resume, d, sizeof d);
    LOG_INFO("initial snapshot starting; streaming will resume from %s%s", d,
             w->have_stored ? " (the stored position, older than the snapshot's start)" : "");
    notify_initial_snapshot(w->notifier, "STARTED", cfg->topic_prefix);
    started = true;
    position_copy(&during, &resume);
    during.initsync = true;
    worker_snapshot_resumable(w, plan, &during);
    pipeline_pass(w->pipe, &during);
    ph = worker_service(w, true);
    if (ph != PHASE_OK)
        goto cleanup;
    if (start.sec > 0 && start.ord >= 0) {
        /* The copy must hold every write up to the start position, where
         * streaming resumes: in oplog mode that is the newest entry, which may
         * be past the commit point (the reads then wait for it). */
        plan->has_after = true;
        plan->after_sec = (uint32_t)start.sec;
        plan->after_inc = (uint32_t)start.ord;
    }
    snap = snapshot_start(w->pool, cfg, plan, w->rs, &w->stop);
    const struct snapshot_plan *progress = plan; /* borrowed: valid until snapshot_destroy */
    plan = NULL;                                 /* owned by snap */
    metrics_set_state(w->m, METRICS_STATE_SNAPSHOTTING);

    struct initial_rows ir = {&during, &resume, snap, &src, progress};
    struct worker_snapshot_rows rows = {initial_row, initial_progress, &ir, 0, false};
    ph = worker_snapshot_take(w, snap, &rows);
    done = rows.done;
    ph = copy_ended(w, ph, &resume);
cleanup:
    if (started && !done)
        notify_initial_snapshot(w->notifier, "ABORTED", cfg->topic_prefix);
    snapshot_destroy(snap);
    snapshot_plan_free(plan);
    position_clear(&start);
    position_clear(&resume);
    position_clear(&during);
    return ph;
}
