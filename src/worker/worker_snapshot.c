/*
 * worker_snapshot: the initial snapshot phase of a capture task
 * (debezium-format.md §5.2). Readers (snapshot module) copy documents; this
 * thread turns them into `r` records, holding one back so that the last
 * record of the whole snapshot is marked `last` and carries the
 * post-snapshot offset (Debezium's BufferingSnapshotChangeRecordReceiver).
 * Every other record carries the resume position with initsync=true, so a
 * crash before the end redoes the snapshot.
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

#include "capture/capture.h"
#include "capture/oplog.h"
#include "common/log.h"
#include "snapshot/snapshot.h"

#define TAKE_TIMEOUT_MS 100

static enum phase emit_doc(struct worker *w, const struct snapshot_doc *d,
                           enum mcdc_snapshot_flag flag, const struct mcdc_position *pos)
{
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;

    event_init(&ev);
    if (!event_from_snapshot_doc(d->doc, d->db, d->coll, flag, &ev, &err)) {
        w->err = err;
        mcdc_error_prefix(&w->err, "snapshot of %s.%s", d->db, d->coll);
        return PHASE_FATAL;
    }
    ev.rs = w->rs;
    return worker_emit(w, &ev, pos);
}

enum phase worker_snapshot(struct worker *w)
{
    const struct mcdc_config *cfg = w->cfg;
    struct mcdc_position start, resume, during;
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct snapshot_plan *plan = NULL;
    struct snapshot *snap = NULL;
    struct snapshot_doc *held = NULL;
    enum phase ph = PHASE_OK;
    bool done = false;
    char d[128];

    position_init(&start);
    position_init(&resume);
    position_init(&during);
    ph = worker_await_server(w);
    if (ph != PHASE_OK)
        goto cleanup;
    if (w->have_stored) {
        /* Streaming will resume from the stored position: check that it is
         * still in the oplog before copying (Debezium HEAD validates the
         * position at start the same way), so history lost is found now and
         * not after a wasted copy. */
        if (worker_uses_oplog(w)) {
            struct oplog_reader *probe =
                oplog_open(w->client, cfg, NULL, &w->stream_pos, &fail, &err);
            if (probe == NULL) {
                ph = worker_phase_from_failure(w, &fail, &err);
                goto cleanup;
            }
            oplog_destroy(probe);
        } else {
            struct capture *probe = capture_open(
                w->client, cfg, w->has_pipeline ? &w->pipeline : NULL, &w->stream_pos, &fail, &err);
            if (probe == NULL) {
                ph = worker_phase_from_failure(w, &fail, &err);
                goto cleanup;
            }
            capture_destroy(probe);
        }
    }
    if (worker_uses_oplog(w)) {
        /* Oplog mode (1.9): the start is the newest oplog entry read before any
         * collection is copied; tailing resumes after it. */
        uint32_t sec, ord;
        if (!oplog_edge(w->client, true, &sec, &ord, &fail, &err)) {
            ph = worker_phase_from_failure(w, &fail, &err);
            mcdc_error_prefix(&w->err, "cannot record the snapshot's start position");
            goto cleanup;
        }
        start.sec = sec;
        start.ord = ord;
        start.oplog = true;
    } else if (!snapshot_record_start(w->client, cfg, w->has_pipeline ? &w->pipeline : NULL,
                                      &start, &fail, &err)) {
        ph = worker_phase_from_failure(w, &fail, &err);
        mcdc_error_prefix(&w->err, "cannot record the snapshot's start position");
        goto cleanup;
    }
    if (!snapshot_plan(w->client, cfg, w->enc, &plan, &fail, &err)) {
        if (err.domain == MCDC_ERR_CONFIG) {
            w->err = err;
            ph = PHASE_FATAL;
        } else {
            ph = worker_phase_from_failure(w, &fail, &err);
        }
        goto cleanup;
    }
    w->attempts = 0;
    if (plan->count == 0 && (cfg->collection_include.count > 0 || cfg->database_include.count > 0))
        LOG_WARN("no collection matches collection.include.list / database.include.list: the "
                 "snapshot copies nothing and only changes to matching collections created "
                 "later are captured; check the lists");
    position_copy(&resume, w->have_stored ? &w->stream_pos : &start);
    resume.initsync = false;
    resume_describe_position(&resume, d, sizeof d);
    LOG_INFO("initial snapshot starting; streaming will resume from %s%s", d,
             w->have_stored ? " (the stored position, older than the snapshot's start)" : "");
    position_copy(&during, &resume);
    during.initsync = true;
    inflight_advance(w->inf, &during);
    ph = worker_service(w, true);
    if (ph != PHASE_OK)
        goto cleanup;
    snap = snapshot_start(w->pool, cfg, plan, w->rs, &w->stop);
    plan = NULL; /* owned by snap */

    while (ph == PHASE_OK && !done) {
        struct snapshot_doc *doc = NULL;
        if (worker_stopping(w)) {
            ph = PHASE_STOPPED;
            break;
        }
        switch (snapshot_next(snap, TAKE_TIMEOUT_MS, &doc, &fail, &err)) {
        case SNAPSHOT_DOC:
            if (held != NULL)
                ph = emit_doc(w, held, MCDC_SNAP_TRUE, &during);
            snapshot_doc_free(held);
            held = doc;
            break;
        case SNAPSHOT_WAIT:
            if (worker_stopping(w))
                ph = PHASE_STOPPED;
            break;
        case SNAPSHOT_DONE:
            /* The one record that says "snapshot complete": last, without initsync. */
            if (held != NULL)
                ph = emit_doc(w, held, MCDC_SNAP_LAST, &resume);
            else
                inflight_advance(w->inf, &resume);
            done = true;
            break;
        case SNAPSHOT_FAILED:
        default:
            ph = worker_phase_from_failure(w, &fail, &err);
            break;
        }
        if (ph == PHASE_OK)
            ph = worker_service(w, false);
    }
    if (ph == PHASE_OK) {
        position_copy(&w->stream_pos, &resume);
        w->have_stored = true;
        /* Store "snapshot complete" promptly: a restart then streams instead of
         * copying everything again. */
        ph = worker_service(w, true);
    } else if (ph != PHASE_STOPPED) {
        LOG_WARN("initial snapshot failed: %s; it is not marked complete", w->err.msg);
    }
cleanup:
    snapshot_doc_free(held);
    snapshot_destroy(snap);
    snapshot_plan_free(plan);
    position_clear(&start);
    position_clear(&resume);
    position_clear(&during);
    return ph;
}
