/*
 * worker_recover: what a capture task does after a failure: exponential
 * backoff before reconnecting (connect.backoff.*, debezium-format.md §6.1)
 * and history lost by snapshot.mode (§5.1; design.md §3: never skip).
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <string.h>

#include "capture/capture.h"
#include "capture/oplog.h"
#include "common/clock.h"
#include "common/log.h"

/* ---- backoff ---- */

bool worker_pause_ms(struct worker *w, int64_t ms)
{
    return pipeline_pause_ms(w->pipe, ms);
}

enum phase worker_backoff(struct worker *w)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    int64_t delay, n;
    bool sink = pipeline_must_restart(w->pipe); /* a delivery failure (pipeline_service) */

    n = sink ? pipeline_failure_streak(w->pipe) : ++w->attempts;
    if (n >= w->cfg->connect_max_attempts) {
        if (sink)
            mcdc_error_prefix(&w->err,
                              "records of %s could not be delivered %lld times in a row with the "
                              "stored offsets unmoved (connect.max.attempts)",
                              w->rs, (long long)n);
        else
            mcdc_error_prefix(&w->err,
                              "giving up on %s after %lld failed attempts in a row "
                              "(connect.max.attempts)",
                              w->rs, (long long)n);
        return PHASE_FATAL;
    }
    delay = resume_backoff_ms(w->cfg->backoff_initial_ms, w->cfg->backoff_max_ms, n);
    if (sink)
        LOG_WARN("%s (attempt %lld of %lld); restarting from the last committed offsets in %lld "
                 "ms",
                 w->err.msg, (long long)n, (long long)w->cfg->connect_max_attempts,
                 (long long)delay);
    else
        LOG_WARN("change stream on %s failed: %s (attempt %lld of %lld); reconnecting in %lld "
                 "ms and resuming from the last delivered position",
                 w->rs, w->err.msg, (long long)n, (long long)w->cfg->connect_max_attempts,
                 (long long)delay);
    /* Records already produced stay with the producer; wait for them so that the
     * resume point is a delivered one. */
    if (!pipeline_flush(w->pipe, &err) && pipeline_in_flight(w->pipe) > 0)
        LOG_WARN("%zu records still unacknowledged: %s", pipeline_in_flight(w->pipe), err.msg);
    return worker_pause_ms(w, delay) ? PHASE_OK : PHASE_STOPPED;
}

/* ---- server selection ---- */

enum phase worker_await_server(struct worker *w)
{
    const mongoc_read_prefs_t *prefs = mongoc_client_get_read_prefs(w->client);
    int64_t end = mcdc_clock_mono_ms() + w->selection_timeout_ms;
    bson_error_t error;

    memset(&error, 0, sizeof error);
    for (;;) {
        mongoc_server_description_t *sd;

        if (worker_stopping(w))
            return PHASE_STOPPED;
        /* Blocks at most one slice: the pool URI's serverSelectionTimeoutMS. */
        sd = mongoc_client_select_server(w->client, false, prefs, &error);
        if (sd != NULL) {
            mongoc_server_description_destroy(sd);
            /* The shard answered: from now on the order gate counts this
             * task's watermark (before, a task with nothing published
             * counts as passed; topology/gate.h). */
            if (w->has_gate && !w->gate_started) {
                w->gate.publish(w->gate.ctx, 0);
                w->gate_started = true;
            }
            return PHASE_OK;
        }
        pipeline_poll(w->pipe);
        if (mcdc_clock_mono_ms() >= end)
            break;
        /* A slice can end early (e.g. a refused connection): do not spin. */
        if (!worker_pause_ms(w, 100))
            return PHASE_STOPPED;
    }
    {
        struct resume_failure fail;
        struct mcdc_error err = MCDC_ERROR_INIT;
        capture_failure_from(&error, NULL, &fail, &err);
        return worker_phase_from_failure(w, &fail, &err);
    }
}

/* ---- the task ---- */


/*
 * One more re-snapshot for history lost. A snapshot that takes longer than
 * the oplog's window finds the history of its own start gone again as soon
 * as streaming begins, and would copy everything again for ever: after
 * connect.max.attempts re-snapshots in a row with nothing streamed between
 * them the task stops, saying so. Returns false with w->err set then.
 */
static bool count_resnapshot(struct worker *w)
{
    if (++w->history_lost_runs < w->cfg->connect_max_attempts)
        return true;
    mcdc_error_set(&w->err, MCDC_ERR_MONGO, 286,
                   "history lost on %s %lld times in a row, each time right after a new "
                   "snapshot: the oplog keeps less time than a snapshot takes; enlarge the "
                   "oplog (replSetResizeOplog) or narrow the snapshot",
                   w->rs, (long long)w->history_lost_runs);
    return false;
}

enum phase worker_history_lost(struct worker *w)
{
    char d[128], starts[64];
    uint32_t sec, ord;

