/*
 * worker_incremental: incremental and blocking snapshots in a capture task
 * (debezium-format.md §5.2 blocking, §5.4 the window algorithm; the signals
 * that ask for them are handled in worker_signals.c). The engine
 * (snapshot/incremental.h) reads chunks and keeps the window; this file
 * feeds it the stream, emits the rows and stamps the engine's progress into every position the
 * task produces, so the offsets advance only over acknowledged records and a
 * restart resumes at the chunk it was in.
 *
 * Window kind: markers in signal.data.collection for a replica set or a
 * mongos stream; the cluster-time method (no writes) under read.only and in
 * per-shard tasks of a sharded cluster, where a marker written through
 * mongos lands on whichever shard owns its _id and never reliably on the
 * task's own stream.
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "signals/notify.h"
#include "signals/signals.h"
#include "snapshot/hashkey.h"
#include "snapshot/incremental.h"
#include "snapshot/incremental_bg.h"
#include "snapshot/snapshot.h"

enum phase worker_incremental_setup(struct worker *w)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct signal_bus *bus = w->bus;

    incr_reader_destroy(w->inc_reader); /* a read of the engine replaced */
    w->inc_reader = NULL;
    incr_destroy(w->inc);
    w->inc = incr_new(w->cfg, w->rs, w->cfg->read_only || w->snapshot_filters != NULL);
    if (bus != NULL && w->sigq == NULL)
        w->sigq = signal_bus_subscribe(bus, w->rs);
    if (!incr_restore(w->inc, w->stream_pos.extra_json, &err)) {
        w->err = err;
        return PHASE_FATAL;
    }
    return PHASE_OK;
}

void worker_incremental_teardown(struct worker *w)
{
    incr_reader_destroy(w->inc_reader);
    w->inc_reader = NULL;
    incr_destroy(w->inc);
    w->inc = NULL;
    position_clear(&w->inc_pos);
}

const struct mcdc_position *worker_incremental_stamp(struct worker *w,
                                                     const struct mcdc_position *pos)
{
    const char *j;

    if (pos == NULL || w->inc == NULL || pos->initsync)
        return pos;
    j = incr_offset_json(w->inc);
    if (j == NULL && pos->extra_json == NULL)
        return pos;
    if (pos != &w->inc_pos)
        position_copy(&w->inc_pos, pos);
    free(w->inc_pos.extra_json);
    w->inc_pos.extra_json = j ? xstrdup(j) : NULL;
    w->inc_pos.extra_shared = j ? incr_offset_shared_len(w->inc) : 0;
    return &w->inc_pos;
}

/* The stream position's cluster time (the token's when sec is unknown). */
static bool stream_time(const struct worker *w, uint32_t *sec, uint32_t *inc)
{
    if (w->stream_pos.sec > 0) {
        *sec = (uint32_t)w->stream_pos.sec;
        *inc = (uint32_t)w->stream_pos.ord;
        return true;
    }
    return w->stream_pos.has_resume_token &&
           resume_token_time(&w->stream_pos.resume_token, sec, inc);
}

/* The documents this task owns in ns (per-shard tasks), into owned. */
static enum phase owned_filter(struct worker *w, const char *ns, bson_t *owned)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    bson_t all = BSON_INITIALIZER;
    bson_iter_t it;

    bson_init(owned);
    if (w->snapshot_filters == NULL) {
        bson_destroy(&all);
        return PHASE_OK;
    }
    if (!w->snapshot_filters(w->filters_ctx, &all, &err)) {
        bson_destroy(&all);
        w->err = err;
        mcdc_error_prefix(&w->err, "cannot read which documents %s owns", w->rs);
        return PHASE_RETRY;
    }
    if (bson_iter_init_find(&it, &all, ns) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_t f;
        bson_iter_document(&it, &len, &data);
        if (bson_init_static(&f, data, len)) {
            bson_destroy(owned);
            bson_copy_to(&f, owned);
        }
    }
    bson_destroy(&all);
    return PHASE_OK;
}

/* ---- blocking snapshot (§5.2, last paragraph) ----------------------------- */

static enum phase emit_row(struct worker *w, const bson_t *doc, const char *db, const char *coll,
                           enum mcdc_snapshot_flag flag)
{
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    uint32_t sec, inc;

