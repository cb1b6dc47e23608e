/*
 * pipeline/txn: exactly-once delivery (exactly.once.support), the Kafka
 * transaction of each task (design of Kafka Connect's exactly-once source
 * tasks, KIP-618; librdkafka's transactional API, sink/sink.h).
 *
 * One transactional producer per task, transactional.id
 * "<transactional.id.prefix><name>-<task>" (name: the connector name,
 * mcdc_config_connector_name; task: the replica set or shard), stable across
 * restarts, so that a restarted or second instance of the task fences the
 * old one (init_transactions). A transaction begins at the first record
 * after a commit; the commit step (pipeline_commit.c) produces the offset
 * record of the position that covers exactly the records produced in it
 * (the newest position handed to the pipeline: every earlier change is in
 * this transaction or a committed one) into the same transaction and
 * commits it. Both become visible to read_committed consumers together, or
 * neither: an aborted transaction is followed by a restart of the task from
 * the last committed offset, so its changes are read again from MongoDB.
 *
 * Thread: the owning capture task's.
 */
#include "pipeline/pipeline_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kafka/kafka_conf.h"
#include "metrics/metrics.h"

/* How long one init_transactions call waits before it is retried, ms. */
#define INIT_STEP_MS 10000

/* The store's writer (offsets.h, offset_store_set_writer): the offset record
 * goes into the open transaction. A save outside the commit step (a start
 * position stored before any record) is committed at once, alone. */
static bool write_offset(void *ctx, const char *topic, const char *key, const char *value_json,
                         struct mcdc_error *err)
{
    struct pipeline *p = ctx;
    enum sink_txn_status st;

    if (!pipeline_txn_begin(p, err))
        return false;
    st = sink_produce_control(p->sink, topic, key, value_json, err);
    if (st != SINK_TXN_OK) {
        p->txn_status = st;
        return false;
    }
    if (p->txn_in_commit)
        return true;
    return pipeline_txn_commit_now(p, false, err) == PIPELINE_OK;
}

bool pipeline_txn_start(struct pipeline *p, struct mcdc_error *err)
{
    const struct mcdc_config *cfg = p->o.cfg;
    bool required = cfg->exactly_once == MCDC_EXACTLY_ONCE_REQUIRED;
    int64_t warned = 0;
    size_t n;

    p->eos = false;
    if (cfg->exactly_once == MCDC_EXACTLY_ONCE_DISABLED) {
        p->sink = sink_new(cfg, p->name, pipeline_on_delivery, p, err);
        return p->sink != NULL;
    }
    free(p->txn_id);
    n = strlen(cfg->transactional_id_prefix ? cfg->transactional_id_prefix : "") +
        strlen(mcdc_config_connector_name(cfg)) + strlen(p->name) + 2;
    p->txn_id = xmalloc(n);
    snprintf(p->txn_id, n, "%s%s-%s", cfg->transactional_id_prefix ? cfg->transactional_id_prefix : "",
             mcdc_config_connector_name(cfg), p->name);
    p->sink = sink_new_transactional(cfg, p->name, p->txn_id, pipeline_on_delivery, p, err);
    if (p->sink == NULL)
        return false;
    for (;;) {
        enum sink_txn_status st = sink_txn_init(p->sink, INIT_STEP_MS, err);
        if (st == SINK_TXN_OK)
            break;
        if (st == SINK_TXN_RETRY && !pipeline_stopping(p)) {
            if (mcdc_clock_mono_ms() - warned >= 30000) {
                LOG_WARN("exactly-once: transactional id %s: cannot initialise transactions yet "
                         "(%s); retrying",
                         p->txn_id, err->msg);
                warned = mcdc_clock_mono_ms();
            }
            continue;
        }
        if (st == SINK_TXN_UNSUPPORTED && !required) {
            LOG_WARN("exactly.once.support requested, but the broker does not allow "
                     "transactions (%s): delivering at-least-once",
                     err->msg);
            sink_destroy(p->sink);
            p->sink = sink_new(cfg, p->name, pipeline_on_delivery, p, err);
            return p->sink != NULL;
        }
        if (st == SINK_TXN_RETRY)
            mcdc_error_prefix(err, "stopped while initialising transactions");
        else if (err->code == RD_KAFKA_RESP_ERR_INVALID_TRANSACTION_TIMEOUT)
            mcdc_error_prefix(err, "kafka.transaction.timeout.ms (%lld ms) is above the broker's "
                                   "transaction.max.timeout.ms: lower it",
                              (long long)mcdc_kafka_txn_timeout_ms(cfg));
        else
            mcdc_error_prefix(err, "exactly.once.support %s: transactional id %s",
                              required ? "required" : "requested", p->txn_id);
        sink_destroy(p->sink);
        p->sink = NULL;
        return false;
    }
    p->eos = true;
    LOG_INFO("exactly-once delivery: transactional id %s (transaction.boundary %s)", p->txn_id,
             cfg->txn_boundary == MCDC_TXN_BOUNDARY_POLL ? "poll" : "interval");
    return true;
}

