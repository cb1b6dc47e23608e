/*
 * worker/commit: delivery reports and offset commits of a capture task
 * (design.md §7: the committed position advances only over records Kafka
 * acknowledged, in order; debezium-format.md §4.2 for the stored value).
 */
#include "worker/worker_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "capture/resume.h"
#include "common/log.h"
#include "common/xalloc.h"

/* ---- delivery and commits ---- */

/* A record over message.max.bytes (the sink's error says everything). */
bool worker_too_large(const struct mcdc_error *err)
{
    return err->domain == MCDC_ERR_KAFKA && err->code == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
}

/* Sink delivery report, on this task's thread (inside sink_poll/produce/flush). */
void worker_on_delivery(void *opaque, const struct mcdc_error *err, int64_t us,
                        bool dead_lettered, void *ctx)
{
    struct worker *w = ctx;
    if (us >= 0)
        metrics_observe_delivery_us(w->m, us);
    metrics_add(w->m, err == NULL ? METRICS_RECORDS_ACKED : METRICS_RECORDS_FAILED, 1);
    if (err == NULL) {
        if (dead_lettered) {
            /* The dead-letter copy stands for the record (sink_kafka.c). */
            w->dead_lettered++;
            metrics_add(w->m, METRICS_RECORDS_DEAD_LETTERED, 1);
        }
        inflight_ack(w->inf, opaque);
        w->last_ack_ms = worker_now_ms();
        if (w->ack_stalled) {
            w->ack_stalled = false;
            LOG_INFO("Kafka acknowledges records again after %lld ms without one",
                     (long long)(w->last_ack_ms - w->ack_wait_since_ms));
        }
        return;
    }
    /* Never acknowledged: the committed position stays before this record. */
    if (!w->delivery_failed) {
        w->delivery_failed = true;
        w->delivery_err = *err;
    }
}

/* One more delivery failure: in a row with the last one when the stored
 * position has not moved since (worker_backoff counts sink_failures). */
static void count_delivery_failure(struct worker *w)
{
    const char *now = w->stored_json != NULL ? w->stored_json : "";
    if (w->sink_failed_at != NULL && strcmp(w->sink_failed_at, now) == 0) {
        w->sink_failures++;
        return;
    }
    free(w->sink_failed_at);
    w->sink_failed_at = xstrdup(now);
    w->sink_failures = 1;
}

/* The stored position as text for count_delivery_failure, its cluster time
 * taken from the resume token when only the token is known: a snapshot's
 * start position is stored token-only, and read back with the token's time,
 * and both are the same position (malloc'd). */
static char *progress_text(const struct mcdc_position *pos)
{
    struct mcdc_position p;
    uint32_t sec = 0, ord = 0;
    char *text;

    if (pos->sec > 0 || !pos->has_resume_token ||
        !resume_token_time(&pos->resume_token, &sec, &ord))
        return position_to_json(pos);
    position_init(&p);
    position_copy(&p, pos);
    p.sec = (int64_t)sec;
    p.ord = (int64_t)ord;
    text = position_to_json(&p);
    position_clear(&p);
    return text;
}

/* Records waiting longer than this for an acknowledgement: one WARN per episode. */
#define ACK_STALL_WARN_MS 10000

void worker_gate_publish(struct worker *w, const struct mcdc_position *pos)
{
    uint32_t sec = 0, ord = 0;

    if (!w->has_gate)
        return;
    if (pos->sec > 0)
        w->gate.publish(w->gate.ctx, ((uint64_t)pos->sec << 32) | (uint32_t)pos->ord);
    else if (pos->has_resume_token && resume_token_time(&pos->resume_token, &sec, &ord))
        w->gate.publish(w->gate.ctx, ((uint64_t)sec << 32) | ord);
}

/* A WARN when produced records have waited ACK_STALL_WARN_MS without any
 * acknowledgement (a frozen or unreachable broker); worker_on_delivery says INFO
 * when acknowledgements resume. */