    event_init(&ev);
    if (!event_from_snapshot_doc(doc, db, coll, flag, &ev, &err)) {
        w->err = err;
        mcdc_error_prefix(&w->err, "snapshot of %s.%s", db, coll);
        return PHASE_FATAL;
    }
    ev.rs = w->rs;
    if (stream_time(w, &sec, &inc)) {
        ev.has_cluster_time = true;
        ev.ts_sec = sec;
        ev.ts_inc = inc;
    }
    metrics_event_seen(w->m, METRICS_OP_R);
    metrics_event_emitted(w->m, METRICS_OP_R);
    metrics_collection_event(w->m, db, strlen(db), coll, strlen(coll), METRICS_OP_R);
    metrics_collection_snapshot_rows(w->m, db, coll, 1);
    return worker_emit(w, &ev, &w->stream_pos);
}

/* A blocking snapshot's row: op r, snapshot true (the last one `last`), at
 * the stream position where streaming paused. */
static enum phase blocking_row(struct worker *w, const struct snapshot_doc *d, bool last, void *ctx)
{
    (void)ctx;
    if (d == NULL)
        return PHASE_OK;
    return emit_row(w, d->doc, d->db, d->coll, last ? MCDC_SNAP_LAST : MCDC_SNAP_TRUE);
}

/* Streaming waits (this thread reads no stream meanwhile) while the listed
 * collections are copied by the initial-snapshot procedure itself
 * (snapshot_start: snapshot.max.threads readers, large collections split
 * into `_id` ranges), each with its additional condition and, on a shard,
 * only the documents it owns: op r, snapshot true, the very last row `last`;
 * then streaming resumes where it paused. */
enum phase worker_blocking_snapshot(struct worker *w, const struct worker_want *v, size_t n,
                                    const char *id)
{
    struct snapshot_plan *plan = xcalloc(1, sizeof *plan);
    struct snapshot *snap = NULL;
    struct worker_snapshot_rows rows = {blocking_row, NULL, NULL, 0, false};
    enum phase ph = PHASE_OK;
    int64_t t0 = mcdc_clock_mono_ms();

    LOG_INFO("blocking snapshot (signal %s) of %zu collection(s): streaming pauses", id, n);
    plan->colls = xcalloc(n, sizeof *plan->colls);
    for (size_t i = 0; i < n && ph == PHASE_OK; i++) {
        struct snapshot_coll *c = &plan->colls[plan->count++];
        mongoc_collection_t *mc = mongoc_client_get_collection(w->client, v[i].db, v[i].coll);
        bson_error_t be;
        bson_t owned, arr;
        char ns[600];

        c->db = xstrdup(v[i].db);
        c->coll = xstrdup(v[i].coll);
        c->estimated = mongoc_collection_estimated_document_count(mc, NULL, NULL, NULL, &be);
        mongoc_collection_destroy(mc);
        snprintf(ns, sizeof ns, "%s.%s", v[i].db, v[i].coll);
        ph = owned_filter(w, ns, &owned);
        c->filter = bson_new();
        if (hashkey_is_filter(&owned)) {
            /* hashed shard key: applied by the reader to each document */
            c->owned = bson_copy(&owned);
            bson_reinit(&owned);
        }
        if (v[i].cond != NULL && !bson_empty(v[i].cond) && !bson_empty(&owned)) {
            bson_append_array_begin(c->filter, "$and", 4, &arr);
            BSON_APPEND_DOCUMENT(&arr, "0", v[i].cond);
            BSON_APPEND_DOCUMENT(&arr, "1", &owned);
            bson_append_array_end(c->filter, &arr);
        } else if (v[i].cond != NULL && !bson_empty(v[i].cond)) {
            bson_concat(c->filter, v[i].cond);
        } else if (!bson_empty(&owned)) {
            bson_concat(c->filter, &owned);
        }
        bson_destroy(&owned);
    }
    if (ph != PHASE_OK) {
        snapshot_plan_free(plan);
        return ph;
    }
    snap = snapshot_start(w->pool, w->cfg, plan, w->rs, &w->stop); /* owns plan */
    ph = worker_snapshot_take(w, snap, &rows);
    snapshot_destroy(snap);
    if (ph == PHASE_OK)
        LOG_INFO("blocking snapshot (signal %s) done: %lld rows in %lld ms; streaming resumes", id,
                 (long long)rows.rows, (long long)(mcdc_clock_mono_ms() - t0));
    return ph;
}

/* ---- the window ---------------------------------------------------------- */

/* Emits the rows left in the closed window (in _id order), each carrying the
 * stream position and the progress up to that row. */
static enum phase emit_window(struct worker *w)
{
    size_t n = incr_window_size(w->inc);
    enum phase ph = PHASE_OK;
    const char *db = incr_db(w->inc), *coll = incr_coll(w->inc);
    char dbb[256], collb[256];