void pipeline_txn_attach(struct pipeline *p)
{
    if (p->eos)
        offset_store_set_writer(p->store, write_offset, p);
}

void pipeline_txn_stop(struct pipeline *p)
{
    struct mcdc_error err = MCDC_ERROR_INIT;

    if (!p->eos || !p->txn_open || p->sink == NULL)
        return;
    /* Nothing of it is visible to read_committed consumers; a later start's
     * init_transactions would abort it too, this only ends it sooner. */
    if (!sink_fatal(p->sink, &err) && sink_txn_abort(p->sink, 5000, &err) != SINK_TXN_OK)
        LOG_DEBUG("exactly-once: abort at stop: %s", err.msg);
    p->txn_open = false;
}

bool pipeline_txn_begin(struct pipeline *p, struct mcdc_error *err)
{
    enum sink_txn_status st;

    if (!p->eos || p->txn_open)
        return true;
    st = sink_txn_begin(p->sink, err);
    if (st != SINK_TXN_OK) {
        p->txn_status = st;
        return false;
    }
    p->txn_open = true;
    p->txn_records = 0;
    p->txn_begun_ms = mcdc_clock_mono_ms();
    return true;
}

void pipeline_txn_reached(struct pipeline *p, const struct mcdc_position *pos)
{
    if (!p->eos || pos == NULL)
        return;
    position_copy(&p->txn_pos, pos);
    p->txn_pos_dirty = true;
}

int64_t pipeline_txn_interval_ms(const struct mcdc_config *cfg)
{
    int64_t half = mcdc_kafka_txn_timeout_ms(cfg) / 2;

    if (cfg->txn_boundary_interval_ms > 0)
        return cfg->txn_boundary_interval_ms;
    /* -1: offsets.flush.interval.ms, as Kafka Connect; never so long that
     * the broker times the transaction out first */
    return cfg->offsets_flush_interval_ms < half ? cfg->offsets_flush_interval_ms : half;
}

bool pipeline_txn_due(const struct pipeline *p, bool force)
{
    const struct mcdc_config *cfg = p->o.cfg;
    int64_t now = mcdc_clock_mono_ms(), interval;

    if (!p->txn_open) /* only the position moved: an offset-only transaction */
        return p->txn_pos_dirty &&
               (force || now - p->last_commit_ms >= cfg->offsets_flush_interval_ms);
    if (force || p->batch_end)
        return true;
    if (cfg->txn_boundary == MCDC_TXN_BOUNDARY_POLL)
        /* Debezium's batch: up to max.batch.size records, or what has come
         * within poll.interval.ms (ChangeEventQueue.poll) */
        return p->txn_records >= (uint64_t)cfg->max_batch_size ||
               now - p->txn_begun_ms >= cfg->poll_interval_ms;
    interval = pipeline_txn_interval_ms(cfg);
    return now - p->txn_begun_ms >= interval;
}

void pipeline_batch_end(struct pipeline *p)
{
    if (p != NULL && p->eos && p->o.cfg->txn_boundary == MCDC_TXN_BOUNDARY_POLL)
        p->batch_end = true;
}

bool pipeline_exactly_once(const struct pipeline *p)
{
    return p != NULL && p->eos;
}

const char *pipeline_transactional_id(const struct pipeline *p)
{
    return p != NULL && p->eos ? p->txn_id : NULL;
}
