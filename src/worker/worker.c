/*
 * worker: the capture task thread of one replica set: reconnects with
 * backoff, the streaming loop, delivery reports and offset commits
 * (design.md §3, §6, §7; style.md §4.7, §4.9; debezium-format.md §4.3, §6.1).
 * Discovery and the setup of each run are in worker_setup.c.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture/capture.h"
#include "capture/oversize.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "signals/signals.h"

enum phase worker_phase_of(enum pipeline_status st)
{
    switch (st) {
    case PIPELINE_OK:
        return PHASE_OK;
    case PIPELINE_STOPPED:
        return PHASE_STOPPED;
    case PIPELINE_RETRY:
        return PHASE_RETRY;
    case PIPELINE_FATAL:
    default:
        return PHASE_FATAL;
    }
}

/* The phase of st, w->err filled from err when it is a failure. */
static enum phase phase_from(struct worker *w, enum pipeline_status st,
                             const struct mcdc_error *err)
{
    if (st == PIPELINE_RETRY || st == PIPELINE_FATAL)
        w->err = *err;
    return worker_phase_of(st);
}

enum phase worker_produce(struct worker *w, struct mcdc_records *recs,
                          const struct mcdc_position *pos, const char *what)
{
    struct mcdc_error err = MCDC_ERROR_INIT;

    /* the snapshot's progress rides on the position */
    pos = worker_incremental_stamp(w, pos);
    return phase_from(w, pipeline_produce(w->pipe, recs, pos, what, &err), &err);
}

enum phase worker_emit(struct worker *w, const struct mcdc_event *ev,
                       const struct mcdc_position *pos)
{
    struct mcdc_error err = MCDC_ERROR_INIT;

    pos = worker_incremental_stamp(w, pos);
    return phase_from(w, pipeline_emit(w->pipe, ev, pos, &err), &err);
}

/*
 * After a failed delivery: drops the producer (its queued records go with
 * it), the in-flight tracker, the offset store and the encoder
 * (pipeline_drop), so that run() sets the task up again from the stored
 * offsets, as a restart would.
 */
static void restart_from_offsets(struct worker *w)
{
    /* worker_backoff has logged the failure and the attempt count. */
    LOG_INFO("restarting capture of %s from its last committed offsets; records after them are "
             "produced again",
             w->rs);
    pipeline_drop(w->pipe); /* run() calls worker_setup() again */
    position_clear(&w->stream_pos);
}

static enum phase run(struct worker *w)
{
    enum phase ph;