    snprintf(dbb, sizeof dbb, "%s", db);
    snprintf(collb, sizeof collb, "%s", coll);
    for (size_t i = 0; i < n && ph == PHASE_OK; i++) {
        const bson_t *doc = incr_window_row(w->inc, i);
        if (doc == NULL)
            continue; /* superseded by a streamed change */
        incr_window_sent(w->inc, i);
        ph = emit_row(w, doc, dbb, collb, MCDC_SNAP_INCREMENTAL);
    }
    if (ph != PHASE_OK)
        return ph;
    {
        char *last = incr_key_text(w->inc, false), *max = incr_key_text(w->inc, true);
        char ns[600];
        snprintf(ns, sizeof ns, "%s.%s", dbb, collb);
        struct notify_kv kv[] = {{"data_collections", ns},
                                 {"current_collection_in_progress", ns},
                                 {"maximum_key", max ? max : ""},
                                 {"last_processed_key", last ? last : ""}};
        worker_notify(w, "IN_PROGRESS", incr_signal_id(w->inc), kv, 4);
        free(last);
        free(max);
    }
    incr_window_done(w->inc);
    /* The chunk's end (or the next collection) is the progress now. */
    pipeline_pass(w->pipe, worker_incremental_stamp(w, &w->stream_pos));
    return PHASE_OK;
}

/* What a finished read gave (incr_job_attach's r, err): announces a finished
 * collection and signal, retries a transient failure, aborts the snapshot on
 * a refusal. ns, id, sent: the collection read, its signal, its rows sent. */
static enum phase read_done(struct worker *w, enum incr_read r, struct mcdc_error *err,
                            const char *ns, const char *id, int64_t sent)
{
    switch (r) {
    case INCR_READ_WINDOW:
    case INCR_READ_DISCARDED:
        return PHASE_OK; /* the stream closes it / read again */
    case INCR_READ_COLL_DONE: {
        char rows[32];
        snprintf(rows, sizeof rows, "%lld", (long long)sent);
        struct notify_kv kv[] = {{"data_collection", ns},
                                 {"scanned_collection", ns},
                                 {"total_rows_scanned", rows},
                                 {"status", sent > 0 ? "SUCCEEDED" : "EMPTY"}};
        worker_notify(w, "TABLE_SCAN_COMPLETED", id, kv, 4);
        /* each signal completes when its last collection is read, even
         * while another signal's (the same collection again) are queued */
        if (!incr_signal_queued(w->inc, id)) {
            LOG_INFO("incremental snapshot (signal %s) completed", id);
            worker_notify(w, "COMPLETED", id, NULL, 0);
        }
        if (incr_state(w->inc) == INCR_IDLE)
            pipeline_pass(w->pipe, worker_incremental_stamp(w, &w->stream_pos));
        return PHASE_OK;
    }
    case INCR_READ_FAILED:
    default:
        if (err->retriable) {
            /* Read again after the reconnect, from the last key sent. */
            w->err = *err;
            return PHASE_RETRY;
        }
        /* A refusal (no privilege to write the markers, snapshot reads
         * unsupported, a bad condition): the snapshot is aborted,
         * streaming goes on (Debezium skips the collection likewise). */
        LOG_ERROR("%s; the incremental snapshot (signal %s) is aborted (%zu collection(s) "
                  "not read), streaming goes on%s",
                  err->msg, id, incr_abort(w->inc),
                  w->cfg->read_only ? "" : " (read.only: true needs no write access)");
        {
            struct notify_kv kv[] = {{"connector_name", w->cfg->topic_prefix},
                                     {"data_collection", ns}};
            worker_notify(w, "ABORTED", id, kv, 2);
        }
        pipeline_pass(w->pipe, worker_incremental_stamp(w, &w->stream_pos));
        return PHASE_OK;
    }
}

/* Copies of the current collection ("db.coll") and its signal id (""
 * without one): the engine's own go when the read's outcome changes the
 * queue. */
static void current_names(const struct worker *w, char (*ns)[600], char (*id)[256])
{
    snprintf(*ns, sizeof *ns, "%s", incr_current(w->inc) ? incr_current(w->inc) : "");
    snprintf(*id, sizeof *id, "%s", incr_signal_id(w->inc) ? incr_signal_id(w->inc) : "");
}

/* Hands the next chunk of the current collection to the reader thread
 * (started at the first chunk). */