    resume_describe_position(&w->stream_pos, d, sizeof d);
    struct resume_failure ofail;
    struct mcdc_error oerr = MCDC_ERROR_INIT;
    /* The oldest entry still in local.oplog.rs, for the history-lost message. */
    if (oplog_edge(w->client, false, &sec, &ord, &ofail, &oerr) && sec != 0) {
        snprintf(starts, sizeof starts, "Timestamp(%u, %u)", sec, ord);
    } else {
        snprintf(starts, sizeof starts, "a later entry");
    }
    if (strstr(w->err.msg, "not found") != NULL) {
        /* 280 "resume token was not found" / 40585: the token's event is not
         * in this oplog at all, e.g. the replica set was wiped or re-created. */
        if (resume_resnapshot_on_history_lost(w->cfg->snapshot_mode)) {
            if (!count_resnapshot(w))
                return PHASE_FATAL;
            LOG_WARN("the stored position of %s (%s) does not exist in this replica set's "
                     "oplog (%s): was the replica set wiped or re-created? Changes since then "
                     "cannot be replayed, so a new snapshot is taken (snapshot.mode %s)",
                     w->rs, d, w->err.msg,
                     w->cfg->snapshot_mode == MCDC_SNAPSHOT_WHEN_NEEDED ? "when_needed"
                     : w->cfg->snapshot_mode == MCDC_SNAPSHOT_ALWAYS    ? "always"
                                                                        : "initial");
            w->need_snapshot = true;
            w->have_stored = false;
            position_clear(&w->stream_pos);
            w->attempts = 0;
            return PHASE_OK;
        }
        LOG_ERROR("the stored position of %s (%s) does not exist in this replica set's oplog "
                  "(%s): the replica set was probably wiped or re-created. With snapshot.mode "
                  "never/no_data mongocdc does not start over silently: move the offsets file "
                  "away (or delete the offsets of %s) to start afresh, or set snapshot.mode "
                  "when_needed to take a new snapshot",
                  w->rs, d, w->err.msg, w->rs);
        mcdc_error_set(&w->err, MCDC_ERR_MONGO, 280,
                       "the stored position %s is not in the oplog of %s (wiped or re-created "
                       "replica set?); move the offsets file away or use snapshot.mode "
                       "when_needed",
                       d, w->rs);
        return PHASE_FATAL;
    }
    if (resume_resnapshot_on_history_lost(w->cfg->snapshot_mode)) {
        if (!count_resnapshot(w))
            return PHASE_FATAL;
        /* Each fact once: where the stream stood, where the oplog now
         * starts, the server's own words, what is done about it. */
        bool own = strncmp(w->err.msg, "the stored position", 19) == 0; /* oplog.c's */
        LOG_WARN("history lost on %s: the stored position (%s) is no longer in the oplog, "
                 "which now starts at %s%s%s%s; the changes in between cannot be replayed one "
                 "by one, so a new snapshot is taken (snapshot.mode %s)",
                 w->rs, d, starts, own ? "" : " (", own ? "" : w->err.msg, own ? "" : ")",
                 w->cfg->snapshot_mode == MCDC_SNAPSHOT_WHEN_NEEDED ? "when_needed"
                 : w->cfg->snapshot_mode == MCDC_SNAPSHOT_ALWAYS    ? "always"
                                                                    : "initial");
        w->need_snapshot = true;
        w->have_stored = false; /* the new snapshot's own start position is used */
        position_clear(&w->stream_pos);
        w->attempts = 0;
        return PHASE_OK;
    }
    LOG_ERROR("the stored position of %s (%s) is no longer in the oplog, which now starts at "
              "%s: the changes in between are lost, and with snapshot.mode never/no_data "
              "mongocdc does not skip them silently. Set snapshot.mode to when_needed (or "
              "initial) to take a new snapshot, or delete the offsets of %s to start afresh; "
              "a larger oplog or heartbeat.interval.ms keeps a position valid longer",
              w->rs, d, starts, w->rs);
    mcdc_error_set(&w->err, MCDC_ERR_MONGO, 286,
                   "%s is no longer in the oplog; set snapshot.mode when_needed to re-snapshot "
                   "or delete the offsets of %s",
                   d, w->rs);
    return PHASE_FATAL;
}

enum phase worker_check_stored_time(struct worker *w)
{
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    uint32_t sec = 0, ord = 0, ssec = 0, sord = 0;

    if (w->stored_time_checked || w->merged)
        return PHASE_OK;
    if (w->stream_pos.sec > 0) {
        ssec = (uint32_t)w->stream_pos.sec;
        sord = w->stream_pos.ord > 0 ? (uint32_t)w->stream_pos.ord : 0;
    } else if (!w->stream_pos.has_resume_token ||
               !resume_token_time(&w->stream_pos.resume_token, &ssec, &sord)) {
        w->stored_time_checked = true;
        return PHASE_OK; /* no time to compare */
    }
    if (!oplog_edge(w->client, true, &sec, &ord, &fail, &err)) {
        if (err.retriable)
            return PHASE_OK; /* checked at the next attempt */
        LOG_DEBUG("stored position not compared with the oplog: %s", err.msg);
        w->stored_time_checked = true;
        return PHASE_OK;
    }
    w->stored_time_checked = true;
    if ((uint64_t)ssec > (uint64_t)sec + WORKER_FUTURE_TOLERANCE_S) {
        mcdc_error_set(&w->err, MCDC_ERR_CONFIG, 0,
                       "the stored position of %s, Timestamp(%u, %u), is later than the newest "
                       "entry of its oplog, Timestamp(%u, %u): the offsets are not this "
                       "deployment's (another cluster, or one restored from an older backup). "
                       "Point offsets.storage at this deployment's offsets, or remove this "
                       "entry to start as with no offsets (snapshot.mode)",
                       w->rs, ssec, sord, sec, ord);
        return PHASE_FATAL;
    }
    return PHASE_OK;
}