    while (!worker_stopping(w)) {
        /* A task that knows its set runs setup first, before it looks for a
         * primary: setup publishes the stored position to the order gate,
         * which other shards' tasks go by while this shard is unreachable. */
        if (w->need_primary && (pipeline_is_open(w->pipe) || !w->rs_known))
            ph = worker_primary_connect(w);
        else if (!w->rs_known)
            ph = worker_discover(w);
        else if (!pipeline_is_open(w->pipe)) {
            char name[16];
            snprintf(name, sizeof name, "%.15s", w->rs);
            pthread_setname_np(pthread_self(), name);
            mcdc_log_set_component(w->rs);
            if (w->m == NULL)
                w->m = metrics_task_register(w->rs);
            metrics_set_state(w->m, METRICS_STATE_STARTING);
            bool proceed;
            ph = worker_setup(w, &proceed);
            if (proceed)
                continue;
            return ph;
        } else if (w->need_snapshot) {
            if (!w->delayed_snapshot && w->cfg->snapshot_delay_ms > 0) {
                LOG_INFO("snapshot.delay.ms: waiting %lld ms before the snapshot",
                         (long long)w->cfg->snapshot_delay_ms);
                w->delayed_snapshot = true;
                if (!worker_pause_ms(w, w->cfg->snapshot_delay_ms))
                    return PHASE_STOPPED;
            }
            ph = worker_snapshot(w);
            if (ph == PHASE_OK) {
                w->need_snapshot = false;
                w->attempts = 0; /* a complete copy: failures before it no longer count */
                if (w->snapshot_only) {
                    LOG_INFO("snapshot.mode initial_only: snapshot done, not streaming");
                    return PHASE_OK;
                }
                continue;
            }
        } else {
            if (!w->delayed_stream && w->cfg->streaming_delay_ms > 0) {
                LOG_INFO("streaming.delay.ms: waiting %lld ms before streaming",
                         (long long)w->cfg->streaming_delay_ms);
                w->delayed_stream = true;
                if (!worker_pause_ms(w, w->cfg->streaming_delay_ms))
                    return PHASE_STOPPED;
            }
            ph = worker_stream(w);
        }
        switch (ph) {
        case PHASE_OK:
            continue;
        case PHASE_RETRY:
            metrics_set_state(w->m, METRICS_STATE_RECONNECTING);
            metrics_add(w->m, METRICS_RECONNECTS, 1);
            ph = worker_backoff(w);
            if (ph != PHASE_OK)
                return ph;
            if (pipeline_must_restart(w->pipe))
                restart_from_offsets(w);
            w->need_primary = w->has_primary;
            continue;
        case PHASE_HISTORY_LOST:
            ph = worker_history_lost(w);
            if (ph != PHASE_OK)
                return ph;
            continue;
        case PHASE_STOPPED:
        case PHASE_FATAL:
        default:
            return ph;
        }
    }
    return PHASE_STOPPED;
}

