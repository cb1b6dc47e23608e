/*
 * pipeline/commit: serving deliveries, the commit step, the ack-stall and
 * stalled-offsets watches and the delivery failure (design.md §7: the
 * committed position advances only over records Kafka acknowledged, in
 * order; debezium-format.md §4.2 for the stored value).
 *
 * Thread: the owning capture task's.
 */
#include "pipeline/pipeline_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capture/resume.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "metrics/metrics.h"

/* Records waiting longer than this for an acknowledgement: one WARN per episode. */
#define ACK_STALL_WARN_MS 10000

/* ---- watches ---- */

/* A WARN when produced records have waited ACK_STALL_WARN_MS without any
 * acknowledgement (a frozen or unreachable broker); pipeline_on_delivery
 * says INFO when acknowledgements resume. */
static void watch_acks(struct pipeline *p)
{
    size_t n = sink_in_flight(p->sink);
    int64_t now = mcdc_clock_mono_ms(), since;

    if (n == 0) {
        p->ack_wait_since_ms = 0;
        return;
    }
    if (p->ack_wait_since_ms == 0)
        p->ack_wait_since_ms = now;
    since = p->last_ack_ms > p->ack_wait_since_ms ? p->last_ack_ms : p->ack_wait_since_ms;
    if (!p->ack_stalled && now - since >= ACK_STALL_WARN_MS) {
        p->ack_stalled = true;
        p->ack_wait_since_ms = since;
        LOG_WARN("%zu records have waited %lld ms for acknowledgement by Kafka, none acknowledged "
                 "meanwhile: the broker is unreachable or stalled; still retrying, offsets do not "
                 "advance past them",
                 n, (long long)(now - since));
    }
}

/* pos was just stored: the stalled-offsets watch starts again. */
static void stall_stored(struct pipeline *p, const struct mcdc_position *pos)
{
    uint64_t t = offset_position_time(pos);
    int64_t now = mcdc_clock_mono_ms();

    if (t == 0 || t == p->stall_stored_t)
        return;
    if (p->stall_warned)
        LOG_INFO("the stored position moves again after %lld ms",
                 (long long)(now - p->stall_since_ms));
    p->stall_warned = false;
    p->stall_stored_t = t;
    p->stall_since_ms = now;
    metrics_set_offset_stalled(p->m, 0);
}

/* offsets.stall.threshold.ms: when the stored position has not moved for the
 * threshold while the read position is past it, one WARN per episode and the
 * gauge mongocdc_offset_stalled_seconds; stall_stored says INFO when it
 * moves again. */
static void stall_check(struct pipeline *p)
{
    int64_t now = mcdc_clock_mono_ms(), threshold = p->o.cfg->offsets_stall_threshold_ms, stalled;
    uint64_t read = p->o.read_pos != NULL ? offset_position_time(p->o.read_pos) : 0;

    if (p->stall_since_ms == 0) {
        /* The stored position the task started from. */
        p->stall_since_ms = now;
        if (p->stall_stored_t == 0)
            p->stall_stored_t = read;
        return;
    }
    stalled = now - p->stall_since_ms;
    if (threshold <= 0 || read <= p->stall_stored_t || stalled < threshold) {
        if (!p->stall_warned)
            metrics_set_offset_stalled(p->m, 0);
        return;
    }
    metrics_set_offset_stalled(p->m, stalled);
    if (!p->stall_warned) {
        char a[128];
        p->stall_warned = true;
        resume_describe_position(p->o.read_pos, a, sizeof a);
        LOG_WARN("the stored position has not moved for %lld ms (offsets.stall.threshold.ms "
                 "%lld) while the stream has read on to %s: %zu records wait for "
                 "acknowledgement; a restart now resumes from the old position and produces "
                 "everything since again",
                 (long long)stalled, (long long)threshold, a, sink_in_flight(p->sink));
    }
}