static void watch_acks(struct worker *w)
{
    size_t n = sink_in_flight(w->sink);
    int64_t now = worker_now_ms(), since;

    if (n == 0) {
        w->ack_wait_since_ms = 0;
        return;
    }
    if (w->ack_wait_since_ms == 0)
        w->ack_wait_since_ms = now;
    since = w->last_ack_ms > w->ack_wait_since_ms ? w->last_ack_ms : w->ack_wait_since_ms;
    if (!w->ack_stalled && now - since >= ACK_STALL_WARN_MS) {
        w->ack_stalled = true;
        w->ack_wait_since_ms = since;
        LOG_WARN("%zu records have waited %lld ms for acknowledgement by Kafka, none acknowledged "
                 "meanwhile: the broker is unreachable or stalled; still retrying, offsets do not "
                 "advance past them",
                 n, (long long)(now - since));
    }
}

/* Debezium's transaction state in an adopted value (TransactionContext.store):
 * mongocdc keeps no transaction counters in its offsets, so an open
 * transaction's BEGIN and counters start again; said, never silent. */
static void warn_debezium_transaction(const struct mcdc_position *pos)
{
    bson_t *extra;
    bson_iter_t it;

    if (pos->extra_json == NULL ||
        (extra = bson_new_from_json((const uint8_t *)pos->extra_json, -1, NULL)) == NULL)
        return;
    if (bson_iter_init_find(&it, extra, "transaction_id") && BSON_ITER_HOLDS_UTF8(&it))
        LOG_WARN("the adopted offsets hold Debezium's open transaction %s "
                 "(provide.transaction.metadata): mongocdc does not continue its counters; the "
                 "rest of that transaction gets a new BEGIN and orders counted from 1",
                 bson_iter_utf8(&it, NULL));
    bson_destroy(extra);
}

bool worker_load_stored(struct worker *w, bool *found, struct mcdc_error *err)
{
    const char *forms[3];
    size_t nforms = offsets_partition_forms(w->cfg, w->rs, w->merged, w->per_shard, forms);
    struct offset_origin origin = {0};
    char d[128];

    if (!offset_store_load_forms(w->store, forms, nforms, &w->stream_pos, found, &origin, err))
        return false;
    if (*found) {
        char *own = offsets_partition_key(mcdc_config_connector_name(w->cfg),
                                          w->cfg->topic_prefix, worker_partition(w));
        resume_describe_position(&w->stream_pos, d, sizeof d);
        LOG_INFO("stored position: %s%s; adopted from key %s, written by %s", d,
                 w->stream_pos.initsync ? " (an initial snapshot was interrupted)" : "",
                 origin.key, offset_writer_name(origin.writer));
        if (strcmp(own, origin.key) != 0)
            LOG_INFO("positions are stored from now on under %s, the key of "
                     "debezium.compatibility %s",
                     own, w->cfg->dialect == MCDC_DIALECT_1_9 ? "1.9" : "3.x");
        if (origin.writer != OFFSET_WRITER_MONGOCDC)
            warn_debezium_transaction(&w->stream_pos);
        free(own);
    } else {
        LOG_INFO("stored position: none");
    }
    offset_origin_clear(&origin);
    return true;
}

void worker_stall_stored(struct worker *w, const struct mcdc_position *pos)
{
    uint64_t t = offset_position_time(pos);
    int64_t now = worker_now_ms();

    if (t == 0 || t == w->stall_stored_t)
        return;
    if (w->stall_warned)
        LOG_INFO("the stored position moves again after %lld ms",
                 (long long)(now - w->stall_since_ms));
    w->stall_warned = false;
    w->stall_stored_t = t;
    w->stall_since_ms = now;
    metrics_set_offset_stalled(w->m, 0);
}

void worker_stall_check(struct worker *w)
{
    int64_t now = worker_now_ms(), threshold = w->cfg->offsets_stall_threshold_ms, stalled;
    uint64_t read = worker_position_time(&w->stream_pos);

    if (w->stall_since_ms == 0) {
        /* The stored position the task started from. */
        w->stall_since_ms = now;
        if (w->stall_stored_t == 0)
            w->stall_stored_t = read;
        return;
    }
    stalled = now - w->stall_since_ms;
    if (threshold <= 0 || read <= w->stall_stored_t || stalled < threshold) {
        if (!w->stall_warned)
            metrics_set_offset_stalled(w->m, 0);
        return;
    }
    metrics_set_offset_stalled(w->m, stalled);
    if (!w->stall_warned) {
        char a[128];
        w->stall_warned = true;
        resume_describe_position(&w->stream_pos, a, sizeof a);
        LOG_WARN("the stored position has not moved for %lld ms (offsets.stall.threshold.ms "
                 "%lld) while the stream has read on to %s: %zu records wait for "
                 "acknowledgement; a restart now resumes from the old position and produces "
                 "everything since again",
                 (long long)stalled, (long long)threshold, a,
                 w->sink != NULL ? sink_in_flight(w->sink) : (size_t)0);
    }
}

