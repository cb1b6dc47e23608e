/*
 * config/check_sink: the rules between the sink, the offsets store and
 * exactly-once delivery (config_check() in check.c runs them; same report
 * rules: a conflict is reported at the key the file sets last).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/check_internal.h"

static bool has_brokers(const struct mcdc_config *cfg)
{
    return check_kafka_has(cfg, "bootstrap.servers") || check_kafka_has(cfg, "metadata.broker.list") ||
           check_kafka_has(cfg, "test.mock.num.brokers");
}

void check_sink_and_offsets(struct checker *c)
{
    struct mcdc_config *cfg = c->cfg;
    if (cfg->sink_type == MCDC_SINK_FILE && !cfg->sink_path)
        check_problem(c, "sink.type", "file sink needs sink.path (expected sink.path to be set)");
    /* Only Kafka refuses a record for its size; on the JSON-lines sinks the
     * option would never act, so setting it there is a mistake worth naming. */
    if (cfg->sink_type != MCDC_SINK_KAFKA && cfg->dlq_topic && *cfg->dlq_topic)
        check_conflict(c, "errors.deadletterqueue.topic.name", "sink.type",
                 "a dead-letter topic needs the kafka sink (expected sink.type kafka, or no "
                 "dead-letter topic)",
                 "the file and stdout sinks have no dead-letter topic (expected "
                 "errors.deadletterqueue.topic.name unset)");
    if (cfg->dlq_topic && *cfg->dlq_topic &&
        strspn(cfg->dlq_topic,
               "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
            strlen(cfg->dlq_topic))
        check_problem(c, "errors.deadletterqueue.topic.name",
                "invalid topic name \"%s\" (expected letters, digits, '.', '_' and '-' only)",
                cfg->dlq_topic);
    if (cfg->sink_type == MCDC_SINK_KAFKA && !has_brokers(cfg)) {
        /* sink.type kafka is the default: then the kafka: map is what is
         * incomplete, if there is one. */
        if (!cfg_entry_find(c->e, "sink.type", false) && cfg->kafka.count > 0)
            cfg_report(c->d, cfg->kafka.items[0].line, cfg->kafka.items[0].col, "kafka",
                       "the kafka sink (the default sink.type) needs brokers (expected "
                       "kafka.bootstrap.servers to be set)");
        else
            check_problem(c, "sink.type",
                    "kafka sink needs brokers (expected kafka.bootstrap.servers to be set)");
    }
    if (cfg->offset_storage == MCDC_OFFSETS_FILE && !cfg->offsets_file) {
        if (cfg_entry_find(c->e, "offsets.storage", false))
            check_problem(c, "offsets.storage",
                    "file storage needs offsets.file.path (expected the path of the offset "
                    "file)");
        else
            check_problem(c, "offsets.file.path",
                    "missing: offsets.storage is file (expected the path of the offset file)");
    }
    if (cfg->offset_storage == MCDC_OFFSETS_KAFKA) {
        if (cfg->sink_type != MCDC_SINK_KAFKA)
            check_conflict(c, "offsets.storage", "sink.type",
                     "kafka offset storage needs the kafka sink (expected sink.type kafka)",
                     "offsets.storage kafka needs the kafka sink (expected sink.type kafka)");
        else if (!has_brokers(cfg))
            check_problem(c, "offsets.storage",
                    "kafka offset storage needs brokers (expected kafka.bootstrap.servers to be "
                    "set)");
    }
}

/*
 * exactly.once.support (Kafka Connect KIP-618): the records and the offset
 * record that covers them commit in one Kafka transaction, so it needs the
 * Kafka sink and the offsets in a Kafka topic; each task's transactional.id
 * is set by the daemon (transactional.id.prefix), and librdkafka requires
 * message.timeout.ms <= transaction.timeout.ms for a transactional producer
 * (librdkafka CONFIGURATION.md, transactional.id).
 */