/* Stop reading, flush the producer, write the final offsets. */
static void finish(struct worker *w, enum phase ph)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    int64_t t0 = mcdc_clock_mono_ms();
    size_t unacked = 0;

    /* A failed task stops the daemon (topology.c; not a removed shard's
     * task, which is only reaped): as at SIGTERM (main.c), no signal reaches
     * a task any more, so none is handed over to a task past its last
     * drain; the channels keep them for the next run. */
    if (ph == PHASE_FATAL && !atomic_load(&w->drain_requested))
        signal_bus_close(w->bus);
    if (pipeline_is_open(w->pipe)) {
        if (ph == PHASE_STOPPED)
            worker_signals_at_stop(w); /* recorded by the final commit below */
        enum pipeline_status st = pipeline_finish(w->pipe, &unacked, &err);
        worker_metrics_service(w);
        if (st == PIPELINE_FATAL || st == PIPELINE_RETRY) { /* a record failed: not a clean stop */
            if (ph != PHASE_FATAL)
                w->err = err; /* else report the first failure */
            ph = PHASE_FATAL;
        }
    }
    if (ph != PHASE_FATAL && unacked > 0) {
        /* Not a clean stop: a supervisor must know that records are pending. */
        mcdc_error_set(&w->err, MCDC_ERR_KAFKA, 0,
                       "stopped with %zu records not acknowledged by Kafka; they will be sent "
                       "again on restart (offsets not advanced past them)",
                       unacked);
        w->exit_code = MCDC_EXIT_FAILURE;
        LOG_ERROR("capture of %s %s", w->rs, w->err.msg);
        return;
    }
    w->exit_code = ph == PHASE_FATAL ? MCDC_EXIT_FAILURE : MCDC_EXIT_OK;
    if (ph == PHASE_FATAL) {
        LOG_ERROR("capture of %s stopped: %s", w->rs, w->err.msg);
        worker_drain_failed(w);
    } else
        LOG_INFO("capture of %s stopped cleanly: %llu events read, %llu records produced, %llu "
                 "skipped, %llu not encodable and moved past, %llu oversized skipped, %llu "
                 "reassembled from fragments; final offsets written in %lld ms",
                 w->rs, (unsigned long long)w->events,
                 (unsigned long long)pipeline_records(w->pipe), (unsigned long long)w->skipped,
                 (unsigned long long)pipeline_failed_events(w->pipe),
                 (unsigned long long)w->oversize_skipped, (unsigned long long)w->split_events,
                 (long long)(mcdc_clock_mono_ms() - t0));
    if (w->gate_checked > 0)
        LOG_INFO("order gate: %llu events checked, added latency p50 %.1f us, p99 %.1f us",
                 (unsigned long long)w->gate_checked, worker_gate_percentile_us(w, 0.50),
                 worker_gate_percentile_us(w, 0.99));
    if (w->gate_waits > 0)
        LOG_INFO("order gate: %lld events of documents moved from another shard were held, "
                 "%lld ms in all (%.1f ms each on average)",
                 (long long)w->gate_waits, (long long)w->gate_wait_ms,
                 (double)w->gate_wait_ms / (double)w->gate_waits);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    enum phase ph;

    /* Named by its set from the first line on (an authentication failure
     * comes before the set answers): the known set, else the one the
     * connection string asks for. */
    mcdc_log_set_component(w->rs_known || w->rs_named ? w->rs : "capture");
    if (w->rs_known || w->rs_named) {
        char name[16];
        snprintf(name, sizeof name, "%.15s", w->rs);
        pthread_setname_np(pthread_self(), name);
    }
    w->client = w->pool != NULL ? mongoc_client_pool_pop(w->pool) : NULL;
    if (!w->rs_known && !w->rs_named) {
        /* Until hello answers, messages name the set the URI asks for. */
        const char *want = w->client != NULL
                               ? mongoc_uri_get_replica_set(mongoc_client_get_uri(w->client))
                               : NULL;
        snprintf(w->rs, sizeof w->rs, "%s",
                 want != NULL && want[0] != '\0' ? want : "(unknown replica set)");
    }
    ph = run(w);
    finish(w, ph);
    metrics_set_state(w->m, w->exit_code == MCDC_EXIT_OK ? METRICS_STATE_STOPPED
                                                         : METRICS_STATE_FAILED);
    if (w->has_gate && w->gate.ended != NULL && w->exit_code == MCDC_EXIT_OK)
        w->gate.ended(w->gate.ctx);
    if (w->client != NULL)
        mongoc_client_pool_push(w->pool, w->client);
    w->client = NULL;
    atomic_store(&w->finished, true);
    if (w->on_exit != NULL)
        w->on_exit(w, w->ctx);
    return NULL;
}

/* The pipeline's acked hook: a new committable position is this task's
 * order-gate watermark. */
static void on_acked(void *ctx, const struct mcdc_position *pos)
{
    worker_gate_publish(ctx, pos);
}

/* The state every task starts from (worker_start, worker_start_merged). */
static struct worker *worker_new(const struct worker_options *opt)
{
    const struct mcdc_config *cfg = opt->cfg;
    struct worker *w = xzalloc_aligned(_Alignof(struct worker), sizeof *w); /* bson_t members */

    w->selection_timeout_ms = opt->selection_timeout_ms > 0 ? opt->selection_timeout_ms
                                                            : cfg->server_selection_timeout_ms;
    w->start_at = -1;
    w->cfg = cfg;
    w->pool = opt->pool;
    w->bus = opt->bus;
    w->notifier = opt->notifier;
    w->on_exit = opt->on_exit;
    w->ctx = opt->ctx;
    w->exit_code = MCDC_EXIT_FAILURE;
    atomic_init(&w->finished, false);
    atomic_init(&w->stop, false);
    atomic_init(&w->drain_requested, false);
    atomic_init(&w->drained, false);
    position_init(&w->stream_pos);
    w->pipe = pipeline_new(&(struct pipeline_options){.cfg = cfg,
                                                      .stop = &w->stop,
                                                      .read_pos = &w->stream_pos,
                                                      .acked = on_acked,
                                                      .ctx = w});
    position_init(&w->inc_pos);
    position_init(&w->merged_start);
    bson_init(&w->pipeline);
    bson_init(&w->key_patterns);
    bson_init(&w->snap_key);
    return w;
}

