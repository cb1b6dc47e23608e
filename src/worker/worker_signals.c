/*
 * worker_signals: the signals a capture task handles (debezium-format.md
 * §5.3; Debezium's SignalProcessor and its actions): execute-snapshot
 * (incremental: queued in the engine; blocking: run at once), stop-, pause-
 * and resume-snapshot, log. Source-channel signals are published on the
 * daemon's bus so that every task (each shard's) gets them; each task
 * drains its own queue.
 *
 * The rule that keeps a signal from being lost: the stored position never
 * passes a signal before what it asked for is in the offsets. A signal of
 * the task's own stream is handled before the stream position passes its
 * document (worker_signal_event), so the position that passes it carries
 * the queued collections; a signal from the queue (kafka, file, another
 * shard) is recorded by a position advance as soon as it is handled; at a
 * stop the bus is closed first and what the queue still holds is handled
 * before the final commit (worker_signals_at_stop), while the channels keep
 * what they could not hand over for the next run.
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "signals/notify.h"
#include "signals/signals.h"
#include "snapshot/incremental.h"

#define AGG "Incremental Snapshot"

void worker_notify(struct worker *w, const char *type, const char *id, const struct notify_kv *kv,
                   size_t n)
{
    if (w->notifier != NULL)
        notify_send(w->notifier, AGG, type, id ? id : "", kv, n);
}

/* ---- signals ----------------------------------------------------------- */

static void names_of(const struct worker_want *v, size_t n, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && len + 1 < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s.%s", i ? "," : "", v[i].db, v[i].coll);
}

/* Bytes the offsets hold at least for these n collections of signal id
 * (incr_offset_json: each entry's three key names, quotes and separators,
 * its name and the id), before any condition or escaping. */
static size_t offset_floor(const struct worker_want *v, size_t n, const char *id)
{
    size_t per = sizeof "{\"incremental_snapshot_collections_id\":\"\","
                        "\"incremental_snapshot_collections_additional_condition\":null,"
                        "\"incremental_snapshot_collections_correlation_id\":\"\"}," +
                 strlen(id) + 1;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += per + strlen(v[i].db) + strlen(v[i].coll);
    return total;
}

/* A signal whose collections the offsets cannot carry (INCR_OFFSET_MAX_BYTES):
 * refused whole, said in an ERROR and an ABORTED notification; nothing of it
 * is queued, so the offsets stay writable and a restart that reads the
 * signal again refuses it again. */
static void refuse_too_long(struct worker *w, const struct mcdc_signal *sig, size_t n, size_t bytes,
                            bool at_least, size_t queued)
{
    char msg[600], count[32];
    snprintf(msg, sizeof msg,
             "signal %s refused: its %zu collection(s)%s would make the incremental snapshot "
             "offsets %s%zu bytes, over the limit of %u bytes (the queued list rides in every "
             "offset record); send the collections in several smaller signals",
             sig->id, n, queued ? " with those already queued" : "", at_least ? "at least " : "",
             bytes, INCR_OFFSET_MAX_BYTES);
    LOG_ERROR("%s", msg);
    snprintf(count, sizeof count, "%zu", n);
    struct notify_kv kv[] = {{"connector_name", w->cfg->topic_prefix},
                             {"data_collections_count", count},
                             {"error", msg}};
    worker_notify(w, "ABORTED", sig->id, kv, 3);
}

/* Whether this task reads sig again after a restart (its own stream's
 * signal): only then may a stop interrupt its handling. */
static bool rereadable(const struct worker *w, const struct mcdc_signal *sig)
{
    return sig->channel == MCDC_SIGNAL_CHANNEL_SOURCE && !strcmp(sig->task, w->rs);
}

static enum phase on_execute(struct worker *w, const struct mcdc_signal *sig, bool at_stop)
{
    struct mcdc_snapshot_request req;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct worker_want *v = NULL;
    size_t n = 0;
    enum phase ph;
    char names[1024];