/* The queue gauges (records and bytes in flight). */
static void queue_gauges(struct pipeline *p)
{
    metrics_set_queue(p->m, (int64_t)sink_in_flight(p->sink),
                      (int64_t)sink_in_flight_bytes(p->sink));
}

/* ---- the commit step ---- */

/* The stored position as text for the failure streak, its cluster time
 * taken from the resume token when only the token is known: a snapshot's
 * start position is stored token-only, and read back with the token's time,
 * and both are the same position (malloc'd). */
static char *progress_text(const struct mcdc_position *pos)
{
    struct mcdc_position q;
    uint64_t t = offset_position_time(pos);
    char *text;

    if (pos->sec > 0 || !pos->has_resume_token || t == 0)
        return position_to_json(pos);
    position_init(&q);
    position_copy(&q, pos);
    q.sec = (int64_t)(t >> 32);
    q.ord = (int64_t)(t & 0xffffffffu);
    text = position_to_json(&q);
    position_clear(&q);
    return text;
}

/* pos was stored: counts, gauges, the watch, the DEBUG line. */
static void stored(struct pipeline *p, const struct mcdc_position *pos)
{
    uint64_t t = offset_position_time(pos);

    metrics_offset_stored(p->m);
    free(p->stored_json);
    p->stored_json = progress_text(pos);
    if (t >> 32 > 0)
        p->stored_sec = (int64_t)(t >> 32);
    stall_stored(p, pos);
    queue_gauges(p);
    if (MCDC_LOG_ENABLED(MCDC_LOG_DEBUG)) {
        char d[128];
        resume_describe_position(pos, d, sizeof d);
        LOG_DEBUG("offsets committed at %s%s", d, pos->initsync ? " (snapshot running)" : "");
    }
}

/* The commit step; *refused: the store refused the position as older than
 * the stored one (logged at ERROR by the store). */
static enum pipeline_status commit(struct pipeline *p, bool *refused, struct mcdc_error *err)
{
    struct mcdc_error serr = MCDC_ERROR_INIT;

    *refused = false;
    p->last_commit_ms = mcdc_clock_mono_ms();
    if (!p->to_commit_dirty)
        return PIPELINE_OK;
    p->to_commit_dirty = false;
    /*
     * At-least-once: the tracker hands out only a position whose records
     * and every earlier record Kafka has acknowledged, in order. A crash at
     * any instant therefore resumes at or before the first unacknowledged
     * change: some records may be produced twice, none is ever lost. A
     * record that failed is never acknowledged, so the position committed
     * here stays before it.
     *
     * Exactly-once goes here: produce the offset record into the open
     * transaction that holds the records up to to_commit, then commit the
     * transaction; only then is the offset stored (see pipeline.h).
     */
    if (!offset_store_save(p->store, p->partition, &p->to_commit, &serr)) {
        if (serr.domain == MCDC_ERR_IO && serr.code == ERANGE) {
            /* Older than the stored position: the stored one stays, capture
             * goes on and the next newer position is stored. */
            *refused = true;
            return PIPELINE_OK;
        }
        *err = serr;
        mcdc_error_prefix(err, "cannot store the offsets of %s", p->name);
        return PIPELINE_FATAL;
    }
    stored(p, &p->to_commit);
    return PIPELINE_OK;
}

enum pipeline_status pipeline_commit(struct pipeline *p, struct mcdc_error *err)
{
    bool refused;
    return commit(p, &refused, err);
}

/* ---- failures ---- */

/* One more delivery failure: in a row with the last one when the stored
 * position has not moved since. */
static void count_delivery_failure(struct pipeline *p)
{
    const char *now = p->stored_json != NULL ? p->stored_json : "";

    if (p->failed_at != NULL && strcmp(p->failed_at, now) == 0) {
        p->failures++;
        return;
    }
    free(p->failed_at);
    p->failed_at = xstrdup(now);
    p->failures = 1;
}

