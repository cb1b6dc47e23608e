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
#include "kafka/kafka_conf.h"
#include "metrics/metrics.h"

#include <librdkafka/rdkafka.h>

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
    if (p->eos)
        return pipeline_txn_commit_now(p, true, err);
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
enum pipeline_status pipeline_delivery_failure(struct pipeline *p, struct mcdc_error *err)
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

/* ---- exactly-once (pipeline_txn.c) ---- */

static bool fenced(const struct mcdc_error *e)
{
    return e->domain == MCDC_ERR_KAFKA && (e->code == RD_KAFKA_RESP_ERR__FENCED ||
                                           e->code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
                                           e->code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH);
}

/* A transaction error that ends the task: fenced (another instance took the
 * transactional id over) or fatal. One exception: a producer whose
 * transaction stayed open longer than its transaction.timeout.ms (the
 * process or machine was paused) finds its epoch bumped by the coordinator,
 * which aborted the transaction; librdkafka reports that as fenced too. The
 * task then restarts from the committed offsets with a new producer instead
 * of stopping: if another instance did start meanwhile, the new producer
 * fences it in turn, and either way one instance goes on and every
 * transaction stays all-or-nothing. */
enum pipeline_status pipeline_txn_failed(struct pipeline *p, enum sink_txn_status st,
                                         const struct mcdc_error *e, struct mcdc_error *err)
{
    bool was_open = p->txn_open;
    int64_t age = mcdc_clock_mono_ms() - p->txn_begun_ms;
    int64_t timeout = mcdc_kafka_txn_timeout_ms(p->o.cfg);

    *err = *e;
    p->txn_open = false; /* a fenced or fatal producer cannot abort */
    p->txn_committing = false;
    if ((st == SINK_TXN_FENCED || fenced(e)) && was_open && age >= timeout) {
        LOG_WARN("exactly-once: the transaction of %s stayed open %lld ms, longer than "
                 "kafka.transaction.timeout.ms (%lld ms: the process or the machine was "
                 "paused?), and the broker aborted it: none of its records is visible to "
                 "read_committed consumers; restarting from the committed offsets with a new "
                 "producer",
                 p->name, (long long)age, (long long)timeout);
        metrics_add(p->m, METRICS_TXN_ABORTED, 1);
        if (!p->delivery_failed) {
            p->delivery_failed = true;
            p->delivery_err = *e;
        }
        return pipeline_delivery_failure(p, err);
    }
    if (st == SINK_TXN_FENCED || fenced(e))
        mcdc_error_prefix(err,
                          "another instance holds this task: transactional id %s was fenced by "
                          "a newer producer with the same id; this one stops",
                          p->txn_id);
    else
        mcdc_error_prefix(err, "exactly-once: transactional id %s", p->txn_id);
    return PIPELINE_FATAL;
}

/* Aborts the open transaction (cause: why) and asks for a restart from the
 * last committed offsets: its records are never visible to read_committed
 * consumers, and its changes are read again from MongoDB. */
enum pipeline_status pipeline_txn_abort(struct pipeline *p, const struct mcdc_error *cause,
                                        struct mcdc_error *err)
{
    struct mcdc_error e = MCDC_ERROR_INIT;
    enum sink_txn_status st = sink_txn_abort(p->sink, (int)p->o.cfg->offsets_flush_timeout_ms, &e);

    if (st == SINK_TXN_FENCED || st == SINK_TXN_FATAL)
        return pipeline_txn_failed(p, st, &e, err);
    p->txn_open = false;
    p->txn_committing = false;
    metrics_add(p->m, METRICS_TXN_ABORTED, 1);
    if (st != SINK_TXN_OK) /* the new producer's init_transactions aborts it */
        LOG_WARN("exactly-once: the transaction of %s must be aborted (%s) and cannot be now "
                 "(%s): none of its records is visible to read_committed consumers; the task "
                 "restarts from the last committed offset, which aborts it",
                 p->name, cause->msg, e.msg);
    else
        LOG_WARN("exactly-once: the transaction of %s was aborted (%s): none of its records is "
                 "visible to read_committed consumers; the task restarts from the last "
                 "committed offset and reads those changes again",
                 p->name, cause->msg);
    if (!p->delivery_failed) {
        p->delivery_failed = true;
        p->delivery_err = *cause;
    }
    return pipeline_delivery_failure(p, err);
}