void check_exactly_once(struct checker *c)
{
    struct mcdc_config *cfg = c->cfg;
    const struct cfg_entry *tid = cfg_entry_find(c->e, "transactional.id", true);

    if (tid != NULL && !tid->bad)
        cfg_report(c->d, tid->line, tid->col, "kafka.transactional.id",
                   "the daemon sets one per task, for exactly.once.support (expected "
                   "transactional.id.prefix, or no transactional.id)");
    if (cfg->exactly_once == MCDC_EXACTLY_ONCE_DISABLED) {
        /* Kafka Connect reads these only with exactly-once source support
         * (KIP-618); a file that sets them most likely meant to turn it on. */
        static const char *const keys[] = {"transaction.boundary",
                                           "transaction.boundary.interval.ms",
                                           "transactional.id.prefix"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            const struct cfg_entry *at = cfg_entry_find(c->e, keys[i], false);
            if (at != NULL && !at->bad)
                cfg_add_ignored(cfg, at->line, at->col, keys[i],
                                "has no effect while exactly.once.support is disabled (set "
                                "exactly.once.support to requested or required to use it)");
        }
        return;
    }
    /* Rows committed in one transaction must never be emitted again: an
     * interrupted initial snapshot resumes from its committed progress. */
    const struct cfg_entry *sr = cfg_entry_find(c->e, "snapshot.resumable", false);
    if (sr != NULL && !sr->bad && !cfg->snapshot_resumable)
        check_conflict(c, "snapshot.resumable", "exactly.once.support",
                       "exactly-once delivery resumes an interrupted snapshot after its last "
                       "committed row; redoing it would emit rows twice (expected true, or no "
                       "snapshot.resumable)",
                       "exactly.once.support needs the initial snapshot to resume from its "
                       "committed progress (expected snapshot.resumable true, or unset)");
    cfg->snapshot_resumable = true;
    if (cfg->sink_type != MCDC_SINK_KAFKA)
        check_conflict(c, "exactly.once.support", "sink.type",
                       "exactly-once delivery commits records in Kafka transactions (expected "
                       "sink.type kafka, or exactly.once.support disabled)",
                       "exactly.once.support needs the kafka sink: only Kafka commits records "
                       "and offsets together (expected sink.type kafka)");
    else if (cfg->offset_storage != MCDC_OFFSETS_KAFKA)
        check_conflict(c, "exactly.once.support", "offsets.storage",
                       "exactly-once delivery stores each offset in the transaction of the "
                       "records it covers, so the offsets must be in a Kafka topic (expected "
                       "offsets.storage kafka)",
                       "exactly.once.support needs the offsets in the same Kafka cluster as the "
                       "records (expected offsets.storage kafka)");
    long long tt = (long long)mcdc_config_kafka_txn_timeout_ms(cfg);
    if (tt < 0) {
        const struct cfg_entry *at = cfg_entry_find(c->e, "transaction.timeout.ms", true);
        if (at != NULL && !at->bad)
            cfg_report(c->d, at->line, at->col, "kafka.transaction.timeout.ms",
                       "not a positive number of milliseconds (expected e.g. 60000)");
    }
    for (size_t i = 0; tt > 0 && i < cfg->kafka.count; i++) {
        const struct mcdc_kv *kv = &cfg->kafka.items[i];
        long long v;
        if (strcmp(kv->key, "message.timeout.ms") != 0 && strcmp(kv->key, "delivery.timeout.ms"))
            continue;
        v = strtoll(kv->value, NULL, 10);
        if (v <= 0 || v > tt) {
            char key[64];
            snprintf(key, sizeof key, "kafka.%s", kv->key);
            cfg_report(c->d, kv->line, kv->col, key,
                       "a transactional producer must give up on a record before its "
                       "transaction times out (expected 1 to kafka.transaction.timeout.ms, "
                       "%lld)",
                       tt);
        }
    }
    /* A transaction open longer than the producer's transaction.timeout.ms
     * is aborted by the broker: the boundary must come well before. */
    if (tt > 0 && cfg->txn_boundary == MCDC_TXN_BOUNDARY_INTERVAL &&
        cfg->txn_boundary_interval_ms >= tt)
        check_problem(c, "transaction.boundary.interval.ms",
                      "a transaction open that long is aborted by the broker after "
                      "kafka.transaction.timeout.ms (%lld ms) (expected less than it, at most "
                      "half of it to leave time for the commit)",
                      tt);
    if (tt > 0 && cfg->txn_boundary == MCDC_TXN_BOUNDARY_POLL && cfg->poll_interval_ms >= tt)
        check_problem(c, "poll.interval.ms",
                      "with transaction.boundary poll a transaction may stay open this long, and "
                      "the broker aborts it after kafka.transaction.timeout.ms (%lld ms) "
                      "(expected less than it)",
                      tt);
    if (cfg->txn_boundary == MCDC_TXN_BOUNDARY_INTERVAL && cfg->txn_boundary_interval_ms == 0)
        check_problem(c, "transaction.boundary.interval.ms",
                      "0 would end a transaction after every record (expected a positive number "
                      "of ms, or -1 for offsets.flush.interval.ms)");
}
