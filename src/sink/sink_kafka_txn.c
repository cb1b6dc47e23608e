/*
 * sink/sink_kafka_txn: the transactional calls of the Kafka sink, for
 * exactly-once delivery (exactly.once.support; pipeline/pipeline_txn.c
 * drives them). librdkafka's transactional API (rdkafka.h, "Transactional
 * producer API", and its examples/transactions.c) classifies every error:
 * retriable (call again), abortable (abort the transaction, the producer
 * stays usable), fatal (the producer is unusable). A producer fenced by a
 * newer one with the same transactional.id (Kafka's KIP-98 zombie fencing)
 * surfaces as a fatal error whose cause is PRODUCER_FENCED (or, from older
 * brokers, INVALID_PRODUCER_EPOCH); it gets its own status so the task can
 * say that another instance holds it.
 *
 * Thread: worker (the owning capture task).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "sink/sink_kafka_internal.h"

static bool fenced_code(rd_kafka_resp_err_t code)
{
    return code == RD_KAFKA_RESP_ERR__FENCED || code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
           code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

static bool unsupported_code(rd_kafka_resp_err_t code)
{
    return code == RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE ||
           code == RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION ||
           code == RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED ||
           code == RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED;
}

/* err from e (destroyed here), and what it asks of the caller. */
static enum sink_txn_status classify(struct kafka_sink *ks, rd_kafka_error_t *e, const char *what,
                                     struct mcdc_error *err)
{
    rd_kafka_resp_err_t code = rd_kafka_error_code(e);
    enum sink_txn_status st;
    char why[512];

    mcdc_error_set(err, MCDC_ERR_KAFKA, code, "kafka transaction: %s: %s: %s", what,
                   rd_kafka_err2name(code), rd_kafka_error_string(e));
    if (rd_kafka_error_is_fatal(e)) {
        rd_kafka_resp_err_t cause = rd_kafka_fatal_error(ks->rk, why, sizeof why);
        st = fenced_code(code) || fenced_code(cause) ? SINK_TXN_FENCED
             : unsupported_code(cause) || unsupported_code(code) ? SINK_TXN_UNSUPPORTED
                                                                  : SINK_TXN_FATAL;
        if (cause != RD_KAFKA_RESP_ERR_NO_ERROR && cause != code)
            mcdc_error_set(err, MCDC_ERR_KAFKA, cause, "kafka transaction: %s: %s: %s", what,
                           rd_kafka_err2name(cause), why);
    } else if (rd_kafka_error_txn_requires_abort(e)) {
        /* librdkafka's word first: an epoch bumped by the coordinator (a
         * transaction it timed out, KIP-360) is abortable, not a fencing */
        st = SINK_TXN_ABORT;
    } else if (fenced_code(code)) {
        st = SINK_TXN_FENCED;
    } else if (unsupported_code(code)) {
        st = SINK_TXN_UNSUPPORTED;
    } else if (rd_kafka_error_is_retriable(e) || code == RD_KAFKA_RESP_ERR__TIMED_OUT) {
        st = SINK_TXN_RETRY;
        err->retriable = true;
    } else {
        st = SINK_TXN_FATAL;
    }
    rd_kafka_error_destroy(e);
    return st;
}

static struct kafka_sink *txn_sink(struct sink *sink, struct mcdc_error *err)
{
    struct kafka_sink *ks = sink_kafka_state(sink);
    if (ks == NULL)
        mcdc_error_set(err, MCDC_ERR_INTERNAL, 0, "exactly-once delivery needs the kafka sink");
    return ks;
}

enum sink_txn_status sink_txn_init(struct sink *sink, int timeout_ms, struct mcdc_error *err)
{
    struct kafka_sink *ks = txn_sink(sink, err);
    rd_kafka_error_t *e;

