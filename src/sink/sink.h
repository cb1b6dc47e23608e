/*
 * sink: delivers records to Kafka (librdkafka) or as JSON lines (file/stdout),
 * design.md §6.
 *
 * One sink per capture task, used only on that task's thread. Kafka: an
 * idempotent producer (acks=all), the `kafka:` map passed through; a bounded
 * queue gives backpressure: sink_produce() waits (polling delivery reports)
 * while the queue is full; nothing is dropped. Delivery reports are served
 * inside sink_poll()/sink_produce()/sink_flush() on the calling thread and
 * call the delivery callback with the opaque given to sink_produce(). The
 * JSON-lines sink writes `{"topic": ..., "key": <key>, "value": <value|null>}`
 * (plus `"headers": {...}` when the record has headers)
 * per record and reports delivery once the line is written (flushed).
 *
 * Thread: worker (the owning capture task).
 */
#ifndef MCDC_SINK_SINK_H
#define MCDC_SINK_SINK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "config/config.h"
#include "event/record.h"

/*
 * Called once per produced record, on the sink's thread, when the record is
 * acknowledged (err NULL) or has failed permanently (err set). opaque is the
 * value passed to sink_produce(). latency_us: the record's produce-to-report
 * latency in microseconds (librdkafka rd_kafka_message_latency), -1 when the
 * sink cannot tell (JSON lines, or librdkafka has no timestamp).
 * dead_lettered: the acknowledged record is the dead-letter copy of a record
 * Kafka refused as too large (errors.deadletterqueue.topic.name;
 * sink_kafka.c); always false for the JSON-lines sinks and for failures.
 */
typedef void (*sink_delivery_cb)(void *opaque, const struct mcdc_error *err, int64_t latency_us,
                                 bool dead_lettered, void *cb_ctx);

struct sink;

/*
 * Creates the sink configured by cfg (borrowed; outlives the sink). client_tag
 * names the task (replica-set name) for client.id ("mongocdc-<tag>") and logs.
 * Kafka: defaults enable.idempotence=true, acks=all, queue.buffering.max.kbytes
 * = sink.queue.max.bytes / 1024, message.timeout.ms=0 (retry for ever), then
 * the kafka: map overrides any of them except enable.idempotence and acks
 * (ordering and at-least-once depend on them; see sink_kafka.c). Returns NULL
 * and fills err on a bad or locked Kafka property (domain CONFIG, message
 * "FILE:LINE:COL: kafka.KEY: ...") or an unopenable file (domain IO).
 */
struct sink *sink_new(const struct mcdc_config *cfg, const char *client_tag, sink_delivery_cb cb,
                      void *cb_ctx, struct mcdc_error *err);

/*
 * As sink_new, for exactly-once delivery (exactly.once.support): the Kafka
 * producer gets transactional.id transactional_id (copied by librdkafka) and
 * the settings of mcdc_kafka_producer_conf for it; the caller then runs
 * sink_txn_init before any record. Only sink.type kafka (config_check
 * refuses the others).
 */
struct sink *sink_new_transactional(const struct mcdc_config *cfg, const char *client_tag,
                                    const char *transactional_id, sink_delivery_cb cb,
                                    void *cb_ctx, struct mcdc_error *err);

/*
 * Exactly-once: the Kafka transaction calls of a transactional sink
 * (librdkafka's transactional API, rdkafka.h "Transactional producer API";
 * Kafka's KIP-98). What each failure asks of the caller:
 */
enum sink_txn_status {
    SINK_TXN_OK = 0,
    SINK_TXN_RETRY,       /* retriable (a timeout, a broker outage): call again */
    SINK_TXN_ABORT,       /* the transaction must be aborted (sink_txn_abort), its changes
                             read again; the producer stays usable */
    SINK_TXN_FENCED,      /* another producer with the same transactional.id took over */
    SINK_TXN_UNSUPPORTED, /* the broker offers no transactions (too old, or disabled) */
    SINK_TXN_FATAL,       /* the producer is unusable; err says why */
};

/* rd_kafka_init_transactions: fences an older producer with the same
 * transactional.id and aborts or completes its open transaction; waits up to
 * timeout_ms. err filled unless SINK_TXN_OK. */
enum sink_txn_status sink_txn_init(struct sink *sink, int timeout_ms, struct mcdc_error *err);
/* rd_kafka_begin_transaction (local, no wait). */
enum sink_txn_status sink_txn_begin(struct sink *sink, struct mcdc_error *err);
/* rd_kafka_commit_transaction: flushes every record of the transaction and
 * commits it, waiting up to timeout_ms; on SINK_TXN_RETRY it may be called
 * again. */
enum sink_txn_status sink_txn_commit(struct sink *sink, int timeout_ms, struct mcdc_error *err);
/* rd_kafka_abort_transaction: purges what is queued and aborts, waiting up to
 * timeout_ms; every record of the transaction is reported failed. */
enum sink_txn_status sink_txn_abort(struct sink *sink, int timeout_ms, struct mcdc_error *err);
/*
 * Produces one record that is not a change (the offsets record of the
 * transaction) to topic with key and value (NUL-terminated; value NULL: a
 * tombstone), both copied, partitioned as Kafka Connect's producer does
 * (murmur2_random of the key). Its delivery does not reach the delivery
 * callback and is not counted in flight; a failure makes the commit
 * abortable. SINK_TXN_OK, or SINK_TXN_FATAL/ABORT with err.
 */
enum sink_txn_status sink_produce_control(struct sink *sink, const char *topic, const char *key,
                                          const char *value, struct mcdc_error *err);

/* Flushes nothing, frees everything; pending records are not waited for. NULL ok. */
void sink_destroy(struct sink *sink);

/*
 * Produces rec (rec->topic borrowed for the call). On success takes ownership
 * of rec->key and rec->value (sets them to NULL). Blocks while the queue is
 * full (backpressure), serving delivery reports; returns false with err if
 * the record can never be delivered (too large: domain KAFKA, code
 * MSG_SIZE_TOO_LARGE, naming topic, key and size; with a dead-letter topic
 * configured such a record is sent there instead and acknowledged through
 * the callback once the copy is) or on a fatal producer
 * error; then rec still owns its buffers. A *stop flag (may be NULL; read
 * with atomic_load, another thread sets it) set to true while waiting makes
 * it return false with a retriable error. The
 * JSON-lines sink buffers the line and may deliver (call the callback) here.
 */
bool sink_produce(struct sink *sink, struct mcdc_record *rec, void *opaque,
                  const atomic_bool *stop, struct mcdc_error *err);

/* Serves delivery reports for up to timeout_ms (JSON lines: writes the
 * buffered lines, no wait). Returns how many delivery reports were served. */
int sink_poll(struct sink *sink, int timeout_ms);

/*
 * Waits up to timeout_ms for every produced record to be acknowledged.
 * Returns false with err (retriable) on timeout.
 */
bool sink_flush(struct sink *sink, int timeout_ms, struct mcdc_error *err);

/* Records produced but not yet reported. */
size_t sink_in_flight(const struct sink *sink);

/* Key + value bytes of the records produced but not yet reported. */
size_t sink_in_flight_bytes(const struct sink *sink);

/* A fatal producer error (librdkafka ERR__FATAL) has occurred: fills err and returns true. */
bool sink_fatal(struct sink *sink, struct mcdc_error *err);

#endif
