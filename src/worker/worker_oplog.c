/*
 * worker_oplog: the streaming phase of a capture task in capture.mode oplog
 * (Debezium 1.9's oplog mode, debezium-format.md §1.4, §3.5, §4.4): oplog
 * reader items -> encode -> sink, with no-ops, filtered operations and
 * partialTxn links advancing the position, as worker_stream does for change
 * events.
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <string.h>

#include "capture/oplog.h"
#include "common/log.h"

bool worker_uses_oplog(struct worker *w)
{
    bool stored = w->have_stored;
    if (w->cfg->capture_mode != MCDC_CAPTURE_OPLOG)
        return false;
    if (stored && !w->stream_pos.oplog) {
        if (!w->warned_mode) {
            w->warned_mode = true;
            LOG_WARN("capture.mode is oplog but the stored position of %s was written by change "
                     "streams: capture keeps using change streams, as Debezium 1.9 does. To "
                     "capture from the oplog, reconfigure capture.mode to a change_streams mode "
                     "(recommended) or remove the stored offsets of %s to start afresh",
                     w->rs, w->rs);
        }
        return false;
    }
    return true;
}

/* The entries the previous reader held back (read past the majority commit
 * point, never published): after a failover, say whether they were rolled
 * back (the entry is gone or has another term) at WARN, with the range. A
 * failed check is said at INFO: nothing was published from them either way. */
static void report_held(struct worker *w)
{
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct oplog_held *h = &w->oplog_held;
    bool gone = false;

    if (!h->any)
        return;
    if (!oplog_held_rolled_back(w->client, h, &gone, &fail, &err))
        LOG_INFO("%s: cannot check whether the entries after Timestamp(%u, %u), held back as "
                 "not majority-committed, were rolled back: %s",
                 w->rs, h->sec, h->ord, err.msg);
    else if (gone)
        LOG_WARN("rollback on %s: the oplog entries from Timestamp(%u, %u) to Timestamp(%u, %u), "
                 "read but held back as not majority-committed, are no longer in the oplog: a "
                 "failover rolled them back. Nothing was published from them; capture continues "
                 "with the new primary's history",
                 w->rs, h->sec, h->ord, h->last_sec, h->last_ord);
    memset(h, 0, sizeof *h);
}

enum phase worker_stream_oplog(struct worker *w)
{
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct oplog_reader *r;
    struct oplog_item item;
    enum phase ph;
    char d[128];
    bool from_stored = w->stream_pos.sec > 0;
    int64_t last_heartbeat_ms = worker_now_ms();

    ph = worker_await_server(w);
    if (ph == PHASE_OK && from_stored)
        ph = worker_check_stored_time(w);
    if (ph != PHASE_OK)
        return ph;
    r = oplog_open(w->client, w->cfg, w->has_oplog_query ? &w->oplog_query : NULL,
                   from_stored ? &w->stream_pos : NULL, &fail, &err);
    if (r == NULL)
        return worker_phase_from_failure(w, &fail, &err);
    report_held(w);
    oplog_item_init(&item);
    if (!from_stored) {
        /* Store where tailing starts before producing anything, so a restart
         * without acknowledged records resumes here, not at a later "now". */
        oplog_start_position(r, &item.pos);
        pipeline_pass(w->pipe, &item.pos);
        position_copy(&w->stream_pos, &item.pos);
        ph = worker_service(w, true);
    }
    resume_describe_position(&w->stream_pos, d, sizeof d);
    LOG_INFO("tailing local.oplog.rs of %s after %s%s", w->rs, d,
             w->stream_pos.tord > 0 ? " (inside its transaction)" : "");
    metrics_set_state(w->m, METRICS_STATE_STREAMING);
    while (!worker_stopping(w) && ph == PHASE_OK && (ph = worker_primary_check(w)) == PHASE_OK) {
        bool seen = false, idle = false;
        switch (oplog_next(r, &item)) {
        case CAPTURE_EVENT:
            w->attempts = 0;
            w->history_lost_runs = 0; /* the stream reads: its history is there */
            w->events++;
            item.ev.rs = w->rs;
            metrics_progress(w->m);
            metrics_event_seen(w->m, worker_metrics_op(item.ev.op));
            metrics_set_source_time_ms(w->m, item.ev.has_wall_time ? item.ev.wall_time_ms
                                             : item.ev.has_cluster_time
                                                 ? (int64_t)item.ev.ts_sec * 1000
                                                 : 0);
            /* A signal is handled before its position is passed (worker_stream.c). */
            ph = worker_signal_event(w, &item.ev, &item.pos);
            if (ph != PHASE_OK)
                break; /* the position stays before the signal */
            if (item.emit) {
                char db[256], coll[256];
                snprintf(db, sizeof db, "%.*s", (int)item.ev.db_len, item.ev.db);
                snprintf(coll, sizeof coll, "%.*s", (int)item.ev.coll_len, item.ev.coll);
                item.emit = encoder_captures(pipeline_encoder(w->pipe), db, coll);
            }
            if (item.emit && w->has_gate)
                ph = worker_hold_for_donor(w, &item.ev);
            if (item.emit && ph == PHASE_OK) {
                metrics_event_emitted(w->m, worker_metrics_op(item.ev.op));
                metrics_collection_event(w->m, item.ev.db, item.ev.db_len, item.ev.coll,
                                         item.ev.coll_len, worker_metrics_op(item.ev.op));
                ph = worker_emit(w, &item.ev, &item.pos);
            } else if (ph == PHASE_OK) {
                metrics_event_filtered(w->m, worker_metrics_op(item.ev.op));
                w->skipped++;
                ph = worker_pass_position(w, &item.pos);
            }
            position_copy(&w->stream_pos, &item.pos);
            seen = true;
            break;
        case CAPTURE_IDLE:
            w->attempts = 0;
            w->history_lost_runs = 0; /* the stream reads: its history is there */
            idle = true;
            metrics_progress(w->m);
            break;
        case CAPTURE_ERROR:
        default:
            oplog_failure(r, &fail, &err);
            ph = worker_phase_from_failure(w, &fail, &err);
            break;
        }
        if (ph == PHASE_OK) /* signals, incremental snapshot windows */
            ph = worker_incremental(w, seen ? &item.ev : NULL, idle);
        if (ph == PHASE_OK)
            ph = worker_maybe_heartbeat(w, &last_heartbeat_ms);
        if (ph == PHASE_OK)
            ph = worker_service(w, false);
        if (ph == PHASE_OK)
            ph = worker_drain_step(w);
    }
    oplog_item_clear(&item);
    oplog_held_entries(r, &w->oplog_held);
    oplog_destroy(r);
    return ph == PHASE_OK && worker_stopping(w) ? PHASE_STOPPED : ph;
}