/* Starts w's thread; on failure frees w and returns NULL with err set. */
static struct worker *worker_launch(struct worker *w, struct mcdc_error *err)
{
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        mcdc_error_set(err, MCDC_ERR_INTERNAL, 0, "cannot start the capture thread");
        position_clear(&w->stream_pos);
        pipeline_close(w->pipe);
        position_clear(&w->inc_pos);
        position_clear(&w->merged_start);
        bson_destroy(&w->pipeline);
        bson_destroy(&w->key_patterns);
        bson_destroy(&w->snap_key);
        free(w);
        return NULL;
    }
    return w;
}

struct worker *worker_start(const struct worker_options *opt, struct mcdc_error *err)
{
    struct worker *w = worker_new(opt);
    const char *expected_rs = opt->expected_rs;

    w->start_at = opt->start_at;
    w->per_shard = opt->per_shard;
    w->snapshot_filters = opt->snapshot_filters;
    w->filters_ctx = opt->filters_ctx;
    if (opt->gate != NULL) {
        w->gate = *opt->gate;
        w->has_gate = true;
    }
    if (opt->primary != NULL) {
        w->primary = *opt->primary;
        w->has_primary = true;
        w->need_primary = true;
        w->pool = NULL;
    }
    if (expected_rs != NULL) {
        snprintf(w->rs, sizeof w->rs, "%s", expected_rs);
        w->rs_known = true;
    } else {
        /* Until hello answers, the task goes by the set the URI names. */
        mongoc_uri_t *uri = mongoc_uri_new(opt->cfg->connection_string);
        const char *want = uri != NULL ? mongoc_uri_get_replica_set(uri) : NULL;
        if (want != NULL && want[0] != '\0') {
            snprintf(w->rs, sizeof w->rs, "%s", want);
            w->rs_named = true;
        }
        mongoc_uri_destroy(uri);
    }
    return worker_launch(w, err);
}

struct worker *worker_start_merged(const struct worker_options *opt,
                                   const struct worker_merged *merged, struct mcdc_error *err)
{
    struct worker *w = worker_new(opt);

    w->merged = true;
    w->rs_partition = merged->rs_partition;
    if (merged->start != NULL) {
        position_copy(&w->merged_start, merged->start);
        w->has_merged_start = true;
    }
    snprintf(w->rs, sizeof w->rs, "%s", merged->name);
    w->rs_known = true;
    return worker_launch(w, err);
}

void worker_request_stop(struct worker *w)
{
    /* The task thread reads it with worker_stopping(), the sink and the
     * snapshot readers through their atomic_bool pointer. */
    atomic_store(&w->stop, true);
}

bool worker_finished(struct worker *w)
{
    return atomic_load(&w->finished);
}

bool worker_failed(struct worker *w)
{
    return atomic_load(&w->finished) && w->exit_code != MCDC_EXIT_OK;
}

const char *worker_name(struct worker *w)
{
    return w->rs_known || w->rs_named ? w->rs : "capture";
}

int worker_join(struct worker *w, struct mcdc_error *err)
{
    pthread_join(w->thread, NULL);
    if (err != NULL && w->exit_code != MCDC_EXIT_OK)
        *err = w->err;
    return w->exit_code;
}

void worker_destroy(struct worker *w)
{
    if (w == NULL)
        return;
    pipeline_close(w->pipe);
    position_clear(&w->stream_pos);
    free(w->snap_progress);
    worker_incremental_teardown(w);
    position_clear(&w->merged_start);
    bson_destroy(&w->pipeline);
    bson_destroy(&w->key_patterns);
    bson_destroy(&w->snap_key);
    if (w->has_oplog_query)
        bson_destroy(&w->oplog_query);
    free(w);
}