    if (!mcdc_signal_snapshot_request(sig, &req, &err)) {
        LOG_WARN("%s; ignored", err.msg); /* err names the signal's id and type */
        return PHASE_OK;
    }
    if (at_stop && req.blocking) {
        LOG_ERROR("blocking snapshot (signal %s) not run: capture stopped before this task "
                  "read it, and its channel no longer holds it; send it again",
                  sig->id);
        mcdc_snapshot_request_destroy(&req);
        return PHASE_OK;
    }
    ph = worker_resolve(w, &req, sig->id, !at_stop && rereadable(w, sig), &v, &n);
    if (ph != PHASE_OK) {
        mcdc_snapshot_request_destroy(&req);
        return ph;
    }
    names_of(v, n, names, sizeof names);
    if (n == 0) {
        LOG_WARN("signal %s ignored: data-collections name no collection", sig->id);
    } else if (req.blocking) {
        ph = worker_blocking_snapshot(w, v, n, sig->id);
        if (ph == PHASE_STOPPED && !rereadable(w, sig))
            LOG_ERROR("blocking snapshot (signal %s) interrupted by the stop: its channel no "
                      "longer holds the signal; send it again",
                      sig->id);
    } else {
        const char *before = incr_offset_json(w->inc);
        size_t had = before ? strlen(before) : 0, queued = incr_queued(w->inc);
        size_t floor_bytes = had + offset_floor(v, n, sig->id);
        if (floor_bytes > INCR_OFFSET_MAX_BYTES) {
            /* the floor, without conditions and escaping: "at least" */
            refuse_too_long(w, sig, n, floor_bytes, true, queued);
        } else {
            for (size_t i = 0; i < n; i++)
                incr_enqueue(w->inc, v[i].db, v[i].coll, v[i].cond, sig->id);
            const char *after = incr_offset_json(w->inc);
            size_t bytes = after ? strlen(after) : 0;
            if (bytes > INCR_OFFSET_MAX_BYTES) {
                incr_drop_last(w->inc, n);
                refuse_too_long(w, sig, n, bytes, false, queued);
            } else {
                LOG_INFO("incremental snapshot (signal %s) of %s%s queued (%s windows, chunks of "
                         "%lld)",
                         sig->id, names, strlen(names) + 1 >= sizeof names ? "..." : "",
                         incr_uses_cluster_time(w->inc) ? "cluster-time" : "marker",
                         (long long)w->cfg->incremental_snapshot_chunk_size);
                struct notify_kv kv[] = {{"connector_name", w->cfg->topic_prefix},
                                         {"data_collections", names}};
                worker_notify(w, "STARTED", sig->id, kv, 2);
            }
        }
    }
    free(v);
    mcdc_snapshot_request_destroy(&req);
    return ph;
}

static void on_stop(struct worker *w, const struct mcdc_signal *sig)
{
    struct mcdc_snapshot_request req;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool current = false;
    size_t removed;

    if (!mcdc_signal_snapshot_request(sig, &req, &err)) {
        LOG_WARN("%s; ignored", err.msg); /* err names the signal's id and type */
        return;
    }
    removed = incr_stop(w->inc, req.collections, req.collection_count, &current);
    LOG_INFO("stop-snapshot (signal %s): %zu queued collection(s) removed%s", sig->id, removed,
             current ? ", the current one after its open window" : "");
    struct notify_kv kv[] = {{"connector_name", w->cfg->topic_prefix}};
    worker_notify(w, "ABORTED", sig->id, kv, 1);
    mcdc_snapshot_request_destroy(&req);
}

static enum phase handle_signal(struct worker *w, const struct mcdc_signal *sig, bool at_stop)
{
    switch (sig->type) {
    case MCDC_SIGNAL_EXECUTE_SNAPSHOT:
        return on_execute(w, sig, at_stop);
    case MCDC_SIGNAL_STOP_SNAPSHOT:
        on_stop(w, sig);
        break;
    case MCDC_SIGNAL_PAUSE_SNAPSHOT:
        incr_pause(w->inc);
        LOG_INFO("pause-snapshot (signal %s): the incremental snapshot pauses after its window",
                 sig->id);
        worker_notify(w, "PAUSED", sig->id, NULL, 0);
        break;
    case MCDC_SIGNAL_RESUME_SNAPSHOT:
        incr_resume(w->inc);
        LOG_INFO("resume-snapshot (signal %s)", sig->id);
        worker_notify(w, "RESUMED", sig->id, NULL, 0);
        break;
    case MCDC_SIGNAL_LOG: {
        /* The signal document's own position when it came from this task's
         * stream (Debezium prints the offset of the event being processed),
         * else the stream's current one. */
        char *j = position_to_json(
            worker_incremental_stamp(w, w->signal_pos ? w->signal_pos : &w->stream_pos));
        mcdc_signal_log(sig, j);
        free(j);
        break;
    }
    case MCDC_SIGNAL_WINDOW_OPEN:
    case MCDC_SIGNAL_WINDOW_CLOSE:
    default:
        break;
    }
    return PHASE_OK;
}

/* Handles the signals waiting in this task's queue, in order. PHASE_OK or
 * the first failure (a stop that interrupted a signal this task reads again
 * from its stream, a blocking snapshot's failure). *handled counts them. */
static enum phase drain_queue(struct worker *w, bool at_stop, size_t *handled)
{
    struct mcdc_signal sig;
    enum phase ph = PHASE_OK;