    if (ks == NULL)
        return SINK_TXN_FATAL;
    e = rd_kafka_init_transactions(ks->rk, timeout_ms);
    return e == NULL ? SINK_TXN_OK : classify(ks, e, "init_transactions", err);
}

enum sink_txn_status sink_txn_begin(struct sink *sink, struct mcdc_error *err)
{
    struct kafka_sink *ks = txn_sink(sink, err);
    rd_kafka_error_t *e;

    if (ks == NULL)
        return SINK_TXN_FATAL;
    ks->control_err = RD_KAFKA_RESP_ERR_NO_ERROR;
    e = rd_kafka_begin_transaction(ks->rk);
    return e == NULL ? SINK_TXN_OK : classify(ks, e, "begin_transaction", err);
}

enum sink_txn_status sink_txn_commit(struct sink *sink, int timeout_ms, struct mcdc_error *err)
{
    struct kafka_sink *ks = txn_sink(sink, err);
    rd_kafka_error_t *e;

    if (ks == NULL)
        return SINK_TXN_FATAL;
    e = rd_kafka_commit_transaction(ks->rk, timeout_ms);
    rd_kafka_poll(ks->rk, 0); /* the delivery reports of the last records */
    return e == NULL ? SINK_TXN_OK : classify(ks, e, "commit_transaction", err);
}

enum sink_txn_status sink_txn_abort(struct sink *sink, int timeout_ms, struct mcdc_error *err)
{
    struct kafka_sink *ks = txn_sink(sink, err);
    rd_kafka_error_t *e;

    if (ks == NULL)
        return SINK_TXN_FATAL;
    e = rd_kafka_abort_transaction(ks->rk, timeout_ms);
    rd_kafka_poll(ks->rk, 0); /* the purged records' reports */
    return e == NULL ? SINK_TXN_OK : classify(ks, e, "abort_transaction", err);
}

enum sink_txn_status sink_produce_control(struct sink *sink, const char *topic, const char *key,
                                          const char *value, struct mcdc_error *err)
{
    struct kafka_sink *ks = txn_sink(sink, err);
    rd_kafka_resp_err_t e;

    if (ks == NULL)
        return SINK_TXN_FATAL;
    if (ks->control_rkt == NULL || strcmp(ks->control_topic, topic) != 0) {
        /* Kafka Connect's producer partitions the offsets topic by the Java
         * client's murmur2 of the key bytes, so a key lands where Connect
         * (and the offsets store's reader) looks for it. */
        rd_kafka_topic_conf_t *tc = rd_kafka_topic_conf_new();
        rd_kafka_topic_conf_set_partitioner_cb(tc, rd_kafka_msg_partitioner_murmur2_random);
        if (ks->control_rkt != NULL)
            rd_kafka_topic_destroy(ks->control_rkt);
        free(ks->control_topic);
        ks->control_topic = xstrdup(topic);
        ks->control_rkt = rd_kafka_topic_new(ks->rk, topic, tc);
        if (ks->control_rkt == NULL) {
            e = rd_kafka_last_error();
            rd_kafka_topic_conf_destroy(tc);
            mcdc_error_set(err, MCDC_ERR_KAFKA, e, "topic %s: %s", topic, rd_kafka_err2str(e));
            return SINK_TXN_FATAL;
        }
    }
    for (;;) {
        e = rd_kafka_produce(ks->control_rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY,
                             (void *)value, value != NULL ? strlen(value) : 0, key, strlen(key),
                             &sink_control_marker) == 0
                ? RD_KAFKA_RESP_ERR_NO_ERROR
                : rd_kafka_last_error();
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        rd_kafka_poll(ks->rk, 100); /* backpressure, as for records */
    }
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
        return SINK_TXN_OK;
    mcdc_error_set(err, MCDC_ERR_KAFKA, e, "offsets record to %s: %s", topic, rd_kafka_err2str(e));
    return e == RD_KAFKA_RESP_ERR__FATAL ? SINK_TXN_FATAL : SINK_TXN_ABORT;
}