/* After a failed delivery: the status and err by the kind of failure. */
static enum pipeline_status delivery_failure(struct pipeline *p, struct mcdc_error *err)
{
    *err = p->delivery_err;
    if (pipeline_too_large(err))
        return PIPELINE_FATAL; /* retrying cannot help; the error says what to change
                                  (or errors.deadletterqueue.topic.name could not take it) */
    if (err->domain == MCDC_ERR_IO && err->code == EPIPE) {
        /* sink.type stdout (or a file path that is a pipe) whose reader has
         * gone: no restart can bring it back. */
        mcdc_error_prefix(err, "the reader of the JSON lines has closed the pipe; records can "
                               "no longer be delivered and the offsets stay before them");
        return PIPELINE_FATAL;
    }
    /*
     * Anything else Kafka refused (a topic unknown after an outage, a leader
     * change, a timeout) may pass on a second try. Re-producing only the
     * failed record would reorder a document's events, so the task restarts
     * from the offsets just committed, which stay before the failed record:
     * the records after them are produced again, in order (at-least-once),
     * and nothing is skipped. Such restarts are counted (the failure streak,
     * against connect.max.attempts) while the stored offsets do not move
     * between them (a full disk, a topic that refuses every write), whatever
     * the stream or a redone snapshot read meanwhile.
     */
    count_delivery_failure(p);
    mcdc_error_prefix(err, "a record could not be delivered");
    p->must_restart = true;
    return PIPELINE_RETRY;
}

/* ---- service ---- */

enum pipeline_status pipeline_service(struct pipeline *p, bool force_commit, struct mcdc_error *err)
{
    const struct mcdc_position *pos;
    struct mcdc_error ferr = MCDC_ERROR_INIT;
    enum pipeline_status st;
    bool failed, refused;

    sink_poll(p->sink, 0);
    watch_acks(p);
    stall_check(p);
    queue_gauges(p);
    failed = p->delivery_failed || sink_fatal(p->sink, &ferr);
    /*
     * The acknowledged prefix of the in-flight tracker is popped at every
     * service, not only on the flush timer: entries held until the timer
     * would grow the tracker with every record of the interval (about 1 KiB
     * each; at 200k records/s and the 60 s default, gigabytes). The newest
     * committable position waits in to_commit for the timer; the acked hook
     * (the order gate, where other shards' tasks wait on it) hears it now.
     */
    pos = inflight_committable(p->inf);
    if (pos != NULL) {
        position_copy(&p->to_commit, pos);
        p->to_commit_dirty = true;
        if (p->o.acked != NULL)
            p->o.acked(p->o.ctx, pos);
    }
    if (force_commit || failed ||
        mcdc_clock_mono_ms() - p->last_commit_ms >= p->o.cfg->offsets_flush_interval_ms) {
        st = commit(p, &refused, err);
        if (st != PIPELINE_OK || refused)
            return st;
    }
    if (p->delivery_failed)
        return delivery_failure(p, err);
    if (failed) {
        *err = ferr;
        return PIPELINE_FATAL;
    }
    return PIPELINE_OK;
}

enum pipeline_status pipeline_finish(struct pipeline *p, size_t *unacked, struct mcdc_error *err)
{
    struct mcdc_error ferr = MCDC_ERROR_INIT;
    enum pipeline_status st;

    *unacked = 0;
    if (!pipeline_is_open(p))
        return PIPELINE_OK;
    if (!sink_flush(p->sink, (int)p->o.cfg->offsets_flush_timeout_ms, &ferr)) {
        *unacked = sink_in_flight(p->sink);
        if (*unacked > 0)
            LOG_WARN("%zu records not acknowledged within offsets.flush.timeout.ms (%lld "
                     "ms): %s; the stored position stays before them",
                     *unacked, (long long)p->o.cfg->offsets_flush_timeout_ms, ferr.msg);
        else
            LOG_WARN("the final flush of the sink failed: %s", ferr.msg);
    }
    st = pipeline_service(p, true, err);
    if (*unacked > 0) /* late reports served by the final commit */
        *unacked = sink_in_flight(p->sink);
    return st;
}