    while (ph == PHASE_OK && w->sigq != NULL && signal_queue_pop(w->sigq, &sig)) {
        ph = handle_signal(w, &sig, at_stop);
        mcdc_signal_destroy(&sig);
        (*handled)++;
    }
    return ph;
}

/* An insert into the signal collection that is no window marker: a signal
 * of the source channel. With the bus it reaches every task (each
 * shard's), and this task handles its own copy at once; without one this
 * task handles it directly. Either way before the position passes it. */
static enum phase source_signal(struct worker *w, const struct mcdc_signal *sig)
{
    struct signal_bus *bus = w->bus;
    size_t handled = 0;

    if (bus == NULL || w->sigq == NULL)
        return handle_signal(w, sig, false);
    if (!signal_bus_publish(bus, sig))
        return PHASE_STOPPED; /* the daemon stops: the next run reads it again */
    return drain_queue(w, false, &handled);
}

bool worker_event_in(const struct mcdc_event *ev, const char *ns)
{
    size_t dl = ev->db_len, cl = ev->coll_len;
    return ns && ev->db && ev->coll && strlen(ns) == dl + 1 + cl && !memcmp(ns, ev->db, dl) &&
           ns[dl] == '.' && !memcmp(ns + dl + 1, ev->coll, cl);
}

enum phase worker_signal_event(struct worker *w, const struct mcdc_event *ev,
                               const struct mcdc_position *pos)
{
    struct mcdc_signal sig;
    struct mcdc_error err = MCDC_ERROR_INIT;
    enum phase ph = PHASE_OK;

    if (w->inc == NULL || ev == NULL || !worker_event_in(ev, w->cfg->signal_data_collection) ||
        ev->op != MCDC_OP_INSERT || !ev->has_full_document)
        return PHASE_OK;
    bson_iter_t id;
    if (bson_iter_init_find(&id, &ev->full_document, "_id") && BSON_ITER_HOLDS_UTF8(&id) &&
        !strcmp(bson_iter_utf8(&id, NULL), MCDC_CHECK_PROBE_ID)) {
        LOG_DEBUG("signal collection %s: the probe of `mongocdc check`, not a signal; skipped",
                  w->cfg->signal_data_collection);
        return PHASE_OK;
    }
    if (!mcdc_signal_parse_doc(&ev->full_document, MCDC_SIGNAL_CHANNEL_SOURCE, &sig, &err)) {
        LOG_WARN("signal collection %s: %s; ignored", w->cfg->signal_data_collection, err.msg);
        return PHASE_OK;
    }
    snprintf(sig.task, sizeof sig.task, "%s", w->rs);
    /* A window marker (this engine's, another task's or an older run's) is
     * the window's business (worker_incremental), no signal. */
    if (sig.type != MCDC_SIGNAL_WINDOW_OPEN && sig.type != MCDC_SIGNAL_WINDOW_CLOSE) {
        w->signal_pos = pos;
        ph = source_signal(w, &sig);
        w->signal_pos = NULL;
    }
    mcdc_signal_destroy(&sig);
    return ph;
}

void worker_signals_at_stop(struct worker *w)
{
    size_t handled = 0, pending;
    const struct mcdc_position *pos = &w->stream_pos;

    if (w->inc == NULL)
        return;
    pending = signal_queue_pending(w->sigq);
    if (w->need_snapshot) {
        /* The initial snapshot has not finished: the stored position is its
         * progress, which must not be replaced by a streaming position. */
        if (pending > 0)
            LOG_ERROR("%zu signal(s) waiting at the stop not handled: the initial snapshot had "
                      "not finished; send them again once capture streams",
                      pending);
        return;
    }
    /* The bus is closed before any task is asked to stop (main.c), so this
     * queue receives nothing more. */
    if (pending > 0)
        (void)drain_queue(w, true, &handled);
    if (handled > 0)
        LOG_INFO("%zu signal(s) waiting at the stop handled; what they queued is in the final "
                 "offsets",
                 handled);
    /* Always: a stop may have interrupted the event whose position would
     * have recorded signals handled just before (its own resolution was cut
     * short, so the stream position stays before it). The tracker commits
     * this only once every earlier record is acknowledged. */
    if (pos->has_resume_token || pos->sec > 0)
        pipeline_pass(w->pipe, worker_incremental_stamp(w, pos));
}

enum phase worker_signals_drain(struct worker *w)
{
    size_t handled = 0;
    enum phase ph = drain_queue(w, false, &handled);

    /* What the signals asked for is recorded at once, not only with the
     * next event: a stop may come first. */
    if (ph == PHASE_OK && handled > 0 && (w->stream_pos.has_resume_token || w->stream_pos.sec > 0))
        pipeline_pass(w->pipe, worker_incremental_stamp(w, &w->stream_pos));
    return ph;
}