static enum phase begin_read(struct worker *w)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct incr_job *j;
    enum phase ph;
    bson_t owned;

    if (w->inc_reader == NULL) {
        w->inc_reader = incr_reader_new(w->rs, NULL, &err);
        if (w->inc_reader == NULL) {
            w->err = err;
            return PHASE_FATAL;
        }
    }
    ph = owned_filter(w, incr_current(w->inc), &owned);
    if (ph == PHASE_OK) {
        j = incr_job_begin(w->inc, &owned);
        if (j != NULL && incr_uses_cluster_time(w->inc)) {
            /* T before the next getMore: an empty batch during the read then
             * shows the stream passed T (one round trip, no read) */
            uint32_t sec, inc;
            char ns[600], id[256];
            if (!incr_cluster_time_now(w->client, &sec, &inc, &err)) {
                current_names(w, &ns, &id);
                mcdc_error_prefix(&err, "incremental snapshot of %s", ns);
                incr_job_free(j);
                incr_job_abandon(w->inc);
                bson_destroy(&owned);
                return read_done(w, INCR_READ_FAILED, &err, ns, id, incr_rows_sent(w->inc));
            }
            incr_job_at(w->inc, j, sec, inc);
        }
        if (j != NULL && !incr_reader_submit(w->inc_reader, j, w->pool)) {
            /* cannot happen: READY means no read is in the reader */
            incr_job_free(j);
            incr_job_abandon(w->inc);
            w->err = (struct mcdc_error)MCDC_ERROR_INIT;
            mcdc_error_set(&w->err, MCDC_ERR_INTERNAL, 0,
                           "incremental snapshot: the chunk reader is busy");
            ph = PHASE_FATAL;
        }
    }
    bson_destroy(&owned);
    return ph;
}

/* Attaches a finished read (waiting for it when the stream already showed
 * the window's close), emits closed windows and starts the next read;
 * announces finished collections and the end. Never waits for a read
 * otherwise: streaming goes on meanwhile. */
static enum phase advance(struct worker *w)
{
    enum phase ph = PHASE_OK;

    while (ph == PHASE_OK && !worker_stopping(w)) {
        enum incr_state st = incr_state(w->inc);
        if (st == INCR_READING) {
            struct mcdc_error err = MCDC_ERROR_INIT;
            struct incr_job *j =
                w->inc_reader != NULL ? incr_reader_take(w->inc_reader, incr_close_waits(w->inc))
                                      : NULL;
            char ns[600], id[256];
            if (j == NULL) {
                if (w->inc_reader == NULL || !incr_reader_busy(w->inc_reader))
                    incr_job_abandon(w->inc); /* no reader holds it: read again */
                break;
            }
            current_names(w, &ns, &id);
            int64_t sent = incr_rows_sent(w->inc);
            ph = read_done(w, incr_job_attach(w->inc, j, &err), &err, ns, id, sent);
            continue;
        }
        if (st == INCR_CLOSED) {
            ph = emit_window(w);
            continue;
        }
        if (st != INCR_READY || incr_paused(w->inc))
            break;
        ph = begin_read(w);
        if (ph == PHASE_OK && incr_state(w->inc) == INCR_READY)
            break; /* nothing to read after all */
    }
    return ph;
}

void worker_incremental_stream_end(struct worker *w)
{
    incr_reader_destroy(w->inc_reader);
    w->inc_reader = NULL;
    if (w->inc != NULL)
        incr_job_abandon(w->inc);
}

enum phase worker_incremental(struct worker *w, const struct mcdc_event *ev, bool idle)
{
    enum phase ph = PHASE_OK;

    if (w->inc == NULL)
        return PHASE_OK;
    if (ev != NULL && worker_event_in(ev, w->cfg->signal_data_collection)) {
        /* A signal was handled by worker_signal_event before the position
         * passed it; here only the window markers count. */
        if (ev->op == MCDC_OP_INSERT && ev->has_full_document) {
            (void)incr_on_marker(w->inc, true, &ev->full_document);
        } else if (ev->op == MCDC_OP_DELETE && ev->has_document_key) {
            (void)incr_on_marker(w->inc, false, &ev->document_key);
        }
    } else if (ev != NULL) {
        (void)incr_on_event(w->inc, ev->db, ev->db_len, ev->coll, ev->coll_len,
                            ev->has_document_key ? &ev->document_key : NULL, ev->has_cluster_time,
                            ev->ts_sec, ev->ts_inc);
    } else if (idle) {
        incr_on_idle(w->inc);
    }
    ph = worker_signals_drain(w);
    if (ph == PHASE_OK)
        ph = advance(w);
    return ph;
}
