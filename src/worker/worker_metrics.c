/*
 * worker_metrics: a capture task's gauges that need the server or the sink
 * (produce queue, oplog headroom), and the headroom WARN. The headroom is
 * the time between the oplog's oldest entry and the stored position: once it
 * reaches zero the position is off the oplog and resuming fails with
 * ChangeStreamHistoryLost (error 286; MongoDB manual, "Change Streams" >
 * "Resume a Change Stream" and "Replica Set Oplog" > "Oplog Size").
 */
#include "worker/worker_internal.h"

#include "capture/oplog.h"
#include "capture/resume.h"
#include "common/clock.h"
#include "common/log.h"

enum metrics_op worker_metrics_op(enum mcdc_op op)
{
    switch (op) {
    case MCDC_OP_INSERT:
        return METRICS_OP_C;
    case MCDC_OP_UPDATE:
    case MCDC_OP_REPLACE:
        return METRICS_OP_U;
    case MCDC_OP_DELETE:
        return METRICS_OP_D;
    case MCDC_OP_READ:
        return METRICS_OP_R;
    default:
        return METRICS_OP_OTHER;
    }
}

/* The time (epoch s) of a position: its oplog timestamp, else its resume
 * token's cluster time; 0 when it has neither. */
static int64_t position_sec(const struct mcdc_position *pos)
{
    uint32_t sec = 0, ord = 0;

    if (pos->sec > 0)
        return pos->sec;
    if (pos->has_resume_token && resume_token_time(&pos->resume_token, &sec, &ord))
        return sec;
    return 0;
}


/* Whether local.oplog.rs has reached its capped size (collStats size at or
 * above 90 % of maxSize): only then does the oplog drop its oldest entries,
 * so only then is a small headroom a countdown (MongoDB manual, "Replica Set
 * Oplog" > "Oplog Size"). Unknown (no privilege, an older server without
 * maxSize) counts as full, so the WARN errs on the side of warning. */
static bool oplog_is_full(mongoc_client_t *client)
{
    bson_t cmd = BSON_INITIALIZER, reply;
    bson_iter_t it;
    double size = -1, max = -1;

    BSON_APPEND_UTF8(&cmd, "collStats", "oplog.rs");
    if (mongoc_client_command_simple(client, "local", &cmd, NULL, &reply, NULL)) {
        if (bson_iter_init_find(&it, &reply, "size") && BSON_ITER_HOLDS_NUMBER(&it))
            size = (double)bson_iter_as_int64(&it);
        if (bson_iter_init_find(&it, &reply, "maxSize") && BSON_ITER_HOLDS_NUMBER(&it))
            max = (double)bson_iter_as_int64(&it);
    }
    bson_destroy(&reply);
    bson_destroy(&cmd);
    return size < 0 || max <= 0 || size >= 0.9 * max;
}

void worker_metrics_service(struct worker *w)
{
    int64_t now = mcdc_clock_mono_ms(), oldest, stored, headroom;

    if (w->cfg->oplog_headroom_interval_ms <= 0 || w->client == NULL ||
        (w->last_headroom_ms != 0 &&
         now - w->last_headroom_ms < w->cfg->oplog_headroom_interval_ms))
        return;
    w->last_headroom_ms = now;
    /* Nothing stored yet: the stream's own position is what a restart uses. */
    stored = pipeline_stored_sec(w->pipe) > 0 ? pipeline_stored_sec(w->pipe)
                                           : position_sec(&w->stream_pos);
    if (stored == 0)
        return;
    {
        /* The oldest entry; unreadable (no privilege on local, an unreachable
         * server) means the headroom is unknown, not zero. */
        struct resume_failure fail;
        struct mcdc_error err = MCDC_ERROR_INIT;
        uint32_t sec = 0, ord = 0;
        if (!oplog_edge(w->client, false, &sec, &ord, &fail, &err) || sec == 0)
            return;
        oldest = sec;
    }
    metrics_set_oplog(w->m, oldest, stored);
    headroom = stored - oldest;
    /* A young oplog (not yet at its capped size) drops nothing: its oldest
     * entry is recent because the set is, and no countdown is running. */
    if (headroom < w->cfg->oplog_headroom_warn_s && !w->headroom_warned &&
        !oplog_is_full(w->client))
        return;
    if (headroom < w->cfg->oplog_headroom_warn_s) {
        if (!w->headroom_warned)
            LOG_WARN("oplog headroom is %lld s (under oplog.headroom.warn.seconds %lld): the "
                     "stored position is %lld s after the oldest entry of a full oplog; once "
                     "the oplog rolls past it, the history is lost (%s) and snapshot.mode "
                     "decides what follows. Grow the oplog (replSetResizeOplog, or "
                     "storage.oplogMinRetentionHours) and enable heartbeat.interval.ms so a "
                     "quiet stream keeps its position moving",
                     (long long)headroom, (long long)w->cfg->oplog_headroom_warn_s,
                     (long long)headroom,
                     w->cfg->capture_mode == MCDC_CAPTURE_OPLOG
                         ? "CappedPositionLost when tailing"
                         : "ChangeStreamHistoryLost, 286");
        w->headroom_warned = true;
    } else if (w->headroom_warned) {
        LOG_INFO("oplog headroom back to %lld s", (long long)headroom);
        w->headroom_warned = false;
    }
}
