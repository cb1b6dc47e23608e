/*
 * kafka/kafka_conf: every librdkafka client of the daemon gets its
 * configuration here, so the record producer, the offsets store, the signal
 * channel, the notification producer and `mongocdc check` agree on defaults,
 * on the keys that cannot be overridden, on error messages and on logging
 * (design.md §6, style.md §4.8).
 *
 * Each builder returns a new rd_kafka_conf_t (the caller owns it: pass it to
 * rd_kafka_new, or rd_kafka_conf_destroy it) with the log callback set, or
 * NULL with a CONFIG error in *err. Errors about a key of the YAML name its
 * file:line:col and the key as written (`kafka.acks`, `signal.consumer.x`);
 * errors about a value mongocdc sets say `kafka <key>=<value>`; both carry
 * librdkafka's own errstr. Secret values are never printed by these messages
 * (a key from the YAML is shown without its value).
 *
 * Thread: any (no state); librdkafka's own threads call the log callbacks.
 */
#ifndef MCDC_KAFKA_KAFKA_CONF_H
#define MCDC_KAFKA_KAFKA_CONF_H

#include <stdbool.h>

#include <librdkafka/rdkafka.h>

#include "common/error.h"
#include "config/config.h"

/*
 * librdkafka's log callback (rd_kafka_conf_set_log_cb): writes
 * "<client name>: <facility>: <text>" to the project log with component
 * "rdkafka", syslog levels 0-3 as ERROR, 4 WARN, 5-6 INFO, 7 DEBUG.
 */
void mcdc_kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf);

/*
 * As mcdc_kafka_log_cb, with librdkafka's "FAIL" lines (a broker cannot be
 * reached, logged at every retry) at DEBUG: for the clients whose error
 * callback reports an outage once (the signal channel and its relatives).
 */
void mcdc_kafka_log_cb_quiet(const rd_kafka_t *rk, int level, const char *fac, const char *buf);

/*
 * Sets k=v on conf. kv: the YAML entry k comes from (its line and column go
 * in the error, shown as <prefix><k>), or NULL for a value mongocdc sets.
 * Returns false with the CONFIG error described above.
 */
bool mcdc_kafka_set(rd_kafka_conf_t *conf, const struct mcdc_config *cfg, const char *prefix,
                    const char *k, const char *v, const struct mcdc_kv *kv, struct mcdc_error *err);

/*
 * The record producer (the Kafka sink's; `mongocdc check` tests this one).
 * Settings, in this order:
 *   1. mongocdc defaults: client.id "mongocdc-<client_tag>" ("main" when
 *      NULL), enable.idempotence=true, acks=all, queue.buffering.max.kbytes
 *      from sink.queue.max.bytes (default 16 MiB), message.timeout.ms=0 (retry
 *      for ever: a broker outage stalls capture through backpressure instead
 *      of failing records);
 *   2. the `kafka:` map, as-is: any key overrides a default, including
 *      client.id, the queue size and message.timeout.ms;
 *   3. except two that cannot be overridden: enable.idempotence (must stay
 *      true: without it librdkafka's retries can reorder a document's events
 *      and duplicate them, breaking per-key order) and acks (must be all/-1:
 *      a record acknowledged by the leader alone can be lost on failover after
 *      its offset was committed). Setting either otherwise is an error.
 *
 * transactional_id (may be NULL): an exactly-once producer
 * (exactly.once.support): transactional.id set to it, and message.timeout.ms
 * defaults to the producer's transaction.timeout.ms (the kafka: map's, else
 * librdkafka's 60000) instead of 0, since librdkafka requires a
 * transactional producer to give up on a record before its transaction
 * times out (librdkafka CONFIGURATION.md, transactional.id); a record that
 * times out aborts its transaction, which is then read again.
 */
rd_kafka_conf_t *mcdc_kafka_producer_conf(const struct mcdc_config *cfg, const char *client_tag,
                                          const char *transactional_id, struct mcdc_error *err);

/* The kafka: map's transaction.timeout.ms (mcdc_config_kafka_txn_timeout_ms),
 * else librdkafka's default 60000 (unset or not a number), ms. */
int64_t mcdc_kafka_txn_timeout_ms(const struct mcdc_config *cfg);

/*
 * The Kafka offsets store's clients (offsets/store_kafka.c). reader false:
 * the writer, a producer with client.id "mongocdc-offsets-<topic.prefix>",
 * partitioner murmur2_random (Kafka Connect's), allow.auto.create.topics
 * false, the `kafka:` map, then enable.idempotence=true and acks=all forced.
 * reader true: the consumer that loads the topic, with the map less the
 * producer-only keys, enable.partition.eof, client.id
 * "mongocdc-offsets-load". bootstrap (may be NULL) replaces the map's
 * bootstrap.servers and drops its test.mock.num.brokers (the reader of a
 * mock cluster joins the writer's).
 */
rd_kafka_conf_t *mcdc_kafka_store_conf(const struct mcdc_config *cfg, bool reader,
                                       const char *bootstrap, struct mcdc_error *err);

/*
 * A client of the `kafka:` cluster that is neither the record producer nor
 * the offsets store (notifications, `mongocdc signal`): only the keys that say
 * how to reach and authenticate to the cluster (bootstrap.servers, security.*,
 * sasl.*, ssl.*, client.*, socket.*, broker.*, api.version*), quiet log.
 */
rd_kafka_conf_t *mcdc_kafka_client_conf(const struct mcdc_config *cfg, struct mcdc_error *err);

/*
 * The Kafka signal channel's consumer (signals/channels.c; `mongocdc check`
 * tests this one): mcdc_kafka_client_conf, then signal.kafka.bootstrap.servers
 * (when set), group.id signal.kafka.groupId, client.id client_id,
 * enable.auto.commit false, auto.offset.reset earliest, session.timeout.ms
 * 10000, fetch.wait.max.ms 100, then the signal.consumer.* keys as-is.
 */
rd_kafka_conf_t *mcdc_kafka_signal_consumer_conf(const struct mcdc_config *cfg,
                                                 const char *client_id, struct mcdc_error *err);

#endif