enum phase worker_service(struct worker *w, bool force_commit)
{
    const struct mcdc_position *pos;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool failed;

    sink_poll(w->sink, 0);
    watch_acks(w);
    worker_stall_check(w);
    worker_metrics_service(w, NULL);
    failed = w->delivery_failed || sink_fatal(w->sink, &err);
    /*
     * The acknowledged prefix of the in-flight tracker is popped at every
     * service, not only on the flush timer: entries held until the timer
     * would grow the tracker with every record of the interval (about 1 KiB
     * each; at 200k records/s and the 60 s default, gigabytes). The newest
     * committable position waits in to_commit for the timer. With the order
     * gate, other shards' tasks wait on this position: it is published here.
     */
    pos = inflight_committable(w->inf);
    if (pos != NULL) {
        position_copy(&w->to_commit, pos);
        w->to_commit_dirty = true;
        if (w->has_gate)
            worker_gate_publish(w, pos);
    }
    if (force_commit || failed ||
        worker_now_ms() - w->last_commit_ms >= w->cfg->offsets_flush_interval_ms) {
        w->last_commit_ms = worker_now_ms();
        /*
         * At-least-once: the tracker hands out only a position whose records
         * and every earlier record Kafka has acknowledged, in order. A crash
         * at any instant therefore resumes at or before the first
         * unacknowledged change: some records may be produced twice, none is
         * ever lost. A record that failed is never acknowledged, so the
         * position committed here stays before it.
         */
        pos = w->to_commit_dirty ? &w->to_commit : NULL;
        w->to_commit_dirty = false;
        if (pos != NULL) {
            struct mcdc_error serr = MCDC_ERROR_INIT;
            if (!offset_store_save(w->store, worker_partition(w), pos, &serr)) {
                if (serr.domain == MCDC_ERR_IO && serr.code == ERANGE) {
                    /* Older than the stored position: refused and logged at
                     * ERROR by the store; the stored one stays, capture goes
                     * on and the next newer position is stored. */
                    return PHASE_OK;
                }
                w->err = serr;
                mcdc_error_prefix(&w->err, "cannot store the offsets of %s", w->rs);
                return PHASE_FATAL;
            }
            metrics_offset_stored(w->m);
            free(w->stored_json);
            w->stored_json = progress_text(pos);
            worker_stall_stored(w, pos);
            worker_metrics_service(w, pos);
            if (MCDC_LOG_ENABLED(MCDC_LOG_DEBUG)) {
                char d[128];
                resume_describe_position(pos, d, sizeof d);
                LOG_DEBUG("offsets committed at %s%s", d,
                          pos->initsync ? " (snapshot running)" : "");
            }
        }
    }
    if (w->delivery_failed) {
        w->err = w->delivery_err;
        if (worker_too_large(&w->err))
            return PHASE_FATAL; /* retrying cannot help; the error says what to change
                                   (or errors.deadletterqueue.topic.name could not take it) */
        if (w->err.domain == MCDC_ERR_IO && w->err.code == EPIPE) {
            /* sink.type stdout (or a file path that is a pipe) whose reader
             * has gone: no restart can bring it back. */
            mcdc_error_prefix(&w->err,
                              "the reader of the JSON lines has closed the pipe; records can "
                              "no longer be delivered and the offsets stay before them");
            return PHASE_FATAL;
        }
        /*
         * Anything else Kafka refused (a topic unknown after an outage, a
         * leader change, a timeout) may pass on a second try. Re-producing
         * only the failed record would reorder a document's events, so the
         * task restarts from the offsets just committed, which stay before
         * the failed record: the records after them are produced again, in
         * order (at-least-once), and nothing is skipped. Such restarts are
         * counted against connect.max.attempts while the stored offsets do
         * not move between them (a full disk, a topic that refuses every
         * write), whatever the stream or a redone snapshot read meanwhile.
         */
        count_delivery_failure(w);
        mcdc_error_prefix(&w->err, "a record could not be delivered");
        w->restart_from_offsets = true;
        return PHASE_RETRY;
    }
    if (failed) {
        w->err = err;
        return PHASE_FATAL;
    }
    return PHASE_OK;
}