enum pipeline_status pipeline_txn_commit_now(struct pipeline *p, bool with_offset,
                                             struct mcdc_error *err)
{
    struct mcdc_error e = MCDC_ERROR_INIT;
    int64_t t0 = mcdc_clock_mono_ns();
    enum sink_txn_status st;
    bool wrote = false, warned = false, saved;

    p->last_commit_ms = mcdc_clock_mono_ms();
    /* A commit that timed out goes on in the background: it is called again
     * as it is (librdkafka's resumable commit), nothing added to it. */
    if (with_offset && p->txn_pos_dirty && !p->txn_committing) {
        /* The offset record of the newest position handed to the pipeline:
         * every earlier change's records are in this transaction or in a
         * committed one (the store's writer puts it into this one). */
        p->txn_in_commit = true;
        p->txn_status = SINK_TXN_OK;
        saved = offset_store_save(p->store, p->partition, &p->txn_pos, &e);
        p->txn_in_commit = false;
        if (saved) {
            wrote = true;
        } else if (p->txn_status != SINK_TXN_OK) {
            return p->txn_status == SINK_TXN_ABORT ? pipeline_txn_abort(p, &e, err)
                                                   : pipeline_txn_failed(p, p->txn_status, &e, err);
        } else if (!(e.domain == MCDC_ERR_IO && e.code == ERANGE)) {
            *err = e;
            mcdc_error_prefix(err, "cannot store the offsets of %s", p->name);
            return PIPELINE_FATAL;
        } /* else older than the stored one (an ERROR from the store): the
             records commit without it */
        p->txn_pos_dirty = false;
    }
    if (!p->txn_open)
        return PIPELINE_OK;
    for (;;) {
        st = sink_txn_commit(p->sink, (int)p->o.cfg->offsets_flush_timeout_ms, &e);
        if (st == SINK_TXN_OK)
            break;
        if (st == SINK_TXN_ABORT)
            return pipeline_txn_abort(p, &e, err);
        if (st != SINK_TXN_RETRY)
            return pipeline_txn_failed(p, st, &e, err);
        p->txn_committing = true;
        if (pipeline_stopping(p)) {
            *err = e;
            return PIPELINE_STOPPED;
        }
        if (!warned)
            LOG_WARN("exactly-once: the commit of a transaction of %s waits (%s); retrying, "
                     "capture waits meanwhile and nothing is lost",
                     p->name, e.msg);
        warned = true;
    }
    if (warned)
        LOG_INFO("exactly-once: the transaction of %s committed after %lld ms", p->name,
                 (long long)((mcdc_clock_mono_ns() - t0) / 1000000));
    p->txn_open = false;
    p->txn_committing = false;
    p->txn_records = 0;
    p->batch_end = false;
    metrics_add(p->m, METRICS_TXN_COMMITTED, 1);
    metrics_observe_txn_commit_us(p->m, (mcdc_clock_mono_ns() - t0) / 1000);
    if (wrote) {
        stored(p, &p->txn_pos);
        /* Committed, so never taken back: the order gate may go by it. */
        if (p->o.acked != NULL)
            p->o.acked(p->o.ctx, &p->txn_pos);
    }
    return PIPELINE_OK;
}

/* pipeline_service with exactly-once: a failed record aborts the
 * transaction; the boundary (pipeline_txn_due) commits it. */
static enum pipeline_status txn_service(struct pipeline *p, bool force, bool failed,
                                        const struct mcdc_error *ferr, struct mcdc_error *err)
{
    if (p->delivery_failed) {
        if (p->txn_open && !pipeline_too_large(&p->delivery_err))
            return pipeline_txn_abort(p, &p->delivery_err, err);
        return pipeline_delivery_failure(p, err);
    }
    if (failed)
        return pipeline_txn_failed(p, SINK_TXN_FATAL, ferr, err);
    if (!pipeline_txn_due(p, force))
        return PIPELINE_OK;
    return pipeline_txn_commit_now(p, true, err);
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
    if (p->eos) /* the committed position is the transaction's (below) */
        return txn_service(p, force_commit, failed, &ferr, err);
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
        return pipeline_delivery_failure(p, err);
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
